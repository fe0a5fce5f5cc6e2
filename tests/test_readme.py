"""README.md (from nbs/index.ipynb) and the long pages docs/*.md (from nbs/docs_*.ipynb) are generated and must not
drift; their Python snippets run as copied; the README fits a screen with code near the top; CI runs the README's test
command verbatim."""
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


PAGES = sorted(_tool().pages())                   # README.md and docs/NAME.md, each from its notebook


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_page_in_sync_with_its_notebook(page):
    assert (ROOT / page).exists() and (ROOT / page).read_text() == _tool().page_text(page), "run: python tools/make_readme.py"


def test_every_docs_page_has_a_notebook_and_every_link_resolves():
    docs = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))
    assert docs and set(docs) <= set(PAGES), f"docs pages without a notebook nbs/docs_NAME.ipynb: {set(docs) - set(PAGES)}"
    for page in PAGES:
        text = re.sub(r"```.*?```|`[^`\n]*`|\$\$.*?\$\$|\$[^$\n]*\$", "", (ROOT / page).read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if not target.startswith(("http://", "https://")):
                assert ((ROOT / page).parent / target).exists(), f"{page}: link to {target}, which does not exist"


def test_readme_fits_a_screen():
    "At most 150 lines, the own-data example's code within the first 60, and links to every docs page."
    lines = README.splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines (at most 150: move a section to docs/)"
    first_code = next(i for i, l in enumerate(lines, 1) if l.startswith("```python"))
    assert first_code <= 60, f"the README's first Python is at line {first_code}"
    for page in PAGES:
        assert page == "README.md" or f"]({page})" in README, f"README.md does not link to {page}"


PY_BLOCKS = [(page, b) for page in PAGES for b in re.findall(r"```python\n(.*?)\n```", (ROOT / page).read_text(), re.S)]


def test_readme_has_python_snippets():
    assert any(page == "README.md" for page, _ in PY_BLOCKS), "the README's code cells should render as ```python blocks"
    for page in PAGES:
        assert not re.search(r"```\n(import|from) ", (ROOT / page).read_text()), f"{page}: a Python snippet without the python tag is not tested"


@pytest.mark.slow
@pytest.mark.parametrize("i", range(len(PY_BLOCKS)), ids=[f"{p}:{i}" for i, (p, _) in enumerate(PY_BLOCKS)])
def test_readme_python_snippet_runs_as_copied(i, tmp_path):
    "Each ```python block of the README and docs/ on its own, in a fresh interpreter, from an empty folder."
    page, code = PY_BLOCKS[i]
    script = tmp_path / f"snippet_{i}.py"
    script.write_text(code + "\n")
    env = {**os.environ, "MPLBACKEND": "Agg",
           "PYTHONPATH": os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{page} snippet {i} failed:\n{code}\n{r.stderr[-3000:]}"


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
    assert steps[-2:] == ['nbdev_test --n_workers 2 --timing --flags "$(pfwcp-data test-flags)"',
                          'pytest tests -q -rs -m "not slow"']          # the fast tier (tests/conftest.py)


def test_ci_runs_the_readme_test_command_verbatim_then_the_slow_tier():
    ci = (ROOT / ".ci" / "run").read_text()
    lines = [l for l in ci.splitlines() if l.strip() and not l.lstrip().startswith("#")]
    assert lines[0] == "set -euo pipefail"
    # the README's command stops the script on any failing step (set -e alone would go on after a failing step of an
    # && list that is not its last); then the slow tier, whose status ends the script
    assert lines[-2] == _test_command() + " || exit $?", "the README's test command, verbatim, then `|| exit $?`"
    assert lines[-1] == "pytest tests -q -rs -m slow --durations=30", "the slow tier runs last"
    before = "\n".join(lines[:-2])
    assert re.search(r'^export PFWCP_DATA_DIR="\$\{PFWCP_DATA_DIR:-\$\(cd \.\. && pwd\)/shared/data\}"$', before, re.M)
    assert "export PFWCP_REQUIRE_DATA=1" in before and "export MPLBACKEND=Agg" in before
