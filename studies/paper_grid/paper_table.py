"""The tables that `pfwcp-experiments` prints (the paper's Table 2/3 layout), recomputed from a results folder's CSV.

Usage: python studies/paper_grid/paper_table.py results/severe [--datasets gaussian poisson] [--guarantee mc ccc]
       [--heterogeneity severe] [--weights estimated] [--spread FILE | --no-spread]
The verdicts (colour, bold, ∞) count the spread over trainings of the package's training_spread.csv, as
pfwcp-experiments does for the paper's configuration; the legend follows the tables.
"""
import argparse
import sys
from pathlib import Path

import pandas as pd

from pfwcp_nb.report import load_training_spread, paper_table, verdict_legend

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder")
    p.add_argument("--datasets", nargs="+")
    p.add_argument("--guarantee", nargs="+", default=["mc", "ccc"], choices=["mc", "ccc"])
    p.add_argument("--heterogeneity", default="severe")
    p.add_argument("--weights", default="estimated", choices=["estimated", "oracle"])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--spread", default=None, help="a training_spread.csv (default: the package's)")
    g.add_argument("--no-spread", action="store_true", help="count the Monte Carlo error alone")
    a = p.parse_args()
    if a.spread is not None and not Path(a.spread).is_file():
        p.error(f"argument --spread: {a.spread!r} is not a file")
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
    spread = None if a.no_spread else load_training_spread() if a.spread is None else \
        pd.read_csv(a.spread).fillna({"versus": ""})
    for g in a.guarantee:
        print(f"{g.upper()}, {a.heterogeneity} heterogeneity\n\n" + paper_table(df, g, datasets=a.datasets, spread=spread)
              + "\n")
    print(verdict_legend(spread))
    sys.exit(0)
