"""PFWCP's robust reading of the agents' answers (notebook 10d_federation_server: `bounded_answers`, `robust_aggregate`):
honest answers that agree are read as they came, one agent's +inf cannot make a threshold infinite, the bound holds."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pfwcp_nb.federation.server import bounded_answers, robust_aggregate
from pfwcp_nb.pfwcp import AgentMessage
from pfwcp_nb.quantiles import quantile_of_quantiles

fed = st.tuples(st.integers(3, 8), st.integers(1, 6), st.integers(0, 2**32 - 1), st.sampled_from([0.0, 0.05, 0.1, 0.3]),
                st.sampled_from([1.0, 1.25, 2.0]))


def draw(K, m, seed):
    rng = np.random.default_rng(seed)
    return rng.gamma(2.0, size=(m, K)), rng.dirichlet(np.ones(K))


@settings(max_examples=60, deadline=None)
@given(fed)
def test_answers_that_agree_are_read_as_they_came(case):
    K, m, seed, tau, b = case
    Q, w = draw(K, m, seed)
    Q[:] = Q[:, :1]                                                  # every agent gives the test agent's answer
    np.testing.assert_array_equal(bounded_answers(Q, w, tau, b), Q)
    msgs = [AgentMessage(q, 0.1) for q in Q.T]
    np.testing.assert_array_equal(robust_aggregate(msgs, w, tau, b), robust_aggregate(msgs, w, tau))


@settings(max_examples=60, deadline=None)
@given(fed, st.data())
def test_one_agent_cannot_make_a_threshold_infinite_nor_exceed_the_bound(case, data):
    K, m, seed, tau, b = case
    Q, w = draw(K, m, seed)
    liar = data.draw(st.integers(1, K - 1))
    Q[:, liar] = data.draw(st.sampled_from([np.inf, 1e300, 50.0]))
    R = bounded_answers(Q, w, tau, b)
    np.testing.assert_array_equal(R[:, 0], Q[:, 0])                  # the test agent's answers as they came
    for k in range(1, K):                                            # each answer within b x the others' threshold
        keep = np.arange(K) != k
        T = np.atleast_1d(quantile_of_quantiles(Q[:, keep], w[keep] / w[keep].sum(), alpha=tau))
        assert np.all((R[:, k] <= b * T) | ~np.isfinite(T)) and np.all(R[:, k] <= Q[:, k])
    q = robust_aggregate([AgentMessage(c, 0.1) for c in Q.T], w, tau, b)
    honest = np.delete(np.arange(K), liar)                           # the others alone (finite): a finite threshold
    T = np.atleast_1d(quantile_of_quantiles(Q[:, honest], w[honest] / w[honest].sum(), alpha=tau))
    assert np.all(np.isfinite(q)) and np.all(q <= b * T + 1e-12)


def test_bad_bounds_and_shapes_are_refused():
    Q, w = draw(3, 4, 0)
    for bad in (0.5, float("inf"), float("nan"), True, "1.5"):
        with pytest.raises(ValueError, match="`answer_bound` must be a finite number >= 1"):
            bounded_answers(Q, w, 0.1, bad)
    with pytest.raises(ValueError, match="one aggregation weight per column"):
        bounded_answers(Q, w[:2], 0.1, 1.25)
