"""Notebook 03c_value: osPFWCP at the pooled level, the band on one-shot messages, the one-shot leave-one-out check,
local CP as an estimator, CPOrPooled (never wider than local CP) and calibrate_recommended."""
import numpy as np
import pytest

from pfwcp_nb.oneshot import OneShotPFWCP, local_levels
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration
from pfwcp_nb.procedure import ccc_alpha
from pfwcp_nb.value import (CPOrPooled, LocalCP, OnAgents, band_oneshot, calibrate_pooled, calibrate_recommended,
                            choose_gamma_oneshot, cp_failure, oneshot_loo_thresholds, pooled_beta_breve)
from pfwcp_nb.evidence import balance_sums, ratio_evidence


def federation(seed, n1=100, K=6, n=100, m=2000, right=True):
    "Scores |N(0, 1 + e^-x)|; agent k's x ~ N(k/2, 1), the test agent's N(0, 1); weights the true ratios (or ones)."
    r = np.random.default_rng(seed)
    ratio = lambda x, k: np.exp(-x * k / 2 + (k / 2) ** 2 / 2)
    score = lambda x: np.abs(r.normal(0, 1 + np.exp(-x), x.size))
    x0, xt = r.normal(0, 1, n1), r.normal(0, 1, m)
    s0 = score(x0)
    agents = [AgentCalibration(s0)]
    for k in range(1, K):
        x = r.normal(k / 2, 1, n)
        agents.append(AgentCalibration(score(x), ratio(x, k) if right else np.ones(n)))
    W = lambda x: np.column_stack([np.ones(x.size)] + [ratio(x, k) if right else np.ones(x.size) for k in range(1, K)])
    return agents, s0, W(x0), W(xt), xt


def cond_coverage(t, xt):
    "The exact conditional coverage of thresholds t at the test covariates: P(|N(0, s(x))| <= t), averaged."
    from scipy import stats
    return float(np.mean(2 * stats.norm.cdf(t / (1 + np.exp(-xt))) - 1))


def test_pooled_level_bad_input():
    with pytest.raises(ValueError, match="n_eff"):
        pooled_beta_breve([[1.0, 2.0]], 0.1, 0.1)
    with pytest.raises(ValueError, match="alpha"):
        pooled_beta_breve([10.0], 1.5)
    with pytest.raises(ValueError, match="delta"):
        pooled_beta_breve([2.0], 0.1, 0.0)


def test_band_levels_grow_with_gamma():
    agents, s0, W, Wt, xt = federation(0)
    msgs = calibrate_pooled(agents, 0.1, 0.1).messages_
    levels = [local_levels(band_oneshot(msgs, g), Wt[:50]) for g in (1.0, 1.5, 3.0)]
    assert np.all(levels[1] >= levels[0]) and np.all(levels[2] >= levels[1])
    np.testing.assert_array_equal(levels[0], local_levels(msgs, Wt[:50]))
    assert np.all(levels[2][:, 0] == levels[0][:, 0])                        # the test agent is exact
    with pytest.raises(ValueError, match="gamma"):
        band_oneshot(msgs, np.inf)


def test_loo_check_inputs_and_monotone():
    agents, s0, W, _, _ = federation(1)
    model = calibrate_pooled(agents, 0.1, 0.1)
    t1 = oneshot_loo_thresholds(model, s0, W)
    assert np.all(oneshot_loo_thresholds(model, s0, W, 2.0) >= t1)
    with pytest.raises(ValueError, match="n_1"):
        oneshot_loo_thresholds(model, s0[:10], W)
    with pytest.raises(ValueError, match="calibrated"):
        oneshot_loo_thresholds(OneShotPFWCP(0.1, 0.1), s0, W)
    g, counts = choose_gamma_oneshot(model, s0[:10], W[:10])          # too few own points: no check
    assert g == 1.0 and counts.size == 0


def test_local_cp_matches_split_conformal():
    from pfwcp_nb.methods import split_conformal
    r = np.random.default_rng(3)
    for n in (5, 9, 21, 22, 50, 100):
        s = r.exponential(size=n)
        for dl in (None, 0.1):
            assert LocalCP(0.1, dl).calibrate([AgentCalibration(s)]).threshold_ == split_conformal(s, 0.1, dl)


def test_cp_failure_is_within_delta():
    for n in range(22, 400, 7):
        assert 0 < cp_failure(n, 0.1, 0.1) <= 0.1
    assert cp_failure(10, 0.1, 0.1) == 0.0


