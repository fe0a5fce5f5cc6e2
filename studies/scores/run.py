"""Adaptive scores against the paper's, paired on the same calibration draws: normalized residual and CQR against
|y - f(x)| on every regression dataset, APS and RAPS against 1 - p on cifar10c and a tabular task (bike counts in
five classes), for local CP and for the preset (`methods.run_method(draw, "Recommended", ...)`), MC and CCC.

    python studies/scores/run.py all --out-dir results/scores                       # everything, one command
    python studies/scores/run.py train --datasets gaussian airfoil                  # the models only (cached)
    python studies/scores/run.py run --datasets gaussian --n-sims 100 --out-dir results/scores
    python studies/scores/run.py summary --out-dir results/scores                   # draws -> summary.csv
    python studies/scores/run.py table widths --summary-file results/scores/summary.csv   # also: classes, sizes, targets

Models (cached in --cache): the pipeline's setup (`pipeline.train_setup`, seed 0, severe, K = 11, 50 training points
per agent: predictor and density ratios), CQR's quantile network (`score_models.train_quantile_model`, levels
0.05 / 0.95, on the same training split, with the predictor's architecture and 1000 of its 5000 epochs), and the
normalized residual's scale model (`score_models.train_scale_model`, its defaults) on the predictor's residuals of the
engression split D_eng (50 points per agent, stream (seed, 2), not used by calibration); one file each. Draws: the pipeline's (stream
(seed, 1, sim)), 100 calibration points per agent, 500 test points; every score is computed on the same points.
"""
import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from pfwcp_nb.columns import BIKE_COVARIATES
from pfwcp_nb.data import DATASET_SPECS, DatasetSpec, make_federation, register_dataset
from pfwcp_nb.methods import CalibrationDraw, run_method
from pfwcp_nb.metrics import evaluate_thresholds
from pfwcp_nb.models import DATASET_ARCH, PAPER_EPOCHS, draw_rng, stream_rng, training_seed, training_split
from pfwcp_nb.pipeline import sample_draw, train_setup
from pfwcp_nb.score_models import train_quantile_model, train_scale_model
from pfwcp_nb.scores import APS, CQR, LAC, RAPS, AbsoluteResidual, NormalizedResidual

ALPHA, DELTA = 0.1, 0.1
REGRESSION = ("gaussian", "poisson", "airfoil", "bike", "concrete", "crime", "star", "protein")
CLASSIFICATION = ("cifar10c", "bike_classes")
METHODS = ("CP", "Recommended")
RAPS_LAM, RAPS_K = 0.05, 2      # a penalty that bites with 5 or 10 classes (the defaults 0.01, 5 are ImageNet's)
LEVEL, K, N_CAL, N_TEST, N_ENG = "severe", 11, 100, 500, 50
QUICK_KW = {"predictor": {"epochs": 20}, "ratios": {"epochs": 20}, "fwcp": {"epochs": 20}}   # --quick: the test's


def _read_bike_classes(paths):
    "Bike sharing (`hour.csv`) with the hourly count `cnt` in five classes of equal size (its quintiles)."
    df = pd.read_csv(paths[0])
    y = df["cnt"].to_numpy(dtype=float)
    cls = np.searchsorted(np.quantile(y, [0.2, 0.4, 0.6, 0.8]), y, side="right")
    return df[list(BIKE_COVARIATES)].to_numpy(dtype=float), cls.astype(float), list(BIKE_COVARIATES)


if "bike_classes" not in DATASET_SPECS:       # the tabular classification task: a record, as docs/extending.md shows
    register_dataset(DatasetSpec("bike_classes", "classification", "tilting", (17379, 9), "cifar",
                                 reader=_read_bike_classes, files=("hour.csv",),
                                 source="the bike dataset's hour.csv, its count in five quintile classes (studies/scores)"))


def scores_of(task, sim):
    "name -> Score of the task; the randomized ones seeded by the draw."
    if task == "regression":
        return {"absolute": AbsoluteResidual(), "normalized": NormalizedResidual(), "cqr": CQR()}
    return {"lac": LAC(), "aps": APS(seed=[7, sim]), "raps": RAPS(RAPS_LAM, RAPS_K, seed=[8, sim]),
            "aps-det": APS(randomized=False), "raps-det": RAPS(RAPS_LAM, RAPS_K, randomized=False)}


QUANTILE_EPOCHS = 1000   # CQR's network: the predictor's architecture, a fifth of its 5000 epochs (2 shared cores)


