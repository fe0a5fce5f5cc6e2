"""f liars of K agents against PFWCP and osPFWCP, in process, through the server's checks (the deployed defaults: outside red team).

usage: python studies/redteam/attack_one_liar.py [--seeds 20] [--liars 1] [--K 11] [--out results/flower_pipeline/one_liar.json]
       python studies/redteam/attack_one_liar.py --table FILE [FILE ...]     # the deployed defaults' table of stored runs

Agents 0..K-1 (K = 11 unless --K) hold n = 100 scores each (Gamma(2), so every run should cover about 1 - alpha), weights lognormal(0, 1.5) scaled to mean 1 (a density
ratio has mean 1 under its agent), m = 500 test points with test weights lognormal(0, 1). Agent K // 2 (with --liars 2:
agents K // 2 and K // 2 + 1; K = 11: 5 and 6, K = 3: 1 and 2) lies within every check the server makes, in each of
the settings below, and the thresholds are computed from what the server accepts:
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
  deployed the deployed apps' defaults (notebook 10g_federation_deploy): the default weight range (1e-6, 1e6), the
           robust aggregation on (`agg-cap` = AGG_CAP = 2), PFWCP's robust reading of the answers on (`answer-bound` =
           ANSWER_BOUND, server.bounded_answers) and a finite score range, which the run config must name: (0, 20)
           here; strategies inf, zero and up (against "honest+deployed", the honest federation at the same defaults;
           "honest+cap2" beside it is the honest federation without the robust reading)
Strategy up: the upward lie alone: an honest-looking summary (n_eff = n, mean weight 1), +inf only where that forces it,
the score range's top everywhere else (one-shot: the top, no weight above it).
Prints and writes, per setting and run (PFWCP-MC, PFWCP-CCC, osPFWCP-MC, osPFWCP-CCC): coverage, the infinite share
and the median finite threshold, mean over the seeds, beside the honest federation's."""
import argparse, json, sys, warnings
import numpy as np
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration, AgentMessage, AgentSummary
from pfwcp_nb.oneshot import OneShotPFWCP, OneShotMessage
from pfwcp_nb.federation.protocol import check_summary, check_message, check_oneshot, WEIGHT_RANGE
from pfwcp_nb.federation.server import capped_agg_weights, robust_aggregate
from pfwcp_nb.federation.deploy import AGG_CAP, ANSWER_BOUND

N, M, ALPHA, CAP, TOP = 100, 500, 0.1, 2.0, 20.0
K, LIARS = 11, (5, 6)        # set by --K: the first f of LIARS lie
SETTINGS = {"before": None, "default": WEIGHT_RANGE, "tight": (0.5, 2.0)}
DEPLOYED = {"deployed": WEIGHT_RANGE}   # the deployed apps' defaults: this weight range, agg-cap AGG_CAP, a named score range
RUNS = ("pfwcp-mc", "pfwcp-ccc", "ospfwcp-mc", "ospfwcp-ccc")
TARGET = dict(coverage=0.02, infinite_share=0.05, width=1.5)   # one liar at the deployed defaults, against the honest


def federation(seed):
    rng = np.random.default_rng(seed)
    scores = [rng.gamma(2.0, size=N) for _ in range(K)]
    weights = [np.ones(N)] + [(w := rng.lognormal(0, 1.5, N)) / w.mean() for _ in range(K - 1)]
    tw = rng.lognormal(0, 1.0, (M, K)); tw[:, 0] = 1.0
    return [AgentCalibration(s, w) for s, w in zip(scores, weights)], tw, rng.gamma(2.0, size=M)


def liar_summary(setting, strategy, oneshot):
    "The liar's summary: the weight total its strategy wants, as far as the checks of `setting` let it."
    wr = {**SETTINGS, **DEPLOYED}[setting]
    if wr is None:
        W = 1e300 if oneshot else float(N)
    else:
        W = float(N) if strategy == "up" else N * (wr[0] if strategy in ("inf", "top") and not oneshot else wr[1])
    s = AgentSummary(n_eff=float(N), weight_total=W, n=N)
    return check_summary(s.to_dict(), "liar", max_n=N, weight_range=wr)          # what the server accepts


