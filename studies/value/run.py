"""The value benchmark: what federating buys over split CP on the test agent's own points.

For each dataset, heterogeneity level, test-agent size n_1 and ratio setting (covariates per agent for the ratio fits,
`--n-ratio`; the ratio classifiers' hyperparameters, `--ratio-hparams`), the same calibration draws (seed 0, estimated
and, where the federation has them, true density ratios) are given to local CP and to every method; per draw we record
coverage, the mean size of the finite sets and the share of infinite sets, and summarise per cell: MC and CCC with
their Monte Carlo s.e., the width ratio to CP paired on the same draws (with its s.e.), the infinite share, and the
order-statistics ceiling. `Alone` is the test agent without the federation: its own predictor on its own training
points (`pipeline.alone_setup`) and split CP on its own calibration points, on the same draws.

    python studies/value/run.py --datasets gaussian --n1 100 --n-sims 2 --light --out /tmp/value_smoke.csv
    python studies/value/run.py --out results/value/draws.csv --levels severe --n1 5 10 20 50 100
    python studies/value/run.py --summary results/value/draws.csv --out results/value/summary.csv
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
from scipy import stats

from pfwcp_nb.data import make_federation, DATASETS, DATASET_SPECS, NATURAL, SIMULATED_DATASETS
from pfwcp_nb.pipeline import alone_setup, train_setup, sample_draw, setup_evidence, with_ratio_model
from pfwcp_nb.metrics import evaluate_thresholds
from pfwcp_nb.procedure import ccc_alpha
from pfwcp_nb.methods import PAPER

sys.path.insert(0, str(Path(__file__).parent))
import candidates as vp  # noqa: E402
import tables  # noqa: E402
from pfwcp_nb import methods as bl  # noqa: E402

ALPHA, DELTA = 0.1, 0.1
M_TEST = 500       # test points per draw (the summary's test-noise correction assumes this)
SCARCE = 20        # n_1 up to which the MC methods that CP does not dominate are run (and MC with the true ratios)


def methods():
    "name -> (function(draw, alpha, delta), weight kinds it runs on, guarantees)."
    E, EO, BOTH, CCC = ("estimated",), ("estimated", "oracle"), ("mc", "ccc"), ("ccc",)
    return {
        "CP": (bl.cp, E, BOTH),
        "FCP-QQ": (bl.fcp_qq, E, BOTH),
        "FWCP": (bl.fwcp, E, BOTH),
        "PFWCP": (bl.pfwcp, EO, BOTH),
        "PFWCP-rec": (lambda d, a, de: bl.pfwcp(d, a, de, select="finite-first", gamma="auto"), E, BOTH),
        "PFWCP-ff": (lambda d, a, de: bl.pfwcp(d, a, de, select="finite-first"), EO, BOTH),
        "PFWCP-gmc": (vp.pfwcp_gamma_mc, E, CCC),
        "osPFWCP": (bl.ospfwcp, EO, CCC),
        "osPFWCP-pool": (vp.ospfwcp_pooled, EO, CCC),
        "osPFWCP-pool-mc": (vp.ospfwcp_pooled, E, ("mc",)),     # costly (the MC tau search): scarce n_1 only
        "osPFWCP-pool-band": (vp.ospfwcp_pool_band, E, CCC),
        "Sel-CP-pool": (vp.select_cp_pool, E, CCC),
        "Sel-slack": (vp.cp_or_pooled(False), E, CCC),
        "Sel-check-mc": (vp.select_check_mc, E, CCC),
        "Sel-check-ccc": (vp.cp_or_pooled(True), E, CCC),
        "Recommended": (bl.recommended, EO, BOTH),      # the preset of `methods` (`value.calibrate_recommended`) as it is now
        "osPFWCP-mc": (bl.ospfwcp, EO, ("mc",)),         # osPFWCP for MC (costly: the MC tau search)
        "Alone": (bl.cp, E, BOTH),                      # local CP with the test agent's own predictor (`alone_setup`)
    }


RATIO_HPARAMS = ("paper", "calibrated", "select")   # select: the classifier chosen by federated held-out log-loss, cross-fitted


def has_oracle(dataset):
    "Whether the federation of `dataset` has true density ratios (the simulated shifts do; natural groups do not)."
    return DATASET_SPECS[dataset].shift != "groups"


def _cache_file(cache, dataset, level, tag=""):
    return Path(cache) / f"{dataset}_{level}_0{tag}.pt"


def _load_or_train(path, train):
    if path.exists():
        return torch.load(path, weights_only=False)
    st = train()
    path.parent.mkdir(parents=True, exist_ok=True)         # a cache another study names (robust_cap) may not exist yet
    torch.save(st, path)
    return st


def setup_for(dataset, level, cache, n_ratio=None, hparams="paper"):
    """The trained models of a cell (cached in `cache`): the paper's setup, or its predictor with the ratios (and FWCP's
    classifier) refitted on `n_ratio` covariates per agent and/or with `hparams` (`pipeline.train_setup`)."""
    paper = _load_or_train(_cache_file(cache, dataset, level),
                           lambda: train_setup(dataset, level, seed=0, need_localizer=False, progress=False))
    n_ratio = None if n_ratio in (None, PAPER.n_train) else int(n_ratio)
    if n_ratio is None and hparams == "paper":
        return paper
    if hparams == "select":           # the paper's setup at this n_ratio, its ratios chosen and cross-fitted (2 folds)
        base = setup_for(dataset, level, cache, n_ratio, "paper")
        tag = ("" if n_ratio is None else f"_nratio{n_ratio}") + "_select"
        return _load_or_train(_cache_file(cache, dataset, level, tag), lambda: with_ratio_model(base, "select", crossfit=2))
    tag = ("" if n_ratio is None else f"_nratio{n_ratio}") + ("" if hparams == "paper" else f"_{hparams}")
    tkw = {"ratios": {"hparams": hparams}, "fwcp": {"hparams": hparams}}
    return _load_or_train(_cache_file(cache, dataset, level, tag),
                          lambda: train_setup(dataset, level, seed=0, n_ratio=n_ratio, train_kw=tkw, base=paper,
                                              need_localizer=False, progress=False))


def evidence_for(setup, fed, dataset, level, cache, n_ratio=None, hparams="paper"):
    """The label-free evidence of the cell's estimated ratios (`pipeline.setup_evidence`: a 2-fold cross-fit of the same
    classifiers on the same covariates), cached in `cache` beside the setup; the preset (`Recommended`) reads it."""
    tag = ("" if n_ratio is None else f"_nratio{n_ratio}") + ("" if hparams == "paper" else f"_{hparams}") + "_evidence"
    return _load_or_train(_cache_file(cache, dataset, level, tag), lambda: setup_evidence(setup, fed))


def alone_for(dataset, level, cache):
    "The test agent alone (`pipeline.alone_setup` of the paper's setup), cached in `cache`."
    return _load_or_train(_cache_file(cache, dataset, level, "_alone"),
                          lambda: alone_setup(setup_for(dataset, level, cache)))


LIGHT_CCC = {"CP", "PFWCP", "PFWCP-rec", "osPFWCP", "osPFWCP-pool", "Sel-slack", "Sel-check-mc", "Sel-check-ccc", "FCP-QQ"}
SCARCE_MC = {"CP", "FCP-QQ", "FWCP", "PFWCP", "PFWCP-ff", "PFWCP-rec", "osPFWCP-pool-mc"}


def wanted(name, kind, guarantee, n1, light, explicit=False):
    """Which (method, weights, guarantee) a cell runs. Methods named with `--methods` (`explicit`): all their weights and
    guarantees. Full: all but the costly MC ones above SCARCE. Light: the set the summary needs (CCC: today's methods,
    the candidates that survived n_1 = 100; MC: CP, and the scarce-data set)."""
    if explicit:
        return True
    if guarantee == "mc" and n1 > SCARCE and (kind == "oracle" or name == "osPFWCP-pool-mc"):
        return False                  # MC where local CP is the answer: no true-ratio run, no costly one-shot search
    if not light:
        return True
    if guarantee == "ccc":
        return name in LIGHT_CCC or (n1 <= SCARCE and name == "PFWCP-ff")
    return name == "CP" or (n1 <= SCARCE and name in SCARCE_MC)


def _evaluate(d, thr):
    "Coverage, the mean size of the finite sets and the infinite share of thresholds `thr` on draw `d`'s test points."
    cov, _, _ = evaluate_thresholds(d.task, d.test_scores, thr, d.test_labels)
    fin = np.isfinite(thr)
    size = (np.nan if not fin.any() else
            evaluate_thresholds(d.task, d.test_scores[fin], thr[fin],
                                None if d.test_labels is None else d.test_labels[fin])[1])
    return cov, size, float(np.isinf(thr).mean())


def _ceiling_rows(d, neff, tag):
    "The ceiling: the ideal constant threshold at the pooled level on the draw's own test scores (an oracle)."
    true = d.test_scores if d.test_labels is None else d.test_scores[np.arange(d.m), d.test_labels]
    rows = []
    for guarantee in ("mc", "ccc"):
        a = ALPHA if guarantee == "mc" else ccc_alpha(ALPHA, DELTA, sum(neff))
        thr = np.full(d.m, np.quantile(true, 1 - a))
        cov, size, _ = evaluate_thresholds(d.task, d.test_scores, thr, d.test_labels)
        rows.append(dict(tag, method="ceiling", weights="oracle", guarantee=guarantee, coverage=cov, size_finite=size,
                         inf_share=0.0, n_eff_pool=sum(neff), seconds=0.0))
    return rows


def run_cell(dataset, level, n1, n_sims, n_test, cache, names, light=False, n_ratio=None, hparams="paper",
             explicit=False):
    "The per-draw rows of one cell: every method of `names` on the same `n_sims` draws."
    st = setup_for(dataset, level, cache, n_ratio, hparams)
    alone = alone_for(dataset, level, cache) if "Alone" in names else None
    fed = make_federation(dataset, level, K=st.K, seed=0)
    kinds = ("estimated", "oracle") if has_oracle(dataset) else ("estimated",)
    ev = evidence_for(st, fed, dataset, level, cache, n_ratio, hparams) if "Recommended" in names else None
    M = methods()
    tag = dict(dataset=dataset, heterogeneity=level, n1=n1, n_ratio=n_ratio or PAPER.n_train, ratio_hparams=hparams)
    rows = []
    for sim in range(n_sims):
        draws = sample_draw(st, fed, sim, n_cal_test=n1, n_test=n_test, weights=kinds, localize=False, own_weights=True,
                            evidence=ev)
        if alone is not None:         # the same points, scored by the test agent's own predictor
            draws["alone"] = sample_draw(alone, fed, sim, n_cal_test=n1, n_test=n_test, localize=False)["estimated"]
        neff = [float(np.sum(w) ** 2 / np.sum(w ** 2)) for w in draws["estimated"].cal_weights]
        for name in names:
            fn, method_kinds, guarantees = M[name]
            for kind in (k for k in method_kinds if k in kinds):
                d = draws["alone" if name == "Alone" else kind]
                for guarantee in guarantees:
                    if not wanted(name, kind, guarantee, n1, light, explicit):
                        continue
                    t0 = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        thr = np.asarray(fn(d, ALPHA, None if guarantee == "mc" else DELTA), dtype=float)
                    cov, size, inf = _evaluate(d, thr)
                    rows.append(dict(tag, sim=sim, method=name, weights=kind, guarantee=guarantee, coverage=cov,
                                     size_finite=size, inf_share=inf, n_eff_pool=sum(neff),
                                     seconds=time.perf_counter() - t0))
        rows += [dict(r, sim=sim) for r in _ceiling_rows(draws["estimated"], neff, tag)]
    return rows


def summarise(df):
    "Per cell and method: MC, CCC (s.e.), width ratio to CP paired on the same draws (s.e.), infinite share."
    keys = ["dataset", "heterogeneity", "n1", "n_ratio", "ratio_hparams", "guarantee"]
    # a later run of a method on the same draws replaces the earlier rows (and repeats the ceiling rows)
    df = df.drop_duplicates(keys + ["sim", "method", "weights"], keep="last")
    cp = df[df.method == "CP"].set_index(keys + ["sim"])["size_finite"]
    out = []
    for (cell, g) in df.groupby(keys + ["method", "weights"]):
        N = len(g)
        c = g.coverage.to_numpy()
        ok = (c >= 1 - ALPHA).astype(float)
        ref = cp.reindex(pd.MultiIndex.from_frame(g[keys + ["sim"]])).to_numpy()
        r = g.size_finite.to_numpy() / ref
        r = r[np.isfinite(r)]
        var = c.var(ddof=1) - np.mean(c * (1 - c)) / M_TEST     # the conditional coverage's spread, test noise removed
        cond = float(c.mean() >= 1 - ALPHA) if var <= 0 else float(stats.norm.cdf((c.mean() - 1 + ALPHA) / np.sqrt(var)))
        out.append(dict(zip(keys + ["method", "weights"], cell), n_sims=N, MC=c.mean(), MC_se=c.std(ddof=1) / np.sqrt(N),
                        CCC=ok.mean(), CCC_se=np.sqrt(max(ok.mean() * (1 - ok.mean()), 1 / N) / N), CCC_cond=cond,
                        ratio=r.mean() if r.size else np.nan,
                        ratio_se=r.std(ddof=1) / np.sqrt(r.size) if r.size > 1 else np.nan,
                        ratio_draws=r.size, inf_share=g.inf_share.mean(), size_finite=g.size_finite.mean(),
                        n_eff_pool=g.n_eff_pool.median(), seconds=g.seconds.mean()))
    return pd.DataFrame(out)


PRESET_SCARCE = "PFWCP-rec"           # MC and CCC where local CP is the whole line: finite-first cells and the band
MC_CP_FINITE_N1 = 9                  # local CP's MC set is finite from n_1 = 9, its CCC set from n_1 = 22 (alpha = delta = 0.1)
CCC_CP_FINITE_N1 = 22


# the method with the true ratios that a method's width is compared with: itself, or its twin without the parts that
# only estimated ratios need (the band's gamma, the check and the CP option)
TRUE_RATIO_TWIN = {"PFWCP-rec": "PFWCP-ff", "Sel-slack": "osPFWCP-pool", "Sel-check-ccc": "osPFWCP-pool",
                   "osPFWCP-pool-mc": "osPFWCP-pool"}


def with_preset(s):
    """The summary with the preset's rows: per cell, the rows of the method `trust.recommend` names there. CCC:
    `value.CPOrPooled` (Sel-check-ccc), MC: local CP; where local CP is the whole line, PFWCP with finite-first cells and
    the band, gamma from `choose_gamma` (PFWCP-rec)."""
    est = s[s.weights == "estimated"]
    def pick(r):
        if r.guarantee == "mc":
            return "CP" if r.n1 >= MC_CP_FINITE_N1 else PRESET_SCARCE
        return "Sel-check-ccc" if r.n1 >= CCC_CP_FINITE_N1 else PRESET_SCARCE
    rows = est[est.method == est.apply(pick, axis=1)].copy()
    rows["runs"], rows["method"] = rows.method, "Preset"
    return pd.concat([s, rows], ignore_index=True)


def verdicts(s):
    "Validity (MC >= 90 % - 2 s.e., CCC >= 90 % - 1 s.e.), narrower / wider than CP beyond two s.e., finite share."
    s = s.copy()
    mc = s.guarantee == "mc"
    s["valid"] = np.where(mc, s.MC >= 1 - ALPHA - 2 * s.MC_se, s.CCC >= 1 - DELTA - s.CCC_se)
    s["narrower"] = s.ratio + 2 * s.ratio_se.fillna(0) < 1
    s["wider"] = s.ratio - 2 * s.ratio_se.fillna(0) > 1
    s["finite"] = 1 - s.inf_share
    return s


def load(paths):
    """The per-draw rows of one or more CSV files (supplementary runs of a method on the same draws included). Rows of
    the check variants where local CP's CCC set is the whole line are dropped: a few were run by an earlier version of
    the prototype that gated the federation there too (the check is not run there now)."""
    df = pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)
    if "n_ratio" not in df:                    # the first runs: the paper's ratios
        df["n_ratio"], df["ratio_hparams"] = PAPER.n_train, "paper"
    return df[~(df.method.str.startswith("Sel-check") & (df.n1 < CCC_CP_FINITE_N1))]


def label(r):
    return r.method + ("" if r.weights == "estimated" else " (true ratios)")


def headline_table(s):
    "n_1 = 100, CCC, every dataset-level: validity, paired width ratio to local CP, infinite share, per method."
    h = s[(s.n1 == 100) & (s.guarantee == "ccc")]
    out = ["| method | cells | valid | narrower than CP | wider than CP | width ratio median (max) | infinite share, max |",
           "|---|---|---|---|---|---|---|"]
    order = ["CP", "PFWCP", "PFWCP-rec", "osPFWCP", "osPFWCP-pool", "Sel-CP-pool", "osPFWCP-pool-band", "PFWCP-gmc",
             "Sel-slack", "Sel-check-mc", "Sel-check-ccc", "Preset", "ceiling"]
    for (m, w), g in sorted(h.groupby(["method", "weights"]), key=lambda x: (order.index(x[0][0]) if x[0][0] in order
                                                                           else 99, x[0][1])):
        name = "order-statistics ceiling (an oracle)" if m == "ceiling" else label(g.iloc[0])
        out.append(f"| {name} | {len(g)} | {int(g.valid.sum())} | {int(g.narrower.sum())} | {int(g.wider.sum())} | "
                   f"{g.ratio.median():.3f} ({g.ratio.max():.3f}) | {100 * g.inf_share.max():.1f} % |")
    return "\n".join(out)


def scarce_table(s):
    "Severe shift, n_1 = 5 ... 100: per n_1 and guarantee, the methods that answer where local CP cannot."
    h = s[(s.heterogeneity == "severe")]
    out = ["| n_1 | guarantee | method | datasets | valid | finite share, min | width ratio to CP, median | vs true ratios, median |",
           "|---|---|---|---|---|---|---|---|"]
    est = h[h.weights == "estimated"]
    orc = h[h.weights == "oracle"].set_index(["dataset", "n1", "guarantee", "method"]).size_finite
    for (n1, gu, m), g in est.groupby(["n1", "guarantee", "method"]):
        if m not in ("CP", "FCP-QQ", "FWCP", "PFWCP", "PFWCP-ff", "osPFWCP", "osPFWCP-pool", "osPFWCP-pool-mc",
                     "Sel-slack", "Sel-check-ccc", "Preset"):
            continue
        base = g.runs if m == "Preset" else pd.Series(m, index=g.index)
        base = base.replace(TRUE_RATIO_TWIN)
        keys = list(zip(g.dataset, g.n1, g.guarantee, base))
        tr = g.size_finite.to_numpy() / orc.reindex(keys).to_numpy()
        tr = tr[np.isfinite(tr)]
        rr = g.ratio[np.isfinite(g.ratio)]
        out.append(f"| {n1} | {gu.upper()} | {m} | {len(g)} | {int(g.valid.sum())} | {100 * g.finite.min():.0f} % | "
                   f"{rr.median():.3f} | " + (f"{np.median(tr):.3f} |" if tr.size else "– |")
                   if rr.size else f"| {n1} | {gu.upper()} | {m} | {len(g)} | {int(g.valid.sum())} | "
                   f"{100 * g.finite.min():.0f} % | – (CP infinite) | " + (f"{np.median(tr):.3f} |" if tr.size else "– |"))
    return "\n".join(out)


def targets_table(s):
    "The targets of studies/value/, the preset's measured value next to today's recommended configuration (PFWCP-rec)."
    est = s[s.weights == "estimated"]
    pre, rec = est[est.method == "Preset"], est[est.method == "PFWCP-rec"]
    h = lambda d: d[(d.n1 == 100) & (d.guarantee == "ccc")]
    scarce = pre[pre.n1 <= SCARCE]
    orc = s[s.weights == "oracle"].set_index(["dataset", "heterogeneity", "n1", "guarantee", "method"]).size_finite
    keys = list(zip(scarce.dataset, scarce.heterogeneity, scarce.n1, scarce.guarantee,
                    scarce.runs.replace(TRUE_RATIO_TWIN)))
    vs_true = (scarce.size_finite.to_numpy() / orc.reindex(keys).to_numpy())
    vs_true = vs_true[np.isfinite(vs_true)]
    cpfin = h(pre)
    rows = [("valid in every cell (MC >= 90 % - 2 s.e., CCC >= 90 % - 1 s.e.)", "every cell",
             f"{int(pre.valid.sum())} of {len(pre)} cells", f"{int(rec.valid.sum())} of {len(rec)} cells"),
            ("CCC at n_1 = 100: median width ratio to local CP", "<= 0.93", f"{h(pre).ratio.median():.3f}",
             f"{h(rec).ratio.median():.3f}"),
            ("CCC at n_1 = 100: largest width ratio", "<= 1.01", f"{h(pre).ratio.max():.3f}", f"{h(rec).ratio.max():.3f}"),
            ("CCC at n_1 = 100: infinite share where CP is finite, max", "0", f"{100 * cpfin.inf_share.max():.1f} %",
             f"{100 * h(rec).inf_share.max():.1f} %"),
            ("MC at n_1 >= 50: largest width ratio", "<= 1.01",
             f"{pre[(pre.guarantee == 'mc') & (pre.n1 >= 50)].ratio.max():.3f}", "–"),
            ("n_1 <= 20: finite share, min", ">= 95 %", f"{100 * scarce.finite.min():.1f} %", "–"),
            ("n_1 <= 20: width vs the same method with true ratios, max", "<= 1.15",
             f"{vs_true.max():.3f}" if vs_true.size else "–", "–"),
            ("wider than local CP beyond two s.e.", "no cell", f"{int(pre.wider.sum())} of {len(pre)} cells",
             f"{int(rec.wider.sum())} of {len(rec)} cells"),
            ("narrower than local CP beyond two s.e.", "where order statistics allow", f"{int(pre.narrower.sum())} of {len(pre)} cells",
             f"{int(rec.narrower.sum())} of {len(rec)} cells")]
    out = ["| target | wanted | preset | PFWCP-rec (finite-first cells and the band everywhere: the former recommendation) |",
           "|---|---|---|---|"]
    return "\n".join(out + [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows])


def cells_line(s):
    "Which cells the summary holds: levels, n_1 and datasets, with the draws of each."
    g = s[s.method == "CP"].groupby(["heterogeneity", "n1"]).agg(datasets=("dataset", "nunique"), draws=("n_sims", "min"))
    return "; ".join(f"{lv} n_1 = {n1}: {int(r.datasets)} datasets x {int(r.draws)} draws"
                     for (lv, n1), r in g.iterrows()) + " (x 500 test points each)"


COLUMNS = ["dataset", "heterogeneity", "n1", "n_ratio", "ratio_hparams", "sim", "method", "weights", "guarantee",
           "coverage", "size_finite", "inf_share", "n_eff_pool", "seconds"]


def append_rows(rows, out: Path):
    "Append per-draw rows to `out` (a CSV with `COLUMNS`; ValueError if an existing file has other columns)."
    if out.exists():
        head = out.open().readline().strip().split(",")
        if head != COLUMNS:
            raise ValueError(f"{out} has the columns {head}, not this script's {COLUMNS}: write a new file with --out.")
    pd.DataFrame(rows, columns=COLUMNS).to_csv(out, mode="a", header=not out.exists(), index=False)


def levels_of(dataset, levels):
    "The heterogeneity levels a dataset runs at: the given simulated levels, or its natural groups' single level."
    return [NATURAL] if not has_oracle(dataset) else levels


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=None,
                    help="registered datasets (default: the nine of the paper; natural federations by name)")
    ap.add_argument("--levels", nargs="+", default=["severe"], choices=["severe", "moderate", "mild"],
                    help="heterogeneity levels of the simulated federations (a natural federation has its own)")
    ap.add_argument("--n1", nargs="+", type=int, default=[100])
    ap.add_argument("--n-sims", type=int, default=500)
    ap.add_argument("--n-test", type=int, default=500)
    ap.add_argument("--n-ratio", nargs="+", type=int, default=[PAPER.n_train],
                    help=f"covariates per agent of the ratio fits ({PAPER.n_train} = the paper's training covariates)")
    ap.add_argument("--ratio-hparams", nargs="+", choices=RATIO_HPARAMS, default=["paper"],
                    help="the ratio classifiers' hyperparameters (`ratio_fit.fit_density_ratios(hparams=...)`); select: "
                         "the classifier chosen by federated held-out log-loss (`pipeline.with_ratio_model`), cross-fitted")
    ap.add_argument("--methods", nargs="+", default=None,
                    help="run only these (all their weights and guarantees), on the same draws (default: every method)")
    ap.add_argument("--cache", default=os.environ.get("PFWCP_VALUE_CACHE", ".pfwcp_cache/value"))
    ap.add_argument("--out", default=None, help="per-draw CSV to append to (a run)")
    ap.add_argument("--summary", nargs="+", default=None, metavar="DRAWS_CSV",
                    help="summarise these per-draw files into --out (summary CSV) instead of running")
    ap.add_argument("--table", choices=["headline", "scarce", "targets", "cells"] + list(tables.TABLES), default=None,
                    help="print a table of the summary CSV given as --summary-file")
    ap.add_argument("--summary-file", default=None)
    ap.add_argument("--end-to-end", nargs="+", default=None, metavar="DRAWS_CSV",
                    help="the end-to-end table's rows (alone, federated model + CP, + preset) of these files into --out")
    ap.add_argument("--light", action="store_true", help="only the methods the summary needs (see `wanted`)")
    a = ap.parse_args(argv)
    if a.table:
        if not a.summary_file:
            ap.error("--table needs --summary-file SUMMARY_CSV")
        s = pd.read_csv(a.summary_file)
        old = {"headline": headline_table, "scarce": scarce_table, "targets": targets_table, "cells": cells_line}
        print(old[a.table](s) if a.table in old else tables.TABLES[a.table](s))
        return
    if a.summary or a.end_to_end:
        if not a.out:
            ap.error("--summary and --end-to-end need --out CSV")
        if a.end_to_end:
            tables.end_to_end(load(a.end_to_end)).to_csv(a.out, index=False)
            return
        df = load(a.summary)           # the former preset's rows (`with_preset`) where its runs are there
        s = summarise(df)
        verdicts(with_preset(s) if (df.method == "Sel-check-ccc").any() else s).to_csv(a.out, index=False)
        return
    if not a.out:
        ap.error("a run needs --out DRAWS_CSV")
    bad = [m for m in (a.methods or []) if m not in methods()] + [d for d in (a.datasets or []) if d not in DATASETS]
    if bad:
        ap.error(f"unknown method or dataset {bad}; methods: {list(methods())}; datasets: {list(DATASETS)}")
    if min(a.n1 + [a.n_sims, a.n_test]) < 1 or min(a.n_ratio) < PAPER.n_train:
        ap.error(f"--n1, --n-sims, --n-test must be >= 1 and --n-ratio >= n_train = {PAPER.n_train}")
    Path(a.cache).mkdir(parents=True, exist_ok=True)
    names = a.methods or list(methods())
    out = Path(a.out)
    for ds in a.datasets or list(SIMULATED_DATASETS):
        for level in levels_of(ds, a.levels):
            for hp in a.ratio_hparams:
                for n_ratio in a.n_ratio:
                    for n1 in a.n1:
                        t0 = time.time()
                        rows = run_cell(ds, level, n1, a.n_sims, a.n_test, a.cache, names, a.light,
                                        None if n_ratio == PAPER.n_train else n_ratio, hp, explicit=bool(a.methods))
                        append_rows(rows, out)
                        print(f"{ds} {level} n1={n1} n_ratio={n_ratio} {hp}: {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
