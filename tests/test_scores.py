"""Scores (notebook 02a_scores), the score recorded by every estimator (02b_pfwcp), class-conditional calibration
(03e_mondrian): a label is in the set exactly when its score is at most the threshold; the sets are nested; bad input
is refused with a message naming the argument; calibrating with one score and predicting with another raises, naming
both; every method records the score, the preset included."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pfwcp_nb import (APS, CQR, LAC, RAPS, AbsoluteResidual, AgentCalibration, ClassConditional, LocalCP,
                      NormalizedResidual, OneShotPFWCP, PFWCP, calibrate_recommended)
from pfwcp_nb.mondrian import class_agents
from pfwcp_nb.scores import as_score, check_probs

CLASSIFICATION = [LAC(), APS(), APS(randomized=False), RAPS(), RAPS(lam=0.3, k_reg=1, randomized=False)]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), m=st.integers(1, 30), C=st.integers(2, 8), which=st.integers(0, len(CLASSIFICATION) - 1))
def test_label_in_set_iff_score_below_threshold(seed, m, C, which):
    rng = np.random.default_rng(seed)
    sc = CLASSIFICATION[which]
    P = rng.dirichlet(np.ones(C) * rng.uniform(0.2, 3), size=m)
    y = rng.integers(0, C, m)
    u = rng.uniform(size=m) if sc.randomized else None
    q = rng.uniform(-0.2, 1.5, m)
    S = sc.predict_set(P, q, u)
    np.testing.assert_array_equal(S[np.arange(m), y], sc.score(y, P, u) <= q)
    assert np.all(S <= sc.predict_set(P, q + 0.05, u))                      # nested in the threshold
    assert sc.predict_set(P, np.full(m, np.inf), u).all()                   # +inf: every label


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), m=st.integers(1, 30))
def test_interval_contains_y_iff_score_below_threshold(seed, m):
    rng = np.random.default_rng(seed)
    y, f, s = rng.normal(size=m), rng.normal(size=m), rng.uniform(0.05, 3, m)
    q = rng.uniform(-1, 3, m)
    for sc, pred in ((AbsoluteResidual(), f), (NormalizedResidual(), (f, s)), (CQR(), np.column_stack([f - s, f + s]))):
        lo, hi = sc.interval(pred, q)
        np.testing.assert_array_equal((lo <= y) & (y <= hi), sc.score(y, pred) <= q)


def test_aps_ranks_are_a_prefix():
    "APS/RAPS sets are the k top-ranked labels for some k."
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(7), 200)
    for sc in (APS(seed=1), RAPS(seed=2)):
        S = sc.predict_set(P, rng.uniform(0, 1.2, 200))
        order = np.argsort(-P, axis=1, kind="stable")
        ranked = np.take_along_axis(S, order, axis=1)
        assert np.all(np.diff(ranked.astype(int), axis=1) <= 0)


@pytest.mark.parametrize("make, match", [
    (lambda: check_probs([[1.5, -0.5]]), "softmax"),
    (lambda: check_probs([[0.3, 0.3]]), "row sums"),
    (lambda: check_probs([[np.nan, 1.0]]), "NaN"),
    (lambda: LAC().score([0, 2], [[0.5, 0.5], [0.5, 0.5]]), "0..1"),
    (lambda: AbsoluteResidual().score([1.0, np.nan], [1.0, 1.0]), "NaN"),
    (lambda: NormalizedResidual().score([1.0], ([1.0], [-1.0])), "> 0"),
    (lambda: CQR().interval(np.ones((3, 3)), np.ones(3)), "(lower, upper)"),
    (lambda: APS().label_scores([[0.5, 0.5]], u=[2.0]), "[0, 1]"),
    (lambda: RAPS(k_reg=1.5), "k_reg"),
    (lambda: as_score("cqr", task="classification"), "regression score"),
    (lambda: AgentCalibration([1.0], score=3), "Score object"),
])
def test_bad_input_is_refused(make, match):
    with pytest.raises(ValueError, match=match.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")):
        make()


def _federation(score, n=120, K=3, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for k in range(K):
        P = rng.dirichlet(np.ones(4), n)
        y = (rng.uniform(size=n)[:, None] > P.cumsum(1)).sum(1)
        out.append(AgentCalibration.from_predictions(score, y, P, None if k == 0 else rng.lognormal(0, 0.3, n)))
    return out


@pytest.mark.parametrize("fit", [
    lambda a: LocalCP(0.1).calibrate(a),
    lambda a: PFWCP(0.1).calibrate(a),
    lambda a: OneShotPFWCP(0.1).calibrate(a),
    lambda a: calibrate_recommended(a, 0.1)[0],
], ids=["LocalCP", "PFWCP", "OneShotPFWCP", "preset"])
def test_every_method_records_the_score_and_refuses_another(fit):
    model = fit(_federation(APS(seed=3)))
    assert model.score_ == APS()
    P = np.full((5, 4), 0.25)
    assert model.predict_set(P, np.ones((5, 3))).shape == (5, 4)
    with pytest.raises(ValueError) as e:
        model.predict_set(P, np.ones((5, 3)), score="lac")
    assert "APS(randomized=True)" in str(e.value) and "LAC()" in str(e.value)
    with pytest.raises(ValueError, match="use `predict_set`"):
        model.predict_interval(np.zeros(5), np.ones((5, 3)))


def test_preset_ccc_records_the_score():
    "CPOrPooled (the preset for CCC with a finite local CP) records the agents' score through its calibrate."
    agents = _federation("raps", n=150)
    s0 = agents[0]._scores
    model, regime = calibrate_recommended(agents, 0.1, 0.1, own_scores=s0, own_weights=np.ones((len(s0), 3)))
    assert regime.method == "CP-or-pooled" and model.score_ == RAPS()


def test_mixed_scores_are_refused():
    with pytest.raises(ValueError, match="scores differ"):
        PFWCP(0.1).calibrate([AgentCalibration([1.0, 2.0], score="aps"), AgentCalibration([1.0, 2.0], score="lac")])


def test_label_range_clips_and_counts():
    model = PFWCP(0.1, grid=([0.1], [0.0])).calibrate([AgentCalibration(np.arange(5.0), score="absolute")])
    lo, hi = model.predict_interval(np.array([0.0, 1.0]), np.ones((2, 1)), y_min=-2, y_max=3)   # n = 5: +inf
    np.testing.assert_array_equal(lo, [-2, -2]); np.testing.assert_array_equal(hi, [3, 3])
    assert model.n_unbounded_ == 2
    with pytest.raises(ValueError, match="y_min < y_max"):
        model.predict_interval(np.zeros(2), np.ones((2, 1)), y_min=1, y_max=1)


def test_class_conditional_covers_each_class_on_average():
    "Mondrian LocalCP: over 200 draws, each class's coverage is at least 1 - alpha up to simulation error."
    rng = np.random.default_rng(1)
    cov = []
    for _ in range(200):
        P = rng.dirichlet([3.0, 1.0, 0.3], 300)
        y = (rng.uniform(size=300)[:, None] > P.cumsum(1)).sum(1)
        m = ClassConditional(lambda a, c: LocalCP(0.1).calibrate(a)).calibrate(class_agents("lac", [y[:200]], [P[:200]], [None]))
        S = m.predict_set(P[200:], np.ones((100, 1)))
        cov.append([S[y[200:] == c, c].mean() if np.any(y[200:] == c) else np.nan for c in range(3)])
    assert np.all(np.nanmean(cov, axis=0) >= 0.9 - 0.02)
