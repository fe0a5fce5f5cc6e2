"""One liar of K = 11 against PFWCP and osPFWCP, in process, through the server's checks (issue 30 item 2).

usage: python scripts/redteam/attack_one_liar.py [--seeds 20] [--out results/flower_pipeline/one_liar.json]

Agents 0..10 hold n = 100 scores each (Gamma(2), so every run should cover about 1 - alpha), weights lognormal(0, 1.5) scaled to mean 1 (a density
ratio has mean 1 under its agent), m = 500 test points with test weights lognormal(0, 1). Agent 5 lies within every
check the server makes, in each of the settings below, and the thresholds are computed from what the server accepts:
  before   the checks of 88ff6f7: its summary claims n_eff = n, W = n (PFWCP) or W = 1e300 (osPFWCP); its PFWCP quantiles are
           +inf wherever its test weight is positive ("inf") or 0 ("zero"); its one-shot message: quantile 0 with the
           largest mass above allowed, weight_above = beta_breve W
  default  the bounded-influence checks with the default weight range (1e-6, 1e6) of the mean weight: W = n x 1e-6
           (inf) or n x 1e6 (zero, one-shot), +inf only where t/(W + t) > beta (else 0), as `check_inf_consistent` allows
  tight    the same with an agreed weight range (0.5, 2)
  +cap2    the robust option on top (`agg_cap=2`: an agent's n_eff counts at most twice the median of the others')
Prints and writes, per setting and run (PFWCP-MC, PFWCP-CCC, osPFWCP-MC, osPFWCP-CCC): coverage, the infinite share
and the median finite threshold, mean over the seeds, beside the honest federation's."""
import argparse, json, sys, warnings
import numpy as np
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration, AgentMessage, AgentSummary
from pfwcp_nb.oneshot import OneShotPFWCP, OneShotMessage
from pfwcp_nb.federation.protocol import check_summary, check_message, check_oneshot, WEIGHT_RANGE
from pfwcp_nb.federation.server import capped_agg_weights

K, N, M, LIAR, ALPHA, CAP = 11, 100, 500, 5, 0.1, 2.0
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
        W = N * (wr[0] if strategy == "inf" and not oneshot else wr[1])
    s = AgentSummary(n_eff=float(N), weight_total=W, n=N)
    return check_summary(s.to_dict(), "liar", max_n=N, weight_range=wr)          # what the server accepts


def liar_message(setting, strategy, s, beta, t):
    "+inf where allowed (inf) or where forced (zero), 0 elsewhere; checked as the server checks it."
    if SETTINGS[setting] is None:
        q = np.where(t > 0, np.inf, 0.0) if strategy == "inf" else np.zeros_like(t)
        return check_message(AgentMessage(q, beta).to_dict(), "liar", beta, t)
    inf = t * (1 - beta) > beta * s.weight_total * (1 + 1e-6)
    q = np.where(inf, np.inf, 0.0)
    return check_message(AgentMessage(q, beta).to_dict(), "liar", beta, t, weight_total=s.weight_total)


def runs(agents, tw, setting, strategy, cap=None):
    "Thresholds of the four runs with the liar (setting None: no liar); `cap`: the robust option's agg_cap."
    out = {}
    w = lambda summ: {} if cap is None else {"agg_weights": capped_agg_weights(summ, cap)}
    for delta, cr in ((None, "mc"), (0.1, "ccc")):
        summ = [a.summary() for a in agents]
        if setting is not None:
            summ[LIAR] = liar_summary(setting, strategy, False)
        model = PFWCP(ALPHA, delta, **w(summ)).calibrate(summ)
        b = float(model.beta_)
        msgs = [a.message(b, tw[:, k]) for k, a in enumerate(agents)]
        if setting is not None:
            msgs[LIAR] = liar_message(setting, strategy, summ[LIAR], b, tw[:, LIAR])
        out[f"pfwcp-{cr}"] = model.combine(msgs)
        summ = [a.summary() for a in agents]
        if setting is not None:
            summ[LIAR] = liar_summary(setting, strategy, True)
        os_model = OneShotPFWCP(ALPHA, delta, **w(summ))
        level = os_model.plan(summ)
        om = [a.oneshot_message(level) for a in agents]
        if setting is not None:
            W = summ[LIAR].weight_total
            lie = OneShotMessage(quantile=0.0, weight_total=W, weight_above=level * W, n_eff=float(N), beta_breve=level)
            om[LIAR] = check_oneshot(lie.to_dict(), "liar", summ[LIAR], level)
        out[f"ospfwcp-{cr}"] = os_model.calibrate(om).threshold(tw)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--out", default="results/flower_pipeline/one_liar.json")
    a = ap.parse_args(argv)
    if a.seeds < 1:
        ap.error("argument --seeds: must be >= 1")
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(a.seeds):
            agents, tw, test = federation(seed)
            cases = ([("honest", None, "-", None), ("honest+cap2", None, "-", CAP)]
                     + [(st, st, sg, None) for st in SETTINGS for sg in ("inf", "zero")]
                     + [(st + "+cap2", st, sg, CAP) for st in ("default", "tight") for sg in ("inf", "zero")])
            for name, setting, strategy, cap in cases:
                for run, q in runs(agents, tw, setting, strategy, cap).items():
                    fin = np.isfinite(q)
                    rows.append(dict(seed=seed, setting=name, strategy=strategy, run=run, coverage=float(np.mean(test <= q)),
                                     infinite_share=float(np.mean(~fin)),
                                     median_finite=float(np.median(q[fin])) if fin.any() else None))
    summary = {}
    for r in rows:
        key = f"{r['setting']}/{r['strategy']}/{r['run']}"
        summary.setdefault(key, []).append(r)
    table = {k: {"coverage": float(np.mean([r["coverage"] for r in v])),
                 "worst_coverage": float(np.min([r["coverage"] for r in v])),
                 "infinite_share": float(np.mean([r["infinite_share"] for r in v])),
                 "median_finite": float(np.median([r["median_finite"] for r in v if r["median_finite"] is not None]))}
             for k, v in summary.items()}
    out = {"command": "python scripts/redteam/attack_one_liar.py" + ("" if a.seeds == 20 else f" --seeds {a.seeds}"),
           "K": K, "n": N, "m": M, "liar": LIAR, "alpha": ALPHA, "seeds": a.seeds, "table": table}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"{'setting/strategy/run':32s} coverage (worst)  infinite share  median finite threshold")
    for k, v in table.items():
        print(f"{k:32s} {v['coverage']:.3f} ({v['worst_coverage']:.3f})   {v['infinite_share']:.3f}           {v['median_finite']:.3f}")


if __name__ == "__main__":
    sys.exit(main())