def liar_message(setting, strategy, s, beta, t):
    "+inf where allowed (inf, top) or where forced (zero, up), 0 (top, up: the score range's top) elsewhere; checked as the server checks it."
    if {**SETTINGS, **DEPLOYED}[setting] is None:
        q = np.where(t > 0, np.inf, 0.0) if strategy == "inf" else np.zeros_like(t)
        return check_message(AgentMessage(q, beta).to_dict(), "liar", beta, t)
    inf = t * (1 - beta) > beta * s.weight_total * (1 + 1e-6)
    q = np.where(inf, np.inf, TOP if strategy in ("top", "up") else 0.0)
    return check_message(AgentMessage(q, beta).to_dict(), "liar", beta, t, score_range(setting), weight_total=s.weight_total)


def score_range(setting):
    "The agreed score range: finite (0, TOP) in the tight and deployed settings, the old default (0, inf) otherwise."
    return (0.0, TOP) if setting in ("tight", "deployed") else (0.0, np.inf)


def runs(agents, tw, setting, strategy, cap=None, f=1, bound=None):
    """Thresholds of the four runs with the first f of LIARS lying (setting None: no liar); `cap`: the robust option's
    agg_cap; `bound`: PFWCP's robust reading (answer_bound, as the server's `robust_aggregate`; None: off)."""
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
        out[f"pfwcp-{cr}"] = robust_aggregate(msgs, model.agg_weights_, model.tau_, bound)
        summ = [a.summary() for a in agents]
        for liar in LIARS[:f] if setting is not None else ():
            summ[liar] = liar_summary(setting, strategy, True)
        os_model = OneShotPFWCP(ALPHA, delta, **w(summ))
        level = os_model.plan(summ)
        om = [a.oneshot_message(level) for a in agents]
        for liar in LIARS[:f] if setting is not None else ():
            W = summ[liar].weight_total
            lie = (OneShotMessage(quantile=TOP, weight_total=W, weight_above=0.0, n_eff=float(N), beta_breve=level)
                   if strategy in ("top", "up") else
                   OneShotMessage(quantile=0.0, weight_total=W, weight_above=level * W, n_eff=float(N), beta_breve=level))
            om[liar] = check_oneshot(lie.to_dict(), "liar", summ[liar], level, score_range(setting))
        out[f"ospfwcp-{cr}"] = os_model.calibrate(om).threshold(tw)
    return out


def deployed_rows(d: dict) -> list:
    "One stored run's rows at the deployed defaults, per run: the honest federation and the lies, against the targets."
    t, rows = d["table"], []
    for run in RUNS:
        h, paper = t[f"honest+deployed/-/{run}"], t[f"honest/-/{run}"]
        lies = [t[f"deployed/{sg}/{run}"] for sg in ("inf", "zero", "up")]
        cov = max(lies[:2], key=lambda v: abs(v["coverage"] - h["coverage"]))["coverage"] - h["coverage"]
        inf = max(v["infinite_share"] for v in lies) - h["infinite_share"]
        width = lies[2]["median_finite"] / h["median_finite"]
        rows.append(dict(K=d["K"], f=len(d["liars"]), run=run, honest=h, moved=h["changed_share"],
                         honest_coverage=h["coverage"] - paper["coverage"], coverage=cov, infinite_share=inf, width=width,
                         met=abs(cov) <= TARGET["coverage"] and inf <= TARGET["infinite_share"] and width <= TARGET["width"]))
    return rows


def deployed_table(paths: list) -> str:
    "The markdown table of the deployed defaults' rows of the stored runs `paths` (docs/deploy.md quotes it)."
    lines = ["| K | liars | run | honest: coverage / infinite share / median threshold | honest, the defaults against no "
             "option: thresholds moved, coverage change | lies (inf, zero): coverage change, "
             "the larger | lies (inf, zero, up): infinite share change, the largest | upward lie (up): median threshold / "
             "honest's | target met (one liar: 2 points, 5 points, x1.5) |", "|---" * 9 + "|"]
    for p in paths:
        with open(p) as f:
            d = json.load(f)
        for r in deployed_rows(d):
            h = r["honest"]
            lines.append(f"| {r['K']} | {r['f']} | {r['run']} | {h['coverage']:.3f} / {h['infinite_share']:.3f} / "
                         f"{h['median_finite']:.2f} | {100 * r['moved']:.1f} %, {100 * r['honest_coverage']:+.1f} points | "
                         f"{100 * r['coverage']:+.1f} points | {100 * r['infinite_share']:+.1f} "
                         f"points | x{r['width']:.2f} | {('yes' if r['met'] else 'no') if r['f'] == 1 else '(no target)'} |")
    return "\n".join(lines)


