"Exact engine vs Monte Carlo and brute force; bad input for pfwcp_nb.coverage."
import warnings
from itertools import product
import numpy as np
import pytest
from scipy import stats
from hypothesis import given, settings, strategies as st
from pfwcp_nb.coverage import (wqb_cdf, wqb_sample, coverage_objective, beta_law_params, aggregation_weights,
                               MAX_EXACT_K)


@settings(max_examples=25, deadline=None)
@given(K=st.integers(1, 20), seed=st.integers(0, 10**6))
def test_exact_matches_monte_carlo(K, seed):
    "Exact E[U] and P(U >= 1-alpha) within 5 standard errors of 20,000 draws, for random n_eff vectors."
    rng = np.random.default_rng(seed)
    n_eff = rng.uniform(1, 120, K)
    beta, taus = rng.uniform(0.05, 0.4), np.array([0.0, rng.uniform(0, 0.5)])
    draws = wqb_sample(beta, n_eff, taus, 20000, rng=rng)
    E = coverage_objective([beta], n_eff, taus)[0]
    se = draws.std(0) / np.sqrt(len(draws)) + 1e-12
    assert np.all(np.abs(E - draws.mean(0)) <= 5 * se)
    P = coverage_objective([beta], n_eff, taus, alpha=0.1)[0]
    emp = (draws >= 0.9).mean(0)
    assert np.all(np.abs(P - emp) <= 5 * np.sqrt(emp * (1 - emp) / len(draws)) + 2e-3)


def test_cdf_brute_force_with_exact_threshold_ties():
    "Weights whose partial sums hit 1 - tau exactly (0.1-multiples) are counted as reaching the level."
    rng = np.random.default_rng(5)
    for _ in range(20):
        K = int(rng.integers(2, 9))
        w = np.full(K, 1.0 / K) if rng.uniform() < 0.5 else rng.choice([0.1, 0.2, 0.3], size=K)
        n_eff, beta = rng.uniform(2, 50, K), rng.uniform(0.05, 0.5, K)
        for tau in [0.0, 0.2, 0.5, 0.7]:
            u = rng.uniform(0.5, 1.0)
            a, b = beta_law_params(beta, n_eff)
            p = stats.beta(a, b).cdf(u)
            ws = w / w.sum()
            brute = sum(np.prod(np.where(S, p, 1 - p)) for S in map(np.array, product([0, 1], repeat=K))
                        if ws[S.astype(bool)].sum() >= (1 - tau) - 1e-9)
            assert abs(wqb_cdf([u], beta, n_eff, tau, agg_weights=w)[0] - brute) < 1e-12


def test_singular_beta_density_stays_accurate():
    "b = beta (n_eff + 1) < 1: compare with the closed form E[Beta] = a/(a+b) for one agent."
    for n_eff in [1.0, 2.0, 4.0, 7.0]:
        for beta in [0.05, 0.1, 0.2]:
            a, b = beta_law_params(beta, n_eff)
            assert b < 1.8
            E = coverage_objective([beta], [n_eff], [0.0])[0, 0]
            assert abs(E - a / (a + b)) < 1e-7


def test_equal_weights_order_statistic_mean():
    "Equal weights, iid agents: E of the k-th order statistic by direct integration of the binomial tail."
    K, n, beta = 9, 40.0, 0.15
    a, b = beta_law_params(beta, n)
    for tau in [0.0, 0.3, 0.6]:
        k = int(np.ceil(K * (1 - tau)))
        u = np.linspace(0, 1, 200001)
        sf = stats.binom(K, stats.beta(a, b).cdf(u)).cdf(k - 1)      # P(k-th order stat > u)
        ref = np.trapezoid(sf, u)
        assert abs(coverage_objective([beta], np.full(K, n), [tau])[0, 0] - ref) < 1e-6


def test_mc_engine_is_seeded():
    n_eff = np.array([50., 20., 5.])
    A = coverage_objective([0.1, 0.2], n_eff, [0.0, 0.3], engine="monte-carlo", n_rep=500, rng=1)
    B = coverage_objective([0.1, 0.2], n_eff, [0.0, 0.3], engine="monte-carlo", n_rep=500, rng=1)
    np.testing.assert_array_equal(A, B)


def test_wqb_cdf_above_max_exact_k_is_bounded():
    "No refusal and no Monte Carlo above MAX_EXACT_K: the lattice estimate lies within certified bounds."
    n = np.random.default_rng(0).uniform(20, 80, MAX_EXACT_K + 5)
    lo, hi = wqb_cdf([0.85, 0.9], 0.1, n, [0.0, 0.2], bounds=True)
    v = wqb_cdf([0.85, 0.9], 0.1, n, [0.0, 0.2])
    assert v.shape == (2, 2) and np.all(lo <= v) and np.all(v <= hi) and np.all(hi - lo < 0.05)


