"studies/deploy_speed: the README's table is what run.py prints from the stored runs; every stored run of the deployment agreed with the in-process pipeline and no agent failed a message; bad arguments exit 2."
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "studies" / "deploy_speed"
RUNS = sorted(STUDY.glob("schedule_K*.json"))


def _run(*args):
    return subprocess.run([sys.executable, str(STUDY / "run.py"), *args], capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_the_readme_table_is_the_stored_runs_table(tmp_path):
    r = _run("table", "--out", str(tmp_path / "t.md"))
    assert r.returncode == 0, r.stderr[-2000:]
    text = (STUDY / "README.md").read_text()
    block = text.split("<!-- generated: python tools/show.py studies/deploy_speed/table.md --raw -->\n")[1].split("<!-- /generated -->")[0]
    assert block.strip() == r.stdout.strip(), "run: python studies/deploy_speed/run.py table, and paste it into the README"
    assert (STUDY / "table.md").read_text() == r.stdout
    assert (STUDY / "summary.md").read_text() == (tmp_path / "summary.md").read_text()     # the whole runs' summary


@pytest.mark.parametrize("path", RUNS, ids=[p.stem for p in RUNS])
def test_each_stored_run_agreed_with_the_in_process_pipeline(path):
    r = json.loads(path.read_text())
    assert r["thresholds_max_abs_diff"] <= r["tolerance"] and r["events"] == []
    assert r["agents"]["failed"] == 0
    assert r["rounds"] == (r["train_kw"]["ratios"]["epochs"] if r["schedule"] == "E10" else r["train_kw"]["predictor"]["epochs"])
    assert "(== in process within" in r["deploy_stdout"]
    if not r.get("note"):        # a run collected after its script stopped on a check says why in `note`
        assert ": True; max |diff|" in r["deploy_stdout"]
    assert sum(v["cpu"]["n"] for v in r["agents"]["by_type"].values()) == r["agents"]["all_cpu"]["n"]


def test_there_are_runs_at_K_11():
    assert any(json.loads(p.read_text())["K"] == 11 for p in RUNS)


@pytest.mark.parametrize("args, why", [
    (["schedule", "--rounds", "0"], "--rounds in 1..600"),
    (["schedule", "--rounds", "601"], "--rounds in 1..600"),
    (["schedule", "--schedule", "E5"], "invalid choice"),
    (["nope"], "invalid choice"),
    (["collect", "--keep", "/nonexistent", "--stdout", "/nonexistent"], "must be a kept deployment directory"),
])
def test_bad_arguments_exit_2(args, why):
    r = _run(*args)
    assert r.returncode == 2 and "usage:" in r.stderr and why in r.stderr, r.stderr[-800:]
