"""Candidate rules for osPFWCP's one-shot level beta_breve, measured with oracle and estimated weights.

    python studies/oneshot_beta_breve_rules/run.py --dataset gaussian --weights oracle --heterogeneity mild \
        [--draws 100] [--m 200] [--rules beta* alpha worst] [--cache .pfwcp_cache] [--out results/oneshot_beta_breve_rules]

Rules (alpha = delta = 0.1):
  beta*   Procedure 1's beta* of the guarantee (the package default; MC and CCC get different levels)
  alpha   beta_breve = alpha, the most conservative beta of Procedure 1's grid, shared by MC and CCC
  alpha/2 beta_breve = alpha / 2 (shared)
  cp      the level at which the test agent's own one-shot quantile is its split-conformal quantile for the guarantee:
          beta_breve = 1 - r/n_1 with r = ceil((1-a)(n_1+1)), a = alpha (MC) or CP's Beta-adjusted alpha* (CCC); then
          tau = 0 meets the criterion for every test weight (agent 1's level does not depend on X)
  worst   the largest beta in Procedure 1's grid (extended down to alpha/4) at which the CCC criterion is feasible at
          tau = 0 for a high test weight of every agent: the importance-weighted (1-delta)-quantile of its calibration
          weights (an estimate of the (1-delta)-quantile of omega^k(X), X ~ P^1), using weight_above <= beta * weight_total
          (shared by MC and CCC)

Same trained setups and draws as `pfwcp-experiments` (seed 0). For every draw, rule and guarantee: empirical coverage,
median threshold, share of test points with no feasible tau. Appends one CSV per run to --out and prints a summary:
MC = mean coverage (+- s.e.), CCC = share of draws with coverage >= 1 - alpha (+- s.e.).
"""
import argparse, json, os, sys, time, warnings
import numpy as np
import pandas as pd
from pfwcp_nb import grid, pipeline
from pfwcp_nb.cache import ResultCache, RunConfig
from pfwcp_nb.pfwcp import AgentCalibration
from pfwcp_nb.data import make_federation
from pfwcp_nb.procedure import ccc_alpha
from pfwcp_nb.oneshot import OneShotPFWCP
from pfwcp_nb.procedure import paper_grid, FEAS_TOL
from pfwcp_nb.coverage import coverage_objective
from pfwcp_nb.quantiles import weighted_quantile


def agents_of(scores, weights) -> list:
    "One `AgentCalibration` per agent (what the package's private `baselines._agents` did at the time)."
    return [AgentCalibration(s, w) for s, w in zip(scores, weights)]

ALPHA = DELTA = 0.1

def worst_weight_level(agents, weights, alpha: float, delta: float) -> float:
    "Largest beta (Procedure 1's grid, extended to alpha/4) whose tau=0 CCC criterion holds at a high test weight."
    n_eff = np.array([a.summary().n_eff for a in agents])
    wbar = np.array([a.summary().weight_total for a in agents])
    hi = np.array([weighted_quantile(w, w, alpha=delta) for w in weights])   # omega^k(X), X ~ P^1
    betas = np.unique(np.concatenate([paper_grid(alpha)[0], [alpha / 2, alpha / 4]]))[::-1]
    lv = (hi[None, :] + betas[:, None] * wbar[None, :]) / (wbar[None, :] + hi[None, :])     # (R, K) upper bounds
    obj = coverage_objective(lv, n_eff, np.array([0.0]), alpha)[:, 0]
    ok = obj >= 1.0 - delta - FEAS_TOL
    return float(betas[np.argmax(ok)] if ok.any() else betas[-1])

def cp_level(alpha: float, delta, n1: int) -> float:
    "beta_breve = 1 - r/n_1, r = CP's rank for the guarantee (MC: alpha; CCC: alpha* of the Beta adjustment, n = n_1)."
    a = alpha if delta is None else ccc_alpha(alpha, delta, n1)
    r = int(np.ceil((1.0 - a) * (n1 + 1) - 1e-9))
    if r > n1:
        raise ValueError(f"n_1={n1} test-agent points cannot certify the guarantee alone; pass beta_breve.")
    return 1.0 - r / n1

