"""What private training costs: the predictor and the pairwise ratio classifiers trained with DP-SGD
(`pfwcp_nb.privacy.private_train_kw`) at a target epsilon of the test agent, against the non-private paper schedule,
on the value benchmark's setting (seed 0, K = 11, severe shift, n_1 = 100, 500 test points per draw).

    python studies/privacy/run.py --datasets gaussian protein --eps 1 4 8 inf --n-sims 100 --out results/privacy
    python studies/privacy/run.py --table setups --dir results/privacy      # the tables of studies/privacy/README.md
    python studies/privacy/run.py --table coverage --dir results/privacy

`--out DIR` appends to DIR/setups.csv (one row per trained setup: epsilon of the test agent and of the others, the
predictor's test MSE, the ratios' quality against the true ratios) and DIR/draws.csv (one row per draw, method and
guarantee: coverage, mean size of the finite sets, infinite share). The draws are the same points at every epsilon
(the draw's stream depends on the seed only), so the non-private run and local CP pair with them draw by draw.
"""
import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from pfwcp_nb.data import make_federation, DATASETS
from pfwcp_nb.pipeline import train_setup, sample_draw
from pfwcp_nb.methods import run_method
from pfwcp_nb.metrics import evaluate_thresholds
from pfwcp_nb.density_ratio import ratio_quality, oracle_density_ratios
from pfwcp_nb.privacy import private_train_kw, setup_epsilons

ALPHA, DELTA_CCC, K, N1, M_TEST = 0.1, 0.1, 11, 100, 500
METHODS = ("CP", "PFWCP", "Recommended")


def parse_eps(s: str) -> float:
    v = float(s)
    if not (v > 0): raise argparse.ArgumentTypeError(f"{s!r}: an epsilon > 0, or inf for the non-private run")
    return v


def setup(ds: str, eps: float):
    "The trained setup of `ds` at target epsilon `eps` of the test agent (inf: the paper's non-private schedule)."
    kw = None if math.isinf(eps) else private_train_kw(eps, K)
    t0 = time.perf_counter()
    st = train_setup(ds, "severe", seed=0, K=K, train_kw=kw, need_localizer=False, progress=False)
    return st, kw, time.perf_counter() - t0


def setup_row(ds, eps, st, kw, fed, secs) -> dict:
    "Epsilons, the predictor's test MSE (relative to var y) and the ratios' quality on draw 0's calibration points."
    e = setup_epsilons(kw, K)
    rng = np.random.default_rng([0, 39, 1])
    Xt, yt = fed.sample(0, 5000, rng)
    mse = float(np.mean((st.predictor.predict(Xt) - yt) ** 2) / np.var(yt))
    cal = [fed.sample(k, 100, rng, return_info=True) for k in range(K)]
    q = ratio_quality(st.ratios, oracle_density_ratios(fed), [c[0] for c in cal], [c[2] for c in cal])
    return dict(dataset=ds, eps=eps, eps_test_agent=e[0], eps_other=e[1], pred_rel_mse=mse,
                ratio_log_rmse=float(q.log_rmse.mean()), ratio_spearman=float(q.spearman.mean()),
                n_eff_ratio=float(q.n_eff_ratio.mean()), train_seconds=secs)


def draw_rows(ds, eps, st, fed, n_sims) -> list:
    rows = []
    for sim in range(n_sims):
        d = sample_draw(st, fed, sim, n_cal_test=N1, n_test=M_TEST, weights=("estimated",), localize=False,
                        own_weights=True)["estimated"]
        for name in METHODS:
            for g, delta in (("mc", None), ("ccc", DELTA_CCC)):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    thr = np.asarray(run_method(d, name, ALPHA, delta), dtype=float)
                cov, _, _ = evaluate_thresholds(d.task, d.test_scores, thr, d.test_labels)
                fin = np.isfinite(thr)
                size = (np.nan if not fin.any() else
                        evaluate_thresholds(d.task, d.test_scores[fin], thr[fin], None)[1])
                rows.append(dict(dataset=ds, eps=eps, sim=sim, method=name, guarantee=g, coverage=cov,
                                 size_finite=size, inf_share=float(np.mean(~fin))))
    return rows


