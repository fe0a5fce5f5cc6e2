"""Notebook 03c_value: osPFWCP at the pooled level, the band on one-shot messages, the one-shot leave-one-out check,
local CP as an estimator, CPOrPooled (never wider than local CP) and calibrate_recommended."""
import numpy as np
import pytest

from pfwcp_nb.oneshot import OneShotPFWCP, local_levels
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration
from pfwcp_nb.procedure import ccc_alpha
from pfwcp_nb.value import (CPOrPooled, LocalCP, band_oneshot, calibrate_pooled, calibrate_recommended,
                            choose_gamma_oneshot, cp_failure, oneshot_loo_thresholds, pooled_beta_breve)


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
        without = CPOrPooled(0.1, 0.1, check=False).calibrate(agents, s0, W).chosen_
        assert with_check == "CP" or without == "osPFWCP-pool"


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
