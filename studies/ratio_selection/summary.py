"""Summary of `studies/ratio_selection/run.py` and of the PFWCP runs with `--ratio-model select`.

Writes OUT/summary.md (and its tables as OUT/cells.csv, OUT/overall.csv, OUT/pfwcp.csv): per (dataset, heterogeneity) the chosen candidate, the median over agents and draws of the
n_eff ratio, Spearman and log-ratio RMSE against the oracle for the paper's and the selected ratio models, and, where
OUT/pfwcp_<level>/results.csv exists, PFWCP's MC / CCC / infinite share with the selected ratios next to the paper's
ratios and the oracle weights on the same draws (results/<level>/results.csv, 500 x 500).

usage: python studies/ratio_selection/summary.py OUT [--results results]
"""
import argparse
from pathlib import Path

import pandas as pd


def _md(df: pd.DataFrame) -> str:
    fmt = lambda v: f"{v:.3f}" if isinstance(v, float) else str(v)
    return "\n".join(["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
                     + ["| " + " | ".join(fmt(v) for v in r) + " |" for r in df.itertuples(index=False)]) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(prog="ratio_selection_summary.py")
    p.add_argument("out"); p.add_argument("--results", default="results")
    a = p.parse_args(argv)
    out, res = Path(a.out), Path(a.results)
    q, s = pd.read_csv(out / "quality.csv"), pd.read_csv(out / "selection.csv")
    med = q.groupby(["dataset", "heterogeneity", "ratio_model"], sort=False)[["n_eff_ratio", "spearman", "log_rmse"]].median()
    med = med.unstack("ratio_model")
    med.columns = [f"{m}_{r}" for m, r in med.columns]
    chosen = s[s.chosen].set_index(["dataset", "heterogeneity"])[["candidate"]]
    t1 = chosen.join(med).reset_index()
    t1 = t1[["dataset", "heterogeneity", "candidate"] + [f"{m}_{r}" for m in ("n_eff_ratio", "spearman", "log_rmse")
                                                         for r in ("paper", "select")]]
    text = ["# Ratio models chosen by data: quality against the oracle\n",
            "Median over the ten agents k >= 2 and 5 calibration draws of 100 points per agent (`quality.csv`); the",
            "chosen candidate of `density_ratio.ratio_candidates` (`selection.csv`: every candidate's pooled held-out",
            "log-loss). Commands: `commands.txt`.\n", _md(t1)]
    overall = q.groupby("ratio_model")[["n_eff_ratio", "spearman", "log_rmse"]].median()
    overall.reset_index().to_csv(out / "overall.csv", index=False)
    t1.to_csv(out / "cells.csv", index=False)
    text += ["\nAll cells together (median over cells, agents and draws):\n", _md(overall.reset_index())]
    rows = []
    for lv in ("severe", "moderate", "mild"):
        f = out / f"pfwcp_{lv}" / "results.csv"
        if not f.exists():
            continue
        sel, base = pd.read_csv(f), pd.read_csv(res / lv / "results.csv")
        for _, r in sel[sel.method == "PFWCP"].iterrows():
            b = base[(base.dataset == r.dataset) & (base.guarantee == r.guarantee)]
            pick = lambda m, col: float(b[b.method == m][col].iloc[0])
            col = "MC" if r.guarantee == "mc" else "CCC"
            rows.append(dict(dataset=r.dataset, heterogeneity=lv, guarantee=r.guarantee,
                             paper=pick("PFWCP", col), select=float(r[col]), oracle=pick("PFWCP-oracle", col),
                             se_select=float(r[f"{col}_se"]), inf_paper=pick("PFWCP", "inf_frac"),
                             inf_select=float(r.inf_frac), inf_oracle=pick("PFWCP-oracle", "inf_frac"),
                             Eff_finite_paper=pick("PFWCP", "Eff_finite"), Eff_finite_select=float(r.Eff_finite),
                             Eff_finite_oracle=pick("PFWCP-oracle", "Eff_finite")))
    if rows:
        pd.DataFrame(rows).to_csv(out / "pfwcp.csv", index=False)
        text += ["\n# PFWCP with the selected ratio models (500 x 500, same draws and predictor as results/<level>/)\n",
                 "Coverage column: MC for guarantee mc, the CCC criterion for ccc; `inf_*`: infinite share.\n",
                 _md(pd.DataFrame(rows))]
    (out / "summary.md").write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    main()
