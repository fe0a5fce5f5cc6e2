"PFWCP / osPFWCP over Flower (`pfwcp_nb.federation`): exact equality with the in-process estimators, what leaves a client, bad input, the optional extra, the localhost deployment (slow)."
import json
import re
import os
import shutil
import subprocess
import sys
import tomli
import warnings
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
from flwr.app import Context, RecordDict

from pfwcp_nb.federation import deploy, simulation
from pfwcp_nb.federation.protocol import PROTOCOLS, pack, request, unpack
from pfwcp_nb.federation.agent import agent_client_app, agent_reply
from pfwcp_nb.federation.server import capped_agg_weights, collect_summaries, robust_aggregate, thresholds_over_flower
from pfwcp_nb.federation.simulation import simulate_many
from pfwcp_nb.query_policy import QueryPolicy, QueryRefused
from pfwcp_nb.oneshot import OneShotMessage, OneShotPFWCP
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration, AgentMessage, AgentSummary

ROOT = Path(__file__).resolve().parents[1]
MESSAGE_FIELDS = {c.__name__: {f.name for f in fields(c)} for c in (AgentSummary, AgentMessage, OneShotMessage)}


def federation(seed, K, n, m):
    "Random scores/weights, agent 0 the test agent; the first test points are so atypical that agents answer +inf."
    rng = np.random.default_rng(seed)
    scores = [rng.gamma(2.0, size=n) * (1 + 0.1 * k) for k in range(K)]
    weights = [np.ones(n)] + [rng.lognormal(0, 1, size=n) for _ in range(K - 1)]
    tw = rng.lognormal(0, 1, size=(m, K))
    tw[:, 0] = 1.0
    tw[:4, 1:] *= 1e4
    return scores, weights, tw


def in_process(scores, weights, tw, method, delta, **kw):
    agents = [AgentCalibration(s, w) for s, w in zip(scores, weights)]
    Est = PFWCP if method == "pfwcp" else OneShotPFWCP
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Est(0.1, delta, **kw).calibrate(agents).threshold(tw)


def deployed_in_process(scores, weights, tw, method, delta):
    "The in-process estimator at the deployed defaults: weights capped at agg-cap, PFWCP's answers read at answer-bound."
    agents = [AgentCalibration(s, w) for s, w in zip(scores, weights)]
    robust = capped_agg_weights([a.summary() for a in agents], deploy.AGG_CAP)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method != "pfwcp":
            return OneShotPFWCP(0.1, delta, agg_weights=robust).calibrate(agents).threshold(tw)
        mo = PFWCP(0.1, delta, agg_weights=robust).calibrate(agents)
        return robust_aggregate(mo.messages(tw), mo.agg_weights_, mo.tau_, deploy.ANSWER_BOUND)


def recorder(path):
    "A Flower client mod that appends every outgoing message's content (all records, all values) to `path`."
    def mod(msg, context, call_next):
        reply = call_next(msg, context)
        rec = {name: {"kind": type(r).__name__, "items": dict(r.items()) if type(r).__name__ == "ConfigRecord" else
                      {k: str(v) for k, v in r.items()}} for name, r in reply.content.items()}
        with open(path, "a") as f:
            f.write(json.dumps({"has_error": reply.has_error(), "records": rec}) + "\n")
        return reply
    return mod


@pytest.mark.slow
def test_simulate_equals_in_process_and_only_protocol_fields_leave_the_clients(tmp_path):
    # one Flower simulation: both methods, MC and CCC, +inf answers; every outgoing client message recorded
    K, n, m = 4, 37, 23                                      # n != m: a score array would show up as n numbers
    scores, weights, tw = federation(0, K, n, m)
    runs = [dict(method=me, delta=de) for me in PROTOCOLS for de in (None, 0.1)]
    log = tmp_path / "sent.jsonl"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = simulate_many(scores, weights, tw, runs, client_mods=[recorder(str(log))])
    n_inf = 0
    for r, q in zip(runs, got):
        ref = in_process(scores, weights, tw, r["method"], r["delta"])
        np.testing.assert_array_equal(q, ref)                # exact, +inf included
        n_inf += int(np.isinf(q).sum())
    assert n_inf > 0, "the inputs must exercise +inf thresholds"

    sent = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(sent) == K * (1 + len(runs))                  # summaries once, then one reply per agent per run
    kinds = {}
    for s in sent:
        assert not s["has_error"]
        assert set(s["records"]) == {"pfwcp"}                # one record, nothing else (no ArrayRecord, MetricRecord)
        rec = s["records"]["pfwcp"]
        assert rec["kind"] == "ConfigRecord" and set(rec["items"]) == {"json", "agent", "run", "nonce"}   # run, nonce: echoed
        d = json.loads(rec["items"]["json"])
        assert set(d) == {"type", "version"} | MESSAGE_FIELDS[d["type"]]
        kinds[d["type"]] = kinds.get(d["type"], 0) + 1
        for key, v in d.items():
            if key == "quantiles":
                assert len(v) == m                           # one quantile per requested test point
            else:
                assert not isinstance(v, (list, dict))       # scalars only
    assert kinds == {"AgentSummary": K, "AgentMessage": 2 * K, "OneShotMessage": 2 * K}


