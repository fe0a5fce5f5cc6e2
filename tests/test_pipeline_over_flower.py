"The whole pipeline over Flower (`pfwcp_nb.federation`): agreement with the in-process pipeline, what leaves an agent, agents that drop out in training and in calibration, bad input, a curious server and a malicious agent."
import dataclasses
import io
import json
import logging
import re
import subprocess
import sys
import time
from pathlib import Path
import warnings

import numpy as np
import pytest
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Error, Message, RecordDict

from pfwcp_nb.data import make_federation
from pfwcp_nb.federation.protocol import PIPE, _pipe
from pfwcp_nb.federation.plan import TaskPlan, _settings, initial_networks, plan_tasks
from pfwcp_nb.federation.agreement import TrainingAgreement, agreed_policy
from pfwcp_nb.federation.agent import _check_orders, agent_query, agent_train, pipeline_client_app
from pfwcp_nb.federation.deploy import AGG_CAP, deployed_pipeline, pipeline_client, pipeline_run_config, write_node_data
from pfwcp_nb.federation.simulation import federation_data, simulate_pipeline
from pfwcp_nb.federation.training import PipelineConfig, pipeline_server
from pfwcp_nb.query_policy import QueryRefused
from pfwcp_nb.oneshot import OneShotPFWCP
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration
from pfwcp_nb.pipeline import sample_draw, train_setup

ROOT = Path(__file__).resolve().parents[1]
TK = {"predictor": {"epochs": 6}, "ratios": {"epochs": 5}}     # a few rounds: the schedule, not the accuracy, is tested
SIZES = dict(n_train=20, n_cal=30, n_test=40)


def in_process(K, seed=0, agents=None, dataset="gaussian", train_kw=TK, method="pfwcp", data_dir=None):
    "The in-process pipeline on the same data: trained setup, the draw, PFWCP (or osPFWCP) over `agents` (default all)."
    st = train_setup(dataset, seed=seed, K=K, n_train=SIZES["n_train"], train_kw=train_kw, need_localizer=False,
                     progress=False, data_dir=data_dir)
    fed = make_federation(dataset, "severe", K=K, seed=seed, data_dir=data_dir)
    dr = sample_draw(st, fed, 0, n_cal=SIZES["n_cal"], n_test=SIZES["n_test"], localize=False)["estimated"]
    ks = list(range(K)) if agents is None else agents
    Est = PFWCP if method == "pfwcp" else OneShotPFWCP
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = Est(0.1).calibrate([AgentCalibration(dr.cal_scores[k], dr.cal_weights[k]) for k in ks]).threshold(
            dr.test_weights[:, ks])
    return st, dr, q


def max_param_diff(a, b):
    with torch.no_grad():
        return max(float((p - q).abs().max()) for p, q in zip(a.parameters(), b.parameters()))


def recorder(path):
    "A client mod that appends every outgoing message (record names, config items, array names and shapes) to `path`."
    def mod(msg, context, call_next):
        reply = call_next(msg, context)
        recs = {}
        if not reply.has_error():
            for name, r in reply.content.items():
                if type(r).__name__ == "ConfigRecord":
                    recs[name] = {"kind": "config", "items": dict(r.items())}
                else:
                    recs[name] = {"kind": "arrays", "items": {k: list(v.numpy().shape) for k, v in r.items()}}
        with open(path, "a") as f:
            f.write(json.dumps({"agent": int(context.node_config["partition-id"]), "has_error": reply.has_error(),
                                "records": recs}) + "\n")
        return reply
    return mod


def fail(agent, stage, rounds=None):
    "A client mod: agent `agent` raises on the messages of `stage` ('train' in `rounds`, or a query stage, or 'message')."
    def mod(msg, context, call_next):
        if int(context.node_config["partition-id"]) == agent:
            c = msg.content
            if PIPE in c.config_records:
                d = json.loads(c.config_records[PIPE]["json"])
                if d.get("stage") == stage and (rounds is None or d.get("round") in rounds):
                    raise RuntimeError(f"simulated failure of agent {agent} at {stage}")
            elif stage == "message":
                raise RuntimeError(f"simulated failure of agent {agent} at calibration")
        return call_next(msg, context)
    return mod


def slow_at_calibration(agent, seconds):
    "A client mod: agent `agent` takes `seconds` to answer the calibration protocol's message request (a timeout)."
    def mod(msg, context, call_next):
        if int(context.node_config["partition-id"]) == agent and "pfwcp" in msg.content.config_records and \
                json.loads(msg.content.config_records["pfwcp"]["json"]).get("ask") == "message":
            time.sleep(seconds)
        return call_next(msg, context)
    return mod


@pytest.mark.slow
def test_simulation_agrees_with_in_process_survives_a_timeout_and_only_parameters_and_summaries_leave(tmp_path):
    # one real Flower simulation (Ray, two actors): K=3 agents, the gaussian pipeline with a few rounds; agent 2
    # answers the calibration's message request too late: the server calibrates again over agents 0 and 1
    K = 3
    log = tmp_path / "sent.jsonl"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = simulate_pipeline("gaussian", K=K, seed=0, train_kw=TK, actors=2, round_timeout=10,
                                client_mods=[recorder(str(log)), slow_at_calibration(2, 25)], **SIZES)
    st, dr, q = in_process(K, agents=[0, 1])
    # parameters: the ratio classifiers (FedAdam, full batch) bit for bit, the predictor (local Adam) within 1e-6
    assert max(max_param_diff(n, st.ratios[g + 1].nets[g]) for g, n in enumerate(res.ratio_nets)) == 0.0
    assert max_param_diff(res.predictor.model, st.predictor.model) <= 1e-6
    assert res.trained == [0, 1, 2] and res.agents == [0, 1]
    assert any(e.startswith("messages: agent 2") and "did not answer within 10" in e for e in res.events)
    assert ("calibration: agent(s) [2] answered the summary but not the messages round; Procedure 1 again over agents "
            "[0, 1] (their n_eff and aggregation weights)") in res.events
    np.testing.assert_allclose(res.thresholds, q, rtol=1e-6, atol=1e-6)
    assert res.coverage == pytest.approx(np.mean(dr.test_scores <= q))
    # what left the agents: model parameters, counts and protocol summaries, nothing of size n_train, n_cal or d x n
    shapes = {tuple(p.shape) for p in res.predictor.model.parameters()} | {tuple(p.shape) for p in res.ratio_nets[0].parameters()}
    d = 10
    lines = log.read_text().splitlines() if log.exists() else []
    assert lines, f"{log} is empty: the recorder saw no message, so the checks below would check nothing"
    seen = set()
    for line in lines:
        s = json.loads(line)
        assert not s["has_error"]
        for name, r in s["records"].items():
            seen.add(name)
            if r["kind"] == "arrays":
                for arr, shape in r["items"].items():
                    if name in ("pca",):
                        assert False, "no PCA on gaussian"
                    elif name == "test-weights":
                        assert s["agent"] == 0 and shape[0] == SIZES["n_test"]     # the protocol's test weights
                    else:
                        assert tuple(shape) in shapes, (name, arr, shape)          # a model parameter
            else:
                items = r["items"]
                if name == "pfwcp":                                                # calibration protocol (10_federation_protocol)
                    assert set(items) == {"json", "agent", "run", "nonce"}   # run, nonce: the request echoed
                    msg = json.loads(items["json"])
                    assert all(not isinstance(v, (list, dict)) for k, v in msg.items() if k != "quantiles")
                else:
                    assert name == PIPE and set(items) == {"json"}
                    msg = json.loads(items["json"])
                    allowed = {"type", "agent", "n_train", "n_ratio", "d", "n_cal", "n_test", "sum_y", "sum_y2", "round", "counts",
                               "m", "coverage", "mean_size", "infinite_share"}
                    assert set(msg) <= allowed, set(msg) - allowed
                    assert all(isinstance(v, (int, float, str, type(None))) or k == "counts" for k, v in msg.items())
                    assert all(isinstance(v, int) for v in msg.get("counts", {}).values())
    assert {"pfwcp", PIPE, "test-weights", "predictor-0", "ratios-0"} <= seen, seen   # every kind of answer was recorded


