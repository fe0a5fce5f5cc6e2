"""Per-agent diagnosis of PFWCP's estimated-weight misses, public API only.

For each (dataset, heterogeneity) cell and each agent k >= 2, on `--n-sims` calibration draws of the runner's own
streams (`pipeline.sample_draw`):
  cov_est / cov_oracle  coverage on the test agent's points of agent k's weighted local quantile at level 1 - alpha
                        (its scores weighted by omega^k, the test point's weight at +inf: agent k's WCP alone), with
                        estimated and with oracle weights; inf_est / inf_oracle: share of +inf local quantiles;
  spearman              rank correlation of estimated and oracle log-weights on agent k's calibration points (ranking);
  n_eff_ratio           Kish n_eff of the estimated weights / the oracle's on those points (scale: < 1 overconfident);
  slope                 slope b of the best affine fit log w_oracle ~ a + b log w_est (b > 1: estimate too flat);
  rmse_centred / rmse_affine  log-ratio RMSE after centring / after the best affine fit (what is left is ranking);
  scale_share           share of the centred MSE removed by the affine fit (1: pure scale error, 0: pure ranking);
  out_box / out_coord   share of test points with any feature outside agent k's training-size sample range / share of
                        (test point, feature) pairs outside, each minus the same share for the test agent's own range
                        (support; features = the ratio classifiers' inputs: x, or its PCA for cifar10c);
  error                 the dominant error: 'support' if out_coord > 0.05; else 'ranking' if the estimate carries little
                        of the oracle's order (slope <= 0 or Spearman < 0.5); else 'scale' if scale_share >= 0.5;
                        else 'ranking'.

usage: python studies/diagnosis/run.py OUT_DIR --cache CACHE [--n-sims 100] [--n-test 500] [--predictor-epochs N] CELL...
       CELL = dataset:heterogeneity, e.g. concrete:severe (models from the runner's cache, trained if missing)
"""
import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from pfwcp_nb.cache import ResultCache, RunConfig
from pfwcp_nb.data import make_federation
from pfwcp_nb.pipeline import DEFAULT_TRAIN_KW, sample_draw
from pfwcp_nb.quantiles import effective_sample_size, weighted_quantile
from pfwcp_nb.grid import ensure_setup

ALPHA = 0.1


def _log_metrics(le: np.ndarray, lo: np.ndarray) -> dict:
    "Ranking and scale of estimated log-weights `le` against oracle `lo` (same points)."
    lec, loc = le - le.mean(), lo - lo.mean()
    mse = float(np.mean((lec - loc) ** 2))
    b = float(lec @ loc / (lec @ lec)) if np.ptp(le) > 0 else np.nan
    resid = float(np.mean((loc - b * lec) ** 2)) if np.isfinite(b) else float(np.mean(loc ** 2))
    return dict(spearman=spearmanr(le, lo)[0] if np.ptp(le) > 0 and np.ptp(lo) > 0 else np.nan,
                n_eff_ratio=effective_sample_size(np.exp(le - le.max())) / effective_sample_size(np.exp(lo - lo.max())),
                slope=b, rmse_centred=np.sqrt(mse), rmse_affine=np.sqrt(resid),
                scale_share=(mse - resid) / mse if mse > 0 else np.nan)


def _error(r) -> str:
    "The dominant error of one agent's estimated ratio (the rule of the docstring)."
    if r["out_coord"] > 0.05:
        return "support"
    if not r["slope"] > 0 or r["spearman"] < 0.5:
        return "ranking"
    return "scale" if r["scale_share"] >= 0.5 else "ranking"


def _epochs(v) -> str:
    return "paper" if pd.isna(v) or str(v) == "paper" else str(int(float(v)))


def _outside(F_ref: np.ndarray, F_test: np.ndarray) -> tuple[float, float]:
    lo, hi = F_ref.min(0), F_ref.max(0)
    out = (F_test < lo) | (F_test > hi)
    return float(out.any(1).mean()), float(out.mean())


