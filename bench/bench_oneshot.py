"""Benchmark of the osPFWCP tau search: the certified search vs the search of commit 5c99045, and the exact engine vs
the paper's Monte Carlo engine, batched over test points.

    python bench/bench_oneshot.py [--m 500] [--n-rep 2000] [--draws 3] [--skip-mc]

1. The MC-criterion search (`largest_feasible_tau`, default margin) against a frozen copy of the same function at
   commit 5c99045 (read with `git show 5c99045:pfwcp_nb/coverage.py`, so this needs the repository's history), in
   the same run, interleaved, median of `--reps` runs: CPU ms per test point, the ratio, and the share of test points
   with the same tau index and feasibility (must be 1). Inputs: paper-like (the severe Gaussian shift of the
   supplement S3, K = 11, n_k = 100, oracle density-ratio weights, beta_breve and the tau grid of
   `OneShotPFWCP.calibrate`, one batch of m test points per calibration draw) and random (K = 11, random n_eff and
   per-agent levels).
2. One calibration draw: `OneShotPFWCP.select` with the MC and CCC criteria (alpha = delta = 0.1), engine="exact" vs
   engine="monte-carlo" (N_rep draws per (test point, tau) cell), the same beta_breve; the projected time of the paper's
   protocol (500 calibration draws x 500 test points).
Times are CPU seconds of this process (`time.process_time`; run with OMP_NUM_THREADS=1), which a loaded machine
disturbs less than wall time; the load average is printed. No assertion: this prints numbers.
"""
import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

from _util import cpu_timed as cpu

from pfwcp_nb.tau_search import largest_feasible_tau
from pfwcp_nb.oneshot import OneShotPFWCP, local_levels
from pfwcp_nb.procedure import FEAS_TOL
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration
from pfwcp_nb.data import make_federation

REF_COMMIT = "5c99045"


