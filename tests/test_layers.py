"""Layers you can see: every module of the package belongs to one layer, and a module imports only
from its own layer or the layers it may use. The method layer loads neither torch nor engression (checked in a fresh
interpreter): `import pfwcp_nb; pfwcp_nb.split_conformal` gives split CP without them.

    method       the method: quantiles, coverage, Procedure 1, PFWCP, one-shot, trust, the method registry (numpy, scipy)
    data         the datasets and their files (pandas)
    models       the predictors, the density ratios, the localizer, federated training and its privacy (torch)
    experiments  the paper's harness: draws, grid, backends, command lines, reports
    federation   the deployable federation by party (Flower): it uses models, never the harness
"""
import subprocess
import sys
from pathlib import Path

import pytest

from test_reading_order import module_path, notebook_modules, package_imports

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "pfwcp_nb"

LAYERS = {   # the layer map: layer -> its modules (dotted under the package; "federation.*": the subpackage)
    "method": {"_validate", "argtypes", "quantiles", "coverage", "tau_search", "procedure", "scores", "pfwcp", "evidence", "trust",
               "oneshot", "query_policy", "value", "methods", "mondrian"},
    "data": {"columns", "data", "fetch"},
    "models": {"federated", "models", "score_models", "density_ratio", "ratio_diagnostics", "ratio_features",
               "ratio_validation", "ratio_fit", "ratio_fwcp", "ratio_selection", "ratio_evidence", "privacy", "conformal",
               "localizer"},
    "experiments": {"baselines", "pipeline", "metrics", "report", "report_figures", "cache", "diagnostics", "grid", "backends", "runner", "reproduce",
                    "demo"},
    "federation": {"federation.*"},
}
MAY_IMPORT = {   # layer -> the layers its modules may import (its own included)
    "method": {"method"},
    "data": {"method", "data"},
    "models": {"method", "data", "models"},
    "experiments": {"method", "data", "models", "experiments"},
    "federation": {"method", "data", "models", "federation"},
}


def layer_of(mod: str, layers=LAYERS) -> str | None:
    "The layer of module `mod` ('pfwcp', 'federation.server'), or None when the map does not name it."
    for layer, mods in layers.items():
        if mod in mods or any(m.endswith(".*") and mod.startswith(m[:-1]) for m in mods):
            return layer
    return None


def modules(pkg=PKG) -> list:
    "Every module of the package, dotted ('pfwcp', 'federation.server'), `__init__` and `_modidx` left out."
    return sorted(".".join(p.relative_to(pkg).with_suffix("").parts) for p in pkg.rglob("*.py")
                  if p.stem not in ("__init__", "_modidx"))


def layer_violations(pkg=PKG, layers=LAYERS, may=MAY_IMPORT) -> list:
    "(module, its layer, imported module, its layer) for every import the layer map forbids."
    bad = []
    for mod in modules(pkg):
        for imp in sorted(package_imports(module_path(mod, pkg), mod, pkg)):
            if layer_of(imp, layers) not in may[layer_of(mod, layers)]:
                bad.append((mod, layer_of(mod, layers), imp, layer_of(imp, layers)))
    return bad


def test_every_module_has_a_layer():
    missing = [m for m in modules() if layer_of(m) is None]
    assert not missing, f"modules without a layer: {missing}; add them to LAYERS in tests/test_layers.py"
    assert set(modules()) == set(notebook_modules().values())     # the map covers what the notebooks export


def test_no_import_runs_against_the_layers():
    bad = layer_violations()
    assert not bad, "\n".join(f"{m} ({lm}) imports {i} ({li}): a {lm} module may import only {sorted(MAY_IMPORT[lm])}"
                              for m, lm, i, li in bad)


def test_the_check_fails_on_an_upward_import(tmp_path):
    "A planted import of the harness from the federation, and of the models from the method layer, are found."
    (tmp_path / "federation").mkdir()
    (tmp_path / "federation" / "agent.py").write_text("from ..pipeline import draw_rng\nfrom ..models import m\n")
    (tmp_path / "quantiles.py").write_text("import numpy as np\nfrom .localizer import Localizer\n")
    for name in ("pipeline", "models", "localizer"):
        (tmp_path / f"{name}.py").write_text("")
    assert layer_violations(tmp_path) == [("federation.agent", "federation", "pipeline", "experiments"),
                                          ("quantiles", "method", "localizer", "models")]
    (tmp_path / "quantiles.py").write_text("import numpy as np\n")
    assert layer_violations(tmp_path) == [("federation.agent", "federation", "pipeline", "experiments")]


def _loaded_after(code: str) -> set:
    "The heavy libraries loaded by `code` run in a fresh interpreter."
    probe = "; import sys; print(sorted(m for m in ('torch', 'engression', 'flwr', 'ray') if m in sys.modules))"
    r = subprocess.run([sys.executable, "-c", code + probe], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return set(eval(r.stdout.strip().splitlines()[-1]))


def test_split_cp_without_torch():
    "`import pfwcp_nb; pfwcp_nb.split_conformal` gives split CP and loads neither torch nor engression."
    code = ("import pfwcp_nb; q = pfwcp_nb.split_conformal(list(range(1, 10)), 0.1); assert q == 9.0, q;"
            " assert pfwcp_nb.split_conformal.__module__ == 'pfwcp_nb.methods'")
    assert _loaded_after(code) == set()


def test_the_method_layer_loads_no_torch():
    "Every module of the method layer together: no torch, engression, Flower or Ray."
    code = "import importlib; [importlib.import_module('pfwcp_nb.' + m) for m in %r]" % sorted(LAYERS["method"])
    assert _loaded_after(code) == set()


@pytest.mark.slow
def test_the_probe_sees_torch():
    "The probe can fail: a models module loads torch."
    assert "torch" in _loaded_after("import pfwcp_nb.models")


@pytest.mark.parametrize("name", ["split_conformal", "weighted_quantile", "PFWCP", "OneShotPFWCP", "select_quantiles",
                                  "LocalCP", "calibrate_recommended", "APS", "CQR", "ClassConditional"])
def test_the_method_api_is_in_the_method_layer(name):
    import pfwcp_nb
    assert layer_of(getattr(pfwcp_nb, name).__module__[len("pfwcp_nb."):]) == "method"
