"The trust options of PFWCP: the band (`pfwcp.band_quantile`, `PFWCP(gamma=...)`), the test agent's leave-one-out check and the choice of gamma (`pfwcp_nb.trust`), and their wiring through the runner."
import itertools
import json
import warnings

import numpy as np
import pandas as pd
import pytest

from pfwcp_nb import grid as grid_mod, runner
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration, InfiniteThresholdWarning, band_quantile
from pfwcp_nb.quantiles import weighted_quantile
from pfwcp_nb.trust import (GAMMA_GRID, BandWarning, TrustWarning, choose_gamma, clopper_pearson, loo_target,
                            loo_thresholds, trust_check, with_gamma)
from conftest import grid_run

FAST = {"predictor": {"epochs": 30}, "ratios": {"epochs": 30}}


def federation(seed, K=6, n=40, n1=50, m=60):
    rng = np.random.default_rng(seed)
    s_own = rng.exponential(size=n1)
    others = [AgentCalibration(rng.exponential(size=n) * (1 + 0.1 * k), rng.lognormal(0, 1, n)) for k in range(1, K)]
    own_w = np.column_stack([np.ones(n1), rng.lognormal(0, 1, (n1, K - 1))])
    tw = np.column_stack([np.ones(m), rng.lognormal(0, 1, (m, K - 1))])
    return s_own, others, own_w, tw


@pytest.mark.parametrize("seed", range(6))
def test_band_quantile_is_the_maximum_over_the_box(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 8))
    v = rng.choice(np.arange(4.0), n) if seed % 2 else rng.normal(size=n)
    w, t, g = rng.lognormal(0, 1, n), rng.lognormal(0, 1, 3), float(rng.uniform(1, 3))
    got = band_quantile(v, w, alpha=0.2, gamma=g, inf_weight=t)
    brute = np.max([weighted_quantile(v, w * np.array(b[:n]), alpha=0.2, inf_weight=t * b[n])
                    for b in itertools.product([1 / g, g], repeat=n + 1)], axis=0)
    np.testing.assert_array_equal(got, brute)
    # monotone in gamma, and the band contains the weights themselves
    prev = weighted_quantile(v, w, alpha=0.2, inf_weight=t)
    for gg in (1.0, 1.2, 2.0, 5.0):
        cur = band_quantile(v, w, alpha=0.2, gamma=gg, inf_weight=t)
        assert np.all(cur >= prev)
        prev = cur


def test_band_quantile_bad_input():
    for g in (0.9, np.nan, np.inf, -1):
        with pytest.raises(ValueError, match="gamma"):
            band_quantile([1.0, 2.0], [1.0, 1.0], alpha=0.5, gamma=g)
    with pytest.raises(ValueError, match="values"):
        band_quantile([[1.0]], [1.0], alpha=0.5, gamma=2.0)
    with pytest.raises(ValueError, match="inf_weight"):
        band_quantile([1.0, 2.0], [1.0, 1.0], alpha=0.5, gamma=2.0, inf_weight=-1.0)
    with pytest.raises(ValueError, match="gamma"):
        PFWCP(gamma=0.5)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("delta", [None, 0.1])
def test_dominance_when_the_true_ratio_is_in_the_band(seed, delta):
    "With estimated weights = true weights x u, u in [1/G, G] (per agent up to a constant), the hedged threshold >= the true-ratio one at the same cell."
    rng = np.random.default_rng(seed)
    K, n, m, G = 5, 50, 80, 1.7
    scores = [rng.exponential(size=n) for _ in range(K)]
    X_cal, X_test = [rng.normal(size=n) for _ in range(K)], rng.normal(size=m)
    true = lambda k, x: np.exp(0.6 * k * x / K)
    err = lambda k, x: G ** np.sin(3 * x + k)                # a ratio error inside the band
    c = rng.lognormal(size=K)                                # and an arbitrary constant per agent
    est_agents = [AgentCalibration(scores[0])] + [AgentCalibration(scores[k], c[k] * true(k, X_cal[k]) * err(k, X_cal[k]))
                                                 for k in range(1, K)]
    true_agents = [AgentCalibration(scores[0])] + [AgentCalibration(scores[k], true(k, X_cal[k])) for k in range(1, K)]
    tw_est = np.column_stack([np.ones(m)] + [c[k] * true(k, X_test) * err(k, X_test) for k in range(1, K)])
    tw_true = np.column_stack([np.ones(m)] + [true(k, X_test) for k in range(1, K)])
    for beta, tau in itertools.product((0.1, 0.2), (0.0, 0.25, 0.45)):
        kw = dict(grid=([beta], [tau]), agg_weights=np.full(K, 1 / K))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hedged = PFWCP(0.1, delta, gamma=G, **kw).calibrate(est_agents).threshold(tw_est)
            oracle = PFWCP(0.1, delta, **kw).calibrate(true_agents).threshold(tw_true)
        assert np.all(hedged >= oracle)


