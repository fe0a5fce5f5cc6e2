"""Benchmark of Procedure 1 (`select_quantiles`): exact engine vs the paper's Monte Carlo engine.

    python bench/bench_procedure.py [--seeds 20] [--mc-draws 1000000]

K = 11 agents, the paper's 22 x 22 grid, alpha = 0.1 (and delta = 0.1 for CCC). For every seed the agents'
n_eff come from one calibration draw (n_k = 100) of the severe Gaussian shift of the paper's supplement S3
with oracle density-ratio weights, so they are heterogeneous and change with the seed. Printed:
1. time of the exact engine vs the MC engine with N_rep = 2000 and 4000, for the MC and the CCC criterion;
2. how often the MC engine's choice is, by the exact objective, infeasible (below the target by more than
   FEAS_TOL) or feasible but suboptimal (above the exact optimum by more than TIE_TOL);
3. exact E[U^(tau)] against a --mc-draws Monte Carlo estimate on a few cells (difference and its standard error).
No assertion: this prints numbers.
"""
import argparse
import time
import warnings

import numpy as np

from _util import timed

from pfwcp_nb.coverage import wqb_sample
from pfwcp_nb.procedure import FEAS_TOL, TIE_TOL, select_quantiles
from pfwcp_nb.quantiles import effective_sample_size
from pfwcp_nb.data import make_federation


def heterogeneous_neff(seed: int, K: int = 11, n: int = 100) -> np.ndarray:
    "n_eff of K agents: oracle weights dP^1/dP^k on one draw of the severe Gaussian shift (S3)."
    rng = np.random.default_rng(seed)
    g = make_federation("gaussian", "severe", K=K, seed=rng).shift["means"]   # (K, d = 10)
    d = g.shape[1]
    out = [float(n)]
    for k in range(1, K):
        X = g[k] + rng.standard_normal((n, d))
        out.append(effective_sample_size(np.exp(X @ (g[0] - g[k]) - 0.5 * (g[0] @ g[0] - g[k] @ g[k]))))
    return np.array(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--mc-draws", type=int, default=1_000_000)
    args = ap.parse_args()
    alpha, delta = 0.1, 0.1
    warnings.simplefilter("ignore")                    # infeasible-grid warnings are counted, not printed

    print(f"Procedure 1, K=11, 22x22 grid, alpha={alpha}, {args.seeds} seeds (n_eff from the Gaussian shift)")
    ex_neff = heterogeneous_neff(0)
    print("n_eff (seed 0):", np.round(ex_neff, 1))
    rows = []
    for crit, dl in (("MC", None), ("CCC", delta)):
        t_ex, stats = [], {2000: dict(t=[], infeas=0, subopt=0, excess=[], short=[]),
                           4000: dict(t=[], infeas=0, subopt=0, excess=[], short=[])}
        n_ex_infeasible = 0
        for s in range(args.seeds):
            n_eff = heterogeneous_neff(s)
            ex, dt = timed(lambda: select_quantiles(n_eff, alpha, dl))
            t_ex.append(dt)
            n_ex_infeasible += not ex.feasible
            b, t = ex.grid
            for n_rep, st in stats.items():
                mc, dt = timed(lambda: select_quantiles(n_eff, alpha, dl, engine="monte-carlo", n_rep=n_rep, seed=s))
                st["t"].append(dt)
                val = ex.objective[np.searchsorted(b, mc.beta), np.searchsorted(t, mc.tau)]
                if val < ex.target - FEAS_TOL:
                    st["infeas"] += 1
                    st["short"].append(ex.target - val)
                elif ex.feasible and val > ex.value + TIE_TOL:
                    st["subopt"] += 1
                    st["excess"].append(val - ex.value)
        for n_rep, st in stats.items():
            rows.append((crit, n_rep, np.median(t_ex), np.median(st["t"]), st["infeas"], st["subopt"],
                         max(st["short"], default=0.0), np.mean(st["excess"]) if st["excess"] else 0.0))
        print(f"  {crit}: exact engine found no feasible cell for {n_ex_infeasible}/{args.seeds} seeds")

    print()
    hdr = (f"{'crit':>4} {'N_rep':>5} {'exact [s]':>10} {'MC [s]':>8} {'MC/exact':>9} "
           f"{'MC infeasible':>14} {'MC suboptimal':>14} {'max shortfall':>14} {'mean excess':>12}")
    print(hdr)
    for crit, n_rep, te, tm, ninf, nsub, short, exc in rows:
        print(f"{crit:>4} {n_rep:>5} {te:>10.4f} {tm:>8.3f} {tm / te:>8.1f}x "
              f"{f'{ninf}/{args.seeds}':>14} {f'{nsub}/{args.seeds}':>14} {short:>14.2e} {exc:>12.2e}")
    print("(times are medians over seeds; 'infeasible'/'suboptimal' judged by the exact objective at the MC choice;"
          "\n shortfall = target - exact value, excess = exact value - exact optimum)")

    print(f"\nExact E[U^(tau)] vs {args.mc_draws:.0e}-draw Monte Carlo (n_eff of seed 0):")
    rng = np.random.default_rng(12345)
    res = select_quantiles(ex_neff, alpha)
    b, t = res.grid
    taus = t[[0, 5, 11, 16, 21]]
    print(f"{'beta':>7} {'tau':>7} {'exact':>10} {'MC':>10} {'diff':>10} {'MC s.e.':>9} {'|diff|/se':>9}")
    worst = 0.0
    for beta in (b[0], res.beta, b[-1]):
        ex_row = res.objective[np.searchsorted(b, beta)][np.searchsorted(t, taus)]
        V = np.concatenate([wqb_sample(beta, ex_neff, taus, args.mc_draws // 10, rng=rng) for _ in range(10)])
        for j, tau in enumerate(taus):
            m, se = V[:, j].mean(), V[:, j].std(ddof=1) / np.sqrt(V.shape[0])
            worst = max(worst, abs(ex_row[j] - m) / se)
            print(f"{beta:>7.4f} {tau:>7.4f} {ex_row[j]:>10.7f} {m:>10.7f} {ex_row[j] - m:>10.2e} {se:>9.1e} "
                  f"{abs(ex_row[j] - m) / se:>9.2f}")
    print(f"largest |exact - MC| / s.e. over the 15 cells: {worst:.2f} (a 1e-5 engine error would be "
          f"{1e-5 / se:.2f} s.e.)")


if __name__ == "__main__":
    main()