def diagnose(ds: str, het: str, cache: ResultCache, data_dir, n_sims: int, n_test: int, ratio_model: str = "paper",
             predictor_epochs: int | None = None):
    tkw = dict(DEFAULT_TRAIN_KW, **({} if predictor_epochs is None else {"predictor": {"epochs": predictor_epochs}}))
    cfg = RunConfig(ds, het, ratio_model=ratio_model, train_kw=json.dumps(tkw, sort_keys=True))
    st = ensure_setup(cfg, cache, data_dir=data_dir, need_localizer=False, progress=False)
    fed = make_federation(ds, het, K=cfg.K, seed=cfg.seed, data_dir=data_dir)
    feat = st.ratios[1].features                     # the ratio classifiers' input map (identity / PCA / standardised)
    tf = (lambda X: X) if feat is None else feat.transform
    rng = np.random.default_rng([cfg.seed, 17])      # support: samples of training size, own stream
    ref = [tf(fed.sample(k, cfg.n_train, rng)[0]) for k in range(cfg.K)]
    F_test = tf(fed.sample(0, 2000, rng)[0])
    base_box, base_coord = _outside(ref[0], F_test)
    acc = {k: dict(cov_est=[], cov_oracle=[], inf_est=[], inf_oracle=[], le=[], lo=[]) for k in range(1, cfg.K)}
    for s in range(n_sims):
        d = sample_draw(st, fed, s, n_cal=cfg.n_cal, n_test=n_test, weights=("estimated", "oracle"), localize=False)
        e, o = d["estimated"], d["oracle"]
        ts = e.test_scores if e.test_labels is None else e.test_scores[np.arange(len(e.test_labels)), e.test_labels]
        for k in range(1, cfg.K):
            for kind, dr in (("est", e), ("oracle", o)):
                q = weighted_quantile(dr.cal_scores[k], dr.cal_weights[k], alpha=ALPHA, inf_weight=dr.test_weights[:, k])
                acc[k][f"cov_{kind}"].append(np.mean(ts <= q)); acc[k][f"inf_{kind}"].append(np.mean(np.isinf(q)))
            acc[k]["le"].append(np.log(e.cal_weights[k])); acc[k]["lo"].append(np.log(o.cal_weights[k]))
    rows = []
    for k, a in acc.items():
        # log-weight metrics per draw (each draw: agent k's 100 calibration points), then the median over draws
        lm = pd.DataFrame([_log_metrics(le, lo) for le, lo in zip(a["le"], a["lo"])]).median()
        box, coord = _outside(ref[k], F_test)
        r = dict(dataset=ds, heterogeneity=het, ratio_model=ratio_model, agent=k + 1, predictor_epochs="paper" if predictor_epochs is None else predictor_epochs,
                 cov_est=np.mean(a["cov_est"]), cov_oracle=np.mean(a["cov_oracle"]),
                 inf_est=np.mean(a["inf_est"]), inf_oracle=np.mean(a["inf_oracle"]), **lm.to_dict(),
                 out_box=box - base_box, out_coord=coord - base_coord)
        r["error"] = _error(r)
        rows.append(r)
    return pd.DataFrame(rows)


MISSES = {"mc": {("concrete", h) for h in ("severe", "moderate", "mild")},
          "ccc": {("protein", "severe"), ("concrete", "severe"), ("cifar10c", "severe"), ("airfoil", "moderate"),
                  ("protein", "moderate"), ("concrete", "moderate"), ("crime", "moderate"), ("star", "moderate"),
                  ("cifar10c", "moderate"), ("concrete", "mild"), ("crime", "mild"), ("star", "mild"),
                  ("cifar10c", "mild")}}   # PFWCP's estimated-weight misses at 500 x 500


