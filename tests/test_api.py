"""The top-level API: every name of `pfwcp_nb.__all__` is importable from the package and is the object its module
defines, and `import pfwcp_nb` alone loads none of the heavy dependencies."""
import importlib
import subprocess
import sys

import pytest

import pfwcp_nb

EXPECTED = {"PFWCP", "split_conformal", "OneShotPFWCP", "AgentCalibration", "weighted_quantile", "select_quantiles", "run_experiment",
            "load_dataset", "fit_density_ratios", "trust_check", "choose_gamma", "recommend", "LocalCP",
            "calibrate_recommended", "AbsoluteResidual", "NormalizedResidual", "CQR", "LAC", "APS", "RAPS",
            "ClassConditional", "FederatedConformalRegressor", "FederatedConformalClassifier", "diagnose"}


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


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_help_shows_parameter_docs(name):
    "help() of every top-level name shows its parameters' docments comments (a `Parameters` section)."
    import pydoc
    text = pydoc.render_doc(getattr(pfwcp_nb, name), renderer=pydoc.plaintext)
    assert "Parameters" in text, name


def test_threshold_help_says_what_test_weights_look_like():
    import pydoc
    for cls in (pfwcp_nb.PFWCP, pfwcp_nb.OneShotPFWCP):
        assert "column 0 all ones" in pydoc.render_doc(cls.threshold, renderer=pydoc.plaintext)


def test_one_level_convention_old_meaning_fails():
    """Every level is a miscoverage (alpha, beta, tau); the quantile functions take it keyword-only, so the old
    positional level (0.9 for the 90 % quantile) is a TypeError, not the 10 % quantile."""
    import numpy as np
    from pfwcp_nb.pfwcp import AgentCalibration, band_quantile
    from pfwcp_nb.quantiles import quantile_of_quantiles, sorted_weighted_quantile
    s, w = np.arange(1.0, 11.0), np.ones(10)
    assert pfwcp_nb.weighted_quantile(s, w, alpha=0.1) == 9.0           # the 90 % quantile
    for call in (lambda: pfwcp_nb.weighted_quantile(s, w, 0.9), lambda: quantile_of_quantiles(s, w, 0.9),
                 lambda: band_quantile(s, w, 0.9), lambda: sorted_weighted_quantile(s, np.cumsum(w), 0.9, 0.0),
                 lambda: pfwcp_nb.weighted_quantile(s, w, level=0.9)):
        with pytest.raises(TypeError):
            call()
    with pytest.raises(ValueError, match="the quantile at level 1 - alpha"):
        pfwcp_nb.weighted_quantile(s, w, alpha=1.0)
    assert AgentCalibration(s).message(0.1, 0.0).quantiles[0] == 9.0     # beta: the same meaning as alpha
    assert pfwcp_nb.split_conformal(s, 0.1) == 10.0                      # ceil(0.9 * 11) = 10th of 10