class InProcessGrid:
    "A Grid stand-in: delivers each message to the ClientApp of its node in this process, one persistent Context per node; the agents in `silent` never answer (a timeout)."
    def __init__(self, app, K, silent=None, node_config=None):
        self.app, self.silent = app, silent or (lambda k, msg: False)
        cfg = node_config or (lambda k: {})
        self.ctx = {100 + k: Context(run_id=1, node_id=100 + k, node_config={"partition-id": k, **cfg(k)},
                                     state=RecordDict(), run_config={}) for k in range(K)}

    def get_node_ids(self):
        return list(self.ctx)

    def send_and_receive(self, messages, timeout=None):
        out = []
        for msg in messages:
            ctx = self.ctx[msg.metadata.dst_node_id]
            if self.silent(int(ctx.node_config["partition-id"]), msg):
                continue
            try:
                out.append(self.app(msg, ctx))
            except Exception as e:                       # as Flower's runtime: the failure comes back as an Error
                out.append(Message(Error(code=0, reason=f"{type(e).__name__}: {e}"), reply_to=msg))
        return out


def run_in_process(K, mods=(), silent=None, dataset="gaussian", train_kw=TK, data_dir=None, policies=None,
                   agreements=None, data=None, **kw):
    """pipeline_server against the real ClientApp in this process; `policies` {agent: QueryPolicy} (default: the agreed
    one), `agreements` {agent: TrainingAgreement} (default: the server's dataset, seed 0 and train_kw); `data` the
    agents' AgentData (default `federation_data`)."""
    data = federation_data(dataset, K=K, seed=0, data_dir=data_dir, **SIZES) if data is None else data
    part = lambda ctx: int(ctx.node_config["partition-id"])
    pol = policies if policies is not None else {k: agreed_policy(k, 0.1, n1=SIZES["n_cal"], m=SIZES["n_test"])
                                                 for k in range(K)}
    agr = agreements if agreements is not None else {k: TrainingAgreement(dataset, 0, train_kw, agents=K, max_train=SIZES["n_train"]) for k in range(K)}
    app = pipeline_client_app(lambda ctx: data[part(ctx)], lambda ctx: pol[part(ctx)], lambda ctx: agr[part(ctx)],
                              mods=list(mods))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pipeline_server(InProcessGrid(app, K, silent), PipelineConfig(dataset, K, seed=0, train_kw=train_kw, **kw))


@pytest.mark.slow
def test_server_logic_equals_in_process_pipeline(task_identity):
    res = run_in_process(4)
    st, dr, q = in_process(4)
    assert max_param_diff(res.predictor.model, st.predictor.model) <= 1e-6
    np.testing.assert_allclose(res.thresholds, q, rtol=1e-6, atol=1e-6)
    assert res.ratio_steps == [5, 5, 5] and res.rounds == 6


def test_pca_features_and_the_one_shot_method_agree(task_identity):
    # federated PCA (moments, two projections of one SVD) for the predictor and the ratio classifiers; osPFWCP
    tk = {"predictor": {"epochs": 3, "pca": 0.9}, "ratios": {"epochs": 3, "pca": 0.6}}
    res = run_in_process(3, train_kw=tk, method="ospfwcp")
    st, dr, q = in_process(3, train_kw=tk, method="ospfwcp")
    assert res.predictor.pca.n_components == st.predictor.pca.n_components < 10
    np.testing.assert_allclose(res.predictor.pca.components, st.predictor.pca.components, rtol=1e-10, atol=1e-12)
    assert st.ratios[1].features.proj.n_components < res.predictor.pca.n_components
    assert max_param_diff(res.ratio_nets[0], st.ratios[1].nets[0]) <= 1e-6
    assert max_param_diff(res.predictor.model, st.predictor.model) <= 1e-6
    np.testing.assert_allclose(res.thresholds, q, rtol=1e-6, atol=1e-6)


def test_classification_on_images_agrees(task_identity, require_dataset):
    # cifar10c: PCA 0.90 of 3072 pixels, the (200, 100, 50) classifier with weight decay; prediction sets
    data_dir = require_dataset("cifar10c")
    tk = {"predictor": {"epochs": 2}, "ratios": {"epochs": 2}}
    res = run_in_process(3, dataset="cifar10c", train_kw=tk, data_dir=data_dir)
    st, dr, q = in_process(3, dataset="cifar10c", train_kw=tk, data_dir=data_dir)
    assert res.predictor.n_classes == st.predictor.n_classes == 10
    assert max_param_diff(res.predictor.model, st.predictor.model) <= 1e-5
    np.testing.assert_allclose(res.thresholds, q, rtol=1e-5, atol=1e-5)
    assert res.coverage == pytest.approx(np.mean(dr.test_scores[np.arange(len(q)), dr.test_labels] <= q))


