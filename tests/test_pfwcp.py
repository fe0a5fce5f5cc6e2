"The PFWCP protocol (`pfwcp_nb.pfwcp`): messages, wire format, aggregation, +inf, estimator, bad input, coverage check."
import json
import warnings

import numpy as np
import pytest

from pfwcp_nb.pfwcp import PROTOCOL_VERSION, PFWCP, AgentCalibration, AgentMessage, AgentSummary, aggregate
from pfwcp_nb.oneshot import OneShotMessage
from pfwcp_nb.procedure import select_quantiles
from pfwcp_nb.quantiles import effective_sample_size, quantile_of_quantiles, weighted_quantile


def brute_quantile(values, weights, level):
    "inf{x : sum_{v <= x} w / sum w >= level} by scanning every candidate (no cumsum shortcut)."
    values, weights = np.asarray(values, float), np.asarray(weights, float)
    for x in np.sort(np.unique(values)):
        if weights[values <= x].sum() >= level * weights.sum() * (1 - 1e-12):
            return x
    return np.inf


def test_summary_and_message_carry_no_raw_data():
    rng = np.random.default_rng(0)
    s, w = rng.normal(size=50), rng.lognormal(size=50)
    a = AgentCalibration(s, w)
    summ = a.summary()
    assert isinstance(summ, AgentSummary) and set(vars(summ)) == {"n_eff", "weight_total", "n"}
    assert summ.n == 50 and summ.weight_total == pytest.approx(w.sum())
    assert summ.n_eff == pytest.approx(w.sum() ** 2 / (w ** 2).sum())
    msg = a.message(0.2, rng.lognormal(size=7))
    assert isinstance(msg, AgentMessage) and set(vars(msg)) == {"quantiles", "beta"} and msg.quantiles.shape == (7,)
    assert "_scores" not in repr(a) and str(s[0]) not in repr(a)


def test_message_is_the_weighted_quantile_with_test_atom():
    rng = np.random.default_rng(1)
    s, w = rng.gamma(2.0, size=40), rng.lognormal(size=40)
    tw = np.concatenate([rng.lognormal(size=20), [0.0, 1e6]])
    q = AgentCalibration(s, w).message(0.15, tw).quantiles
    for j, t in enumerate(tw):
        assert q[j] == brute_quantile(np.append(s, np.inf), np.append(w, t), 0.85)
    assert np.isinf(q[-1]) and np.isfinite(q[-2])     # huge test weight -> legitimately +inf


def test_aggregate_is_the_weighted_quantile_of_quantiles_and_handles_inf():
    rng = np.random.default_rng(2)
    K, m = 6, 30
    Q = rng.exponential(size=(m, K))
    Q[:10, 0] = np.inf                              # one agent infinite
    Q[20:, :4] = np.inf                             # most of the weight infinite
    w = rng.uniform(0.5, 2.0, K)
    msgs = [AgentMessage(Q[:, k], 0.1) for k in range(K)]
    for tau in (0.0, 0.2, 0.45):
        thr = aggregate(msgs, w, tau)
        for j in range(m):
            assert thr[j] == brute_quantile(Q[j], w, 1 - tau)
    thr = aggregate(msgs, w, 0.2)
    finite_weight = (w[None, :] * np.isfinite(Q)).sum(1) / w.sum()
    np.testing.assert_array_equal(np.isinf(thr), finite_weight < 0.8 * (1 - 1e-12))


def test_cumsum_rounding_tau_zero_and_single_agent():
    # ten agents with aggregation weight 0.1: the cumulative sum ends at 0.9999999999999999
    assert np.cumsum(np.full(10, 0.1))[-1] < 1.0
    rng = np.random.default_rng(3)
    Q = rng.normal(size=(5, 10))
    msgs = [AgentMessage(Q[:, k], 0.1) for k in range(10)]
    np.testing.assert_array_equal(aggregate(msgs, np.full(10, 0.1), 0.0), Q.max(axis=1))
    # single agent, tau = 0, beta = alpha: plain (weighted) split conformal
    s = rng.normal(size=99)
    model = PFWCP(0.1, grid=([0.1], [0.0])).calibrate([AgentCalibration(s)])
    np.testing.assert_array_equal(model.threshold(np.ones((4, 1))), np.full(4, np.sort(s)[89]))  # ceil(0.9*100)=90th


