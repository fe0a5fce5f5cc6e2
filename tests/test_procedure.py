"Procedure 1 (`pfwcp_nb.procedure`): grid, selection rule, ties, knife edges, infeasibility, bad input."
import warnings

import numpy as np
import pytest
from scipy import integrate, stats

from pfwcp_nb.procedure import (FEAS_TOL, TIE_TOL, QuantileChoice, aggregate_level, ccc_alpha, paper_grid, select_cell,
                                select_quantiles)
from pfwcp_nb.quantiles import quantile_of_quantiles

N_EFF = np.array([100., 71.3, 55.2, 42.8, 36.1, 27.5, 19.9, 14.2, 9.6, 6.1, 3.4])


def test_paper_grid_matches_the_paper():
    for alpha in (0.05, 0.1, 0.2):
        b, t = paper_grid(alpha)
        assert b.shape == t.shape == (22,)
        np.testing.assert_allclose(b, alpha + (0.25 - alpha) / 21 * np.arange(22), rtol=0, atol=1e-15)
        np.testing.assert_allclose(t, np.arange(22) / 42, rtol=0, atol=1e-15)
        assert b[-1] == 0.25 and t[-1] == 0.5


def test_single_agent_is_split_conformal_knife_edge_and_ties():
    # K = 1: U^(tau) = U_1 for every tau, E[U] = 1 - beta exactly. The best feasible cell is beta = alpha
    # (E[U] = 1 - alpha: a knife edge), all taus tie, and the tie-break takes the largest tau, 1/2; with one agent
    # every tau gives the same threshold.
    res = select_quantiles([99.0], 0.1)
    assert res.feasible and res.beta == 0.1 and res.tau == 0.5
    Q = np.random.default_rng(0).normal(size=(50, 1))
    for t in res.grid[1]:
        np.testing.assert_array_equal(quantile_of_quantiles(Q, [1.0], alpha=t), Q[:, 0])
    b, _ = res.grid
    np.testing.assert_allclose(res.objective, np.repeat((1 - b)[:, None], 22, axis=1), atol=FEAS_TOL)


def test_single_agent_ccc_matches_beta_tail():
    alpha, delta, n = 0.1, 0.1, 150.0
    res = select_quantiles([n], alpha, delta, grid=(np.linspace(0.02, 0.25, 24), [0.0, 0.25]))
    b, _ = res.grid
    ccov = stats.beta.sf(1 - alpha, (1 - b) * (n + 1), b * (n + 1))   # P(U >= 1 - alpha), independent of tau
    feas = ccov >= 1 - delta - FEAS_TOL
    best = np.argmin(np.where(feas, ccov, np.inf))
    assert res.beta == pytest.approx(b[best]) and res.tau == 0.25          # taus tie for K = 1: the largest
    assert res.value == pytest.approx(ccov[best], abs=1e-9)


def test_equal_weights_is_fcp_qq_order_statistic():
    # equal weights 1/K, equal n: U^(tau) is the ceil(K(1-tau))-th order statistic of K iid Betas
    K, n, alpha = 5, 40.0, 0.1
    betas, taus = np.array([0.12, 0.2]), np.array([0.0, 0.3, 0.5])
    res = select_quantiles(np.full(K, n), alpha, grid=(betas, taus), agg_weights=np.full(K, 1 / K))
    for i, b in enumerate(betas):
        law = stats.beta((1 - b) * (n + 1), b * (n + 1))
        for j, t in enumerate(taus):
            r = int(np.ceil(np.round(K * (1 - t), 9)))
            surv = lambda u: stats.binom.cdf(r - 1, K, law.cdf(u))       # P(U_(r) > u)
            ev = integrate.quad(surv, 0, 1, epsabs=1e-12, limit=200)[0]
            assert res.objective[i, j] == pytest.approx(ev, abs=1e-7)


def test_choice_is_best_feasible_cell_and_grid_order_does_not_matter():
    for delta in (None, 0.1):
        res = select_quantiles(N_EFF, 0.1, delta)
        feas = res.objective >= res.target - FEAS_TOL
        assert res.feasible and res.value == res.objective[feas].min()
        b, t = res.grid
        rng = np.random.default_rng(0)
        shuffled = select_quantiles(N_EFF, 0.1, delta, grid=(rng.permutation(b), rng.permutation(t)))
        assert (shuffled.beta, shuffled.tau) == (res.beta, res.tau)


