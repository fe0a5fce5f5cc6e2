"""f liars of K = 11 against PFWCP and osPFWCP, in process, through the server's checks (issue 30 item 2).

usage: python studies/redteam/attack_one_liar.py [--seeds 20] [--liars 1] [--out results/flower_pipeline/one_liar.json]

Agents 0..10 hold n = 100 scores each (Gamma(2), so every run should cover about 1 - alpha), weights lognormal(0, 1.5) scaled to mean 1 (a density
ratio has mean 1 under its agent), m = 500 test points with test weights lognormal(0, 1). Agent 5 (with --liars 2:
agents 5 and 6) lies within every check the server makes, in each of the settings below, and the thresholds are
computed from what the server accepts:
  before   the checks of 88ff6f7: its summary claims n_eff = n, W = n (PFWCP) or W = 1e300 (osPFWCP); its PFWCP quantiles are
           +inf wherever its test weight is positive ("inf") or 0 ("zero"); its one-shot message: quantile 0 with the
           largest mass above allowed, weight_above = beta_breve W
  default  the bounded-influence checks with the default weight range (1e-6, 1e6) of the mean weight: W = n x 1e-6
           (inf) or n x 1e6 (zero, one-shot), +inf only where t/(W + t) > beta (else 0), as `check_inf_consistent` allows
  tight    the same with an agreed weight range (0.5, 2) and the finite agreed score range (0, 20) (Gamma(2) scores
           exceed 20 with probability 4e-8); strategy "top": +inf where allowed, else the range's top 20 (PFWCP), and
           a one-shot quantile of 20 with no weight above it: the largest upward lie the checks admit
  +cap2    the robust option on top (`agg_cap=2`: an agent's n_eff counts at most twice the median of the others')
  +cap1    the same with `agg_cap=1` (at most the median of the others': one agent's share below 1/K of the others')
Prints and writes, per setting and run (PFWCP-MC, PFWCP-CCC, osPFWCP-MC, osPFWCP-CCC): coverage, the infinite share
and the median finite threshold, mean over the seeds, beside the honest federation's."""
import argparse, json, sys, warnings
import numpy as np
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration, AgentMessage, AgentSummary
from pfwcp_nb.oneshot import OneShotPFWCP, OneShotMessage
from pfwcp_nb.federation.protocol import check_summary, check_message, check_oneshot, WEIGHT_RANGE
from pfwcp_nb.federation.server import capped_agg_weights

K, N, M, ALPHA, CAP, TOP = 11, 100, 500, 0.1, 2.0, 20.0
LIARS = (5, 6)        # the first f of them lie
SETTINGS = {"before": None, "default": WEIGHT_RANGE, "tight": (0.5, 2.0)}


def federation(seed):
    rng = np.random.default_rng(seed)
    scores = [rng.gamma(2.0, size=N) for _ in range(K)]
    weights = [np.ones(N)] + [(w := rng.lognormal(0, 1.5, N)) / w.mean() for _ in range(K - 1)]
    tw = rng.lognormal(0, 1.0, (M, K)); tw[:, 0] = 1.0
    return [AgentCalibration(s, w) for s, w in zip(scores, weights)], tw, rng.gamma(2.0, size=M)


def liar_summary(setting, strategy, oneshot):
    "The liar's summary: the weight total its strategy wants, as far as the checks of `setting` let it."
    wr = SETTINGS[setting]
    if wr is None:
        W = 1e300 if oneshot else float(N)
    else:
        W = N * (wr[0] if strategy in ("inf", "top") and not oneshot else wr[1])
    s = AgentSummary(n_eff=float(N), weight_total=W, n=N)
    return check_summary(s.to_dict(), "liar", max_n=N, weight_range=wr)          # what the server accepts


def liar_message(setting, strategy, s, beta, t):
    "+inf where allowed (inf, top) or where forced (zero), 0 (top: the score range's top) elsewhere; checked as the server checks it."
    if SETTINGS[setting] is None:
        q = np.where(t > 0, np.inf, 0.0) if strategy == "inf" else np.zeros_like(t)
        return check_message(AgentMessage(q, beta).to_dict(), "liar", beta, t)
    inf = t * (1 - beta) > beta * s.weight_total * (1 + 1e-6)
    q = np.where(inf, np.inf, TOP if strategy == "top" else 0.0)
    return check_message(AgentMessage(q, beta).to_dict(), "liar", beta, t, score_range(setting), weight_total=s.weight_total)


def score_range(setting):
    "The agreed score range: finite (0, TOP) in the tight setting, the old default (0, inf) otherwise."
    return (0.0, TOP) if setting == "tight" else (0.0, np.inf)


