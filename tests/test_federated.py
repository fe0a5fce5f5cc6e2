"""Tests of pfwcp_nb.federated: FedAvg engine, FedAdam, predictors, PCA, scores, bad input."""
import numpy as np
import pytest
import torch

from pfwcp_nb.density_ratio import fit_density_ratios
from pfwcp_nb.federated import (
    PREDICTOR_ARCHS, FederatedPredictor, check_device, classification_score, fedavg, fedavg_loop, fedavg_many, fit_pca,
    make_mlp, predictor_settings, regression_score, train_centralised, train_predictor,
)


def gaussian_agents(rng, K=11, d=10, n=50):
    "Severe Gaussian shift of the paper (S3), y = sum(x)."
    q = d // 4
    M = np.zeros((K, d))
    M[0, :q] = rng.uniform(-1, -0.5, size=q)
    M[1:, q:] = rng.uniform(-0.7, 0.7, size=(K - 1, d - q))
    return [(X, X.sum(1)) for X in (rng.normal(M[k], 1.0, size=(n, d)) for k in range(K))]


def max_diff(m1, m2):
    with torch.no_grad():
        return max(float((p1 - p2).abs().max()) for p1, p2 in zip(m1.parameters(), m2.parameters()))


def fac3():
    return make_mlp(3, (8,), 1)


# ---------------------------------------------------------------- engine correctness
def test_engine_matches_loop_masked():
    "Unequal clients, client sampling, weight decay, 2 local epochs, persistent Adam: vectorised == loop."
    rng = np.random.default_rng(0)
    data = [(rng.normal(size=(n, 3)), rng.normal(size=n)) for n in (7, 12, 5)]
    kw = dict(rounds=4, local_epochs=2, batch_size=4, lr=1e-2, weight_decay=1e-3, client_fraction=0.7, seed=3)
    assert max_diff(fedavg(fac3, data, progress=False, **kw)[0], fedavg_loop(fac3, data, **kw)) < 1e-5


@pytest.mark.parametrize("reset", [False, True])
def test_engine_matches_loop_lockstep(reset):
    "Equal clients, full participation (torch.optim.Adam path, incl. non-contiguous vmap gradients): == loop."
    rng = np.random.default_rng(1)
    data = [(rng.normal(size=(8, 3)), rng.normal(size=8)) for _ in range(3)]
    kw = dict(rounds=5, batch_size=4, lr=1e-2, weight_decay=1e-3, seed=1, reset_optimizer=reset)
    assert max_diff(fedavg(fac3, data, progress=False, **kw)[0], fedavg_loop(fac3, data, **kw)) < 1e-5


def test_fedadam_one_fullbatch_step_is_centralised_adam():
    rng = np.random.default_rng(5)
    data = [(rng.normal(size=(n, 3)), rng.integers(0, 2, n).astype(float)) for n in (10, 6, 14)]
    kw = dict(loss="bce", epochs=30, batch_size=64, lr=1e-2, weight_decay=1e-3, seed=2, progress=False)
    m_fa, _ = fedavg(fac3, data, server_optimizer="adam", **kw)
    m_c, _ = train_centralised(fac3, np.concatenate([X for X, _ in data]), np.concatenate([y for _, y in data]), **kw)
    assert max_diff(m_fa, m_c) < 1e-5
    m_avg, _ = fedavg(fac3, data, server_optimizer="avg", **kw)    # plain FedAvg of local Adam is a different algorithm
    assert max_diff(m_avg, m_c) > 1e-4


def test_federations_trained_together_are_independent():
    "fedavg_many on two federations == each trained alone (same initial module, full batches)."
    rng = np.random.default_rng(2)
    fa = [(rng.normal(size=(6, 3)), rng.normal(size=6)) for _ in range(2)]
    fb = [(rng.normal(size=(9, 3)), rng.normal(size=9)) for _ in range(3)]
    template = fac3()
    kw = dict(rounds=6, batch_size=16, lr=1e-2, progress=False)
    (ma, mb), hist = fedavg_many(template, [fa, fb], **kw)
    assert max_diff(ma, fedavg(template, fa, **kw)[0]) < 1e-5
    assert max_diff(mb, fedavg(template, fb, **kw)[0]) < 1e-5
    assert set(hist.federation) == {0, 1}