def _cached(path, make):
    "The object stored at `path`, or `make()` stored there."
    if path.exists():
        return torch.load(path, weights_only=False)
    obj = make()
    torch.save(obj, path)
    return obj


def models_for(ds, cache, quick=False):
    "The setup, CQR's quantile network and the scale model of dataset `ds`, each trained once and cached in `cache`."
    tag = f"{ds}_{LEVEL}_0{'_quick' if quick else ''}"
    t0 = time.perf_counter()
    st = _cached(Path(cache) / f"{tag}.pt", lambda: dict(setup=train_setup(
        ds, LEVEL, seed=0, K=K, need_localizer=False, progress=False, train_kw=QUICK_KW if quick else None)))["setup"]
    out = dict(setup=st, seconds={"setup": time.perf_counter() - t0})
    if st.task == "regression":
        fed = make_federation(ds, LEVEL, K=K, seed=0)
        X, y, _ = training_split(fed, 50, 0)
        out["quantiles"] = _cached(Path(cache) / f"{tag}_quantiles.pt", lambda: train_quantile_model(
            X, y, levels=(ALPHA / 2, 1 - ALPHA / 2), arch=DATASET_ARCH[ds], epochs=5 if quick else QUANTILE_EPOCHS,
            seed=training_seed(0)))
        rng = stream_rng(0, 2)                                   # the residuals of D_eng, the pipeline's localizer split
        eng = [fed.sample(k, N_ENG, rng) for k in range(K)]
        out["scale"] = _cached(Path(cache) / f"{tag}_scale.pt", lambda: train_scale_model(
            [X for X, _ in eng], [y - st.predictor.predict(X) for X, y in eng], seed=training_seed(0),
            **({"epochs": 5} if quick else {})))
        out["seconds"].update(quantiles=out["quantiles"].seconds, scale=out["scale"].seconds)
    return out


def draw_points(st, fed, sim, n_test):
    "The calibration and test points of draw `sim`, sampled exactly as `pipeline.sample_draw` samples them."
    rng = draw_rng(st.seed, sim)
    cal = [fed.sample(k, N_CAL, rng, return_info=True) for k in range(fed.K)]
    tX, ty, _ = fed.sample(0, n_test, rng, return_info=True)
    return [c[0] for c in cal], [c[1] for c in cal], tX, ty


def weights(st, cal_X, test_X):
    "omega^k at the calibration points (K arrays), the test points (m, K) and agent 0's calibration points (n_1, K)."
    cal_w, test_w, own = [np.ones(len(cal_X[0]))], np.ones((len(test_X), K)), np.ones((len(cal_X[0]), K))
    for k in range(1, K):
        w = np.asarray(st.ratios[k](np.concatenate([cal_X[k], test_X, cal_X[0]])), dtype=float)
        n, m = len(cal_X[k]), len(test_X)
        cal_w.append(w[:n]); test_w[:, k] = w[n:n + m]; own[:, k] = w[n + m:]
    return cal_w, test_w, own


def predictions(models, X):
    "Every score's prediction at X: f(x), (f, sigma), the CQR band (regression) or the probabilities."
    st = models["setup"]
    if st.task == "classification":
        P = st.predictor.predict_proba(X)
        return {"probs": P / P.sum(1, keepdims=True)}
    f = st.predictor.predict(X)
    return {"absolute": f, "normalized": (f, models["scale"].predict(X)), "cqr": models["quantiles"].predict(X)}


def evaluate(task, score, pred_test, test_y, thr, test_scores, labels):
    "Coverage, mean size of the finite sets, infinite share; classification: per-class coverage and size."
    fin = np.isfinite(thr)
    if task == "regression":
        cov = float(np.mean(test_scores <= thr))
        lo, hi = score.interval(pred_test, thr)
        width = np.maximum(hi - lo, 0.0)
        return dict(coverage=cov, size_finite=float(width[fin].mean()) if fin.any() else np.nan,
                    inf_share=float((~fin).mean())), None
    cov, size, _ = evaluate_thresholds(task, test_scores, thr, labels)
    sets = test_scores <= thr[:, None]
    per = pd.DataFrame(dict(cls=labels, covered=sets[np.arange(len(labels)), labels], size=sets.sum(1)))
    per = per.groupby("cls").agg(n=("covered", "size"), covered=("covered", "sum"), size=("size", "sum")).reset_index()
    return dict(coverage=cov, size_finite=size, inf_share=0.0), per