def lose_reply(agent, rounds):
    "A client mod: agent `agent` does the work of training rounds `rounds`, but its reply is lost (an error comes back)."
    def mod(msg, context, call_next):
        reply = call_next(msg, context)
        if int(context.node_config["partition-id"]) == agent and PIPE in msg.content.config_records and \
                json.loads(msg.content.config_records[PIPE]["json"]).get("round") in rounds:
            raise RuntimeError(f"simulated failure of agent {agent} at train (reply lost)")
        return reply
    return mod


@pytest.mark.slow
def test_dropout_in_training_continues_with_those_that_answered(task_identity, caplog):
    # agent 2's replies of rounds 2 and 3 are lost: the predictor averages the other three (weighted by counts), agent
    # 2's ratio classifier skips those rounds; agent 2 is back from round 4 and calibrates with the others
    with caplog.at_level(logging.WARNING, logger="pfwcp_nb.federation.server"):
        res = run_in_process(4, mods=[lose_reply(2, {2, 3})])
    assert res.ratio_steps == [5, 3, 5]
    assert res.agents == [0, 1, 2, 3] and res.trained == [0, 1, 2, 3]
    assert any("training round 2: agent 2" in e and "simulated failure" in e for e in res.events)
    assert any("ratio classifier of agent 2 not updated" in e for e in res.events)
    assert "training round 3: agent 2" in caplog.text
    st, _, _ = in_process(4)
    assert max_param_diff(res.predictor.model, st.predictor.model) > 1e-4      # a different (3-agent) average
    assert np.all(np.isfinite(res.thresholds)) or res.coverage is not None
    # an agent that never saw round 2 cannot check the networks of round 4 against round 1's: it refuses the later
    # rounds and is left out after `drop_after` misses
    res = run_in_process(4, mods=[fail(2, "train", {2})], drop_after=3)
    assert res.trained == [0, 1, 3] and res.agents == [0, 1, 3]
    assert any("training round 3: agent 2" in e and "rounds come one after the other" in e for e in res.events)


def test_training_stops_below_the_minimum_and_drops_silent_agents(task_identity):
    with pytest.raises(RuntimeError, match="fewer than min_agents=4"):
        run_in_process(4, mods=[fail(3, "train", {1})], min_agents=4)
    # agent 3 never answers in training (a timeout each round): left out after 2 rounds, and of the calibration
    silent = lambda k, msg: k == 3 and PIPE in msg.content.config_records and \
        json.loads(msg.content.config_records[PIPE]["json"]).get("stage") == "train"
    res = run_in_process(4, silent=silent, drop_after=2, min_agents=2)
    assert res.trained == [0, 1, 2] and res.agents == [0, 1, 2]
    assert any("agent 3" in e and "did not answer" in e for e in res.events)
    assert any("missed 2 rounds in a row" in e for e in res.events)
    silent0 = lambda k, msg: k == 0 and PIPE in msg.content.config_records and \
        json.loads(msg.content.config_records[PIPE]["json"]).get("stage") == "train"
    with pytest.raises(RuntimeError, match="the test agent .agent 0. missed 2 rounds in a row"):
        run_in_process(4, silent=silent0, drop_after=2, min_agents=2)


@pytest.mark.slow
def test_dropout_in_calibration_recalibrates_over_the_others(task_identity):
    res = run_in_process(4, mods=[fail(3, "message")])
    assert res.agents == [0, 1, 2]
    assert any("summaries: agent 3" in e and "simulated failure" in e for e in res.events)
    _, _, q = in_process(4, agents=[0, 1, 2])            # PFWCP over the federation that answered
    np.testing.assert_allclose(res.thresholds, q, rtol=1e-6, atol=1e-6)
    assert len(res.n_eff) == 3 and sum(res.agg_weights) == pytest.approx(1.0)
    # the test agent is required
    with pytest.raises(RuntimeError, match="test agent"):
        run_in_process(4, mods=[fail(0, "message")])


def fail_at(agent, ask):
    "A client mod: agent `agent` fails on the calibration protocol's `ask` requests only (it answered the summary)."
    def mod(msg, context, call_next):
        if int(context.node_config["partition-id"]) == agent and "pfwcp" in msg.content.config_records and \
                json.loads(msg.content.config_records["pfwcp"]["json"]).get("ask") == ask:
            raise RuntimeError(f"simulated failure of agent {agent} at the {ask} round")
        return call_next(msg, context)
    return mod


