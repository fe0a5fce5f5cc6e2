"""tools/migrate_cache.py gives the files of a schema-1 cache (names without `v<N>__`) their current names, so that a
run finds them again; files it cannot vouch for stay where they are and are computed again."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pfwcp_nb import runner
from pfwcp_nb.cache import RunConfig, load_cell
from conftest import grid_run

pytestmark = pytest.mark.slow   # every test here trains a small grid and runs the tool in a subprocess

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "migrate_cache.py"
spec = importlib.util.spec_from_file_location("migrate_cache", TOOL)
mig = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mig)

KW = dict(n_sims=2, n_test=20, chunk_size=2, train_kw={"predictor": {"epochs": 5}, "ratios": {"epochs": 5}},
          progress=False)


def test_schema1_cache_is_found_again_after_migration(tmp_path):
    assert grid_run(["gaussian"], ["CP"], ["mc"], cache_dir=tmp_path, **KW).attrs["cache"] == "cold"
    cell = next((tmp_path / "cells").glob("*.npz"))
    model = next((tmp_path / "models").glob("*.pkl"))
    m = load_cell(cell)["meta"]
    cfg = RunConfig("gaussian", n_sims=2, n_test=20, train_kw=json.dumps(m["train_kw"], sort_keys=True))
    old_cell = cell.with_name(mig.v1_cell_key(cfg, "CP", "mc", "estimated") + ".npz")
    old_model = model.with_name(mig.v1_setup_key(cfg) + ".pkl")
    cell.rename(old_cell), model.rename(old_model)                       # the cache as schema 1 named it
    assert grid_run(["gaussian"], ["CP"], ["mc"], cache_dir=tmp_path / "copy", **KW).attrs["cache"] == "cold"
    out = subprocess.run([sys.executable, str(TOOL), str(tmp_path)], capture_output=True, text=True, check=True).stdout
    assert "2 files renamed, 0 left" in out
    assert cell.exists() and model.exists() and not old_cell.exists() and not old_model.exists()
    assert grid_run(["gaussian"], ["CP"], ["mc"], cache_dir=tmp_path, **KW).attrs["cache"] == "warm"


def test_bad_directory_is_a_usage_error(tmp_path):
    r = subprocess.run([sys.executable, str(TOOL), str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and "usage:" in r.stderr and "no models/ or cells/" in r.stderr