def append(path: Path, rows: list):
    df = pd.DataFrame(rows)
    df.to_csv(path, mode="a", header=not path.exists(), index=False)


def run(args):
    out = Path(args.out); out.mkdir(parents=True, exist_ok=True)
    for ds in args.datasets:
        fed = make_federation(ds, "severe", K=K, seed=0)
        for eps in args.eps:
            st, kw, secs = setup(ds, eps)
            append(out / "setups.csv", [setup_row(ds, eps, st, kw, fed, secs)])
            append(out / "draws.csv", draw_rows(ds, eps, st, fed, args.n_sims))
            print(f"{ds} eps={eps}: trained in {secs:.0f} s, {args.n_sims} draws", flush=True)


def summary(d: Path) -> pd.DataFrame:
    "Per dataset, epsilon, method, guarantee: MC, CCC, width; the width paired with local CP (same epsilon) and with the non-private run."
    df = pd.read_csv(d / "draws.csv").drop_duplicates(["dataset", "eps", "sim", "method", "guarantee"], keep="last")
    key = ["dataset", "sim", "guarantee"]
    cp = df[df.method == "CP"].set_index(key + ["eps"])["size_finite"]
    nonpriv = df[np.isinf(df.eps)].set_index(key + ["method"])["size_finite"]
    out = []
    for (ds, eps, m, g), x in df.groupby(["dataset", "eps", "method", "guarantee"]):
        c = x.coverage.to_numpy()
        r_cp = x.size_finite.to_numpy() / cp.reindex(pd.MultiIndex.from_frame(x[key + ["eps"]])).to_numpy()
        r_np = x.size_finite.to_numpy() / nonpriv.reindex(pd.MultiIndex.from_frame(x[key + ["method"]])).to_numpy()
        ok = (c >= 1 - ALPHA).mean()
        out.append(dict(dataset=ds, eps=eps, method=m, guarantee=g, n_sims=len(x), MC=c.mean(),
                        MC_se=c.std(ddof=1) / np.sqrt(len(c)), CCC=ok, CCC_se=np.sqrt(max(ok * (1 - ok), 1 / len(c)) / len(c)),
                        width=np.nanmean(x.size_finite), vs_cp=np.nanmean(r_cp), vs_nonprivate=np.nanmean(r_np),
                        inf_share=x.inf_share.mean()))
    return pd.DataFrame(out)


def fmt_eps(e) -> str:
    return "∞ (not private)" if math.isinf(e) else f"{e:g}"