@pytest.mark.slow
@pytest.mark.parametrize("method", ["pfwcp", "ospfwcp"])
def test_dropout_between_the_summary_and_the_message_round(task_identity, method):
    # agent 3 answers its summary, then fails at the message (one-shot) round: one log line names it and the round,
    # Procedure 1 runs again over agents 0-2 (their n_eff, their aggregation weights), and each agent is asked again
    # only if the level changed (its query policy's budget counts every answer)
    K, m = 4, SIZES["n_test"]
    pol = {k: agreed_policy(k, 0.1, n1=SIZES["n_cal"], m=m) for k in range(K)}
    res = run_in_process(K, mods=[fail_at(3, "message" if method == "pfwcp" else "oneshot")], policies=pol, method=method)
    stage = "messages" if method == "pfwcp" else "one-shot messages"
    assert (f"calibration: agent(s) [3] answered the summary but not the {stage} round; Procedure 1 again over agents "
            "[0, 1, 2] (their n_eff and aggregation weights)") in res.events
    assert any(e.startswith(f"{stage}: agent 3") and "simulated failure" in e for e in res.events)
    assert any(e.startswith("calibration: over agents [0, 1, 2] of the 4 trained, n_eff") for e in res.events)
    st, dr, q = in_process(K, agents=[0, 1, 2], method=method)
    np.testing.assert_allclose(res.thresholds, q, rtol=1e-6, atol=1e-6)
    assert res.agents == [0, 1, 2]
    cal = [AgentCalibration(dr.cal_scores[k], dr.cal_weights[k]) for k in range(K)]
    np.testing.assert_allclose(res.n_eff, [cal[k].summary().n_eff for k in range(3)], rtol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "pfwcp":
            four, three = (PFWCP(0.1).calibrate([c.summary() for c in cal[:j]]) for j in (4, 3))
            np.testing.assert_allclose(res.agg_weights, three.agg_weights_, rtol=1e-6)
            asked = 1 if three.beta_ == four.beta_ else 2           # a message at an unchanged level is reused
            assert [pol[k].used["test_weights"] for k in range(3)] == [asked * m] * 3
        else:
            assert sum(res.agg_weights) == pytest.approx(1.0) and len(res.agg_weights) == 3
            assert all(pol[k].used["oneshot"] in (1, 2) for k in range(3))
    assert pol[3].used["test_weights"] + pol[3].used["oneshot"] == 0     # it failed before its policy saw the request


@pytest.mark.slow
def test_a_request_outside_the_agreed_policy_is_refused_naming_the_agent(task_identity):
    # a server whose grid holds a level the agents never agreed to: every agent refuses before computing anything;
    # without the test agent's answer the run stops with an error that names it and the broken rule
    with pytest.raises(RuntimeError, match=r"messages: the test agent \(agent 0\) did not answer.*agent 0 refused the "
                                           r"server's request: request field `beta`=0\.3 is not a level of the agreed grid"):
        res = run_in_process(3, est_kw={"grid": (np.array([0.3]), np.array([0.0]))})
    # agent 2 agreed to fewer test weights than a run needs: it refuses, the others calibrate without it
    pol = {k: agreed_policy(k, 0.1, n1=SIZES["n_cal"], m=SIZES["n_test"]) for k in range(3)}
    pol[2] = agreed_policy(2, 0.1, m=SIZES["n_test"] - 1, runs=1)
    res = run_in_process(3, policies=pol)
    assert res.agents == [0, 1]
    assert any(e.startswith("messages: agent 2") and "agent 2 refused the server's request" in e
               and "left of this agent's budget" in e for e in res.events)
    assert pol[2].used["test_weights"] == 0 and pol[0].used["test_weights"] == pol[1].used["test_weights"] > 0


def test_bad_options():
    with pytest.raises(ValueError, match="not supported over Flower"):
        _settings("gaussian", {"predictor": {"device": "cuda"}})
    with pytest.raises(ValueError, match="only the paper's fixed"):
        _settings("gaussian", {"ratios": {"hparams": "calibrated"}})
    # the agents' query policy options are checked before Flower starts
    with pytest.raises(ValueError, match="`policy` must be a dict of `agreed_policy` options"):
        simulate_pipeline("gaussian", K=2, policy={"budget": 3}, **SIZES)
    with pytest.raises(ValueError, match="m"):
        simulate_pipeline("gaussian", K=2, policy={"m": 0}, **SIZES)


def tamper(agent, rnd):
    "A client mod: agent `agent`'s reply in training round `rnd` carries a parameter of the wrong shape."
    def mod(msg, context, call_next):
        reply = call_next(msg, context)
        if int(context.node_config["partition-id"]) == agent and PIPE in msg.content.config_records and \
                json.loads(msg.content.config_records[PIPE]["json"]).get("round") == rnd:
            rec = reply.content.array_records["predictor-0"]
            name = next(iter(rec.keys()))
            rec[name] = Array(np.zeros((3, 3), np.float32))
        return reply
    return mod


def test_server_refuses_invalid_answers_and_agents_refuse_invalid_plans(task_identity):
    res = run_in_process(3, mods=[tamper(1, 2)])
    assert any(e.startswith("training round 2: agent 1 sent an invalid answer") and "'0.weight'" in e for e in res.events)
    assert res.agents == [0, 1, 2]
    plan = plan_tasks(*_settings("gaussian", None), 3, 10, 10, None)[0].to_dict()
    for bad in ({"hidden": [10 ** 6]}, {"lr": -1.0}, {"loss": "hinge"}, {"members": "all"}):
        with pytest.raises(ValueError, match="agent 2: invalid task plan"):
            TaskPlan.from_dict({**plan, **bad}, "agent 2")
    with pytest.raises(ValueError, match="permutations of range"):
        _check_orders(np.array([[0, 0, 1]]), 1, 3, "agent 1")


@pytest.mark.slow
def test_deployed_apps_run_the_pipeline_from_node_files(task_identity, tmp_path, caplog):
    # the app components of a deployment: SuperNodes read their .npz, the ServerApp reads the run config
    K = 3
    paths = write_node_data(tmp_path / "nodes", federation_data("gaussian", K=K, seed=0, **SIZES))
    agreed = {"pipeline-dataset": "gaussian", "pipeline-train-kw": json.dumps(TK), "pipeline-agents": K,
              "pipeline-max-train": SIZES["n_train"]}
    grid = InProcessGrid(pipeline_client, K, node_config=lambda k: {"data-path": str(paths[k]), **agreed})
    out = tmp_path / "out.npz"
    rc = {"dataset": "gaussian", "agent-nodes": "100 101 102", "train-kw": json.dumps(TK), "out": str(out),
          "agent-max-train": " ".join([str(SIZES["n_train"])] * K), "agent-max-n": " ".join([str(SIZES["n_cal"])] * K),
          "score-range": "0 100"}      # gaussian: labels within about +-15, predictions near them
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        deployed_pipeline(grid, Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=rc))
    st, dr, q = in_process(K)
    with np.load(out) as z:
        np.testing.assert_allclose(z["thresholds"], q, rtol=1e-6, atol=1e-6)
        assert z["agents"].tolist() == [0, 1, 2]
        w = z["ratios-1/0.weight"]
        summary = json.loads(str(z["summary"]))
    np.testing.assert_array_equal(w, st.ratios[2].nets[1][0].weight.detach().numpy())
    assert summary["coverage"] == pytest.approx(np.mean(dr.test_scores <= q)) and summary["events"] == []
    bad = InProcessGrid(pipeline_client, K, node_config=lambda k: {"data-path": str(tmp_path / "missing.npz"), **agreed})
    with caplog.at_level(logging.WARNING, logger="pfwcp_nb.federation.server"), \
            pytest.raises(RuntimeError, match="the test agent .agent 0. did not answer"):
        deployed_pipeline(bad, Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=rc))
    assert "missing.npz does not exist" in caplog.text
    # the operator binds agents to nodes: a node that claims another agent's index is left out
    swapped = InProcessGrid(pipeline_client, K, node_config=lambda k: {"data-path": str(paths[k]), "partition-id": (k + 1) % K,
                                                                   **agreed})
    with pytest.raises(RuntimeError, match="the test agent .agent 0. did not answer"):
        deployed_pipeline(swapped, Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=rc))
    assert "node 100 (agent 0 by the operator's binding) reports agent index 1; left out" in caplog.text
    # the operator's cap on each agent's calibration points (run_config agent-max-n): agent 2 reports more, left out
    capped = InProcessGrid(pipeline_client, K, node_config=lambda k: {"data-path": str(paths[k]), **agreed,
                                                                      "pipeline-runs": 2})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        deployed_pipeline(capped, Context(run_id=1, node_id=0, node_config={}, state=RecordDict(),
                                          run_config={**rc, "agent-max-n": f"{SIZES['n_cal']} {SIZES['n_cal']} 10"}))
    with np.load(out) as z:
        summary = json.loads(str(z["summary"]))
        assert z["agents"].tolist() == [0, 1]
    assert any(e.startswith("summaries: agent 2 sent an invalid answer") and "above the operator's cap 10" in e
               for e in summary["events"])
    # the weight range in the pipeline's summary checks (as the calibration app's): agents 1 and 2 report a mean weight
    # W/n below the range agreed here, so their summaries are refused and the calibration is over agent 0 alone
    ranged = InProcessGrid(pipeline_client, K, node_config=lambda k: {"data-path": str(paths[k]), **agreed,
                                                                      "pipeline-runs": 3})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        deployed_pipeline(ranged, Context(run_id=1, node_id=0, node_config={}, state=RecordDict(),
                                          run_config={**rc, "weight-range": "1e3 1e6"}))
    with np.load(out) as z:
        summary = json.loads(str(z["summary"]))
        assert z["agents"].tolist() == [0]
    assert sum("outside the agreed range of n x the mean weight" in e for e in summary["events"]) == 2