def test_ties_give_identical_thresholds():
    # homogeneous agents: many taus share the same aggregate level c(tau); the tied cells must give the same set
    K = 11
    res = select_quantiles(np.full(K, 50.0), 0.1)
    b, t = res.grid
    i = int(np.searchsorted(b, res.beta))
    tied = np.abs(res.objective - res.value) <= TIE_TOL
    assert tied.sum() > 1                                  # the situation actually occurs
    assert np.all(tied.any(axis=1) == (np.arange(b.size) == i))   # only along tau, never across beta
    taus_tied = t[tied[i]]
    assert res.tau == taus_tied.max()
    levels = aggregate_level(res.agg_weights, taus_tied)
    assert np.all(levels == levels[0])
    Q = np.random.default_rng(1).exponential(size=(2000, K))
    Q[::7, :3] = np.inf                                    # some infinite local quantiles too
    thr = [quantile_of_quantiles(Q, res.agg_weights, alpha=tt) for tt in taus_tied]
    for x in thr[1:]:
        np.testing.assert_array_equal(x, thr[0])
    # and an untied neighbour class gives a different threshold somewhere
    other = t[(aggregate_level(res.agg_weights, t) != levels[0])][0]
    assert not np.array_equal(quantile_of_quantiles(Q, res.agg_weights, alpha=other), thr[0])


def test_select_cell_rule():
    obj = np.array([[0.95, 0.92, 0.92, 0.85],
                    [0.93, 0.91, 0.91 + TIE_TOL / 10, 0.80]])
    assert select_cell(obj, [0.1, 0.2], [0.0, 0.1, 0.2, 0.3], 0.9) == (1, 2, True)
    both = np.array([[0.91, 0.95], [0.91 + TIE_TOL / 10, 0.93]])          # tie across betas
    assert select_cell(both, [0.1, 0.2], [0.0, 0.1], 0.9) == (1, 0, True)
    assert select_cell(both, [0.2, 0.1], [0.0, 0.1], 0.9) == (0, 0, True)   # the rule is on values, not positions
    assert select_cell(obj, [0.1, 0.2], [0.0, 0.1, 0.2, 0.3], 0.99) == (0, 0, False)
    assert select_cell(np.array([[0.9 - FEAS_TOL / 2]]), [0.1], [0.0], 0.9)[2]
    assert not select_cell(np.array([[0.9 - 10 * FEAS_TOL]]), [0.1], [0.0], 0.9)[2]


def test_infeasible_returns_most_conservative_with_warning():
    with pytest.warns(UserWarning, match="no grid cell"):
        res = select_quantiles([5.0, 4.0, 3.0], 0.1, 0.01)
    assert not res.feasible and res.value == res.objective.max()
    r, t = np.nonzero(res.objective >= res.value - TIE_TOL)        # among tied maxima: smallest beta, then tau
    b, tt = res.grid
    first = np.lexsort((tt[t], b[r]))[0]
    assert (res.beta, res.tau) == (b[r[first]], tt[t[first]])
    obj = np.array([[0.5, 0.5], [0.5, 0.4]])
    assert select_cell(obj, [0.1, 0.2], [0.0, 0.3], 0.9) == (0, 0, False)
    assert select_cell(obj, [0.2, 0.1], [0.3, 0.0], 0.9) == (1, 0, False)   # smallest beta first


