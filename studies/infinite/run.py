"""PFWCP's infinite intervals: the paper's cell rule against `select="finite-first"` and `"fewest-infinite"`, and the share
of infinite intervals per kind of density ratio (oracle, paper hyperparameters, calibrated).

    python studies/infinite/run.py --dataset gaussian [--heterogeneity severe] [--weights oracle paper calibrated]
        [--rules paper finite-first fewest-infinite] [--n-sims 200] [--n-test 300] [--seed 0]
        [--cache .pfwcp_cache] [--out results/infinite]
    python studies/infinite/run.py --table results/infinite     # the markdown table of every *_summary.csv

Draws are built as in the pipeline (`pfwcp-experiments`): `grid.ensure_setup` trains (or loads from --cache) the
predictor and the density ratios of `RunConfig(dataset, heterogeneity, seed)` with the ratio hyperparameters of
each weight kind ("paper" = the pipeline default `DEFAULT_TRAIN_KW`, "calibrated" = `hparams="calibrated"` for the
ratios), and `pipeline.sample_draw(setup, fed, sim, n_test=...)` draws calibration draw `sim`. The predictor does not
depend on the ratio hyperparameters, so the scores and the calibration/test points of draw `sim` are the same for
every weight kind; "oracle" uses the true ratios on those draws. Every rule is applied to the same draws, for MC
(delta=None) and CCC (delta=0.1), alpha=0.1, engine "exact". Regression datasets only.

Writes <out>/<tag>_draws.csv (tag: --tag, default <dataset>_<heterogeneity>) (one row per draw x weights x guarantee x rule: coverage, number of
infinite intervals, mean finite width) and <out>/<tag>_summary.csv (MC, CCC with standard errors
from `metrics.coverage_metrics`, infinite share, median of the per-draw mean finite width). Exit 2 on bad arguments.
"""
import argparse, json, os, sys, time, warnings
import numpy as np
import pandas as pd
from pfwcp_nb import grid, pipeline
from pfwcp_nb.cache import ResultCache, RunConfig
from pfwcp_nb.data import DATASETS, make_federation
from pfwcp_nb.metrics import coverage_metrics, evaluate_thresholds
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration
from pfwcp_nb.pipeline import DEFAULT_TRAIN_KW
from pfwcp_nb.procedure import SELECT_RULES

ALPHA = DELTA = 0.1
WEIGHT_KINDS = ("oracle", "paper", "calibrated")
ORACLE_DATASETS = ("gaussian", "poisson", "airfoil", "bike", "concrete", "crime", "star", "protein")


def train_kw(kind: str) -> dict:
    "Training settings of a weight kind (the ratios' hyperparameters; everything else as in the pipeline)."
    kw = json.loads(json.dumps(DEFAULT_TRAIN_KW))
    if kind == "calibrated":
        kw["ratios"] = {**kw.get("ratios", {}), "hparams": "calibrated"}
    return kw


def draw_rows(d, kind: str, rules, sim: int) -> list:
    "Coverage, infinite count and mean finite width of every rule and guarantee on one draw."
    rows = []
    agents = [AgentCalibration(s, w) for s, w in zip(d.cal_scores, d.cal_weights)]
    for g, dl in (("mc", None), ("ccc", DELTA)):
        for rule in rules:
            q = PFWCP(ALPHA, dl, select=rule).calibrate(agents).threshold(d.test_weights)
            cov, _, n_inf = evaluate_thresholds(d.task, d.test_scores, q, d.test_labels)
            fin = np.isfinite(q)
            rows.append(dict(weights=kind, guarantee=g, rule=rule, draw=sim, coverage=cov, n_inf=n_inf,
                             n_test=q.size, finite_width=float(2 * q[fin].mean()) if fin.any() else np.nan))
    return rows


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    "MC, CCC (+ standard errors), infinite share and median finite width per (weights, guarantee, rule)."
    out = []
    for (kind, g, rule), grp in df.groupby(["weights", "guarantee", "rule"], sort=False):
        m = coverage_metrics(grp.coverage.to_numpy(), np.zeros(len(grp)), ALPHA, grp.n_inf.to_numpy(),
                             int(grp.n_test.iloc[0]))
        out.append(dict(weights=kind, guarantee=g, rule=rule, MC=m["MC"], MC_se=m["MC_se"], CCC=m["CCC"],
                        CCC_se=m["CCC_se"], inf_frac=m["inf_frac"], finite_width_median=grp.finite_width.median(),
                        n_sims=m["n_sims"], n_test=int(grp.n_test.iloc[0])))
    return pd.DataFrame(out)


