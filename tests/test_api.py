"""The top-level API: every name of `pfwcp_nb.__all__` is importable from the package and is the object its module
defines, and `import pfwcp_nb` alone loads none of the heavy dependencies."""
import importlib
import subprocess
import sys

import pytest

import pfwcp_nb

EXPECTED = {"PFWCP", "OneShotPFWCP", "AgentCalibration", "weighted_quantile", "select_quantiles", "run_experiment",
            "load_dataset", "fit_density_ratios", "trust_check", "choose_gamma", "recommend"}


def test_all_is_the_documented_api():
    assert set(pfwcp_nb.__all__) == EXPECTED and len(pfwcp_nb.__all__) == len(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_name_is_the_module_object(name):
    module = importlib.import_module(f"pfwcp_nb.{pfwcp_nb._API[name]}")
    assert getattr(pfwcp_nb, name) is getattr(module, name)
    assert name in getattr(module, "__all__", [])          # defined (exported) there, not re-imported
    assert getattr(module, name).__module__ == module.__name__


def test_from_import_and_unknown_name():
    ns = {}
    exec("from pfwcp_nb import PFWCP, OneShotPFWCP, AgentCalibration, weighted_quantile, select_quantiles, "
         "run_experiment, load_dataset, fit_density_ratios", ns)
    assert ns["PFWCP"] is pfwcp_nb.PFWCP
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        pfwcp_nb.not_a_name
    with pytest.raises(ImportError):
        exec("from pfwcp_nb import not_a_name", {})
    assert EXPECTED <= set(dir(pfwcp_nb))


def test_import_is_cheap():
    "A fresh interpreter: `import pfwcp_nb` loads no scipy, pandas, torch, matplotlib or ray; the core names only scipy."
    code = ("import sys, pfwcp_nb; heavy = ('scipy', 'pandas', 'torch', 'matplotlib', 'ray'); "
            "print(*[m for m in heavy if m in sys.modules]); "
            "from pfwcp_nb import PFWCP, OneShotPFWCP, weighted_quantile; print(*[m for m in heavy if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "", out
    assert out[1] == "scipy", out
