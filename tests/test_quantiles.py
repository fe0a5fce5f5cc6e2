"Property and bad-input tests for pfwcp_nb.quantiles (brute force against the definition)."
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, assume
from hypothesis.extra.numpy import arrays
from pfwcp_nb.quantiles import weighted_quantile, effective_sample_size, quantile_of_quantiles, WQ_TOL


def brute_quantile(v, w, level, w_inf):
    "inf{x in support : F(x) >= level}, checking every candidate value literally (with the same tolerance)."
    total = w.sum() + w_inf
    for x in np.sort(np.unique(v)):
        if w[v <= x].sum() >= level * total * (1 - WQ_TOL):
            return x
    return np.inf


small_vals = arrays(np.float64, st.integers(1, 25), elements=st.integers(-5, 5).map(float))  # many ties


@settings(max_examples=300, deadline=None)
@given(v=small_vals, data=st.data())
def test_matches_brute_force(v, data):
    n = v.size
    w = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.7]), min_size=n, max_size=n)))
    assume(w.sum() > 0)
    alpha = data.draw(st.sampled_from([0.9, 0.75, 0.5, 0.1, 0.0]) | st.floats(0.0, 0.99))
    w_inf = data.draw(st.sampled_from([0.0, 1.0]) | st.floats(0, 10))
    assert weighted_quantile(v, w, alpha=alpha, inf_weight=w_inf) == brute_quantile(v, w, 1.0 - alpha, w_inf)


@settings(max_examples=100, deadline=None)
@given(v=arrays(np.float64, st.integers(1, 30), elements=st.floats(-1e3, 1e3)), seed=st.integers(0, 10**6))
def test_monotone_in_level_and_test_weight(v, seed):
    rng = np.random.default_rng(seed)
    w = rng.exponential(size=v.size)
    levels = np.sort(rng.uniform(0.01, 1, size=8))
    q = [weighted_quantile(v, w, alpha=1 - l, inf_weight=0.5) for l in levels]
    assert all(a <= b for a, b in zip(q, q[1:]))
    tw = np.sort(rng.exponential(size=20))
    qt = weighted_quantile(v, w, alpha=0.2, inf_weight=tw)
    assert np.all(qt[1:] >= qt[:-1])               # a heavier test weight never lowers the quantile (inf >= inf)


@settings(max_examples=100, deadline=None)
@given(v=arrays(np.float64, st.integers(1, 30), elements=st.floats(-1e3, 1e3)),
       c=st.floats(1e-3, 1e3), seed=st.integers(0, 10**6))
def test_scale_invariance(v, c, seed):
    rng = np.random.default_rng(seed)
    w, tw = rng.exponential(size=v.size), rng.exponential(size=5)
    np.testing.assert_array_equal(weighted_quantile(v, w, alpha=0.1, inf_weight=tw),
                                  weighted_quantile(v, c * w, alpha=0.1, inf_weight=c * tw))


@settings(max_examples=200, deadline=None)
@given(w=arrays(np.float64, st.integers(1, 50), elements=st.floats(0, 1e6)))
def test_neff_bounds(w):
    assume(w.max() > 0)
    ne = effective_sample_size(w)
    assert 1 - 1e-9 <= ne <= (w > 0).sum() + 1e-9


def test_quantile_of_quantiles_equals_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(200):
        K = int(rng.integers(1, 12))
        Q = rng.choice([1.0, 2.0, 3.0, np.inf], size=K)
        w = rng.choice([0.0, 0.1, 0.25, 1 / 3], size=K)
        if w.sum() == 0:
            continue
        lev = float(rng.choice([1.0, 0.9, 0.5, rng.uniform(0.01, 1)]))
        assert quantile_of_quantiles(Q, w, alpha=1 - lev) == brute_quantile(Q, w, lev, 0.0)