@pytest.mark.parametrize("call, match", [
    (lambda: coverage_objective([0.1], [], [0.1]), "n_eff"),                 # K = 0
    (lambda: coverage_objective([0.1], [10, -1], [0.1]), "n_eff"),
    (lambda: coverage_objective([0.1], [10, np.nan], [0.1]), "n_eff"),
    (lambda: coverage_objective([1.5], [10, 10], [0.1]), "beta"),
    (lambda: coverage_objective([0.1], [10, 10], [1.0]), "tau"),
    (lambda: coverage_objective([0.1], [10, 10], [-0.1]), "tau"),
    (lambda: coverage_objective([0.1], [10, 10], [0.1], alpha=1.0), "alpha"),
    (lambda: coverage_objective([0.1], [10, 10], [0.1], alpha=0.0), "alpha"),
    (lambda: coverage_objective(np.ones((2, 3)) * 0.1, [10, 10], [0.1]), "beta"),
    (lambda: coverage_objective([0.1], [10, 10], [0.1], agg_weights=[1, 1, 1]), "weights"),
    (lambda: coverage_objective([0.1], [10, 10], [0.1], agg_weights=[0, 0]), "weights"),
    (lambda: coverage_objective([0.1], [10, 10], [0.1], engine="magic"), "engine"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@settings(max_examples=15, deadline=None)
@given(K=st.integers(1, 12), seed=st.integers(0, 10**6), ccc=st.booleans())
def test_largest_feasible_tau_equals_full_scan(K, seed, ccc):
    "The bisection returns the largest feasible tau of the grid (index 0 / infeasible when none), as a full scan."
    from pfwcp_nb.tau_search import largest_feasible_tau
    rng = np.random.default_rng(seed)
    n_eff = rng.uniform(1, 100, K)
    beta = np.clip(rng.uniform(0.02, 0.35, (40, K)), 0, 1)
    taus = np.unique(np.r_[0.0, np.sort(rng.uniform(0, 0.9, 20))])
    alpha = 0.1 if ccc else None
    target = rng.uniform(0.5, 0.95) - 1e-8
    full = coverage_objective(beta, n_eff, taus, alpha)
    feas = full >= target
    scan = np.where(feas.any(1), taus.size - 1 - np.argmax(feas[:, ::-1], axis=1), 0)
    idx, val, ok = largest_feasible_tau(beta, n_eff, taus, target, alpha, chunk_rows=16)
    np.testing.assert_array_equal(idx, scan)
    np.testing.assert_array_equal(ok, feas.any(1))
    # CCC: exact value; MC: the coarse search value where it was decisive (within the margin of the default nodes)
    np.testing.assert_allclose(val, full[np.arange(len(idx)), idx], atol=1e-12 if ccc else 2e-4)
    if not ccc:                                  # and the same search on the default nodes only
        i2, v2, ok2 = largest_feasible_tau(beta, n_eff, taus, target, alpha, chunk_rows=16, margin=None)
        np.testing.assert_array_equal(i2, idx); np.testing.assert_array_equal(ok2, ok)
        np.testing.assert_allclose(v2, full[np.arange(len(idx)), idx], atol=1e-12)


@pytest.mark.parametrize("K", [1, 2, 5, 11, 14])
def test_coarse_search_nodes_error_well_below_margin(K):
    "The one-shot search keeps a coarse answer only >= margin away from the target: the coarse error must stay below it."
    from pfwcp_nb import coverage as C, tau_search as S
    rng = np.random.default_rng(K)
    worst = 0.0
    for _ in range(6):
        n = rng.uniform(1, 100, K)
        b = np.clip(rng.uniform(0.0, 0.5, (100, K)) ** rng.uniform(0.5, 3), 0, 0.99)
        taus = np.linspace(0, 0.8, 41)
        sums = C.SubsetSums(C.aggregation_weights(n), 1 - taus)
        a_, b_ = C.beta_law_params(b, n[None, :])
        fine, coarse = S._expected_rows(a_, b_, sums, False), S._expected_rows(a_, b_, sums, True)
        for L in range(0, 41, 8):
            lv = np.full(100, L)
            worst = max(worst, np.abs(fine(lv) - coarse(lv)).max())
    assert worst < 2e-4 / 2, worst


def test_largest_feasible_tau_bad_input():
    from pfwcp_nb.tau_search import largest_feasible_tau
    with pytest.raises(ValueError, match="margin"):
        largest_feasible_tau(np.full((2, 3), 0.1), [10, 10, 10], [0.1, 0.2], 0.9, margin=0.0)
    with pytest.raises(ValueError, match="increasing"):
        largest_feasible_tau(np.full((2, 3), 0.1), [10, 10, 10], [0.2, 0.1], 0.9)
    with pytest.raises(ValueError, match="beta"):
        largest_feasible_tau(np.full((2, 4), 0.1), [10, 10, 10], [0.1, 0.2], 0.9)


# --- the certified one-shot search against the search of commit 5c99045 (frozen below, verbatim) ---

def _search_5c99045(beta, n_eff, tau, target, *, weights=None, chunk_rows=64, margin=2e-4):
    "`largest_feasible_tau` of commit 5c99045, MC criterion (its helpers are unchanged in pfwcp_nb.tau_search)."
    from pfwcp_nb.coverage import SubsetSums, _agg_weights
    from pfwcp_nb.tau_search import _bisect_rows, _expected_rows
    n, b, t = np.asarray(n_eff, float), np.asarray(beta, float), np.asarray(tau, float)
    sums = SubsetSums(_agg_weights(weights, n), 1.0 - t)
    R, T = b.shape[0], t.size
    idx, val, ok = np.zeros(R, int), np.empty(R), np.zeros(R, bool)
    for r0 in range(0, R, chunk_rows):
        a_, b_ = beta_law_params(b[r0:r0 + chunk_rows], n[None, :])
        nr = a_.shape[0]
        if margin is None:
            lo_i, lo_v, v0 = _bisect_rows(_expected_rows(a_, b_, sums, False), nr, T, target)
        else:
            obj = _expected_rows(a_, b_, sums, True)
            lo_i, lo_v, v0 = _bisect_rows(obj, nr, T, target)
            nxt = obj(np.minimum(lo_i + 1, T - 1))
            sure = np.where(v0 >= target,
                            (lo_v >= target + margin) & ((lo_i + 1 >= T) | (nxt < target - margin)),
                            v0 < target - margin)
            redo = np.flatnonzero(~sure)
            if redo.size:
                fi, fv, f0 = _bisect_rows(_expected_rows(a_[redo], b_[redo], sums, False), redo.size, T, target)
                lo_i[redo], lo_v[redo], v0[redo] = fi, fv, f0
        feas = v0 >= target
        sl = slice(r0, r0 + nr)
        idx[sl], val[sl], ok[sl] = np.where(feas, lo_i, 0), np.where(feas, lo_v, v0), feas
    return idx, val, ok


def _levels(rng, R, K, kind):
    "Per-agent levels: 'random', 'extreme' (tiny / huge test weights: beta near its floor or near 1, point masses)."
    base = rng.uniform(0.02, 0.35, (R, 1)) + rng.uniform(0, 0.45, (R, K)) ** 3
    if kind == "extreme":
        pick = rng.uniform(size=(R, K))
        base = np.where(pick < 0.1, rng.uniform(1e-12, 1e-6, (R, K)), base)          # tiny omega: beta ~ floor
        base = np.where(pick > 0.9, 1 - 10.0 ** -rng.uniform(1, 12, (R, K)), base)   # huge omega: beta -> 1
        base[0, 0], base[1, -1] = 0.0, 1.0                                             # point masses
    return np.clip(base, 0, 1)


def _assert_same_search(beta, n_eff, taus, target, **kw):
    from pfwcp_nb.tau_search import largest_feasible_tau
    i_old, v_old, ok_old = _search_5c99045(beta, n_eff, taus, target, **kw)      # 5c99045 called them `weights`
    kw = {("agg_weights" if k == "weights" else k): v for k, v in kw.items()}
    i_new, v_new, ok_new = largest_feasible_tau(beta, n_eff, taus, target, **kw)
    np.testing.assert_array_equal(i_new, i_old)
    np.testing.assert_array_equal(ok_new, ok_old)
    np.testing.assert_allclose(v_new, v_old, rtol=0, atol=1e-6)
    return ok_old


@settings(max_examples=12, deadline=None)
@given(K=st.sampled_from([1, 2, 3, 5, 8, 11]), seed=st.integers(0, 10**6), kind=st.sampled_from(["random", "extreme"]),
       coarse=st.booleans())
def test_certified_search_equals_5c99045(K, seed, kind, coarse):
    "Same tau index and feasibility as the search of 5c99045 for every row (random and extreme levels, K = 1..11)."
    rng = np.random.default_rng(seed)
    n_eff = rng.uniform(1, 120, K)
    n_eff[: K // 3] = rng.uniform(0.3, 4, K // 3)                       # b = beta (n_eff + 1) < 1: singular densities
    beta = _levels(rng, 48, K, kind)
    taus = np.unique(np.r_[0.0, np.sort(rng.uniform(0, 0.9, 25))])
    w = rng.uniform(0.1, 1, K) if rng.uniform() < 0.5 else None
    _assert_same_search(beta, n_eff, taus, rng.uniform(0.6, 0.95) - 1e-8, weights=w, chunk_rows=16,
                        margin=2e-4 if coarse else None)


def test_certified_search_paper_like_and_infeasible_rows(gaussian_oracle):
    "K = 11 with the severe Gaussian shift's levels (n_k = 100, oracle weights), plus rows no tau makes feasible."
    K, n = 11, 100
    sim, rng = gaussian_oracle(K, seed=3)
    ow = sim.weights
    W = [np.ones(n)] + [ow(sim.draw(rng, n, k))[:, k] for k in range(1, K)]
    n_eff = np.array([w.sum() ** 2 / (w ** 2).sum() for w in W])
    TW = ow(sim.draw(rng, 150))
    wbar = np.array([w.sum() for w in W]); wmax = np.array([w.max() for w in W])
    beta = np.clip((TW + 0.1 * wmax) / (wbar + TW), 0, 0.999)              # beta^k(X) shape: floor, -> 1 for huge omega
    beta[:20] = np.clip(beta[:20] + 0.4, 0, 0.999)                          # infeasible rows
    ok = _assert_same_search(beta, n_eff, np.linspace(0, 0.65, 51), 0.9 - 1e-8)
    assert 0 < ok.mean() < 1


def test_certified_search_ties_at_the_target_fall_back():
    "A target equal to the reference objective at some tau (the hardest case) still gives the reference's answer."
    from pfwcp_nb.coverage import SubsetSums, aggregation_weights
    from pfwcp_nb.tau_search import _expected_rows
    rng = np.random.default_rng(9)
    K, taus = 5, np.linspace(0, 0.8, 21)
    n_eff = rng.uniform(5, 80, K)
    beta = _levels(rng, 6, K, "random")
    sums = SubsetSums(aggregation_weights(n_eff), 1 - taus)
    for coarse, margin in ((True, 2e-4), (False, None)):
        a_, b_ = beta_law_params(beta, n_eff[None, :])
        q = _expected_rows(a_, b_, sums, coarse)(np.full(6, 7))
        for target in (q[0], q[1] + 2e-4, q[2] - 2e-4):                    # at the value and at target -/+ margin
            _assert_same_search(beta, n_eff, taus, target, margin=margin)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_certified_beta_cdf_bound_holds(seed):
    "The series CDF is within its certified bound of scipy's betainc, tails and singular densities included."
    from scipy import special
    from pfwcp_nb.tau_search import _beta_cdf_certified
    rng = np.random.default_rng(seed)
    R, K = 6, 5
    a_, b_ = beta_law_params(rng.uniform(1e-4, 0.95, (R, K)), 10.0 ** rng.uniform(-0.5, 3, (R, K)))
    x = np.sort(np.concatenate([rng.uniform(0, 1, (R, 40)), 10.0 ** -rng.uniform(0, 17, (R, 8)),
                                1 - 10.0 ** -rng.uniform(0, 17, (R, 8))], axis=1), axis=1)
    F, err, (fr, fk, ferr) = _beta_cdf_certified(x, a_, b_)
    err = np.broadcast_to(err[..., None], F.shape).copy()
    err[fr, fk] = ferr                                                   # node-by-node bounds where they were taken
    ref = special.betainc(a_[..., None], b_[..., None], x[:, None, :])
    assert np.all(np.abs(F - ref) <= err)


@pytest.mark.parametrize("K, rows", [(15, "random"), (4, "point masses"), (3, "none")])
def test_certified_search_reference_only_cases(K, rows):
    "K above the certified search's cap, only point-mass rows, and no rows at all: the reference's answer."
    rng = np.random.default_rng(K)
    n_eff = rng.uniform(2, 60, K)
    beta = {"random": _levels(rng, 12, K, "random"), "point masses": rng.choice([0.0, 1.0], (5, K)),
            "none": np.zeros((0, K))}[rows]
    _assert_same_search(beta, n_eff, np.linspace(0, 0.7, 15), 0.8 - 1e-8)
