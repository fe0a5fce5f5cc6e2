"""The Ray backend of `run_grid` / `pfwcp-experiments --backend ray`: on a local Ray instance started by the test,
the grid's chunks run as Ray tasks and give exactly the process backend's numbers; the driver's cache is
resume-safe (a deleted cell is recomputed, nothing else); without Ray the backend names the extra to install."""
import json
import os

import numpy as np
import pandas as pd
import pytest

from pfwcp_nb import backends, pipeline, runner
from pfwcp_nb.cache import ResultCache, RunConfig
from conftest import grid_run

pytestmark = pytest.mark.slow   # a local Ray cluster and a small grid on it

ray = pytest.importorskip("ray", reason="the Ray backend needs the flower extra: pip install \"pfwcp_nb[flower]\"")

FAST = {"predictor": {"epochs": 20}, "ratios": {"epochs": 20}, "localizer": {"epochs": 20}}
KW = dict(n_sims=4, n_test=30, chunk_size=2, train_kw=FAST, progress=False, seed=3)
RAY_METHODS = ["CP", "PFWCP", "FGLCP"]        # unweighted, weighted, localized (frozen-noise samples)


@pytest.fixture(scope="module")
def local_ray():
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")      # as the backend does (no FutureWarning)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _same(a: pd.DataFrame, b: pd.DataFrame):
    pd.testing.assert_frame_equal(a.drop(columns=["seconds", "draw_seconds", "cpu_seconds", "draw_cpu_seconds"]), b.drop(columns=["seconds", "draw_seconds", "cpu_seconds", "draw_cpu_seconds"]))
    assert a.attrs["draws"].keys() == b.attrs["draws"].keys()
    for k, arr in a.attrs["draws"].items():
        for f in ("coverage", "size", "size_finite"):
            np.testing.assert_array_equal(arr[f], b.attrs["draws"][k][f])


def test_ray_backend_identical_to_process_backend_and_resumes(local_ray, tmp_path):
    ref = grid_run(["gaussian"], RAY_METHODS, ["mc", "ccc"], cache_dir=tmp_path / "process", **KW)
    got = grid_run(["gaussian"], RAY_METHODS, ["mc", "ccc"], cache_dir=tmp_path / "ray", backend="ray", **KW)
    assert got.attrs["cache"] == "cold" and (got.n_errors == 0).all()
    _same(got, ref)
    assert len(list((tmp_path / "ray" / "models").glob("*.pkl"))) == 1     # the driver cached the trained models
    assert not list((tmp_path / "ray" / "chunks").rglob("*.npz"))           # chunks merged into cells
    cfg = RunConfig("gaussian", n_sims=4, n_test=30, seed=3, train_kw=json.dumps({**pipeline.DEFAULT_TRAIN_KW, **FAST}, sort_keys=True))
    victim = ResultCache(tmp_path / "ray").cell_path(cfg, "FGLCP", "ccc", "estimated")
    others = {p: p.stat().st_mtime_ns for p in (tmp_path / "ray" / "cells").glob("*.npz") if p != victim}
    victim.unlink()
    again = grid_run(["gaussian"], RAY_METHODS, ["mc", "ccc"], cache_dir=tmp_path / "ray", backend="ray", **KW)
    assert again.attrs["cache"] == "warm" and victim.exists()
    assert all(p.stat().st_mtime_ns == t for p, t in others.items())       # nothing else recomputed
    _same(again, ref)


def test_ray_backend_without_ray_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setattr(backends, "ray", None)
    with pytest.raises(ImportError, match=r'pip install "pfwcp_nb\[flower\]"'):
        grid_run(["gaussian"], ["CP"], ["mc"], cache_dir=tmp_path, backend="ray", **{**KW, "n_sims": 1})