def run_dataset(ds, n_sims, n_test, cache, quick=False):
    "Per-draw rows (and per-class rows for classification) of dataset `ds`."
    models = models_for(ds, cache, quick)
    st = models["setup"]
    fed = make_federation(ds, LEVEL, K=K, seed=0)
    rows, cls_rows = [], []
    for sim in range(n_sims):
        cal_X, cal_y, test_X, test_y = draw_points(st, fed, sim, n_test)
        cal_w, test_w, own = weights(st, cal_X, test_X)
        pc = [predictions(models, X) for X in cal_X]
        pt = predictions(models, test_X)
        if sim == 0:                                  # the same points as the pipeline's draw (the paired comparison)
            ref = sample_draw(st, fed, 0, n_cal=N_CAL, n_test=n_test, localize=False)["estimated"]
            got = [AbsoluteResidual().score(y, p["absolute"]) if st.task == "regression" else LAC().score(y, p["probs"])
                   for y, p in zip(cal_y, pc)]
            assert all(np.allclose(a, b) for a, b in zip(got, ref.cal_scores)), "draws differ from sample_draw's"
        for name, score in scores_of(st.task, sim).items():
            key = name if st.task == "regression" else "probs"
            cal_s = [score.score(y, p[key]) for y, p in zip(cal_y, pc)]
            if st.task == "regression":
                test_s, labels = score.score(test_y, pt[key]), None
            else:
                labels = test_y.astype(int)
                test_s = score.label_scores(pt[key], score._u(len(test_y)))
            draw = CalibrationDraw(st.task, cal_s, cal_w, test_w, test_s, labels, own_test_weights=own)
            for method in METHODS:
                for g, delta in (("mc", None), ("ccc", DELTA)):
                    t0 = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        thr = np.asarray(run_method(draw, method, ALPHA, delta), dtype=float)
                    secs = time.perf_counter() - t0
                    met, per = evaluate(st.task, score, pt[key], test_y, thr, test_s, labels)
                    common = dict(dataset=ds, task=st.task, sim=sim, score=name, method=method, guarantee=g)
                    rows.append(dict(common, **met, seconds=secs))
                    if per is not None:
                        cls_rows += [dict(common, **r) for r in per.to_dict("records")]
    return rows, cls_rows


def _append(df, path):
    path = Path(path)
    old = pd.read_csv(path) if path.exists() else None
    keys = ["dataset", "sim", "score", "method", "guarantee"] + (["cls"] if "cls" in df else [])
    out = df if old is None else pd.concat([old[~old.dataset.isin(df.dataset.unique())], df], ignore_index=True)
    out.sort_values(keys).to_csv(path, index=False)


def paired(g, ref, col):
    "Mean and s.e. of the per-draw ratio of `col` to the reference rows (same draws), finite ratios only."
    r = (g.set_index("sim")[col] / ref.set_index("sim")[col]).dropna()
    r = r[np.isfinite(r)]
    return (r.mean(), r.std(ddof=1) / np.sqrt(len(r)) if len(r) > 1 else np.nan, len(r)) if len(r) else (np.nan,) * 3


def summarise(draws):
    "Per dataset, score, method and guarantee: MC, CCC (s.e.), mean size, paired ratio to the paper's score (s.e.), verdicts."
    out = []
    keys = ["dataset", "task", "method", "guarantee"]
    for cell, g in draws.groupby(keys):
        base = "absolute" if cell[1] == "regression" else "lac"
        ref = g[g.score == base]
        for name, h in g.groupby("score"):
            c = h.coverage.to_numpy()
            N, ok = len(c), (h.coverage.to_numpy() >= 1 - ALPHA - 1e-12).mean()
            ratio, ratio_se, nr = paired(h, ref, "size_finite")
            out.append(dict(zip(keys, cell), score=name, n_sims=N, MC=c.mean(), MC_se=c.std(ddof=1) / np.sqrt(N),
                            CCC=ok, CCC_se=np.sqrt(max(ok * (1 - ok), 1 / N) / N), size=h.size_finite.mean(),
                            size_se=h.size_finite.std(ddof=1) / np.sqrt(N), ratio=ratio, ratio_se=ratio_se,
                            inf_share=h.inf_share.mean(), seconds=h.seconds.mean()))
    s = pd.DataFrame(out)
    mc = s.guarantee == "mc"
    s["valid"] = np.where(mc, s.MC >= 1 - ALPHA - 2 * s.MC_se, s.CCC >= 1 - DELTA - s.CCC_se)
    s["narrower"] = s.ratio + 2 * s.ratio_se.fillna(0) < 1
    s["wider"] = s.ratio - 2 * s.ratio_se.fillna(0) > 1
    return s


