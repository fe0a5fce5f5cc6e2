"studies/robust_cap: the README's table is the one run.py prints from the stored summary; bad arguments exit 2."
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.slow   # every test here runs the study's program in a subprocess

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "studies" / "robust_cap"


def run(*args):
    return subprocess.run([sys.executable, str(STUDY / "run.py"), *args], capture_output=True, text=True, cwd=ROOT)


def test_the_readme_table_is_the_stored_summary():
    r = run("--table", str(STUDY / "summary.csv"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() in (STUDY / "README.md").read_text()


def test_the_summary_is_the_stored_draws(tmp_path):
    r = run("--summary", str(STUDY / "draws.csv.gz"), "--out", str(tmp_path / "s.csv"))
    assert r.returncode == 0, r.stderr
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "s.csv"), pd.read_csv(STUDY / "summary.csv"))


def test_bad_arguments_exit_2_with_usage():
    for args in (["--n-sims", "1", "--out", "x.csv"], ["--caps", "0", "--out", "x.csv"], []):
        r = run(*args)
        assert r.returncode == 2 and "usage:" in r.stderr