def runs(agents, tw, setting, strategy, cap=None, f=1):
    "Thresholds of the four runs with the first f of LIARS lying (setting None: no liar); `cap`: the robust option's agg_cap."
    out = {}
    w = lambda summ: {} if cap is None else {"agg_weights": capped_agg_weights(summ, cap)}
    for delta, cr in ((None, "mc"), (0.1, "ccc")):
        summ = [a.summary() for a in agents]
        for liar in LIARS[:f] if setting is not None else ():
            summ[liar] = liar_summary(setting, strategy, False)
        model = PFWCP(ALPHA, delta, **w(summ)).calibrate(summ)
        b = float(model.beta_)
        msgs = [a.message(b, tw[:, k]) for k, a in enumerate(agents)]
        for liar in LIARS[:f] if setting is not None else ():
            msgs[liar] = liar_message(setting, strategy, summ[liar], b, tw[:, liar])
        out[f"pfwcp-{cr}"] = model.combine(msgs)
        summ = [a.summary() for a in agents]
        for liar in LIARS[:f] if setting is not None else ():
            summ[liar] = liar_summary(setting, strategy, True)
        os_model = OneShotPFWCP(ALPHA, delta, **w(summ))
        level = os_model.plan(summ)
        om = [a.oneshot_message(level) for a in agents]
        for liar in LIARS[:f] if setting is not None else ():
            W = summ[liar].weight_total
            lie = (OneShotMessage(quantile=TOP, weight_total=W, weight_above=0.0, n_eff=float(N), beta_breve=level)
                   if strategy == "top" else
                   OneShotMessage(quantile=0.0, weight_total=W, weight_above=level * W, n_eff=float(N), beta_breve=level))
            om[liar] = check_oneshot(lie.to_dict(), "liar", summ[liar], level, score_range(setting))
        out[f"ospfwcp-{cr}"] = os_model.calibrate(om).threshold(tw)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--liars", type=int, default=1, help=f"f: how many agents lie (1..{len(LIARS)})")
    ap.add_argument("--out", default=None, help="default results/flower_pipeline/one_liar.json (f = 1), f_liars.json")
    a = ap.parse_args(argv)
    if a.seeds < 1:
        ap.error("argument --seeds: must be >= 1")
    if not 1 <= a.liars <= len(LIARS):
        ap.error(f"argument --liars: must be in 1..{len(LIARS)}")
    a.out = a.out or ("results/flower_pipeline/one_liar.json" if a.liars == 1 else
                      f"results/flower_pipeline/{a.liars}_liars.json")
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(a.seeds):
            agents, tw, test = federation(seed)
            cases = ([("honest", None, "-", None), ("honest+cap2", None, "-", CAP)]
                     + [(st, st, sg, None) for st in SETTINGS for sg in ("inf", "zero")]
                     + [(st + "+cap2", st, sg, CAP) for st in ("default", "tight") for sg in ("inf", "zero")]
                     + [("tight", "tight", "top", None), ("tight+cap2", "tight", "top", CAP)]
                     + [("honest+cap1", None, "-", 1.0)] + [("tight+cap1", "tight", sg, 1.0) for sg in ("inf", "zero", "top")])
            for name, setting, strategy, cap in cases:
                for run, q in runs(agents, tw, setting, strategy, cap, a.liars).items():
                    fin = np.isfinite(q)
                    rows.append(dict(seed=seed, setting=name, strategy=strategy, run=run, coverage=float(np.mean(test <= q)),
                                     infinite_share=float(np.mean(~fin)),
                                     median_finite=float(np.median(q[fin])) if fin.any() else None,
                                     mean_finite=float(np.mean(q[fin])) if fin.any() else None))
    summary = {}
    for r in rows:
        key = f"{r['setting']}/{r['strategy']}/{r['run']}"
        summary.setdefault(key, []).append(r)
    table = {k: {"coverage": float(np.mean([r["coverage"] for r in v])),
                 "worst_coverage": float(np.min([r["coverage"] for r in v])),
                 "infinite_share": float(np.mean([r["infinite_share"] for r in v])),
                 "median_finite": float(np.median([r["median_finite"] for r in v if r["median_finite"] is not None])),
                 "mean_finite": float(np.mean([r["mean_finite"] for r in v if r["mean_finite"] is not None]))}
             for k, v in summary.items()}
    out = {"command": "python studies/redteam/attack_one_liar.py" + ("" if a.seeds == 20 else f" --seeds {a.seeds}")
           + ("" if a.liars == 1 else f" --liars {a.liars}"), "K": K, "n": N, "m": M, "liars": list(LIARS[:a.liars]),
           "alpha": ALPHA, "score_top": TOP, "seeds": a.seeds, "table": table}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"{'setting/strategy/run':32s} coverage (worst)  infinite share  median finite threshold")
    for k, v in table.items():
        print(f"{k:32s} {v['coverage']:.3f} ({v['worst_coverage']:.3f})   {v['infinite_share']:.3f}           {v['median_finite']:.3f}")


if __name__ == "__main__":
    sys.exit(main())
