"""Can a real dataset's pool give an agent n_ratio covariates? The agents of the real datasets resample a fixed pool
with replacement (a tilted law over its rows; a natural federation: its group's rows, uniformly), so any number can be
drawn; what matters is how many *distinct* rows they hold. Per dataset (severe, seed 0, K = 11; natural federations:
their groups), per agent: the rows its law can reach, the Kish n_eff of its sampling probabilities (1 / sum p_i^2), and
the expected number of distinct rows among n draws (sum_i 1 - (1 - p_i)^n), for n = 50, 200, 1000.

    python studies/value/pools.py --out results/value/pools.csv      # then --table results/value/pools.csv
"""
import argparse

import numpy as np
import pandas as pd

from pfwcp_nb.data import DATASET_SPECS, NATURAL_DATASETS, make_federation

SIZES = (50, 200, 1000)


def agent_laws(name):
    "The sampling probabilities of every agent over the pool rows."
    fed = make_federation(name) if name in NATURAL_DATASETS else make_federation(name, "severe", K=11, seed=0)
    if fed.shift["kind"] == "tilting":
        return [fed.tilting_probabilities(k) for k in range(fed.K)]
    N = len(fed.pool[0])
    return [np.bincount(r, minlength=N) / len(r) for r in fed.shift["rows"]]


def pool_rows(names):
    rows = []
    for name in names:
        for k, p in enumerate(agent_laws(name)):
            row = dict(dataset=name, agent=k, pool=len(p), support=int((p > 0).sum()), n_eff=1 / np.sum(p ** 2))
            row.update({f"distinct_{n}": float(np.sum(1 - (1 - p) ** n)) for n in SIZES})
            rows.append(row)
    return pd.DataFrame(rows)


def table(df):
    "Per dataset: pool size, the agents' n_eff (min / median) and distinct rows among n draws (min / median)."
    out = ["| dataset | pool rows | agents | n_eff of an agent's law, min / median | "
           + " | ".join(f"distinct rows in {n} draws, min / median" for n in SIZES) + " |", "|---|---|---|---|" + "---|" * len(SIZES)]
    for name, g in df.groupby("dataset", sort=False):
        cells = [f"{g[f'distinct_{n}'].min():.0f} / {g[f'distinct_{n}'].median():.0f}" for n in SIZES]
        out.append(f"| {name} | {g.pool.iloc[0]} | {len(g)} | {g.n_eff.min():.0f} / {g.n_eff.median():.0f} | "
                   + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=None, help="default: every real tabular dataset and natural federation")
    ap.add_argument("--out", default=None, help="per-agent CSV to write")
    ap.add_argument("--table", default=None, metavar="POOLS_CSV", help="print the README's table of this CSV")
    a = ap.parse_args(argv)
    if a.table:
        print(table(pd.read_csv(a.table)))
        return
    if not a.out:
        ap.error("--out POOLS_CSV (or --table POOLS_CSV)")
    names = a.datasets or [n for n, s in DATASET_SPECS.items() if s.shift in ("tilting", "groups")]
    bad = [n for n in names if DATASET_SPECS.get(n) is None or DATASET_SPECS[n].shift not in ("tilting", "groups")]
    if bad:
        ap.error(f"--datasets: {bad} are not real tabular datasets or natural federations")
    pool_rows(names).to_csv(a.out, index=False)


if __name__ == "__main__":
    main()