def level(rule: str, agents, delta, weights):
    if rule == "cp":
        return cp_level(ALPHA, delta, agents[0].summary().n)
    if rule == "beta*":
        return None
    if rule == "alpha":
        return ALPHA
    if rule == "alpha/2":
        return ALPHA / 2
    if rule == "worst":
        return worst_weight_level(agents, weights, ALPHA, DELTA)
    raise ValueError(f"unknown rule {rule!r}")

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--weights", default="estimated", choices=["estimated", "oracle"])
    ap.add_argument("--heterogeneity", default="severe", choices=["severe", "moderate", "mild"])
    ap.add_argument("--draws", type=int, default=100)
    ap.add_argument("--m", type=int, default=200)
    ap.add_argument("--rules", nargs="+", default=["beta*", "alpha", "worst"])
    ap.add_argument("--cache", default=".pfwcp_cache")
    ap.add_argument("--out", default="results/oneshot_beta_breve_rules")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    data_dir = os.environ.get("PFWCP_DATA_DIR")
    cfg = RunConfig(args.dataset, heterogeneity=args.heterogeneity)
    st = grid.ensure_setup(cfg, ResultCache(args.cache), data_dir=data_dir, need_localizer=False, progress=False)
    fed = make_federation(cfg.dataset, cfg.heterogeneity, K=cfg.K, seed=cfg.seed, data_dir=data_dir)
    rows, t0 = [], time.perf_counter()
    for s in range(args.draws):
        d = pipeline.sample_draw(st, fed, s, n_test=args.m, weights=(args.weights,), localize=False)[args.weights]
        st_true = d.test_scores if d.task == "regression" else d.test_scores[np.arange(d.m), d.test_labels]
        ag = agents_of(d.cal_scores, d.cal_weights)
        for rule in args.rules:
            for g, dl in (("mc", None), ("ccc", DELTA)):
                est = OneShotPFWCP(ALPHA, dl).calibrate(ag, beta_breve=level(rule, ag, dl, d.cal_weights))
                sel = est.select(d.test_weights)
                t = est.tau_thresholds_[sel.index]
                size = (2 * np.median(t) if d.task == "regression"
                        else float((d.test_scores <= t[:, None]).sum(axis=1).mean()))
                rows.append(dict(dataset=args.dataset, heterogeneity=args.heterogeneity, weights=args.weights,
                                 draw=s, rule=rule, guarantee=g, beta_breve=est.beta_breve_,
                                 coverage=float((st_true <= t).mean()), size=size,
                                 infeasible=float((~sel.feasible).mean())))
    secs = time.perf_counter() - t0
    df = pd.DataFrame(rows)
    os.makedirs(args.out, exist_ok=True)
    tag = f"{args.dataset}_{args.heterogeneity}_{args.weights}_{args.draws}x{args.m}"
    df.to_csv(os.path.join(args.out, f"{tag}.csv"), index=False)
    print(f"# {' '.join(sys.argv)}   ({args.draws} draws x {args.m} test points, {secs:.0f} s)")
    print(summarise(df).to_string(index=False))

def summarise(df: pd.DataFrame) -> pd.DataFrame:
    "Per dataset/heterogeneity/weights/rule/guarantee: MC, CCC (with s.e.), median size, infeasible share, beta_breve."
    def f(g):
        c = g.coverage.to_numpy(); ok = c >= 1 - ALPHA - 1e-12; n = len(c)
        return pd.Series(dict(MC=100 * c.mean(), MC_se=100 * c.std(ddof=1) / np.sqrt(n), CCC=100 * ok.mean(),
                              CCC_se=100 * np.sqrt(ok.mean() * (1 - ok.mean()) / n), size=g["size"].median(),
                              infeasible_pct=100 * g.infeasible.mean(), beta_breve=g.beta_breve.mean(), draws=n))
    keys = ["dataset", "heterogeneity", "weights", "rule", "guarantee"]
    return df.groupby(keys, sort=False).apply(f).reset_index().round(3)

if __name__ == "__main__":
    main()