def test_simulate_is_simulate_many_with_one_run(monkeypatch):
    seen = {}
    def fake(scores, weights, test_weights, runs, **kw):
        seen.update(runs=runs, kw=kw)
        return [np.zeros(2)]
    monkeypatch.setattr(simulation, "simulate_many", fake)
    simulation.simulate([[1.0]], [None], np.ones((2, 1)), 0.2, 0.05, method="ospfwcp", n_steps=7)
    assert seen["runs"] == [dict(alpha=0.2, delta=0.05, method="ospfwcp", n_steps=7)]
    assert seen["kw"] == dict(actors=1, timings=None)


class InProcessGrid:
    "A Grid stand-in that delivers each message to the ClientApp of its node, in this process."
    def __init__(self, app, index_of_node, tamper=None):
        self.app, self.index_of_node, self.tamper = app, index_of_node, tamper

    def get_node_ids(self):
        return list(self.index_of_node)

    def send_and_receive(self, messages, timeout=None):
        out = []
        for msg in messages:
            node = msg.metadata.dst_node_id
            ctx = Context(run_id=1, node_id=node, node_config={"partition-id": self.index_of_node[node]},
                          state=RecordDict(), run_config={})
            rep = self.app(msg, ctx)
            out.append(rep if self.tamper is None else self.tamper(node, rep))
        return out


def policies_for(K, **kw):
    "Default query policies (the paper's grid at alpha 0.1), one per agent, agent 0 the test agent."
    return [QueryPolicy(test_agent=(k == 0), **kw) for k in range(K)]


def client_for(agents, policies=None):
    "The real ClientApp over in-memory agents and their policies (node_config partition-id = index)."
    policies = policies_for(len(agents)) if policies is None else policies
    part = lambda ctx: int(ctx.node_config["partition-id"])
    return agent_client_app(lambda ctx: agents[part(ctx)], lambda ctx: policies[part(ctx)])


@pytest.mark.parametrize("seed", range(3))
def test_server_logic_with_the_real_client_app(task_identity, seed):
    # the ServerApp's steps against the real ClientApp (no Ray): node ids in any order, agents found by index
    rng = np.random.default_rng(seed)
    K = int(rng.integers(1, 6))
    scores, weights, tw = federation(seed, K, int(rng.integers(5, 60)), 17)
    agents = [AgentCalibration(s, w) for s, w in zip(scores, weights)]
    node_ids = rng.permutation(1000)[:K] + 1
    grid = InProcessGrid(client_for(agents), {int(nid): k for k, nid in enumerate(node_ids)})
    nodes, summ = collect_summaries(grid, K)
    assert nodes == [int(x) for x in node_ids]
    for me in PROTOCOLS:
        for de in (None, 0.1):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                q = thresholds_over_flower(grid, nodes, summ, tw, 0.1, de, method=me)
            np.testing.assert_array_equal(q, in_process(scores, weights, tw, me, de))


def test_server_refuses_bad_agent_indices(task_identity):
    agents = [AgentCalibration(np.arange(5.0)) for _ in range(3)]
    app = client_for(agents * 2)
    with pytest.raises(ValueError, match="partition-id 0..2, once each"):
        collect_summaries(InProcessGrid(app, {1: 0, 2: 1, 3: 5}), 3)
    with pytest.raises(TimeoutError, match="2 of K=3"):
        collect_summaries(InProcessGrid(app, {1: 0, 2: 1}), 3, timeout=0.2)
    with pytest.raises(ValueError, match="method"):
        thresholds_over_flower(InProcessGrid(app, {1: 0}), [1], [agents[0].summary()], np.ones((2, 1)), method="fcp")


