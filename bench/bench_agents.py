"""Benchmark for many agents (issue 20): the certified lattice engine against the paper's Monte Carlo engine.

    nice -n 15 OMP_NUM_THREADS=1 nice -n 15 python bench/bench_agents.py [--K 11 30 100 300 1000] [--n 100 10000]

For every K (agents) and n_k (calibration points per agent; agent 0 has unit weights, the others lognormal(0, 1)
density-ratio weights, so their n_eff vary) it prints, in one run:
1. Procedure 1 (`select_quantiles`, the paper's 22 x 22 grid, alpha = delta = 0.1): CPU seconds of the default engine
   (exact meet in the middle for K <= 30, certified lattice bounds above, refined up to --max-units) for the MC and the
   CCC criterion, next to the Monte Carlo engine (n_rep 2000 / 4000). To fit a shared 2-core machine, slow parts are
   timed on a few grid cells (or taus) and scaled to all of them (the costs are linear in the cells; marked "*"). The certified width (upper - lower) of the
   objective at the chosen cell and its largest value over the grid (0 for the exact engine).
2. Thresholds (`PFWCP.threshold`, rule "paper"): test points per second of the blocked path next to the path through
   the agents' messages (`combine(messages(.))`, one (m, K) matrix) on the same points, and that they agree bitwise.
3. osPFWCP (`OneShotPFWCP.select`, beta_breve from `oneshot_level`): test points per second of the default engine next
   to the Monte Carlo engine (n_rep 2000 / 4000, same beta_breve), MC and CCC criteria.
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
from pfwcp_nb.procedure import select_quantiles
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


def procedure1(args, K, n, agents):
    n_eff = np.array([a.summary().n_eff for a in agents])
    rows = []
    betas, taus = procedure.paper_grid(0.1)
    for crit, delta, n_rep in (("MC", None, 2000), ("CCC", 0.1, 4000)):
        procedure._EXACT_MEMO.clear()
        sub_new = crit == "MC" and K >= args.sub_from                 # MC criterion, many agents: a few rows, x22/r
        grid = (rows_of(betas, args.new_rows), taus) if sub_new else None
        ch, t_new = cpu(lambda: select_quantiles(n_eff, 0.1, delta, max_units=args.max_units, grid=grid))
        t_new *= betas.size / ch.grid[0].size
        if K >= args.mc_rows_from:                                     # the MC engine on a few cells, x484/cells
            sub = rows_of(betas, args.mc_rows if K < args.sub_from else 1)
            sub_t = taus if K < args.sub_from else taus[::4]
            _, t = cpu(lambda: select_quantiles(n_eff, 0.1, delta, engine="monte-carlo", n_rep=n_rep, seed=0, grid=(sub, sub_t)))
            t_mc = t * betas.size * taus.size / (sub.size * sub_t.size)
        else:
            _, t_mc = cpu(lambda: select_quantiles(n_eff, 0.1, delta, engine="monte-carlo", n_rep=n_rep, seed=0))
        wmax = 0.0 if ch.upper is None else float((ch.upper - ch.objective).max())
        rows.append((crit, ch, t_new, t_mc, ("*" if sub_new else " ") + ("*" if K >= args.mc_rows_from else " "), wmax))
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
        m_ex = args.os_m if (crit == "CCC" or K <= 14) else (max(2, args.os_m // 100) if K <= 100 else 2)
        s, t_ex = cpu(lambda: ex.select(tw[:m_ex]))
        mc = OneShotPFWCP(0.1, delta, engine="monte-carlo", n_rep=n_rep, seed=0).calibrate(agents, beta_breve=ex.beta_breve_)
        if K <= 100:
            _, t_mc = cpu(lambda: mc.select(tw[:args.os_m_mc]))
            rate_mc = args.os_m_mc / t_mc
        else:                                                          # one test point on every 6th tau, x51/9
            lv = local_levels(mc.messages_, tw[:1])
            sub_t = mc.taus_[::6]
            _, t_mc = cpu(lambda: coverage_objective(lv, mc.n_eff_, sub_t, None if delta is None else 0.1,
                                                     agg_weights=mc.agg_weights_, engine="monte-carlo", n_rep=n_rep, rng=0))
            rate_mc = sub_t.size / (t_mc * mc.taus_.size)
        out.append((crit, m_ex / t_ex, rate_mc, float(s.feasible.mean())))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--K", type=int, nargs="+", default=[11, 30, 100, 300, 1000])
    ap.add_argument("--n", type=int, nargs="+", default=[100, 10_000], help="calibration points per agent")
    ap.add_argument("--max-units", type=int, default=None, help="finest lattice of Procedure 1's certified bounds (default: 2^16 CCC, 2^12 MC)")
    ap.add_argument("--mc-rows-from", type=int, default=30, help="time the MC engine on a few rows from this K on")
    ap.add_argument("--mc-rows", type=int, default=2, help="beta rows timed with the MC engine (1 from --sub-from on)")
    ap.add_argument("--sub-from", type=int, default=300, help="MC criterion: time the new engine on --new-rows rows from this K on")
    ap.add_argument("--new-rows", type=int, default=2, help="beta rows of the MC criterion's new engine for K >= --sub-from")
    ap.add_argument("--thr-pairs", type=float, default=2e7, help="test points x agents timed for the thresholds")
    ap.add_argument("--os-m", type=int, default=400, help="test points for the one-shot search (MC criterion: /100 above K=14, 2 above K=100)")
    ap.add_argument("--os-m-mc", type=int, default=4, help="test points for the one-shot Monte Carlo engine (1 above K=100)")
    ap.add_argument("--skip", nargs="*", default=[], choices=["procedure", "thresholds", "oneshot"])
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    load = os.getloadavg()
    print(f"command: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')} nice -n {os.nice(0)} {' '.join(['python'] + sys.argv)}")
    print(f"load average {load[0]:.1f} on {os.cpu_count()} CPUs at the start (a shared machine: CPU seconds; ratios in "
          f"the same run); OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")
    T = []
    for n in args.n:
        for K in args.K:
            m = int(max(1000, args.thr_pairs // K))
            agents, tw = federation(K, n, m)
            t0 = time.perf_counter()
            P = procedure1(args, K, n, agents) if "procedure" not in args.skip else []
            H = thresholds(args, K, agents, tw) if "thresholds" not in args.skip else None
            O = oneshot(args, K, agents, tw) if "oneshot" not in args.skip else []
            T.append((K, n, P, H, O))
            n_eff = np.array([a.summary().n_eff for a in agents])
            print(f"  done K={K} n_k={n} (n_eff {n_eff[1:].min():.1f}..{n_eff[1:].max():.1f}) in "
                  f"{time.perf_counter() - t0:.0f} s wall", flush=True)
    print("\n1. Procedure 1, 22 x 22 grid: CPU seconds (default engine vs Monte Carlo), certified width at the chosen cell /"
          f" max over the grid.\n   Marks: first * = the new engine (MC criterion, K >= {args.sub_from}) timed on "
          f"{args.new_rows} of the 22 beta rows (its choice and widths are on those rows), scaled to 22;\n   second * = "
          f"the MC engine timed on {args.mc_rows} rows (1 row x 6 taus from K = {args.sub_from}), scaled to the 484 cells.")
    print(f"{'K':>5} {'n_k':>6} {'crit':>4} {'engine':>8} {'new [s]':>9} {'MC [s]':>9} {'MC/new':>8} "
          f"{'feasible':>8} {'width@cell':>11} {'width max':>10} {'units':>7}")
    for K, n, P, _, _ in T:
        for crit, ch, tn, tm, star, wmax in P:
            print(f"{K:>5} {n:>6} {crit:>4} {ch.engine:>8} {tn:>8.3f}{star[0]} {tm:>8.2f}{star[1]} {tm / tn:>7.1f}x "
                  f"{str(ch.feasible):>8} {ch.width:>11.1e} {wmax:>10.1e} {str(ch.units or '-'):>7}")
    print("\n2. Thresholds (PFWCP.threshold, rule 'paper'): test points per second, blocked path vs combine(messages)")
    print(f"{'K':>5} {'n_k':>6} {'m':>8} {'blocked [pt/s]':>15} {'messages [pt/s]':>16} {'ratio':>7} {'equal':>6}")
    for K, n, _, H, _ in T:
        if H:
            m = int(max(1000, args.thr_pairs // K))
            print(f"{K:>5} {n:>6} {m:>8} {H[0]:>15.0f} {H[1]:>16.0f} {H[0] / H[1]:>6.2f}x {str(H[2]):>6}")
    print("\n3. osPFWCP tau search (OneShotPFWCP.select): test points per second, default engine vs Monte Carlo"
          f"\n   (above K = 100 the MC engine is timed on one test point at every 6th tau, scaled to the 51 taus)")
    print(f"{'K':>5} {'n_k':>6} {'crit':>4} {'new [pt/s]':>11} {'MC [pt/s]':>10} {'new/MC':>8} {'feasible':>9}")
    for K, n, _, _, O in T:
        for crit, pn, pm, feas in O:
            print(f"{K:>5} {n:>6} {crit:>4} {pn:>11.2f} {pm:>10.3f} {pn / pm:>7.1f}x {feas:>9.2f}")
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} at the end")


if __name__ == "__main__":
    main()
