"Prototype candidates for issue 27 (moved into nbs/03c_value.ipynb once chosen)."
import warnings
import numpy as np
from pfwcp_nb.baselines import cp, pfwcp, ospfwcp, fcp_qq, fwcp, _agents
from pfwcp_nb.pfwcp import PFWCP, InfiniteThresholdWarning, AgentCalibration
from pfwcp_nb.oneshot import OneShotPFWCP, OneShotMessage
from pfwcp_nb.trust import loo_thresholds, with_gamma, GAMMA_GRID
from pfwcp_nb.procedure import ccc_alpha
from pfwcp_nb.quantiles import WQ_TOL
from dataclasses import replace


def mc_count(n1, alpha):
    return int(np.ceil((1 - alpha) * (n1 + 1) * (1 - WQ_TOL)))


def pfwcp_gamma_mc(draw, alpha, delta=None, **_):
    "finite-first, gamma: smallest with LOO count >= ceil((1-alpha)(n1+1)) (MC plug-in target for both guarantees)."
    model = PFWCP(alpha, delta, select="finite-first").calibrate(_agents(draw.cal_scores, draw.cal_weights))
    s0, W = draw.cal_scores[0], draw.own_test_weights
    need = min(mc_count(s0.size, alpha), s0.size)
    g = GAMMA_GRID[-1]
    for gam in GAMMA_GRID:
        if np.sum(s0 <= loo_thresholds(with_gamma(model, gam), s0, W)) >= need:
            g = gam
            break
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        return with_gamma(model, g).threshold(draw.test_weights)


def _band_messages(msgs, gamma):
    "One-shot messages under the band: mass below Q-breve down-weighted by gamma^2 (as `band_quantile`)."
    out = [msgs[0]]
    for m in msgs[1:]:
        below = m.weight_total - m.weight_above
        out.append(replace(m, weight_total=below / gamma**2 + m.weight_above))
    return out


def _os_model(draw, alpha, delta, level=None):
    return OneShotPFWCP(alpha, delta).calibrate(_agents(draw.cal_scores, draw.cal_weights), beta_breve=level)


def _os_threshold(model, msgs, tw):
    est = OneShotPFWCP(model.alpha, model.delta)
    est.calibrate(msgs, beta_breve=model.beta_breve_)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.threshold(tw)


def os_loo(full, s0, own_w, gamma):
    "osPFWCP's leave-one-out thresholds at agent 0's own calibration points, band gamma on agents 1..K-1."
    n1 = s0.size
    out = np.empty(n1)
    groups = {}
    for i in range(n1):        # agent 0's message without point i: two distinct ones (below / above its quantile)
        m0 = AgentCalibration(np.delete(s0, i)).oneshot_message(full.beta_breve_)
        m0 = replace(m0, n_eff=full.messages_[0].n_eff)           # the plan's n_eff (n_1)
        groups.setdefault((m0.quantile, m0.weight_total, m0.weight_above), (m0, []))[1].append(i)
    for m0, idx in groups.values():
        msgs = _band_messages([m0] + list(full.messages_[1:]), gamma)
        out[idx] = _os_threshold(full, msgs, own_w[idx])
    return out


MIN_CHECK_N1 = 20


def ospfwcp_band(draw, alpha, delta=None, level_fn=None, **_):
    "osPFWCP (one-shot level from `level_fn`) with the band on agents 1..K-1; gamma the smallest with LOO count >= MC target."
    level = None if level_fn is None else level_fn(draw, alpha, delta)
    full = _os_model(draw, alpha, delta, level)
    s0 = draw.cal_scores[0]
    g = 1.0
    if s0.size >= MIN_CHECK_N1:
        need = min(mc_count(s0.size, alpha), s0.size)
        g = GAMMA_GRID[-1]
        for gam in GAMMA_GRID:
            if np.sum(s0 <= os_loo(full, s0, draw.own_test_weights, gam)) >= need:
                g = gam
                break
    return _os_threshold(full, _band_messages(list(full.messages_), g), draw.test_weights)


