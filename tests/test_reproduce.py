"""`pfwcp_nb.reproduce`: the spread over trainings, and `pfwcp-reproduce` run as a user would (subprocess): exit 0 when
the re-run cells agree with the stored results.csv, 1 on a planted wrong number, 2 with the usage line on bad input."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pfwcp_nb.reproduce import reproduction_z, training_variability
from pfwcp_nb.runner import DEMO_TRAIN_KW
from conftest import grid_run

ROOT = Path(__file__).resolve().parents[1]


def _run(args, cwd, timeout=600) -> subprocess.CompletedProcess:
    path = shutil.which("pfwcp-reproduce")
    if path is None:
        pytest.fail("console script 'pfwcp-reproduce' not on PATH: install the package first (pip install -e .)")
    env = {**os.environ, "MPLBACKEND": "Agg",
           "PYTHONPATH": os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    return subprocess.run([path, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    "A stored run of the smoke cells (gaussian, CP and PFWCP, MC and CCC) with the demo's short training."
    d = tmp_path_factory.mktemp("stored")
    df = grid_run(["gaussian"], ["CP", "PFWCP"], ["mc", "ccc"], n_sims=6, n_test=40, train_kw=DEMO_TRAIN_KW,
                  progress=False)
    df.to_csv(d / "results.csv", index=False)
    return d / "results.csv"


@pytest.mark.slow
def test_rerun_from_scratch_reproduces_and_prints_z(stored, tmp_path):
    r = _run(["--results", str(stored), "--subset", "smoke", "--n-sims", "3", "--out", str(tmp_path / "z.csv")],
             tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "3 of 3 cells reproduced" in r.stdout and "gaussian:PFWCP:ccc" in r.stdout
    # stderr is a pipe: no bars, but a line per dataset and per stage of the run (models, chunks)
    assert "re-running gaussian: 3 cell(s), 3 draws" in r.stderr and "%|" not in r.stderr, r.stderr[-2000:]
    assert "models of gaussian (severe): training" in r.stderr and "chunks done" in r.stderr, r.stderr[-2000:]
    z = pd.read_csv(tmp_path / "z.csv")
    assert (z.z.abs() <= 3).all() and set(z.guarantee) == {"mc", "ccc"}


@pytest.mark.slow
def test_planted_wrong_number_fails_with_exit_1(stored, tmp_path):
    df = pd.read_csv(stored)
    df.loc[(df.method == "PFWCP") & (df.guarantee == "mc"), "MC"] -= 0.25
    df.to_csv(tmp_path / "bad.csv", index=False)
    r = _run(["--results", str(tmp_path / "bad.csv"), "--cells", "gaussian:PFWCP:mc", "gaussian:CP:mc",
              "--n-sims", "3"], tmp_path)
    assert r.returncode == 1, (r.returncode, r.stderr[-3000:])
    bad = [line for line in r.stdout.splitlines() if "<--" in line]
    assert len(bad) == 1 and bad[0].startswith("gaussian:PFWCP:mc"), r.stdout


@pytest.mark.parametrize("args, option", [
    (["--results", "nowhere.csv"], "--results"),
    (["--results", "RESULTS", "--cells", "gaussian:PFWCP:often"], "--cells"),
    (["--results", "RESULTS", "--z-max", "-1"], "--z-max"),
    (["--results", "RESULTS", "--variability", "nowhere.csv"], "--variability"),
])
@pytest.mark.slow
def test_bad_arguments_exit_2_with_usage(stored, tmp_path, args, option):
    r = _run([str(stored) if a == "RESULTS" else a for a in args], tmp_path, timeout=300)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert r.stderr.startswith("usage: pfwcp-reproduce") and f"argument {option}" in r.stderr, r.stderr[-2000:]
    assert "Traceback" not in r.stderr


@pytest.mark.slow
def test_cell_missing_from_the_file_is_a_usage_error(stored, tmp_path):
    r = _run(["--results", str(stored), "--cells", "poisson:PFWCP:mc"], tmp_path, timeout=300)
    assert r.returncode == 2 and "poisson:PFWCP:mc" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]


@pytest.mark.slow
def test_help_names_every_option(tmp_path):
    r = _run(["--help"], tmp_path, timeout=300)
    assert r.returncode == 0
    for opt in ("--results", "--subset", "--cells", "--variability", "--n-sims", "--z-max", "--jobs", "--out"):
        assert opt in r.stdout


def _trainings(values, seeds, **kw):
    base = dict(dataset="gaussian", heterogeneity="severe", weights="estimated", method="PFWCP", guarantee="mc",
                n_sims=100, n_test=300, seed=0, alpha=0.1, delta=0.1, MC_se=0.003, CCC=np.nan, CCC_se=np.nan)
    return pd.DataFrame([dict(base, model_seed=s, MC=v, **kw) for v, s in zip(values, seeds)])


def test_spread_is_shift_invariant_and_order_free():
    rng = np.random.default_rng(0)
    v = 0.9 + 0.01 * rng.standard_normal(5)
    a = training_variability(_trainings(v, range(5))).iloc[0]
    b = training_variability(_trainings(v[::-1] + 0.02, range(5))).iloc[0]
    assert np.isclose(a.train_sd, b.train_sd) and np.isclose(b["mean"], a["mean"] + 0.02)
    assert np.isclose(a.train_sd, np.std(v, ddof=1)) and a.n_trainings == 5
    assert training_variability(_trainings([0.9] * 3, range(3))).iloc[0].train_sd == 0


def test_bad_trainings_are_refused():
    with pytest.raises(ValueError, match="appear twice"):
        training_variability(_trainings([0.9, 0.91], [1, 1]))
    with pytest.raises(ValueError, match="same calibration draws"):
        training_variability(pd.concat([_trainings([0.9], [0]), _trainings([0.9], [1], n_test=500)
                                        .drop(columns="n_test").assign(n_test=500)]))


def test_z_counts_the_training_twice():
    assert np.isclose(reproduction_z(0.90, 0.0, 0.92, 0.0, 0.01), 0.02 / np.sqrt(2 * 0.01 ** 2))
    assert reproduction_z(0.9, 0.0, 0.9, 0.0) == 0


def _same_draws(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    return a.attrs["draws"].keys() == b.attrs["draws"].keys() and all(
        np.array_equal(a.attrs["draws"][k][f], b.attrs["draws"][k][f], equal_nan=True)
        for k in a.attrs["draws"] for f in ("coverage", "size", "size_finite"))


@pytest.mark.slow
def test_thread_count_does_not_change_a_number():
    "--jobs 1 runs with one thread like the workers: every per-draw array equal bit for bit (localized sizes included)."
    kw = dict(n_sims=4, n_test=60, train_kw=DEMO_TRAIN_KW, progress=False, chunk_size=2)
    m = ["CP", "PFWCP", "FGLCP"]
    assert _same_draws(grid_run(["gaussian"], m, ["mc"], jobs=1, **kw), grid_run(["gaussian"], m, ["mc"], jobs=2, **kw))


def test_model_seed_changes_the_models_not_the_draws(tmp_path):
    "Another --model-seed: other numbers; model seed 0: the default run's; the runs.jsonl line names the machine."
    from pfwcp_nb.runner import cli_run
    args = ["--methods", "CP", "FCP", "--guarantee", "mc", "--n-sims", "3", "--n-test", "40", "--no-figures",
            "--train-kw", '{"predictor": {"epochs": 50}, "ratios": {"epochs": 20}}', "--cache", str(tmp_path / "c"),
            "--datasets", "gaussian"]
    a = cli_run(args + ["--out", str(tmp_path / "a")])
    b = cli_run(args + ["--out", str(tmp_path / "b"), "--model-seed", "2"])
    c = cli_run(args + ["--out", str(tmp_path / "c0"), "--model-seed", "0"])
    assert _same_draws(a, c) and not _same_draws(a, b)
    cp = lambda d: d.attrs["draws"][("gaussian", "severe", "estimated", "mc", "CP")]["coverage"]
    assert not np.array_equal(cp(a), cp(b))              # CP's scores come from the retrained predictor
    assert set(b.model_seed) == {2} and set(a.model_seed) == {0}
    import json
    line = json.loads((tmp_path / "b" / "runs.jsonl").read_text().splitlines()[-1])
    assert line["model_seed"] == 2 and line["cpu"] and line["cpus"] >= 1 and line["jobs"] == 1
    assert {"python", "numpy", "scipy", "torch", "sklearn"} <= set(line["versions"]) and "torch_threads" in line
