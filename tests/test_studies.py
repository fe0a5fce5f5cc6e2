"""Every study still runs: each `studies/<name>/README.md` documents its smallest run on a line

    Smallest run (FLAGS): `COMMAND`

which this test runs from the repository root, with `$TMP` an empty folder of its own and `$CACHE` a models cache
shared by the session (a study's outputs go under `$TMP`, never into `results/`). FLAGS: `slow` (it trains models:
marked `slow`), `data` (it reads the real data files: skipped without them, like the other data tests)."""
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pfwcp_nb import data as D

ROOT = Path(__file__).resolve().parents[1]
STUDIES = sorted(p.parent for p in (ROOT / "studies").glob("*/README.md"))
LINE = re.compile(r"^Smallest run \((?P<flags>[^)]*)\): `(?P<cmd>[^`]+)`", re.M)
FLAGS = {"fast", "slow", "data"}


def smallest_run(study: Path) -> tuple[set, str] | None:
    "(flags, command) of the study's README, or None when it documents none."
    m = LINE.search((study / "README.md").read_text())
    return None if m is None else ({f.strip() for f in m["flags"].split(",") if f.strip()}, m["cmd"])


def test_every_study_documents_its_smallest_run():
    missing = [s.name for s in STUDIES if smallest_run(s) is None]
    assert not missing, f"studies without a 'Smallest run (FLAGS): `COMMAND`' line in their README: {missing}"
    bad = {s.name: smallest_run(s)[0] - FLAGS for s in STUDIES if smallest_run(s)[0] - FLAGS}
    assert not bad, f"unknown flags {bad}; use {sorted(FLAGS)}"
    for s in STUDIES:
        cmd = shlex.split(smallest_run(s)[1])
        assert cmd[0] == "python" and cmd[1].startswith(f"studies/{s.name}/"), (s.name, cmd[:2])


@pytest.fixture(scope="session")
def study_cache(tmp_path_factory):
    "One models cache for every study's smallest run (the gaussian setups are trained once)."
    return tmp_path_factory.mktemp("study_cache")


def _params():
    out = []
    for s in STUDIES:
        run = smallest_run(s)
        if run is not None:
            out.append(pytest.param(s.name, *run, id=s.name, marks=[pytest.mark.slow] if "slow" in run[0] else []))
    return out


@pytest.mark.parametrize("study, flags, command", _params())
def test_the_smallest_run_runs(study, flags, command, tmp_path, study_cache, require_dataset):
    if "data" in flags:
        for name in D.DATA_FILES:
            require_dataset(name)
    argv = shlex.split(command.replace("$TMP", str(tmp_path)).replace("$CACHE", str(study_cache)))
    argv[0] = sys.executable
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "MPLBACKEND": "Agg"}
    r = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    assert r.returncode == 0, f"{study}: `{command}` exited {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
