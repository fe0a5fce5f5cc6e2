"""Private training (notebook 06b_privacy, `pfwcp_nb.privacy`): per-row clipping and the noise's scale as properties,
the accountant against known values, bad input, the agent's refusals of plans weaker than agreed or past its budget,
a private training over Flower, and the membership attack of studies/redteam at its smallest and at its target."""
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from pfwcp_nb.federated import fedavg, local_round, make_mlp
from pfwcp_nb.privacy import (DPConfig, clip_sum_noise, dp_epsilon, private_train_kw, setup_epsilons, schedule_epsilons,
                              training_epsilon)

ROOT = Path(__file__).resolve().parents[1]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), C=st.floats(0.01, 10.0), scale=st.floats(1e-3, 100.0), R=st.integers(1, 3),
       N=st.integers(1, 12))
def test_every_rows_clipped_contribution_has_norm_at_most_C(seed, C, scale, R, N):
    g = torch.Generator().manual_seed(seed)
    grads = [torch.randn(R, N, 3, 2, generator=g) * scale, torch.randn(R, N, 4, generator=g) * scale]
    for i in range(N):
        one = torch.zeros(R, N, dtype=torch.bool); one[:, i] = True
        out = clip_sum_noise(grads, one, C, 0.0, g)
        norm = torch.sqrt(sum(t.reshape(R, -1).square().sum(1) for t in out))
        raw = torch.sqrt(sum(t[:, i].reshape(R, -1).square().sum(1) for t in grads))
        assert bool((norm <= C * (1 + 1e-5)).all())
        torch.testing.assert_close(norm, raw.clamp(max=C), rtol=1e-5, atol=1e-6)     # inside the ball: untouched


@pytest.mark.parametrize("sigma,C", [(0.5, 1.0), (3.0, 0.2), (28.5, 1.0)])
def test_the_noise_is_gaussian_with_sd_sigma_times_C(sigma, C):
    z = clip_sum_noise([torch.zeros(4, 3, 50000)], torch.zeros(4, 3, dtype=torch.bool), C, sigma,
                       torch.Generator().manual_seed(7))[0].reshape(-1).double()
    assert abs(float(z.std()) / (sigma * C) - 1) < 0.01 and abs(float(z.mean())) < 0.01 * sigma * C
    k = float(((z - z.mean()) ** 4).mean() / z.var() ** 2)
    assert abs(k - 3) < 0.05                                                           # Gaussian kurtosis


def test_the_accountant_against_known_values():
    # the full-batch Gaussian's RDP is alpha T / (2 sigma^2): the accountant's epsilon is the conversion's minimum
    T, s = 600, 10.0
    e = dp_epsilon([(DPConfig(s, 1.0), T)])
    assert abs(e - 13.77) < 0.01                                                       # the red team's 13.8
    # the MNIST example of DP-SGD: q = 256/60000, sigma 1.1, 60 epochs, delta 1e-5 -> about 2.6 with this conversion
    assert abs(dp_epsilon([(DPConfig(1.1, 1.0, 256 / 60000), 14062)]) - 2.6) < 0.05
    # composition: two halves equal the whole; more noise, fewer steps, smaller sampling rate: smaller epsilon
    assert dp_epsilon([(DPConfig(5.0, 1.0), 50), (DPConfig(5.0, 1.0), 50)]) == pytest.approx(dp_epsilon([(DPConfig(5.0, 1.0), 100)]))
    assert dp_epsilon([(DPConfig(6.0, 1.0), 100)]) < dp_epsilon([(DPConfig(5.0, 1.0), 100)])
    assert dp_epsilon([(DPConfig(5.0, 1.0, 0.1), 100)]) < dp_epsilon([(DPConfig(5.0, 1.0), 100)])


def test_the_private_default_gives_the_test_agent_its_epsilon_and_the_others_less():
    for eps in (1.0, 4.0, 8.0):
        kw = private_train_kw(eps, K=11)
        e = setup_epsilons(kw, 11)
        assert eps * 0.999 < e[0] <= eps and all(v < e[0] for v in e[1:])
    assert setup_epsilons(None, 11) == [math.inf] * 11


