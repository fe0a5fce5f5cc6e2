"Procedure 1's memo never serves one engine's (or one seed's) table to another, and a choice's label says how it was computed."
import warnings
import numpy as np
import pytest
from pfwcp_nb import procedure as P
from pfwcp_nb.coverage import coverage_objective, feasibility_bounds
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration

N_EFF = np.array([100., 71.3, 55.2, 42.8, 36.1, 27.5, 19.9, 14.2, 9.6, 6.1, 3.4])   # notebook 02's eleven agents


@pytest.fixture
def fresh_memo():
    "An empty memo before and after the test (no table of another test is served)."
    P._EXACT_MEMO.clear()
    yield P._EXACT_MEMO
    P._EXACT_MEMO.clear()


def _agents(K=101, n=100, seed=0):
    "bench/bench_agents.py's federation: agent 0 unit weights, the others lognormal(0, 1) density-ratio weights."
    rng = np.random.default_rng(seed)
    return [AgentCalibration(rng.exponential(size=n), None if k == 0 else rng.lognormal(0.0, 1.0, n)) for k in range(K)]


def _same_choice(a, b):
    assert (a.beta, a.tau, a.value, a.engine, a.feasible) == (b.beta, b.tau, b.value, b.engine, b.feasible)
    np.testing.assert_array_equal(a.objective, b.objective)
    if a.upper is not None or b.upper is not None:
        np.testing.assert_array_equal(a.upper, b.upper)


@pytest.mark.slow
def test_plain_after_monte_carlo_k101(fresh_memo):
    "K = 101, CCC: a plain PFWCP after the Monte Carlo one returns the certified cell of a fresh process, labelled as such."
    agents = _agents()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fresh = PFWCP(0.1, 0.1).calibrate(agents).choice_
        fresh_memo.clear()
        mc = PFWCP(0.1, 0.1, engine="monte-carlo", n_rep=2000, seed=1).calibrate(agents).choice_
        after = PFWCP(0.1, 0.1).calibrate(agents).choice_              # Monte Carlo first, then the default
        mc_after = PFWCP(0.1, 0.1, engine="monte-carlo", n_rep=2000, seed=1).calibrate(agents).choice_  # and back
    assert fresh.engine == "lattice" and mc.engine == "monte-carlo" and mc.n_rep == 2000
    _same_choice(after, fresh)
    assert after.width > 0 and "lattice" in repr(after) and f"{after.units} units" in repr(after)
    _same_choice(mc_after, mc)                                         # same seed: the same Monte Carlo table
    assert not np.array_equal(mc.objective, fresh.objective)
    lo, _, _ = feasibility_bounds([after.beta], [a.summary().n_eff for a in agents], [after.tau], 0.1, 0.9 - P.FEAS_TOL)
    assert after.feasible and lo[0, 0] >= 0.9 - P.FEAS_TOL              # certified under the exact law


@pytest.mark.parametrize("first", ["exact", "monte-carlo"])
@pytest.mark.parametrize("delta", [None, 0.1])
def test_both_engines_both_orders(fresh_memo, first, delta):
    "Whichever engine runs first, each call returns the table it returns alone."
    grid = (np.linspace(0.1, 0.25, 6), np.arange(6) / 10)
    run = {"exact": lambda: P.select_quantiles(N_EFF, 0.1, delta, grid=grid),
           "monte-carlo": lambda: P.select_quantiles(N_EFF, 0.1, delta, grid=grid, engine="monte-carlo", n_rep=300, seed=5)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = {}
        for e in run:
            fresh_memo.clear()
            alone[e] = run[e]()
        fresh_memo.clear()
        second = "exact" if first == "monte-carlo" else "monte-carlo"
        got = {first: run[first](), second: run[second]()}
        got_again = {e: run[e]() for e in run}
    assert not np.array_equal(alone["exact"].objective, alone["monte-carlo"].objective)
    for e in run:
        assert got[e].engine == e and (got[e].n_rep is None) == (e == "exact")
        _same_choice(got[e], alone[e])
        _same_choice(got_again[e], alone[e])
    assert len(fresh_memo) == 1                                        # only the deterministic table is kept


def test_two_monte_carlo_seeds_two_tables(fresh_memo):
    "Two seeds: two tables, each the one its seed gives alone; a repeated seed repeats its table."
    grid = (np.linspace(0.1, 0.25, 5), np.arange(5) / 10)
    mc = lambda seed, n_rep=200: P.select_quantiles(N_EFF, 0.1, grid=grid, engine="monte-carlo", n_rep=n_rep, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s1, s2, s1_again, more = mc(1), mc(2), mc(1), mc(1, n_rep=400)
    assert not np.array_equal(s1.objective, s2.objective)
    np.testing.assert_array_equal(s1_again.objective, s1.objective)
    assert more.n_rep == 400 and not np.array_equal(more.objective, s1.objective)
    assert len(fresh_memo) == 0
    fresh_memo.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(mc(2).objective, s2.objective)


def test_exact_label_is_feasible_under_the_exact_law(fresh_memo):
    "Seed 3 with 100 repetitions picks a cell that is infeasible under the exact law; the exact call after it does not."
    mc = P.select_quantiles(N_EFF, 0.1, engine="monte-carlo", n_rep=100, seed=3)
    ex = P.select_quantiles(N_EFF, 0.1)
    exact_at = lambda c: coverage_objective([c.beta], N_EFF, [c.tau])[0, 0]
    assert mc.feasible and exact_at(mc) < 0.9 - P.FEAS_TOL            # the case is a real one
    assert ex.engine == "exact" and ex.n_rep is None and ex.width == 0.0
    assert ex.feasible and exact_at(ex) >= 0.9 - P.FEAS_TOL and ex.value == exact_at(ex)
    np.testing.assert_array_equal(ex.objective, coverage_objective(ex.grid[0], N_EFF, ex.grid[1]))


def test_lattice_memo_keyed_on_units_and_tolerance(fresh_memo):
    "K = 40: another finest lattice or tolerance is another table (its own entry), the same ones are served from the memo."
    rng = np.random.default_rng(4)
    n = rng.uniform(5, 60, 40)
    grid = (np.array([0.15, 0.2]), np.array([0.0, 0.2, 0.4]))
    a = P.select_quantiles(n, 0.1, 0.1, grid=grid, max_units=2**12)
    b = P.select_quantiles(n, 0.1, 0.1, grid=grid, max_units=2**14)
    c = P.select_quantiles(n, 0.1, 0.1, grid=grid, max_units=2**12, tol=1e-3)
    assert len(fresh_memo) == 3 and a.units == 2**12 and b.units >= a.units
    assert P.select_quantiles(n, 0.1, 0.1, grid=grid, max_units=2**14).objective is b.objective   # memo hit
    assert c.objective is not a.objective and "units" in repr(b)