def pooled_level(draw, alpha, delta):
    "beta_breve from the pooled n_eff: alpha (MC) or ccc_alpha(alpha, delta, sum n_eff) (CCC)."
    if delta is None:
        return alpha
    neff = sum(float(np.sum(w) ** 2 / np.sum(w ** 2)) for w in draw.cal_weights)
    return ccc_alpha(alpha, delta, neff)


def ospfwcp_pooled(draw, alpha, delta=None, **_):
    est = _os_model(draw, alpha, delta, pooled_level(draw, alpha, delta))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.threshold(draw.test_weights)


def ospfwcp_pool_band(draw, alpha, delta=None, **_):
    return ospfwcp_band(draw, alpha, delta, level_fn=pooled_level)


def select_cp_pool(draw, alpha, delta=None, **_):
    "CCC: CP at delta/2 or osPFWCP-pool at delta/2, whichever has the smaller mean threshold at agent 0's own covariates."
    if delta is None:
        return cp(draw, alpha)
    c = cp(draw, alpha, delta / 2)
    est = _os_model(draw, alpha, delta / 2, pooled_level(draw, alpha, delta / 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        own = est.threshold(draw.own_test_weights)
        if np.isfinite(c[0]) and c[0] <= np.mean(own):
            return c
        return est.threshold(draw.test_weights)


def cp_fail(n1, alpha, delta):
    "P(coverage of local CP's CCC rank < 1-alpha): the exact failure probability of CP at delta (<= delta)."
    from scipy import stats
    a = ccc_alpha(alpha, delta, n1)
    r = int(np.ceil((1 - a) * (n1 + 1) * (1 - WQ_TOL))) if a > 0 else n1 + 1
    return 0.0 if r > n1 else float(stats.beta.cdf(1 - alpha, r, n1 + 1 - r))


def select_slack(draw, alpha, delta=None, **_):
    "CCC: CP at delta (failure prob d_cp) or osPFWCP-pool at delta - d_cp, the narrower at agent 0's own covariates."
    if delta is None:
        return cp(draw, alpha)
    c = cp(draw, alpha, delta)
    d_fed = delta - cp_fail(draw.cal_scores[0].size, alpha, delta)
    if d_fed <= 1e-6:
        return c
    try:
        est = _os_model(draw, alpha, d_fed, pooled_level(draw, alpha, d_fed))
    except ValueError:
        return c
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        own = est.threshold(draw.own_test_weights)
        if np.isfinite(c[0]) and c[0] <= np.mean(own):
            return c
        return est.threshold(draw.test_weights)


def select_slack_check(kind):
    "Sel-slack, the federated half kept only if its leave-one-out count on agent 0's points reaches the target too."
    from pfwcp_nb.value import oneshot_loo_thresholds
    def f(draw, alpha, delta=None, **_):
        if delta is None:
            return cp(draw, alpha)
        c = cp(draw, alpha, delta)
        s0 = draw.cal_scores[0]
        n1 = s0.size
        d_fed = delta - cp_fail(n1, alpha, delta)
        if d_fed <= 1e-6:
            return c
        est = _os_model(draw, alpha, d_fed, pooled_level(draw, alpha, d_fed))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            own = est.threshold(draw.own_test_weights)
            if np.isfinite(c[0]) and c[0] <= np.mean(own):
                return c
            if n1 >= 20 and np.isfinite(c[0]):      # the check gates the federation only where CP is an answer
                need = mc_count(n1, alpha) if kind == "mc" else int(np.ceil((1 - ccc_alpha(alpha, delta, n1)) * n1 * (1 - WQ_TOL)))
                if np.sum(s0 <= oneshot_loo_thresholds(est, s0, draw.own_test_weights)) < min(need, n1):
                    return c
            return est.threshold(draw.test_weights)
    return f