def test_mc_engine_is_reproducible_and_close_to_exact():
    a = select_quantiles(N_EFF, 0.1, engine="monte-carlo", seed=3, grid=([0.12, 0.2], [0.0, 0.2]))
    b = select_quantiles(N_EFF, 0.1, engine="monte-carlo", seed=3, grid=([0.12, 0.2], [0.0, 0.2]))
    ex = select_quantiles(N_EFF, 0.1, grid=([0.12, 0.2], [0.0, 0.2]))
    np.testing.assert_array_equal(a.objective, b.objective)
    assert a.engine == "monte-carlo" and a.n_rep == 2000 and ex.engine == "exact" and ex.n_rep is None
    assert np.abs(a.objective - ex.objective).max() < 5 * 0.5 / np.sqrt(2000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert select_quantiles(N_EFF, 0.1, 0.1, engine="monte-carlo", seed=0, grid=([0.2], [0.0])).n_rep == 4000


def test_result_type():
    res = select_quantiles(N_EFF, 0.1)
    assert isinstance(res, QuantileChoice) and res.guarantee == "mc" and res.target == pytest.approx(0.9)
    assert res.objective.shape == (22, 22)
    np.testing.assert_allclose(res.agg_weights, N_EFF / N_EFF.sum())


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_eff=[], alpha=0.1), "n_eff"),
    (dict(n_eff=[10, np.nan], alpha=0.1), "n_eff"),
    (dict(n_eff=[10, -1], alpha=0.1), "n_eff"),
    (dict(n_eff=[10, 10], alpha=0.0), "alpha"),
    (dict(n_eff=[10, 10], alpha=1.5), "alpha"),
    (dict(n_eff=[10, 10], alpha=np.nan), "alpha"),
    (dict(n_eff=[10, 10], alpha=0.1, delta=1.0), "delta"),
    (dict(n_eff=[10, 10], alpha=0.1, grid=([0.0, 0.1], [0.0])), "grid"),
    (dict(n_eff=[10, 10], alpha=0.1, grid=([0.1], [1.0])), "grid"),
    (dict(n_eff=[10, 10], alpha=0.1, grid=([0.1], [-0.1])), "grid"),
    (dict(n_eff=[10, 10], alpha=0.1, grid=[0.1]), "grid"),
    (dict(n_eff=[10, 10], alpha=0.1, agg_weights=[1.0]), "weights"),
    (dict(n_eff=[10, 10], alpha=0.1, agg_weights=[0.0, 0.0]), "weights"),
    (dict(n_eff=[10, 10], alpha=0.1, agg_weights=[np.nan, 1.0]), "weights"),
    (dict(n_eff=[10, 10], alpha=0.1, engine="fast"), "engine"),
    (dict(n_eff=[10, 10], alpha=0.1, engine="monte-carlo", n_rep=0), "n_rep"),
    (dict(n_eff=[10, 10], alpha=1.0), "alpha"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        select_quantiles(**kwargs)

def test_exact_objective_memo_gives_the_fresh_result():
    from pfwcp_nb import procedure as P
    n = np.array([100.0, 7.5, 3.2, 12.0, 1.7])
    P._EXACT_MEMO.clear()
    fresh = P.select_quantiles(n, 0.1)
    assert len(P._EXACT_MEMO) == 1
    again = P.select_quantiles(n, 0.1)                      # served from the memo
    assert (again.beta, again.tau) == (fresh.beta, fresh.tau)
    np.testing.assert_array_equal(again.objective, fresh.objective)
    ccc = P.select_quantiles(n, 0.1, 0.1)                   # another criterion: another entry, another table
    assert len(P._EXACT_MEMO) == 2 and not np.array_equal(ccc.objective, fresh.objective)
    P._EXACT_MEMO.clear()
    np.testing.assert_array_equal(P.select_quantiles(n, 0.1).objective, fresh.objective)
    for i in range(P._EXACT_MEMO_SIZE + 5):                 # bounded
        P.select_quantiles(n + i, 0.1, 0.1)
    assert len(P._EXACT_MEMO) <= P._EXACT_MEMO_SIZE


# ---------------------------------------------------------------- CCC adjustment of split conformal (S4)
@pytest.mark.parametrize("n,alpha,delta", [(100, 0.1, 0.1), (1100, 0.1, 0.1), (9, 0.2, 0.3), (50, 0.05, 0.2)])
def test_ccc_alpha_is_the_largest_root(n, alpha, delta):
    a = ccc_alpha(alpha, delta, n)
    F = lambda x: stats.beta.cdf(1 - alpha, (1 - x) * (n + 1), x * (n + 1))
    assert 0 < a < alpha
    assert F(a) <= delta < F(a * (1 + 1e-8))


def test_ccc_alpha_grows_with_n():
    a = [ccc_alpha(0.1, 0.1, n) for n in (20, 100, 1000, 10000)]
    assert np.all(np.diff(a) > 0) and a[-1] < 0.1


def test_ccc_alpha_bad_input_and_no_qualifying_level():
    assert np.ceil((1 - ccc_alpha(0.1, 0.1, 5)) * 6 - 1e-9) == 6     # 5 points cannot certify: CP's rank is n + 1
    for kw, match in [(dict(alpha=0.0, delta=0.1, n=10), "alpha"), (dict(alpha=0.1, delta=1.0, n=10), "delta"),
                      (dict(alpha=0.1, delta=0.1, n=0), "`n`"), (dict(alpha=0.1, delta=0.1, n=np.inf), "`n`")]:
        with pytest.raises(ValueError, match=match):
            ccc_alpha(**kw)
