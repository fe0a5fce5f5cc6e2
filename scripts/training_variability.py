"""Collect the training-variability runs (results/training_variability/run.sh) and write, into OUT:
all_runs.csv (every training's rows), variability.csv (`reproduce.training_variability`), variability_<mc|ccc>.md
(`report.variability_table`), and the paper comparisons of the stored grid counting the spread over trainings:
compare_<mc|ccc>_severe_with_training.<csv|md> (`report.compare_with_paper(..., variability=)`).
Usage: python scripts/training_variability.py OUT [--stored results/severe/results.csv]"""
import argparse
import sys
from pathlib import Path

import pandas as pd

from pfwcp_nb.report import comparison_markdown, compare_with_paper, variability_table, verdict_changes
from pfwcp_nb.reproduce import training_variability


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="the folder holding runs/<datasets>/model_seed_<m>/results.csv")
    p.add_argument("--stored", default="results/severe/results.csv", help="the grid whose paper comparison to redo")
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
    cmd = "\n\nProduced by: `python scripts/training_variability.py " + " ".join(sys.argv[1:]) + "`\n"
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
    print(f"{len(files)} runs; datasets with >= 2 trainings: {sorted(tv.dataset.unique())}")


if __name__ == "__main__":
    main()
