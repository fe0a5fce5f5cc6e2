"""The tables that `pfwcp-experiments` prints (the paper's Table 2/3 layout), recomputed from a results folder's CSV.

Usage: python studies/paper_grid/paper_table.py results/severe [--datasets gaussian poisson] [--guarantee mc ccc]
       [--heterogeneity severe] [--weights estimated] [--spread FILE | --no-spread] [--trainings FILE] [--counts]
The verdicts (colour, bold, ∞) count the spread over trainings of the package's training_spread.csv, as
pfwcp-experiments does for the paper's configuration; the legend follows the tables. With --trainings (rows of
several trainings with a model_seed column, e.g. results/training_variability/all_runs.csv), every cell those
trainings cover is their mean (`reproduce.with_means`, its uncertainty the spread / sqrt(n)); † marks the cells of
one training. Under each table: how many validity colours fall short and how many are undecided (--counts: those
lines only).
"""
import argparse
import sys
from pathlib import Path

import pandas as pd

from pfwcp_nb.report import load_training_spread, paper_table, table_values, verdict_legend, verdict_summary
from pfwcp_nb.reproduce import with_means


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
    p.add_argument("--trainings", default=None, help="rows of several trainings (column model_seed): their mean")
    p.add_argument("--counts", action="store_true", help="print how the colours came out, not the tables")
    a = p.parse_args()
    for name in ("spread", "trainings"):
        if getattr(a, name) is not None and not Path(getattr(a, name)).is_file():
            p.error(f"argument --{name}: {getattr(a, name)!r} is not a file")
    f = Path(a.folder) / "results.csv"
    if not f.exists():
        p.error(f"{f} not found")
    keep = lambda d: d[(d.weights == a.weights) & (d.heterogeneity == a.heterogeneity) &
                       (d.n_cal_test == 100 if "n_cal_test" in d else True)]
    df = keep(pd.read_csv(f))
    if a.trainings:
        df = with_means(df, keep(pd.read_csv(a.trainings)))
    if a.datasets:
        missing = sorted(set(a.datasets) - set(df.dataset))
        if missing:
            p.error(f"{f} has no {a.weights} rows for {missing}")
        df = df[df.dataset.isin(a.datasets)]
    spread = None if a.no_spread else load_training_spread() if a.spread is None else \
        pd.read_csv(a.spread).fillna({"versus": ""})
    for g in a.guarantee:
        if a.counts:
            print(verdict_summary(df, g, spread=spread))
            continue
        print(f"{g.upper()}, {a.heterogeneity} heterogeneity; values: {table_values(df[df.guarantee == g])}\n\n"
              + paper_table(df, g, datasets=a.datasets, spread=spread)
              + "\n\n" + verdict_summary(df, g, spread=spread) + "\n")
    if not a.counts:
        print(verdict_legend(spread))
    sys.exit(0)