def test_the_pipeline_app_names_its_score_range_and_checks_its_keys():
    rc = {"dataset": "gaussian", "agent-nodes": "1 2 3", "out": "x.npz"}
    with pytest.raises(ValueError, match="the dataset is a regression: state the label range"):
        pipeline_run_config(rc)                                  # a regression must name its score range
    with pytest.raises(ValueError, match="an infinite range is agreed only by its name"):
        pipeline_run_config({**rc, "score-range": "0 inf"})
    assert pipeline_run_config({**rc, "score-range": "unbounded"})["score-range"] == "unbounded"
    assert pipeline_run_config({**rc, "dataset": "cifar10c"})["agg-cap"] == AGG_CAP   # classification: (0, 1) by its task
    for key, bad in [("agg-cap", "x"), ("agg-cap", float("inf")), ("weight-range", "2 1"), ("weight-range", "0 5")]:
        with pytest.raises(ValueError, match=f"`{key}`"):
            pipeline_run_config({**rc, "score-range": "0 50", key: bad})


# ---- the red team's attacks (a curious server; a malicious agent): each one refused, or the agent left out

def set_up_agent(k=1, K=3, dataset="gaussian", train_kw=TK, seed=0):
    "Agent k's ClientApp state after an honest set-up (features message with the agreed plans); returns (ctx, data, agreement, plans)."
    data = federation_data(dataset, K=K, seed=0, **SIZES)
    ag = TrainingAgreement(dataset, seed, train_kw, agents=K, max_train=SIZES["n_train"])
    d = data[k].train_X.reshape(SIZES["n_train"], -1).shape[1]
    plans = plan_tasks(ag.pred, ag.rat, K, d, d, None)
    plans[1].members, plans[1].label = [[0, j] for j in range(1, K)], [[1, 0]] * (K - 1)
    f = {"task": "regression", "y_mean": 0.0, "y_std": 1.0, "d": d, "eps": ag.rat["eps"],
         "plans": {p.name: p.to_dict() for p in plans}, "predictor": None, "ratios": None, "ratio_std": None}
    ctx = Context(run_id=1, node_id=1, node_config={"partition-id": k}, state=RecordDict(), run_config={})
    msg = {"type": "Request", "stage": "features", "features": f}
    agent_query(ctx, data[k], k, msg, _pipe(msg), ag)
    return ctx, data[k], ag, {p.name: p for p in plans}, f


def train_request(plans, k, rnd, start, seed=0, tasks=("predictor", "ratios")):
    "A training request for agent k: `start` {task: list of {name: array} per federation} (None: the seeded networks)."
    arrs, info = {"orders": {}}, {}
    for t in tasks:
        p = plans[t]
        init = start.get(t) or initial_networks(p, seed)
        info[t] = {"plan": p.to_dict(), "lockstep": True}
        for g, _ in p.replicas(k):
            arrs[f"{t}-{g}"] = init[g]
            arrs["orders"][f"{t}-{g}"] = np.arange(SIZES["n_train"])[None, :]
    msg = {"type": "Request", "stage": "train", "round": rnd, "tasks": info}
    return msg, _pipe(msg, arrs)


def test_a_curious_server_cannot_change_the_agreed_plan_or_open_with_trap_parameters(task_identity):
    # the red team's row-recovery attack: a full-batch, 4096-unit plan without weight decay, then one round from
    # "trap" parameters; now the plan is refused at set-up and round 1 must start from the agreed seed's networks
    ctx, data, ag, plans, f = set_up_agent()
    trap = dataclasses.replace(plans["predictor"], hidden=(4096,), batch_size=10 ** 6, weight_decay=0.0)
    ctx2 = Context(run_id=2, node_id=1, node_config={"partition-id": 1}, state=RecordDict(), run_config={})
    msg = {"type": "Request", "stage": "features", "features": {**f, "plans": {**f["plans"], "predictor": trap.to_dict()}}}
    with pytest.raises(QueryRefused, match=r"agent 1: the server's predictor plan differs from the agreed one .*"
                                           r"hidden=\(4096,\) \(agreed \(30, 30\)\), batch_size=1000000 \(agreed 32\)"):
        agent_query(ctx2, data, 1, msg, _pipe(msg), ag)
    # nor invent members: the agreed federation is agents 0..K-1 (the second red team named agents 0..d, one
    # pairwise classifier per covariate, and read the test points out of one test-weights answer)
    fake = dataclasses.replace(plans["ratios"], members=[[0, j] for j in range(1, 11)], label=[[1, 0]] * 10)
    msg = {"type": "Request", "stage": "features", "features": {**f, "plans": {**f["plans"], "ratios": fake.to_dict()}}}
    with pytest.raises(QueryRefused, match="federations are not the agreed ones"):
        agent_query(ctx2, data, 1, msg, _pipe(msg), ag)
    # the features message is answered once per run: the server cannot swap the plan after set-up
    msg = {"type": "Request", "stage": "features", "features": f}
    with pytest.raises(QueryRefused, match="'features' stage was answered 1 time"):
        agent_query(ctx, data, 1, msg, _pipe(msg), ag)
    # round 1 from crafted parameters (agreed shapes): refused before any local work
    crafted = [{n: np.full_like(a, 0.5) for n, a in net.items()} for net in initial_networks(plans["predictor"], 0)]
    msg, rd = train_request(plans, 1, 1, {"predictor": crafted})
    with pytest.raises(QueryRefused, match="networks of round 1 are not the ones the agreed seed 0 gives"):
        agent_train(ctx, data, 1, msg, rd, ag)
    # nor can it skip round 1 and open with crafted parameters in round 2
    ctx, data, ag, plans, f = set_up_agent()
    msg, rd = train_request(plans, 1, 2, {"predictor": crafted})
    with pytest.raises(QueryRefused, match=r"round 2 refused: rounds come one after the other"):
        agent_train(ctx, data, 1, msg, rd, ag)
    # the seeded networks: answered; the same round again, a round past the schedule, or another plan: refused
    ctx, data, ag, plans, f = set_up_agent()
    msg, rd = train_request(plans, 1, 1, {})
    reply = agent_train(ctx, data, 1, msg, rd, ag)
    assert json.loads(reply[PIPE]["json"])["counts"] == {"predictor-0": SIZES["n_train"], "ratios-0": SIZES["n_train"]}
    with pytest.raises(QueryRefused, match=r"round 1 refused: rounds come one after the other, from 1 .* to the agreed 6; the last this agent saw was 1"):
        agent_train(ctx, data, 1, msg, rd, ag)
    msg, rd = train_request(plans, 1, 7, {}, tasks=("predictor",))
    with pytest.raises(QueryRefused, match="round 7 refused"):
        agent_train(ctx, data, 1, msg, rd, ag)
    other = {**plans, "predictor": dataclasses.replace(plans["predictor"], batch_size=1)}
    msg, rd = train_request(other, 1, 2, {})
    with pytest.raises(QueryRefused, match="predictor plan of round 2 differs from the one agreed at set-up"):
        agent_train(ctx, data, 1, msg, rd, ag)


