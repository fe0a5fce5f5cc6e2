"The certified lattice engine (K > MAX_EXACT_K) against the exact engine, its refinement, and large K in bounded memory."
import tracemalloc
import warnings
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from pfwcp_nb.coverage import (LatticeTail, SubsetSums, tail_bounds, coverage_bounds, coverage_objective,
                               feasibility_bounds, wqb_cdf, MAX_EXACT_K, beta_law_params, _lattice_rows)
from pfwcp_nb.tau_search import largest_feasible_tau
from pfwcp_nb.procedure import select_quantiles, paper_grid, FEAS_TOL


@settings(max_examples=30, deadline=None)
@given(K=st.integers(1, 20), seed=st.integers(0, 10**6), units=st.sampled_from([2**6, 2**10, 2**14]))
def test_bounds_contain_the_exact_value(K, seed, units):
    "Random weights (some equal, some tiny), random probabilities (some 0 or 1): lower <= exact <= upper, estimate between."
    rng = np.random.default_rng(seed)
    w = rng.lognormal(0, 1, K)
    w[rng.uniform(size=K) < 0.2] = w[0]
    w[rng.uniform(size=K) < 0.1] = 1e-6
    levels = np.unique(np.r_[1.0, rng.uniform(0.3, 1, 6), 1 - np.arange(5) / 10])
    p = rng.uniform(0, 1, (40, K))
    p[rng.uniform(size=p.shape) < 0.1] = 1.0
    p[rng.uniform(size=p.shape) < 0.05] = 0.0
    exact = SubsetSums(w, levels).prob(p)
    lo, est, hi = LatticeTail(w, levels, units).bounds(p)
    assert np.all(lo <= exact + 1e-15) and np.all(exact <= hi + 1e-15)
    assert np.all(lo <= est) and np.all(est <= hi)


def test_bounds_tighten_as_the_lattice_refines():
    rng = np.random.default_rng(1)
    for K in (12, 20, 60):
        w, levels = rng.lognormal(0, 0.5, K), 1 - np.arange(22) / 42
        p = rng.uniform(0.2, 1, (60, K))
        widths = [np.mean(np.subtract(*LatticeTail(w, levels, G).bounds(p)[::-2])) for G in (2**8, 2**11, 2**14)]
        assert widths[0] > widths[1] > widths[2] >= 0, (K, widths)


def test_equal_weights_sit_on_the_lattice():
    "K = 50 equal weights: the lattice has a multiple of 50 units, no rounding error, the bounds meet (binomial tail)."
    from scipy import stats
    p = np.full((1, 50), 0.7)
    lo, est, hi = LatticeTail(np.ones(50), [0.6, 0.9], 2**12).bounds(p)
    ref = stats.binom(50, 0.7).sf([29, 44])
    np.testing.assert_allclose(lo[0], ref, atol=1e-11)
    np.testing.assert_allclose(hi[0], ref, atol=1e-11)


def test_exact_engine_kept_up_to_max_exact_k():
    "K <= 30: coverage_bounds returns the exact engine's values (the three equal), Procedure 1 the same cells as before."
    rng = np.random.default_rng(2)
    n = rng.uniform(5, 100, MAX_EXACT_K)
    betas, taus = paper_grid(0.1)
    lo, v, hi = coverage_bounds(betas[:3], n, taus[:5], 0.1)
    np.testing.assert_array_equal(lo, hi)
    np.testing.assert_array_equal(v, coverage_objective(betas[:3], n, taus[:5], 0.1))
    ch = select_quantiles(n, 0.1, 0.1)
    assert ch.engine == "exact" and ch.upper is None and ch.width == 0.0


def test_procedure1_on_lattice_is_certified_feasible():
    "K = 60: the chosen cell's certified lower bound reaches the target; every objective lies below its upper bound."
    rng = np.random.default_rng(3)
    n = rng.uniform(20, 200, 60)
    grid = (np.linspace(0.1, 0.25, 4), np.linspace(0, 0.5, 6))
    ch = select_quantiles(n, 0.1, 0.1, grid=grid, max_units=2**14)
    assert ch.engine == "lattice" and ch.feasible and ch.value >= ch.target - FEAS_TOL
    assert np.all(ch.objective <= ch.upper) and ch.width >= 0
    lo, v, hi = coverage_bounds(grid[0], n, grid[1], 0.1, units=2**16, max_units=2**16)
    assert np.all(lo <= ch.upper + 1e-12) and np.all(ch.objective <= hi + 1e-12)   # both contain the truth
    i, j = np.searchsorted(grid[0], ch.beta), np.searchsorted(grid[1], ch.tau)
    assert hi[i, j] >= ch.target - FEAS_TOL                        # the true value is feasible by the finer bound too
    assert len(repr(ch).splitlines()) == 1


def test_largest_feasible_tau_many_agents_mc_criterion():
    "K = 40, MC criterion: the chosen tau's certified lower bound reaches the target, and no larger tau's does."
    rng = np.random.default_rng(4)
    n, taus = rng.uniform(30, 150, 40), np.linspace(0, 0.5, 6)
    b = np.clip(rng.uniform(0.05, 0.15, (3, 1)) + rng.uniform(0, 0.05, (3, 40)), 0, 1)
    i, v, ok = largest_feasible_tau(b, n, taus, 0.88, max_units=2**12)
    lo, hi, _ = feasibility_bounds(b, n, taus, None, 0.88, max_units=2**12)
    for r in range(3):
        feas = lo[r] >= 0.88
        assert ok[r] == feas.any()
        if ok[r]:
            assert i[r] == np.flatnonzero(feas).max() and v[r] == lo[r, i[r]]


