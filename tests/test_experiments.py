"""Tests of the experiment harness (pfwcp_nb.metrics, pipeline, cache, runner, report): metrics against hand-computed cases, the paper-layout tables against the paper's
own markers and boldface, seeded integration runs of every method (gaussian and one real dataset), the CLI, and
resumption after an interrupt."""
import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pfwcp_nb import grid as grid_mod, metrics, models, pipeline, report, report_figures, runner
from pfwcp_nb.backends import Execution
from pfwcp_nb import cache as cache_mod
from pfwcp_nb.cache import CACHE_SCHEMA, ResultCache, RunConfig, _stable_hash, load_cell
from pfwcp_nb.reproduce import with_means
from conftest import grid_run

ROOT = Path(__file__).resolve().parents[1]

# ---------------------------------------------------------------- metrics

def test_evaluate_thresholds_regression_hand_computed():
    cov, size, n_inf = metrics.evaluate_thresholds("regression", np.array([0.1, 0.5, 2.0, 0.3]),
                                             np.array([0.2, 0.4, 3.0, 0.3]))
    assert cov == 0.75                           # 0.5 > 0.4 is the only miss; 0.3 <= 0.3 is covered
    assert size == pytest.approx(2 * 3.9 / 4)    # interval length 2t
    assert n_inf == 0
    cov, size, n_inf = metrics.evaluate_thresholds("regression", np.array([1.0, 1.0]), np.array([np.inf, 0.5]))
    assert (cov, n_inf) == (0.5, 1) and np.isinf(size)

def test_evaluate_thresholds_classification_hand_computed():
    S = np.array([[0.1, 0.8, 0.95],      # t=0.85 -> set {0, 1}; true label 1 covered
                  [0.6, 0.3, 0.2]])      # t=0.25 -> set {2};    true label 1 not covered
    cov, size, n_inf = metrics.evaluate_thresholds("classification", S, np.array([0.85, 0.25]), np.array([1, 1]))
    assert cov == 0.5 and size == 1.5 and n_inf == 0

@pytest.mark.parametrize("kw, match", [
    (dict(task="regresion", test_scores=np.ones(2), thresholds=np.ones(2)), "task"),
    (dict(task="regression", test_scores=np.ones(2), thresholds=np.ones(3)), "thresholds"),
    (dict(task="regression", test_scores=np.ones(2), thresholds=np.array([1.0, np.nan])), "NaN"),
    (dict(task="classification", test_scores=np.ones((2, 3)), thresholds=np.ones(2)), "test_labels"),
])
def test_evaluate_thresholds_bad_input(kw, match):
    with pytest.raises(ValueError, match=match):
        metrics.evaluate_thresholds(**kw)

def test_coverage_metrics_hand_computed():
    cov = np.array([0.95, 0.85, 0.90, 0.92])
    m = metrics.coverage_metrics(cov, np.array([1.0, 2.0, 3.0, 4.0]), alpha=0.1)
    assert m["MC"] == pytest.approx(0.905)
    assert m["CCC"] == pytest.approx(0.75)              # 0.90 >= 0.90 counts
    assert m["CMC"] == pytest.approx((0.05 + 0.05 + 0.0 + 0.02) / 4)
    assert m["Eff"] == pytest.approx(2.5)
    assert m["MC_se"] == pytest.approx(np.sqrt(np.var(cov, ddof=1) / 4))
    assert m["CCC_se"] == pytest.approx(np.sqrt(0.75 * 0.25 / 4))
    dev = np.abs(cov - 0.9)
    assert m["CMC_se"] == pytest.approx(np.std(dev, ddof=1) / 2)
    assert m["Eff_se"] == pytest.approx(np.std([1, 2, 3, 4], ddof=1) / 2)
    assert m["n_sims"] == 4

def test_coverage_metrics_infinite_sets_and_bad_input():
    m = metrics.coverage_metrics(np.array([1.0, 0.9]), np.array([np.inf, 2.0]), 0.1, inf_count=np.array([3, 0]), n_test=10)
    assert np.isinf(m["Eff"]) and m["inf_frac"] == pytest.approx(3 / 20)
    with pytest.raises(ValueError, match="coverage"):
        metrics.coverage_metrics(np.array([]), np.array([]))
    with pytest.raises(ValueError, match="alpha"):
        metrics.coverage_metrics(np.array([0.9]), np.array([1.0]), alpha=1.5)

# ---------------------------------------------------------------- markers, tables, the paper's reference

def test_marker_bands():
    assert [metrics.marker(v, "mc") for v in (0.9, 0.8951, 0.8899, np.nan)] == ["green", "yellow", "red", "red"]
    assert [metrics.marker(v, "ccc") for v in (0.95, 0.85, 0.79)] == ["green", "yellow", "red"]
    assert metrics.marker(0.94, "mc", alpha=0.05) == "yellow" and metrics.marker(0.93, "mc", alpha=0.05) == "red"

