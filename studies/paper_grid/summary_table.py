"""Ours ± Monte Carlo standard error (paper) for chosen methods, from a results folder: the summary tables of
results/README.md are this script's output (generated blocks filled by tools/make_readme.py), never typed in.
MC cells: mean coverage ± its standard error; CCC cells: the share of draws passing, with its exact 95 %
(Clopper–Pearson) interval over the n_sims draws.

Usage: python studies/paper_grid/summary_table.py results/severe [--methods PFWCP osPFWCP osPFWGLCP] [--weights estimated]
       [--heterogeneity severe] [--inf]   (--inf: the share of infinite sets instead of the paper's value)
"""
import argparse
import json
import sys
from pathlib import Path

import pandas as pd
from scipy.stats import binomtest

ORDER = ["gaussian", "poisson", "airfoil", "protein", "bike", "concrete", "crime", "star", "cifar10c"]
PAPER = json.loads((Path(__file__).resolve().parents[2] / "pfwcp_nb" / "paper_tables.json").read_text())


def table(df: pd.DataFrame, methods, weights: str, het: str, inf: bool) -> str:
    d = df[(df.weights == weights) & (df.heterogeneity == het)]
    if "n_cal_test" in d:
        d = d[d.n_cal_test == 100]
    ds = [x for x in ORDER if x in set(d.dataset)]
    out = ["| method | guarantee | " + " | ".join(ds) + " |", "|---|---|" + "---:|" * len(ds)]
    for m in methods:
        for g in ("mc", "ccc"):
            key = g.upper()
            cells = []
            for x in ds:
                r = d[(d.method == m) & (d.guarantee == g) & (d.dataset == x)]
                if r.empty:
                    cells.append("–")
                    continue
                r = r.iloc[0]
                prec = 2 if g == "mc" else 1
                if g == "mc":
                    s = f"{100 * r.MC:.2f} ± {100 * r.MC_se:.2f}"
                else:
                    k, n = int(round(r.CCC * r.n_sims)), int(r.n_sims)
                    ci = binomtest(k, n).proportion_ci(0.95, method="exact")
                    s = f"{100 * k / n:.1f} [{100 * ci.low:.1f}, {100 * ci.high:.1f}]"
                if inf:
                    s += f" ({100 * r.inf_frac:.1f} % ∞)"
                else:
                    p = PAPER[g][key].get(m, {}).get(x) if het == "severe" else None
                    s += f" ({p:.{prec}f})" if p is not None else ""
                cells.append(s)
            out.append(f"| {m} | {key} | " + " | ".join(cells) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder")
    p.add_argument("--methods", nargs="+", default=["PFWCP", "osPFWCP", "osPFWGLCP"])
    p.add_argument("--weights", default="estimated")
    p.add_argument("--heterogeneity", default="severe")
    p.add_argument("--inf", action="store_true")
    a = p.parse_args()
    f = Path(a.folder) / "results.csv"
    if not f.exists():
        p.error(f"{f} not found")
    df = pd.read_csv(f)
    df["method"] = df["method"].str.replace("-oracle", "", regex=False)
    print(table(df, a.methods, a.weights, a.heterogeneity, a.inf))
    sys.exit(0)
