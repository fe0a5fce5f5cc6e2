"""Benchmark for many agents: the default engines against the paper's Monte Carlo (MC2000 / MC4000).

    OMP_NUM_THREADS=1 nice -n 15 python bench/bench_agents.py [--K 11 15 20 22 25 30 40 60 100 300 1000] [--n 100]

For every K (agents) and n_k (calibration points per agent; agent 0 has unit weights, the others lognormal(0, 1)
density-ratio weights, so their n_eff vary) it prints, in one run, ratios of times measured in that run:
1. Procedure 1 (`select_quantiles`, the paper's 22 x 22 grid, alpha = delta = 0.1): CPU seconds of the default engine
   (chosen by cost: `coverage.use_exact_engine`) next to the Monte Carlo engine (n_rep 2000 MC / 4000 CCC), called in
   both orders (default first, then Monte Carlo first), every memo cleared before every call, so no call is served a
   table of another. Above --mc-full-k agents the Monte Carlo engine is timed on a few cells and scaled to the 484 cells
   (its cost is linear in the cells; marked "*"); the default engine always runs on the whole grid. Then the
   certificate of the default choice (feasible, and for the lattice its certified lower bound >= target), its certified
   width (upper - lower) at the chosen cell and the largest over the grid (0 for the exact engine).
2. Thresholds (`PFWCP.threshold`, rule "paper"): test points per second of the blocked path next to the path through
   the agents' messages (`combine(messages(.))`) on the same points, and that they agree bitwise.
3. osPFWCP (`OneShotPFWCP.select`, beta_breve from `oneshot_level`): test points per second of the default engine next
   to the Monte Carlo engine (same beta_breve), both orders; above K = 100 the Monte Carlo engine is timed on one test
   point at every 6th tau and scaled to the 51 taus.
Times are CPU seconds of this process (`time.process_time`; run with OMP_NUM_THREADS=1 on a shared machine). No
assertion: this prints numbers.
"""
import argparse
import os
import sys
import time
import warnings

import numpy as np

from _util import cpu_timed as cpu

from pfwcp_nb import procedure
from pfwcp_nb.procedure import select_quantiles, FEAS_TOL
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration
from pfwcp_nb.oneshot import OneShotPFWCP, local_levels
from pfwcp_nb.coverage import coverage_objective


def federation(K: int, n: int, m: int, seed: int = 0):
    "K agents with n scores each (agent 0: unit weights; others lognormal(0, 1) weights) and (m, K) test weights."
    rng = np.random.default_rng(seed)
    agents = [AgentCalibration(rng.exponential(size=n), None if k == 0 else rng.lognormal(0.0, 1.0, n))
              for k in range(K)]
    tw = np.column_stack([np.ones(m)] + [rng.lognormal(0.0, 1.0, m) for _ in range(K - 1)]) if m else None
    return agents, tw


def rows_of(betas, r):
    "r beta rows of the grid, spread over it (first and last included)."
    return betas[np.unique(np.linspace(0, betas.size - 1, r).round().astype(int))]


def fresh(fn):
    "CPU seconds of `fn()` with every memo cleared before the call."
    procedure._EXACT_MEMO.clear()
    return cpu(fn)


def procedure1(args, K, agents):
    n_eff = np.array([a.summary().n_eff for a in agents])
    betas, taus = procedure.paper_grid(0.1)
    sub = (betas, taus) if K <= args.mc_full_k else \
          ((rows_of(betas, 2), taus) if K <= 100 else (rows_of(betas, 1), taus[::4]))
    scale = betas.size * taus.size / (sub[0].size * sub[1].size)
    rows = []
    for crit, delta, n_rep in (("MC", None, 2000), ("CCC", 0.1, 4000)):
        new = lambda: select_quantiles(n_eff, 0.1, delta)
        mc = lambda: select_quantiles(n_eff, 0.1, delta, engine="monte-carlo", n_rep=n_rep, seed=0, grid=sub)
        ch, t_new1 = fresh(new)                                       # order 1: default, then Monte Carlo
        _, t_mc1 = fresh(mc)
        _, t_mc2 = fresh(mc)                                          # order 2: Monte Carlo, then default
        ch2, t_new2 = fresh(new)
        assert ch2.engine == ch.engine and np.array_equal(ch2.objective, ch.objective)
        cert = bool(ch.feasible and ch.value >= ch.target - FEAS_TOL)
        wmax = 0.0 if ch.upper is None else float((ch.upper - ch.objective).max())
        rows.append((crit, ch, (t_new1, t_mc1 * scale), (t_new2, t_mc2 * scale), scale > 1, cert, wmax))
    procedure._EXACT_MEMO.clear()
    return rows