def test_threshold_input_forms_agree_and_sets():
    rng = np.random.default_rng(4)
    agents = [AgentCalibration(rng.exponential(size=60))] + \
             [AgentCalibration(rng.exponential(size=60), rng.lognormal(size=60)) for _ in range(3)]
    model = PFWCP(0.1).calibrate(agents)
    TW = np.column_stack([np.ones(8), rng.lognormal(size=(8, 3))])
    TW[0, 1:] = 1e6                                             # every agent but the test agent says +inf
    q = model.threshold(TW)
    np.testing.assert_array_equal(q, model.threshold([TW[:, k] for k in range(4)]))
    np.testing.assert_array_equal(q, model.threshold([1.0] + [TW[:, k] for k in range(1, 4)]))
    assert np.isinf(q[0]) and np.all(np.isfinite(q[1:]))
    lo, hi = model.predict_interval(np.arange(8.0), TW, score="absolute")   # raw scores: the score is named
    np.testing.assert_array_equal(lo, np.arange(8.0) - q); np.testing.assert_array_equal(hi, np.arange(8.0) + q)
    assert lo[0] == -np.inf and hi[0] == np.inf
    probs = rng.dirichlet(np.ones(5), size=8)
    sets = model.predict_set(probs, TW, score="lac")
    assert sets.shape == (8, 5) and sets[0].all()
    np.testing.assert_array_equal(sets, (1 - probs) <= q[:, None])
    # the model's choice is Procedure 1 on the agents' n_eff
    ch = select_quantiles([a.summary().n_eff for a in agents], 0.1)
    assert (model.beta_, model.tau_) == (ch.beta, ch.tau)


@pytest.mark.parametrize("make, match", [
    (lambda: AgentCalibration([1.0, 2.0], [1.0, np.nan]), "weights"),
    (lambda: AgentCalibration([1.0, 2.0], [1.0, -1.0]), "weights"),
    (lambda: AgentCalibration([1.0, 2.0], [0.0, 0.0]), "weights"),
    (lambda: AgentCalibration([1.0, 2.0], [1.0]), "weights"),
    (lambda: AgentCalibration([], []), "scores"),
    (lambda: AgentCalibration([1.0, np.nan]), "scores"),
    (lambda: AgentCalibration([1.0, 2.0]).message(1.0, [1.0]), "beta"),
    (lambda: AgentCalibration([1.0, 2.0]).message(0.1, [-1.0]), "inf_weight|test_weights"),
    (lambda: PFWCP(alpha=0.0), "alpha"),
    (lambda: PFWCP(alpha=0.1, delta=2.0), "delta"),
    (lambda: PFWCP(0.1).calibrate([]), "agents"),
    (lambda: PFWCP(0.1).calibrate([np.ones(3)]), "agents"),
    (lambda: PFWCP(0.1).threshold(np.ones((2, 1))), "calibrate"),
    (lambda: PFWCP(0.1).calibrate([AgentCalibration(np.arange(50.0))] * 2).threshold(np.ones((3, 3))), "test_weights"),
    (lambda: PFWCP(0.1).calibrate([AgentCalibration(np.arange(50.0))] * 2).threshold([np.ones(3), np.ones(2)]), "test_weights"),
    (lambda: PFWCP(0.1).calibrate([AgentCalibration(np.arange(50.0))] * 2).threshold(np.full((3, 2), np.nan)), "test_weights"),
    (lambda: PFWCP(0.1).calibrate([AgentCalibration(np.arange(50.0))] * 2).predict_interval(np.ones(4), np.ones((3, 2)), score="absolute"), "prediction"),
    (lambda: PFWCP(0.1).calibrate([AgentCalibration(np.arange(50.0))] * 2).predict_set(np.full((4, 3), 1 / 3), np.ones((3, 2)), score="lac"), "probs"),
    (lambda: PFWCP(0.1).calibrate([AgentCalibration(np.arange(50.0))] * 2).predict_interval(np.ones(3), np.ones((3, 2))), "no score is recorded"),
    (lambda: aggregate([], [1.0], 0.1), "messages"),
    (lambda: aggregate([AgentMessage(np.ones(2), 0.1)], [1.0], 1.0), "tau"),
])
def test_bad_input(make, match):
    with pytest.raises(ValueError, match=match):
        make()


