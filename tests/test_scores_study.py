"studies/scores: the smallest command runs end to end, bad arguments exit 2, the stored summary is the stored draws', and the README's tables are those run.py prints from the stored files."
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
STUDY, RESULTS = ROOT / "studies" / "scores", ROOT / "results" / "scores"


def run(*args, timeout=900):
    return subprocess.run([sys.executable, str(STUDY / "run.py"), *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout)


@pytest.mark.slow
def test_the_smallest_command_runs(tmp_path):
    "One synthetic dataset, a few epochs per model, two draws: models, draws, summary and a table."
    r = run("all", "--datasets", "gaussian", "--n-sims", "2", "--n-test", "30", "--quick", "--cache",
            str(tmp_path / "cache"), "--out-dir", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr[-3000:]
    s = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert set(s.score) == {"absolute", "normalized", "cqr"} and set(s.method) == {"CP", "Recommended"}
    assert set(s.guarantee) == {"mc", "ccc"} and (s.n_sims == 2).all()
    t = run("table", "widths", "--summary-file", str(tmp_path / "out" / "summary.csv"))
    assert t.returncode == 0 and t.stdout.startswith("| dataset | score |"), t.stderr


@pytest.mark.slow
def test_bad_arguments_exit_2_with_usage():
    "Each run imports the package's models (torch): slow on a loaded machine."
    for args in (["table"], ["all", "--n-sims", "1"]):
        r = run(*args, timeout=120)
        assert r.returncode == 2 and "usage:" in r.stderr, (args, r.stderr)


def test_the_summary_is_the_stored_draws(tmp_path):
    for f in ("draws.csv.gz", "classes.csv.gz"):
        shutil.copy(RESULTS / f, tmp_path / f)
    r = run("summary", "--out-dir", str(tmp_path), timeout=300)
    assert r.returncode == 0, r.stderr
    for f in ("summary.csv", "class_summary.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / f), pd.read_csv(RESULTS / f))


@pytest.mark.parametrize("table, summary", [("widths", "summary.csv"), ("classes", "summary.csv"),
                                            ("sizes", "class_summary.csv"), ("targets", "summary.csv")])
def test_the_readme_tables_are_the_stored_files(table, summary):
    r = run("table", table, "--summary-file", str(RESULTS / summary), timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() in (STUDY / "README.md").read_text()
