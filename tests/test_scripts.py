"""The study scripts of scripts/ use the package's public API only, and what they import exists (a renamed name fails
here, not in a study run months later); the results-reading scripts run on results/ and reject a missing folder."""
import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "scripts").glob("*.py"))


def _imports(path: Path):
    "(module, name) of every `from pfwcp_nb... import name` and (module, None) of every `import pfwcp_nb...`."
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "pfwcp_nb":
            for a in node.names:
                yield node.module, a.name
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "pfwcp_nb":
                    yield a.name, None


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_scripts_import_public_names_that_exist(path):
    for mod, name in _imports(path):
        assert not any(part.startswith("_") for part in mod.split(".")), f"{path.name}: private module {mod}"
        if name is None:
            continue
        assert not name.startswith("_"), f"{path.name}: private name {mod}.{name}; use the public API"
        m = importlib.import_module(mod)
        assert hasattr(m, name) or importlib.util.find_spec(f"{mod}.{name}"), f"{path.name}: {mod} has no {name}"
    src = path.read_text()
    tree = ast.parse(src)
    bound = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
             for a in n.names if isinstance(n, ast.Import) and a.name.startswith("pfwcp_nb")
             or isinstance(n, ast.ImportFrom) and (n.module or "").startswith("pfwcp_nb")}
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__") \
                and isinstance(n.value, ast.Name) and n.value.id in bound:
            pytest.fail(f"{path.name}: private attribute {n.value.id}.{n.attr}")


def test_a_private_import_is_caught(tmp_path):
    p = tmp_path / "bad.py"
    p.write_text("from pfwcp_nb.baselines import _agents\n")
    with pytest.raises(AssertionError, match="private name"):
        test_scripts_import_public_names_that_exist(p)


READERS = [["scripts/summary_table.py", "results/severe"], ["scripts/paper_table.py", "results/severe", "--datasets", "gaussian"],
           ["scripts/grid_tables.py", "infinite", "results/severe"], ["scripts/cp_rank_check.py", "results/severe"],
           ["scripts/figure1_summary.py", "results/severe/figure1_star.npz"],
           ["scripts/foreign_federations.py", "--table", "results/foreign_federations/results.csv"]]


@pytest.mark.parametrize("argv", READERS, ids=lambda a: a[0].split("/")[-1])
def test_results_readers_run_and_reject_a_missing_folder(argv):
    run = lambda args: subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                                      env={"PYTHONPATH": str(ROOT), "PATH": ""})
    r = run(argv)
    assert r.returncode == 0 and r.stdout.strip(), r.stderr
    bad = [a if not a.startswith("results/") else "results/no_such_folder" for a in argv]
    r = run(bad)
    assert r.returncode == 2 and "usage" in r.stderr.lower() and "not found" in r.stderr, r.stderr


@pytest.mark.parametrize("args", [[], ["extreme"], ["severe", "cache", "abc"], ["mild", "cache", "1"]])
def test_recommended_grid_rejects_bad_arguments(args):
    r = subprocess.run(["bash", str(ROOT / "scripts" / "recommended_grid.sh"), *args], capture_output=True, text=True)
    assert r.returncode == 2 and "usage:" in r.stderr, r.stderr
