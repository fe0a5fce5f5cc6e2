"PFWCP / osPFWCP over Flower (`pfwcp_nb.flower`): exact equality with the in-process estimators, what leaves a client, bad input, the optional extra, the localhost deployment (slow)."
import json
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
from flwr.supercore.task_identity import TaskIdentity

import pfwcp_nb.flower as fl
from pfwcp_nb.flower import (METHODS, agent_client_app, agent_reply, collect_summaries, pack, request,
                             simulate_many, thresholds_over_flower, unpack)
from pfwcp_nb.oneshot import OneShotPFWCP
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration, AgentMessage, AgentSummary, OneShotMessage

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


def test_simulate_equals_in_process_and_only_protocol_fields_leave_the_clients(tmp_path):
    # one Flower simulation: both methods, MC and CCC, +inf answers; every outgoing client message recorded
    K, n, m = 4, 37, 23                                      # n != m: a score array would show up as n numbers
    scores, weights, tw = federation(0, K, n, m)
    runs = [dict(method=me, delta=de) for me in METHODS for de in (None, 0.1)]
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
        assert rec["kind"] == "ConfigRecord" and set(rec["items"]) == {"json", "agent"}
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
    monkeypatch.setattr(fl, "simulate_many", fake)
    fl.simulate([[1.0]], [None], np.ones((2, 1)), 0.2, 0.05, method="ospfwcp", n_steps=7)
    assert seen["runs"] == [dict(alpha=0.2, delta=0.05, method="ospfwcp", n_steps=7)]
    assert seen["kw"] == dict(actors=1, timings=None)


@pytest.fixture
def task_identity():
    "Messages built outside Flower's runtime need a run identity (the runtime sets it)."
    old = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    yield
    TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = old


class InProcessGrid:
    "A Grid stand-in that delivers each message to the ClientApp of its node, in this process."
    def __init__(self, app, index_of_node):
        self.app, self.index_of_node = app, index_of_node

    def get_node_ids(self):
        return list(self.index_of_node)

    def send_and_receive(self, messages, timeout=None):
        out = []
        for msg in messages:
            node = msg.metadata.dst_node_id
            ctx = Context(run_id=1, node_id=node, node_config={"partition-id": self.index_of_node[node]},
                          state=RecordDict(), run_config={})
            out.append(self.app(msg, ctx))
        return out


@pytest.mark.parametrize("seed", range(3))
def test_server_logic_with_the_real_client_app(task_identity, seed):
    # the ServerApp's steps against the real ClientApp (no Ray): node ids in any order, agents found by index
    rng = np.random.default_rng(seed)
    K = int(rng.integers(1, 6))
    scores, weights, tw = federation(seed, K, int(rng.integers(5, 60)), 17)
    agents = [AgentCalibration(s, w) for s, w in zip(scores, weights)]
    node_ids = rng.permutation(1000)[:K] + 1
    grid = InProcessGrid(agent_client_app(lambda ctx: agents[int(ctx.node_config["partition-id"])]),
                         {int(nid): k for k, nid in enumerate(node_ids)})
    nodes, summ = collect_summaries(grid, K)
    assert nodes == [int(x) for x in node_ids]
    for me in METHODS:
        for de in (None, 0.1):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                q = thresholds_over_flower(grid, nodes, summ, tw, 0.1, de, method=me)
            np.testing.assert_array_equal(q, in_process(scores, weights, tw, me, de))


def test_server_refuses_bad_agent_indices(task_identity):
    agents = [AgentCalibration(np.arange(5.0)) for _ in range(3)]
    app = agent_client_app(lambda ctx: agents[int(ctx.node_config["partition-id"]) % 3])
    with pytest.raises(ValueError, match="partition-id 0..2"):
        collect_summaries(InProcessGrid(app, {1: 0, 2: 1, 3: 5}), 3)
    with pytest.raises(TimeoutError, match="2 of K=3"):
        collect_summaries(InProcessGrid(app, {1: 0, 2: 1}), 3, timeout=0.2)
    with pytest.raises(ValueError, match="method"):
        thresholds_over_flower(InProcessGrid(app, {1: 0}), [1], [agents[0].summary()], np.ones((2, 1)), method="fcp")


def test_agent_reply_is_the_agent_message():
    rng = np.random.default_rng(3)
    a = AgentCalibration(rng.normal(size=30), rng.lognormal(size=30))
    assert agent_reply(a, request("summary")) == a.summary().to_dict()
    got = agent_reply(a, request("message", beta=0.15, test_weights=[0.0, 2.0, 1e8]))
    assert got == a.message(0.15, [0.0, 2.0, 1e8]).to_dict() and got["quantiles"][-1] == "inf"
    assert agent_reply(a, request("oneshot", beta_breve=0.3)) == a.oneshot_message(0.3).to_dict()
    d, agent = unpack(pack(got, agent=4))
    assert (d, agent) == (got, 4)


@pytest.mark.parametrize("req, match", [
    ({"type": "Request", "version": 99, "ask": "summary"}, "version 99"),
    ({"type": "AgentSummary", "version": 1}, "not a pfwcp Request"),
    ({"type": "Request", "version": 1, "ask": "scores"}, "must be one of"),
    ("summary", "not a pfwcp Request"),
])
def test_agent_reply_bad_requests(req, match):
    with pytest.raises(ValueError, match=match):
        agent_reply(AgentCalibration([1.0, 2.0]), req)


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


