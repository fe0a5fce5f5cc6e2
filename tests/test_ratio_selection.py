"""Ratio models chosen by data (`ratio_selection.fit_selected_ratios`, `pipeline.with_ratio_model`, the runner's
`ratio_model`): deterministic per seed, the server sees only (loss sum, count) per agent, bad inputs, and the
runner reuses the paper setup's predictor under the selected ratios' own cache key."""
import pickle
import subprocess
from functools import partial

import numpy as np
import pytest
import torch

from pfwcp_nb import ratio_selection as DR
from pfwcp_nb.ratio_fit import fit_density_ratios
from pfwcp_nb import grid as grid_mod, pipeline, runner
from pfwcp_nb.cache import ResultCache, RunConfig
from pfwcp_nb.density_ratio import RatioCandidate
from pfwcp_nb.ratio_selection import fit_selected_ratios, ratio_candidates
from conftest import grid_run

from test_cli import _check_usage_error, _run

SMALL = [RatioCandidate("paper", 10, "paper", epochs=40), RatioCandidate("linear", 0, "std", 1e-2, 40, 1e-2),
         RatioCandidate("mlp", 10, "std", 1e-1, 20)]


def _agents(seed: int, K: int = 4, n: int = 24, d: int = 3):
    rng = np.random.default_rng(seed)
    return [rng.normal(0.4 * k, 1.0, size=(n, d)) for k in range(K)]


@pytest.mark.parametrize("seed", [0, 5])
def test_selection_deterministic_per_seed(seed):
    X = _agents(seed)
    a, b = fit_selected_ratios(X, seed=seed, candidates=SMALL), fit_selected_ratios(X, seed=seed, candidates=SMALL)
    assert a[1].selection.equals(b[1].selection) and a[1].candidate == b[1].candidate
    for k in range(1, len(X)):
        np.testing.assert_array_equal(a[k].log(X[0]), b[k].log(X[0]))
    assert a[1].selection.chosen.sum() == 1
    assert a[1].selection.val_loss.idxmin() == int(np.flatnonzero(a[1].selection.chosen)[0])


def test_selection_sees_only_loss_sum_and_count(monkeypatch):
    seen = []
    real = DR.select_by_validation
    monkeypatch.setattr(DR, "select_by_validation", lambda reports: seen.append(reports) or real(reports))
    X = _agents(1)
    w = fit_selected_ratios(X, seed=1, candidates=SMALL)
    assert len(seen) == 1 and len(seen[0]) == len(SMALL)
    for per_agent in seen[0]:
        assert len(per_agent) == len(X)                       # one report per agent, nothing else
        for r in per_agent:
            assert type(r) is tuple and len(r) == 2 and type(r[0]) is float and type(r[1]) is int
    # counts: agent 1 holds out its points in each of the K-1 pairwise tasks, agent k in its own task only
    assert [c for _, c in seen[0][0]] == [24 * (len(X) - 1)] + [24] * (len(X) - 1)
    losses = [sum(l for l, _ in r) / sum(c for _, c in r) for r in seen[0]]
    np.testing.assert_allclose(w[1].selection.val_loss, losses)


def test_selected_paper_candidate_equals_paper_fit():
    X = _agents(2)
    w = fit_selected_ratios(X, seed=2, candidates=[RatioCandidate("paper", 10, "paper", epochs=30)])
    p = fit_density_ratios(X, seed=2, epochs=30, standardize=False, progress=False)   # the "paper" candidate: raw features
    for k in range(1, len(X)):
        np.testing.assert_allclose(w[k].log(X[k]), p[k].log(X[k]), rtol=1e-6, atol=1e-6)


def test_candidate_grid_is_one_rule():
    for ds in ("gaussian", "airfoil", "crime"):
        names = [c.name for c in ratio_candidates(ds)]
        assert names == [c.name for c in ratio_candidates("gaussian")]
    assert {c.features for c in ratio_candidates("cifar10c")} == {"paper", "std", "stats"}


@pytest.mark.parametrize("kw, msg", [
    (dict(candidates=[]), "candidates"),
    (dict(candidates=["paper"]), "RatioCandidate"),
    (dict(candidates=[RatioCandidate("x", 0, "pixels")]), "features must be one of"),
    (dict(candidates=[RatioCandidate("x", 0, "stats")]), "'stats' only for images"),
    (dict(folds=1), "folds=1"),
    (dict(folds=25), "folds=25"),
    (dict(eps=0.7), "eps=0.7"),
    (dict(dataset="mnist"), "dataset='mnist'"),
])
def test_bad_inputs(kw, msg):
    with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace("[", r"\[")):
        fit_selected_ratios(_agents(0), **{"candidates": SMALL, **kw})


def test_bad_agents():
    with pytest.raises(ValueError, match="at least 2 agents"):
        fit_selected_ratios(_agents(0)[:1], candidates=SMALL)
    with pytest.raises(ValueError, match="2-D"):
        fit_selected_ratios([np.zeros(5), np.zeros(5)], candidates=SMALL)
    with pytest.raises(ValueError, match="ratio_model='tuned'"):
        RunConfig("gaussian", ratio_model="tuned")


@pytest.mark.slow
def test_cli_rejects_unknown_ratio_model(tmp_path):
    r = _run("pfwcp-experiments", ["--ratio-model", "tuned", "--out", str(tmp_path)], tmp_path)
    _check_usage_error(r, "pfwcp-experiments", "--ratio-model")


def test_runner_reuses_predictor_and_keys(tmp_path, monkeypatch):
    "select: the paper setup is trained (or read) once, the selected ratios are cached under their own key."
    monkeypatch.setattr(grid_mod, "with_ratio_model", partial(pipeline.with_ratio_model, candidates=SMALL))
    fast = {"predictor": {"epochs": 30}, "ratios": {"epochs": 30}, "fwcp": {"epochs": 30}}
    kw = dict(n_sims=2, n_test=20, chunk_size=2, train_kw=fast, progress=False, cache_dir=tmp_path, K=4)
    sel = grid_run(["gaussian"], ["PFWCP"], ["mc"], ratio_model="select", **kw)
    pap = grid_run(["gaussian"], ["PFWCP"], ["mc"], **kw)
    assert list(sel.ratio_model) == ["select"] and list(pap.ratio_model) == ["paper"]
    cache = ResultCache(tmp_path)
    models = sorted(p.name for p in (tmp_path / "models").glob("*.pkl"))
    assert len(models) == 2 and models[1] == models[0].replace("__ratios-paper__", "__ratios-select__")
    st_p, st_s = (pickle.loads((tmp_path / "models" / m).read_bytes()) for m in models)
    assert st_p.ratio_model == "paper" and st_s.ratio_model == "select"
    for a, b in zip(st_p.predictor.model.state_dict().values(), st_s.predictor.model.state_dict().values()):
        assert torch.equal(a, b)                               # the same predictor: not retrained
    Xq = np.random.default_rng(0).normal(size=(5, 10))
    assert not np.allclose(st_p.ratios[1](Xq), st_s.ratios[1](Xq))
    assert len(list((tmp_path / "cells").glob("*.npz"))) == 2
