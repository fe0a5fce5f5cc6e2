"""Tests of pfwcp_nb.models: the paper's predictors, PCA features, non-conformity scores, bad input."""
import pickle

import numpy as np
import pytest
import torch
from sklearn.decomposition import PCA

from pfwcp_nb.data import make_federation
from pfwcp_nb.ratio_fit import fit_density_ratios
from pfwcp_nb.models import (
    PREDICTOR_ARCHS, FederatedPredictor, classification_score, fit_pca, predictor_settings, regression_score,
    train_predictor,
)


def gaussian_agents(seed, K=11, n=50, n_test=0):
    "The severe Gaussian federation of `pfwcp_nb.data` (S3; y = sum(x)): every agent's (X, y), and n_test points per agent."
    fed, rng = make_federation("gaussian", "severe", K=K, seed=seed), np.random.default_rng(seed)
    return [fed.sample(k, n, rng) for k in range(K)], [fed.sample(k, n_test, rng) for k in range(K)] if n_test else None


def test_train_predictor_regression_scores_and_standardisation():
    clients, test = gaussian_agents(21, n_test=100)
    Xs, ys = [X for X, _ in clients], [y for _, y in clients]
    Xt = np.concatenate([X for X, _ in test]); yt = np.concatenate([y for _, y in test])
    p = train_predictor("gaussian", Xs, ys, epochs=150, seed=0, progress=False)
    assert isinstance(p, FederatedPredictor) and p.task == "regression"
    assert [m.out_features for m in p.model if isinstance(m, torch.nn.Linear)] == [30, 30, 1]
    r2 = 1 - np.mean((p.predict(Xt) - yt) ** 2) / yt.var()
    assert r2 > 0.9, r2
    s = p.scores(Xt, yt)
    np.testing.assert_allclose(s, np.abs(yt - p.predict(Xt)))
    # targets in other units: standardisation makes the fit unit-free
    q = train_predictor("gaussian", Xs, [1000 * y + 5000 for y in ys], epochs=150, seed=0, progress=False)
    np.testing.assert_allclose(q.predict(Xt), 1000 * p.predict(Xt) + 5000, rtol=1e-4, atol=1e-2)


def test_train_predictor_classification_with_pca():
    rng = np.random.default_rng(3)
    proto = rng.normal(size=(3, 40))
    scale = np.diag(np.linspace(1, 0.05, 40))

    def toy(n):
        y = rng.integers(0, 3, n)
        return proto[y] + 0.8 * rng.normal(size=(n, 40)) @ scale, y
    data = [toy(40) for _ in range(4)]
    p = train_predictor("classification", [X for X, _ in data], [y for _, y in data], epochs=60, seed=0, progress=False)
    assert p.pca is not None and p.pca.explained_variance_ratio >= 0.9 and p.pca.n_components < 40
    Xt, yt = toy(200)
    P = p.predict_proba(Xt)
    np.testing.assert_allclose(P.sum(1), 1.0, atol=1e-9)
    s = p.scores(Xt, yt)
    np.testing.assert_allclose(s, 1 - P[np.arange(200), yt])
    assert np.all((s >= 0) & (s <= 1))
    assert np.mean(p.predict(Xt) == yt) > 0.8
    with pytest.raises(ValueError, match="predict_proba"):
        train_predictor("gaussian", [X[:, :5] for X, _ in data], [y.astype(float) for _, y in data],
                        epochs=1, progress=False).predict_proba(Xt[:, :5])


def test_fit_pca_moments_equals_sklearn_pooled():
    rng = np.random.default_rng(4)
    Xs = [rng.normal(size=(30, 15)) @ rng.normal(size=(15, 15)) + rng.normal(size=15) for _ in range(3)]
    pm, pp = fit_pca(Xs, 0.9), fit_pca(Xs, 0.9, method="pooled")
    sk = PCA(0.9, svd_solver="full").fit(np.concatenate(Xs))
    assert pm.n_components == pp.n_components == sk.n_components_
    np.testing.assert_allclose(np.abs(pm.components.T @ sk.components_.T), np.eye(sk.n_components_), atol=1e-8)
    np.testing.assert_allclose(pm.explained_variance_ratio, sk.explained_variance_ratio_.sum(), rtol=1e-10)
    Z = pm.transform(np.concatenate(Xs))
    np.testing.assert_allclose(Z.mean(0), 0, atol=1e-8)
    np.testing.assert_allclose((Z ** 2).sum(0).mean() / (len(Z) - 1), 1.0, rtol=1e-8)   # mean kept variance = 1