def test_agent_reply_is_the_agent_message():
    rng = np.random.default_rng(3)
    a = AgentCalibration(rng.normal(size=30), rng.lognormal(size=30))
    pol = QueryPolicy(levels=[0.15])
    assert agent_reply(a, request("summary"), pol) == a.summary().to_dict()
    got = agent_reply(a, request("message", beta=0.15, test_weights=[0.0, 2.0, 1e8]), pol)
    assert got == a.message(0.15, [0.0, 2.0, 1e8]).to_dict() and got["quantiles"][-1] == "inf"
    assert agent_reply(a, request("oneshot", beta_breve=0.1), pol) == a.oneshot_message(0.1).to_dict()
    d, agent = unpack(pack(got, agent=4))
    assert (d, agent) == (got, 4)


@pytest.mark.parametrize("req, match", [
    ({"type": "Request", "version": 99, "ask": "summary"}, "version 99"),
    ({"type": "AgentSummary", "version": 1}, "not a pfwcp Request"),
    ({"type": "Request", "version": 1, "ask": "scores", "run": "0", "nonce": "0" * 32}, "is not a pfwcp request"),
    ({"type": "Request", "version": 1, "ask": "summary", "run": 3, "nonce": "0" * 32}, "a Flower run id in decimal"),
    ("summary", "not a pfwcp Request"),
])
def test_agent_reply_bad_requests(req, match):
    with pytest.raises(ValueError, match=match):
        agent_reply(AgentCalibration([1.0, 2.0]), req, QueryPolicy())


def test_request_and_unpack_bad_input():
    with pytest.raises(ValueError, match="beta_breve"):
        request("oneshot")
    with pytest.raises(ValueError, match="one of"):
        request("covariates")
    with pytest.raises(ValueError, match="no ConfigRecord 'pfwcp'"):
        unpack(RecordDict())


GOOD = dict(scores=[[1.0, 2.0], [3.0]], weights=[None, [1.0]], test_weights=np.ones((3, 2)), runs=[dict(method="pfwcp")])


@pytest.mark.parametrize("change, match", [
    (dict(weights=[None]), "one entry per agent"),
    (dict(test_weights=np.ones((3, 5))), "shape"),
    (dict(runs=[dict(method="fwcp")]), "method"),
    (dict(scores=[[1.0, 2.0], [np.nan]]), "NaN"),
    (dict(weights=[None, [-1.0]]), "weights"),
    (dict(actors=0), "actors"),
])
def test_simulate_many_bad_input_fails_before_starting_flower(change, match):
    with pytest.raises(ValueError, match=match):
        simulate_many(**{**GOOD, **change})


@pytest.mark.slow
@pytest.mark.parametrize("module", ["protocol", "agreement", "agent", "server", "training", "simulation", "deploy"])
def test_without_flwr_the_import_names_the_extra(module):
    code = "import sys; sys.modules['flwr'] = None; import pfwcp_nb.federation." + module
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode != 0
    assert "ImportError" in r.stderr and 'pip install "pfwcp_nb[flower]"' in r.stderr
    assert 'pip install -e ".[flower]" from a clone' in r.stderr


def test_deploy_script_bad_arguments():
    for args in (["--agents", "1"], ["--test-points", "x"], ["--nope"], ["--agents"]):
        r = subprocess.run(["bash", str(ROOT / "scripts/flower_deploy.sh"), *args], capture_output=True, text=True)
        assert r.returncode == 2 and "usage:" in r.stderr


@pytest.mark.slow
def test_deploy_script_tls_auth_rogue_node_control_api_and_foreign_app_refused(tmp_path, run_deploy_script):
    # the deployment end to end (a few minutes): TLS, SuperNode authentication, a refused unregistered SuperNode,
    # the Control API refused through the agents' address (the Fleet-only proxy), a foreign app refused by a
    # resident agent's own ClientApp though it carries this package's publisher and name (the default --isolation
    # process), and the thresholds equal to the in-process estimators
    keep = tmp_path / "deploy"
    rc, out, err = run_deploy_script(["--agents", "3", "--test-points", "6", "--rogue", "--foreign", "--keep", str(keep)],
                                     timeout=1200)
    assert rc == 0, out + err
    assert "TLS, SuperNode authentication" in out
    assert "unregistered SuperNode: refused" in out
    assert "Control API through the agents' address: refused" in out
    assert "foreign app (publisher/name pfwcp-nb's own): refused by the resident agent's own ClientApp" in out
    assert out.count("(== in process: True)") == 4
    # each agent's query policy counted what it answered: 2 PFWCP runs x 6 test weights, 2 one-shot messages
    for k in range(3):
        used = json.loads((keep / "data" / f"agent_{k}.npz.queries.json").read_text())
        assert (used["test_weights"], used["oneshot"]) == (12, 2)
    # every process it started is gone: no SuperLink/SuperNode/proxy still holds the work dir's files
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(keep) not in ps
    shutil.rmtree(keep)


