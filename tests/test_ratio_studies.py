"""studies/ratios' scripts of the ratio diagnostics, the ratio size and the feature scale: --help exits 0, bad arguments
exit 2 with the usage line, and the smallest documented run writes its file (slow: real fits)."""
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = {"ratio_diagnostics_paper.py": ["gaussian", "0"], "ratio_size.py": ["gaussian", "0", "50"],
           "ratio_scale.py": ["gaussian", "0"]}


def run(script, *args):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, str(ROOT / "studies" / "ratios" / script), *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=1800)


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_help_and_bad_arguments(script):
    r = run(script, "--help")
    assert r.returncode == 0 and "Usage:" in r.stdout
    for args in ([], ["only-one"]):
        r = run(script, *args)
        assert r.returncode == 2 and r.stderr.startswith("Usage: python studies/ratios/" + script), r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_smallest_run_writes_its_table(script, tmp_path):
    out = tmp_path / "out.csv"
    r = run(script, str(out), *SCRIPTS[script])
    assert r.returncode == 0, r.stderr[-2000:]
    d = pd.read_csv(out)
    assert len(d) > 0 and {"spearman", "log_rmse"} <= set(d.columns) and (d.dataset == "gaussian").all()