def test_a_curious_server_gets_models_test_weights_and_a_prediction_only_as_agreed(task_identity, tmp_path):
    # the red team read all hidden test labels with 600 `predict` queries and test_X with re-sent crafted ratio
    # networks: now models are accepted once per run, test weights and predictions `runs` times in all
    ctx, data, ag, plans, f = set_up_agent(k=0)
    models = {"predictor-0": initial_networks(plans["predictor"], 0)[0],
              **{f"ratios-{g}": net for g, net in enumerate(initial_networks(plans["ratios"], 0))}}
    q = lambda d, arrs=None, a=ag: agent_query(ctx, data, 0, d, _pipe(d, arrs), a)
    # models are the trained networks: none before training (a server cannot skip it and send crafted networks) ...
    with pytest.raises(QueryRefused, match="network 'predictor-0' of round 7, but the last one this agent saw is of round None"):
        q({"type": "Request", "stage": "models"}, models)
    for rnd in range(1, 7):                          # the agreed rounds (parameters kept: a move of 0)
        agent_train(ctx, data, 0, *train_request(plans, 0, rnd, {}, tasks=[t for t in plans if rnd <= plans[t].rounds]), ag)
    # ... nor far from the last networks the agent saw: one aggregation moves a coordinate at most round_move
    far = {**models, "ratios-1": {n: a + 0.05 for n, a in models["ratios-1"].items()}}
    with pytest.raises(QueryRefused, match=r"network 'ratios-1' moved a coordinate by 0.05 in 1 round\(s\); the agreed "
                                           r"schedule moves it at most 0.008 a round"):
        q({"type": "Request", "stage": "models"}, far)
    q({"type": "Request", "stage": "models"}, models)
    with pytest.raises(QueryRefused, match="last one this agent saw is of round -1"):     # models only once
        q({"type": "Request", "stage": "models"}, models)
    for bad in ([0, 1, 1], [0, 5], [1, 2], [0, 2, 1], [0, True]):
        with pytest.raises(ValueError, match="need 0, then distinct agents of the trained pairwise classifiers"):
            q({"type": "Request", "stage": "test-weights", "agents": bad}, a=TrainingAgreement("gaussian", 0, TK, runs=9, agents=3, max_train=20))
    q({"type": "Request", "stage": "test-weights", "agents": [0, 1, 2]})
    with pytest.raises(QueryRefused, match=r"'test-weights' stage was answered 1 time\(s\), the agreed `runs`=1 in all"):
        q({"type": "Request", "stage": "test-weights", "agents": [0, 1, 2]})
    th = {"thresholds": {"q": np.full(SIZES["n_test"], 1.0)}}
    with pytest.raises(ValueError, match=r"thresholds must be \(40,\), >= 0"):
        q({"type": "Request", "stage": "predict"}, {"thresholds": {"q": np.full(SIZES["n_test"], -np.inf)}},
          a=TrainingAgreement("gaussian", 0, TK, runs=9, agents=3, max_train=20))
    out = json.loads(q({"type": "Request", "stage": "predict"}, th)[PIPE]["json"])
    assert out["type"] == "Prediction" and 0 <= out["coverage"] <= 1
    with pytest.raises(QueryRefused, match="'predict' stage was answered 1 time"):
        q({"type": "Request", "stage": "predict"}, th)
    # deployed: the budget lives in a file, so a fresh run (a new Context) cannot ask again
    filed = TrainingAgreement("gaussian", 0, TK, runs=1, state=tmp_path / "budget.json", agents=3, max_train=20)
    for run in (1, 2):
        c = Context(run_id=run, node_id=1, node_config={"partition-id": 0}, state=RecordDict(), run_config={})
        msg = {"type": "Request", "stage": "features", "features": f}
        agent_query(c, data, 0, msg, _pipe(msg), filed)
        call = lambda: agent_query(c, data, 0, {"type": "Request", "stage": "predict"},
                                   _pipe({"type": "Request", "stage": "predict"}, th), filed)
        if run == 1:
            c.state["model-predictor-0"] = ctx.state["model-predictor-0"]
            call()
        else:
            with pytest.raises(QueryRefused, match="'predict' stage was answered 1 time"):
                call()


def npy_bomb():
    "An Array whose .npy header claims 10**12 float32 values and carries 16 bytes (the third red team's MemoryError)."
    f = io.BytesIO()
    np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (10 ** 12,)})
    return Array(dtype="float32", shape=(10 ** 12,), stype="numpy.ndarray", data=f.getvalue() + b"\0" * 16)