def _run_in_process(monkeypatch):
    "Replace Flower's simulation engine by InProcessGrid: the ServerApp's main against the real ClientApp, no Ray."
    seen = {}
    def fake_run_simulation(server, client, num_supernodes, backend_config):
        seen["K"] = num_supernodes
        grid = InProcessGrid(client, {100 + k: k for k in range(num_supernodes)})
        server(grid, Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={}))
    monkeypatch.setattr(simulation, "run_simulation", fake_run_simulation)
    return seen


@pytest.mark.parametrize("method", PROTOCOLS)
def test_simulate_weights_none_means_ones_for_every_agent(task_identity, monkeypatch, method):
    seen = _run_in_process(monkeypatch)
    scores, _, tw = federation(5, 3, 40, 9)
    ones = [np.ones(len(s)) for s in scores]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q_none = simulation.simulate(scores, None, tw, 0.1, 0.1, method=method)
        q_entries = simulation.simulate(scores, [None] * 3, tw, 0.1, 0.1, method=method)
    assert seen["K"] == 3
    np.testing.assert_array_equal(q_none, in_process(scores, ones, tw, method, 0.1))
    np.testing.assert_array_equal(q_entries, q_none)


def _deployment(tmp_path, seed=6, K=3, m=7):
    scores, weights, tw = federation(seed, K, 30, m)
    np.save(tmp_path / "tw.npy", tw)
    agents = [AgentCalibration(s, w) for s, w in zip(scores, weights)]
    grid = InProcessGrid(client_for(agents), {7 + k: k for k in range(K)})
    return scores, weights, tw, grid


def test_deployed_main_with_only_the_required_run_config(task_identity, tmp_path):
    "A hand-written app config with the required keys and a named score range: the rest take their defaults."
    scores, weights, tw, grid = _deployment(tmp_path)
    rc = {"test-weights": str(tmp_path / "tw.npy"), "out": str(tmp_path / "q.npz"), "agent-nodes": "7 8 9",
          "agent-max-n": "30 30 30", "score-range": "unbounded"}      # agg-cap and answer-bound at their defaults
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        deploy.deployed_main(grid, Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=rc))
    got = np.load(tmp_path / "q.npz")
    runs = ["ospfwcp-ccc", "ospfwcp-mc", "pfwcp-ccc", "pfwcp-mc"]
    assert sorted(got.files) == sorted(["events"] + runs + [f"{r}-agents" for r in runs])
    assert json.loads(str(got["events"])) == []                      # nobody left out
    for me in PROTOCOLS:
        for cr, de in (("mc", None), ("ccc", deploy.RUN_CONFIG["delta"][0])):
            np.testing.assert_array_equal(got[f"{me}-{cr}"], deployed_in_process(scores, weights, tw, me, de))
            np.testing.assert_array_equal(got[f"{me}-{cr}-agents"], [0, 1, 2])


@pytest.mark.parametrize("rc, match", [
    ({"test-weights": "tw.npy", "agent-nodes": "1 2", "agent-max-n": "5 5"}, r"missing required key\(s\) \['out'\]"),
    ({"test-weights": "tw.npy", "agent-nodes": "1 2", "out": "q.npz"}, r"missing required key\(s\) \['agent-max-n'\]"),
    ({"test-weights": "tw.npy", "out": "q.npz", "agent-nodes": "1", "agent-max-n": "5", "node_timeout": 5.0},
     "unknown key.*node_timeout"),
])
def test_run_config_bad_keys_are_named(rc, match):
    with pytest.raises(ValueError, match=match):
        deploy.run_config_values(rc)
    with pytest.raises(ValueError, match=match):
        deploy.app_pyproject(rc)


def test_every_run_config_key_has_a_default_or_is_required_and_documented():
    assert set(deploy.RUN_CONFIG) == {"alpha", "delta", "node-timeout", "test-weights", "out", "agent-nodes", "agent-max-n",
                                      "score-range", "weight-range", "agg-cap", "answer-bound"}
    assert all(isinstance(what, str) and what for _, what in deploy.RUN_CONFIG.values())
    assert deploy.run_config_values({"test-weights": "a", "out": "b", "agent-nodes": "3", "agent-max-n": "9"})["node-timeout"] == 120.0