@pytest.mark.parametrize("bad,msg", [
    (lambda: DPConfig(0.0, 1.0), "noise_multiplier"), (lambda: DPConfig(1.0, 0.0), "max_grad_norm"),
    (lambda: DPConfig(1.0, 1.0, 0.0), "sample_rate"), (lambda: DPConfig(float("inf"), 1.0), "noise_multiplier"),
    (lambda: DPConfig.from_dict({"noise_multiplier": 1.0, "max_grad_norm": 1.0}, "the server"), "the server: DP settings"),
    (lambda: dp_epsilon([(DPConfig(1.0, 1.0), -1)]), "mechanisms"), (lambda: dp_epsilon([], delta=1.0), "delta"),
    (lambda: training_epsilon([(DPConfig(1.0, 1.0), 1.5, 1)]), "tasks:"),
    (lambda: private_train_kw(0.0), "epsilon"), (lambda: private_train_kw(8.0, K=1), "K="),
    (lambda: setup_epsilons({"predictor": {"dp": 3.0}}, 3), "train_kw['predictor']['dp']"),
    (lambda: fedavg(lambda: make_mlp(2, (3,), 1), [(np.ones((4, 2)), np.ones(4))], rounds=1, progress=False, dp="yes"),
     "dp: pass a privacy.DPConfig"),
    (lambda: local_round(lambda: make_mlp(2, (3,), 1), [(np.ones((4, 2)), np.ones(4))],
                         [{n: p.detach().numpy() for n, p in make_mlp(2, (3,), 1).named_parameters()}],
                         [np.arange(4)[None]], loss="mse", batch_size=4, lr=1e-2, weight_decay=0.0,
                         server_optimizer="adam", client_lr=1.0, lockstep=True, dp=DPConfig(1.0, 1.0)), "noise_gen"),
])
def test_bad_input_is_refused_naming_the_argument(bad, msg):
    with pytest.raises(ValueError, match=msg.replace("[", r"\[").replace("]", r"\]")):
        bad()


def test_the_non_private_path_is_unchanged_bit_for_bit():
    rng = np.random.default_rng(0)
    cl = [(rng.normal(size=(n, 3)), rng.normal(size=n)) for n in (7, 12)]
    kw = dict(rounds=3, batch_size=4, lr=1e-2, progress=False)
    a, _ = fedavg(lambda: make_mlp(3, (5,), 1), cl, **kw)
    b, _ = fedavg(lambda: make_mlp(3, (5,), 1), cl, dp=None, **kw)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


# --- over Flower: the agent's refusals and a private round ---------------------------------------------------------

sys.path.insert(0, str(ROOT / "studies" / "redteam"))


@pytest.fixture
def agent_world():
    from common import setup
    kw = private_train_kw(8.0, K=3)
    return setup("gaussian", K=3, n_train=20, train_kw=kw, ks=(0, 1)), kw


def test_a_private_round_clips_and_noises_and_is_not_the_mean_gradient(agent_world):
    from common import setup, train
    from pfwcp_nb.federation.agent import _run_state
    (data, ctxs, ag, plans, f), kw = agent_world
    out = train(ctxs[1], data[1], 1, ag, plans, 1, {})
    st = _run_state(ctxs[1])
    assert 0 < st["epsilon"] < 8.0 and len(st["dp-history"]) == 2              # charged before the update left
    plain = setup("gaussian", K=3, n_train=20, ks=(1,))                        # the same round, not private
    ref = train(plain[1][1], plain[0][1], 1, plain[2], plain[3], 1, {})
    d = max(float(np.abs(out["ratios-0"][n] - ref["ratios-0"][n]).max()) for n in ref["ratios-0"])
    assert d > 1e-3                                                            # the noise is there


def test_the_same_dp_seed_gives_the_same_update_and_none_draws_fresh_noise():
    from common import setup, train
    kw = private_train_kw(8.0, K=3)
    outs = []
    for seed in (5, 5, None, None):
        data, ctxs, ag, plans, f = setup("gaussian", K=3, n_train=20, train_kw=kw, ks=(1,))
        ag.dp_seed = seed
        outs.append(train(ctxs[1], data[1], 1, ag, plans, 1, {})["ratios-0"]["0.weight"])
    assert np.array_equal(outs[0], outs[1]) and not np.array_equal(outs[2], outs[3])


@pytest.mark.parametrize("change,why", [
    (lambda p: {**p, "dp": {**p["dp"], "noise_multiplier": p["dp"]["noise_multiplier"] / 2}}, "sigma lower"),
    (lambda p: {**p, "dp": {**p["dp"], "max_grad_norm": 10.0}}, "clip norm higher"),
    (lambda p: {**p, "dp": None}, "not private"),
    (lambda p: {**p, "rounds": p["rounds"] * 3}, "more rounds"),
])
def test_an_agent_refuses_plans_weaker_than_agreed(change, why):
    from common import pipe_content
    from flwr.app import Context, RecordDict
    from pfwcp_nb.federation.agent import agent_query
    from pfwcp_nb.federation.agreement import TrainingAgreement
    from pfwcp_nb.federation.simulation import federation_data
    from pfwcp_nb.federation.plan import plan_tasks
    from pfwcp_nb.query_policy import QueryRefused
    kw = private_train_kw(8.0, K=3)
    ag = TrainingAgreement("gaussian", agents=3, max_train=20, train_kw=kw, epsilon=8.0)
    data = federation_data("gaussian", K=3, seed=0, n_train=20, n_cal=10, n_test=10)
    plans = {p.name: p.to_dict() for p in plan_tasks(ag.pred, ag.rat, 3, 10, 10, None)}
    plans["ratios"] = change(plans["ratios"])
    f = {"task": "regression", "y_mean": 0.0, "y_std": 1.0, "d": 10, "eps": ag.rat["eps"], "plans": plans,
         "predictor": None, "ratios": None,
         "ratio_std": {"mean": [0.0] * 10, "sd": [1.0] * 10} if ag.rat["standardize"] else None}
    msg = {"type": "Request", "stage": "features", "features": f}
    ctx = Context(run_id=1, node_id=1, node_config={"partition-id": 0}, state=RecordDict(), run_config={})
    with pytest.raises(QueryRefused, match="differs from the agreed one"):
        agent_query(ctx, data[0], 0, msg, pipe_content(msg), ag)


