"Bad-input tests of the shared argument checks (`pfwcp_nb._validate`): every kind of bad value, with its message."
import numpy as np
import pytest

from pfwcp_nb._validate import (check_agg_weights, check_engine, check_n_eff, check_pos_int, check_tail_mass,
                                check_unit_open, check_weights)


@pytest.mark.parametrize("bad", [0, 1, 0.0, 1.0, -0.5, 1.5, np.nan, np.inf])
def test_unit_open(bad):
    with pytest.raises(ValueError, match=r"`alpha` must lie in the open interval \(0, 1\), got"):
        check_unit_open(bad, "alpha")


@pytest.mark.parametrize("bad", [None, "x", [0.1, 0.2]])
def test_unit_open_not_a_number(bad):
    with pytest.raises(ValueError, match=r"`delta` must be a number in \(0, 1\), got"):
        check_unit_open(bad, "delta")


@pytest.mark.parametrize("bad", [1, -0.1, 1.0000001, np.nan])
def test_tail_mass(bad):
    with pytest.raises(ValueError, match=r"`alpha` must lie in \[0, 1\) \(the mass above the quantile"):
        check_tail_mass(bad)
    with pytest.raises(ValueError, match=r"`alpha` must be a number in \[0, 1\), got None"):
        check_tail_mass(None)


def test_unit_values_pass_through():
    assert check_unit_open(np.float32(0.25), "a") == 0.25 and isinstance(check_unit_open(0.5, "a"), float)
    assert check_tail_mass(0) == 0.0 and check_tail_mass(1e-300) == 1e-300


@pytest.mark.parametrize("bad", [0, -1, 2.0, 10.5, True, np.bool_(True), "3", None])
def test_pos_int(bad):
    with pytest.raises(ValueError, match=r"`n_steps` must be a positive integer, got"):
        check_pos_int(bad, "n_steps")


def test_pos_int_hint_and_numpy():
    assert check_pos_int(np.int64(3), "K") == 3 and type(check_pos_int(np.int64(3), "K")) is int
    with pytest.raises(ValueError, match=r"`n1` must be a positive integer \(of points\), got 0\."):
        check_pos_int(0, "n1", " (of points)")


@pytest.mark.parametrize("bad, match", [([[1.0]], "1-D"), ([], "empty"), ([1.0, np.inf], "NaN or inf"),
                                        ([1.0, np.nan], "NaN or inf"), ([1.0, -1.0], "negative"),
                                        ([0.0, 0.0], "all zero")])
def test_weights(bad, match):
    with pytest.raises(ValueError, match=f"`weights` .*{match}"):
        check_weights(bad)


def test_weights_length_and_all_zero_allowed():
    with pytest.raises(ValueError, match="`w` has length 2 but there are 3 values"):
        check_weights([1.0, 2.0], "w", n=3)
    np.testing.assert_array_equal(check_weights([0.0, 0.0], allow_all_zero=True), [0.0, 0.0])


@pytest.mark.parametrize("bad, match", [([], "empty"), ([[1.0, 2.0]], "1-D"), ([1.0, 0.0], "finite and > 0"),
                                        ([np.nan], "finite and > 0"), ([1.0, -2.0], "finite and > 0")])
def test_n_eff(bad, match):
    with pytest.raises(ValueError, match=f"`n_eff` .*{match}"):
        check_n_eff(bad)


@pytest.mark.parametrize("bad, K, match", [([1, 1], 3, "one entry per agent, K=3"), ([], None, "non-empty"),
                                           ([[1.0]], None, "1-D"), ([0, 0], None, "not all zero"),
                                           ([1, -1], None, ">= 0"), ([1, np.nan], 2, "finite")])
def test_agg_weights(bad, K, match):
    with pytest.raises(ValueError, match=rf"`agg_weights` \(aggregation weights\) .*{match}"):
        check_agg_weights(bad, K, name="agg_weights")


def test_agg_weights_normalised():
    np.testing.assert_allclose(check_agg_weights([1, 3], K=2), [0.25, 0.75])
    assert check_agg_weights([0.1] * 10).sum() == pytest.approx(1.0, abs=1e-15)


@pytest.mark.parametrize("engine, n_rep, match", [("fast", None, "`engine` must be one of \\('exact', 'monte-carlo'\\), got 'fast'"),
                                                  ("mc", None, "`engine`='mc' is now 'monte-carlo'"),
                                                  ("monte-carlo", 0, "`n_rep` must be a positive integer"),
                                                  ("monte-carlo", 2.5, "`n_rep` must be a positive integer")])
def test_engine(engine, n_rep, match):
    with pytest.raises(ValueError, match=match):
        check_engine(engine, n_rep)
    assert check_engine("monte-carlo", 300, "ccc") == ("monte-carlo", 300)