# Bold entries of the paper's Table 2 (mc) and Table 3 (ccc), read off the typeset tables: (table, row, dataset, method)
PAPER_BOLD = {
    ('ccc', 'CCC', 'airfoil', 'FGLCP'), ('ccc', 'CCC', 'bike', 'FGLCP'), ('ccc', 'CCC', 'cifar10c', 'FGLCP'),
    ('ccc', 'CCC', 'concrete', 'FGLCP'), ('ccc', 'CCC', 'concrete', 'PFWCP'), ('ccc', 'CCC', 'crime', 'FWCP-QQ'),
    ('ccc', 'CCC', 'gaussian', 'FGLCP'), ('ccc', 'CCC', 'poisson', 'osPFWCP'), ('ccc', 'CCC', 'protein', 'FGLCP'),
    ('ccc', 'CCC', 'star', 'FGLCP'), ('ccc', 'CMC', 'airfoil', 'PFWCP'), ('ccc', 'CMC', 'bike', 'PFWCP'),
    ('ccc', 'CMC', 'cifar10c', 'FGLCP'), ('ccc', 'CMC', 'concrete', 'PFWCP'), ('ccc', 'CMC', 'crime', 'FWCP-QQ'),
    ('ccc', 'CMC', 'gaussian', 'osPFWCP'), ('ccc', 'CMC', 'poisson', 'osPFWCP'), ('ccc', 'CMC', 'protein', 'PFWCP'),
    ('ccc', 'CMC', 'star', 'PFWCP'), ('ccc', 'Eff', 'airfoil', 'PFWCP'), ('ccc', 'Eff', 'bike', 'PFWCP'),
    ('ccc', 'Eff', 'cifar10c', 'FGLCP'), ('ccc', 'Eff', 'concrete', 'PFWCP'), ('ccc', 'Eff', 'crime', 'FWCP'),
    ('ccc', 'Eff', 'gaussian', 'osPFWCP'), ('ccc', 'Eff', 'poisson', 'osPFWCP'), ('ccc', 'Eff', 'protein', 'osPFWGLCP'),
    ('ccc', 'Eff', 'star', 'osPFWGLCP'), ('mc', 'CMC', 'airfoil', 'osPFWCP'), ('mc', 'CMC', 'bike', 'PFWCP'),
    ('mc', 'CMC', 'cifar10c', 'PFWCP'), ('mc', 'CMC', 'concrete', 'PFWCP'), ('mc', 'CMC', 'crime', 'PFWCP'),
    ('mc', 'CMC', 'gaussian', 'osPFWGLCP'), ('mc', 'CMC', 'poisson', 'osPFWCP'), ('mc', 'CMC', 'protein', 'FWCP'),
    ('mc', 'CMC', 'star', 'PFWCP'), ('mc', 'Eff', 'airfoil', 'osPFWCP'), ('mc', 'Eff', 'bike', 'PFWCP'),
    ('mc', 'Eff', 'cifar10c', 'PFWCP'), ('mc', 'Eff', 'concrete', 'PFWCP'), ('mc', 'Eff', 'crime', 'PFWCP'),
    ('mc', 'Eff', 'gaussian', 'osPFWGLCP'), ('mc', 'Eff', 'poisson', 'osPFWGLCP'), ('mc', 'Eff', 'protein', 'osPFWGLCP'),
    ('mc', 'Eff', 'star', 'PFWCP'), ('mc', 'MC', 'airfoil', 'osPFWCP'), ('mc', 'MC', 'bike', 'FGLCP'),
    ('mc', 'MC', 'cifar10c', 'PFWCP'), ('mc', 'MC', 'concrete', 'FGLCP'), ('mc', 'MC', 'crime', 'PFWCP'),
    ('mc', 'MC', 'gaussian', 'osPFWGLCP'), ('mc', 'MC', 'poisson', 'osPFWCP'), ('mc', 'MC', 'protein', 'osPFWGLCP'),
    ('mc', 'MC', 'star', 'FGLCP')}
# paper's colour of PFWCP (Table 2 all green; Table 3 crime and cifar10c yellow)
def _paper_df(g):
    key = "MC" if g == "mc" else "CCC"
    rows = []
    for m, row in report.PAPER_TABLES[g][key].items():
        for ds, v in row.items():
            rows.append(dict(dataset=ds, heterogeneity="severe", weights="estimated", guarantee=g, method=m,
                             **{key: v / 100, "CMC": report.PAPER_TABLES[g]["CMC"][m][ds] / 100,
                                "Eff": report.PAPER_TABLES[g]["Eff"][m][ds]},
                             # the paper gives no standard errors and no infinite sets: 0
                             **{key + "_se": 0.0, "CMC_se": 0.0, "Eff_se": 0.0, "inf_frac": 0.0, "inf_frac_se": 0.0},
                             **{k: np.nan for k in ({"MC", "CCC"} - {key}) for k in (k, k + "_se")},
                             n_sims=500, n_test=500))
    return pd.DataFrame(rows)

