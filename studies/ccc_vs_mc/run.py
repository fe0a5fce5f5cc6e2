"""Why seven (method, dataset) cells of the severe grid cover less with the CCC variant than with the MC variant.

    python studies/ccc_vs_mc/run.py [--datasets crime cifar10c star gaussian] [--draws 60] [--m 200] [--cache .pfwcp_cache]
        [--out results/ccc_vs_mc]

Same trained setups as `pfwcp-experiments` (severe, seed 0, estimated weights; trained into --cache if missing), the
first --draws calibration draws with --m test points each. Per draw and method it records, for the MC and the CCC
variant: mean coverage, and the quantities that explain the ordering of the two thresholds:

* FWCP-QQ: the coverage of every agent's omega'-weighted local quantile (at the MC level 1-beta-bar and at the CCC level
  1-beta-bar_c), sorted, so the order statistic each variant reads (5th / 2nd of 11 for n_k = 100) can be compared;
* osPFWCP / osPFWGLCP: the one-shot level beta_breve of each variant (Procedure 1's beta*, the package default), the
  share of test points with no feasible tau (capped at the most conservative tau, i.e. the largest one-shot quantile),
  the share of test points whose CCC threshold is below the MC one; the same with one shared beta_breve = alpha and
  with the rule of 07's wrappers (`--rules cp`: the rank of the test agent's own CP quantile for the guarantee).

Writes per_draw.csv (one row per dataset x draw x method) and summary.csv / summary.md (means over draws).
"""
import argparse, os, sys, time, warnings
import numpy as np
import pandas as pd
from pfwcp_nb import grid, pipeline
from pfwcp_nb.cache import ResultCache, RunConfig
from pfwcp_nb.methods import qq_choice, run_method
from pfwcp_nb.pfwcp import AgentCalibration
from pfwcp_nb.data import make_federation
from pfwcp_nb.pipeline import pool_localizer_samples, frozen_localizer
from pfwcp_nb.cache import frozen_noise
from pfwcp_nb.oneshot import oneshot_level
from pfwcp_nb.quantiles import weighted_quantile
from pfwcp_nb.oneshot import OneShotPFWCP


def agents_of(scores, weights) -> list:
    "One `AgentCalibration` per agent (what the package's private `baselines._agents` did at the time)."
    return [AgentCalibration(s, w) for s, w in zip(scores, weights)]


def thresholds_from_localized(d, q, fin):
    "Thresholds on the score scale for localized levels q: `d.loc_inverse` where `fin`, +inf elsewhere."
    out = np.full(d.m, np.inf)
    if fin.any():
        out[fin] = np.asarray(d.loc_inverse(np.where(fin, q, 1.0)), dtype=float)[fin]
    return out

ALPHA = DELTA = 0.1

def true_scores(d):
    "Score of the true response of every test point (regression: the scores; classification: the true label's)."
    return d.test_scores if d.task == "regression" else d.test_scores[np.arange(d.m), d.test_labels]

def fwcp_qq_row(d):
    "FWCP-QQ: coverage of each variant and of every agent's local quantile at each variant's level."
    row, st = {}, true_scores(d)
    for g, dl in (("mc", None), ("ccc", DELTA)):
        ch = qq_choice(d.n, ALPHA, dl)
        q = np.column_stack([weighted_quantile(s, w, alpha=ch.beta, inf_weight=d.fwcp_test_weights)
                             for s, w in zip(d.cal_scores, d.fwcp_cal_weights)])            # (m, K)
        t = run_method(d, "FWCP-QQ", ALPHA, dl)
        row[f"cov_{g}"] = float((st <= t).mean())
        row[f"beta_{g}"], row[f"order_stat_{g}"] = ch.beta, int(np.ceil(d.K * (1 - ch.tau) - 1e-9))
        cov_k = np.sort((st[:, None] <= q).mean(axis=0))                            # sorted over agents
        row[f"agent_cov_min_{g}"], row[f"agent_cov_max_{g}"] = cov_k[0], cov_k[-1]
        row[f"agent_cov_read_{g}"] = cov_k[row[f"order_stat_{g}"] - 1]
        row[f"inf_local_{g}"] = float(np.isinf(q).mean())
        row[f"inf_{g}"] = float(np.isinf(t).mean())
    return row