@pytest.mark.parametrize("seed", range(6))
def test_cp_or_pooled_never_wider_than_local_cp(seed):
    agents, s0, W, Wt, xt = federation(seed)
    sel = CPOrPooled(0.1, 0.1).calibrate(agents, s0, W)
    cp = LocalCP(0.1, 0.1).calibrate(agents).threshold_
    t = sel.threshold(Wt)
    assert np.isfinite(t).all()
    if sel.chosen_ == "CP":
        np.testing.assert_array_equal(t, np.full(t.size, cp))
    else:
        assert np.mean(sel.model_.threshold(W)) < cp


def test_the_check_only_ever_keeps_cp():
    "With the check the federated half is kept in a subset of the draws where it is kept without it."
    for seed in range(8):
        agents, s0, W, Wt, xt = federation(200 + seed, right=False)       # ratios that ignore the shift
        with_check = CPOrPooled(0.1, 0.1).calibrate(agents, s0, W).chosen_
        without = CPOrPooled(0.1, 0.1, check="none").calibrate(agents, s0, W).chosen_
        assert with_check == "CP" or without == "osPFWCP-pool"


@pytest.mark.slow
def test_cp_or_pooled_ccc_with_true_ratios():
    "P(conditional coverage >= 0.9) of CPOrPooled over calibration draws, true ratios: at least 0.9 within two s.e."
    cov = []
    for seed in range(120):
        agents, s0, W, Wt, xt = federation(100 + seed)
        cov.append(cond_coverage(CPOrPooled(0.1, 0.1).calibrate(agents, s0, W).threshold(Wt), xt))
    ok = np.mean(np.array(cov) >= 0.9)
    assert ok >= 0.9 - 2 * np.sqrt(0.09 / len(cov)), (ok, np.mean(cov))


def test_calibrate_recommended():
    agents, s0, W, Wt, _ = federation(7)
    model, regime = calibrate_recommended(agents, 0.1, 0.1, own_scores=s0, own_weights=W)
    assert isinstance(model, CPOrPooled) and regime.method == "CP-or-pooled"
    model, regime = calibrate_recommended(agents, 0.1)
    assert isinstance(model, LocalCP) and regime.method == "CP"
    small = [AgentCalibration(s0[:8])] + agents[1:]
    model, regime = calibrate_recommended(small, 0.1, own_scores=s0[:8], own_weights=W[:8])
    assert isinstance(model, PFWCP) and model.select == "finite-first" and regime.options["gamma"] == "auto"
    with pytest.raises(ValueError, match="own_scores"):
        calibrate_recommended(small, 0.1)
    with pytest.raises(ValueError, match="own_scores"):
        calibrate_recommended(agents, 0.1, 0.1)
    with pytest.raises(ValueError, match="own_scores"):
        CPOrPooled(0.1, 0.1).calibrate(agents, s0[::-1][:50], W)
    lo, hi = calibrate_recommended(agents, 0.1, 0.1, own_scores=s0, own_weights=W)[0].predict_interval(np.zeros(len(Wt)), Wt, score="absolute")
    assert np.all(hi - lo >= 0)


