"README.md is generated from nbs/index.ipynb and must not drift; CI runs the README's test command."
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("make_readme", ROOT / "tools" / "make_readme.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_in_sync_with_index_notebook():
    assert (ROOT / "README.md").read_text() == _tool().readme_text(), "run: python tools/make_readme.py"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    blocks = re.findall(r"```sh\n(.*?)\n```", readme, re.S)
    test_cmd = [b for b in blocks if "nbdev_test" in b and "pytest" in b]
    assert len(test_cmd) == 1, "the README must show exactly one test command"
    runner = test_cmd[0].split("&&")[-2:]          # 'nbdev_test ...' and 'pytest ...'
    assert " && ".join(s.strip() for s in runner) in ci
    assert "pip install torch==2.13.0" in ci
