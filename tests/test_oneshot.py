"osPFWCP (`pfwcp_nb.oneshot`): the beta^k identity, the tau grid, the row-wise search, vectorisation, bad input."
import json
import warnings

import numpy as np
import pytest
from scipy import stats

from pfwcp_nb.coverage import coverage_objective
from hypothesis import given, settings, strategies as st

from pfwcp_nb.oneshot import OneShotMessage, OneShotPFWCP, local_levels, oneshot_level, oneshot_tau_grid, select_tau_rows
from pfwcp_nb.pfwcp import AgentCalibration, AgentSummary
from pfwcp_nb.procedure import FEAS_TOL, ccc_alpha, select_quantiles
from pfwcp_nb.quantiles import quantile_of_quantiles, weighted_quantile


def make_agents(K=5, n=80, seed=0):
    rng = np.random.default_rng(seed)
    out = [AgentCalibration(rng.gamma(2.0, size=n))]
    for k in range(1, K):
        out.append(AgentCalibration(rng.gamma(2.0, size=n) * (1 + 0.1 * k), rng.lognormal(0, 0.7, size=n)))
    return out


def test_oneshot_message_fields():
    rng = np.random.default_rng(0)
    s, w = rng.normal(size=60), rng.lognormal(size=60)
    m = AgentCalibration(s, w).oneshot_message(0.2)
    assert isinstance(m, OneShotMessage)
    assert set(vars(m)) == {"quantile", "weight_total", "weight_above", "n_eff", "beta_breve"}
    assert m.quantile == weighted_quantile(s, w, alpha=0.2)
    assert m.weight_above == pytest.approx(w[s > m.quantile].sum())
    assert m.weight_total == pytest.approx(w.sum())
    assert m.weight_above <= 0.2 * w.sum() * (1 + 1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_beta_k_identity(seed):
    # Q-breve^k equals the PFWCP local quantile Q^k_{beta^k}(X), with the +inf atom, for every test weight
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 120))
    s = rng.normal(size=n) if seed % 2 else rng.integers(0, 10, size=n).astype(float)   # ties too
    w = rng.lognormal(size=n) if seed < 3 else rng.integers(1, 4, size=n).astype(float)  # exact sums too
    bb = float(rng.uniform(0.05, 0.5))
    msg = AgentCalibration(s, w).oneshot_message(bb)
    tw = np.concatenate([[0.0, 1.0, 2.0], rng.lognormal(0, 2, size=60)])
    b = local_levels([msg], tw[:, None])[:, 0]
    np.testing.assert_allclose(b, (tw + msg.weight_above) / (msg.weight_total + tw))
    for bj, t in zip(b, tw):
        assert weighted_quantile(s, w, alpha=bj, inf_weight=t) == msg.quantile


def test_tau_grid():
    "Unequal weights (equal weights and one agent: 03_oneshot): 51 increasing taus from 0 to 1 - max w."
    g = oneshot_tau_grid([4.0, 2.0, 1.0, 1.0])
    assert g.size == 51 and g[0] == 0 and g[-1] == pytest.approx(0.5) and np.all(np.diff(g) > 0)


def test_select_tau_rows():
    "Within FEAS_TOL of the target is feasible; all ties feasible -> the largest tau (ties and infeasible: 03_oneshot)."
    obj = np.array([[0.9 - FEAS_TOL / 2, 0.5, 0.4, 0.3],
                    [0.99, 0.99, 0.99, 0.99]])
    idx, ok = select_tau_rows(obj, 0.9)
    np.testing.assert_array_equal(idx, [0, 3])
    np.testing.assert_array_equal(ok, [True, True])