def class_summary(cls):
    "Per dataset, score, method, guarantee and class: coverage and mean set size over all draws' test points."
    g = cls.groupby(["dataset", "score", "method", "guarantee", "cls"])[["n", "covered", "size"]].sum().reset_index()
    g["coverage"], g["mean_size"] = g.covered / g.n, g["size"] / g.n
    return g


LABEL = {"absolute": "absolute residual", "normalized": "normalized residual", "cqr": "CQR", "lac": "LAC (1 - p)",
         "aps": "APS", "raps": "RAPS", "aps-det": "APS (not randomized)", "raps-det": "RAPS (not randomized)"}


def _pct(x, se):
    return f"{100 * x:.1f} ± {100 * se:.1f}"


def widths_table(s):
    "Regression: per dataset and score, the paired width ratio to |y - f(x)| and the coverage, CP and the preset."
    r = s[s.task == "regression"]
    out = ["| dataset | score | method | MC: coverage % | MC: width ratio | CCC: CCC % | CCC: width ratio | infinite % (MC / CCC) |",
           "|---|---|---|---|---|---|---|---|"]
    for (ds, sc, me), g in r.groupby(["dataset", "score", "method"], sort=False):
        m, c = g[g.guarantee == "mc"].iloc[0], g[g.guarantee == "ccc"].iloc[0]
        def rat(x):
            if sc == "absolute":
                return f"1 (width {x['size']:.3g})"
            mark = " **narrower**" if x.narrower else (" wider" if x.wider else "")
            return f"{x.ratio:.3f} ± {x.ratio_se:.3f}{mark}"
        out.append(f"| {ds} | {LABEL[sc]} | {me} | {_pct(m.MC, m.MC_se)}{'' if m.valid else ' (invalid)'} | {rat(m)} | "
                   f"{_pct(c.CCC, c.CCC_se)}{'' if c.valid else ' (invalid)'} | {rat(c)} | "
                   f"{100 * m.inf_share:.1f} / {100 * c.inf_share:.1f} |")
    return "\n".join(out)


def classes_table(s):
    "Classification: per dataset and score, coverage, mean set size and its paired ratio to LAC."
    r = s[s.task == "classification"]
    out = ["| dataset | score | method | MC: coverage % | MC: mean size (ratio to LAC) | CCC: CCC % | CCC: mean size (ratio to LAC) |",
           "|---|---|---|---|---|---|---|"]
    for (ds, sc, me), g in r.groupby(["dataset", "score", "method"], sort=False):
        m, c = g[g.guarantee == "mc"].iloc[0], g[g.guarantee == "ccc"].iloc[0]
        rat = lambda x: f"{x['size']:.2f}" + ("" if sc == "lac" else f" ({x.ratio:.3f} ± {x.ratio_se:.3f})")
        out.append(f"| {ds} | {LABEL[sc]} | {me} | {_pct(m.MC, m.MC_se)}{'' if m.valid else ' (invalid)'} | {rat(m)} | "
                   f"{_pct(c.CCC, c.CCC_se)}{'' if c.valid else ' (invalid)'} | {rat(c)} |")
    return "\n".join(out)


def sizes_table(c):
    "Classification, MC, the preset: per class, coverage and mean size of each score (all draws' test points)."
    c = c[(c.guarantee == "mc") & (c.method == "Recommended")]
    scores = [s for s in ("lac", "aps", "raps") if s in set(c.score)]
    out = ["| dataset | class | " + " | ".join(f"{LABEL[s]}: coverage % / size" for s in scores) + " |",
           "|---|---|" + "---|" * len(scores)]
    for (ds, k), g in c.groupby(["dataset", "cls"]):
        g = g.set_index("score")
        out.append(f"| {ds} | {k} | " + " | ".join(f"{100 * g.coverage[s]:.1f} / {g.mean_size[s]:.2f}" for s in scores) + " |")
    return "\n".join(out)