def test_large_k_smoke_bounded_memory():
    "K = 1000 agents, 2000 rows: the recursion runs in row blocks, so the peak memory stays far below rows x units."
    rng = np.random.default_rng(5)
    w = rng.lognormal(0, 0.5, 1000)
    p = rng.uniform(0.85, 1.0, (2000, 1000))
    tracemalloc.start()
    lo, est, hi = _lattice_rows(w, [0.9, 0.7], p, 2**12, chunk=2**20)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert np.all((0 <= lo) & (lo <= est) & (est <= hi) & (hi <= 1))
    assert peak < 2000 * 1000 * 8 + 120e6, peak               # the p matrix itself plus ~ blocks of 2^20 floats
    with warnings.catch_warnings():
        warnings.simplefilter("error")                        # no Monte Carlo fallback warning
        ch = select_quantiles(rng.uniform(20, 200, 1000), 0.1, 0.1, grid=([0.1, 0.2], [0.0, 0.3]), max_units=2**12)
    assert ch.engine == "lattice" and ch.objective.shape == (2, 2)


def test_bad_input_above_max_exact_k():
    n = np.full(40, 50.0)
    with pytest.raises(ValueError, match="beta"):
        coverage_bounds(np.full((2, 3), 0.1), n, [0.1])
    with pytest.raises(ValueError, match="tau"):
        coverage_bounds([0.1], n, [1.0])
    with pytest.raises(ValueError, match="alpha"):
        coverage_bounds([0.1], n, [0.1], alpha=1.5)


@pytest.mark.parametrize("ccc", [True, False])
def test_same_cells_as_the_exact_engine(ccc):
    "K <= 20, lattice bounds forced: wherever they settle every cell's feasibility, Procedure 1 on the lower bounds picks"
    " the exact engine's cell (and it does settle most draws)."
    from pfwcp_nb.coverage import _lattice_expected, _beta_cdf
    from pfwcp_nb.procedure import select_cell
    rng = np.random.default_rng(7 + ccc)
    betas, taus = (paper_grid(0.1) if ccc else (np.linspace(0.1, 0.25, 4), np.linspace(0, 0.5, 6)))
    settled = 0
    for _ in range(6):
        K = int(rng.integers(6, 21))
        n = rng.uniform(5, 150, K)
        w = n / n.sum()
        a_, b_ = beta_law_params(np.repeat(betas[:, None], K, 1), n[None])
        ex = coverage_objective(betas, n, taus, 0.1 if ccc else None)
        if ccc:
            G_lo, _, G_hi = LatticeTail(w, 1 - taus, 2**16).bounds(_beta_cdf(0.9, a_, b_))
            lo, hi = 1 - G_hi, 1 - G_lo
        else:
            lo, _, hi = _lattice_expected(a_, b_, w, 1 - taus, np.inf, 2**14, 2**14)
        assert np.all(lo <= ex + 1e-12) and np.all(ex <= hi + 1e-12)
        tgt = 0.9 - FEAS_TOL
        if not np.any((lo < tgt) & (hi >= tgt)):
            settled += 1
            assert select_cell(lo, betas, taus, 0.9) == select_cell(ex, betas, taus, 0.9)
    assert settled >= 3, settled


def test_engine_by_cost_mc_criterion_between_22_and_30():
    "K = 24, MC criterion: the lattice by cost (labelled so); its bounds contain the exact engine's values and its cell is feasible under them."
    from pfwcp_nb.coverage import use_exact_engine, _expected_exact, SubsetSums, aggregation_weights
    rng = np.random.default_rng(6)
    n = rng.uniform(10, 120, 24)
    betas, taus = paper_grid(0.1)
    assert not use_exact_engine(24, taus.size) and use_exact_engine(24, taus.size, alpha=0.1) and use_exact_engine(11)
    ch = select_quantiles(n, 0.1, grid=(betas[::5], taus))
    assert ch.engine == "lattice" and ch.upper is not None and ch.feasible
    a_, b_ = beta_law_params(np.repeat(ch.grid[0][:, None], 24, 1), n[None, :])
    exact = _expected_exact(a_, b_, SubsetSums(aggregation_weights(n), 1.0 - taus))
    assert np.all(ch.objective <= exact + 1e-12) and np.all(exact <= ch.upper + 1e-12)
    i, j = np.searchsorted(ch.grid[0], ch.beta), np.searchsorted(taus, ch.tau)
    assert exact[i, j] >= ch.target - FEAS_TOL
    assert select_quantiles(n[:11], 0.1).engine == "exact" and select_quantiles(n, 0.1, 0.1).engine == "exact"


def test_settled_prefix_nodes_are_below_eta():
    "Every node of the settled prefix has P(S >= min level) <= eta by the exact law (K = 30: meet in the middle), and the prefix is not empty."
    from pfwcp_nb.coverage import _settled_prefix, _quadrature_nodes, _beta_cdf, _ETA, aggregation_weights
    rng = np.random.default_rng(7)
    n = rng.uniform(50, 100, 30)
    b = np.clip(rng.uniform(0.05, 0.25, (4, 1)) + rng.uniform(0, 0.03, (4, 30)), 0, 1)
    a_, b_ = beta_law_params(b, n[None, :])
    lo0, x, wq = _quadrature_nodes(a_, b_)
    levels = 1.0 - np.array([0.0, 0.05, 0.1])
    jstar = _settled_prefix(x, a_, b_, aggregation_weights(n), levels)
    assert np.all(jstar >= 0)
    for r in range(4):
        p = _beta_cdf(x[r, :jstar[r] + 1, None], a_[r], b_[r])
        G = SubsetSums(aggregation_weights(n), [levels.min()]).prob(p)
        assert np.all(G <= _ETA)