def test_vectorised_selection_equals_pointwise():
    agents = make_agents()
    rng = np.random.default_rng(1)
    TW = np.column_stack([np.ones(12), rng.lognormal(0, 1, size=(12, 4))])
    for delta in (None, 0.1):
        model = OneShotPFWCP(0.1, delta).calibrate(agents)
        sel = model.select(TW)
        crit_alpha = None if delta is None else 0.1
        target = 0.9
        for j in range(12):
            obj = coverage_objective(sel.betas[j][None, :], model.n_eff_, model.taus_, crit_alpha,
                                     agg_weights=model.agg_weights_)[0]
            feas = obj >= target - FEAS_TOL
            if feas.any():
                best = obj[feas].min()
                expect = np.flatnonzero(feas & (obj <= best + 1e-12))[-1]
            else:
                expect = np.flatnonzero(obj >= obj.max() - 1e-12)[0]
            assert sel.index[j] == expect and sel.feasible[j] == feas.any()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            q = model.threshold(TW)
        qb = np.array([m.quantile for m in model.messages_])
        for j in range(12):
            assert q[j] == quantile_of_quantiles(qb, model.agg_weights_, alpha=sel.tau[j])


def test_single_agent_ccc_matches_beta_tail():
    # K = 1: tau grid {0}; feasible iff P(U >= 1-alpha) >= 1-delta for U ~ Beta((1-b^1)(n+1), b^1(n+1))
    rng = np.random.default_rng(2)
    s = rng.normal(size=300)
    a = AgentCalibration(s)
    model = OneShotPFWCP(0.1, 0.1).calibrate([a], beta_breve=0.05)
    np.testing.assert_array_equal(model.taus_, [0.0])
    sel = model.select(np.ones((1, 1)))
    n = 300.0
    b1 = (1.0 + model.messages_[0].weight_above) / (n + 1.0)
    assert sel.betas[0, 0] == pytest.approx(b1)
    assert sel.value[0] == pytest.approx(stats.beta.sf(0.9, (1 - b1) * (n + 1), b1 * (n + 1)), abs=1e-9)
    assert sel.feasible[0] == (sel.value[0] >= 0.9)
    assert model.threshold(np.ones((1, 1)))[0] == weighted_quantile(s, np.ones(300), alpha=0.05)


def test_procedure1_rule_is_beta_star_and_infeasible_handling():
    agents = make_agents()
    model = OneShotPFWCP(0.1, beta_breve_rule="procedure1", on_infeasible="max").calibrate(agents)
    ch = select_quantiles([a.summary().n_eff for a in agents], 0.1)
    assert model.beta_breve_ == ch.beta and model.beta_choice_.tau == ch.tau
    # huge test weights push beta^k to ~1 for agents 1..K-1: no tau is feasible
    TW = np.column_stack([np.ones(3), np.full((3, 4), 1e9)])
    with pytest.warns(UserWarning, match="no feasible tau"):
        q = model.threshold(TW)
    np.testing.assert_array_equal(q, np.full(3, model.tau_thresholds_[0]))
    strict = OneShotPFWCP(0.1, beta_breve_rule="procedure1").calibrate(agents)     # the default: +inf, counted
    with pytest.warns(UserWarning, match="no feasible tau"):
        assert np.isinf(strict.threshold(TW)).all()
    assert strict.on_infeasible == "inf" and strict.n_infeasible_ == 3 and model.n_infeasible_ == 3


