"""What the robust option `agg_cap` (an agent's n_eff counted at most cap x the others' median) costs in
width on the nine datasets, with no liar.

For each dataset (severe heterogeneity, n_1 = 100, the stored grids' models of studies/value, seed 0, estimated
ratios), the same calibration draws are given to PFWCP and osPFWCP (MC and CCC) with the default aggregation weights
(n_eff / sum) and with `server.capped_agg_weights(summaries, cap)`; per draw: coverage, mean size of the finite sets,
infinite share. The summary pairs each capped run with its uncapped twin on the same draws: width ratio (finite on
both), coverage and infinite share, with Monte Carlo s.e.

    python studies/robust_cap/run.py --n-sims 40 --out studies/robust_cap/draws.csv
    python studies/robust_cap/run.py --summary studies/robust_cap/draws.csv --out studies/robust_cap/summary.csv
    python studies/robust_cap/run.py --table studies/robust_cap/summary.csv      # the README's table
"""
import argparse, os, sys, time, warnings
from pathlib import Path
import numpy as np
import pandas as pd
from pfwcp_nb.data import make_federation, DATASETS
from pfwcp_nb.pipeline import sample_draw
from pfwcp_nb.metrics import evaluate_thresholds
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration
from pfwcp_nb.oneshot import OneShotPFWCP
from pfwcp_nb.federation.server import capped_agg_weights

sys.path.insert(0, str(Path(__file__).parents[1] / "value"))
from run import setup_for  # noqa: E402  (studies/value/run.py: the stored models of the value benchmark)

ALPHA, DELTA, N1, M_TEST, LEVEL = 0.1, 0.1, 100, 500, "severe"
RUNS = {"PFWCP-MC": (PFWCP, None), "PFWCP-CCC": (PFWCP, DELTA), "osPFWCP-MC": (OneShotPFWCP, None),
        "osPFWCP-CCC": (OneShotPFWCP, DELTA)}