def rewrite(agent, stage, change):
    "A client mod: agent `agent`'s answer to `stage` (a pipeline stage, or 'train') goes through `change(json dict, reply)`, which returns the new JSON text or None (unchanged)."
    def mod(msg, context, call_next):
        reply = call_next(msg, context)
        if int(context.node_config["partition-id"]) != agent or reply.has_error() or PIPE not in msg.content.config_records:
            return reply
        if json.loads(msg.content.config_records[PIPE]["json"]).get("stage") == stage:
            text = change(json.loads(reply.content.config_records[PIPE]["json"]), reply)
            if text is not None:
                reply.content[PIPE] = ConfigRecord({"json": text})
        return reply
    return mod


@pytest.mark.parametrize("stage, change, why", [
    ("stats", lambda d, r: json.dumps(d).replace(str(d["sum_y"]), "NaN"), "holds the literal NaN"),
    ("stats", lambda d, r: json.dumps({**d, "sum_y": 1e300}), "need finite sums"),
    ("stats", lambda d, r: json.dumps({**d, "n_train": 10 ** 6}), r"n_train=1000000; need an integer in \[1, 20\]"),
    ("stats", lambda d, r: json.dumps({**d, "n_cal": True}), "n_cal=True"),
    ("stats", lambda d, r: json.dumps({**d, "n_test": "x"}), "n_test='x'"),
    ("train", lambda d, r: json.dumps({**d, "counts": list(d["counts"])}), "not a TrainReply"),
    ("train", lambda d, r: r.content.__setitem__("predictor-0", ArrayRecord(array_dict={
        k: Array(np.full(v.numpy().shape, 3e38, np.float32)) for k, v in r.content["predictor-0"].items()})),
     "above max_param=10000"),
    ("train", lambda d, r: r.content.__setitem__("predictor-0", ArrayRecord(array_dict={    # model replacement
        k: Array(np.full(v.numpy().shape, 1e4 if k.endswith("bias") else 0.0, np.float32))
        for k, v in r.content["predictor-0"].items()})), r"predictor-0 moved a coordinate by 1e\+04 in one round"),
    ("train", lambda d, r: r.content["predictor-0"].__setitem__("0.bias", npy_bomb()),     # a header claiming 4 TB
     r"array '0.bias' is float32 \(1000000000000,\) \(144 bytes\); expected float32"),
])
@pytest.mark.slow
def test_a_malicious_agent_is_left_out_and_the_run_goes_on(task_identity, stage, change, why):
    # the red team's malicious agent (NaN or huge sums, 10**6 training points, a list for counts, 3e38 parameters)
    # stopped the run or took 0.9999 of the FedAvg weight; now its answer is invalid, it is left out (training:
    # that round) and the run finishes with the others
    res = run_in_process(3, mods=[rewrite(2, stage, change)], max_train=[SIZES["n_train"]] * 3)
    assert any(re.search(r"(agent 2|node 102)\b.*sent an invalid answer", e) and re.search(why, e) for e in res.events), res.events
    assert res.agents[:2] == [0, 1] and res.thresholds is not None and np.all(res.thresholds >= 0)


def bad_r(R):
    "A client mod: agent 2 answers the PCA request with the factor R."
    def mod(msg, context, call_next):
        reply = call_next(msg, context)
        if int(context.node_config["partition-id"]) == 2 and "pca" in reply.content.array_records and \
                json.loads(msg.content.config_records[PIPE]["json"]).get("stage") == "pca":
            reply.content["pca"] = ArrayRecord(array_dict={"R": Array(R)})
        return reply
    return mod


@pytest.mark.parametrize("R, why", [(np.triu(np.full((10, 10), 1e200)), "above 1e125"), (np.eye(10) * (1 + 1j), "complex"),
                                    (np.ones((20000, 10)), r"array 'R' is float64 \(20000, 10\) \(1600128 bytes\); expected float64 \(10, 10\)")])
def test_an_invalid_pca_factor_leaves_the_agent_out_and_the_pca_is_asked_again(task_identity, R, why):
    tk = {"predictor": {"epochs": 3, "pca": 0.9}, "ratios": {"epochs": 3, "pca": 0.6}}
    res = run_in_process(3, mods=[bad_r(R)], train_kw=tk, max_train=[SIZES["n_train"]] * 3)
    assert any(e.startswith("pca: agent 2 sent an invalid answer") and re.search(why, e) for e in res.events), res.events
    assert "pca: agent(s) [2] left out; the PCA again over agents [0, 1]" in res.events
    assert res.trained == [0, 1] and res.agents == [0, 1]
    st, _, _ = in_process(3, train_kw=tk, agents=[0, 1])
    assert res.predictor.pca.n_components >= 1 and np.all(np.isfinite(res.predictor.pca.components))


def test_a_far_mean_poisons_the_pca_but_does_not_stop_the_run(task_identity):
    # the second red team stopped the run with one agent's sum of covariates at 1e100 per point (allowed): the pooled
    # mean moved so far that every honest R factor failed its bound, the test agent's too; the bound now allows for it
    def far(msg, context, call_next):
        reply = call_next(msg, context)
        if int(context.node_config["partition-id"]) == 2 and "pca" in reply.content.array_records and \
                json.loads(msg.content.config_records[PIPE]["json"]).get("stage") == "stats":
            reply.content["pca"] = ArrayRecord(array_dict={"sum_x": Array(np.full(10, 1e100 * SIZES["n_train"]))})
        return reply
    tk = {"predictor": {"epochs": 3, "pca": 0.9}, "ratios": {"epochs": 3, "pca": 0.6}}
    res = run_in_process(3, mods=[far], train_kw=tk, max_train=[SIZES["n_train"]] * 3)
    assert res.agents == [0, 1, 2] and res.thresholds is not None     # poisoned (FedAvg is not robust), not stopped


