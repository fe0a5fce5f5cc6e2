"""How many table verdicts (colour, bold, ∞) flip between two runs of the same cells, printed as point verdicts (z = 0,
no spread) and with their uncertainty (`report.table_verdicts`, z = 2): a flip is *unmarked* when both runs print a
decided verdict and the two differ; a verdict printed undecided (⬜, italic, ∞?) in either run is marked.

Usage: python studies/paper_grid/verdict_flips.py A/results.csv B/results.csv   (two runs, e.g. two machines or model seeds)
       python studies/paper_grid/verdict_flips.py --trainings results/training_variability/all_runs.csv   (every pair of trainings)
       python studies/paper_grid/verdict_flips.py --trainings FILE --splits   (every split of the trainings into two
           disjoint halves, each half's table the mean over its trainings: two machines' tables of means)
       [--spread FILE | --no-spread] [--z 2] [--summary]   (--summary: the totals over the pairs only)
"""
import argparse
import itertools
import sys
from pathlib import Path

import pandas as pd

from pfwcp_nb.metrics import GUARANTEES, Z_VERDICT
from pfwcp_nb.report import load_training_spread, table_verdicts
from pfwcp_nb.reproduce import mean_over_trainings

KINDS = ("colour", "bold", "∞")


def _states(df: pd.DataFrame, spread, z: float) -> dict:
    "(kind, guarantee, dataset, method or metric) -> the printed verdict, or None when printed undecided."
    out = {}
    for g in GUARANTEES:
        d = df[df.guarantee == g]
        if d.empty:
            continue
        v = table_verdicts(d, g, spread=spread, z=z)
        for r in v[v.metric == v.metric.iloc[0]].itertuples():
            out[("colour", g, r.dataset, r.method)] = None if r.colour == "undecided" else r.colour
        for r in v[v.metric == "Eff"].itertuples():
            out[("∞", g, r.dataset, r.method)] = None if r.inf_undecided else bool(r.row.inf_frac > 0)
        for (x, m), row in v.groupby(["dataset", "metric"]):
            bold = row[row.best == "bold"].method.tolist()
            out[("bold", g, x, m)] = bold[0] if bold else (None if (row.best == "tie").any() else "none")
    return out


def flips(a: pd.DataFrame, b: pd.DataFrame, spread, z: float) -> dict:
    "kind -> (verdicts compared, flips of the point verdicts, unmarked flips at z, verdicts undecided in a or b at z)."
    p0, q0, pz, qz = _states(a, None, 0.0), _states(b, None, 0.0), _states(a, spread, z), _states(b, spread, z)
    keys = sorted(set(pz) & set(qz))
    return {k: (sum(1 for c in keys if c[0] == k),
                sum(1 for c in keys if c[0] == k and p0[c] != q0[c]),
                sum(1 for c in keys if c[0] == k and pz[c] is not None and qz[c] is not None and pz[c] != qz[c]),
                sum(1 for c in keys if c[0] == k and (pz[c] is None or qz[c] is None))) for k in KINDS}


def report(rows: list[tuple[str, dict]], z: float, summary: bool = False) -> str:
    out = [f"| runs compared | verdict | compared | flips as point verdicts | unmarked flips (z = {z:g}) | "
           "undecided in either |", "|---|---|---:|---:|---:|---:|"]
    tot = {k: [0, 0, 0, 0] for k in KINDS}
    for name, f in rows:
        for k in KINDS:
            if not summary:
                out.append(f"| {name} | {k} | " + " | ".join(str(x) for x in f[k]) + " |")
            tot[k] = [s + x for s, x in zip(tot[k], f[k])]
    if len(rows) > 1 or summary:
        out += [f"| all {len(rows)} pairs | {k} | " + " | ".join(str(x) for x in tot[k]) + " |" for k in KINDS]
    return "\n".join(out)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="*", help="two results.csv files")
    p.add_argument("--trainings", default=None, help="rows of several trainings (column model_seed): every pair")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--spread", default=None, help="a training_spread.csv (default: the package's)")
    g.add_argument("--no-spread", action="store_true", help="count the Monte Carlo error alone")
    p.add_argument("--summary", action="store_true", help="print the totals over the pairs only")
    p.add_argument("--splits", action="store_true", help="with --trainings: the means of two disjoint halves")
    p.add_argument("--z", type=float, default=Z_VERDICT, help=f"half-width in combined uncertainties (default {Z_VERDICT:g})")
    a = p.parse_args()
    if (a.trainings is None) == (len(a.results) != 2):
        p.error("give two results.csv files, or --trainings FILE")
    if a.splits and a.trainings is None:
        p.error("--splits needs --trainings FILE")
    for f in a.results + ([a.trainings] if a.trainings else []) + ([a.spread] if a.spread else []):
        if not Path(f).is_file():
            p.error(f"{f!r} is not a file")
    if not a.z > 0:
        p.error(f"argument --z: must be > 0, got {a.z}")
    spread = None if a.no_spread else load_training_spread() if a.spread is None else \
        pd.read_csv(a.spread).fillna({"versus": ""})
    keep = lambda d: d[(d.weights == "estimated") & (d.heterogeneity == "severe")]
    if a.trainings:
        runs = keep(pd.read_csv(a.trainings))
        seeds = sorted(runs.model_seed.unique())
        if a.splits:
            half = [(set(s), set(seeds) - set(s)) for s in itertools.combinations(seeds, len(seeds) // 2)]
            mean = lambda s: mean_over_trainings(runs[runs.model_seed.isin(s)])
            rows = [(f"means of model seeds {sorted(s)} / {sorted(t)}", flips(mean(s), mean(t), spread, a.z))
                    for s, t in half]
        else:
            rows = [(f"model seeds {s} / {t}", flips(runs[runs.model_seed == s], runs[runs.model_seed == t], spread, a.z))
                    for s, t in itertools.combinations(seeds, 2)]
    else:
        x, y = (keep(pd.read_csv(f)) for f in a.results)
        common = set(zip(x.dataset, x.method)) & set(zip(y.dataset, y.method))
        x, y = (d[[c in common for c in zip(d.dataset, d.method)]] for d in (x, y))
        rows = [(" / ".join(a.results), flips(x, y, spread, a.z))]
    print(report(rows, a.z, a.summary))
    sys.exit(0)
