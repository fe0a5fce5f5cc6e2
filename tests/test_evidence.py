"""Notebook 02c_evidence: label-free evidence of density-ratio quality (balance sums, weighted balance, the rule)."""
import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pfwcp_nb.evidence import BalanceSums, EvidenceRule, balance, balance_sums, ratio_evidence


def gaussian_agents(seed, scale=1.0, n=400, d=3, shifts=(0.0, 0.8, -0.6, 0.5)):
    "Agents x ~ N(s e_1, I); weights the true log-ratio N(0, I)/N(s e_1, I) times `scale` (1: true, < 1: too flat)."
    r = np.random.default_rng(seed)
    out = []
    for k, s in enumerate(shifts):
        X = r.standard_normal((n, d)); X[:, 0] += s
        out.append(balance_sums(X, None if k == 0 else scale * (-s * X[:, 0] + s * s / 2)))
    return out


@settings(max_examples=30, deadline=None)
@given(c=st.floats(-50, 50), seed=st.integers(0, 10_000))
def test_a_constant_factor_in_the_weights_changes_nothing(c, seed):
    r = np.random.default_rng(seed)
    F, lw = r.standard_normal((50, 2)), r.normal(0, 2, 50)
    ref = balance_sums(r.standard_normal((60, 2)))
    a, b = balance(balance_sums(F, lw), ref), balance(balance_sums(F, lw + c), ref)
    np.testing.assert_allclose(a[0], b[0], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(a[1], b[1], rtol=1e-9, atol=1e-12)
    assert balance_sums(F, lw).n_eff == pytest.approx(balance_sums(F, lw + c).n_eff)


@settings(max_examples=20, deadline=None)
@given(a=st.floats(0.1, 10), b=st.floats(-5, 5), seed=st.integers(0, 10_000))
def test_smd_is_invariant_to_an_affine_change_of_a_feature(a, b, seed):
    r = np.random.default_rng(seed)
    F0, F1, lw = r.standard_normal((80, 1)), r.normal(0.5, 1, (70, 1)), r.normal(0, 1, 70)
    s1, e1 = balance(balance_sums(F1, lw), balance_sums(F0))
    s2, e2 = balance(balance_sums(a * F1 + b, lw), balance_sums(a * F0 + b))
    np.testing.assert_allclose(s1, s2, rtol=1e-7, atol=1e-9); np.testing.assert_allclose(e1, e2, rtol=1e-7)


def test_true_ratios_pass_and_flat_ones_do_not():
    passed = [ratio_evidence(gaussian_agents(s)).federate for s in range(20)]
    flat = [ratio_evidence(gaussian_agents(s, scale=0.3)).federate for s in range(20)]
    assert np.mean(passed) >= 0.8 and not any(flat), (passed, flat)


def test_the_z_statistic_is_calibrated_under_the_true_ratio():
    "With the true ratio SMD/se is about standard normal: the per-feature false alarm rate is near 5 % at z = 1.96."
    z = []
    for s in range(300):
        sm = gaussian_agents(s, n=300, shifts=(0.0, 0.5))
        smd, se = balance(sm[1], sm[0])
        z.append(smd / se)
    z = np.concatenate(z)
    assert abs(np.mean(z)) < 0.15 and 0.8 < np.std(z) < 1.25 and np.mean(np.abs(z) > 1.96) < 0.1


def test_sums_are_json_safe_and_reveal_no_covariate():
    s = balance_sums(np.arange(12.0).reshape(6, 2), np.zeros(6))
    d = json.loads(json.dumps(s.to_dict()))
    assert set(d) == {"n", "n_clip", "sw", "sw2", "swf", "sw2f", "sw2f2", "sf"} and len(d["swf"]) == 2


def test_rule_and_bad_input():
    sums = gaussian_agents(0)
    strict = ratio_evidence(sums, EvidenceRule(smd_tol=0.0, z=0.0))       # every difference counts: nothing passes
    assert not strict.usable[1:].any() and not strict.federate
    assert EvidenceRule().z_for(1) == pytest.approx(1.959964, abs=1e-5) and EvidenceRule(z=3).z_for(5) == 3
    with pytest.raises(ValueError, match="same features"):
        ratio_evidence([sums[0], balance_sums(np.zeros((5, 7)))])
    with pytest.raises(ValueError, match="`F` must be a finite 2-D array"):
        balance_sums(np.array([[np.nan, 1.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="`log_w` must be a finite"):
        balance_sums(np.zeros((4, 1)), np.array([0.0, np.inf, 0.0, 0.0]))
    with pytest.raises(ValueError, match="over the same d features"):
        balance(sums[1], balance_sums(np.zeros((5, 1))))
    assert "usable" in str(ratio_evidence(sums)) and isinstance(sums[0], BalanceSums)