def summarize(agents: pd.DataFrame, results_root: Path) -> pd.DataFrame:
    """One row per cell: PFWCP's coverage (results/<level>/results.csv, 500 x 500), the agents whose local quantile
    loses more than 2 points against the oracle weights, and the dominant error among them (among all if none)."""
    rows = []
    for (ds, het), g in agents.groupby(["dataset", "heterogeneity"], sort=False):
        res = pd.read_csv(results_root / het / "results.csv")
        pf = lambda m, gu, col: float(res[(res.dataset == ds) & (res.method == m) & (res.guarantee == gu)][col].iloc[0])
        gap = g.cov_est - g.cov_oracle
        bad = g[gap < -0.02]
        dom = (bad if len(bad) else g).error.value_counts()
        rows.append(dict(dataset=ds, heterogeneity=het, predictor_epochs=g.predictor_epochs.iloc[0],
                         misses="+".join(k.upper() for k in ("mc", "ccc") if (ds, het) in MISSES[k]),
                         PFWCP_MC_est=pf("PFWCP", "mc", "MC"), PFWCP_MC_oracle=pf("PFWCP-oracle", "mc", "MC"),
                         PFWCP_CCC_est=pf("PFWCP", "ccc", "CCC"), PFWCP_CCC_oracle=pf("PFWCP-oracle", "ccc", "CCC"),
                         agent_gap_mean=float(gap.mean()), agent_gap_min=float(gap.min()),
                         agents_below=f"{len(bad)}/{len(g)}",
                         n_below=len(bad),
                         spearman=float(g.spearman.median()), n_eff_ratio=float(g.n_eff_ratio.median()),
                         slope=float(g.slope.median()), scale_share=float(g.scale_share.median()),
                         out_coord=float(g.out_coord.median()),
                         dominant=f"{dom.index[0]} ({dom.iloc[0]}/{dom.sum()})"))
    return pd.DataFrame(rows)


def _markdown(df: pd.DataFrame) -> str:
    fmt = lambda v: f"{v:.3f}" if isinstance(v, float) else str(v)
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in df.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(prog="ratio_diagnosis.py", description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("cells", nargs="+")
    p.add_argument("--cache", required=True)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--n-sims", type=int, default=100)
    p.add_argument("--n-test", type=int, default=500)
    p.add_argument("--ratio-model", default="paper", choices=("paper", "select"))
    p.add_argument("--predictor-epochs", type=int, default=None,
                   help="train the predictor with this budget instead of the paper's (only where its models are not "
                        "cached: the ratio models are the same, the scores come from a less trained predictor)")
    p.add_argument("--results", default="results", help="folder of the level grids (results/<level>/results.csv)")
    a = p.parse_args(argv)
    cells = []
    for c in a.cells:
        if c.count(":") != 1:
            p.error(f"argument cells: {c!r} is not dataset:heterogeneity")
        cells.append(tuple(c.split(":")))
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    with open(out / "commands.txt", "a") as f:
        f.write("python studies/diagnosis/run.py " + shlex.join(sys.argv[1:] if argv is None else argv) + "\n")
    cache = ResultCache(a.cache)
    name = f"agents_{a.ratio_model}.csv"
    done = pd.read_csv(out / name) if (out / name).exists() else pd.DataFrame()
    if len(done) and "predictor_epochs" not in done:
        done.insert(4, "predictor_epochs", "paper")
    if len(done):
        done["predictor_epochs"] = [_epochs(v) for v in done.predictor_epochs]
    for ds, het in cells:
        if len(done) and ((done.dataset == ds) & (done.heterogeneity == het)).any():
            continue
        t0 = time.time()
        df = diagnose(ds, het, cache, a.data_dir, a.n_sims, a.n_test, a.ratio_model, a.predictor_epochs)
        df["n_sims"], df["n_test"] = a.n_sims, a.n_test
        done = pd.concat([done, df], ignore_index=True)
        done["predictor_epochs"] = [_epochs(v) for v in done.predictor_epochs]
        done["error"] = [_error(r) for _, r in done.iterrows()]
        done.to_csv(out / name, index=False)
        print(f"{ds} {het}: {time.time() - t0:.0f} s", flush=True)
    if a.ratio_model == "paper" and len(done):
        done["error"] = [_error(r) for _, r in done.iterrows()]
        done.to_csv(out / name, index=False)
        summ = summarize(done, Path(a.results))
        summ.to_csv(out / "cells.csv", index=False)
        (out / "cells.md").write_text(_markdown(summ))


if __name__ == "__main__":
    main()
