"""Split CP's coverage law against the paper's CP rows: which order statistic (rank r of n = 100) do they fit?

Split CP thresholds at the r-th smallest of n calibration scores; its coverage is C ~ Beta(r, n + 1 - r), and a
draw passes the CCC criterion when its empirical coverage on n_test test points is >= 1 - alpha, i.e. with
probability E[P(Bin(n_test, C) >= ceil((1 - alpha) n_test))]. This prints, per rank, the expected MC and CCC, the
rank that `procedure.ccc_alpha` (the exact Beta adjustment) gives, and the CP rows of the paper (Tables 2/3,
pfwcp_nb/paper_tables.json) and of a results folder. Usage: python studies/paper_grid/cp_rank_check.py [results/severe]
"""
import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from pfwcp_nb.procedure import ccc_alpha

ROOT = Path(__file__).resolve().parents[2]


def expected_ccc(r: int, n: int, n_test: int, alpha: float) -> float:
    "E over C ~ Beta(r, n+1-r) of P(Bin(n_test, C) >= ceil((1-alpha) n_test)) (Beta-binomial tail)."
    k = math.ceil((1 - alpha) * n_test - 1e-9)
    return float(stats.betabinom(n_test, r, n + 1 - r).sf(k - 1))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", nargs="?", default="results/severe")
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--n-test", type=int, default=500)
    p.add_argument("--alpha", type=float, default=0.1)
    p.add_argument("--delta", type=float, default=0.1)
    a = p.parse_args()
    f = ROOT / a.folder / "results.csv" if not Path(a.folder).is_absolute() else Path(a.folder) / "results.csv"
    if not f.exists():
        p.error(f"{f} not found")
    n, alpha = a.n, a.alpha
    r_ccc = math.ceil((1 - ccc_alpha(alpha, a.delta, n)) * (n + 1) - 1e-9)
    r_mc = math.ceil((1 - alpha) * (n + 1) - 1e-9)
    paper = json.loads((ROOT / "pfwcp_nb" / "paper_tables.json").read_text())
    pm, pc = np.array(list(paper["mc"]["MC"]["CP"].values())), np.array(list(paper["ccc"]["CCC"]["CP"].values()))
    d = pd.read_csv(f)
    d = d[(d.method == "CP") & (d.weights == "estimated") & (d.heterogeneity == "severe") & (d.n_cal_test == n)]
    om, oc = 100 * d[d.guarantee == "mc"].MC.to_numpy(), 100 * d[d.guarantee == "ccc"].CCC.to_numpy()
    print(f"split CP, n = {n}, alpha = {alpha}, delta = {a.delta}, {a.n_test} test points per draw")
    print(f"rank of the MC variant: {r_mc}; of the CCC variant (exact Beta adjustment, procedure.ccc_alpha): {r_ccc}\n")
    print("| rank r | E[C] (MC, %) | P(C >= 1-alpha) (%) | expected CCC with the test points' noise (%) |")
    print("|---:|---:|---:|---:|")
    for r in range(r_ccc - 3, r_ccc + 2):
        print(f"| {r} | {100 * r / (n + 1):.2f} | {100 * stats.beta(r, n + 1 - r).sf(1 - alpha):.1f} | "
              f"{100 * expected_ccc(r, n, a.n_test, alpha):.1f} |")
    fit = min(range(r_ccc - 3, r_ccc + 2), key=lambda r: abs(100 * expected_ccc(r, n, a.n_test, alpha) - pc.mean()))
    fit_mc = min(range(r_mc - 3, r_mc + 3), key=lambda r: abs(100 * r / (n + 1) - pm.mean()))
    print(f"\nthe paper's CP rows (9 datasets): MC {pm.min():.2f}–{pm.max():.2f} % (mean {pm.mean():.2f}; closest rank "
          f"{fit_mc}, E[C] = {100 * fit_mc / (n + 1):.2f} %), CCC {pc.min():.1f}–{pc.max():.1f} % (mean {pc.mean():.1f}; "
          f"closest rank {fit})")
    print(f"{a.folder}: MC {om.min():.2f}–{om.max():.2f} % (mean {om.mean():.2f}), "
          f"CCC {oc.min():.1f}–{oc.max():.1f} % (mean {oc.mean():.1f})")
    sys.exit(0)