def _bold_cells(md: str, g: str, mark: str = "**"):
    lines = [l for l in md.splitlines() if l.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    out, block = set(), None
    for l in lines[2:]:
        cells = [c.strip() for c in l.strip("|").split("|")]
        if cells[0]:
            block = re.sub(r"[*]|\s*\(%\)", "", cells[0])
        for ds, c in zip(header[2:], cells[2:]):
            if (c.count("*") == 4) == (mark == "**") and mark in c:
                out.add((g, block, ds, cells[1]))
    return out

@pytest.mark.parametrize("g", ["mc", "ccc"])
def test_paper_table_reproduces_paper_markers_and_bold(g):
    md = report.paper_table(_paper_df(g), g, z=0)          # the point values' verdicts: the paper's reading
    ours = _bold_cells(md, g)
    paper = {b for b in PAPER_BOLD if b[0] == g}
    # the paper's one tie after rounding (Table 3, Eff, Gaussian: four green methods at 0.05) is bolded as a tie here
    tie = {("ccc", "Eff", "gaussian", m) for m in ("FCP-QQ", "FWCP-QQ", "PFWCP")}
    assert ours - tie == paper
    assert not _bold_cells(md, g, "*")                    # no italic: with no uncertainty nothing is undecided
    # colours: below the target as a point value is short (🟥): CP on all nine datasets in both tables (the paper's
    # yellow band, `metrics.marker`), PFWCP on crime in Table 3 only
    lines = md.splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    first = [l for l in lines if re.match(r"\| \*\*(MC|CCC)", l)][0]
    assert first.count("🟥") == 9 and "| CP |" in first and "⬜" not in md
    pf = [l for l in lines[2:] if "| PFWCP |" in l][0]          # first block (MC or CCC)
    crime = [c.strip() for c in pf.strip("|").split("|")][header.index("crime")]
    assert crime.startswith("🟥" if g == "ccc" else "🟩")

def test_paper_table_bad_input():
    with pytest.raises(ValueError, match="guarantee"):
        report.paper_table(_paper_df("mc"), "ccc")
    d = pd.concat([_paper_df("mc"), _paper_df("mc").assign(heterogeneity="mild")])
    with pytest.raises(ValueError, match="heterogeneity"):
        report.paper_table(d, "mc")

def test_compare_with_paper_on_paper_values_is_zero_difference():
    d = _paper_df("mc")
    for c in ("MC_se", "CMC_se", "Eff_se"):
        d[c] = 0.01
    cmp = report.compare_with_paper(d, "mc")
    assert len(cmp) == 8 * 9 * 3
    assert np.allclose(cmp["diff"], 0, atol=1e-9)
    assert (cmp.marker_ours == cmp.marker_paper).all()
    md = report.comparison_markdown(cmp)
    assert "Colour bands agree in 100%" in md

# ---------------------------------------------------------------- integration (real modules)

from pfwcp_nb import baselines
from pfwcp_nb.localizer import FoldedNormalSampler, Localizer

# small training budgets: the tests check the pipeline, not the paper's numbers
FAST = {"predictor": {"epochs": 60}, "ratios": {"epochs": 60}, "localizer": {"epochs": 60}}
SMALL = dict(n_sims=6, n_test=40, chunk_size=3, train_kw=FAST, progress=False)   # osPFWCP-MC is the slow cell

@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("pfwcp_cache")

@pytest.fixture(scope="module")
def gaussian_run(cache_dir):
    return grid_run(["gaussian"], None, ["mc", "ccc"], cache_dir=cache_dir, **SMALL)

def _check_rows(df, n_methods):
    "The rows of a run of the default methods (the paper's: `grid_mod.default_methods`) for both guarantees."
    assert len(df) == 2 * n_methods
    assert set(df.method) == set(grid_mod.default_methods())
    assert (df.n_errors == 0).all(), df.loc[df.n_errors > 0, ["method", "guarantee"]]
    assert (df.n_sims == SMALL["n_sims"]).all()
    for c in ("MC", "CCC"):
        assert df[c].between(0, 1).all()
    assert (df.Eff > 0).all()
    # per-draw coverages are fractions of the n_test test points
    m = SMALL["n_test"]
    for arr in df.attrs["draws"].values():
        assert np.allclose(arr["coverage"] * m, np.round(arr["coverage"] * m))

def test_gaussian_every_method_both_guarantees(gaussian_run):
    df = gaussian_run
    _check_rows(df, len(grid_mod.default_methods()))
    # split CP on the test agent's own 100 points is marginally valid: MC >= 1 - alpha up to Monte Carlo error
    cp = df[(df.method == "CP") & (df.guarantee == "mc")].iloc[0]
    assert cp.MC > 0.9 - 4 * cp.MC_se
    # the CCC variant of a method is never less conservative than its MC variant on the same draws (CP, FCP)
    for m in ("CP", "FCP"):
        mc, ccc = (df[(df.method == m) & (df.guarantee == g)].iloc[0] for g in ("mc", "ccc"))
        assert ccc.Eff >= mc.Eff - 1e-12 and ccc.MC >= mc.MC - 1e-12

@pytest.mark.slow
def test_real_dataset_every_method(cache_dir, require_dataset):
    d = require_dataset("airfoil")
    df = grid_run(["airfoil"], None, ["mc", "ccc"], data_dir=d, cache_dir=cache_dir, **SMALL)
    _check_rows(df, len(grid_mod.default_methods()))

def test_oracle_weights_rows(cache_dir):
    df = grid_run(["gaussian"], ["PFWCP", "FWCP"], ["mc"], weights=["estimated", "oracle"], cache_dir=cache_dir,
                    **{**SMALL, "n_sims": 3})
    assert sorted(df.method) == ["FWCP", "FWCP-oracle", "PFWCP", "PFWCP-oracle"]
    assert (df.n_errors == 0).all()
    # the oracle variant sees the same scores with other weights: different thresholds, same data
    d = df.attrs["draws"]
    est, orc = d[("gaussian", "severe", "estimated", "mc", "PFWCP")], d[("gaussian", "severe", "oracle", "mc", "PFWCP-oracle")]
    assert not np.array_equal(est["size"], orc["size"])

def test_run_experiment_one_guarantee(cache_dir, gaussian_run):
    how = Execution(cache_dir=cache_dir, chunk_size=SMALL["chunk_size"], progress=False)
    df = runner.run_experiment("gaussian", ["CP", "PFWCP"], "ccc", how=how, n_sims=SMALL["n_sims"], n_test=SMALL["n_test"],
                               train_kw=FAST)
    assert list(df.method) == ["CP", "PFWCP"] and (df.guarantee == "ccc").all()
    ref = gaussian_run.set_index(["method", "guarantee"])
    for r in df.itertuples():                       # read back from the cache: identical to the grid run
        assert r.CCC == ref.loc[(r.method, "ccc"), "CCC"] and r.Eff == ref.loc[(r.method, "ccc"), "Eff"]

@pytest.mark.parametrize("kw, match", [
    (dict(datasets=["nope"]), "datasets"), (dict(n_sims=0), "n_sims"), (dict(methods=["XYZ"]), "XYZ"),
    (dict(weights="orcl"), "weights"), (dict(guarantees=["pac"]), "guarantees"), (dict(alpha=1.5), "alpha"),
    (dict(heterogeneity="extreme"), "heterogeneity"), (dict(engine="fast"), "engine"),
])
def test_run_grid_bad_input(kw, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        grid_run(**{"datasets": ["gaussian"], "cache_dir": tmp_path, "progress": False, **kw})
    with pytest.raises(ValueError, match="dataset"):
        runner.run_experiment(["gaussian"])

# ---------------------------------------------------------------- cache, resume, CLI

def _count_calls(monkeypatch, name, fail_after=None):
    calls = {"n": 0}
    spec = baselines.METHODS[name]
    fn = spec.fn
    def wrapped(*a, **k):
        calls["n"] += 1
        if fail_after is not None and calls["n"] > fail_after:
            raise KeyboardInterrupt("simulated interrupt")
        return fn(*a, **k)
    monkeypatch.setitem(baselines.METHODS, name, dataclasses.replace(spec, fn=wrapped))
    return calls

def test_resume_recomputes_only_the_deleted_cell(cache_dir, gaussian_run, monkeypatch):
    cfg = RunConfig("gaussian", n_sims=SMALL["n_sims"], n_test=SMALL["n_test"], train_kw=json.dumps({**pipeline.DEFAULT_TRAIN_KW, **FAST}, sort_keys=True))
    cache = ResultCache(cache_dir)
    victim = cache.cell_path(cfg, "FCP", "mc", "estimated")
    assert victim.exists()
    victim.unlink()
    n_fcp, n_cp = _count_calls(monkeypatch, "FCP"), _count_calls(monkeypatch, "CP")
    df = grid_run(["gaussian"], None, ["mc", "ccc"], cache_dir=cache_dir, **SMALL)
    assert n_fcp["n"] == SMALL["n_sims"] and n_cp["n"] == 0     # one cell x all draws; nothing else recomputed
    assert victim.exists()
    pd.testing.assert_frame_equal(df.drop(columns=["seconds", "draw_seconds", "cpu_seconds", "draw_cpu_seconds"]),
                                  gaussian_run.drop(columns=["seconds", "draw_seconds", "cpu_seconds", "draw_cpu_seconds"]))

def test_resume_after_interrupt_gives_identical_results(cache_dir, gaussian_run, monkeypatch, tmp_path):
    # a fresh results cache sharing the trained models: copy the models folder
    import shutil
    shutil.copytree(Path(cache_dir) / "models", tmp_path / "models")
    calls = _count_calls(monkeypatch, "PFWCP", fail_after=4)         # dies in the second chunk of 3 draws
    with pytest.raises(KeyboardInterrupt):
        grid_run(["gaussian"], ["PFWCP", "CP"], ["mc"], cache_dir=tmp_path, **SMALL)
    chunks = list((tmp_path / "chunks").rglob("*.npz"))
    assert len(chunks) == 2                         # chunk 0-3 of both cells finished; chunk 3-6 not
    assert not list((tmp_path / "cells").glob("*.npz"))
    monkeypatch.undo()
    calls = _count_calls(monkeypatch, "PFWCP")
    df = grid_run(["gaussian"], ["PFWCP", "CP"], ["mc"], cache_dir=tmp_path, **SMALL)
    assert calls["n"] == 3                          # only the unfinished chunk
    ref = gaussian_run.attrs["draws"]
    for key, arr in df.attrs["draws"].items():
        np.testing.assert_array_equal(arr["coverage"], ref[key]["coverage"])
        np.testing.assert_array_equal(arr["size"], ref[key]["size"])
    assert not list((tmp_path / "chunks").rglob("*.npz"))     # merged and cleaned up

def test_cli_smoke(cache_dir, tmp_path):
    out = tmp_path / "out"
    runner.main(["--datasets", "gaussian", "--methods", "CP", "FCP", "PFWCP", "--n-sims", "6", "--n-test", "50",
            "--chunk-size", "3", "--out", str(out), "--cache", str(cache_dir), "--train-kw", json.dumps(FAST),
            "--no-progress"])
    for f in ("results.csv", "table_mc_severe.md", "table_ccc_severe.md", "compare_mc_severe.md",
              "compare_ccc_severe.md", "runs.jsonl", "figures/boxplots_gaussian_mc_severe.png",
              "figures/coverage_efficiency_mc_severe.png", "figures/diagnostics_gaussian.png"):
        assert (out / f).is_file(), f
    res = pd.read_csv(out / "results.csv")
    assert len(res) == 6 and set(res.method) == {"CP", "FCP", "PFWCP"}
    log = json.loads((out / "runs.jsonl").read_text().splitlines()[-1])
    # the wall time is recorded (rounded to 0.1 s, so a resumed run may log 0.0: no timing assertion here)
    assert isinstance(log["wall_seconds"], float) and np.isfinite(log["wall_seconds"]) and log["wall_seconds"] >= 0
    assert log["command"].startswith("pfwcp-experiments --datasets gaussian") and log["cells"] == 6
    table = (out / "table_mc_severe.md").read_text()
    assert "| **MC (%)** | CP |" in table and "Produced by:" in table
    # a second run into the same folder (other methods) merges its rows into results.csv and the tables
    runner.main(["--datasets", "gaussian", "--methods", "FWCP", "--guarantee", "mc", "--n-sims", "6", "--n-test", "50",
            "--chunk-size", "3", "--out", str(out), "--cache", str(cache_dir), "--train-kw", json.dumps(FAST),
            "--no-progress", "--no-figures"])
    res = pd.read_csv(out / "results.csv")
    assert len(res) == 7 and "FWCP" in set(res.method)
    assert "| FWCP |" in (out / "table_mc_severe.md").read_text()
    for bad in (["--datasets", "nope"], ["--datasets", "gaussian", "--train-kw", "{bad json"]):
        with pytest.raises(SystemExit) as e:
            runner.main(bad + ["--out", str(out)])
        assert e.value.code == 2

def test_write_outputs_removes_only_its_own_stale_figures(gaussian_run, tmp_path):
    figs = tmp_path / "figures"
    figs.mkdir()
    stale = ["boxplots_star_mc_severe.png", "boxplots_gaussian_ccc_mild.png", "coverage_efficiency_mc_moderate.png"]
    kept = ["figure1_star.png", "boxplots_notes.txt", "my_boxplots.png", "coverage_efficiency_mc_severe.pdf"]
    for name in stale + kept:
        (figs / name).write_text("an earlier run")
    paths = report_figures.write_outputs(gaussian_run, tmp_path)
    made = {"boxplots_gaussian_mc_severe.png", "boxplots_gaussian_ccc_severe.png",
            "coverage_efficiency_mc_severe.png", "coverage_efficiency_ccc_severe.png"}
    assert {p.name for p in paths if p.parent == figs} == made
    assert {f.name for f in figs.iterdir()} == made | set(kept)
    # without figures the folder is left alone
    (figs / stale[0]).write_text("an earlier run")
    report_figures.write_outputs(gaussian_run, tmp_path, figures=False)
    assert (figs / stale[0]).is_file()

# ---------------------------------------------------------------- localizer samples per pool point

def _toy_setup_with_localizer(fed):
    "A TrainedSetup whose only trained parts are stand-ins: identity-free predictor, unit ratios, exact-law localizer."
    class Mean:
        def predict(self, X): return np.asarray(X).sum(1) * 0.0
    loc = Localizer(FoldedNormalSampler(0.1, 0.3), n_samples=50)
    return pipeline.TrainedSetup(fed.name, fed.heterogeneity, 0, fed.K, fed.task, Mean(),
                          [lambda X: np.ones(len(X))] * fed.K, localizer=loc)

def test_pool_localizer_samples_are_gathered_per_pool_point(require_dataset):
    from pfwcp_nb.data import make_federation
    d = require_dataset("airfoil")
    fed = make_federation("airfoil", "severe", K=4, seed=0, data_dir=d)
    st = _toy_setup_with_localizer(fed)
    Zp = pipeline.pool_localizer_samples(st, fed)
    assert Zp.shape == (len(fed.pool[0]), 50) and np.all(np.diff(Zp, axis=1) >= 0)
    draw = pipeline.sample_draw(st, fed, 3, n_cal=20, n_test=15, loc_pool=Zp)["estimated"]
    # the draw's localized calibration scores are F_hat evaluated on the pool rows of its points
    rng = models.stream_rng(0, 1, 3)
    cal = [fed.sample(k, 20, rng, return_info=True) for k in range(fed.K)]
    for k, (X, y, info) in enumerate(cal):
        expect = st.localizer.cdf_from_samples(Zp[info["index"]], np.abs(y))
        np.testing.assert_array_equal(draw.loc_cal_scores[k], expect)
    # a point drawn twice (same pool row) gets the same localized score in different draws
    d2 = pipeline.sample_draw(st, fed, 4, n_cal=20, n_test=15, loc_pool=Zp)["estimated"]
    assert d2.loc_cal_scores[0].shape == (20,)

def test_pool_localizer_samples_none_for_synthetic():
    from pfwcp_nb.data import make_federation
    fed = make_federation("gaussian", "severe", K=3, seed=0)
    assert pipeline.pool_localizer_samples(_toy_setup_with_localizer(fed), fed) is None

def test_localized_fields_precomputed_samples_match_drawn():
    rng = np.random.default_rng(0)
    loc = Localizer(FoldedNormalSampler(0.1, 0.3), n_samples=40)
    cal_X = [rng.normal(size=(12, 3)) for _ in range(3)]
    cal_s = [np.abs(rng.normal(size=12)) for _ in range(3)]
    cal_w = [np.ones(12)] * 3
    test_X, test_w = rng.normal(size=(7, 3)), np.ones((7, 3))
    drawn = baselines.localized_fields(loc, cal_X, cal_s, cal_w, test_X, test_w, seed=5)
    r = np.random.default_rng(5)                            # the same stream, in the documented order
    samples = ([loc.sorted_samples(X, r) for X in cal_X], loc.sorted_samples(test_X, r))
    given = baselines.localized_fields(loc, cal_X, cal_s, cal_w, test_X, test_w, samples=samples)
    for a, b in zip(drawn["loc_cal_scores"], given["loc_cal_scores"]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(drawn["loc_inverse"](0.5), given["loc_inverse"](0.5))
    with pytest.raises(ValueError, match="samples"):
        baselines.localized_fields(loc, cal_X, cal_s, cal_w, test_X, test_w, samples=(samples[0][:2], samples[1]))
    with pytest.raises(ValueError, match="samples"):
        baselines.localized_fields(loc, cal_X, cal_s, cal_w, test_X, test_w, samples=(samples[0], samples[1][:3]))

def test_warnings_are_counted_per_cell_not_dropped(cache_dir, gaussian_run, monkeypatch):
    import warnings as w
    cp = baselines.METHODS["CP"].fn
    def noisy(draw, *a, **k):
        w.warn("test warning from CP")
        return cp(draw, *a, **k)
    monkeypatch.setitem(baselines.METHODS, "CP", dataclasses.replace(baselines.METHODS["CP"], fn=noisy))
    df = grid_run(["gaussian"], ["CP", "FCP"], ["mc"], cache_dir=cache_dir, **{**SMALL, "n_sims": 4, "chunk_size": 2})
    got = dict(zip(df.method, df.n_warned))
    assert got == {"CP": 4, "FCP": 0}
    meta = load_cell(next(Path(cache_dir, "cells").glob(f"v{CACHE_SCHEMA}__gaussian__*__CP__mc__S4_*")))["meta"]
    assert meta["warnings"] and "test warning from CP" in meta["warnings"][0]

# ---------------------------------------------------------------- frozen localizer noise (synthetic datasets)

def test_frozen_noise_localized_scores(cache_dir, gaussian_run):
    from pfwcp_nb.data import make_federation
    cfg = RunConfig("gaussian", n_sims=SMALL["n_sims"], n_test=SMALL["n_test"], train_kw=json.dumps({**pipeline.DEFAULT_TRAIN_KW, **FAST}, sort_keys=True))
    st = grid_mod.ensure_setup(cfg, ResultCache(cache_dir), progress=False)
    fed = make_federation("gaussian", "severe", K=11, seed=0)
    fz = pipeline.frozen_localizer(st)
    new = pipeline.sample_draw(st, fed, 2, n_cal=30, n_test=20, loc_frozen=fz)["estimated"]
    old = pipeline.sample_draw(st, fed, 2, n_cal=30, n_test=20)["estimated"]          # fresh noise per draw
    for f in ("cal_scores", "cal_weights", "fwcp_cal_weights"):                  # same data and weights
        for a, b in zip(getattr(new, f), getattr(old, f)):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(new.test_weights, old.test_weights)
    assert not all(np.array_equal(a, b) for a, b in zip(new.loc_cal_scores, old.loc_cal_scores))   # other noise
    rng = models.stream_rng(0, 1, 2)                                     # the draw's points, in the documented order
    cal = [fed.sample(k, 30, rng) for k in range(fed.K)]
    for k, (X, y) in enumerate(cal):                          # F_hat of the frozen samples at each point
        np.testing.assert_allclose(new.loc_cal_scores[k], st.localizer.cdf_from_samples(fz.sorted_samples(X),
                                                                                          new.cal_scores[k]), atol=1e-9)
    X = cal[3][0]                                             # one fixed function of X: any batch, any draw
    # float32 network outputs: another batch size may round differently (~1e-7 here); other noise differs by ~0.1
    np.testing.assert_allclose(fz.sorted_samples(X[:4]), fz.sorted_samples(X)[:4], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(pipeline.frozen_localizer(st).sorted_samples(X), fz.sorted_samples(X), rtol=1e-6)
    with pytest.raises(ValueError, match="2-D"):
        fz.sorted_samples(X[0])

def test_frozen_noise_rejects_other_samplers():
    loc = Localizer(FoldedNormalSampler(0.1, 0.3), n_samples=20)
    with pytest.raises(ValueError, match="EngressionSampler"):
        pipeline.FrozenNoiseSampler(loc, np.random.default_rng(0))

# ---------------------------------------------------------------- cache keys, n_cal_test, device, cache state

def test_cache_keys_name_the_training_settings_and_ignore_the_device():
    cfg = RunConfig("gaussian")
    cur = _stable_hash(dict(K=11, n_train=50, n_cal=100, n_cal_test=None, engine="exact",
                            train_kw=pipeline.DEFAULT_TRAIN_KW, options={}, ratio_model="paper"))
    assert pipeline.DEFAULT_TRAIN_KW["ratios"]["hparams"] == "paper"
    assert cfg.cell_key("PFWCP", "mc", "estimated").endswith(cur)             # the default hparams are in the key
    assert cfg.cell_key("PFWCP", "mc", "estimated").startswith(f"v{CACHE_SCHEMA}__")
    cuda = RunConfig("gaussian", device="cuda")
    assert cuda.setup_key() == cfg.setup_key() and cuda.cell_key("CP", "mc", "oracle") == cfg.cell_key("CP", "mc", "oracle")
    n1 = RunConfig("gaussian", n_cal_test=20)
    assert n1.setup_key() == cfg.setup_key()                  # the trained models do not depend on it
    assert n1.cell_key("CP", "mc", "estimated") != cfg.cell_key("CP", "mc", "estimated")
    assert n1.cell_key("CP", "mc", "estimated") != RunConfig("gaussian", n_cal_test=50).cell_key("CP", "mc", "estimated")
    assert RunConfig("gaussian", n_cal_test=100).cell_key("CP", "mc", "estimated") != cfg.cell_key("CP", "mc", "estimated")


def test_files_of_another_cache_schema_are_not_found(tmp_path, monkeypatch):
    "Files written under another CACHE_SCHEMA have other names: a run does not read them, it computes them again."
    kw = dict(n_sims=2, n_test=20, chunk_size=2, train_kw={"predictor": {"epochs": 5}, "ratios": {"epochs": 5}},
              cache_dir=tmp_path, progress=False)
    assert grid_run(["gaussian"], ["CP"], ["mc"], **kw).attrs["cache"] == "cold"
    files = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert files and all(p.name.startswith(f"v{CACHE_SCHEMA}__") for p in files)
    monkeypatch.setattr(cache_mod, "CACHE_SCHEMA", CACHE_SCHEMA + 1)      # a newer package: the old files are not found
    assert grid_run(["gaussian"], ["CP"], ["mc"], **kw).attrs["cache"] == "cold"
    new = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file() and p.relative_to(tmp_path) not in files)
    assert len(new) == len(files) and all(p.name.startswith(f"v{CACHE_SCHEMA + 1}__") for p in new)   # models and cell again
    assert grid_run(["gaussian"], ["CP"], ["mc"], **kw).attrs["cache"] == "warm"
    assert all((tmp_path / p).exists() for p in files)                   # the old files are left alone, unread

def test_n_cal_test_sizes_of_the_draw():
    from pfwcp_nb.data import make_federation
    fed = make_federation("gaussian", "severe", K=4, seed=0)
    st = _toy_setup_with_localizer(fed)
    d = pipeline.sample_draw(st, fed, 1, n_cal=20, n_cal_test=5, n_test=15)["estimated"]
    assert [len(s) for s in d.cal_scores] == [5, 20, 20, 20] and [len(w) for w in d.cal_weights] == [5, 20, 20, 20]
    assert [len(s) for s in d.loc_cal_scores] == [5, 20, 20, 20] and d.test_weights.shape == (15, 4)
    np.testing.assert_array_equal(d.cal_weights[0], np.ones(5))
    same = pipeline.sample_draw(st, fed, 1, n_cal=20, n_cal_test=20, n_test=15)["estimated"]
    dflt = pipeline.sample_draw(st, fed, 1, n_cal=20, n_test=15)["estimated"]
    for a, b in zip(same.cal_scores, dflt.cal_scores):        # n_cal_test = n_cal is the default draw
        np.testing.assert_array_equal(a, b)

def test_n_cal_test_in_results_and_cp_infinite_below_its_minimum(cache_dir, gaussian_run):
    assert (gaussian_run.n_cal_test == 100).all()
    df = grid_run(["gaussian"], ["CP", "PFWCP"], ["mc"], n_cal_test=5, cache_dir=cache_dir, **{**SMALL, "n_sims": 3})
    assert (df.n_cal_test == 5).all() and (df.n_errors == 0).all()
    # split CP on n_1 = 5 points at alpha = 0.1 needs the ceil(6 * 0.9) = 6th smallest of 5 scores: always infinite
    assert df.set_index("method").loc["CP", "inf_frac"] == 1.0
    assert df.set_index("method").loc["PFWCP", "inf_frac"] < 1.0        # the other agents' points still help

@pytest.mark.parametrize("kw, match", [
    (dict(n_cal_test=0), "n_cal_test"), (dict(n_cal_test=2.5), "n_cal_test"), (dict(n_cal_test=True), "n_cal_test"),
    (dict(device="gpu"), "device"), (dict(backend="spark"), "backend"), (dict(address="auto"), "address"),
])
def test_run_grid_bad_new_options(kw, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        grid_run(["gaussian"], ["CP"], ["mc"], cache_dir=tmp_path, progress=False, **kw)

def test_train_setup_bad_device():
    with pytest.raises(ValueError, match="device"):
        pipeline.train_setup("gaussian", device="tpu", progress=False)

def test_cache_cold_then_warm(tmp_path):
    kw = dict(n_sims=2, n_test=20, chunk_size=2, train_kw={"predictor": {"epochs": 5}, "ratios": {"epochs": 5}},
              cache_dir=tmp_path, progress=False)
    first = grid_run(["gaussian"], ["CP"], ["mc"], **kw)
    assert first.attrs["cache"] == "cold"
    assert grid_run(["gaussian"], ["CP"], ["mc"], **kw).attrs["cache"] == "warm"             # the cell
    assert grid_run(["gaussian"], ["FCP"], ["mc"], **kw).attrs["cache"] == "warm"            # the models
    assert grid_run(["gaussian"], ["CP"], ["mc"], **{**kw, "cache_dir": None}).attrs["cache"] == "cold"


def test_unreadable_cached_models_name_the_cache_schema(tmp_path):
    "A models pickle of the current schema that cannot be read (a class that is gone) is an error naming CACHE_SCHEMA."
    cache, cfg = ResultCache(tmp_path), RunConfig("gaussian")
    path = cache.setup_path(cfg)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"cpfwcp_nb.no_such_module\nTrainedSetup\n.")      # protocol-0 pickle of a missing class
    with pytest.raises(ValueError, match="without a new CACHE_SCHEMA"):
        cache.load_setup(cfg)
    assert cache.load_setup(RunConfig("poisson")) is None               # no file: None, no warning


MACHINE_FIELDS = ("cpu", "cpus", "blas", "torch_threads", "platform", "versions")


def _machine_problems(rec: dict) -> list[str]:
    "What a runs.jsonl record lacks to name its machine: all of MACHINE_FIELDS, or an honest 'not recorded' note."
    if "machine" in rec:
        m = rec["machine"]
        ok = isinstance(m, dict) and m.get("recorded") is False and len(str(m.get("note", ""))) > 40
        return [] if ok and "cpu" not in rec else ["a 'machine' annotation must be {recorded: false, note: ...} "
                                                  "and only where the CPU was not recorded"]
    bad = [k for k in MACHINE_FIELDS if not rec.get(k) and rec.get(k) != 0]
    bad += [f"versions.{k}" for k in ("python", "numpy", "torch", "pfwcp_nb") if k not in rec.get("versions", {})]
    return bad


def test_every_stored_run_names_its_machine():
    "Every runs.jsonl under results/ says which machine made it (CPU, BLAS, threads, versions), or that it is unknown."
    files = sorted((ROOT / "results").rglob("runs.jsonl"))
    assert len(files) > 20
    bad = {}
    for f in files:
        for i, line in enumerate(l for l in f.read_text().splitlines() if l.strip()):
            if problems := _machine_problems(json.loads(line)):
                bad[f"{f.relative_to(ROOT)}:{i + 1}"] = problems
    assert not bad, f"runs.jsonl records that do not name their machine: {bad}"


def test_machine_check_can_fail():
    rec = dict(cpu="AMD EPYC", cpus=2, blas=[{"api": "openblas"}], torch_threads=1, platform="Linux",
               versions=dict(python="3.11", numpy="2", torch="2.13", pfwcp_nb="0.1"))
    assert _machine_problems(rec) == [] and _machine_problems(runner.provenance(2) | {}) == []
    assert _machine_problems({k: v for k, v in rec.items() if k != "cpu"}) == ["cpu"]
    assert _machine_problems({"cpus": 2, "machine": {"recorded": False, "note": "short"}})
    assert _machine_problems(rec | {"machine": {"recorded": False, "note": "x" * 50}})   # recorded and annotated


def _flips(*args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    return subprocess.run([sys.executable, "studies/paper_grid/verdict_flips.py", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
def test_two_trainings_of_the_main_job_flip_no_decided_verdict():
    "The main job and its rerun with --model-seed 1: verdicts printed as point values flip, decided ones do not."
    r = _flips("results/main_job/results.csv", "results/main_job_model_seed_1/results.csv")
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [[c.strip() for c in l.strip("|").split("|")] for l in r.stdout.splitlines()[2:]]
    assert {row[1] for row in rows} == {"colour", "bold", "∞"}
    assert all(row[4] == "0" for row in rows), r.stdout                         # no unmarked flip
    assert sum(int(row[3]) for row in rows) > 0, r.stdout                      # point verdicts did flip
    # without the spread over trainings (Monte Carlo only) some decided verdict does flip: the check can fail
    r = _flips("results/main_job/results.csv", "results/main_job_model_seed_1/results.csv", "--no-spread")
    rows = [[c.strip() for c in l.strip("|").split("|")] for l in r.stdout.splitlines()[2:]]
    assert sum(int(row[4]) for row in rows) > 0, r.stdout


@pytest.mark.slow
def test_two_machines_means_of_trainings_flip_no_decided_colour():
    "Every split of the five stored trainings into two halves, each half's table the mean over its trainings."
    r = _flips("--trainings", "results/training_variability/all_runs.csv", "--splits", "--summary")
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {row[1]: row for row in ([c.strip() for c in l.strip("|").split("|")] for l in r.stdout.splitlines()[2:])}
    assert rows["colour"][0] == "all 10 pairs" and int(rows["colour"][2]) > 1000, r.stdout
    assert all(row[4] == "0" for row in rows.values()) and int(rows["colour"][3]) > 0, r.stdout


def test_the_mean_tables_leave_few_colours_undecided():
    "The full severe grid as the mean of the stored trainings: at most 20 % of the validity colours undecided."
    stored = pd.read_csv(ROOT / "results" / "severe" / "results.csv")
    stored = stored[stored.weights == "estimated"]
    grid = with_means(stored, pd.read_csv(ROOT / "results" / "training_variability" / "all_runs.csv"))
    spread = report.load_training_spread()
    counts = [re.match(r"(MC|CCC) colours: (\d+) of (\d+) fall short \(🟥\), (\d+) undecided",
                       report.verdict_summary(grid, g, spread=spread)).groups() for g in ("mc", "ccc")]
    assert [c[2] for c in counts] == ["81", "81"] and all(int(c[1]) > 0 for c in counts), counts
    assert sum(int(c[3]) for c in counts) <= 0.2 * 162, counts
    assert set(grid.n_trainings) == {1, 5} and "†" in report.paper_table(grid, "mc", spread=spread)


@pytest.mark.slow
def test_retable_rewrites_a_folders_tables_keeping_its_command(tmp_path):
    for f in ("results.csv", "table_mc_severe.md"):
        (tmp_path / f).write_text((ROOT / "results" / "main_job" / f).read_text())
    r = subprocess.run([sys.executable, "studies/paper_grid/retable.py", str(tmp_path)], cwd=ROOT, capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    txt = (tmp_path / "table_mc_severe.md").read_text()
    assert "Is the method below its target beyond its uncertainty?" in txt and "MC colours: " in txt
    assert "Produced by: `pfwcp-experiments --jobs 2" in txt and "Tables rewritten from the CSV" in txt
    assert (tmp_path / "table_ccc_severe.md").exists()
    r = subprocess.run([sys.executable, "studies/paper_grid/retable.py", str(tmp_path / "nothing")], cwd=ROOT,
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert r.returncode == 2 and "usage:" in r.stderr and "not found" in r.stderr, r.stderr


@pytest.mark.parametrize("args", [[], ["results/main_job/results.csv"], ["--trainings", "nofile.csv"],
                                  ["results/main_job/results.csv", "results/severe/results.csv", "--z", "0"],
                                  ["results/main_job/results.csv", "results/severe/results.csv", "--splits"]])
@pytest.mark.slow
def test_verdict_flips_bad_usage_exits_2(args):
    r = _flips(*args)
    assert r.returncode == 2 and "usage:" in r.stderr, (r.returncode, r.stderr[-500:])