def targets_table(s):
    "The targets: adaptive scores narrower on at least half the regression datasets, validity everywhere."
    r, c = s[s.task == "regression"], s[s.task == "classification"]
    out = ["| target | method, guarantee | measured | met |", "|---|---|---|---|"]
    n_ds = r.dataset.nunique()
    for (me, g), h in r.groupby(["method", "guarantee"]):
        ad = h[h.score.isin(["normalized", "cqr"])]
        narrower = sorted(ad[ad.narrower].dataset.unique())
        ok = len(narrower) >= n_ds / 2
        out.append(f"| normalized residual or CQR narrower than the absolute residual beyond 2 s.e. on >= half the datasets | "
                   f"{me}, {g.upper()} | {len(narrower)} of {n_ds} ({', '.join(narrower) or 'none'}) | {'yes' if ok else 'no'} |")
    for (me, g), h in r.groupby(["method", "guarantee"]):
        ad = h[h.score.isin(["normalized", "cqr"])]
        bad = [f"{x.dataset} {x.score}" for x in ad[~ad.valid].itertuples()]
        out.append(f"| adaptive regression scores valid everywhere | {me}, {g.upper()} | {len(ad) - len(bad)} of {len(ad)} cells valid"
                   f"{' (not: ' + ', '.join(bad) + ')' if bad else ''} | {'yes' if not bad else 'no'} |")
    for (me, g), h in c.groupby(["method", "guarantee"]):
        ad = h[h.score.isin(["aps", "raps", "aps-det", "raps-det"])]
        bad = [f"{x.dataset} {x.score}" for x in ad[~ad.valid].itertuples()]
        out.append(f"| APS / RAPS valid on cifar10c and the tabular task | {me}, {g.upper()} | {len(ad) - len(bad)} of {len(ad)} cells valid"
                   f"{' (not: ' + ', '.join(bad) + ')' if bad else ''} | {'yes' if not bad else 'no'} |")
    return "\n".join(out)


def _parser():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["all", "train", "run", "summary", "table"])
    ap.add_argument("table", nargs="?", choices=["widths", "classes", "sizes", "targets"], default=None)
    ap.add_argument("--datasets", nargs="+", default=None, choices=REGRESSION + CLASSIFICATION)
    ap.add_argument("--n-sims", type=int, default=100)
    ap.add_argument("--n-test", type=int, default=N_TEST)
    ap.add_argument("--cache", default=os.environ.get("PFWCP_SCORES_CACHE", ".pfwcp_cache/scores"))
    ap.add_argument("--out-dir", default="results/scores")
    ap.add_argument("--summary-file", default=None)
    ap.add_argument("--quick", action="store_true", help="a few epochs per model: the smallest run (the test's)")
    return ap


def main(argv=None):
    ap = _parser()
    a = ap.parse_args(argv)
    if a.n_sims < 2 or a.n_test < 1:
        ap.error("--n-sims must be >= 2 (standard errors) and --n-test >= 1")
    if a.command == "table":
        if a.table is None or not a.summary_file:
            ap.error("table needs a table name and --summary-file SUMMARY_CSV")
        if a.table == "sizes":
            print(sizes_table(pd.read_csv(a.summary_file)))
        else:
            print({"widths": widths_table, "classes": classes_table, "targets": targets_table}[a.table](pd.read_csv(a.summary_file)))
        return
    out = Path(a.out_dir)
    datasets = a.datasets or list(REGRESSION + CLASSIFICATION)
    Path(a.cache).mkdir(parents=True, exist_ok=True)
    if a.command in ("all", "train"):
        for ds in datasets:
            t0 = time.time()
            m = models_for(ds, a.cache, a.quick)
            print(f"{ds}: models ready ({time.time() - t0:.1f} s; trained in {m['seconds']})", flush=True)
    if a.command in ("all", "run"):
        out.mkdir(parents=True, exist_ok=True)
        for ds in datasets:
            t0 = time.time()
            rows, cls_rows = run_dataset(ds, a.n_sims, a.n_test, a.cache, a.quick)
            _append(pd.DataFrame(rows), out / "draws.csv.gz")
            if cls_rows:
                _append(pd.DataFrame(cls_rows), out / "classes.csv.gz")
            print(f"{ds}: {a.n_sims} draws in {time.time() - t0:.1f} s", flush=True)
    if a.command in ("all", "summary"):
        summarise(pd.read_csv(out / "draws.csv.gz")).to_csv(out / "summary.csv", index=False)
        if (out / "classes.csv.gz").exists():
            class_summary(pd.read_csv(out / "classes.csv.gz")).to_csv(out / "class_summary.csv", index=False)
        print(f"wrote {out / 'summary.csv'}")


if __name__ == "__main__":
    main()