def test_paper_architectures():
    assert PREDICTOR_ARCHS["real"]["hidden"] == (500, 200, 100)
    assert PREDICTOR_ARCHS["synthetic"]["hidden"] == (30, 30)
    assert PREDICTOR_ARCHS["cifar"]["hidden"] == (200, 100, 50) and PREDICTOR_ARCHS["cifar"]["pca"] == 0.9
    assert predictor_settings("gaussian") == dict(task="regression", arch="synthetic")
    assert predictor_settings("bike") == dict(task="regression", arch="real")
    assert predictor_settings("cifar10c") == dict(task="classification", arch="cifar")


def test_score_functions():
    np.testing.assert_allclose(regression_score([1.0, -2.0], [0.5, 1.0]), [0.5, 3.0])
    np.testing.assert_allclose(classification_score([[0.2, 0.8], [0.6, 0.4]], [1, 1]), [0.2, 0.6])
    with pytest.raises(ValueError, match="labels"):
        classification_score([[0.2, 0.8]], [2])


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("train_X, train_y, kw, match", [
    ([np.zeros((5, 2)), np.zeros((0, 2))], [np.zeros(5), np.zeros(0)], {}, r"train_X\[1\].*no data"),
    ([np.zeros((5, 2))], [np.zeros(5), np.zeros(5)], {}, "one target array per agent"),
    ([np.zeros((5, 2))], [np.zeros(4)], {}, "4 targets for 5"),
    ([np.zeros((5, 2))], [np.zeros(5)], dict(task="ranking"), "task="),
    ([np.zeros((5, 2))], [np.zeros(5)], dict(arch="cifar"), "classification network"),
    ([np.zeros((5, 2))], [np.full(5, 0.5)], dict(task="classification", arch=(4,)), "integers"),
])
def test_train_predictor_bad_input(train_X, train_y, kw, match):
    task = kw.pop("task", "regression")
    with pytest.raises(ValueError, match=match):
        train_predictor(task, train_X, train_y, epochs=1, progress=False, **kw)


def test_predictor_pickles():
    rng = np.random.default_rng(9)
    Xs = [rng.normal(size=(20, 4)) for _ in range(3)]
    p = train_predictor("regression", Xs, [X.sum(1) for X in Xs], arch=(8,), epochs=3, progress=False)
    q = pickle.loads(pickle.dumps(p))
    np.testing.assert_array_equal(p.predict(Xs[0]), q.predict(Xs[0]))


@pytest.mark.parametrize("device", ["gpu", "tpu", 3.5, "cuda:99"])
def test_bad_device_is_a_value_error_naming_the_argument(device):
    rng = np.random.default_rng(0)
    X, y = [rng.normal(size=(10, 3)) for _ in range(2)], [rng.normal(size=10) for _ in range(2)]
    with pytest.raises(ValueError, match="device="):
        train_predictor("regression", X, y, arch=(4,), epochs=1, progress=False, device=device)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_training_on_cuda_runs_and_matches_cpu():
    """A tiny predictor and calibrated ratio classifiers trained on CUDA: the models come back on the CPU and their
    outputs are close to the CPU-trained ones (same random numbers; only floating-point rounding differs)."""
    rng = np.random.default_rng(2)
    data, _ = gaussian_agents(2, K=4, n=40)
    X, y = [x for x, _ in data], [t for _, t in data]
    Xq = rng.normal(size=(50, 10))
    p = {dev: train_predictor("regression", X, y, arch=(16,), epochs=100, seed=0, progress=False, device=dev)
         for dev in ("cpu", "cuda")}
    assert next(p["cuda"].model.parameters()).device.type == "cpu"
    np.testing.assert_allclose(p["cuda"].predict(Xq), p["cpu"].predict(Xq), atol=1e-3 * np.std(p["cpu"].predict(Xq)))
    r = {dev: fit_density_ratios(X, "pairwise", epochs=100, seed=0, progress=False, device=dev) for dev in ("cpu", "cuda")}
    assert r["cuda"][1].hparams["weight_decay"] == r["cpu"][1].hparams["weight_decay"]
    for k in range(1, 4):
        np.testing.assert_allclose(r["cuda"][k].log(Xq), r["cpu"][k].log(Xq), atol=1e-3)