def main(argv=None):
    global K, LIARS
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--liars", type=int, default=1, help="f: how many agents lie (1 or 2)")
    ap.add_argument("--K", type=int, default=11, help="agents, the test agent included (3..50; default 11)")
    ap.add_argument("--out", default=None, help="default results/flower_pipeline/one_liar.json (f = 1), f_liars.json; "
                                                "with --K other than 11, _K3 etc. before .json")
    ap.add_argument("--table", nargs="+", metavar="FILE", help="print the deployed defaults' table of these stored runs")
    a = ap.parse_args(argv)
    if a.table:
        print(deployed_table(a.table))
        return
    if a.seeds < 1:
        ap.error("argument --seeds: must be >= 1")
    if not 1 <= a.liars <= 2 or not 3 <= a.K <= 50:
        ap.error("argument --liars: must be 1 or 2; --K: in 3..50")
    K, LIARS = a.K, (a.K // 2, a.K // 2 + 1)
    suffix = "" if K == 11 else f"_K{K}"
    a.out = a.out or (f"results/flower_pipeline/one_liar{suffix}.json" if a.liars == 1 else
                      f"results/flower_pipeline/{a.liars}_liars{suffix}.json")
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(a.seeds):
            agents, tw, test = federation(seed)
            paper = {}                                     # run -> the honest federation's thresholds (no option)
            cases = ([("honest", None, "-", None), ("honest+cap2", None, "-", CAP)]
                     + [(st, st, sg, None) for st in SETTINGS for sg in ("inf", "zero")]
                     + [(st + "+cap2", st, sg, CAP) for st in ("default", "tight") for sg in ("inf", "zero")]
                     + [("tight", "tight", "top", None), ("tight+cap2", "tight", "top", CAP)]
                     + [("honest+cap1", None, "-", 1.0)] + [("tight+cap1", "tight", sg, 1.0) for sg in ("inf", "zero", "top")]
                     + [("honest+deployed", None, "-", AGG_CAP)]
                     + [("deployed", "deployed", sg, AGG_CAP) for sg in ("inf", "zero", "up")])
            for name, setting, strategy, cap in cases:
                bound = ANSWER_BOUND if name.endswith("deployed") else None
                for run, q in runs(agents, tw, setting, strategy, cap, a.liars, bound).items():
                    fin, ref = np.isfinite(q), paper.setdefault(run, q)      # the first case: the honest, paper's run
                    moved = ~((q == ref) | (np.isfinite(ref) & (np.abs(q - ref) <= 1e-12 * np.abs(ref))))   # +inf read finite: moved
                    rows.append(dict(seed=seed, setting=name, strategy=strategy, run=run, coverage=float(np.mean(test <= q)),
                                     infinite_share=float(np.mean(~fin)), changed_share=float(np.mean(moved)),
                                     median_finite=float(np.median(q[fin])) if fin.any() else None,
                                     mean_finite=float(np.mean(q[fin])) if fin.any() else None))
    summary = {}
    for r in rows:
        key = f"{r['setting']}/{r['strategy']}/{r['run']}"
        summary.setdefault(key, []).append(r)
    table = {k: {"coverage": float(np.mean([r["coverage"] for r in v])),
                 "worst_coverage": float(np.min([r["coverage"] for r in v])),
                 "infinite_share": float(np.mean([r["infinite_share"] for r in v])),
                 "changed_share": float(np.mean([r["changed_share"] for r in v])),
                 "median_finite": float(np.median([r["median_finite"] for r in v if r["median_finite"] is not None])),
                 "mean_finite": float(np.mean([r["mean_finite"] for r in v if r["mean_finite"] is not None]))}
             for k, v in summary.items()}
    out = {"command": "python studies/redteam/attack_one_liar.py" + ("" if a.seeds == 20 else f" --seeds {a.seeds}")
           + ("" if a.liars == 1 else f" --liars {a.liars}") + ("" if K == 11 else f" --K {K}"), "K": K, "n": N, "m": M, "liars": list(LIARS[:a.liars]),
           "alpha": ALPHA, "score_top": TOP, "seeds": a.seeds, "table": table}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"{'setting/strategy/run':32s} coverage (worst)  infinite share  median finite threshold")
    for k, v in table.items():
        print(f"{k:32s} {v['coverage']:.3f} ({v['worst_coverage']:.3f})   {v['infinite_share']:.3f}           {v['median_finite']:.3f}")


if __name__ == "__main__":
    sys.exit(main())