def table(args):
    d = Path(args.dir)
    if args.table == "setups":
        s = pd.read_csv(d / "setups.csv").drop_duplicates(["dataset", "eps"], keep="last")
        print("| dataset | target ε | ε test agent | ε other agents | predictor MSE / var(y) | ratios: log-ratio RMSE | ratios: Spearman | n_eff / oracle's | training (s) |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in s.sort_values(["dataset", "eps"]).itertuples():
            e0 = "∞" if math.isinf(r.eps_test_agent) else f"{r.eps_test_agent:.2f}"
            e1 = "∞" if math.isinf(r.eps_other) else f"{r.eps_other:.2f}"
            print(f"| {r.dataset} | {fmt_eps(r.eps)} | {e0} | {e1} | {r.pred_rel_mse:.4f} | {r.ratio_log_rmse:.3f} | "
                  f"{r.ratio_spearman:.3f} | {r.n_eff_ratio:.2f} | {r.train_seconds:.0f} |")
        return
    if args.table == "membership":
        import json
        print("| target ε (test agent, K = 3) | rounds watched | trials | σ of the ratio classifiers | advantage 2P(right) - 1 (s.e.) | 2 AUC - 1, pooled | bound of one round |")
        print("|---|---|---|---|---|---|---|")
        for f in sorted(d.glob("membership*.json")):
            for r in json.load(open(f)):
                sig = "not private" if r["sigma"] is None else f"{r['sigma']:.1f}"
                bound = "" if r["bound_one_round"] is None or r["rounds"] != 1 else f"{r['bound_one_round']:.3f}"
                print(f"| {fmt_eps(r['eps'])} | {r['rounds']} | {r['trials']} | {sig} | {r['advantage']:.3f} ({r['advantage_se']:.3f}) | "
                      f"{r['pooled_auc_advantage']:.3f} | {bound} |")
        return
    if args.table == "targets":
        return targets(d)
    s = summary(d)
    print("| dataset | guarantee | method | ε | draws | MC | CCC | width vs local CP | width vs not private | infinite share |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in s.sort_values(["dataset", "guarantee", "method", "eps"]).itertuples():
        cov = f"{r.MC:.3f} ± {r.MC_se:.3f}" if r.guarantee == "mc" else ""
        ccc = f"{r.CCC:.2f} ± {r.CCC_se:.2f}" if r.guarantee == "ccc" else ""
        print(f"| {r.dataset} | {r.guarantee.upper()} | {r.method} | {fmt_eps(r.eps)} | {r.n_sims} | {cov} | {ccc} | "
              f"{r.vs_cp:.3f} | {r.vs_nonprivate:.3f} | {100 * r.inf_share:.1f} % |")


def targets(d: Path, eps: float = 8.0):
    "The targets at the default private setting (epsilon 8 for the test agent), each met or not, with its measurement."
    import json
    print("| target | measured | met |")
    print("|---|---|---|")
    rows = [r for f in sorted(d.glob("membership.json")) for r in json.load(open(f)) if r["eps"] == eps and r["rounds"] == 1]
    for r in rows:
        print(f"| membership advantage <= 0.1 from one round (K = 3, {r['trials']} trials) | {r['advantage']:.3f} "
              f"(s.e. {r['advantage_se']:.3f}) | {'yes' if r['advantage'] <= 0.1 else 'no'} |")
    st = pd.read_csv(d / "setups.csv").drop_duplicates(["dataset", "eps"], keep="last")
    for r in st[st.eps == eps].itertuples():
        print(f"| {r.dataset}: epsilon <= 8 (delta 1e-5) for every agent's whole training (K = 11) | test agent "
              f"{r.eps_test_agent:.2f}, others {r.eps_other:.2f} | {'yes' if r.eps_test_agent <= eps + 1e-9 else 'no'} |")
    s = summary(d)
    for r in s[(s.eps == eps) & (s.method == "Recommended")].sort_values(["dataset", "guarantee"]).itertuples():
        valid = r.MC >= 1 - ALPHA - 2 * r.MC_se if r.guarantee == "mc" else r.CCC >= 1 - DELTA_CCC - r.CCC_se
        cov = f"MC {r.MC:.3f}" if r.guarantee == "mc" else f"CCC {r.CCC:.2f}"
        print(f"| {r.dataset} {r.guarantee.upper()}: preset valid | {cov} | {'yes' if valid else 'no'} |")
        print(f"| {r.dataset} {r.guarantee.upper()}: preset width within +10 % of the non-private run's (paired) | "
              f"x {r.vs_nonprivate:.3f} | {'yes' if r.vs_nonprivate <= 1.10 else 'no'} |")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", nargs="+", default=["gaussian"], choices=sorted(DATASETS))
    p.add_argument("--eps", nargs="+", type=parse_eps, default=[1.0, 4.0, 8.0, math.inf])
    p.add_argument("--n-sims", type=int, default=100)
    p.add_argument("--out", default=None, help="folder to append setups.csv and draws.csv to")
    p.add_argument("--table", choices=["setups", "coverage", "membership", "targets"], default=None)
    p.add_argument("--dir", default="results/privacy", help="with --table: the folder of setups.csv and draws.csv")
    args = p.parse_args(argv)
    if args.table:
        return table(args)
    if not args.out:
        p.error("give --out DIR (a run) or --table NAME (the README's tables)")
    if args.n_sims < 1:
        p.error("--n-sims must be >= 1")
    run(args)


if __name__ == "__main__":
    main()
