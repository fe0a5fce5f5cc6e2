"""Registries stay live: the lists derived from the method and dataset records (`methods.WEIGHTED_METHODS`,
`METHOD_ORDER`, ..., `data.DATASETS`, `TASKS`, ...) are computed when read, so a method and a dataset registered at run
time are in them, and `run_experiment` runs them (in this process: `jobs=1`)."""
import numpy as np
import pytest

import pfwcp_nb.methods as B
import pfwcp_nb.data as D
from pfwcp_nb import weighted_quantile
from pfwcp_nb.methods import MethodSpec, register_method
from pfwcp_nb.data import DatasetSpec, register_dataset
from pfwcp_nb.models import DATASET_ARCH
from pfwcp_nb.backends import Execution
from pfwcp_nb.grid import default_methods
from pfwcp_nb.runner import run_experiment


def wcp_agent2(draw, alpha, delta=None, *, engine="exact", seed=0):
    "Weighted split CP on agent 2's scores and density ratios alone (MC variant only)."
    if delta is not None:
        raise ValueError("wcp_agent2 has no CCC variant")
    return weighted_quantile(draw.cal_scores[1], draw.cal_weights[1], alpha=alpha, inf_weight=draw.test_weights[:, 1])


def line_response(X, rng):
    "Y = sum of the covariates + N(0, 0.1^2)."
    return X.sum(1) + 0.1 * rng.standard_normal(len(X))


@pytest.fixture
def toy_records():
    "Register a toy method and a toy synthetic dataset; remove them afterwards (the registries are module state)."
    m = register_method(MethodSpec("WCP-2", wcp_agent2, order=99, uses_weights=True))
    d = register_dataset(DatasetSpec("toyline", "regression", "gaussian", (None, 3), "synthetic", response=line_response,
                                     covariates=("x1", "x2", "x3")))
    yield m, d
    del B.METHODS["WCP-2"], D.DATASET_SPECS["toyline"]


def test_derived_lists_follow_the_registries(toy_records):
    assert B.METHOD_ORDER[-1] == "WCP-2" and "WCP-2" in B.WEIGHTED_METHODS and "WCP-2-oracle" in B.ORACLE_METHODS
    assert "WCP-2" not in B.LOCALIZED_METHODS
    assert D.DATASETS[-1] == "toyline" and D.TASKS["toyline"] == "regression" and "toyline" not in D.DATA_FILES
    assert D.PAPER_SIZES["toyline"] == (None, 3) and DATASET_ARCH["toyline"] == "synthetic"
    assert "WCP-2" in default_methods() and "WCP-2" in default_methods("oracle")


def test_derived_lists_drop_what_is_removed(toy_records):
    del B.METHODS["WCP-2"], D.DATASET_SPECS["toyline"]
    try:
        assert "WCP-2" not in B.METHOD_ORDER and "toyline" not in D.DATASETS
    finally:
        B.METHODS["WCP-2"], D.DATASET_SPECS["toyline"] = toy_records


def test_an_unknown_module_attribute_still_fails():
    with pytest.raises(AttributeError, match="NO_SUCH_LIST"):
        B.NO_SUCH_LIST
    with pytest.raises(AttributeError, match="NO_SUCH_LIST"):
        D.NO_SUCH_LIST


def test_toy_method_and_dataset_run_through_run_experiment(toy_records, tmp_path):
    kw = dict(n_sims=4, n_test=60, how=Execution(jobs=1, progress=False, cache_dir=tmp_path / "cache"),
              train_kw={"predictor": {"epochs": 30}, "ratios": {"epochs": 30}})
    df = run_experiment("toyline", ["CP", "WCP-2", "PFWCP"], "mc", **kw)
    assert list(df.method) == ["CP", "WCP-2", "PFWCP"] and set(df.dataset) == {"toyline"}
    assert np.all((df.MC > 0.5) & (df.MC <= 1)) and np.all(df.n_sims == 4)
    oracle = run_experiment("toyline", ["WCP-2"], "mc", weights="oracle", **kw)
    assert list(oracle.method) == ["WCP-2-oracle"] and 0.5 < oracle.MC.iloc[0] <= 1