def test_test_weights_column_zero_must_be_ones():
    s_own, others, own_w, tw = federation(0)
    model = PFWCP(0.1).calibrate([AgentCalibration(s_own)] + others)
    bad = tw.copy(); bad[3, 0] = 5.0
    with pytest.raises(ValueError, match="column 0"):
        model.threshold(bad)


def test_infinite_thresholds_are_counted_and_warned():
    s_own, others, own_w, tw = federation(1)
    tw[:, 1:] = 1e9                                          # the other agents answer +inf
    model = PFWCP(0.1, agg_weights=np.r_[0.1, np.full(len(others), 0.9 / len(others))]).calibrate(
        [AgentCalibration(s_own)] + others)
    with pytest.warns(InfiniteThresholdWarning, match=f"{len(tw)} of {len(tw)} thresholds are \\+inf"):
        q = model.threshold(tw)
    assert np.all(np.isinf(q)) and model.n_infinite_ == len(tw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                       # finite thresholds: no warning
        q = model.threshold(np.ones_like(tw))
    assert model.n_infinite_ == 0 and np.all(np.isfinite(q))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("select", ["paper", "finite-first", "fewest-infinite"])
def test_gamma_monotone_and_loo_counts_nested(seed, select):
    s_own, others, own_w, tw = federation(seed)
    model = PFWCP(0.1, 0.1, select=select).calibrate([AgentCalibration(s_own)] + others)
    prev_q, prev_loo = -np.inf, -np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        for g in GAMMA_GRID:
            q = with_gamma(model, g).threshold(tw)
            loo = loo_thresholds(with_gamma(model, g), s_own, own_w)
            if select == "paper":                # the select rules' cells move with gamma (their mask does)
                assert np.all(q >= prev_q) and np.all(loo >= prev_loo)
            prev_q, prev_loo = q, loo
    g, counts = choose_gamma(model, s_own, own_w)
    assert g in GAMMA_GRID and counts.size == list(GAMMA_GRID).index(g) + 1


def test_choose_gamma_warns_when_no_factor_reaches_the_target():
    rng = np.random.default_rng(4)
    s_own = rng.exponential(size=100)
    others = [AgentCalibration(rng.exponential(size=400) / 10) for _ in range(4)]
    model = PFWCP(0.1, grid=([0.25], [0.45]), agg_weights=np.r_[0.02, np.full(4, 0.245)]).calibrate(
        [AgentCalibration(s_own)] + others)
    with pytest.warns(BandWarning, match="no band factor"):
        g, counts = choose_gamma(model, s_own, np.ones((100, 5)), grid=(1.0, 2.0))
    assert g == 2.0 and counts.size == 2
    with pytest.warns(TrustWarning, match="FAILED"):
        rep = trust_check(model, s_own, np.ones((100, 5)))
    assert not rep.passed and rep.ci[1] < 0.9


def test_trust_check_bad_input():
    s_own, others, own_w, tw = federation(2)
    model = PFWCP(0.1).calibrate([AgentCalibration(s_own)] + others)
    with pytest.raises(ValueError, match="calibrated in process"):
        trust_check(PFWCP(0.1), s_own, own_w)
    with pytest.raises(ValueError, match="agent 0"):
        trust_check(model, s_own[:-1], own_w[:-1])
    with pytest.raises(ValueError, match="column 0"):
        trust_check(model, s_own, np.column_stack([2 * np.ones(len(s_own)), own_w[:, 1:]]))
    with pytest.raises(ValueError, match="confidence"):
        trust_check(model, s_own, own_w, confidence=1.5)
    with pytest.raises(ValueError, match="increasing"):
        choose_gamma(model, s_own, own_w, grid=(1.0, 1.0))


@pytest.mark.parametrize("k,n", [(0, 20), (17, 20), (20, 20), (90, 100)])
def test_clopper_pearson_covers_at_its_level(k, n):
    from scipy import stats
    lo, hi = clopper_pearson(k, n, 0.9)
    assert lo <= k / n <= hi
    if k > 0: assert stats.binom.sf(k - 1, n, lo) == pytest.approx(0.05, abs=1e-6)
    if k < n: assert stats.binom.cdf(k, n, hi) == pytest.approx(0.05, abs=1e-6)


def test_loo_target_is_the_own_cp_count():
    assert loo_target(100, 0.1) == 90 and loo_target(100, 0.1, 0.1) == 94 and loo_target(20, 0.1, 0.1) == 20


def test_check_rarely_false_alarms_with_exact_weights():
    "No shift, exact (unit) weights: the check's false-alarm share over 60 seeded federations stays near its 2.5 % tail."
    flags = 0
    for s in range(60):
        rng = np.random.default_rng(100 + s)
        s_own = rng.exponential(size=100)
        others = [AgentCalibration(rng.exponential(size=100)) for _ in range(6)]
        model = PFWCP(0.1, select="paper").calibrate([AgentCalibration(s_own)] + others)
        flags += not trust_check(model, s_own, np.ones((100, 7)), warn=False).passed
    assert flags <= 6


# ---------------------------------------------------------------- through the runner

@pytest.fixture(scope="module")
def trust_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("trust_cache")


def test_runner_options_give_their_own_cells_and_count_flags(trust_cache):
    kw = dict(n_sims=4, n_test=40, chunk_size=2, train_kw=FAST, progress=False, cache_dir=trust_cache)
    plain = grid_run(["gaussian"], ["CP", "PFWCP"], ["mc"], **kw)
    opts = grid_run(["gaussian"], ["CP", "PFWCP"], ["mc"], weights=["estimated", "oracle"],
                           method_kw=dict(select="finite-first", gamma="auto", check=True), **kw)
    cp0, cp1 = plain[plain.method == "CP"].iloc[0], opts[opts.method == "CP"].iloc[0]
    assert cp0.MC == cp1.MC and cp1.options == "{}"             # CP takes no option: the same cell
    row = opts[opts.method == "PFWCP"].iloc[0]
    assert json.loads(row.options) == {"check": True, "gamma": "auto", "select": "finite-first"}
    assert 0 <= row.n_flagged <= 4 and row.n_errors == 0
    assert "PFWCP-oracle" in set(opts.method)
    again = grid_run(["gaussian"], ["PFWCP"], ["mc"], method_kw=dict(select="paper", gamma=1.0), **kw)
    assert again.MC.iloc[0] == plain[plain.method == "PFWCP"].MC.iloc[0] and again.options.iloc[0] == "{}"


@pytest.mark.parametrize("bad,match", [(dict(select="nope"), "select"), (dict(gamma=0.5), "gamma"),
                                       (dict(gamma="big"), "gamma"), (dict(check="yes"), "check"),
                                       (dict(other=1), "unknown option")])
def test_runner_rejects_bad_method_kw(bad, match):
    with pytest.raises(ValueError, match=match):
        grid_mod.check_method_kw(bad)


@pytest.mark.parametrize("argv", [["--gamma", "0.5"], ["--gamma", "x"], ["--select", "nope"]])
def test_cli_rejects_bad_trust_options(argv, tmp_path):
    with pytest.raises(SystemExit) as e:
        runner.main(["--datasets", "gaussian", "--out", str(tmp_path)] + argv)
    assert e.value.code == 2


def test_recommend_rules_and_bad_input():
    from pfwcp_nb.pfwcp import AgentSummary
    from pfwcp_nb.trust import recommend
    S = lambda n_eff, n: AgentSummary(n_eff=float(n_eff), weight_total=float(n), n=int(n))
    assert recommend([S(8, 8)] + [S(40, 100)] * 5, 0.1).method == "PFWCP"            # MC: CP infinite below n_1 = 9
    assert recommend([S(9, 9)] + [S(40, 100)] * 5, 0.1).method == "CP"
    assert recommend([S(21, 21)] + [S(40, 100)] * 5, 0.1, 0.1).method == "PFWCP"     # CCC: CP infinite below n_1 = 22
    for n1 in (22, 100):
        r = recommend([S(n1, n1)] + [S(40, 100)] * 10, 0.1, 0.1)
        assert r.method == "CP-or-pooled" and r.options == {} and r.cp_finite
    assert recommend([S(100, 100)] + [S(10, 100)] * 5, 0.1, 0.1).method == "CP-or-pooled"   # w_1 = 2/3 too
    with pytest.raises(ValueError, match="AgentSummary"):
        recommend([S(10, 10), "agent"], 0.1)
    with pytest.raises(ValueError, match="alpha"):
        recommend([S(10, 10), S(10, 10)], 1.5)
