"""Figure 1 of the paper (star, 1000 draws x 1000 test points) summarised from its saved coverages: the share of draws
with coverage >= 1 - alpha and the median coverage of each curve, and the mean n_eff.

Usage: python studies/paper_grid/figure1_summary.py results/severe/figure1_star.npz [--alpha 0.1]
"""
import argparse
import sys
from pathlib import Path

import numpy as np

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("npz")
    p.add_argument("--alpha", type=float, default=0.1)
    a = p.parse_args()
    if not Path(a.npz).is_file():
        p.error(f"{a.npz} not found")
    z = np.load(a.npz)
    print(f"| curve | P(coverage ≥ {1 - a.alpha:g}) | median coverage |\n|---|---:|---:|")
    for k in ("WCP", "CP n_eff", "CP shift", "CP no shift"):
        c = z[k]
        print(f"| {k} | {np.mean(c >= 1 - a.alpha - 1e-12):.3f} | {np.median(c):.3f} |")
    print(f"\nmean n_eff of the weighted calibration sets: {np.mean(z['n_eff']):.1f}")
    sys.exit(0)