@pytest.mark.parametrize("kwargs, match", [
    (dict(values=[1., 2.], weights=[1., np.nan], alpha=0.5), "weights.*NaN"),
    (dict(values=[1., 2.], weights=[1., -1.], alpha=0.5), "weights.*negative"),
    (dict(values=[1., 2.], weights=[0., 0.], alpha=0.5), "weights.*all zero.*inf_weight"),
    (dict(values=[1., 2.], weights=[1., 1., 1.], alpha=0.5), "weights.*length"),
    (dict(values=[], weights=[], alpha=0.5), "empty"),
    (dict(values=[1., 2.], weights=[1., 1.], alpha=1.0), "alpha"),
    (dict(values=[1., 2.], weights=[1., 1.], alpha=-0.5), "alpha"),
    (dict(values=[1., np.nan], weights=[1., 1.], alpha=0.5), "values.*NaN"),
    (dict(values=[1., 2.], weights=[1., 1.], alpha=0.5, inf_weight=-1.0), "inf_weight"),
    (dict(values=[1., 2.], weights=[1., 1.], alpha=0.5, inf_weight=np.ones((2, 2))), "inf_weight"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        weighted_quantile(**kwargs)


def test_bad_input_other_functions():
    with pytest.raises(ValueError, match="weights"):
        effective_sample_size([0.0, 0.0])
    with pytest.raises(ValueError, match="quantiles"):
        quantile_of_quantiles([1.0, np.nan], [1, 1], alpha=0.5)
    with pytest.raises(ValueError, match="length"):
        quantile_of_quantiles([1.0, 2.0], [1, 1, 1], alpha=0.5)


# ---------------------------------------------------------------- all calibration weights zero

@settings(max_examples=100, deadline=None)
@given(v=arrays(np.float64, st.integers(1, 20), elements=st.floats(-1e3, 1e3)),
       level=st.floats(1e-6, 1.0), w_inf=st.floats(5e-324, 1e6))
def test_all_zero_weights_positive_test_weight_is_a_point_mass_at_inf(v, level, w_inf):
    "All finite weights zero, a positive test weight: the measure is a point mass at +inf, the quantile +inf."
    assert weighted_quantile(v, np.zeros(v.size), alpha=1 - level, inf_weight=w_inf) == np.inf
    # the limit of vanishing calibration weights (level >= 1e-6 > their share of the mass) agrees
    assert weighted_quantile(v, np.full(v.size, 1e-300), alpha=1 - level, inf_weight=1.0) == np.inf


@settings(max_examples=100, deadline=None)
@given(v=arrays(np.float64, st.integers(1, 20), elements=st.floats(-1e3, 1e3)),
       tw=arrays(np.float64, st.integers(1, 30), elements=st.sampled_from([0.0, 1e-300, 0.5, 3.0])),
       level=st.floats(1e-6, 1.0))
def test_all_zero_weights_batched(v, tw, level):
    "Batched: all +inf when every test weight is positive; a ValueError naming both arguments as soon as one is 0."
    z = np.zeros(v.size)
    if np.all(tw > 0):
        np.testing.assert_array_equal(weighted_quantile(v, z, alpha=1 - level, inf_weight=tw), np.full(tw.size, np.inf))
    else:
        with pytest.raises(ValueError, match=r"`weights` are all zero and `inf_weight` is 0 for some test points"):
            weighted_quantile(v, z, alpha=1 - level, inf_weight=tw)
    # with one positive calibration weight the zero test weights are fine and agree with the scalar calls
    w = z.copy(); w[0] = 1.0
    q = weighted_quantile(v, w, alpha=1 - level, inf_weight=tw)
    np.testing.assert_array_equal(q, [weighted_quantile(v, w, alpha=1 - level, inf_weight=t) for t in tw])
    np.testing.assert_array_equal(q, [brute_quantile(v, w, 1.0 - (1 - level), t) for t in tw])


def test_all_zero_weights_and_zero_test_weight_is_an_error():
    for iw in (0.0, 0, np.float64(0.0)):
        with pytest.raises(ValueError, match=r"`weights` are all zero and `inf_weight` is 0"):
            weighted_quantile([1.0, 2.0], [0.0, 0.0], alpha=0.5, inf_weight=iw)
