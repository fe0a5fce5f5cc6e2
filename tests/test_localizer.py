"Tests of pfwcp_nb.localizer: the inverse map, the Platt fit, engression training, pickles of older samplers."
import pickle

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pfwcp_nb.cache import ResultCache, RunConfig, atomic_pickle
from pfwcp_nb.data import make_federation
from pfwcp_nb.localizer import EngressionSampler, FoldedNormalSampler, Localizer, _platt_fit, fit_localizer


@settings(max_examples=40, deadline=None)
@given(a=st.floats(0.3, 3.0), b=st.floats(-1.5, 1.5), q=st.floats(0.0, 1.0), M=st.integers(2, 60))
def test_localizer_inverse_is_the_sublevel_set(a, b, q, M):
    loc = Localizer(FoldedNormalSampler(0.1, 1.0), n_samples=M, platt=(a, b))
    X = np.full((4, 1), 5.0)
    Z = loc.sorted_samples(X)
    t = loc.inverse_from_samples(Z, q)
    grid = np.sort(np.r_[np.linspace(0, 5, 501), Z.ravel() - 1e-9, Z.ravel() + 1e-9]).clip(0)
    F = loc.cdf_from_samples(Z, np.tile(grid, (4, 1)))
    assert np.array_equal(F <= q, np.tile(grid, (4, 1)) < t[:, None])


def test_localizer_cdf_monotone_and_open_unit_interval():
    loc = Localizer(FoldedNormalSampler(0.1, 0.5), n_samples=30, platt=(1.3, 0.2))
    X = np.random.default_rng(0).normal(size=(6, 10))
    s = np.tile(np.linspace(0, 3, 50), (6, 1))
    F = loc.cdf(X, s)
    assert np.all(np.diff(F, axis=1) >= 0) and np.all((F > 0) & (F < 1))
    assert np.all(np.isinf(loc.inverse(X, 1.0)))


def test_localizer_bad_input():
    with pytest.raises(ValueError, match="n_samples"):
        Localizer(FoldedNormalSampler(), n_samples=1)
    with pytest.raises(ValueError, match="slope a > 0"):
        Localizer(FoldedNormalSampler(), platt=(-1.0, 0.0))
    with pytest.raises(ValueError, match="2-D"):
        Localizer(FoldedNormalSampler()).sorted_samples(np.ones(3))


def test_platt_fit_recovers_known_map():
    rng = np.random.default_rng(0)
    G = rng.uniform(0.01, 0.99, size=40000)
    y = rng.random(G.size) < 1 / (1 + np.exp(-(1.8 * np.log(G / (1 - G)) - 0.5)))
    a, b = _platt_fit(G, y)
    assert abs(a - 1.8) < 0.06 and abs(b + 0.5) < 0.06


def test_fit_localizer_small_run():
    fed = make_federation("gaussian", "severe", K=3, seed=0)
    rng = np.random.default_rng(0)
    Xs, ss = [], []
    for k in range(3):
        X, y = fed.sample(k, 60, rng)
        Xs.append(X); ss.append(np.abs(y + 0.3 * rng.standard_normal(60) - 0.9 * X.sum(1)))
    loc = fit_localizer(Xs, ss, seed=0, epochs=30, n_samples=50, progress=False)
    assert loc.platt[0] > 0 and loc.info["n_platt"] == 18
    X0 = fed.sample(0, 5, 1)[0]
    F = loc.cdf(X0, np.tile(np.linspace(0, 2, 20), (5, 1)))
    assert np.all(np.diff(F, axis=1) >= 0)
    # same seed, same localizer output
    loc2 = fit_localizer(Xs, ss, seed=0, epochs=30, n_samples=50, progress=False)
    np.testing.assert_allclose(loc2.cdf(X0, np.ones(5)), loc.cdf(X0, np.ones(5)))


def test_fit_localizer_bad_input():
    X, s = np.random.default_rng(0).normal(size=(30, 2)), np.ones(30)
    with pytest.raises(ValueError, match="platt_frac"):
        fit_localizer(X, s, platt_frac=1.0, progress=False)
    with pytest.raises(ValueError, match="at least 20 finite"):
        fit_localizer(X[:10], s[:10], progress=False)
    with pytest.raises(ValueError, match="30 rows but `train_s` has 29"):
        fit_localizer(X, s[:29], progress=False)


def test_fit_localizer_features_map_applies_at_training_and_sampling():
    rng = np.random.default_rng(1)
    X = [rng.normal(size=(40, 6)) for _ in range(3)]
    s = [np.abs(x[:, 0] + 0.1 * rng.normal(size=40)) for x in X]
    seen = []
    class First2:                                            # records the widths it is called with
        def __call__(self, Z):
            seen.append(np.shape(Z)[1]); return np.asarray(Z)[:, :2]
    loc = fit_localizer(X, s, seed=0, epochs=3, progress=False, features=First2())
    assert seen and set(seen) == {6}                        # training saw raw covariates, mapped to 2 columns
    Z = loc.sorted_samples(rng.normal(size=(5, 6)))         # sampling takes raw covariates too
    assert Z.shape == (5, 200) and seen[-1] == 6
    with pytest.raises(Exception):                          # without the map the 2-input net rejects 6 columns
        EngressionSampler(loc.sampler.model)(rng.normal(size=(5, 6)), 10, rng)


def _old_sampler() -> EngressionSampler:
    "A sampler in the state of one pickled before `features` existed."
    smp = EngressionSampler(None)
    del smp.features
    return smp


def test_sampler_pickled_before_features_is_refused_not_skipped():
    with pytest.raises(pickle.UnpicklingError, match="older pfwcp_nb"):
        pickle.loads(pickle.dumps(_old_sampler()))
    assert pickle.loads(pickle.dumps(EngressionSampler(None, batch=9))).features is None


def test_cached_models_with_an_old_sampler_are_an_error_naming_the_schema(tmp_path):
    cache, cfg = ResultCache(tmp_path), RunConfig("gaussian")
    atomic_pickle(cache.setup_path(cfg), {"localizer": Localizer(_old_sampler())})
    with pytest.raises(ValueError, match="without a new CACHE_SCHEMA"):
        cache.load_setup(cfg)
