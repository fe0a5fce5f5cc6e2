"""The tables that `pfwcp-experiments` prints (the paper's Table 2/3 layout), recomputed from a results folder's CSV.

Usage: python scripts/paper_table.py results/severe [--datasets gaussian poisson] [--guarantee mc ccc]
       [--heterogeneity severe] [--weights estimated]
"""
import argparse
import sys
from pathlib import Path

import pandas as pd

from pfwcp_nb.report import paper_table

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder")
    p.add_argument("--datasets", nargs="+")
    p.add_argument("--guarantee", nargs="+", default=["mc", "ccc"], choices=["mc", "ccc"])
    p.add_argument("--heterogeneity", default="severe")
    p.add_argument("--weights", default="estimated", choices=["estimated", "oracle"])
    a = p.parse_args()
    f = Path(a.folder) / "results.csv"
    if not f.exists():
        p.error(f"{f} not found")
    df = pd.read_csv(f)
    df = df[(df.weights == a.weights) & (df.heterogeneity == a.heterogeneity)]
    if "n_cal_test" in df:
        df = df[df.n_cal_test == 100]
    if a.datasets:
        missing = sorted(set(a.datasets) - set(df.dataset))
        if missing:
            p.error(f"{f} has no {a.weights} rows for {missing}")
        df = df[df.dataset.isin(a.datasets)]
    for g in a.guarantee:
        print(f"{g.upper()}, {a.heterogeneity} heterogeneity\n\n" + paper_table(df, g, datasets=a.datasets) + "\n")
    sys.exit(0)
