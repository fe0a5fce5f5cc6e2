"Many agents: thresholds in blocks of test points, and osPFWCP above MAX_EXACT_K without Monte Carlo."
import tracemalloc
import warnings
import numpy as np
from pfwcp_nb.coverage import MAX_EXACT_K, feasibility_bounds
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration, _paper_thresholds
from pfwcp_nb.oneshot import OneShotPFWCP, local_levels
from pfwcp_nb.quantiles import quantile_of_quantiles


def _federation(K, n, m, seed=0):
    rng = np.random.default_rng(seed)
    agents = [AgentCalibration(np.round(rng.exponential(size=n), 2), None if k == 0 else rng.lognormal(0, 1, n))
              for k in range(K)]
    tw = np.column_stack([np.ones(m)] + [rng.lognormal(0, 1.5, m) for _ in range(K - 1)])
    return agents, tw


def test_blocked_thresholds_equal_the_messages_path():
    "Any block size gives the thresholds of combine(messages(.)) bit for bit (ties in the scores, infinite answers)."
    agents, tw = _federation(80, 50, 700)
    model = PFWCP(0.1, grid=([0.1, 0.2], [0.0, 0.3])).calibrate(agents)
    ref = model.combine(model.messages(tw))
    np.testing.assert_array_equal(model.threshold(tw), ref)
    for block in (1, 80, 80 * 7 + 3, 10**7):
        np.testing.assert_array_equal(
            _paper_thresholds(agents, tw, model.beta_, model.agg_weights_, model.tau_, block=block), ref)
    lo, hi = model.predict_interval(np.zeros(700), tw, score="absolute")
    np.testing.assert_array_equal(hi, ref)


def test_thresholds_bounded_memory():
    "m x K = 2,000 x 500 test weights: the blocked path allocates far less than the (m, K) table of local quantiles."
    agents, tw = _federation(500, 30, 2000, seed=1)
    model = PFWCP(0.1, 0.1, grid=([0.15], [0.2])).calibrate(agents)
    tracemalloc.start()
    q = _paper_thresholds(agents, tw, model.beta_, model.agg_weights_, model.tau_, block=2**16)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert q.shape == (2000,) and peak < 2000 * 500 * 8 / 2, peak


def test_quantile_of_quantiles_many_agents_ties():
    "Above 64 agents the default (unstable) sort: the same answers as the stable one, with ties and +inf."
    rng = np.random.default_rng(2)
    Q = np.round(rng.exponential(size=(300, 200)), 1)
    Q[Q > 2.5] = np.inf
    w = rng.lognormal(0, 0.5, 200)
    for lev in (0.3, 0.8, 1.0):
        ref = []
        for r in Q:
            o = np.argsort(r, kind="stable")
            ref.append(r[o][np.argmax(np.cumsum(w[o]) >= lev * w.sum() * (1 - 1e-12))])
        np.testing.assert_array_equal(quantile_of_quantiles(Q, w, alpha=1 - lev), ref)


def test_oneshot_above_max_exact_k_is_certified():
    "K = 36, CCC: no Monte Carlo warning; each test point's tau has a certified lower bound >= the target."
    agents, tw = _federation(MAX_EXACT_K + 6, 100, 12, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = OneShotPFWCP(0.1, 0.1).calibrate(agents)
        sel = model.select(tw)
    n_eff = np.array([a.summary().n_eff for a in agents])
    lo, hi, _ = feasibility_bounds(sel.betas, n_eff, model.taus_, 0.1, 0.9 - 1e-8, agg_weights=model.agg_weights_)
    for r in range(12):
        if sel.feasible[r]:
            assert lo[r, sel.index[r]] >= 0.9 - 1e-8 and sel.value[r] == lo[r, sel.index[r]]
            assert not np.any(lo[r, sel.index[r] + 1:] >= 0.9 - 1e-8)
    assert model.threshold(tw).shape == (12,)


def test_oneshot_mc_criterion_lattice_by_cost_is_certified():
    "K = 26, MC criterion: the lattice by cost (the exact bisection would cost more); each tau's certified lower bound reaches the target."
    from pfwcp_nb.coverage import use_exact_engine
    agents, tw = _federation(26, 100, 5, seed=4)
    model = OneShotPFWCP(0.1).calibrate(agents)
    assert not use_exact_engine(26, int(np.ceil(np.log2(model.taus_.size))) + 1)
    sel = model.select(tw)
    n_eff = np.array([a.summary().n_eff for a in agents])
    lo, hi, _ = feasibility_bounds(sel.betas, n_eff, model.taus_, None, 0.9 - 1e-8, agg_weights=model.agg_weights_)
    for r in range(5):
        if sel.feasible[r]:
            assert lo[r, sel.index[r]] >= 0.9 - 1e-8 and sel.value[r] == lo[r, sel.index[r]]
            assert not np.any(lo[r, sel.index[r] + 1:] >= 0.9 - 1e-8)
    assert sel.feasible.any()
