"PFWCP(select=...): the paper's rule is the default and unchanged; finite-first / fewest-infinite (`pfwcp_nb.pfwcp`)."
import warnings

import numpy as np
import pytest

from pfwcp_nb.pfwcp import PFWCP, AgentCalibration, AgentSummary, aggregate
from pfwcp_nb.procedure import FEAS_TOL, infinite_cells


def federation(seed, K=8, n=60, m=300, spread=1.5):
    rng = np.random.default_rng(seed)
    agents = [AgentCalibration(rng.exponential(size=n))] + \
             [AgentCalibration(rng.exponential(size=n), rng.lognormal(0, 1, n)) for _ in range(K - 1)]
    TW = np.column_stack([np.ones(m), rng.lognormal(2.5, spread, (m, K - 1))])
    return agents, TW


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("delta", [None, 0.1])
def test_default_is_the_paper_bit_for_bit(seed, delta):
    agents, TW = federation(seed)
    model = PFWCP(0.1, delta).calibrate(agents)
    assert model.select == "paper"
    ref = aggregate([a.message(model.choice_.beta, TW[:, k]) for k, a in enumerate(agents)],
                    model.choice_.agg_weights, model.choice_.tau)
    np.testing.assert_array_equal(model.threshold(TW), ref)
    np.testing.assert_array_equal(PFWCP(0.1, delta, select="paper").calibrate(agents).threshold(TW), ref)
    beta, tau = model.cells(TW)
    assert np.all(beta == model.beta_) and np.all(tau == model.tau_)


@pytest.mark.parametrize("delta", [None, 0.1])
def test_finite_first_is_deterministic_and_finite_where_a_feasible_cell_is(delta):
    agents, TW = federation(11)
    paper = PFWCP(0.1, delta).calibrate(agents).threshold(TW)
    model = PFWCP(0.1, delta, select="finite-first").calibrate(agents)
    q = model.threshold(TW)
    np.testing.assert_array_equal(q, PFWCP(0.1, delta, select="finite-first").calibrate(agents).threshold(TW))
    assert np.any(np.isinf(paper) & np.isfinite(q))            # the seeded case: paper +inf, a finite feasible cell
    np.testing.assert_array_equal(q[np.isfinite(paper)], paper[np.isfinite(paper)])
    ch = model.choice_
    inf = infinite_cells([a.summary().weight_total for a in agents], TW, ch.agg_weights, *ch.grid)
    feas = (ch.objective >= ch.target - FEAS_TOL).ravel()
    some_finite = ~inf.reshape(len(TW), -1)[:, feas].all(axis=1)
    np.testing.assert_array_equal(np.isfinite(q), some_finite)
    beta, tau = model.cells(TW)                                # the levels used are feasible cells of the grid
    r, t = np.searchsorted(ch.grid[0], beta), np.searchsorted(ch.grid[1], tau)
    assert np.all(feas[r * ch.grid[1].size + t])


def test_no_finite_feasible_cell_gives_the_paper_threshold():
    agents, TW = federation(12, m=20)
    TW[:, 1:] = 1e9                                            # every agent but the test agent answers +inf
    for rule in ("finite-first", "fewest-infinite"):
        q = PFWCP(0.1, select=rule).calibrate(agents).threshold(TW)
        np.testing.assert_array_equal(q, PFWCP(0.1).calibrate(agents).threshold(TW))
        assert np.all(np.isinf(q))


def test_no_feasible_cell_gives_the_paper_threshold():
    rng = np.random.default_rng(13)
    agents = [AgentCalibration(rng.exponential(size=5))] + \
             [AgentCalibration(rng.exponential(size=5), rng.lognormal(0, 1, 5)) for _ in range(2)]
    TW = np.column_stack([np.ones(30), rng.lognormal(0.0, 1.0, (30, 2))])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        paper = PFWCP(0.1, 0.01).calibrate(agents)
        assert not paper.choice_.feasible
        for rule in ("finite-first", "fewest-infinite"):
            np.testing.assert_array_equal(PFWCP(0.1, 0.01, select=rule).calibrate(agents).threshold(TW),
                                          paper.threshold(TW))


def test_fewest_infinite_uses_one_cell_and_no_more_infinite_than_the_paper():
    agents, TW = federation(14)
    paper = PFWCP(0.1).calibrate(agents).threshold(TW)
    model = PFWCP(0.1, select="fewest-infinite").calibrate(agents)
    q = model.threshold(TW)
    beta, tau = model.cells(TW)
    assert np.unique(beta).size == 1 and np.unique(tau).size == 1
    assert np.isinf(q).mean() <= np.isinf(paper).mean()
    ff = PFWCP(0.1, select="finite-first").calibrate(agents).threshold(TW)
    assert np.isinf(ff).mean() <= np.isinf(q).mean()


def test_server_side_cells_from_summaries():
    agents, TW = federation(15, m=50)
    local = PFWCP(0.1, select="finite-first").calibrate(agents)
    server = PFWCP(0.1, select="finite-first").calibrate(
        [AgentSummary.from_dict(a.summary().to_dict()) for a in agents])
    for x, y in zip(server.cells(TW), local.cells(TW)):
        np.testing.assert_array_equal(x, y)
    with pytest.raises(ValueError, match="combine|cells"):
        server.threshold(TW)
    with pytest.raises(ValueError, match="select"):
        local.combine(PFWCP(0.1).calibrate(agents).messages(TW))


@pytest.mark.parametrize("bad", ["Paper", "finite_first", "", None, 1])
def test_bad_select(bad):
    with pytest.raises(ValueError, match="select"):
        PFWCP(0.1, select=bad)


def test_cells_before_calibrate():
    with pytest.raises(ValueError, match="calibrate"):
        PFWCP(0.1, select="finite-first").threshold(np.ones((2, 1)))
