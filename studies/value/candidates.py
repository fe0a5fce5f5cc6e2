"""The benchmark's candidates as functions of a calibration draw: `fn(draw, alpha, delta=None)` -> thresholds.
The methods are notebook 03c_value's (`pfwcp_nb.value`); this file only adapts them to `baselines.CalibrationDraw`, and
keeps the two variants that lost and have no place in the package (Sel-CP-pool, Sel-check-mc) and PFWCP-gmc."""
import warnings
import numpy as np
from pfwcp_nb.methods import cp
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration, InfiniteThresholdWarning
from pfwcp_nb.trust import loo_thresholds, with_gamma, GAMMA_GRID
from pfwcp_nb.quantiles import WQ_TOL, effective_sample_size
from pfwcp_nb.value import (CPOrPooled, band_oneshot, calibrate_pooled, choose_gamma_oneshot, cp_failure,
                            oneshot_loo_thresholds)



def agents_of(draw) -> list:
    "One `AgentCalibration` per agent of the draw (its calibration scores and weights)."
    return [AgentCalibration(s, w) for s, w in zip(draw.cal_scores, draw.cal_weights)]

def mc_count(n1, alpha):
    "The MC plug-in leave-one-out count ceil((1-alpha)(n_1+1)), capped at n_1."
    return min(int(np.ceil((1 - alpha) * (n1 + 1) * (1 - WQ_TOL))), n1)


def _quiet(fn, *a):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a)


def pfwcp_gamma_mc(draw, alpha, delta=None, **_):
    "PFWCP-gmc: finite-first cells, the band's gamma the smallest whose leave-one-out count reaches `mc_count`."
    model = PFWCP(alpha, delta, select="finite-first").calibrate(agents_of(draw))
    s0, W = draw.cal_scores[0], draw.own_test_weights
    g = next((gam for gam in GAMMA_GRID if np.sum(s0 <= loo_thresholds(with_gamma(model, gam), s0, W)) >= mc_count(s0.size, alpha)),
             GAMMA_GRID[-1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        return with_gamma(model, g).threshold(draw.test_weights)


def ospfwcp_pooled(draw, alpha, delta=None, **_):
    "osPFWCP-pool: `value.calibrate_pooled`."
    return _quiet(calibrate_pooled(agents_of(draw), alpha, delta).threshold, draw.test_weights)


def ospfwcp_pool_band(draw, alpha, delta=None, **_):
    "osPFWCP-pool-band: the band on the one-shot messages, gamma from `value.choose_gamma_oneshot`."
    est = calibrate_pooled(agents_of(draw), alpha, delta)
    g, _ = choose_gamma_oneshot(est, draw.cal_scores[0], draw.own_test_weights)
    banded = type(est)(alpha, delta).calibrate(band_oneshot(est.messages_, g), beta_breve=est.beta_breve_)
    return _quiet(banded.threshold, draw.test_weights)


def cp_or_pooled(check: bool):
    "Sel-slack (check=False) and Sel-check-ccc (check=True): `value.CPOrPooled`; MC: local CP."
    def f(draw, alpha, delta=None, **_):
        if delta is None:
            return cp(draw, alpha)
        sel = CPOrPooled(alpha, delta, check=check).calibrate(agents_of(draw),
                                                              draw.cal_scores[0], draw.own_test_weights)
        return sel.threshold(draw.test_weights)
    return f


def _pooled_at(draw, alpha, delta):
    return calibrate_pooled(agents_of(draw), alpha, delta)


def select_cp_pool(draw, alpha, delta=None, **_):
    "Sel-CP-pool: local CP and osPFWCP-pool, each at delta/2, the smaller mean threshold at agent 0's own covariates."
    if delta is None:
        return cp(draw, alpha)
    c, est = cp(draw, alpha, delta / 2), _pooled_at(draw, alpha, delta / 2)
    keep_cp = np.isfinite(c[0]) and c[0] <= np.mean(_quiet(est.threshold, draw.own_test_weights))
    return c if keep_cp else _quiet(est.threshold, draw.test_weights)


def select_check_mc(draw, alpha, delta=None, **_):
    "Sel-check-mc: Sel-slack, the federated half kept only if its leave-one-out count reaches `mc_count`."
    if delta is None:
        return cp(draw, alpha)
    s0, W = draw.cal_scores[0], draw.own_test_weights
    c = cp(draw, alpha, delta)
    d_fed = delta - cp_failure(s0.size, alpha, delta)
    if d_fed <= 1e-9:
        return c
    est = _pooled_at(draw, alpha, d_fed)
    if np.isfinite(c[0]):
        if c[0] <= np.mean(_quiet(est.threshold, W)):
            return c
        if s0.size >= 20 and np.sum(s0 <= oneshot_loo_thresholds(est, s0, W)) < mc_count(s0.size, alpha):
            return c
    return _quiet(est.threshold, draw.test_weights)
