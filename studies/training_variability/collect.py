"""Collect the training-variability runs (studies/training_variability/run.sh) and write, into OUT:
all_runs.csv (every training's rows), variability.csv (`reproduce.training_variability`), variability_<mc|ccc>.md
(`report.variability_table`), the paper comparisons of the stored grid counting the spread over trainings:
compare_<mc|ccc>_severe_with_training.<csv|md> (`report.compare_with_paper(..., variability=)`), and summary.md
(PFWCP per dataset; the comparisons whose verdict changes; machines/drift.csv when present), and, from the runs'
recommended/ subfolders (PFWCP with --select finite-first --gamma auto on the same trainings and draws, studies/recommended/),
variability_recommended.csv and its section of summary.md; and the spread of every metric that the tables' verdicts
read (`reproduce.training_spread`), to pfwcp_nb/training_spread.csv, which ships with the package.
Usage: python studies/training_variability/collect.py OUT [--stored results/severe/results.csv] [--spread pfwcp_nb/training_spread.csv]"""
import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from pfwcp_nb.report import (PAPER_DATASET_ORDER, comparison_markdown, compare_with_paper, variability_table,
                             verdict_changes)
from pfwcp_nb.reproduce import training_spread, training_variability


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="the folder holding runs/<datasets>/model_seed_<m>/results.csv")
    p.add_argument("--stored", default="results/severe/results.csv", help="the grid whose paper comparison to redo")
    p.add_argument("--spread", default="pfwcp_nb/training_spread.csv",
                   help="where to write the spread of every metric (the package's copy, read by the tables)")
    a = p.parse_args()
    out = Path(a.out)
    files = sorted(out.glob("runs/*/model_seed_*/results.csv"))
    if not files:
        p.error(f"no runs/*/model_seed_*/results.csv under {out}")
    runs = pd.concat([pd.read_csv(f) for f in files], ignore_index=True)
    runs.to_csv(out / "all_runs.csv", index=False)
    n = runs.groupby(["dataset"]).model_seed.nunique()
    runs = runs[runs.dataset.isin(n[n >= 2].index)]          # datasets with at least two trainings so far
    tv = training_variability(runs)
    tv.to_csv(out / "variability.csv", index=False)
    training_spread(runs).to_csv(a.spread, index=False, float_format="%.6g")
    cmd = "\n\nProduced by: `python studies/training_variability/collect.py " + " ".join(sys.argv[1:]) + "`\n"
    for g in ("mc", "ccc"):
        if (tv.guarantee == g).any():
            (out / f"variability_{g}.md").write_text(f"# Spread over trainings, {g.upper()}, severe, estimated weights "
                                                      f"({tv.n_sims.iloc[0]} draws × {tv.n_test.iloc[0]} test points)"
                                                      f"\n\n" + variability_table(tv, g) + cmd)
    stored = pd.read_csv(a.stored)
    stored = stored[stored.n_sims == stored.n_sims.max()]
    for g in ("mc", "ccc"):
        cmp = compare_with_paper(stored, g, variability=tv)
        cmp.to_csv(out / f"compare_{g}_severe_with_training.csv", index=False)
        (out / f"compare_{g}_severe_with_training.md").write_text(
            f"# {a.stored} against the paper's Table {2 if g == 'mc' else 3}, counting the spread over trainings\n\n"
            + comparison_markdown(cmp) + cmd)
        ch = verdict_changes(cmp)
        print(f"{g}: {len(ch)} comparisons change verdict:", ", ".join(f"{r.method}/{r.dataset}" for r in ch.itertuples()))
    rec_files = sorted(out.glob("runs/*/model_seed_*/recommended/results.csv"))
    rec = pd.concat([pd.read_csv(f) for f in rec_files], ignore_index=True) if rec_files else pd.DataFrame()
    if len(rec):
        n = rec.groupby("dataset").model_seed.nunique()
        rec = training_variability(rec[rec.dataset.isin(n[n >= 2].index)])
        rec.to_csv(out / "variability_recommended.csv", index=False)
    (out / "summary.md").write_text(summary(tv, out, stored) + recommended_summary(tv, rec))
    print(f"{len(files)} runs; datasets with >= 2 trainings: {sorted(tv.dataset.unique())}")


