"Tests of pfwcp_nb.methods and pfwcp_nb.baselines: every method on toy draws, hand-computed cases, statistical sanity, bad input."
import warnings

import numpy as np
import pytest
from scipy import stats

import dataclasses
import inspect

from pfwcp_nb import methods
from pfwcp_nb.methods import (CalibrationDraw, METHODS, ORACLE_METHODS, WEIGHTED_METHODS, LOCALIZED_METHODS,
                              METHOD_ORDER, MethodSpec, get_method, get_spec, register_method, run_method,
                              qq_grid, qq_choice, cp, fcp, fcp_qq, fwcp, fwcp_qq, fglcp, pfwcp, ospfwcp,
                              ospfwglcp, _check_call, _split_threshold)
from pfwcp_nb.baselines import localized_fields, oracle_fwcp_weights, fwcp_fields, toy_draw
from pfwcp_nb.data import make_federation
from pfwcp_nb.pfwcp import AgentCalibration, PFWCP
from pfwcp_nb.oneshot import OneShotPFWCP, oneshot_level
from pfwcp_nb.procedure import ccc_alpha

PAPER_NAMES = ["CP", "FCP", "FCP-QQ", "FWCP", "FWCP-QQ", "FGLCP", "PFWCP", "osPFWCP", "osPFWGLCP"]


def simple(scores, m=3, **kw):
    "A regression draw with unit weights."
    scores = [np.asarray(s, dtype=float) for s in scores]
    return CalibrationDraw("regression", scores, [np.ones(s.size) for s in scores], np.ones((m, len(scores))),
                           np.zeros(m), **kw)


def kth(values, k):
    "k-th smallest (1-based), +inf beyond the sample."
    v = np.sort(np.asarray(values, dtype=float))
    return v[k - 1] if k <= v.size else np.inf


@pytest.fixture(scope="module")
def draw():
    return toy_draw(0, m=25)


# ---------------------------------------------------------------- interface
def test_registry_has_the_paper_names():
    assert [m for m in METHODS if METHODS[m].paper] == PAPER_NAMES
    assert [m for m in METHODS if not METHODS[m].paper] == ["Recommended"]       # the preset (notebook 03c_value)
    assert set(ORACLE_METHODS) == {f"{m}-oracle" for m in WEIGHTED_METHODS}
    for name in ORACLE_METHODS:
        assert get_method(name) is METHODS[name.replace("-oracle", "")].fn


# ---------------------------------------------------------------- the registry: derived lists and records
def test_derived_lists_are_what_the_records_say():
    assert all(n == s.name for n, s in METHODS.items())
    assert WEIGHTED_METHODS == tuple(n for n in METHODS if METHODS[n].uses_weights)
    assert ORACLE_METHODS == tuple(n + "-oracle" for n in WEIGHTED_METHODS)
    assert LOCALIZED_METHODS == tuple(n for n in METHODS if METHODS[n].needs_localizer)
    assert [METHODS[n].order for n in METHOD_ORDER] == sorted(s.order for s in METHODS.values())
    assert len({s.order for s in METHODS.values()}) == len(METHODS)
    # the paper's table order (Tables 2 and 3) and the weight-using methods, written out once here
    assert METHOD_ORDER == ("CP", "FCP", "FGLCP", "FCP-QQ", "FWCP", "FWCP-QQ", "PFWCP", "osPFWCP", "osPFWGLCP", "Recommended")
    assert [m for m in METHOD_ORDER if METHODS[m].paper] == list(METHOD_ORDER[:9])
    assert WEIGHTED_METHODS == ("FWCP", "FWCP-QQ", "PFWCP", "osPFWCP", "osPFWGLCP", "Recommended")


@pytest.mark.parametrize("name", PAPER_NAMES)
def test_record_functions_are_the_module_functions_with_the_contract(name):
    fn = METHODS[name].fn
    assert getattr(methods, fn.__name__) is fn            # a renamed function breaks the record at import
    params = inspect.signature(fn).parameters
    assert list(params) == ["draw", "alpha", "delta", "engine", "seed", *METHODS[name].options]   # options: keyword-only
    assert all(params[o].kind is inspect.Parameter.KEYWORD_ONLY for o in METHODS[name].options)
    assert params["engine"].kind is inspect.Parameter.KEYWORD_ONLY and params["delta"].default is None


def _strip(d, **none):
    return dataclasses.replace(d, **{f: None for f in none})