def test_same_seed_same_model_other_seed_other_model():
    rng = np.random.default_rng(3)
    data = [(rng.normal(size=(10, 3)), rng.normal(size=10)) for _ in range(3)]
    kw = dict(rounds=3, batch_size=4, progress=False, client_fraction=0.67)
    a, b, c = (fedavg(fac3, data, seed=s, **kw)[0] for s in (0, 0, 1))
    assert max_diff(a, b) == 0.0
    assert max_diff(a, c) > 1e-3


# ---------------------------------------------------------------- federated vs centralised
def test_fedavg_decreases_loss_and_matches_centralised():
    """Tolerance (as in the notebook): training loss drops by > 100x; FedAvg and centralised test MSE both
    below 2% of Var(y) and within 1% of Var(y) of each other."""
    clients = gaussian_agents(np.random.default_rng(11))
    test = gaussian_agents(np.random.default_rng(12), n=200)
    Xt = np.concatenate([X for X, _ in test]); yt = np.concatenate([y for _, y in test])
    fac = lambda: make_mlp(10, (30, 30), 1)
    m_f, h_f = fedavg(fac, clients, epochs=400, batch_size=32, seed=0, progress=False)
    m_c, h_c = train_centralised(fac, np.concatenate([X for X, _ in clients]),
                                 np.concatenate([y for _, y in clients]), epochs=50, batch_size=32, seed=0, progress=False)
    assert h_f.loss.iloc[-1] < h_f.loss.iloc[0] / 100
    assert np.all(np.diff(h_f.epoch) > 0) and h_f.epoch.iloc[-1] == 400
    with torch.no_grad():
        mse = [float(((m(torch.as_tensor(Xt, dtype=torch.float32))[:, 0].numpy() - yt) ** 2).mean()) for m in (m_f, m_c)]
    v = yt.var()
    assert max(mse) < 0.02 * v, mse
    assert abs(mse[0] - mse[1]) < 0.01 * v, mse


# ---------------------------------------------------------------- predictors and scores
def test_train_predictor_regression_scores_and_standardisation():
    clients = gaussian_agents(np.random.default_rng(21))
    Xs, ys = [X for X, _ in clients], [y for _, y in clients]
    test = gaussian_agents(np.random.default_rng(22), n=100)
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
    from sklearn.decomposition import PCA
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
GOOD = [(np.zeros((4, 2)), np.zeros(4)), (np.ones((3, 2)), np.ones(3))]


@pytest.mark.parametrize("clients, kw, match", [
    ([], {}, "non-empty"),
    ([(np.zeros((0, 2)), np.zeros(0))], {}, "no samples"),
    ([(np.zeros((4, 2)), np.zeros(3))], {}, "4 rows but y has 3"),
    ([(np.full((2, 2), np.nan), np.zeros(2))], {}, "NaN"),
    ([(np.zeros(4), np.zeros(4))], {}, "2-D"),
    ([(np.zeros((4, 2)), np.zeros(4)), (np.zeros((4, 3)), np.zeros(4))], {}, "same features"),
    (GOOD, dict(loss="hinge"), "loss="),
    (GOOD, dict(loss="bce", y_scale=2.0), r"targets in \[0, 1\]"),
    (GOOD, dict(loss="ce", y_scale=0.5), "integer class labels"),
    (GOOD, dict(rounds=2, epochs=2), "exactly one of rounds"),
    (GOOD, dict(epochs=3, local_epochs=2, rounds=None), "multiple of local_epochs"),
    (GOOD, dict(client_fraction=0.0), "client_fraction"),
    (GOOD, dict(batch_size=0), "batch_size"),
    (GOOD, dict(lr=-1.0), "lr="),
    (GOOD, dict(server_optimizer="sgd"), "server_optimizer"),
])
def test_fedavg_bad_input(clients, kw, match):
    kw = dict(kw)
    y_scale = kw.pop("y_scale", None)
    if y_scale is not None:
        clients = [(X, np.full(len(X), y_scale)) for X, _ in clients]
    kw.setdefault("rounds", 1)
    if kw.get("rounds") is None: kw.pop("rounds")
    with pytest.raises(ValueError, match=match):
        fedavg(lambda: make_mlp(2, (3,), 1), clients, progress=False, **kw)


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
    import pickle
    rng = np.random.default_rng(9)
    Xs = [rng.normal(size=(20, 4)) for _ in range(3)]
    p = train_predictor("regression", Xs, [X.sum(1) for X in Xs], arch=(8,), epochs=3, progress=False)
    q = pickle.loads(pickle.dumps(p))
    np.testing.assert_array_equal(p.predict(Xs[0]), q.predict(Xs[0]))