def summary(tv: pd.DataFrame, out: Path, stored: pd.DataFrame) -> str:
    "PFWCP per dataset (spread over trainings next to the Monte Carlo error), verdict changes, machine drift."
    f = lambda x: f"{100 * x:.2f}"
    lines = ["# Training variability: summary", "",
             f"PFWCP, severe heterogeneity, estimated weights, {tv.n_sims.iloc[0]} draws × {tv.n_test.iloc[0]} test points "
             "per training, the same draws for every training; CP (whose MC and CCC do not depend on the model "
             "in expectation) as the yardstick of what the shared draws alone let move. In % points.", "",
             "| dataset | trainings | PFWCP MC: mean | s.d. over trainings | MC s.e. | PFWCP CCC: mean | s.d. over "
             "trainings | MC s.e. | CCC ≥ 90 % in | CP MC s.d. | CP CCC s.d. |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    t = tv.set_index(["dataset", "method", "guarantee"])
    for ds in [d for d in PAPER_DATASET_ORDER if (d, "PFWCP", "mc") in t.index]:
        mc, cc = t.loc[(ds, "PFWCP", "mc")], t.loc[(ds, "PFWCP", "ccc")]
        cp_mc, cp_cc = t.loc[(ds, "CP", "mc")], t.loc[(ds, "CP", "ccc")]
        lines.append(f"| {ds} | {mc.n_trainings} | {f(mc['mean'])} | {f(mc.train_sd)} | {f(mc.mc_se)} | "
                     f"{f(cc['mean'])} | {f(cc.train_sd)} | {f(cc.mc_se)} | {cc.n_meet} of {cc.n_trainings} | "
                     f"{f(cp_mc.train_sd)} | {f(cp_cc.train_sd)} |")
    lines += ["", "Comparisons of `severe/results.csv` (500 × 500, one training) with the paper whose verdict changes "
              "once the spread over trainings is counted (|z| > 2: differs; z = (ours − paper) / s.e., then "
              "/ sqrt(s.e.² + s.d.²)):", "",
              "| method | dataset | guarantee | ours | MC s.e. | training s.d. | paper | z | z with training |",
              "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    n_all = 0
    for g in ("mc", "ccc"):
        cmp = compare_with_paper(stored, g, variability=tv)
        n_all += int((np.isfinite(cmp.z_total) & np.isfinite(cmp.z)).sum())
        for r in verdict_changes(cmp).itertuples():
            lines.append(f"| {r.method} | {r.dataset} | {g} | {r.ours:.2f} | {r.ours_se:.2f} | {r.train_sd:.2f} | "
                         f"{r.paper:.2f} | {r.z:+.1f} | {r.z_total:+.1f} |")
    lines += ["", f"(out of {n_all} comparisons with a training s.d.)"]
    drift = out / "machines" / "drift.csv"
    if drift.exists():
        d = pd.read_csv(drift)
        lines += ["", "Trained models on emulated machines (`machines/drift.csv`): the largest change of the predictor's "
                  "output on 1100 fixed points, relative RMS change (RMS of the change / RMS of the residuals), and "
                  "of the pairwise log-ratios (float32 only); 'base, model seed 1' is another training on this "
                  "machine, the yardstick.", "",
                  "| dataset | epochs | dtype | machine | predictor max abs | predictor rel. RMS | log-ratio max abs | "
                  "identical |", "|---|---:|---|---|---:|---:|---:|---|"]
        for r in d.itertuples():
            lr = getattr(r, "log_ratio_max_abs", np.nan)
            lines.append(f"| {r.dataset} | {r.epochs} | {r.dtype} | {r.machine} | {r.pred_max_abs:.2e} | "
                         f"{r.pred_rms_rel:.2e} | {'–' if not np.isfinite(lr) else f'{lr:.2e}'} | "
                         f"{'yes' if r.identical else 'no'} |")
    return "\n".join(lines) + "\n"


def recommended_summary(tv: pd.DataFrame, rec: pd.DataFrame) -> str:
    "PFWCP's recommended configuration next to the paper's, per dataset: mean, spread over trainings, verdicts."
    if not len(rec):
        return ""
    f = lambda x: f"{100 * x:.2f}"
    t, r = tv.set_index(["dataset", "method", "guarantee"]), rec.set_index(["dataset", "method", "guarantee"])
    lines = ["", "PFWCP in the recommended configuration (`--select finite-first --gamma auto`, `studies/recommended/`) on the same "
             "trainings and draws (`variability_recommended.csv`), next to the paper's configuration above. "
             "'≥ target in' counts the trainings whose estimate reaches 90 %; a verdict that holds in every training "
             "survives the training variability.", "",
             "| dataset | trainings | MC: paper | recommended | s.d. over trainings | MC ≥ 90 % in: paper / recommended | "
             "CCC: paper | recommended | s.d. over trainings | CCC ≥ 90 % in: paper / recommended |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for ds in [d for d in PAPER_DATASET_ORDER if (d, "PFWCP", "mc") in r.index and (d, "PFWCP", "mc") in t.index]:
        pm, pc, rm, rc = (t.loc[(ds, "PFWCP", "mc")], t.loc[(ds, "PFWCP", "ccc")], r.loc[(ds, "PFWCP", "mc")],
                          r.loc[(ds, "PFWCP", "ccc")])
        lines.append(f"| {ds} | {rm.n_trainings} | {f(pm['mean'])} | {f(rm['mean'])} | {f(rm.train_sd)} | "
                     f"{pm.n_meet} of {pm.n_trainings} / {rm.n_meet} of {rm.n_trainings} | {f(pc['mean'])} | "
                     f"{f(rc['mean'])} | {f(rc.train_sd)} | {pc.n_meet} of {pc.n_trainings} / {rc.n_meet} of "
                     f"{rc.n_trainings} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
