"""The programs of scripts/ (the operator's entry points) and studies/ (one folder per study) use the package's public
API only, and what they import exists (a renamed name fails here, not in a study run months later); every study
program answers `--help` without running; the results-reading ones run on results/ and reject a missing folder;
scripts/ keeps the operator's entry points only and results/ holds no program."""
import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "scripts").glob("*.py")) + sorted((ROOT / "studies").glob("*/*.py"))
STUDY_PROGRAMS = [p for p in sorted((ROOT / "studies").glob("*/*.py")) if '__name__ == "__main__"' in p.read_text()]
STUDY_RUNS = sorted((ROOT / "studies").glob("*/run.py"))


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


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
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
    p.write_text("from pfwcp_nb.methods import _agents\n")
    with pytest.raises(AssertionError, match="private name"):
        test_scripts_import_public_names_that_exist(p)


READERS = [["studies/paper_grid/summary_table.py", "results/severe"], ["studies/paper_grid/paper_table.py", "results/severe", "--datasets", "gaussian"],
           ["studies/paper_grid/grid_tables.py", "infinite", "results/severe"], ["studies/paper_grid/cp_rank_check.py", "results/severe"],
           ["studies/paper_grid/figure1_summary.py", "results/severe/figure1_star.npz"],
           ["studies/foreign_federations/run.py", "--table", "results/foreign_federations/results.csv"]]


@pytest.mark.slow
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
    r = subprocess.run(["bash", str(ROOT / "studies" / "recommended" / "grid.sh"), *args], capture_output=True, text=True)
    assert r.returncode == 2 and "usage:" in r.stderr, r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("path", STUDY_RUNS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_study_run_answers_help_without_running(path):
    "`python studies/NAME/run.py --help` from the repository root: exit 0, a usage text, nothing written."
    before = set(ROOT.iterdir())
    r = subprocess.run([sys.executable, str(path.relative_to(ROOT)), "--help"], cwd=ROOT, capture_output=True, text=True,
                       env={"PYTHONPATH": str(ROOT), "PATH": "", "MPLBACKEND": "Agg"}, timeout=120)
    assert r.returncode == 0 and "usage" in r.stdout.lower(), r.stdout[-500:] + r.stderr[-2000:]
    assert set(ROOT.iterdir()) == before, "--help wrote into the repository root"


@pytest.mark.parametrize("path", STUDY_PROGRAMS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_study_program_has_help(path):
    "The other programs (not run in a subprocess: each imports torch): argparse, or `--help` printing the usage."
    src = path.read_text()
    assert "argparse" in src or 'in (["-h"], ["--help"])' in src, f"{path.name}: no --help"
    assert "usage" in (ast.get_docstring(ast.parse(src)) or "").lower() or "argparse" in src, f"{path.name}: no usage line"


def test_every_study_has_a_readme_and_a_program():
    studies = sorted(p for p in (ROOT / "studies").iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
    assert studies
    for s in studies:
        assert (s / "README.md").exists(), f"{s.name}: no README.md (the question, the command, the generated numbers)"
        assert any(s.glob("*.py")) or any(s.glob("*.sh")) or any(s.glob("*.ipynb")), f"{s.name}: no program"


def test_no_program_under_results():
    found = [str(p.relative_to(ROOT)) for ext in ("py", "sh", "ipynb") for p in (ROOT / "results").rglob(f"*.{ext}")]
    assert not found, f"programs under results/ (move them to studies/<name>/): {found}"


# the operator's entry points: the grid runners and the deployment
OPERATOR = {"run_paper_tables.sh", "run_small.sh", "run_heterogeneity.sh", "run_oracle.sh", "flower_deploy.sh"}


def test_scripts_holds_the_operators_entry_points_only():
    here = {p.name for p in (ROOT / "scripts").iterdir() if p.name != "__pycache__"}
    assert here - OPERATOR == set(), f"scripts/ holds a study program: {sorted(here - OPERATOR)} (move it to studies/<name>/)"
    assert len(here & OPERATOR) <= 10