@pytest.mark.slow
def test_the_preset_runs_from_the_console(tmp_path):
    "`pfwcp-experiments --methods Recommended`: the preset in one line, next to CP on the same draws (not a default method)."
    import subprocess
    import pandas as pd
    from pfwcp_nb.grid import default_methods
    assert "Recommended" not in default_methods() and "Recommended" not in default_methods("oracle")
    r = subprocess.run(["pfwcp-experiments", "--datasets", "gaussian", "--methods", "CP", "Recommended", "--guarantee",
                        "mc", "ccc", "--n-sims", "2", "--n-test", "40", "--n-cal-test", "15", "--no-figures",
                        "--no-progress", "--jobs", "1", "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "out")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    res = pd.read_csv(tmp_path / "out" / "results.csv")
    assert set(res.method) == {"CP", "Recommended"} and len(res) == 4
    rec = res[res.method == "Recommended"]
    assert (rec.inf_frac < 1).all()                       # n_1 = 15: local CP is the whole line for CCC, the preset is not


@pytest.mark.slow
def test_benchmark_script_usage_and_tables():
    "studies/value/run.py: exit 2 with a usage line on bad arguments; the tables of the stored summary print."
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    run = lambda *a: subprocess.run([sys.executable, "studies/value/run.py", *a], cwd=root, capture_output=True, text=True)
    for bad in (["--table", "headline"], ["--summary", "x.csv"], ["--table", "nope"], []):
        r = run(*bad)
        assert r.returncode == 2 and "usage:" in r.stderr, (bad, r.stderr)
    r = run("--table", "targets", "--summary-file", "results/value/summary.csv")
    assert r.returncode == 0 and r.stdout.startswith("| target |"), r.stderr


def held_out_evidence(seed, K=6, n=300, right=True, clipped=(), noise=0.0):
    """The evidence of `federation`'s ratios from n held-out covariates per agent: true log-ratios, zeros (`right=False`),
    or at the clip; `noise`: their measured log-ratio noise (None: not measured)."""
    r = np.random.default_rng(seed)
    xs = [r.normal(k / 2, 1, n) for k in range(K)]
    lw = [None] + [np.full(n, 13.8) if k in clipped else (-x * k / 2 + (k / 2) ** 2 / 2) if right else np.zeros(n)
                   for k, x in enumerate(xs[1:], start=1)]
    return ratio_evidence([balance_sums(x[:, None], l, log_bound=13.8) for x, l in zip(xs, lw)],
                          log_noise=None if noise is None else np.r_[0.0, np.full(K - 1, noise)])


def test_evidence_gate_keeps_local_cp_when_the_ratios_ignore_the_shift():
    for seed in range(6):
        agents, s0, W, Wt, xt = federation(300 + seed, right=False)
        ev = held_out_evidence(seed, right=False)
        assert not ev.federate
        sel = CPOrPooled(0.1, 0.1, check="evidence").calibrate(agents, s0, W, ev)
        assert sel.chosen_ == "CP" and sel.agents_.tolist() == [0]
        np.testing.assert_array_equal(sel.threshold(Wt), LocalCP(0.1, 0.1).calibrate(agents).threshold(Wt))


def test_evidence_gate_ccc_with_true_ratios():
    "With the true ratios the evidence lets the federation in, and CPOrPooled(check='evidence') stays valid (CCC)."
    cov, fed = [], 0
    for seed in range(120):
        agents, s0, W, Wt, xt = federation(400 + seed)
        sel = CPOrPooled(0.1, 0.1, check="evidence").calibrate(agents, s0, W, held_out_evidence(seed))
        fed += sel.chosen_ != "CP"
        cov.append(cond_coverage(sel.threshold(Wt), xt))
    ok = np.mean(np.array(cov) >= 0.9)
    assert fed > 0 and ok >= 0.9 - 2 * np.sqrt(0.09 / len(cov)), (fed, ok)


def test_uncertified_evidence_keeps_the_leave_one_out_check():
    "Balanced but noisy (or unmeasured) ratios: the federated half must also pass the check, as without evidence."
    seen = 0
    for seed in range(6):
        agents, s0, W, Wt, xt = federation(500 + seed)
        for noise in (None, 1.0):
            ev = held_out_evidence(seed, noise=noise)
            assert not ev.certified
            if not ev.federate:                          # the balance test's false alarm (about 5 % per agent)
                continue
            seen += 1
            with_ev = CPOrPooled(0.1, 0.1, check="evidence").calibrate(agents, s0, W, ev).chosen_
            loo = CPOrPooled(0.1, 0.1, check="loo").calibrate(agents, s0, W).chosen_
            assert with_ev == loo or with_ev == "CP"
    assert seen >= 6


def test_agents_left_out_by_the_evidence_are_not_asked():
    agents, s0, W, Wt, xt = federation(5)
    ev = held_out_evidence(5, clipped=(3,))
    assert not ev.usable[3] and ev.usable[[0, 1, 2]].all()
    sel = CPOrPooled(0.1, 0.1, check="evidence").calibrate(agents, s0, W, ev)
    assert 3 not in sel.agents_.tolist()
    Wt_poison = Wt.copy(); Wt_poison[:, 3] = 1e12                 # agent 3's column is never read
    np.testing.assert_array_equal(sel.threshold(Wt), sel.threshold(Wt_poison))
    small = [AgentCalibration(s0[:10])] + agents[1:]
    model, regime = calibrate_recommended(small, 0.1, 0.1, own_scores=s0[:10], own_weights=W[:10], evidence=ev)
    assert isinstance(model, OnAgents) and 3 not in model.keep and regime.agents == tuple(model.keep.tolist())
    np.testing.assert_array_equal(model.threshold(Wt[:50]), model.threshold(Wt_poison[:50]))


def test_no_usable_agent_means_local_cp():
    agents, s0, W, Wt, xt = federation(6, right=False)
    ev = held_out_evidence(6, right=False)
    for n1, delta in ((100, 0.1), (10, 0.1), (100, None)):
        ag = [AgentCalibration(s0[:n1])] + agents[1:]
        model, regime = calibrate_recommended(ag, 0.1, delta, own_scores=s0[:n1], own_weights=W[:n1], evidence=ev)
        assert regime.method == "CP" and isinstance(model, LocalCP) and regime.agents == (0,), regime
        assert "evidence" in regime.reason or delta is None


def test_evidence_bad_input():
    agents, s0, W, Wt, xt = federation(7)
    with pytest.raises(ValueError, match="needs `evidence`"):
        CPOrPooled(0.1, 0.1, check="evidence").calibrate(agents, s0, W)
    with pytest.raises(ValueError, match="RatioEvidence of these K=6"):
        CPOrPooled(0.1, 0.1, check="evidence").calibrate(agents, s0, W, held_out_evidence(7, K=4))
    with pytest.raises(ValueError, match="RatioEvidence of these K=6"):
        calibrate_recommended(agents, 0.1, 0.1, own_scores=s0, own_weights=W, evidence="good")
    with pytest.raises(ValueError, match="`check` must be one of"):
        CPOrPooled(0.1, 0.1, check=True)
    with pytest.raises(ValueError, match="`keep` must be increasing"):
        OnAgents(LocalCP(), [1, 2], 6)


def test_scarce_test_agent_gets_ospfwcp_when_balance_is_shown():
    """Local CP is the whole line (CCC, n_1 = 10): certified ratios -> osPFWCP on the precise agents; balance shown but the
    ratios noisy or their noise unmeasured -> osPFWCP on the usable agents; balance not shown -> PFWCP (finite-first, band)."""
    from pfwcp_nb.oneshot import OneShotPFWCP
    agents, s0, W, Wt, xt = federation(8)
    small = [AgentCalibration(s0[:10])] + agents[1:]
    ev = held_out_evidence(8)
    if not ev.certified:
        pytest.skip("the balance test's false alarm on this seed")
    model, regime = calibrate_recommended(small, 0.1, 0.1, own_scores=s0[:10], own_weights=W[:10], evidence=ev)
    inner = model.model if isinstance(model, OnAgents) else model
    assert regime.method == "osPFWCP" and isinstance(inner, OneShotPFWCP)
    assert np.isfinite(model.threshold(Wt)).mean() > 0.9
    for noise in (None, 1.0):
        ev = held_out_evidence(8, noise=noise)
        assert not ev.certified and ev.balance_shown
        _, regime = calibrate_recommended(small, 0.1, 0.1, own_scores=s0[:10], own_weights=W[:10], evidence=ev)
        assert regime.method == "osPFWCP" and regime.agents == tuple(ev.keep.tolist()), regime
        _, regime = calibrate_recommended(agents, 0.1, 0.1, own_scores=s0, own_weights=W, evidence=ev)
        assert regime.method == "CP-or-pooled"            # local CP finite (n_1 = 100): precision still needed
    few = [held_out_evidence(s, n=8, noise=1.0) for s in range(8, 30)]
    ev = next(e for e in few if e.federate and not e.balance_shown)     # usable, balance not shown on 8 points
    _, regime = calibrate_recommended(small, 0.1, 0.1, own_scores=s0[:10], own_weights=W[:10], evidence=ev)
    assert regime.method == "PFWCP"


def test_certified_ratios_give_ospfwcp_for_ccc_and_it_stays_valid():
    "CCC with a finite local CP (n_1 = 100): certified ratios -> osPFWCP on the precise agents (full delta), valid over draws."
    from pfwcp_nb.oneshot import OneShotPFWCP
    cov, n = [], 0
    for seed in range(80):
        agents, s0, W, Wt, xt = federation(700 + seed)
        ev = held_out_evidence(seed, noise=0.1)
        if not ev.certified:                              # the balance test's false alarm
            continue
        model, regime = calibrate_recommended(agents, 0.1, 0.1, own_scores=s0, own_weights=W, evidence=ev)
        inner = model.model if isinstance(model, OnAgents) else model
        assert regime.method == "osPFWCP" and isinstance(inner, OneShotPFWCP), regime
        n += 1
        cov.append(cond_coverage(model.threshold(Wt), xt))
    ok = np.mean(np.array(cov) >= 0.9)
    assert n >= 60 and ok >= 0.9 - 2 * np.sqrt(0.09 / n), (n, ok)
    _, mc = calibrate_recommended(agents, 0.1, None, own_scores=s0, own_weights=W, evidence=ev)
    assert mc.method == "CP"                               # marginal coverage: split CP stays the answer