def test_the_budget_holds_across_runs_in_the_state_file(tmp_path):
    from common import setup, train
    from pfwcp_nb.query_policy import QueryRefused
    kw = private_train_kw(8.0, K=3)
    state = tmp_path / "agent_1.pipeline.json"
    data, ctxs, ag, plans, f = setup("gaussian", K=3, n_train=20, train_kw=kw, ks=(1,))
    ag.state, ag.epsilon = state, 10.0
    train(ctxs[1], data[1], 1, ag, plans, 1, {})
    first = json.loads(state.read_text())["epsilon"]
    assert 0 < first < 8.0
    data, ctxs, _, plans, f = setup("gaussian", K=3, n_train=20, train_kw=kw, ks=(1,))   # a second run: 2 x the rows' use
    with pytest.raises(QueryRefused, match="above its agreed budget 10"):
        train(ctxs[1], data[1], 1, ag, plans, 1, {})
    assert json.loads(state.read_text())["epsilon"] == first                    # nothing charged for a refusal


@pytest.mark.slow
def test_a_private_pipeline_over_flower_logs_every_agents_epsilon():
    from pfwcp_nb.federation.simulation import simulate_pipeline
    kw = private_train_kw(8.0, K=3)
    kw["predictor"]["epochs"], kw["ratios"]["epochs"] = 4, 4                    # a short private schedule (smaller epsilon)
    res = simulate_pipeline("gaussian", K=3, n_train=20, n_cal=30, n_test=40, train_kw=kw,
                            agreement={"epsilon": 8.0, "dp_seed": 1})
    line = [e for e in res.events if e.startswith("privacy:")]
    assert line and "DP-SGD by every agent" in line[0] and res.coverage is not None
    assert res.trained == [0, 1, 2]


# --- the membership attack (studies/redteam/attack_membership.py) -----------------------------------------------

def run_attack(*args):
    return subprocess.run([sys.executable, str(ROOT / "studies" / "redteam" / "attack_membership.py"), *args],
                          cwd=ROOT, capture_output=True, text=True)


def test_the_membership_attack_answers_help_and_refuses_bad_arguments():
    r = run_attack("--help")
    assert r.returncode == 0 and r.stdout.startswith("usage:")
    r = run_attack("--trials", "1")
    assert r.returncode == 2 and "usage:" in r.stderr


def test_the_membership_attack_wins_against_training_that_is_not_private():
    r = run_attack("--eps", "inf", "--trials", "10")
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout.splitlines()[0])
    assert row["advantage"] == 1.0                          # every member told from its non-member, from one round


@pytest.mark.slow
def test_the_membership_attack_is_held_at_the_default_private_setting():
    r = run_attack("--eps", "8", "--trials", "1000")
    assert r.returncode == 0, r.stdout + r.stderr            # advantage <= 0.1 from one round


# --- the study (studies/privacy/run.py) ---------------------------------------------------------------------------

def run_study(*args):
    return subprocess.run([sys.executable, str(ROOT / "studies" / "privacy" / "run.py"), *args], cwd=ROOT,
                          capture_output=True, text=True)


def test_the_study_tables_read_the_stored_results_and_bad_arguments_exit_2():
    for t in ("setups", "coverage", "membership", "targets"):
        r = run_study("--table", t, "--dir", "results/privacy")
        assert r.returncode == 0 and r.stdout.startswith("| "), (t, r.stderr)
    for bad in (["--n-sims", "0", "--out", "x"], ["--eps", "-1", "--out", "x"], []):
        r = run_study(*bad)
        assert r.returncode == 2 and "usage:" in r.stderr, bad


@pytest.mark.slow
def test_the_studys_smallest_run(tmp_path):
    r = run_study("--datasets", "gaussian", "--eps", "8", "--n-sims", "1", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    import pandas as pd
    s = pd.read_csv(tmp_path / "setups.csv")
    assert s.eps_test_agent.iloc[0] == pytest.approx(8.0, abs=1e-6) and len(pd.read_csv(tmp_path / "draws.csv")) == 6
