"""The nbdev rhythm: one idea per exported cell, then its check; a cell over 40 lines says why.

`tools/cells_per_idea.py` measures it. The notebooks in `RHYTHM` have been brought to it and must stay there; a
notebook joins the list when its exported cells are one idea each, at least 65 % of them are followed by a check, no
three in a row go unchecked and every long cell states its reason (`# long cell: <reason>`)."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("cells_per_idea", ROOT / "tools" / "cells_per_idea.py")
cpi = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cpi)

RHYTHM = ("00_validate", "00a_quantiles", "01_coverage", "01a_tau_search", "02_procedure", "02a_scores", "02b_pfwcp", "02c_evidence",
          "02c_trust", "03_oneshot", "03b_query_policy", "03c_value", "03d_methods", "03e_mondrian", "04_columns", "04_data",
          "04b_fetch", "05c_score_models", "06_density_ratio", "06a_ratio_diagnostics", "06b_ratio_features",
          "06c_ratio_validation", "06d_ratio_fit", "06e_ratio_fwcp", "06f_ratio_selection", "06h_conformal",
          "07b_baselines", "08a_metrics", "08b_argtypes", "08c_pipeline", "08d_report", "08d_report_figures", "08e_cache", "08e_diagnostics", "08f_runner",
          "09_demo", "10_federation_protocol", "10a_federation_plan", "10b_federation_agreement",
          "10c_federation_agent", "10d_federation_server", "10h_federation_network", "10i_federation_resident",
          "10f_federation_supernode")
MIN_CHECKED = 0.65


@pytest.mark.parametrize("name", RHYTHM)
def test_notebook_keeps_the_rhythm(name):
    cs = cpi.cells(ROOT / "nbs" / f"{name}.ipynb")
    s = cpi.summary(cs)
    assert s["cells"] > 0
    assert s["long_unexplained"] == 0, [c.id for c in cs if c.lines > cpi.MAX_LINES and not c.reason]
    assert s["many_ideas"] == 0, [c.id for c in cs if c.ideas > 1]
    assert s["checked"] >= MIN_CHECKED, f"{name}: {100 * s['checked']:.0f} % of the exported cells followed by a check"
    assert cpi.unchecked_runs(cs) == 0, [c.id for c in cs if not c.checked]


def _nb(path: Path, sources: list) -> Path:
    "A notebook of code cells with the given sources."
    cells = [dict(cell_type="code", id=f"c{i}", metadata={}, outputs=[], execution_count=None, source=s)
             for i, s in enumerate(sources)]
    path.write_text(json.dumps(dict(cells=cells, metadata={}, nbformat=4, nbformat_minor=5)))
    return path


def test_the_measure_sees_what_it_guards(tmp_path):
    long_body = "\n".join(f"    x{i} = {i}" for i in range(41))
    nb = _nb(tmp_path / "bad.ipynb", [
        "#| export\ndef f():\n" + long_body,                      # long, no reason, unchecked
        "#| export\ndef g(): pass\n\ndef h(): pass",              # two ideas, unchecked
        "#| export\nK = 3",                                       # unchecked: the third in a row
        "print(K)",                                               # not a check
        "#| export\n# long cell: a reason\ndef k():\n" + long_body,
        "test_eq(k(), None)"])
    cs = cpi.cells(nb)
    s = cpi.summary(cs)
    assert (s["cells"], s["long"], s["long_unexplained"], s["many_ideas"]) == (4, 2, 1, 1)
    assert [c.checked for c in cs] == [False, False, False, True] and cpi.unchecked_runs(cs) == 3
    assert s["checked"] == 0.25


def test_the_tool_runs_and_refuses_a_missing_notebook(tmp_path):
    run = lambda *a: subprocess.run([sys.executable, str(ROOT / "tools" / "cells_per_idea.py"), *a], cwd=ROOT,
                                    capture_output=True, text=True)
    r = run("--per-notebook", "nbs/00_validate.ipynb")
    assert r.returncode == 0 and r.stdout.startswith("00_validate.ipynb: ") and "\nall: " in r.stdout, r.stdout
    r = run(str(tmp_path / "absent.ipynb"))
    assert r.returncode == 2 and "does not exist" in r.stderr and r.stderr.startswith("usage:"), r.stderr