@pytest.mark.parametrize("name", PAPER_NAMES)
def test_needs_fields_match_what_the_function_needs(draw, name):
    spec = METHODS[name]
    no_fwcp = _strip(draw, fwcp_cal_weights=1, fwcp_test_weights=1)
    no_loc = _strip(draw, loc_cal_scores=1, loc_cal_weights=1, loc_test_weights=1, loc_inverse=1)
    for d, needs, builder in ((no_fwcp, spec.needs_fwcp_classifier, "fwcp_fields"),
                              (no_loc, spec.needs_localizer, "localized_fields")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if needs:
                with pytest.raises(ValueError, match=builder):
                    spec.fn(d, 0.1)
            else:
                assert spec.fn(d, 0.1).shape == (d.m,)


@pytest.mark.parametrize("name", PAPER_NAMES)
def test_uses_weights_matches_whether_the_output_depends_on_them(draw, name):
    rng = np.random.default_rng(3)
    f = lambda w: np.asarray(w) * np.exp(rng.normal(size=np.shape(w)))      # new weights, same points
    other = dataclasses.replace(
        draw, cal_weights=[np.ones_like(draw.cal_weights[0])] + [f(w) for w in draw.cal_weights[1:]],
        test_weights=np.column_stack([np.ones(draw.m), f(draw.test_weights[:, 1:])]),
        fwcp_cal_weights=[f(w) for w in draw.fwcp_cal_weights], fwcp_test_weights=f(draw.fwcp_test_weights),
        loc_cal_weights=[np.ones_like(draw.loc_cal_weights[0])] + [f(w) for w in draw.loc_cal_weights[1:]],
        loc_test_weights=np.column_stack([np.ones(draw.m), f(draw.loc_test_weights[:, 1:])]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same = np.array_equal(run_method(draw, name, 0.1), run_method(other, name, 0.1))
    assert same != METHODS[name].uses_weights


def test_bad_records_fail_when_written():
    with pytest.raises(ValueError, match="callable"):
        MethodSpec("X", "cp", 20)
    with pytest.raises(ValueError, match="-oracle"):
        MethodSpec("X-oracle", cp, 20)
    with pytest.raises(ValueError, match="clashes"):
        register_method(MethodSpec("CP", cp, 20))
    with pytest.raises(ValueError, match="clashes"):
        register_method(MethodSpec("CP2", cp, METHODS["FCP"].order))
    with pytest.raises(ValueError, match="MethodSpec"):
        register_method({"name": "X", "fn": cp})
    assert "CP2" not in METHODS


def _half_cp(draw, alpha, delta=None, *, engine="exact", seed=0):
    "Split conformal on the first half of agent 0's calibration scores (the example of index.ipynb)."
    alpha, delta = _check_call(alpha, delta, engine)
    s = draw.cal_scores[0][: draw.n[0] // 2]
    return _split_threshold(s, np.ones_like(s), alpha, 1.0, draw.m)

@pytest.fixture
def half_cp():
    spec = register_method(MethodSpec("CP-half", _half_cp, order=len(METHODS)))
    yield spec
    del METHODS[spec.name]

def test_extending_one_record_and_one_function(half_cp, draw):
    from pfwcp_nb.grid import default_methods
    from pfwcp_nb.cache import RunConfig
    t = run_method(draw, "CP-half", 0.1)
    s = np.sort(draw.cal_scores[0][:50])
    np.testing.assert_array_equal(t, np.full(draw.m, s[int(np.ceil(0.9 * 51)) - 1]))
    assert default_methods()[-1] == "CP-half" and "CP-half" not in default_methods("oracle")
    assert "frozen-noise" not in RunConfig("gaussian").cell_key("CP-half", "mc", "estimated")
    with pytest.raises(ValueError, match="unknown method 'CP-half-oracle'"):
        get_spec("CP-half-oracle")                              # no weights: no oracle variant


@pytest.mark.parametrize("name", PAPER_NAMES)
@pytest.mark.parametrize("delta", [None, 0.1])
def test_every_method_returns_thresholds(draw, name, delta):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = run_method(draw, name, 0.1, delta)
    assert t.shape == (draw.m,)
    assert not np.any(np.isnan(t)) and np.all(t >= 0)
    if name not in WEIGHTED_METHODS:   # weighted local quantiles may be +inf for atypical test points
        assert np.all(np.isfinite(t)), "the toy draw is large enough for finite thresholds"


def test_ccc_variants_are_not_smaller_for_pooled_and_local_methods(draw):
    for name in ["CP", "FCP", "FWCP", "FGLCP"]:
        assert np.all(run_method(draw, name, 0.1, 0.1) >= run_method(draw, name, 0.1) - 1e-12), name


# ---------------------------------------------------------------- CP / FCP by hand
def test_cp_n9():
    d = simple([np.arange(1.0, 10.0)])
    np.testing.assert_array_equal(cp(d, 0.1), np.full(3, 9.0))           # ceil(0.9 * 10) = 9th of 9
    np.testing.assert_array_equal(cp(d, 0.05), np.full(3, np.inf))      # the 10th: the +inf atom
    np.testing.assert_array_equal(cp(d, 0.3), np.full(3, 7.0))          # ceil(0.7 * 10) = 7


def test_cp_ccc_by_hand():
    rng = np.random.default_rng(3)
    s = rng.exponential(size=200)
    d = simple([s])
    a = ccc_alpha(0.1, 0.1, 200)
    assert cp(d, 0.1, 0.1)[0] == kth(s, int(np.ceil((1 - a) * 201 - 1e-9)))


def test_cp_uses_only_agent0():
    d1 = simple([np.arange(1.0, 10.0), np.full(50, 100.0)])
    d2 = simple([np.arange(1.0, 10.0), np.full(50, -100.0)])
    np.testing.assert_array_equal(cp(d1, 0.1), cp(d2, 0.1))


def test_fcp_pooled_equal_weights():
    rng = np.random.default_rng(0)
    parts = [rng.normal(size=n) for n in (7, 12, 30)]
    d = simple(parts)
    pooled = np.concatenate(parts)
    N = pooled.size
    for alpha in (0.05, 0.1, 0.3):
        assert fcp(d, alpha)[0] == kth(pooled, int(np.ceil((1 - alpha) * (N + 1) - 1e-9)))
    a = ccc_alpha(0.1, 0.1, N)
    assert fcp(d, 0.1, 0.1)[0] == kth(pooled, int(np.ceil((1 - a) * (N + 1) - 1e-9)))


# ---------------------------------------------------------------- FCP-QQ
def test_qq_grid_covers_every_order_statistic():
    for K in (1, 2, 7, 11, 30):
        betas, taus = qq_grid(K)
        ts = np.ceil(K * (1 - taus) - 1e-9).astype(int)
        assert sorted(ts) == list(range(1, K + 1))
        assert betas.min() > 0 and betas.max() < 1 and np.all((taus >= 0) & (taus < 1))


def test_fcp_qq_K1_is_cp():
    s = np.random.default_rng(1).gamma(2, size=99)
    d = simple([s])
    np.testing.assert_array_equal(fcp_qq(d, 0.1), cp(d, 0.1))
    ch = qq_choice([99], 0.1, 0.1)          # K = 1: P(U >= 1-alpha) >= 1-delta  <=>  beta <= alpha*
    a_star = ccc_alpha(0.1, 0.1, 99)
    betas = qq_grid(1)[0]
    assert ch.beta == betas[betas <= a_star].max()


def test_fcp_qq_is_the_order_statistic_of_local_quantiles():
    rng = np.random.default_rng(2)
    parts = [rng.normal(loc=k, size=60) for k in range(5)]
    d = simple(parts)
    for delta in (None, 0.1):
        ch = qq_choice(d.n, 0.1, delta)
        t = int(np.ceil(5 * (1 - ch.tau) - 1e-9))
        local = [kth(p, int(np.ceil((1 - ch.beta) * 61 - 1e-9))) for p in parts]
        assert fcp_qq(d, 0.1, delta)[0] == kth(local, t)


def test_fcp_qq_choice_reaches_its_target_exactly():
    ch = qq_choice([100] * 11, 0.1)
    # E[U_(t)] of the order statistic, independently by numerical integration of 1 - P(U_(t) <= u)
    t = int(np.ceil(11 * (1 - ch.tau) - 1e-9))
    u = np.linspace(0, 1, 200001)
    Fk = stats.beta.cdf(u, (1 - ch.beta) * 101, ch.beta * 101)
    P_le = stats.binom.sf(t - 1, 11, Fk)                # P(at least t of the 11 are <= u)
    EU = np.trapezoid(1 - P_le, u)
    assert abs(EU - ch.value) < 1e-6 and EU >= 0.9 - 1e-6


def test_fcp_qq_infeasible_branch_returns_inf():
    d = simple([np.arange(10000.0), np.arange(10000.0)])
    # n = 10^4: every Beta law of the grid sits within ~0.002 of 1 - beta <= 1 - 1/400, so E[U] < 1 - 1e-4
    with pytest.warns(UserWarning, match="trivial set"):
        t = fcp_qq(d, 1e-4)
    np.testing.assert_array_equal(t, np.full(3, np.inf))


# ---------------------------------------------------------------- FWCP
def test_fwcp_constant_weights_equal_fcp():
    rng = np.random.default_rng(4)
    parts = [rng.normal(size=n) for n in (20, 30)]
    d = simple(parts, fwcp_cal_weights=[np.full(20, 2.5), np.full(30, 2.5)], fwcp_test_weights=np.full(3, 2.5))
    for delta in (None, 0.1):
        np.testing.assert_array_equal(fwcp(d, 0.1, delta), fcp(d, 0.1, delta))
        np.testing.assert_array_equal(fwcp_qq(d, 0.1, delta), fcp_qq(d, 0.1, delta))


def test_fwcp_weighted_by_hand():
    # scores 1..4 with weights 1,1,1,5 and test weight 2: total 10; F(3) = 0.3, F(4) = 0.8
    d = simple([np.array([1.0, 2.0, 3.0, 4.0])], m=2, fwcp_cal_weights=[np.array([1.0, 1.0, 1.0, 5.0])],
               fwcp_test_weights=np.array([2.0, 20.0]))
    t = fwcp(d, 0.2)                  # level 0.8: test weight 2 -> 4.0; test weight 20 (total 28) -> +inf
    np.testing.assert_array_equal(t, [4.0, np.inf])


def test_oracle_fwcp_weights_gaussian_against_densities():
    fed = make_federation("gaussian", "severe", K=4, seed=1)
    X = fed.sample(2, 9, 0)[0]
    p = np.stack([stats.multivariate_normal(fed.shift["means"][k], np.eye(10)).pdf(X) for k in range(4)])
    np.testing.assert_allclose(oracle_fwcp_weights(fed, X), p[0] / p[1:].mean(axis=0), rtol=1e-9)


def test_oracle_fwcp_weights_tilting_against_pool_probabilities(require_dataset):
    require_dataset("airfoil")
    fed = make_federation("airfoil", "severe", K=4, seed=0)
    X, _, info = fed.sample(1, 15, 0, return_info=True)
    idx = info["index"]
    p = np.stack([fed.tilting_probabilities(k)[idx] for k in range(4)])
    np.testing.assert_allclose(oracle_fwcp_weights(fed, X), p[0] / p[1:].mean(axis=0), rtol=1e-8)


def test_fglcp_with_identity_localizer_matches_the_definition():
    d = toy_draw(2, m=10)
    s = d.loc_cal_scores[0]
    q = kth(s, int(np.ceil(0.9 * (s.size + 1) - 1e-9)))
    np.testing.assert_array_equal(fglcp(d, 0.1), d.loc_inverse(np.full(d.m, q)))


# ---------------------------------------------------------------- thin wrappers
def test_wrappers_call_the_estimators(draw):
    agents = [AgentCalibration(s, w) for s, w in zip(draw.cal_scores, draw.cal_weights)]
    for delta in (None, 0.1):
        np.testing.assert_array_equal(pfwcp(draw, 0.1, delta),
                                      PFWCP(0.1, delta, seed=0).calibrate(agents).threshold(draw.test_weights))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            np.testing.assert_array_equal(
                ospfwcp(draw, 0.1, delta),
                OneShotPFWCP(0.1, delta, seed=0).calibrate(agents).threshold(draw.test_weights))


# ---------------------------------------------------------------- CCC variants vs MC variants
@pytest.mark.parametrize("delta", [None, 0.1])
@pytest.mark.parametrize("localized", [False, True])
def test_oneshot_rule_leaves_no_infeasible_test_point(delta, localized):
    "The wrappers' level (the estimator default, n_1 of the raw or localized test agent): no infeasible test point."
    d = toy_draw(0, m=60)
    sc, cw, tw = ((d.loc_cal_scores, d.loc_cal_weights, d.loc_test_weights) if localized
                  else (d.cal_scores, d.cal_weights, d.test_weights))
    ag = [AgentCalibration(s, w) for s, w in zip(sc, cw)]
    big = tw.copy(); big[:, 1:] *= 1e3
    est = OneShotPFWCP(0.1, delta).calibrate(ag)
    assert est.beta_breve_ == oneshot_level(0.1, delta, sc[0].size)
    assert est.select(tw).feasible.all() and est.select(big).feasible.all()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = OneShotPFWCP(0.1, delta, beta_breve_rule="procedure1").calibrate(ag)
        assert not old.select(big).feasible.any()                                     # the old default


@pytest.mark.parametrize("name", ["osPFWCP", "osPFWGLCP"])
def test_oneshot_ccc_covers_at_least_mc_on_toy_draws(name):
    "Averaged over seeded toy draws, the CCC variant covers at least as much as the MC variant."
    cov = {None: [], 0.1: []}
    for i in range(15):
        d = toy_draw(200 + i, m=100)
        for g in cov:
            cov[g].append(np.mean(d.test_scores <= run_method(d, name, 0.1, g)))
    assert np.mean(cov[0.1]) >= np.mean(cov[None]) + 0.01, {g: np.mean(v) for g, v in cov.items()}


@pytest.mark.parametrize("seed", [0, 5])
def test_guarantee_dependent_beta_breve_was_the_defect(seed):
    "Regression: with Procedure 1's beta* per guarantee (the former default) CCC thresholds fall below MC ones."
    d = toy_draw(seed, m=100)
    ag = [AgentCalibration(s, w) for s, w in zip(d.cal_scores, d.cal_weights)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = {g: OneShotPFWCP(0.1, g, beta_breve_rule="procedure1").calibrate(ag) for g in (None, 0.1)}
        thr = {g: e.threshold(d.test_weights) for g, e in est.items()}
    assert est[0.1].beta_breve_ > est[None].beta_breve_        # the CCC optimum of Procedure 1 has the larger beta
    assert np.any(thr[0.1] < thr[None])


def test_fwcp_qq_ccc_reads_a_low_order_statistic():
    "FWCP-QQ's CCC levels (K=11, n_k=100): higher local level, 2nd of 11 instead of the 5th; biased agents flip the order."
    mc, ccc = qq_choice(np.full(11, 100.0), 0.1), qq_choice(np.full(11, 100.0), 0.1, 0.1)
    order = lambda ch: int(np.ceil(11 * (1 - ch.tau) - 1e-9))
    assert (order(mc), order(ccc)) == (5, 2) and ccc.beta < mc.beta
    base = np.random.default_rng(3).exponential(size=100)
    def draw_(scales):
        sc = [base * a for a in scales]
        return CalibrationDraw("regression", sc, [np.ones(100)] * 11, np.ones((4, 11)), np.zeros(4),
                               fwcp_cal_weights=[np.ones(100)] * 11, fwcp_test_weights=np.ones(4))
    same, biased = draw_([1.0] * 11), draw_([1.0] * 9 + [0.1, 0.1])
    assert np.all(fwcp_qq(same, 0.1, 0.1) > fwcp_qq(same, 0.1))          # exchangeable agents: CCC is larger
    assert np.all(fwcp_qq(biased, 0.1, 0.1) < fwcp_qq(biased, 0.1))      # two agents biased low: CCC is smaller
    k = int(np.ceil((1 - ccc.beta) * 101 - 1e-9))                          # conformal rank at level 1 - beta_c
    np.testing.assert_allclose(fwcp_qq(biased, 0.1, 0.1), kth(base * 0.1, k))   # = a biased agent's local quantile


# ---------------------------------------------------------------- statistics on toy draws (oracle weights)
def test_marginal_coverage_on_toy_draws():
    names = ["CP", "FCP-QQ", "PFWCP"]
    cov = {n: [] for n in names}
    for i in range(80):
        d = toy_draw(1000 + i, m=150)
        for n in names:
            cov[n].append(np.mean(d.test_scores <= run_method(d, n, 0.1)))
    mc = {n: float(np.mean(v)) for n, v in cov.items()}
    assert mc["PFWCP"] >= 0.89, mc
    assert mc["CP"] >= 0.88, mc
    assert mc["FCP-QQ"] < 0.9 and mc["FCP-QQ"] < mc["PFWCP"] - 0.02, mc   # pooling ignores the shift


# ---------------------------------------------------------------- bad input
def test_unknown_method_lists_valid_names(draw):
    with pytest.raises(ValueError, match="valid names.*'CP'.*'osPFWGLCP'"):
        run_method(draw, "WCP", 0.1)
    with pytest.raises(ValueError, match="valid names"):
        get_method("CP-oracle")                     # CP does not use weights: no oracle variant


@pytest.mark.parametrize("delta", [0.0, 1.0, 1.5, -0.1])
def test_delta_outside_unit_interval(draw, delta):
    for name in PAPER_NAMES:
        with pytest.raises(ValueError, match="delta"):
            run_method(draw, name, 0.1, delta)


def test_alpha_and_engine_checked(draw):
    with pytest.raises(ValueError, match="alpha"):
        run_method(draw, "FCP", 0.0)
    with pytest.raises(ValueError, match="engine"):
        run_method(draw, "CP", 0.1, engine="fast")
    with pytest.raises(ValueError, match="CalibrationDraw"):
        run_method({"cal_scores": []}, "CP", 0.1)


def test_missing_fields_name_the_builder():
    d = simple([np.arange(1.0, 30.0), np.arange(2.0, 40.0)])
    for fn in (fwcp, fwcp_qq):
        with pytest.raises(ValueError, match="fwcp_fields"):
            fn(d, 0.1)
    for fn in (fglcp, ospfwglcp):
        with pytest.raises(ValueError, match="localized_fields"):
            fn(d, 0.1)


def test_calibration_draw_validation():
    with pytest.raises(ValueError, match="test_weights"):
        CalibrationDraw("regression", [np.ones(3)], [np.ones(3)], np.ones((2, 2)), np.zeros(2))
    with pytest.raises(ValueError, match="cal_weights"):
        CalibrationDraw("regression", [np.ones(3)], [np.ones(4)], np.ones((2, 1)), np.zeros(2))
    with pytest.raises(ValueError, match="task"):
        CalibrationDraw("ranking", [np.ones(3)], [np.ones(3)], np.ones((2, 1)), np.zeros(2))
    with pytest.raises(ValueError, match="test_labels"):
        CalibrationDraw("classification", [np.ones(3)], [np.ones(3)], np.ones((2, 1)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="loc_inverse"):
        CalibrationDraw("regression", [np.ones(3)], [np.ones(3)], np.ones((2, 1)), np.zeros(2),
                        loc_cal_scores=[np.ones(3) / 2], loc_cal_weights=[np.ones(3)], loc_test_weights=np.ones((2, 1)))
    with pytest.raises(ValueError, match="fwcp_test_weights"):
        CalibrationDraw("regression", [np.ones(3)], [np.ones(3)], np.ones((2, 1)), np.zeros(2),
                        fwcp_cal_weights=[np.ones(3)])


def test_classification_draw_runs():
    rng = np.random.default_rng(0)
    K, n, m, C = 3, 80, 10, 4
    d = CalibrationDraw("classification", [rng.random(n) for _ in range(K)], [np.ones(n)] + [rng.exponential(size=n) for _ in range(K - 1)],
                        np.column_stack([np.ones(m)] + [rng.exponential(size=m) for _ in range(K - 1)]),
                        rng.random((m, C)), rng.integers(0, C, m))
    for name in ["CP", "FCP", "FCP-QQ", "PFWCP"]:
        t = run_method(d, name, 0.1)
        assert t.shape == (m,)


def test_qq_levels_with_the_monte_carlo_engine():
    rng = np.random.default_rng(5)
    d = simple([rng.normal(size=60) for _ in range(3)])
    # computed once per (n_k, alpha, delta): the per-draw seed does not change FCP-QQ
    np.testing.assert_array_equal(fcp_qq(d, 0.1, engine="monte-carlo", seed=1), fcp_qq(d, 0.1, engine="monte-carlo", seed=2))
    ch_mc, ch_ex = qq_choice(d.n, 0.1, engine="monte-carlo"), qq_choice(d.n, 0.1)
    assert ch_mc.feasible and abs(ch_mc.value - ch_ex.value) < 0.01     # both just above 1 - alpha


def test_qq_choice_monte_carlo_is_never_memoised():
    "FCP-QQ's Monte Carlo levels follow the seed it is given (a memo once served one seed's table to another)."
    from pfwcp_nb.methods import qq_choice
    n = (30, 40)
    a = qq_choice(n, 0.1, engine="monte-carlo", seed=1)
    b = qq_choice(n, 0.1, engine="monte-carlo", seed=2)
    again = qq_choice(n, 0.1, engine="monte-carlo", seed=1)
    assert not np.array_equal(a.objective, b.objective)
    np.testing.assert_array_equal(a.objective, again.objective)
    rng = np.random.default_rng(5)
    first = qq_choice(n, 0.1, engine="monte-carlo", seed=rng)
    second = qq_choice(n, 0.1, engine="monte-carlo", seed=rng)          # the Generator has moved on
    assert not np.array_equal(first.objective, second.objective)
    assert qq_choice(n, 0.1) is qq_choice(n, 0.1)                  # the exact engine's table is memoised
