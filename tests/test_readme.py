"""README.md is generated from nbs/index.ipynb and must not drift; its Python snippets run as copied; CI runs the
README's test command verbatim."""
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _tool():
    spec = importlib.util.spec_from_file_location("make_readme", ROOT / "tools" / "make_readme.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_in_sync_with_index_notebook():
    assert README == _tool().readme_text(), "run: python tools/make_readme.py"


PY_BLOCKS = re.findall(r"```python\n(.*?)\n```", README, re.S)


def test_readme_has_python_snippets():
    assert PY_BLOCKS, "the README's code cells should render as ```python blocks (tools/make_readme.py)"
    assert not re.search(r"```\n(import|from) ", README), "a Python snippet without the python tag is not tested"


@pytest.mark.parametrize("i", range(len(PY_BLOCKS)))
def test_readme_python_snippet_runs_as_copied(i, tmp_path):
    "Each ```python block on its own, in a fresh interpreter, from an empty folder: no hidden imports or state."
    script = tmp_path / f"snippet_{i}.py"
    script.write_text(PY_BLOCKS[i] + "\n")
    env = {**os.environ, "MPLBACKEND": "Agg",
           "PYTHONPATH": os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"README snippet {i} failed:\n{PY_BLOCKS[i]}\n{r.stderr[-3000:]}"


def _test_command() -> str:
    blocks = re.findall(r"```sh\n(.*?)\n```", README, re.S)
    cmd = [b for b in blocks if "nbdev_test" in b and "pytest" in b]
    assert len(cmd) == 1, "the README must show exactly one test command"
    return cmd[0].strip()


def test_readme_test_command_works_from_the_clone_root_with_or_without_data():
    cmd = _test_command()
    assert "\n" not in cmd
    steps = [s.strip() for s in cmd.split("&&")]
    assert steps.index("pip install torch==2.13.0") < steps.index('pip install -e ".[dev]"')
    # the data path is made absolute (nbdev_test runs notebooks from nbs/): run that step with and without a
    # relative PFWCP_DATA_DIR; the data flag comes from pfwcp-data
    export = [s for s in steps if s.startswith("export PFWCP_DATA_DIR=")]
    assert len(export) == 1
    env = {k: v for k, v in os.environ.items() if k != "PFWCP_DATA_DIR"}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    with tempfile.TemporaryDirectory() as d:
        d = os.path.realpath(d)
        for given, want in ((None, os.path.join(os.path.dirname(d), "shared", "data")), ("rel/data", os.path.join(d, "rel", "data"))):
            e = env if given is None else {**env, "PFWCP_DATA_DIR": given}
            out = subprocess.run(["bash", "-c", export[0] + ' && printf %s "$PFWCP_DATA_DIR"'], cwd=d, env=e,
                                 capture_output=True, text=True, check=True).stdout
            assert out == want, (given, out)
    assert steps[-2:] == ['nbdev_test --n_workers 2 --timing --flags "$(pfwcp-data test-flags)"', "pytest tests -q -rs"]


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text()
    lines = [l for l in ci.splitlines() if l.strip() and not l.lstrip().startswith("#")]
    assert lines[0] == "set -euo pipefail"
    assert lines[-1] == _test_command(), "the last command of .ci/run must be the README's test command"
    before = "\n".join(lines[:-1])
    assert re.search(r'^export PFWCP_DATA_DIR="\$\{PFWCP_DATA_DIR:-\$\(cd \.\. && pwd\)/shared/data\}"$', before, re.M)
    assert "export PFWCP_REQUIRE_DATA=1" in before and "export MPLBACKEND=Agg" in before