RULES = {"default": lambda dl, n1: None,                      # Procedure 1's beta* of the guarantee (estimator default)
         "alpha": lambda dl, n1: ALPHA,                      # one level for both guarantees
         "cp": lambda dl, n1: oneshot_level(ALPHA, dl, n1)}  # the default rule of 03 (test agent's CP rank)

def oneshot_row(d, localized: bool, rules=("default", "alpha")):
    "osPFWCP (or osPFWGLCP): per-variant beta_breve, infeasible share, ordering of the thresholds; default and shared beta_breve."
    sc, cw, tw = ((d.loc_cal_scores, d.loc_cal_weights, d.loc_test_weights) if localized
                  else (d.cal_scores, d.cal_weights, d.test_weights))
    ag = agents_of(sc, cw)
    row = {}
    for rule in rules:
        thr = {}
        for g, dl in (("mc", None), ("ccc", DELTA)):
            est = OneShotPFWCP(ALPHA, dl).calibrate(ag, beta_breve=RULES[rule](dl, sc[0].size))
            sel = est.select(tw)
            q = est.tau_thresholds_[sel.index]
            t = thresholds_from_localized(d, q, np.isfinite(q) & (q < 1.0)) if localized else q
            thr[g] = t
            row[f"{rule}_beta_{g}"] = est.beta_breve_
            row[f"{rule}_infeasible_{g}"] = float((~sel.feasible).mean())
            row[f"{rule}_cov_{g}"] = float((true_scores(d) <= t).mean())
            row[f"{rule}_feasible_mask_{g}"] = sel.feasible
        below = thr["ccc"] < thr["mc"]
        row[f"{rule}_ccc_below_mc"] = float(below.mean())
        row[f"{rule}_below_and_ccc_infeasible"] = float((below & ~row[f"{rule}_feasible_mask_ccc"]).mean())
        for g in ("mc", "ccc"):
            del row[f"{rule}_feasible_mask_{g}"]
    return row

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="+", default=["crime", "cifar10c", "star", "gaussian"])
    ap.add_argument("--draws", type=int, default=60)
    ap.add_argument("--m", type=int, default=200)
    ap.add_argument("--cache", default=".pfwcp_cache")
    ap.add_argument("--out", default="results/ccc_vs_mc")
    ap.add_argument("--no-oneshot", action="store_true", help="FWCP-QQ only (fast)")
    ap.add_argument("--rules", nargs="+", default=["default", "alpha"], choices=list(RULES),
                    help="one-shot levels to compare (default: Procedure 1's beta* and alpha)")
    ap.add_argument("--no-fwcp-qq", action="store_true", help="one-shot methods only")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    data_dir = os.environ.get("PFWCP_DATA_DIR")
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for ds in args.datasets:
        cfg = RunConfig(ds)
        cache = ResultCache(args.cache)
        loc = not args.no_oneshot
        st = grid.ensure_setup(cfg, cache, data_dir=data_dir, need_localizer=loc, progress=False)
        fed = make_federation(cfg.dataset, cfg.heterogeneity, K=cfg.K, seed=cfg.seed, data_dir=data_dir)
        pool = pool_localizer_samples(st, fed) if loc else None     # as the runner builds them (pooled on real data,
        frozen = frozen_localizer(st) if loc and pool is None and frozen_noise(ds) else None   # frozen on synthetic)
        t0 = time.perf_counter()
        for s in range(args.draws):
            d = pipeline.sample_draw(st, fed, s, n_test=args.m, localize=loc, loc_pool=pool, loc_frozen=frozen)["estimated"]
            if not args.no_fwcp_qq:
                rows.append(dict(dataset=ds, draw=s, method="FWCP-QQ", **fwcp_qq_row(d)))
            if loc:
                rows.append(dict(dataset=ds, draw=s, method="osPFWCP", **oneshot_row(d, False, args.rules)))
                rows.append(dict(dataset=ds, draw=s, method="osPFWGLCP", **oneshot_row(d, True, args.rules)))
        print(f"{ds}: {args.draws} draws in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    df = pd.DataFrame(rows)
    df.to_csv(os.path.join(args.out, "per_draw.csv"), index=False)
    summ = df.drop(columns="draw").groupby(["dataset", "method"], sort=False).mean()
    summ.to_csv(os.path.join(args.out, "summary.csv"))
    print(summ.T.to_string(float_format=lambda v: f"{v:.4f}"))

if __name__ == "__main__":
    main()