def test_any_buffer_free_module_dropout_seeded_batchnorm_refused():
    rng = np.random.default_rng(4)
    data = [(rng.normal(size=(20, 3)), rng.normal(size=20)) for _ in range(3)]
    drop = lambda: torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Dropout(0.3), torch.nn.ReLU(),
                                       torch.nn.LayerNorm(8), torch.nn.Linear(8, 1))
    state = torch.random.get_rng_state()
    a, ha = fedavg(drop, data, rounds=20, batch_size=8, lr=1e-2, seed=0, progress=False)
    b, _ = fedavg(drop, data, rounds=20, batch_size=8, lr=1e-2, seed=0, progress=False)
    assert torch.equal(state, torch.random.get_rng_state())        # the caller's RNG is left alone
    assert max_diff(a, b) == 0.0 and not a.training
    assert ha.loss.iloc[-1] < ha.loss.iloc[0]
    bn = lambda: torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 1))
    with pytest.raises(ValueError, match="buffers"):
        fedavg(bn, data, rounds=1, progress=False)


# ---------------------------------------------------------------- devices and per-federation weight decay
@pytest.mark.parametrize("device", ["gpu", "tpu", 3.5, "cuda:99"])
def test_bad_device_is_a_value_error_naming_the_argument(device):
    rng = np.random.default_rng(0)
    X, y = [rng.normal(size=(10, 3)) for _ in range(2)], [rng.normal(size=10) for _ in range(2)]
    with pytest.raises(ValueError, match="device="):
        train_predictor("regression", X, y, arch=(4,), epochs=1, progress=False, device=device)
    with pytest.raises(ValueError, match="device="):
        fedavg(fac3, [(x, t) for x, t in zip(X, y)], epochs=1, progress=False, device=device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA present: the refusal is for machines without it")
def test_cuda_refused_without_cuda():
    with pytest.raises(ValueError, match="device='cuda'.*not available"):
        check_device("cuda")


def test_per_federation_weight_decay_equals_separate_runs():
    "Two federations with weight decays (0, 0.5) trained in one stack = each trained alone with its scalar (same init)."
    rng = np.random.default_rng(1)
    fed = [(rng.normal(size=(12, 3)), rng.integers(0, 2, 12).astype(float)) for _ in range(3)]
    torch.manual_seed(0)
    m0 = fac3()
    for opt in ("adam", "avg"):
        kw = dict(loss="bce", epochs=40, batch_size=64, lr=1e-2, server_optimizer=opt, seed=4, progress=False)
        both, _ = fedavg_many(m0, [fed, fed], weight_decay=[0.0, 0.5], **kw)
        a, _ = fedavg_many(m0, [fed], weight_decay=0.0, **kw)
        b, _ = fedavg_many(m0, [fed], weight_decay=0.5, **kw)
        assert max_diff(both[0], a[0]) < 1e-5 and max_diff(both[1], b[0]) < 1e-5
        assert max_diff(both[0], both[1]) > 1e-3
    with pytest.raises(ValueError, match="weight_decay"):
        fedavg_many(m0, [fed, fed], weight_decay=[0.1, 0.2, 0.3], **kw)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_training_on_cuda_runs_and_matches_cpu():
    """A tiny predictor and calibrated ratio classifiers trained on CUDA: the models come back on the CPU and their
    outputs are close to the CPU-trained ones (same random numbers; only floating-point rounding differs)."""
    rng = np.random.default_rng(2)
    data = gaussian_agents(rng, K=4, d=5, n=40)
    X, y = [x for x, _ in data], [t for _, t in data]
    Xq = rng.normal(size=(50, 5))
    p = {dev: train_predictor("regression", X, y, arch=(16,), epochs=100, seed=0, progress=False, device=dev)
         for dev in ("cpu", "cuda")}
    assert next(p["cuda"].model.parameters()).device.type == "cpu"
    np.testing.assert_allclose(p["cuda"].predict(Xq), p["cpu"].predict(Xq), atol=1e-3 * np.std(p["cpu"].predict(Xq)))
    r = {dev: fit_density_ratios(X, "pairwise", epochs=100, seed=0, progress=False, device=dev) for dev in ("cpu", "cuda")}
    assert r["cuda"][1].hparams["weight_decay"] == r["cpu"][1].hparams["weight_decay"]
    for k in range(1, 4):
        np.testing.assert_allclose(r["cuda"][k].log(Xq), r["cpu"][k].log(Xq), atol=1e-3)