# ---------------------------------------------------------------- statistical check (seeded, ~30 s)
def simulate(oracle, delta, n_draws=200, m=1000, n=100, seed=0):
    "Coverage of PFWCP and FCP-QQ (true ratios) on the same draws: `oracle` is the `gaussian_oracle` fixture."
    sim, _ = oracle(11)
    K = len(sim.g)
    rng = np.random.default_rng(seed)
    qq = select_quantiles(np.full(K, float(n)), 0.1, delta, agg_weights=np.full(K, 1 / K))   # FCP-QQ levels
    cov = np.empty((n_draws, 2))
    for r in range(n_draws):
        cal = sim.calibration(rng, n)
        Xt = sim.draw(rng, m)
        st = sim.score(Xt)
        q = PFWCP(0.1, delta).calibrate([AgentCalibration(s, w) for s, w in cal]).threshold(sim.weights(Xt))
        Qqq = np.array([weighted_quantile(s, np.ones(n), alpha=qq.beta, inf_weight=1.0) for s, _ in cal])
        cov[r] = np.mean(st <= q), np.mean(st <= quantile_of_quantiles(Qqq, np.full(K, 1 / K), alpha=qq.tau))
    return cov


@pytest.mark.slow
def test_gaussian_shift_marginal_coverage(gaussian_oracle):
    cov = simulate(gaussian_oracle, None)
    assert cov[:, 0].mean() >= 0.9 - 0.01                      # PFWCP
    assert cov[:, 1].mean() < cov[:, 0].mean() - 0.02           # FCP-QQ visibly lower


def test_gaussian_shift_ccc(gaussian_oracle):
    cov = simulate(gaussian_oracle, 0.1, seed=1, m=3000)
    assert np.mean(cov[:, 0] >= 0.9) >= 0.9 - 0.05


def wire(msg):
    "Through JSON and back, as a message travels."
    return type(msg).from_dict(json.loads(json.dumps(msg.to_dict(), allow_nan=False)))