def test_the_attacks_script_refuses_bad_arguments():
    r = subprocess.run([sys.executable, str(ROOT / "studies" / "flower_pipeline" / "flower_pipeline_attacks.py"), "--bogus"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "usage:" in r.stderr


# ---- every covariate an agent holds feeds its ratios: unlabelled pools, and the standardised ratio features
from pfwcp_nb.models import training_seed
from pfwcp_nb.ratio_fit import fit_density_ratios, ratio_data

POOL = 15     # unlabelled covariates of agent k: POOL + 5 k (different counts: the FedAvg weights must follow them)


def pooled_data(K, scale=1.0):
    "`federation_data` with an unlabelled pool per agent (each agent's own shift, a separate stream), the first covariate x `scale`."
    fed = make_federation("gaussian", "severe", K=K, seed=0)
    rng = np.random.default_rng(77)
    data = [dataclasses.replace(d, pool_X=fed.sample(k, POOL + 5 * k, rng)[0])
            for k, d in enumerate(federation_data("gaussian", K=K, seed=0, **SIZES))]
    s = np.r_[scale, np.ones(9)]
    return [dataclasses.replace(d, train_X=d.train_X * s, cal_X=d.cal_X * s, pool_X=d.pool_X * s,
                                test_X=None if d.test_X is None else d.test_X * s) for d in data]


def run_pooled(K, data, train_kw, mods=()):
    ag = {k: TrainingAgreement("gaussian", 0, train_kw, agents=K, max_train=SIZES["n_train"] + POOL + 5 * K) for k in range(K)}
    return run_in_process(K, mods=mods, data=data, train_kw=train_kw, agreements=ag)


@pytest.mark.parametrize("standardize", [False, True])
def test_pools_and_standardised_ratio_features_agree_with_in_process(task_identity, standardize):
    """Over Flower each agent's ratio covariates are its training points and its pool; with standardize=True one more
    set-up round pools their moments. The ratio classifiers equal `fit_density_ratios(ratio_data(train, pool))` in
    process within 1e-6 (FedAdam, full batch: bit for bit here), and so do the thresholds (the predictor as before)."""
    K, scale = 3, (1e4 if standardize else 1.0)
    data = pooled_data(K, scale)
    tk = {"predictor": {"epochs": 6}, "ratios": {"epochs": 5, "standardize": standardize}}
    log = []
    def stages(msg, ctx, call_next):          # a client mod: the set-up stages each agent was asked
        if PIPE in msg.content.config_records:
            log.append(json.loads(msg.content.config_records[PIPE]["json"]).get("stage"))
        return call_next(msg, ctx)
    res = run_pooled(K, data, tk, mods=[stages])
    ref = fit_density_ratios(ratio_data([d.train_X for d in data], [d.pool_X for d in data]), seed=training_seed(0, 0),
                             dataset="gaussian", epochs=5, standardize=standardize, progress=False)
    assert max(max_param_diff(n, ref[g + 1].nets[g]) for g, n in enumerate(res.ratio_nets)) <= 1e-6
    assert ("ratio-moments" in log) is standardize
    no_pool = fit_density_ratios([d.train_X for d in data], seed=training_seed(0, 0), dataset="gaussian", epochs=5,
                                 standardize=standardize, progress=False)
    assert max(max_param_diff(n, no_pool[g + 1].nets[g]) for g, n in enumerate(res.ratio_nets)) > 1e-4   # the pools count
    # the thresholds: the agents' scores under the trained predictor and these weights, calibrated in process
    cal = [AgentCalibration(res.predictor.scores(d.cal_X, d.cal_y), None if k == 0 else ref[k](d.cal_X)) for k, d in enumerate(data)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = PFWCP(0.1).calibrate(cal).threshold(np.column_stack([r(data[0].test_X) for r in ref]))
    np.testing.assert_allclose(res.thresholds, q, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("change, why", [
    (lambda d, r: json.dumps({**d, "n": d["n"] + 1}), r"agent 2 \(node 102\): count n=\d+ but the agent holds \d+"),
    (lambda d, r: json.dumps({**d, "sum_sq_dev": [-1.0] * 10}), "'sum_sq_dev' has negative entries"),
    (lambda d, r: json.dumps({**d, "sum": d["sum"][:3]}), "field 'sum' must be 10 finite numbers"),
    (lambda d, r: json.dumps({**d, "sum": [1e309] * 10}), "field 'sum' must be 10 finite numbers|literal"),
    (lambda d, r: json.dumps({**d, "extra": 1}), "not a RatioMoments answer"),
])
def test_a_malicious_agent_in_the_standardisation_round_is_left_out(task_identity, change, why):
    "An invalid ratio-moments record (counts that differ from the stats, negative or missing sums, another field) leaves its agent out, named; the run goes on."
    tk = {"predictor": {"epochs": 3}, "ratios": {"epochs": 3, "standardize": True}}
    res = run_pooled(3, pooled_data(3), tk, mods=[rewrite(2, "ratio-moments", change)])
    assert any(e.startswith("ratio-moments: agent 2 sent an invalid answer") and re.search(why, e) for e in res.events), res.events
    assert res.trained == [0, 1] and res.agents == [0, 1] and res.thresholds is not None


def test_standardize_over_flower_is_agreed_and_checked():
    with pytest.raises(ValueError, match="standardize']='yes'"):
        TrainingAgreement("gaussian", train_kw={"ratios": {"standardize": "yes"}}, agents=3, max_train=20)
    with pytest.raises(ValueError, match="not implemented over Flower"):
        PipelineConfig("cifar10c", 3, train_kw={"ratios": {"standardize": True}})
    assert PipelineConfig("gaussian", 3).rat["standardize"] is False          # the paper's, as train_setup


def test_node_files_carry_the_pool(tmp_path):
    "`write_node_data` writes an agent's pool_X (when it holds one) and `load_node_data` reads it back; none: None."
    from pfwcp_nb.federation.deploy import load_node_data
    data = pooled_data(2)
    data[0] = dataclasses.replace(data[0], pool_X=None)
    paths = write_node_data(tmp_path, data)
    ctx = lambda k: Context(run_id=1, node_id=1, node_config={"partition-id": k, "data-path": str(paths[k]),
                                                         "pipeline-dataset": "gaussian", "pipeline-agents": 2,
                                                         "pipeline-max-train": 100},
                            state=RecordDict(), run_config={})
    np.testing.assert_array_equal(load_node_data(ctx(1)).pool_X, data[1].pool_X)
    assert load_node_data(ctx(0)).pool_X is None and load_node_data(ctx(0)).test_X is not None


@pytest.mark.slow
def test_simulated_flower_gives_the_in_process_ratios_with_pools_and_standardisation():
    "Flower's simulation engine (Ray) with pools and standardize=True: the ratio classifiers of `fit_density_ratios(ratio_data(...))` within 1e-6."
    K = 3
    data = pooled_data(K, scale=1e4)
    tk = {"predictor": {"epochs": 3}, "ratios": {"epochs": 5, "standardize": True}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = simulate_pipeline("gaussian", K=K, seed=0, train_kw=tk, data=data, actors=2)
    ref = fit_density_ratios(ratio_data([d.train_X for d in data], [d.pool_X for d in data]), seed=training_seed(0, 0),
                             dataset="gaussian", epochs=5, progress=False)
    assert res.trained == [0, 1, 2]
    assert max(max_param_diff(n, ref[g + 1].nets[g]) for g, n in enumerate(res.ratio_nets)) <= 1e-6