@pytest.mark.parametrize("delta", [None, 0.1])
def test_default_rule_is_cp_rank(delta):
    agents = make_agents()                                   # n_1 = 80
    model = OneShotPFWCP(0.1, delta).calibrate(agents)
    assert model.beta_breve_rule == "cp-rank" and model.beta_choice_ is None
    assert model.beta_breve_ == oneshot_level(0.1, delta, 80)
    assert model.plan([a.summary() for a in agents]) == model.beta_breve_
    # the old rule is still reproducible, and it is a different level here
    old = OneShotPFWCP(0.1, delta, beta_breve_rule="procedure1").calibrate(agents)
    assert old.beta_breve_ == select_quantiles([a.summary().n_eff for a in agents], 0.1, delta).beta != model.beta_breve_
    # the test agent's one-shot quantile is its CP threshold at the guarantee
    s0 = np.sort(agents[0]._scores)
    a = 0.1 if delta is None else ccc_alpha(0.1, delta, 80)
    assert model.messages_[0].quantile == s0[int(np.ceil((1 - a) * 81 - 1e-9)) - 1]
    # huge test weights for every other agent: still feasible at every test point (tau = 0 through agent 1 alone)
    TW = np.column_stack([np.ones(3), np.full((3, 4), 1e9)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        q = model.threshold(TW)
    assert model.select(TW).feasible.all() and np.all(q >= model.messages_[0].quantile)


def test_oneshot_level_values_and_fallback():
    "n_1 = 100 (0.09 MC, 0.05 CCC) is checked in 03_oneshot; here the CCC rank 95 and the fallbacks."
    assert stats.beta.sf(0.9, 95, 6) >= 0.9 > stats.beta.sf(0.9, 94, 7)               # 95 is the smallest CCC rank
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert oneshot_level(0.1, None, 9) == pytest.approx(1 / 10)                 # r_1 = n_1 = 9: the largest score
    with pytest.warns(UserWarning, match="cannot certify"):
        assert oneshot_level(0.1, 0.1, 20) == pytest.approx(1 / 21)                 # r_1 = 21 > n_1
    with pytest.warns(UserWarning, match="cannot certify"):
        model = OneShotPFWCP(0.1, 0.1).calibrate([AgentCalibration(np.arange(20.0)), AgentCalibration(np.arange(30.0))])
    assert model.messages_[0].quantile == 19.0


@settings(max_examples=60, deadline=None)
@given(n1=st.integers(1, 500), alpha=st.sampled_from([0.05, 0.1, 0.2]), delta=st.sampled_from([None, 0.05, 0.1]))
def test_oneshot_level_is_the_smallest_certifying_rank(n1, alpha, delta):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bb = oneshot_level(alpha, delta, n1)
    assert 0 < bb < 1
    s = np.random.default_rng(n1).normal(size=n1)
    r = int(np.sum(s <= AgentCalibration(s).oneshot_message(bb).quantile))          # rank of the test agent's quantile
    ok = (lambda r: r / (n1 + 1) >= 1 - alpha) if delta is None else \
         (lambda r: stats.beta.sf(1 - alpha, r, n1 + 1 - r) >= 1 - delta)
    if ok(n1):
        assert ok(r) and (r == 1 or not ok(r - 1))
    else:
        assert r == n1 and bb == pytest.approx(1 / (n1 + 1))


def random_federation(seed, m=30):
    rng = np.random.default_rng(seed)
    K = int(rng.integers(1, 9))
    agents = [AgentCalibration(rng.gamma(2.0, size=int(rng.integers(25, 150))))]
    for k in range(1, K):
        nk = int(rng.integers(10, 150))
        agents.append(AgentCalibration(rng.gamma(2.0, size=nk) * rng.uniform(0.5, 2.0),
                                       rng.lognormal(0, rng.uniform(0.2, 1.5), size=nk)))
    tw = rng.lognormal(0, 1.5, size=(m, K)); tw[:, 0] = 1.0; tw[:5, 1:] *= 1e4
    return agents, tw


@pytest.mark.parametrize("seed", range(12))
def test_cp_rank_no_infeasible_point_and_ccc_table_above_mc(seed):
    agents, tw = random_federation(seed)
    model = {d: OneShotPFWCP(0.1, d).calibrate(agents) for d in (None, 0.1)}
    for d, mo in model.items():
        assert mo.select(tw).feasible.all(), d
    # CCC's level is the lower one, so each agent's one-shot quantile, and the threshold at every tau, is at least MC's
    assert model[0.1].beta_breve_ < model[None].beta_breve_
    np.testing.assert_array_equal(model[0.1].taus_, model[None].taus_)
    assert np.all(model[0.1].tau_thresholds_ >= model[None].tau_thresholds_)
    # at tau = 0 (the floor of both searches) CCC >= MC; per test point the CCC search may pick a larger tau
    assert model[0.1].tau_thresholds_[0] >= model[None].tau_thresholds_[0]


def test_cp_rank_ccc_thresholds_above_mc_on_average():
    "Seeded random federations: the CCC thresholds' mean is at least the MC thresholds' mean on every draw."
    n_points_below = 0
    for seed in range(12):
        agents, tw = random_federation(seed, m=40)
        q = {d: OneShotPFWCP(0.1, d).calibrate(agents).threshold(tw) for d in (None, 0.1)}
        assert q[0.1].mean() >= q[None].mean(), seed
        n_points_below += int(np.sum(q[0.1] < q[None]))
    assert n_points_below < 0.2 * 12 * 40       # the per-point ordering is not exact, but it holds for most points


def test_singular_beta_density_is_accurate():
    # beta^k (n_eff + 1) < 1: the Beta density of agent k is singular at 1. Exact E[U] must agree with a large MC.
    n_eff = np.array([3.0, 2.0, 5.0])
    betas = np.array([[0.1, 0.05, 0.12]])                  # b(n+1) = 0.4, 0.15, 0.72
    taus = np.array([0.0, 0.3])
    ex = coverage_objective(betas, n_eff, taus)[0]
    rng = np.random.default_rng(0)
    a_, b_ = (1 - betas[0]) * (n_eff + 1), betas[0] * (n_eff + 1)
    U = rng.beta(a_, b_, size=(400_000, 3))
    w = n_eff / n_eff.sum()
    for j, t in enumerate(taus):
        V = quantile_of_quantiles(U, w, alpha=t)
        se = V.std() / np.sqrt(V.size)
        assert abs(ex[j] - V.mean()) < 4 * se + 1e-5


@pytest.mark.parametrize("n", [1.0, 3.0, 9.0, 40.0])
def test_singular_beta_density_single_agent_exact(n):
    # one agent: E[U] = 1 - beta exactly, also when beta (n + 1) < 1 (density singular at 1)
    betas = np.array([0.05, 0.2, 0.5, 0.9]) / (n + 1)
    ex = coverage_objective(betas, [n], [0.0])[:, 0]
    np.testing.assert_allclose(ex, 1 - betas, rtol=0, atol=1e-5)


def test_mc_engine_runs_and_is_reproducible():
    agents = make_agents()
    TW = np.column_stack([np.ones(4), np.full((4, 4), 0.7)])
    a = OneShotPFWCP(0.1, 0.1, engine="monte-carlo", n_rep=500, seed=5).calibrate(agents, beta_breve=0.15).select(TW)
    b = OneShotPFWCP(0.1, 0.1, engine="monte-carlo", n_rep=500, seed=5).calibrate(agents, beta_breve=0.15).select(TW)
    np.testing.assert_array_equal(a.value, b.value)


@pytest.mark.parametrize("make, match", [
    (lambda: OneShotPFWCP(alpha=1.0), "alpha"),
    (lambda: OneShotPFWCP(0.1, delta=0.0), "delta"),
    (lambda: OneShotPFWCP(0.1, engine="quick"), "engine"),
    (lambda: OneShotPFWCP(0.1, on_infeasible="zero"), "on_infeasible"),
    (lambda: OneShotPFWCP(0.1, beta_breve_rule="beta*"), "beta_breve_rule"),
    (lambda: OneShotPFWCP(0.1, grid=([0.1], [0.0])), "grid"),
    (lambda: oneshot_level(0.1, None, 0), "n1"),
    (lambda: oneshot_level(0.1, None, 12.5), "n1"),
    (lambda: oneshot_level(0.1, 1.0, 100), "delta"),
    (lambda: OneShotPFWCP(0.1).calibrate([]), "agents"),
    (lambda: OneShotPFWCP(0.1).calibrate(make_agents(), beta_breve=1.5), "beta_breve"),
    (lambda: OneShotPFWCP(0.1, agg_weights=[1.0, 2.0]).calibrate(make_agents(), beta_breve=0.2), "weights"),
    (lambda: OneShotPFWCP(0.1).select(np.ones((2, 5))), "calibrate"),
    (lambda: OneShotPFWCP(0.1).calibrate(make_agents()).threshold(np.ones((2, 4))), "test_weights"),
    (lambda: OneShotPFWCP(0.1).calibrate(make_agents()).threshold(-np.ones((2, 5))), "test_weights"),
    (lambda: oneshot_tau_grid([]), "agg_weights"),
    (lambda: oneshot_tau_grid([1.0], n_steps=0), "n_steps"),
    (lambda: local_levels([], np.ones((2, 1))), "messages"),
    (lambda: AgentCalibration([1.0, 2.0]).oneshot_message(0.0), "beta_breve"),
])
def test_bad_input(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_gaussian_shift_ccc_criterion_covers(gaussian_oracle):
    # statistical check, seeded: one-shot with the CCC criterion on the severe Gaussian shift (oracle weights);
    # its marginal coverage over 100 calibration draws must reach 1 - alpha (up to 0.01)
    sim, rng = gaussian_oracle(11, seed=0)
    cov = []
    for _ in range(100):
        agents = sim.agents(rng, 100)
        Xt = sim.draw(rng, 1000)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            q = OneShotPFWCP(0.1, 0.1).calibrate(agents).threshold(sim.weights(Xt))
        cov.append(np.mean(sim.score(Xt) <= q))
    assert np.mean(cov) >= 0.9 - 0.01


def wire(msg):
    return type(msg).from_dict(json.loads(json.dumps(msg.to_dict(), allow_nan=False)))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("delta", [None, 0.1])
@pytest.mark.parametrize("rule", ["cp-rank", "procedure1"])
def test_calibrate_from_messages_equals_agents(seed, delta, rule):
    rng = np.random.default_rng(seed)
    agents = make_agents(K=int(rng.integers(1, 7)), n=int(rng.integers(20, 90)), seed=seed)
    K = len(agents)
    tw = rng.lognormal(0, 1.5, size=(60, K)); tw[:, 0] = 1.0; tw[:5, 1:] *= 1e4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = OneShotPFWCP(0.1, delta, beta_breve_rule=rule).calibrate(agents)
        server = OneShotPFWCP(0.1, delta, beta_breve_rule=rule)
        level = server.plan([wire(a.summary()) for a in agents])
        server.calibrate([wire(a.oneshot_message(level)) for a in agents])
        np.testing.assert_array_equal(server.threshold(tw), ref.threshold(tw))
        assert server.beta_breve_ == ref.beta_breve_ == level
        assert (server.beta_choice_ is None) == (rule == "cp-rank")
        # no plan: the messages' own level, same thresholds
        bare = OneShotPFWCP(0.1, delta, beta_breve_rule=rule).calibrate(ref.messages_)
        assert bare.beta_choice_ is None
        np.testing.assert_array_equal(bare.threshold(tw), ref.threshold(tw))


def test_calibrate_from_messages_mc_engine_same_rng_path():
    agents = make_agents(K=4, seed=3)
    tw = np.random.default_rng(3).lognormal(size=(30, 4)); tw[:, 0] = 1
    ref = OneShotPFWCP(0.1, engine="monte-carlo", n_rep=300, seed=5, beta_breve_rule="procedure1").calibrate(agents)
    server = OneShotPFWCP(0.1, engine="monte-carlo", n_rep=300, seed=5, beta_breve_rule="procedure1")
    level = server.plan([a.summary() for a in agents])
    server.calibrate([a.oneshot_message(level) for a in agents])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(server.threshold(tw), ref.threshold(tw))


def test_calibrate_from_messages_bad_input():
    agents = make_agents(K=3)
    server = OneShotPFWCP(0.1)
    level = server.plan([a.summary() for a in agents])
    with pytest.raises(ValueError, match="plan\\(summaries\\)"):
        server.calibrate([a.oneshot_message(level / 2) for a in agents])
    with pytest.raises(ValueError, match="plan\\(summaries\\)"):                     # mixed levels
        OneShotPFWCP(0.1).calibrate([agents[0].oneshot_message(0.1), agents[1].oneshot_message(0.2)])
    with pytest.raises(ValueError, match="plan\\(summaries\\)"):                     # explicit level disagrees
        OneShotPFWCP(0.1).calibrate([a.oneshot_message(0.1) for a in agents], beta_breve=0.2)
    with pytest.raises(ValueError, match="AgentSummary"):
        server.plan([a.oneshot_message(0.1) for a in agents])
    with pytest.raises(ValueError, match="empty"):
        server.plan([])