@pytest.mark.parametrize("seed", range(4))
def test_json_round_trip_of_every_message(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    a = AgentCalibration(rng.normal(size=n), rng.lognormal(size=n))
    tw = np.concatenate([rng.lognormal(size=5), [0.0, 1e9]])          # 1e9: the local quantile is +inf
    for msg in (a.summary(), a.message(float(rng.uniform(0.01, 0.5)), tw), a.oneshot_message(0.2)):
        d = msg.to_dict()
        assert d["type"] == type(msg).__name__ and d["version"] == PROTOCOL_VERSION
        back = wire(msg)
        assert type(back) is type(msg) and set(vars(back)) == set(vars(msg))
        for k, v in vars(msg).items():
            np.testing.assert_array_equal(getattr(back, k), v)       # bit-exact, +inf included
    m = a.message(0.1, tw)
    assert np.isinf(m.quantiles[-1]) and m.to_dict()["quantiles"][-1] == "inf"
    assert AgentMessage(np.array([-np.inf]), 0.1).to_dict()["quantiles"] == ["-inf"]


@pytest.mark.parametrize("cls, d, match", [
    (AgentSummary, {"type": "AgentSummary", "version": PROTOCOL_VERSION + 1, "n_eff": 1.0, "weight_total": 1.0, "n": 1},
     f"version {PROTOCOL_VERSION + 1}"),
    (AgentSummary, {"type": "AgentSummary", "n_eff": 1.0, "weight_total": 1.0, "n": 1}, "version None"),
    (AgentSummary, {"type": "AgentMessage", "version": PROTOCOL_VERSION, "quantiles": [], "beta": 0.1}, "not a AgentSummary"),
    (AgentSummary, {"type": "AgentSummary", "version": PROTOCOL_VERSION, "n_eff": 1.0, "n": 1}, "fields"),
    (AgentSummary, {"type": "AgentSummary", "version": PROTOCOL_VERSION, "n_eff": 1.0, "weight_total": 1.0, "n": 1,
                    "scores": [1.0]}, "fields"),
    (AgentSummary, {"type": "AgentSummary", "version": PROTOCOL_VERSION, "n_eff": "nan", "weight_total": 1.0, "n": 1}, "n_eff"),
    (AgentSummary, {"type": "AgentSummary", "version": PROTOCOL_VERSION, "n_eff": 1.0, "weight_total": 1.0, "n": 1.5}, "integer"),
    (AgentMessage, {"type": "AgentMessage", "version": PROTOCOL_VERSION, "quantiles": 3.0, "beta": 0.1}, "list"),
    (OneShotMessage, [1, 2], "not a OneShotMessage"),
])
def test_from_dict_bad_input(cls, d, match):
    with pytest.raises(ValueError, match=match):
        cls.from_dict(d)


def test_to_dict_refuses_nan():
    with pytest.raises(ValueError, match="NaN"):
        AgentMessage(np.array([1.0, np.nan]), 0.1).to_dict()


def random_federation(rng, K, n_max=80):
    agents = [AgentCalibration(rng.gamma(2.0, size=int(rng.integers(5, n_max))))]
    for k in range(1, K):
        n = int(rng.integers(5, n_max))
        agents.append(AgentCalibration(rng.gamma(2.0, size=n) * (1 + 0.2 * k), rng.lognormal(0, 1.0, size=n)))
    tw = rng.lognormal(0, 1.5, size=(40, K))
    tw[:, 0] = 1.0
    tw[:5, 1:] *= 1e4                                                     # atypical test points -> +inf answers
    return agents, tw


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("delta", [None, 0.1])
def test_calibrate_from_summaries_equals_agents(seed, delta):
    rng = np.random.default_rng(seed)
    agents, tw = random_federation(rng, K=int(rng.integers(1, 8)))
    ref = PFWCP(0.1, delta).calibrate(agents)
    server = PFWCP(0.1, delta).calibrate([wire(a.summary()) for a in agents])
    assert (server.beta_, server.tau_) == (ref.beta_, ref.tau_)
    np.testing.assert_array_equal(server.agg_weights_, ref.agg_weights_)
    msgs = [wire(a.message(server.beta_, tw[:, k])) for k, a in enumerate(agents)]
    np.testing.assert_array_equal(server.combine(msgs), ref.threshold(tw))
    with pytest.raises(ValueError, match="combine"):
        server.threshold(tw)


def test_combine_bad_input():
    rng = np.random.default_rng(0)
    agents, tw = random_federation(rng, K=3)
    server = PFWCP(0.1).calibrate([a.summary() for a in agents])
    with pytest.raises(ValueError, match="before combining"):
        PFWCP(0.1).combine([])
    with pytest.raises(ValueError, match="K=3"):
        server.combine([a.message(server.beta_, tw[:, 0]) for a in agents[:2]])
    with pytest.raises(ValueError, match="beta\\*"):
        server.combine([a.message(server.beta_ / 2, tw[:, k]) for k, a in enumerate(agents)])
    with pytest.raises(ValueError, match="AgentCalibration or AgentSummary"):
        PFWCP(0.1).calibrate([agents[0], agents[1].summary()])