def test_without_flwr_the_import_names_the_extra():
    code = "import sys; sys.modules['flwr'] = None; import pfwcp_nb.flower"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode != 0
    assert "ImportError" in r.stderr and 'pip install "pfwcp_nb[flower]"' in r.stderr
    assert 'pip install -e ".[flower]" from a clone' in r.stderr


def test_deploy_script_bad_arguments():
    for args in (["--agents", "1"], ["--test-points", "x"], ["--nope"], ["--agents"]):
        r = subprocess.run(["bash", str(ROOT / "scripts/flower_deploy.sh"), *args], capture_output=True, text=True)
        assert r.returncode == 2 and "usage:" in r.stderr


@pytest.mark.skipif(os.environ.get("PFWCP_FLOWER_DEPLOY") != "1",
                    reason="slow (~3 min): a real localhost deployment; run with PFWCP_FLOWER_DEPLOY=1")
def test_deploy_script_tls_auth_and_unregistered_supernode_refused(tmp_path):
    keep = tmp_path / "deploy"
    r = subprocess.run(["bash", str(ROOT / "scripts/flower_deploy.sh"), "--agents", "3", "--test-points", "6",
                        "--rogue", "--keep", str(keep)], capture_output=True, text=True, timeout=900,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "unregistered SuperNode: refused" in r.stdout
    assert r.stdout.count("(== in process: True)") == 4
    assert "TLS, SuperNode authentication" in r.stdout
    # every process it started is gone: no SuperLink/SuperNode still holds the work dir's files
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
    monkeypatch.setattr(fl, "run_simulation", fake_run_simulation)
    return seen


@pytest.mark.parametrize("method", METHODS)
def test_simulate_weights_none_means_ones_for_every_agent(task_identity, monkeypatch, method):
    seen = _run_in_process(monkeypatch)
    scores, _, tw = federation(5, 3, 40, 9)
    ones = [np.ones(len(s)) for s in scores]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q_none = fl.simulate(scores, None, tw, 0.1, 0.1, method=method)
        q_entries = fl.simulate(scores, [None] * 3, tw, 0.1, 0.1, method=method)
    assert seen["K"] == 3
    np.testing.assert_array_equal(q_none, in_process(scores, ones, tw, method, 0.1))
    np.testing.assert_array_equal(q_entries, q_none)


def _deployment(tmp_path, seed=6, K=3, m=7):
    scores, weights, tw = federation(seed, K, 30, m)
    np.save(tmp_path / "tw.npy", tw)
    agents = [AgentCalibration(s, w) for s, w in zip(scores, weights)]
    grid = InProcessGrid(agent_client_app(lambda ctx: agents[int(ctx.node_config["partition-id"])]),
                         {7 + k: k for k in range(K)})
    return scores, weights, tw, grid


def test_deployed_main_with_only_the_required_run_config(task_identity, tmp_path):
    "A hand-written app config with test-weights and out only: alpha, delta, node-timeout take their defaults."
    scores, weights, tw, grid = _deployment(tmp_path)
    rc = {"test-weights": str(tmp_path / "tw.npy"), "out": str(tmp_path / "q.npz")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fl.deployed_main(grid, Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=rc))
    got = np.load(tmp_path / "q.npz")
    assert sorted(got.files) == ["ospfwcp-ccc", "ospfwcp-mc", "pfwcp-ccc", "pfwcp-mc"]
    for me in METHODS:
        for cr, de in (("mc", None), ("ccc", fl.RUN_CONFIG["delta"][0])):
            np.testing.assert_array_equal(got[f"{me}-{cr}"], in_process(scores, weights, tw, me, de))


@pytest.mark.parametrize("rc, match", [
    ({"test-weights": "tw.npy"}, r"missing required key\(s\) \['out'\]"),
    ({"test-weights": "tw.npy", "out": "q.npz", "node_timeout": 5.0}, "unknown key.*node_timeout"),
])
def test_run_config_bad_keys_are_named(rc, match):
    with pytest.raises(ValueError, match=match):
        fl.run_config_values(rc)
    with pytest.raises(ValueError, match=match):
        fl.app_pyproject(rc)


def test_every_run_config_key_has_a_default_or_is_required_and_documented():
    assert set(fl.RUN_CONFIG) == {"alpha", "delta", "node-timeout", "test-weights", "out"}
    assert all(isinstance(what, str) and what for _, what in fl.RUN_CONFIG.values())
    assert fl.run_config_values({"test-weights": "a", "out": "b"})["node-timeout"] == 120.0


def test_written_app_project_is_the_one_flwr_run_reads(tmp_path):
    rc = {"test-weights": str(tmp_path / 'we"ird path' / "tw.npy"), "out": "q.npz", "node-timeout": 300}
    p = fl.write_app_project(tmp_path / "app", rc)
    app = tomli.loads(p.read_text())
    assert app["tool"]["flwr"]["app"]["components"] == {"serverapp": "pfwcp_nb.flower:server_app",
                                                        "clientapp": "pfwcp_nb.flower:client_app"}
    assert app["tool"]["flwr"]["app"]["config"] == {**fl.run_config_values(rc), "node-timeout": 300.0}
    # the deployment script writes its project with this function, not with a copy of the TOML
    script = (ROOT / "scripts/flower_deploy.sh").read_text()
    assert "write_app_project" in script and "[tool.flwr.app" not in script