def thresholds(est, delta, agents, tw, cap):
    "The run's thresholds with the default aggregation weights (cap None) or the capped ones."
    summ = [a.summary() for a in agents]
    kw = {} if cap is None else {"agg_weights": capped_agg_weights(summ, cap)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(est(ALPHA, delta, **kw).calibrate(agents).threshold(tw), dtype=float)


def run_dataset(ds, n_sims, caps, cache):
    st = setup_for(ds, LEVEL, cache)
    fed = make_federation(ds, LEVEL, K=st.K, seed=0)
    rows = []
    for sim in range(n_sims):
        d = sample_draw(st, fed, sim, n_cal_test=N1, n_test=M_TEST, weights=("estimated",), localize=False)["estimated"]
        agents = [AgentCalibration(s, w) for s, w in zip(d.cal_scores, d.cal_weights)]
        neff = np.array([a.summary().n_eff for a in agents])
        for name, (est, delta) in RUNS.items():
            for cap in (None, *caps):
                thr = thresholds(est, delta, agents, d.test_weights, cap)
                cov, _, _ = evaluate_thresholds(d.task, d.test_scores, thr, d.test_labels)
                fin = np.isfinite(thr)
                size = (np.nan if not fin.any() else evaluate_thresholds(
                    d.task, d.test_scores[fin], thr[fin], None if d.test_labels is None else d.test_labels[fin])[1])
                rows.append(dict(dataset=ds, sim=sim, run=name, cap=0.0 if cap is None else cap, coverage=cov,
                                 size_finite=size, inf_share=float(np.mean(~fin)),
                                 capped_share=float(np.mean(neff[1:] > (cap or np.inf) * np.median(neff[1:])))))
    return rows


def summarise(df):
    "Per dataset, run and cap: coverage (MC, CCC share >= 90 %), infinite share, paired width ratio to cap 0 (s.e.)."
    df = df.drop_duplicates(["dataset", "sim", "run", "cap"])       # a second run (other caps) repeats the uncapped rows
    base = df[df.cap == 0].set_index(["dataset", "run", "sim"])
    out = []
    for (ds, run, cap), g in df[df.cap > 0].groupby(["dataset", "run", "cap"]):
        b = base.loc[[(ds, run, s) for s in g.sim]]
        r = g.size_finite.to_numpy() / b.size_finite.to_numpy()
        r = r[np.isfinite(r)]
        c, c0, N = g.coverage.to_numpy(), b.coverage.to_numpy(), len(g)
        out.append(dict(dataset=ds, run=run, cap=cap, n_sims=N, coverage=c.mean(), coverage_uncapped=c0.mean(),
                        coverage_diff_se=np.std(c - c0, ddof=1) / np.sqrt(N),
                        ccc=np.mean(c >= 1 - ALPHA), ccc_uncapped=np.mean(c0 >= 1 - ALPHA),
                        inf_share=g.inf_share.mean(), inf_share_uncapped=b.inf_share.mean(),
                        width_ratio=r.mean() if r.size else np.nan,
                        width_ratio_se=r.std(ddof=1) / np.sqrt(r.size) if r.size > 1 else np.nan,
                        capped_agents=g.capped_share.mean()))
    return pd.DataFrame(out)


def table(s):
    "The README's table: per run and cap, over the datasets: median and largest paired width ratio, coverage and infinite share."
    lines = ["| run | cap | datasets | width ratio, median (largest) | wider beyond 2 s.e. | coverage capped / uncapped (mean) "
             "| largest coverage change | infinite share capped / uncapped (mean) | agents capped (mean share) |", "|---" * 9 + "|"]
    for (run, cap), g in s.groupby(["run", "cap"]):
        wider = int(((g.width_ratio - 2 * g.width_ratio_se.fillna(0)) > 1).sum())
        lines.append(f"| {run} | {cap:g} | {len(g)} | {g.width_ratio.median():.3f} ({g.width_ratio.max():.3f}) | {wider} | "
                     f"{g.coverage.mean():.3f} / {g.coverage_uncapped.mean():.3f} | "
                     f"{(g.coverage - g.coverage_uncapped).abs().max():.3f} | "
                     f"{g.inf_share.mean():.3f} / {g.inf_share_uncapped.mean():.3f} | {g.capped_agents.mean():.3f} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=None, choices=list(DATASETS))
    ap.add_argument("--n-sims", type=int, default=40)
    ap.add_argument("--caps", nargs="+", type=float, default=[2.0])
    ap.add_argument("--cache", default=os.environ.get("PFWCP_VALUE_CACHE", ".pfwcp_cache/value"))
    ap.add_argument("--summary", nargs="+", default=None, metavar="DRAWS_CSV",
                    help="summarise these per-draw files into --out instead of running")
    ap.add_argument("--table", default=None, metavar="SUMMARY_CSV", help="print the README's table of this summary")
    ap.add_argument("--out", default=None, help="per-draw CSV to append to (a run), or the summary CSV (--summary)")
    a = ap.parse_args(argv)
    if a.table:
        print(table(pd.read_csv(a.table)))
        return
    if not a.out:
        ap.error("--out is needed (a run: the per-draw CSV; --summary: the summary CSV)")
    if a.n_sims < 2 or any(not c > 0 for c in a.caps):
        ap.error("--n-sims must be >= 2 and every --caps value > 0")
    if a.summary:
        s = summarise(pd.concat([pd.read_csv(p) for p in a.summary], ignore_index=True))
        s.to_csv(a.out, index=False)
        print(s.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        return
    out = Path(a.out)
    for ds in a.datasets or list(DATASETS):
        t0 = time.process_time()
        pd.DataFrame(run_dataset(ds, a.n_sims, a.caps, a.cache)).to_csv(out, mode="a", header=not out.exists(),
                                                                        index=False)
        print(f"{ds}: {time.process_time() - t0:.1f} CPU s", flush=True)


if __name__ == "__main__":
    main()
