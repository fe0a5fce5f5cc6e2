"Where Q_{beta,tau}(x) is +inf from the weights alone, and the cell selection rules (`pfwcp_nb.procedure`)."
import numpy as np
import pytest

from pfwcp_nb.procedure import (FEAS_TOL, SELECT_RULES, choose_cells, feasible_ranking, infinite_cells, paper_grid,
                                select_cell, select_quantiles)
from pfwcp_nb.quantiles import effective_sample_size, quantile_of_quantiles, weighted_quantile


def random_federation(seed, K=6, n=40, m=200, spread=1.5):
    rng = np.random.default_rng(seed)
    S = [rng.exponential(size=n) for _ in range(K)]
    W = [np.ones(n)] + [rng.lognormal(0, 1, n) for _ in range(K - 1)]
    TW = np.column_stack([np.ones(m), rng.lognormal(2.0, spread, (m, K - 1))])
    w = rng.uniform(0.5, 2.0, K)
    return S, W, TW, w / w.sum()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mask_equals_the_computed_thresholds(seed):
    S, W, TW, w = random_federation(seed)
    betas, taus = paper_grid(0.1)
    inf = infinite_cells([x.sum() for x in W], TW, w, betas, taus)
    assert inf.shape == (TW.shape[0], 22, 22) and 0 < inf.mean() < 1
    for r in range(22):
        Q = np.column_stack([weighted_quantile(s, x, alpha=betas[r], inf_weight=TW[:, k])
                             for k, (s, x) in enumerate(zip(S, W))])
        for t in range(22):
            np.testing.assert_array_equal(inf[:, r, t], np.isinf(quantile_of_quantiles(Q, w, alpha=taus[t])))


def test_mask_is_monotone_in_beta_tau_and_test_weight():
    S, W, TW, w = random_federation(3)
    betas, taus = paper_grid(0.1)
    inf = infinite_cells([x.sum() for x in W], TW, w, betas, taus)
    assert np.all(inf[:, 1:, :] <= inf[:, :-1, :]) and np.all(inf[:, :, 1:] <= inf[:, :, :-1])
    inf2 = infinite_cells([x.sum() for x in W], TW * np.r_[1.0, np.full(TW.shape[1] - 1, 2.0)], w, betas, taus)
    assert np.all(inf2 >= inf)


def test_feasible_ranking_starts_with_procedure_1_and_lists_every_feasible_cell():
    ch = select_quantiles([100, 40, 20, 10, 5.0], 0.1)
    rank = feasible_ranking(ch.objective, *ch.grid, ch.target)
    r0, t0, _ = select_cell(ch.objective, *ch.grid, ch.target)
    assert rank[0] == r0 * 22 + t0
    feas = np.flatnonzero((ch.objective >= ch.target - FEAS_TOL).ravel())
    np.testing.assert_array_equal(np.sort(rank), feas)
    assert np.all(np.diff(ch.objective.ravel()[rank[1:]]) >= 0)
    with pytest.warns(UserWarning):
        bad = select_quantiles([5.0, 4.0, 3.0], 0.1, 0.01)
    assert feasible_ranking(bad.objective, *bad.grid, bad.target).size == 0


@pytest.mark.parametrize("seed", [0, 4])
def test_rules(seed):
    S, W, TW, w = random_federation(seed)
    ch = select_quantiles([effective_sample_size(x) for x in W], 0.1, agg_weights=w)
    inf = infinite_cells([x.sum() for x in W], TW, w, *ch.grid)
    m = TW.shape[0]
    feas = (ch.objective >= ch.target - FEAS_TOL).ravel()
    rp, tp = choose_cells(ch, inf, "paper")
    assert np.all(ch.grid[0][rp] == ch.beta) and np.all(ch.grid[1][tp] == ch.tau)
    rf, tf = choose_cells(ch, inf, "finite-first")
    i_p, i_f = inf[np.arange(m), rp, tp], inf[np.arange(m), rf, tf]
    assert np.all(feas[rf * 22 + tf])
    np.testing.assert_array_equal(i_f, inf.reshape(m, -1)[:, feas].all(axis=1))  # infinite only if every feasible cell is
    assert np.all((rf == rp)[~i_p]) and np.all((tf == tp)[~i_p])                # the paper's cell where it is finite
    assert np.any(i_p & ~i_f)                                                    # the case the rule is for
    rb, tb = choose_cells(ch, inf, "fewest-infinite")
    assert len(set(zip(rb, tb))) == 1 and feas[rb[0] * 22 + tb[0]]
    share = inf.reshape(m, -1)[:, feas].mean(axis=0)
    assert inf[:, rb[0], tb[0]].mean() == share.min()


@pytest.mark.parametrize("call, match", [
    (lambda ch, inf: choose_cells(ch, inf, "Paper"), "select"),
    (lambda ch, inf: choose_cells(ch, inf, None), "select"),
    (lambda ch, inf: choose_cells(ch, inf[:, :3], "finite-first"), "infinite"),
    (lambda ch, inf: infinite_cells([1.0, 0.0], np.ones((2, 2)), [1, 1], [0.1], [0.0]), "weight_totals"),
    (lambda ch, inf: infinite_cells([1.0, 1.0], np.ones((2, 3)), [1, 1], [0.1], [0.0]), "test_weights"),
    (lambda ch, inf: infinite_cells([1.0, 1.0], -np.ones((2, 2)), [1, 1], [0.1], [0.0]), "test_weights"),
    (lambda ch, inf: infinite_cells([1.0, 1.0], np.ones((2, 2)), [1], [0.1], [0.0]), "weights"),
    (lambda ch, inf: infinite_cells([1.0, 1.0], np.ones((2, 2)), [1, 1], [1.0], [0.0]), "betas"),
])
def test_bad_input(call, match):
    S, W, TW, w = random_federation(0, m=5)
    ch = select_quantiles([effective_sample_size(x) for x in W], 0.1, agg_weights=w)
    inf = infinite_cells([x.sum() for x in W], TW, w, *ch.grid)
    with pytest.raises(ValueError, match=match):
        call(ch, inf)


def test_rule_names():
    assert SELECT_RULES[0] == "paper" and set(SELECT_RULES) == {"paper", "finite-first", "fewest-infinite"}