def test_written_app_project_is_the_one_flwr_run_reads(tmp_path):
    rc = {"test-weights": str(tmp_path / 'we"ird path' / "tw.npy"), "out": "q.npz", "node-timeout": 300,
          "agent-nodes": "5 6", "agent-max-n": "40 40", "score-range": "0 10"}
    p = deploy.write_app_project(tmp_path / "app", rc)
    app = tomli.loads(p.read_text())
    assert app["tool"]["flwr"]["app"]["components"] == {"serverapp": "pfwcp_nb.federation.deploy:server_app",
                                                        "clientapp": "pfwcp_nb.federation.deploy:client_app"}
    assert app["tool"]["flwr"]["app"]["config"] == {**deploy.run_config_values(rc), "node-timeout": 300.0}
    # the deployment script writes its project with this function, not with a copy of the TOML
    script = (ROOT / "scripts/flower_deploy.sh").read_text()
    assert "write_app_project" in script and "pfwcp_nb.federation.deploy:server_app" not in script   # (its foreign app is not ours)


# ---------------------------------------------------------------- the first deployment's two bugs, options checked first
@pytest.mark.parametrize("run", [
    dict(method="pfwcp", select="finite-first"),
    dict(method="pfwcp", delta=0.1, select="fewest-infinite"),
    dict(method="pfwcp", delta=0.1, select="finite-first"),
    dict(method="pfwcp", grid=(np.linspace(0.1, 0.3, 5), np.array([0.0, 0.1, 0.2]))),
    dict(method="ospfwcp", beta_breve_rule="procedure1", grid=(np.linspace(0.1, 0.3, 5), np.array([0.0, 0.1]))),
])
def test_select_rules_and_grid_work_over_flower(task_identity, monkeypatch, run):
    # simulate's server logic against the real ClientApp and the agreed policies (Flower's engine replaced, no Ray)
    seen = _run_in_process(monkeypatch)
    scores, weights, tw = federation(0, 4, 40, 15)
    tw[4:, 1:] *= np.geomspace(1, 3000, 11)[:, None]        # test points spread over several cells of the grid
    opts = {k: v for k, v in run.items() if k not in ("method", "delta")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = simulation.simulate(scores, weights, tw, 0.1, run.get("delta"), method=run["method"], **opts)
        ref = in_process(scores, weights, tw, run["method"], run.get("delta"), **opts)
    assert seen["K"] == 4
    np.testing.assert_array_equal(got, ref)
    if run.get("select") == "finite-first":                  # several grid levels: several message rounds
        agents = [AgentCalibration(s, w) for s, w in zip(scores, weights)]
        assert np.unique(PFWCP(0.1, run.get("delta"), select="finite-first").calibrate(agents).cells(tw)[0]).size > 1


@pytest.mark.parametrize("run, match", [
    (dict(method="pfwcp", select="first"), "`select` must be one of"),
    (dict(method="ospfwcp", select="finite-first"), r"option\(s\) \['select'\] are not options of OneShotPFWCP"),
    (dict(method="pfwcp", grid=([0.1, 2.0], [0.0])), "`grid`: betas must lie in"),
    (dict(method="pfwcp", engine="fast"), "engine"),
    (dict(method="pfwcp", gird=([0.1], [0.0])), r"option\(s\) \['gird'\]"),
    (dict(method="ospfwcp", on_infeasible="skip"), "on_infeasible"),
])
def test_every_option_is_checked_before_flower_starts(monkeypatch, run, match):
    def no_flower(*a, **k):
        raise AssertionError("Flower was started before the options were checked")
    monkeypatch.setattr(simulation, "run_simulation", no_flower)
    with pytest.raises(ValueError, match=match):
        simulate_many(**{**GOOD, "runs": [run]})


# ---------------------------------------------------------------- the server checks every message
def _tamper_json(node_hit, change):
    "A malicious client: node `node_hit` rewrites the JSON of its replies with `change(dict or text)`."
    def tamper(node, rep):
        if node != node_hit:
            return rep
        rec = rep.content.config_records["pfwcp"]
        text = rec["json"]
        new = change(json.loads(text))
        rec["json"] = new if isinstance(new, str) else json.dumps(new)
        return rep
    return tamper


def _only(ask, f):
    "Apply f to replies of one message type only."
    return lambda d: f(d) if d.get("type") == ask else d


BAD_REPLIES = [   # (which agent lies, the change to its reply's JSON, a method, the field the refusal must name)
    (1, _only("AgentSummary", lambda d: {**d, "n_eff": 1e12}), "pfwcp", "`n_eff`=1000000000000.0 outside [1, n=30]"),
    (1, _only("AgentSummary", lambda d: {**d, "n_eff": 0.5}), "ospfwcp", "`n_eff`=0.5 outside [1, n=30]"),
    (2, _only("AgentSummary", lambda d: {**d, "weight_total": -3.0}), "pfwcp", "`weight_total`=-3.0"),
    (0, _only("AgentSummary", lambda d: {**d, "n_eff": 20.0}), "pfwcp", "the test agent's weights are 1"),
    (2, _only("AgentSummary", lambda d: {**d, "n": True}), "pfwcp", "`n` must be an integer"),
    (1, _only("AgentSummary", lambda d: json.dumps(d).replace('"n_eff": ', '"n_eff": NaN, "x": ')), "pfwcp",
     "field `json` holds the literal NaN"),
    (1, _only("AgentMessage", lambda d: json.dumps(d).replace('"quantiles": [', '"quantiles": [Infinity, ', 1)), "pfwcp",
     "field `json` holds the literal Infinity"),
    (2, _only("AgentSummary", lambda d: json.dumps(d)[:-3]), "ospfwcp", "field `json` is not valid JSON"),
    (1, _only("AgentMessage", lambda d: {**d, "quantiles": ["-inf"] + d["quantiles"][1:]}), "pfwcp",
     "field `quantiles` holds -inf"),
    (1, _only("AgentMessage", lambda d: {**d, "quantiles": d["quantiles"][:-1]}), "pfwcp", "field `quantiles` has 6 values"),
    (2, _only("AgentMessage", lambda d: {**d, "beta": 0.2}), "pfwcp", "field `beta`=0.2, but the server asked"),
    (2, _only("AgentMessage", lambda d: {**d, "quantiles": d["quantiles"][::-1]}), "pfwcp", "field `quantiles` decreases"),
    (1, _only("AgentMessage", lambda d: {**d, "quantiles": ["nan"] * 7}), "pfwcp", "field `quantiles` must be a number"),
    (1, _only("OneShotMessage", lambda d: {**d, "n_eff": d["n_eff"] * 2}), "ospfwcp", "field `n_eff`"),
    (2, _only("OneShotMessage", lambda d: {**d, "weight_total": 1.0}), "ospfwcp", "field `weight_total`=1.0 differs"),
    (1, _only("OneShotMessage", lambda d: {**d, "weight_above": d["weight_total"]}), "ospfwcp", "field `weight_above`"),
    (1, _only("OneShotMessage", lambda d: {**d, "quantile": "inf"}), "ospfwcp", "field `quantile`=inf"),
    (2, _only("OneShotMessage", lambda d: {**d, "beta_breve": 0.5}), "ospfwcp", "field `beta_breve`=0.5"),
    (1, _only("OneShotMessage", lambda d: {**d, "scores": [1.0, 2.0]}), "ospfwcp", "fields"),
    # red team (after the server's checks): a malicious agent setting the thresholds, and JSON that was not strict enough
    (1, _only("AgentMessage", lambda d: {**d, "quantiles": [-1e300] * 7}), "pfwcp",
     "field `quantiles` holds -1e+300, outside the protocol's score range [0.0, inf]"),
    (2, _only("OneShotMessage", lambda d: {**d, "quantile": -1e300, "weight_above": 0.0}), "ospfwcp",
     "field `quantile`=-1e+300 is outside the protocol's score range"),
    (1, _only("AgentSummary", lambda d: {**d, "n_eff": 0.9999999995}), "pfwcp", "`n_eff`=0.9999999995 outside [1, n=30]"),
    (2, _only("AgentSummary", lambda d: '{"type": "Bogus", ' + json.dumps(d)[1:]), "pfwcp", "repeats the key(s) ['type']"),
    (1, _only("AgentSummary", lambda d: {**d, "version": True}), "pfwcp", "field `version` must be an integer, got True"),
    (1, _only("OneShotMessage", lambda d: {**d, "version": 1.0}), "ospfwcp", "field `version` must be an integer, got 1.0"),
    (2, _only("AgentSummary", lambda d: json.dumps(d).replace('"n": 30', '"n": 1' + "0" * 400)), "pfwcp",
     "integer of 401 digits"),
    (1, _only("AgentMessage", lambda d: json.dumps(d).replace('"quantiles": [', '"quantiles": [1e400, ', 1)), "pfwcp",
     "overflows a float"),
    (1, _only("AgentSummary", lambda d: json.dumps(d)[:-1] + ', "x": ' + "[" * 100000 + "]" * 100000 + "}"), "pfwcp",
     "nested too deeply"),
]


@pytest.mark.parametrize("liar, change, method, field", BAD_REPLIES)
def test_server_refuses_each_bad_message_naming_agent_and_field(task_identity, tmp_path, liar, change, method, field):
    scores, weights, tw = federation(6, 3, 30, 7)
    agents = [AgentCalibration(s, w) for s, w in zip(scores, weights)]
    nodes = [41, 42, 43]
    grid = InProcessGrid(client_for(agents), {n: k for k, n in enumerate(nodes)}, tamper=_tamper_json(nodes[liar], change))
    with pytest.raises(ValueError) as e, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, summ = collect_summaries(grid, 3, nodes=nodes)
        thresholds_over_flower(grid, nodes, summ, tw, 0.1, None, method=method)
    assert f"agent {liar} (node {nodes[liar]})" in str(e.value) and field in str(e.value), str(e.value)


def _set_agent(node_hit, value):
    def tamper(node, rep):
        if node == node_hit:
            rec = rep.content.config_records["pfwcp"]
            if value is None:
                del rec["agent"]
            else:
                rec["agent"] = value
        return rep
    return tamper


@pytest.mark.parametrize("value, match", [
    (0, "agent 2 (node 43): field `agent`=0, but the operator's configuration binds node 43 to agent 2"),
    (None, "agent 2 (node 43): field `agent`=None"),
    ("0", "agent 2 (node 43): field `agent` must be an integer"),
])
def test_agent_identity_is_bound_to_the_node_not_the_reply(task_identity, value, match):
    # node 43 is configured as agent 2: claiming to be the test agent (or nothing) is refused
    agents = [AgentCalibration(np.arange(1.0, 11.0)) for _ in range(3)]
    grid = InProcessGrid(client_for(agents), {41: 0, 42: 1, 43: 2}, tamper=_set_agent(43, value))
    with pytest.raises(ValueError, match=re.escape(match)):
        collect_summaries(grid, 3, nodes=[41, 42, 43])


def test_operator_binding_decides_whose_column_a_node_gets(task_identity):
    # the nodes' partition-ids say 0, 1, 2 but the operator binds them the other way round: the server follows the
    # operator (and refuses their claims), it never files a reply under the index the reply states
    agents = [AgentCalibration(np.arange(1.0, 11.0)) for _ in range(3)]
    grid = InProcessGrid(client_for(agents), {41: 0, 42: 1, 43: 2})
    with pytest.raises(ValueError, match=re.escape("agent 0 (node 43): field `agent`=2")):
        collect_summaries(grid, 3, nodes=[43, 42, 41])


class TwiceGrid(InProcessGrid):
    "Every reply delivered twice (a replay), or replies from a node that was not asked."
    def __init__(self, app, index_of_node, mode):
        super().__init__(app, index_of_node)
        self.mode = mode

    def send_and_receive(self, messages, timeout=None):
        reps = super().send_and_receive(messages, timeout)
        if self.mode == "twice":
            return reps + reps[:1]
        return reps[:-1]


@pytest.mark.parametrize("mode, match", [("twice", "agent 0 (node 41) answered twice"),
                                         ("missing", "agent 2 (node 43) did not answer")])
def test_duplicated_and_missing_replies_are_named(task_identity, mode, match):
    agents = [AgentCalibration(np.arange(1.0, 11.0)) for _ in range(3)]
    grid = TwiceGrid(client_for(agents), {41: 0, 42: 1, 43: 2}, mode)
    with pytest.raises((ValueError, RuntimeError), match=re.escape(match)):
        collect_summaries(grid, 3, nodes=[41, 42, 43])


def test_unpack_refuses_unknown_record_fields_naming_the_sender():
    content = pack({"type": "AgentSummary"}, agent=1)
    content.config_records["pfwcp"]["scores"] = "1,2,3"
    with pytest.raises(ValueError, match=re.escape("node 5: record 'pfwcp' has fields ['agent', 'json', 'scores']")):
        unpack(content, "node 5")


BYZANTINE = {   # red team finding 2: one agent's replies that set every threshold to -1e300 before the fix
    "AgentSummary": lambda d: {**d, "n_eff": 1e12, "weight_total": 1e12, "n": 10**12},
    "AgentMessage": lambda d: {**d, "quantiles": [-1e300] * len(d["quantiles"])},
    "OneShotMessage": lambda d: {**d, "quantile": -1e300, "weight_total": 1e12, "weight_above": 0.0, "n_eff": 1e12},
}


@pytest.mark.parametrize("method", PROTOCOLS)
def test_one_malicious_agent_cannot_claim_a_larger_n_than_the_operator_agreed(task_identity, method):
    scores, weights, tw = federation(6, 3, 30, 7)
    agents = [AgentCalibration(s, w) for s, w in zip(scores, weights)]
    nodes = [41, 42, 43]
    liar = lambda d: BYZANTINE[d["type"]](d)
    grid = InProcessGrid(client_for(agents), {n: k for k, n in enumerate(nodes)}, tamper=_tamper_json(43, liar))
    with pytest.raises(ValueError, match=re.escape("agent 2 (node 43): field `n`=1000000000000 is above the operator's "
                                                   "cap 30")):
        collect_summaries(grid, 3, nodes=nodes, max_n=[30, 30, 30])
    # the summary alone within the cap: the quantiles are still refused (outside the score range), for both methods
    only_msgs = lambda d: ({**d, "quantiles": [-1e300] * len(d["quantiles"])} if d["type"] == "AgentMessage" else
                           {**d, "quantile": -1e300, "weight_above": 0.0} if d["type"] == "OneShotMessage" else d)
    grid = InProcessGrid(client_for(agents), {n: k for k, n in enumerate(nodes)}, tamper=_tamper_json(43, only_msgs))
    _, summ = collect_summaries(grid, 3, nodes=nodes, max_n=[30, 30, 30])
    with pytest.raises(ValueError, match=r"agent 2 \(node 43\): field `quantiles?`.*-1e\+300"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        thresholds_over_flower(grid, nodes, summ, tw, 0.1, None, method=method)


def test_deployed_main_refuses_an_agent_above_its_configured_n_and_a_bad_score_range(task_identity, tmp_path):
    scores, weights, tw, grid = _deployment(tmp_path)
    rc = {"test-weights": str(tmp_path / "tw.npy"), "out": str(tmp_path / "q.npz"), "agent-nodes": "7 8 9",
          "agent-max-n": "30 30 20", "score-range": "unbounded"}
    ctx = lambda rc: Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=rc)
    with warnings.catch_warnings():     # agent 2 claims more points than agreed: left out, the others calibrate
        warnings.simplefilter("ignore")
        deploy.deployed_main(grid, ctx(rc))
    got = np.load(tmp_path / "q.npz")
    assert any("agent 2 (node 9): field `n`=30 is above the operator's cap 20" in e and e.endswith("left out")
               for e in json.loads(str(got["events"])))
    np.testing.assert_array_equal(got["pfwcp-mc-agents"], [0, 1])
    np.testing.assert_array_equal(got["pfwcp-mc"], in_process(scores[:2], weights[:2], tw[:, :2], "pfwcp", None))
    with pytest.raises(ValueError, match="`agent-max-n` must be 3 positive integers"):
        deploy.deployed_main(grid, ctx({**rc, "agent-max-n": "30 30"}))
    with pytest.raises(ValueError, match="`score-range` must be 'low high'"):
        deploy.deployed_main(grid, ctx({**rc, "agent-max-n": "30 30 30", "score-range": "1"}))
    with pytest.raises(RuntimeError, match=r"agent 0 \(node 7\): field `quantiles` holds .* outside the protocol's score "
                                           r"range \[0.0, 0.5\]"), warnings.catch_warnings():   # the test agent: no calibration
        warnings.simplefilter("ignore")
        deploy.deployed_main(grid, ctx({**rc, "agent-max-n": "30 30 30", "score-range": "0 0.5"}))


def test_a_deployed_agent_answers_one_shot_levels_of_its_node_config_only(tmp_path):
    # red team finding 1 through the deployed path: node_config policy-n1 fixes osPFWCP's levels exactly
    np.savez(tmp_path / "a.npz", scores=np.arange(1.0, 101.0), weights=np.ones(100))
    cfg = {"partition-id": 1, "data-path": str(tmp_path / "a.npz"), "policy-n1": 100}
    ctx = Context(run_id=1, node_id=5, node_config=cfg, state=RecordDict(), run_config={})
    pol = deploy.load_node_policy(ctx)
    with pytest.raises(QueryRefused, match="not an agreed one-shot level"):
        agent_reply(deploy.load_node_agent(ctx), request("oneshot", beta_breve=0.999999), pol)
    for de in (None, 0.1):
        level = OneShotPFWCP(0.1, de).plan([AgentCalibration(np.arange(1.0, 101.0)).summary()] * 3)
        agent_reply(deploy.load_node_agent(ctx), request("oneshot", beta_breve=level), deploy.load_node_policy(ctx))