def thresholds(args, K, agents, tw):
    model = PFWCP(0.1).calibrate(agents)
    q, t_new = cpu(lambda: model.threshold(tw))
    ref, t_ref = cpu(lambda: model.combine(model.messages(tw)))
    return tw.shape[0] / t_new, tw.shape[0] / t_ref, bool(np.array_equal(q, ref))


def oneshot(args, K, agents, tw):
    out = []
    for crit, delta, n_rep in (("MC", None, 2000), ("CCC", 0.1, 4000)):
        ex = OneShotPFWCP(0.1, delta).calibrate(agents)
        mc = OneShotPFWCP(0.1, delta, engine="monte-carlo", n_rep=n_rep, seed=0).calibrate(agents, beta_breve=ex.beta_breve_)
        m_ex = args.os_m if crit == "CCC" or K <= 14 else args.os_m_mc_crit

        def run_mc():
            if K <= 100:
                return fresh(lambda: mc.select(tw[:args.os_m_mc]))[1] / args.os_m_mc
            lv = local_levels(mc.messages_, tw[:1])                   # one test point, every 6th tau
            _, t = fresh(lambda: coverage_objective(lv, mc.n_eff_, mc.taus_[::6], None if delta is None else 0.1,
                                                    agg_weights=mc.agg_weights_, engine="monte-carlo", n_rep=n_rep, rng=0))
            return t * mc.taus_.size / mc.taus_[::6].size
        s, t_ex1 = fresh(lambda: ex.select(tw[:m_ex]))                # order 1: default, then Monte Carlo
        t_mc1 = run_mc()
        t_mc2 = run_mc()                                              # order 2
        _, t_ex2 = fresh(lambda: ex.select(tw[:m_ex]))
        out.append((crit, m_ex / t_ex1, 1 / t_mc1, m_ex / t_ex2, 1 / t_mc2, float(s.feasible.mean())))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--K", type=int, nargs="+", default=[11, 15, 20, 22, 25, 30, 40, 60, 100, 300, 1000])
    ap.add_argument("--n", type=int, nargs="+", default=[100], help="calibration points per agent")
    ap.add_argument("--mc-full-k", type=int, default=30, help="above this K the Monte Carlo engine runs on a few cells, scaled")
    ap.add_argument("--thr-k", type=int, nargs="+", default=[11, 30, 100, 300, 1000], help="K of sections 2 and 3")
    ap.add_argument("--thr-pairs", type=float, default=2e7, help="test points x agents timed for the thresholds")
    ap.add_argument("--os-m", type=int, default=400, help="test points for the one-shot search (CCC; MC up to K = 14)")
    ap.add_argument("--os-m-mc-crit", type=int, default=4, help="test points for the one-shot search, MC criterion, K > 14")
    ap.add_argument("--os-m-mc", type=int, default=4, help="test points for the one-shot Monte Carlo engine (K <= 100)")
    ap.add_argument("--skip", nargs="*", default=[], choices=["procedure", "thresholds", "oneshot"])
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    load = os.getloadavg()
    print(f"command: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')} nice -n {os.nice(0)} {' '.join(['python'] + sys.argv)}")
    print(f"load average {load[0]:.1f} on {os.cpu_count()} CPUs at the start (a shared machine: CPU seconds; ratios in "
          f"the same run); OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}", flush=True)
    T = []
    for n in args.n:
        for K in sorted(set(args.K) | set(args.thr_k)):
            m = int(max(1000, args.thr_pairs // K))
            agents, tw = federation(K, n, m)
            t0 = time.perf_counter()
            P = procedure1(args, K, agents) if "procedure" not in args.skip and K in args.K else []
            more = K in args.thr_k
            H = thresholds(args, K, agents, tw) if "thresholds" not in args.skip and more else None
            O = oneshot(args, K, agents, tw) if "oneshot" not in args.skip and more else []
            T.append((K, n, P, H, O))
            n_eff = np.array([a.summary().n_eff for a in agents])
            print(f"  done K={K} n_k={n} (n_eff {n_eff[1:].min():.1f}..{n_eff[1:].max():.1f}) in "
                  f"{time.perf_counter() - t0:.0f} s wall, load {os.getloadavg()[0]:.1f}", flush=True)
    print("\n1. Procedure 1, 22 x 22 grid: CPU seconds of the default engine and of Monte Carlo (MC2000 / MC4000), called"
          "\n   in both orders with the memos cleared; ratio = Monte Carlo / default in that order. * = Monte Carlo timed"
          f" on a few cells (K > {args.mc_full_k}), scaled to 484.\n   cert = the choice is feasible by its engine's"
          " certified lower bound; width = certified upper - lower at the chosen cell / max over the grid.")
    print(f"{'K':>5} {'n_k':>6} {'crit':>4} {'engine':>8} {'new [s]':>8} {'MC [s]':>9} {'ratio':>7} | {'MC [s]':>9} "
          f"{'new [s]':>8} {'ratio':>7} | {'cert':>5} {'width@cell':>10} {'width max':>9} {'units':>6}")
    for K, n, P, _, _ in T:
        for crit, ch, (n1, m1), (n2, m2), star, cert, wmax in P:
            s = "*" if star else " "
            print(f"{K:>5} {n:>6} {crit:>4} {ch.engine:>8} {n1:>8.3f} {m1:>8.2f}{s} {m1 / n1:>6.1f}x | {m2:>8.2f}{s} "
                  f"{n2:>8.3f} {m2 / n2:>6.1f}x | {str(cert):>5} {ch.width:>10.1e} {wmax:>9.1e} {str(ch.units or '-'):>6}")
    print("\n2. Thresholds (PFWCP.threshold, rule 'paper'): test points per second, blocked path vs combine(messages)")
    print(f"{'K':>5} {'n_k':>6} {'m':>8} {'blocked [pt/s]':>15} {'messages [pt/s]':>16} {'ratio':>7} {'equal':>6}")
    for K, n, _, H, _ in T:
        if H:
            m = int(max(1000, args.thr_pairs // K))
            print(f"{K:>5} {n:>6} {m:>8} {H[0]:>15.0f} {H[1]:>16.0f} {H[0] / H[1]:>6.2f}x {str(H[2]):>6}")
    print("\n3. osPFWCP tau search (OneShotPFWCP.select): test points per second, default engine vs Monte Carlo, both orders"
          "\n   (above K = 100 the Monte Carlo engine is timed on one test point at every 6th tau, scaled to the 51 taus)")
    print(f"{'K':>5} {'n_k':>6} {'crit':>4} {'new [pt/s]':>11} {'MC [pt/s]':>10} {'ratio':>8} | {'MC [pt/s]':>10} "
          f"{'new [pt/s]':>11} {'ratio':>8} {'feasible':>9}")
    for K, n, _, _, O in T:
        for crit, p1, q1, p2, q2, feas in O:
            print(f"{K:>5} {n:>6} {crit:>4} {p1:>11.2f} {q1:>10.3f} {p1 / q1:>7.1f}x | {q2:>10.3f} {p2:>11.2f} "
                  f"{p2 / q2:>7.1f}x {feas:>9.2f}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
