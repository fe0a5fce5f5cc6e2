"""Benchmark of the osPFWCP tau search: exact engine vs the paper's Monte Carlo engine, batched over test points.

    python bench/bench_oneshot.py [--m 500] [--n-rep 2000]

One calibration draw of the severe Gaussian shift of the paper's supplement S3 (K = 11, n_k = 100, oracle
density-ratio weights), beta_breve from Procedure 1, then the tau search of `OneShotPFWCP.select` for m test
points at once, with the MC criterion and with the CCC criterion (alpha = delta = 0.1), each with
engine="exact" and engine="mc" (N_rep draws per (test point, tau) cell). Printed: time per test point, the ratio,
agreement of the chosen tau, and the projected time of the paper's protocol (500 calibration draws x 500 test
points). No assertion: this prints numbers.
"""
import argparse
import time
import warnings

import numpy as np

from _util import timed

from pfwcp_nb.coverage import largest_feasible_tau
from pfwcp_nb.oneshot import OneShotPFWCP, local_levels
from pfwcp_nb.procedure import FEAS_TOL
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration


def gaussian_shift(seed: int, K: int = 11, d: int = 10, n: int = 100, m: int = 500):
    "Agents (oracle weights) and (m, K) test weights for one draw of the severe Gaussian shift (S3)."
    rng = np.random.default_rng(seed)
    g = np.zeros((K, d))
    g[0, : d // 4] = rng.uniform(-1.0, -0.5, d // 4)
    g[1:, d // 4:] = rng.uniform(-0.7, 0.7, (K - 1, d - d // 4))
    ow = lambda X: np.exp(X @ (g[0] - g).T - 0.5 * (g[0] @ g[0] - np.sum(g * g, axis=1)))
    score = lambda X: 0.1 * np.abs(X.sum(axis=1))
    agents = []
    for k in range(K):
        X = g[k] + rng.standard_normal((n, d))
        agents.append(AgentCalibration(score(X), np.ones(n) if k == 0 else ow(X)[:, k]))
    Xt = g[0] + rng.standard_normal((m, d))
    return agents, ow(Xt)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--m", type=int, default=500, help="test points per batch")
    ap.add_argument("--n-rep", type=int, default=2000, help="Monte Carlo repetitions of the MC engine")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    agents, TW = gaussian_shift(args.seed, m=args.m)
    m = TW.shape[0]
    n_paper = 500 * 500
    print(f"osPFWCP tau search, K=11, n_k=100, {m} test points in one batch, MC engine N_rep={args.n_rep}")
    rows = []
    for crit, delta in (("MC", None), ("CCC", 0.1)):
        ex, t_cal_ex = timed(lambda: OneShotPFWCP(0.1, delta).calibrate(agents))
        _, t_cal_mc = timed(lambda: OneShotPFWCP(0.1, delta, engine="mc", seed=args.seed).calibrate(agents))
        mc = OneShotPFWCP(0.1, delta, engine="mc", n_rep=args.n_rep, seed=args.seed).calibrate(
            agents, beta_breve=ex.beta_breve_)                  # same beta_breve: compare the tau search only
        s_ex, t_ex = timed(lambda: ex.select(TW))
        s_mc, t_mc = timed(lambda: mc.select(TW))
        same = np.mean(s_ex.index == s_mc.index)
        steps = np.abs(s_ex.index - s_mc.index).max()
        rows.append((crit, t_ex / m, t_mc / m, same, steps, t_cal_ex, t_cal_mc))
        print(f"  {crit}: beta_breve={ex.beta_breve_:.4f}, {ex.taus_.size} taus; calibration (Procedure 1 for "
              f"beta_breve) exact {t_cal_ex:.3f} s, MC {t_cal_mc:.2f} s; feasible test points: exact {s_ex.feasible.mean():.3f}, "
              f"MC {s_mc.feasible.mean():.3f}")
    from pfwcp_nb import procedure
    procedure._EXACT_MEMO.clear()                               # time Procedure 1 too, not its memoised table
    _, t_pf = timed(lambda: PFWCP(0.1).calibrate(agents).threshold(TW))

    print()
    print(f"{'crit':>4} {'exact [ms/pt]':>14} {'MC [ms/pt]':>11} {'MC/exact':>9} {'same tau':>9} {'max |dtau| steps':>17}"
          f" {'paper 500x500, exact':>21} {'paper 500x500, MC':>18}")
    for crit, te, tm, same, steps, tcal, tcal_mc in rows:
        proj_ex = n_paper * te + 500 * tcal
        proj_mc = n_paper * tm + 500 * tcal_mc
        print(f"{crit:>4} {te * 1e3:>14.3f} {tm * 1e3:>11.2f} {tm / te:>8.1f}x {same:>9.2f} {steps:>17d}"
              f" {proj_ex / 60:>17.1f} min {proj_mc / 3600:>15.2f} h")
    # the exact MC-criterion search: coarse nodes first (default, margin=2e-4) vs the default nodes for every row
    ex = OneShotPFWCP(0.1).calibrate(agents)
    betas = local_levels(ex.messages_, TW)
    args_ = (betas, ex.n_eff_, ex.taus_, 0.9 - FEAS_TOL)
    (i_new, _, _), t_new = timed(lambda: largest_feasible_tau(*args_, weights=ex.agg_weights_))
    (i_ref, _, _), t_ref = timed(lambda: largest_feasible_tau(*args_, weights=ex.agg_weights_, margin=None))
    print(f"exact MC-criterion search, {m} test points: coarse-first {t_new * 1e3 / m:.3f} ms/pt, default nodes "
          f"{t_ref * 1e3 / m:.3f} ms/pt ({t_ref / t_new:.2f}x); same tau for {np.mean(i_new == i_ref):.3f} of the points")
    print(f"(projection: 500 calibration draws x 500 test points = {n_paper} tau searches + 500 calibrations (Procedure 1 with the same engine);"
          f"\n for reference, PFWCP calibrate + threshold for the same {m} points: {t_pf:.2f} s)")


if __name__ == "__main__":
    main()