def load_reference():
    "The module pfwcp_nb/coverage.py as it was at REF_COMMIT, imported from a temporary file."
    root = Path(__file__).resolve().parents[1]
    src = subprocess.run(["git", "-C", str(root), "show", f"{REF_COMMIT}:pfwcp_nb/coverage.py"],
                         check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / f"coverage_{REF_COMMIT}.py"
    path.write_text(src.replace("from .quantiles import", "from pfwcp_nb.quantiles import"))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def gaussian_shift(seed: int, K: int = 11, n: int = 100, m: int = 500):
    "Agents (oracle weights) and (m, K) test weights for one draw of the severe Gaussian shift (S3)."
    rng = np.random.default_rng(seed)
    g = make_federation("gaussian", "severe", K=K, seed=rng).shift["means"]   # (K, d = 10)
    d = g.shape[1]
    ow = lambda X: np.exp(X @ (g[0] - g).T - 0.5 * (g[0] @ g[0] - np.sum(g * g, axis=1)))
    score = lambda X: 0.1 * np.abs(X.sum(axis=1))
    agents = []
    for k in range(K):
        X = g[k] + rng.standard_normal((n, d))
        agents.append(AgentCalibration(score(X), np.ones(n) if k == 0 else ow(X)[:, k]))
    Xt = g[0] + rng.standard_normal((m, d))
    return agents, ow(Xt)


def search_inputs(args):
    "(name, betas, n_eff, taus, target, weights) for the paper-like draws and the random configuration."
    out = []
    for s in range(args.draws):
        agents, TW = gaussian_shift(args.seed + s, m=args.m)
        ex = OneShotPFWCP(0.1, beta_breve_rule="procedure1").calibrate(agents)
        out.append((f"S3 severe, draw {s}", local_levels(ex.messages_, TW), ex.n_eff_, ex.taus_, 0.9 - FEAS_TOL,
                    ex.agg_weights_))
    rng = np.random.default_rng(args.seed)
    n_eff = rng.uniform(3, 100, 11)
    betas = np.clip(rng.uniform(0.05, 0.3, (args.m, 1)) + rng.uniform(0, 0.4, (args.m, 11)) ** 3, 0, 0.99)
    out.append(("random, K=11", betas, n_eff, np.linspace(0, 0.8, 51), 0.9 - FEAS_TOL, None))
    return out


def compare_search(args, ref):
    print(f"1. MC-criterion tau search, {args.m} test points per batch: certified search vs the search of {REF_COMMIT}"
          f" (CPU ms per test point, median of {args.reps} interleaved runs)")
    print(f"{'input':>20} {REF_COMMIT + ' [ms/pt]':>16} {'new [ms/pt]':>12} {'ratio':>7} {'same tau':>9} {'same feasible':>14}")
    tot_old = tot_new = 0.0
    for name, betas, n_eff, taus, target, w in search_inputs(args):
        t_old, t_new = [], []
        for _ in range(args.reps):
            (i_o, _, ok_o), t = cpu(lambda: ref.largest_feasible_tau(betas, n_eff, taus, target, agg_weights=w))
            t_old.append(t)
            (i_n, _, ok_n), t = cpu(lambda: largest_feasible_tau(betas, n_eff, taus, target, agg_weights=w))
            t_new.append(t)
        to, tn = np.median(t_old), np.median(t_new)
        tot_old, tot_new = tot_old + to, tot_new + tn
        m = betas.shape[0]
        print(f"{name:>20} {to / m * 1e3:>16.3f} {tn / m * 1e3:>12.3f} {to / tn:>6.2f}x {np.mean(i_o == i_n):>9.3f}"
              f" {np.mean(ok_o == ok_n):>14.3f}")
    print(f"{'all inputs':>20} {'':>16} {'':>12} {tot_old / tot_new:>6.2f}x")


def compare_engines(args):
    warnings.simplefilter("ignore")
    agents, TW = gaussian_shift(args.seed, m=args.m)
    m = TW.shape[0]
    n_paper = 500 * 500
    print(f"\n2. osPFWCP select, exact vs the paper's MC engine (N_rep={args.n_rep}), one draw, {m} test points")
    rows = []
    from pfwcp_nb import procedure
    for crit, delta in (("MC", None), ("CCC", 0.1)):
        procedure._EXACT_MEMO.clear()                           # time Procedure 1, not its memoised table
        ex, t_cal_ex = cpu(lambda: OneShotPFWCP(0.1, delta, beta_breve_rule="procedure1").calibrate(agents))
        _, t_cal_mc = cpu(lambda: OneShotPFWCP(0.1, delta, engine="monte-carlo", seed=args.seed, beta_breve_rule="procedure1").calibrate(agents))
        mc = OneShotPFWCP(0.1, delta, engine="monte-carlo", n_rep=args.n_rep, seed=args.seed).calibrate(
            agents, beta_breve=ex.beta_breve_)                  # same beta_breve: compare the tau search only
        s_ex, t_ex = cpu(lambda: ex.select(TW))
        s_mc, t_mc = cpu(lambda: mc.select(TW))
        rows.append((crit, t_ex / m, t_mc / m, np.mean(s_ex.index == s_mc.index),
                     np.abs(s_ex.index - s_mc.index).max(), t_cal_ex, t_cal_mc))
        print(f"  {crit}: beta_breve={ex.beta_breve_:.4f}, {ex.taus_.size} taus; calibration (Procedure 1 for "
              f"beta_breve) exact {t_cal_ex:.3f} s, MC {t_cal_mc:.2f} s; feasible test points: exact "
              f"{s_ex.feasible.mean():.3f}, MC {s_mc.feasible.mean():.3f}")
    procedure._EXACT_MEMO.clear()                               # time Procedure 1 too, not its memoised table
    _, t_pf = cpu(lambda: PFWCP(0.1).calibrate(agents).threshold(TW))
    print(f"{'crit':>4} {'exact [ms/pt]':>14} {'MC [ms/pt]':>11} {'MC/exact':>9} {'same tau':>9} {'max |dtau| steps':>17}"
          f" {'paper 500x500, exact':>21} {'paper 500x500, MC':>18}")
    for crit, te, tm, same, steps, tcal, tcal_mc in rows:
        proj_ex = n_paper * te + 500 * tcal
        proj_mc = n_paper * tm + 500 * tcal_mc
        print(f"{crit:>4} {te * 1e3:>14.3f} {tm * 1e3:>11.2f} {tm / te:>8.1f}x {same:>9.2f} {steps:>17d}"
              f" {proj_ex / 60:>17.1f} min {proj_mc / 3600:>15.2f} h")
    print(f"(projection: 500 calibration draws x 500 test points = {n_paper} tau searches + 500 calibrations;"
          f"\n for reference, PFWCP calibrate + threshold for the same {m} points: {t_pf:.2f} s)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--m", type=int, default=500, help="test points per batch")
    ap.add_argument("--n-rep", type=int, default=2000, help="Monte Carlo repetitions of the MC engine")
    ap.add_argument("--draws", type=int, default=3, help="calibration draws of the paper-like input")
    ap.add_argument("--reps", type=int, default=3, help="interleaved timing runs per input (median)")
    ap.add_argument("--skip-mc", action="store_true", help="skip part 2 (the MC engine takes minutes)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} CPUs at the start"
          f"{' (a loaded machine: CPU times are used; ratios are measured in the same run)' if load[0] > 1 else ''};"
          f" OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")
    compare_search(args, load_reference())
    if not args.skip_mc:
        compare_engines(args)
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the end")


if __name__ == "__main__":
    main()
