"""The installed console scripts `pfwcp-experiments` and `pfwcp-demo`, run in a subprocess as a user would: exit status
0 on success, 2 with argparse's usage line and the offending option (no traceback) for every bad value, help text
for every option, and no progress bars when stderr is not a terminal."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from pfwcp_nb import demo, runner

ROOT = Path(__file__).resolve().parents[1]


def _script(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"console script {name!r} not on PATH: install the package first (pip install -e .)")
    return path


def _run(name: str, args, cwd, timeout: int = 120) -> subprocess.CompletedProcess:
    "Run the installed script with this checkout first on the import path (stderr is a pipe, not a terminal)."
    env = {**os.environ, "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    return subprocess.run([_script(name), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _check_usage_error(r: subprocess.CompletedProcess, prog: str, option: str):
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert r.stderr.startswith(f"usage: {prog}"), r.stderr[-2000:]
    assert f"{prog}: error: argument {option}" in r.stderr, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and r.stdout == ""


EXPERIMENTS_BAD = [
    (["--n-sims", "-3"], "--n-sims"), (["--n-sims", "ten"], "--n-sims"), (["--n-test", "0"], "--n-test"),
    (["--alpha", "1.5"], "--alpha"), (["--alpha", "0"], "--alpha"), (["--delta", "0"], "--delta"),
    (["--delta", "nan"], "--delta"), (["--jobs", "0"], "--jobs"), (["--chunk-size", "0"], "--chunk-size"),
    (["--seed", "-1"], "--seed"), (["--methods", "NOPE"], "--methods"), (["--exclude", "foo"], "--exclude"),
    (["--exclude", "NOPE:mc"], "--exclude"), (["--exclude", "PFWCP:pac"], "--exclude"),
    (["--datasets", "nope"], "--datasets"), (["--datasets", "all", "gaussian"], "--datasets"),
    (["--guarantee", "pac"], "--guarantee"), (["--heterogeneity", "extreme"], "--heterogeneity"),
    (["--weights", "orcl"], "--weights"), (["--engine", "fast"], "--engine"), (["--train-kw", "{bad"], "--train-kw"),
    (["--train-kw", "[1, 2]"], "--train-kw"), (["--train-kw", '{"predictr": {"epochs": 5}}'], "--train-kw"),
    (["--data-dir", "no/such/dir"], "--data-dir"), (["--datasets", "airfoil", "--data-dir", "."], "--datasets"),
    (["--figure1", "--data-dir", "."], "--datasets"), (["--out", "a_file"], "--out"),
    (["--n-cal-test", "0"], "--n-cal-test"), (["--n-cal-test", "5.5"], "--n-cal-test"),
    (["--backend", "spark"], "--backend"), (["--address", "auto"], "--address"),
    (["--backend", "ray", "--address", "not an address"], "--address"),
    (["--backend", "ray", "--address", "ray://head:10001", "--jobs", "4"], "--jobs"),
    (["--device", "gpu"], "--device"),
]


@pytest.mark.slow
@pytest.mark.parametrize("args, option", EXPERIMENTS_BAD, ids=[" ".join(a) for a, _ in EXPERIMENTS_BAD])
def test_experiments_bad_value_exits_2_with_usage(args, option, tmp_path):
    (tmp_path / "a_file").write_text("not a directory")
    r = _run("pfwcp-experiments", args, tmp_path, timeout=60)
    _check_usage_error(r, "pfwcp-experiments", option)
    assert not (tmp_path / "pfwcp_results").exists()          # nothing ran


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA present: --device cuda is valid here")
def test_experiments_device_cuda_without_cuda_exits_2(tmp_path):
    r = _run("pfwcp-experiments", ["--device", "cuda", "--n-sims", "2", "--n-test", "10"], tmp_path, timeout=60)
    _check_usage_error(r, "pfwcp-experiments", "--device")
    assert "CUDA is not available" in r.stderr and not (tmp_path / "pfwcp_results").exists()


DEMO_BAD = [(["--alpha", "1.5"], "--alpha"), (["--n-sims", "-1"], "--n-sims"), (["--n-test", "0"], "--n-test"),
            (["--delta", "1"], "--delta"), (["--seed", "-1"], "--seed"), (["--heterogeneity", "extreme"], "--heterogeneity")]


@pytest.mark.slow
@pytest.mark.parametrize("args, option", DEMO_BAD, ids=[" ".join(a) for a, _ in DEMO_BAD])
def test_demo_bad_value_exits_2_with_usage(args, option, tmp_path):
    _check_usage_error(_run("pfwcp-demo", args, tmp_path, timeout=60), "pfwcp-demo", option)


@pytest.mark.slow
def test_demo_success_exits_0_without_progress_bar(tmp_path):
    r = _run("pfwcp-demo", ["--n-sims", "3", "--n-test", "40", "--seed", "1"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "PFWCP-CCC" in r.stdout and "Traceback" not in r.stderr
    assert "calibration draws" not in r.stderr               # tqdm's bar is off: stderr is a pipe
    assert "method" not in r.stderr                          # the DataFrame is not passed to sys.exit


@pytest.mark.slow
def test_experiments_success_exits_0_without_progress_bar(tmp_path):
    kw = json.dumps({"predictor": {"epochs": 5}, "ratios": {"epochs": 5}})
    args = ["--datasets", "gaussian", "--methods", "CP", "FCP", "--guarantee", "mc", "--n-sims", "2", "--n-test", "20",
            "--chunk-size", "2", "--train-kw", kw, "--out", "out", "--no-figures"]
    r = _run("pfwcp-experiments", args, tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "MC, severe heterogeneity" in r.stdout and "Traceback" not in r.stderr
    assert "%|" not in r.stderr and "it/s" not in r.stderr        # no progress bars in a pipe, lines instead
    assert "1/1 chunks done" in r.stderr and "writing the tables" in r.stderr, r.stderr[-2000:]
    # "wrote N files" counts every file the run wrote (runs.jsonl too), the cache aside
    written = [f for f in (tmp_path / "out").rglob("*") if f.is_file() and "cache" not in f.relative_to(tmp_path / "out").parts]
    assert f"wrote {len(written)} files" in r.stdout, (r.stdout[-300:], sorted(map(str, written)))
    res = pd.read_csv(tmp_path / "out" / "results.csv")
    assert sorted(res.method) == ["CP", "FCP"] and (res.n_sims == 2).all() and (res.n_cal_test == 100).all()
    # the same command again: everything comes from the cache; runs.jsonl says which run reused it
    r = _run("pfwcp-experiments", args, tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    runs = [json.loads(line) for line in (tmp_path / "out" / "runs.jsonl").read_text().splitlines()]
    assert [x["cache"] for x in runs] == ["cold", "warm"]
    # each run names its machine and separates wall from CPU time, with the load it ran under
    for x in runs:
        assert x["cpu"] and x["blas"] is not None and x["versions"]["torch"] and x["cpus"] >= 1
        assert x["cpu_seconds"] >= 0 and x["wall_seconds"] >= 0 and len(x["load_average"]) == 2
    assert runs[0]["cpu_seconds"] > 0 and runs[0]["wall_seconds"] > 0      # the cold run trained and evaluated
    assert {"cpu_seconds", "draw_cpu_seconds"} <= set(res.columns) and (res.cpu_seconds > 0).all()


@pytest.mark.slow
def test_experiments_log_shows_training_in_workers(tmp_path):
    "With --jobs 2 and stderr a pipe (a log, nohup): a line when each dataset's models start training in a worker and when they are ready, lines per chunks with an estimate, none of tqdm's bars."
    kw = json.dumps({"predictor": {"epochs": 5}, "ratios": {"epochs": 5}})
    r = _run("pfwcp-experiments", ["--datasets", "gaussian", "poisson", "--methods", "CP", "--guarantee", "mc",
                                   "--n-sims", "4", "--n-test", "20", "--chunk-size", "2", "--train-kw", kw,
                                   "--jobs", "2", "--out", "out", "--no-figures"], tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    err = r.stderr
    for ds in ("gaussian", "poisson"):
        assert f"models of {ds} (severe): training in a worker" in err, err[-2000:]
        assert f"{ds} (severe): models ready, 2 chunks of draws submitted" in err, err[-2000:]
    assert "4/4 chunks done; ~0:00:00 left at the rate so far" in err and "%|" not in err, err[-2000:]
    lines = [l for l in err.splitlines() if l.strip()]
    assert all(l.startswith("[") for l in lines), lines         # every line says the elapsed time
    # --no-progress: silence
    r = _run("pfwcp-experiments", ["--datasets", "gaussian", "--methods", "CP", "--guarantee", "mc", "--n-sims", "4",
                                   "--n-test", "20", "--train-kw", kw, "--out", "out", "--no-figures", "--no-progress"],
             tmp_path, timeout=300)
    assert r.returncode == 0 and r.stderr == "", r.stderr[-2000:]


@pytest.mark.slow
def test_experiments_n_cal_test_column(tmp_path):
    kw = json.dumps({"predictor": {"epochs": 5}, "ratios": {"epochs": 5}})
    r = _run("pfwcp-experiments", ["--datasets", "gaussian", "--methods", "CP", "--guarantee", "mc", "--n-sims", "2",
                                   "--n-test", "20", "--n-cal-test", "5", "--train-kw", kw, "--out", "out",
                                   "--no-figures"], tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    res = pd.read_csv(tmp_path / "out" / "results.csv")
    assert (res.n_cal_test == 5).all() and (res.inf_frac == 1.0).all()     # CP needs >= 9 points at alpha 0.1
    assert (tmp_path / "out" / "table_mc_severe_n1-5.md").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("prog", ["pfwcp-experiments", "pfwcp-demo"])
def test_help_exits_0(prog, tmp_path):
    r = _run(prog, ["--help"], tmp_path, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith(f"usage: {prog}")


@pytest.mark.parametrize("parser", [runner._parser, demo._parser], ids=["experiments", "demo"])
def test_every_option_has_help(parser):
    p = parser()
    for a in p._actions:
        assert a.help and a.help.strip(), f"{p.prog}: option {a.option_strings} has no help text"
