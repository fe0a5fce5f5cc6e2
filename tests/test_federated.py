"""Tests of pfwcp_nb.federated: the FedAvg/FedAdam engine against the loop and centralised training, bad input."""
import numpy as np
import pytest
import torch

from pfwcp_nb.data import make_federation
from pfwcp_nb.federated import check_device, fedavg, fedavg_loop, fedavg_many, make_mlp, train_centralised


def gaussian_agents(seed, K=11, n=50, n_test=0):
    "The severe Gaussian federation of `pfwcp_nb.data` (S3; y = sum(x)): every agent's (X, y), and n_test points per agent."
    fed, rng = make_federation("gaussian", "severe", K=K, seed=seed), np.random.default_rng(seed)
    return [fed.sample(k, n, rng) for k in range(K)], [fed.sample(k, n_test, rng) for k in range(K)] if n_test else None


def max_diff(m1, m2):
    with torch.no_grad():
        return max(float((p1 - p2).abs().max()) for p1, p2 in zip(m1.parameters(), m2.parameters()))


def fac3():
    return make_mlp(3, (8,), 1)


# ---------------------------------------------------------------- engine correctness
def test_engine_matches_loop_masked():
    "Unequal clients (some sit out steps), weight decay, 2 local epochs, persistent Adam: vectorised == loop."
    rng = np.random.default_rng(0)
    data = [(rng.normal(size=(n, 3)), rng.normal(size=n)) for n in (7, 12, 5)]
    kw = dict(rounds=4, local_epochs=2, batch_size=4, lr=1e-2, weight_decay=1e-3, seed=3)
    assert max_diff(fedavg(fac3, data, progress=False, **kw)[0], fedavg_loop(fac3, data, **kw)) < 1e-5


def test_engine_matches_loop_lockstep():
    "Equal clients, full participation (torch.optim.Adam path, incl. non-contiguous vmap gradients): == loop."
    rng = np.random.default_rng(1)
    data = [(rng.normal(size=(8, 3)), rng.normal(size=8)) for _ in range(3)]
    kw = dict(rounds=5, batch_size=4, lr=1e-2, weight_decay=1e-3, seed=1)
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
    kw = dict(rounds=3, batch_size=4, progress=False)
    a, b, c = (fedavg(fac3, data, seed=s, **kw)[0] for s in (0, 0, 1))
    assert max_diff(a, b) == 0.0
    assert max_diff(a, c) > 1e-3


# ---------------------------------------------------------------- federated vs centralised
def test_fedavg_decreases_loss_and_matches_centralised():
    """Tolerance (as in the notebook): training loss drops by > 100x; FedAvg and centralised test MSE both
    below 2% of Var(y) and within 1% of Var(y) of each other."""
    clients, test = gaussian_agents(11, n_test=200)
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
    (GOOD, dict(batch_size=0), "batch_size"),
    (GOOD, dict(lr=-1.0), "lr="),
    (GOOD, dict(server_optimizer="sgd"), "server_optimizer"),
])
def test_fedavg_bad_input(clients, kw, match):
    "Every bad client or option is a ValueError naming it."
    kw = dict(kw)
    y_scale = kw.pop("y_scale", None)
    if y_scale is not None:
        clients = [(X, np.full(len(X), y_scale)) for X, _ in clients]
    kw.setdefault("rounds", 1)
    if kw.get("rounds") is None: kw.pop("rounds")
    with pytest.raises(ValueError, match=match):
        fedavg(lambda: make_mlp(2, (3,), 1), clients, progress=False, **kw)


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


def test_unequal_clients_with_fedadam_match_a_hand_written_round():
    "FedAdam, one round, clients of sizes 3 and 1 in batches of 2: client 2 sits out step 2; server Adam's first step is lr * sign."
    torch.manual_seed(0)
    net = make_mlp(2, (), 1)                              # a linear model
    rng = np.random.default_rng(0)
    data = [(rng.normal(size=(3, 2)), rng.normal(size=3)), (rng.normal(size=(1, 2)), rng.normal(size=1))]
    m, _ = fedavg(net, data, rounds=1, batch_size=2, lr=0.1, client_lr=0.5, server_optimizer="adam", progress=False)
    locs = []
    for k, (X, y) in enumerate(data):
        w = [p.detach().clone().requires_grad_(True) for p in net.parameters()]
        order = torch.argsort(torch.rand(2, 3, generator=torch.Generator().manual_seed(0)).masked_fill(
            torch.tensor([[False] * 3, [False, True, True]]), 2.0), dim=1)[k, :len(X)]
        for s in range(0, len(X), 2):
            i = order[s:s + 2]
            Xb, yb = torch.as_tensor(X, dtype=torch.float32)[i], torch.as_tensor(y, dtype=torch.float32)[i]
            l = ((Xb @ w[0].T + w[1])[:, 0] - yb).pow(2).mean()
            g = torch.autograd.grad(l, w)
            w = [(p - 0.5 * gp).detach().requires_grad_(True) for p, gp in zip(w, g)]
        locs.append(w)
    avg = [(3 * a + 1 * b) / 4 for a, b in zip(*locs)]
    expect = [p - 0.1 * torch.sign(p - a) for p, a in zip(net.parameters(), avg)]
    for got, want in zip(m.parameters(), expect):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)