def table(out: str) -> str:
    "Markdown table of every <out>/*_summary.csv: per dataset x weights x guarantee, the guarantee's metric +- se (MC for MC, CCC for CCC) and the infinite share of each rule."
    files = sorted(f for f in os.listdir(out) if f.endswith("_summary.csv"))
    if not files:
        raise FileNotFoundError(f"no *_summary.csv in {out!r}: run this script with --dataset first.")
    df = pd.concat([pd.read_csv(os.path.join(out, f)) for f in files], ignore_index=True)
    rules = [r for r in SELECT_RULES if r in set(df.rule)]
    lines = ["| dataset | heterogeneity | weights | guarantee | " + " | ".join(f"{r}: % ± se (inf %)" for r in rules)
             + " | draws × test |", "|---" * (5 + len(rules)) + "|"]
    for (ds, het, kind, g), grp in df.groupby(["dataset", "heterogeneity", "weights", "guarantee"], sort=False):
        cells = []
        for r in rules:
            x = grp[grp.rule == r].iloc[0]
            v, se = (x.MC, x.MC_se) if g == "mc" else (x.CCC, x.CCC_se)
            cells.append(f"{100 * v:.1f} ± {100 * se:.1f} ({100 * x.inf_frac:.1f})")
        n = grp.iloc[0]
        lines.append(f"| {ds} | {het} | {kind} | {g.upper()} | " + " | ".join(cells) + f" | {n.n_sims} × {n.n_test} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--table"]:
        if len(argv) != 2:
            print("usage: infinite_share.py --table DIR", file=sys.stderr)
            return 2
        print(table(argv[1]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--heterogeneity", default="severe", choices=["severe", "moderate", "mild"])
    ap.add_argument("--weights", nargs="+", default=list(WEIGHT_KINDS), choices=WEIGHT_KINDS)
    ap.add_argument("--rules", nargs="+", default=list(SELECT_RULES), choices=SELECT_RULES)
    ap.add_argument("--n-sims", type=int, default=200)
    ap.add_argument("--n-test", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", default=".pfwcp_cache")
    ap.add_argument("--out", default="results/infinite")
    ap.add_argument("--tag", default=None, help="file name prefix (default <dataset>_<heterogeneity>)")
    args = ap.parse_args(argv)
    if args.dataset not in DATASETS or args.dataset == "cifar10c":
        ap.error(f"--dataset must be a regression dataset of {[d for d in DATASETS if d != 'cifar10c']}, got {args.dataset!r}")
    if "oracle" in args.weights and args.dataset not in ORACLE_DATASETS:
        ap.error(f"--weights oracle: no oracle ratios for {args.dataset!r}")
    if args.n_sims < 2 or args.n_test < 1:
        ap.error("--n-sims must be >= 2 and --n-test >= 1")
    data_dir = os.environ.get("PFWCP_DATA_DIR")
    cache = ResultCache(args.cache)
    est_kinds = [k for k in args.weights if k != "oracle"]
    setups = {}
    for kind in est_kinds or ["paper"]:                     # oracle draws use the paper setup's predictor
        cfg = RunConfig(args.dataset, args.heterogeneity, seed=args.seed, n_sims=args.n_sims, n_test=args.n_test,
                        train_kw=json.dumps(train_kw(kind), sort_keys=True))
        t0 = time.perf_counter()
        setups[kind] = grid.ensure_setup(cfg, cache, data_dir=data_dir, need_localizer=False, progress=False)
        fed = make_federation(cfg.dataset, cfg.heterogeneity, K=cfg.K, seed=cfg.seed, data_dir=data_dir)
        print(f"{args.dataset}/{args.heterogeneity}: setup {kind} in {time.perf_counter() - t0:.0f} s", flush=True)
    rows, t0 = [], time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for sim in range(args.n_sims):
            for i, (kind, st) in enumerate(setups.items()):
                want = ([("estimated", kind)] if kind in est_kinds else []) + \
                       ([("oracle", "oracle")] if i == 0 and "oracle" in args.weights else [])
                draws = pipeline.sample_draw(st, fed, sim, n_test=args.n_test, weights=[w for w, _ in want],
                                             localize=False)
                if i == 0:
                    ref = draws[want[0][0]].test_scores
                elif not np.array_equal(draws[want[0][0]].test_scores, ref):
                    print(f"  note: draw {sim}: the {kind} setup scores differently from the first one", flush=True)
                for w, label in want:
                    rows += [dict(dataset=args.dataset, heterogeneity=args.heterogeneity, **r)
                             for r in draw_rows(draws[w], label, args.rules, sim)]
            if (sim + 1) % 20 == 0:
                print(f"  {sim + 1}/{args.n_sims} draws, {time.perf_counter() - t0:.0f} s", flush=True)
    df = pd.DataFrame(rows)
    os.makedirs(args.out, exist_ok=True)
    tag = args.tag or f"{args.dataset}_{args.heterogeneity}"
    df.to_csv(os.path.join(args.out, f"{tag}_draws.csv"), index=False)
    summ = summarize(df)
    summ.insert(0, "heterogeneity", args.heterogeneity)
    summ.insert(0, "dataset", args.dataset)
    summ.to_csv(os.path.join(args.out, f"{tag}_summary.csv"), index=False)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(summ.round(4).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
