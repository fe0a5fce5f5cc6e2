"""The deployed calibration goes on without a bad agent: an agent that is offline, refuses, fails or
answers invalidly is logged and left out, Procedure 1 runs again over those that answered, every completed run is
written at once, and an offline agent is reported as offline (not as "a reply from node 1, which was not asked")."""
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from flwr.app import Context, Error, Message, RecordDict
from flwr.common.constant import ErrorCode
from flwr.server.superlink.linkstate.utils import create_message_error_unavailable_res_message
from flwr.supercore.task_identity import TaskIdentity

from pfwcp_nb.federation import deploy
from pfwcp_nb.federation.agent import agent_client_app
from pfwcp_nb.federation.protocol import pack, request
from pfwcp_nb.federation.server import calibrate_federation, capped_agg_weights, collect_summaries, robust_aggregate
from pfwcp_nb.oneshot import OneShotPFWCP
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration, AgentMessage
from pfwcp_nb.query_policy import QueryPolicy

NODES = [7, 8, 9]


class FleetGrid:
    """A Grid stand-in as the SuperLink behaves: message ids set when pushed, an agent's exception an error reply from
    its node, a node in `offline` answered by the SuperLink itself (node 1, NODE_UNAVAILABLE), `absent` nodes not
    connected; `tamper(node, reply dict)` changes one agent's JSON."""
    def __init__(self, app, offline=(), absent=(), tamper=None, nodes=NODES):
        self.app, self.offline, self.absent, self.tamper, self.nodes = app, set(offline), set(absent), tamper, nodes

    def get_node_ids(self):
        return [n for n in self.nodes if n not in self.absent]

    def send_and_receive(self, messages, timeout=None):
        out = []
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = msg.object_id        # what Flower's push does
            node = msg.metadata.dst_node_id
            if node in self.offline:
                out.append(create_message_error_unavailable_res_message(msg.metadata, "node_unavail"))
                continue
            ctx = Context(run_id=1, node_id=node, node_config={"partition-id": self.nodes.index(node)}, state=RecordDict(),
                          run_config={})
            try:
                rep = self.app(msg, ctx)
            except Exception as e:                                        # the ClientApp's process reports it
                rep = Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=f"{type(e).__name__}: {e}"),
                              reply_to=msg)
            if self.tamper is not None and not rep.has_error():
                rec = rep.content.config_records["pfwcp"]
                rec["json"] = json.dumps(self.tamper(node, json.loads(rec["json"])))
            out.append(rep)
        return out


def federation(seed=3, K=3, n=40, m=9):
    rng = np.random.default_rng(seed)
    scores = [rng.gamma(2.0, size=n) for _ in range(K)]
    weights = [np.ones(n)] + [rng.lognormal(0, 1, size=n) for _ in range(K - 1)]
    tw = rng.lognormal(0, 1, size=(m, K)); tw[:, 0] = 1.0
    return scores, weights, tw


def app_for(scores, weights, policies=None):
    agents = [AgentCalibration(s, w) for s, w in zip(scores, weights)]
    policies = policies or [QueryPolicy(test_agent=(k == 0)) for k in range(len(agents))]
    part = lambda ctx: int(ctx.node_config["partition-id"])
    return agent_client_app(lambda ctx: agents[part(ctx)], lambda ctx: policies[part(ctx)])


def in_process(scores, weights, tw, ks, method="pfwcp", delta=None):
    "The in-process estimator over agents `ks` only (their columns of the test weights)."
    Est = PFWCP if method == "pfwcp" else OneShotPFWCP
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Est(0.1, delta).calibrate([AgentCalibration(scores[k], weights[k]) for k in ks]).threshold(tw[:, ks])


RUNS = {f"{me}-{cr}": dict(method=me, alpha=0.1, delta=de, score_range=(0.0, 50.0)) for me in ("pfwcp", "ospfwcp")
        for cr, de in (("mc", None), ("ccc", 0.1))}    # Gamma(2) scores: above 50 with probability 1e-20


def calibrate(grid, tw, runs=RUNS, saved=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return calibrate_federation(grid, NODES, tw, runs, [40, 40, 40], timeout=0.2,
                                    save=None if saved is None else lambda out, ev: saved.append(sorted(out)))


def test_an_offline_agent_is_reported_as_offline_not_as_node_1(task_identity):
    scores, weights, tw = federation()
    grid = FleetGrid(app_for(scores, weights), offline={9})
    with pytest.raises(RuntimeError, match=re.escape("agent 2 (node 9) is offline: Error: Node Unavailable")):
        collect_summaries(grid, 3, nodes=NODES)


@pytest.mark.parametrize("how", ["offline", "absent"])
def test_calibration_goes_on_without_an_offline_agent(task_identity, how):
    scores, weights, tw = federation()
    grid = FleetGrid(app_for(scores, weights), **{how: {9}})
    out, events = calibrate(grid, tw)
    assert any(e.startswith(("summaries: agent 2 (node 9) is offline", "connect: agent 2 (node 9) is offline"))
               for e in events), events
    for name, run in RUNS.items():
        assert out[f"{name}-agents"].tolist() == [0, 1]
        np.testing.assert_array_equal(out[name], in_process(scores, weights, tw, [0, 1], run["method"], run["delta"]))


def test_a_liar_in_the_message_round_is_left_out_and_procedure_1_runs_again(task_identity):
    # agent 1's summary is honest; its PFWCP quantiles are negative (below the score range): refused, left out of the
    # PFWCP runs, which calibrate again over agents 0 and 2; its one-shot messages are honest, so it stays in those
    scores, weights, tw = federation()
    lie = lambda node, d: ({**d, "quantiles": [-1.0] * len(d["quantiles"])} if node == 8 and d["type"] == "AgentMessage"
                           else d)
    grid = FleetGrid(app_for(scores, weights), tamper=lie)
    out, events = calibrate(grid, tw)
    assert any("agent 1 (node 8): field `quantiles` holds -1.0, outside the protocol's score range" in e for e in events)
    assert "calibration: agent(s) [1] left out of this run; Procedure 1 again over agents [0, 2]" in events
    for name, run in RUNS.items():
        ks = [0, 2] if run["method"] == "pfwcp" else [0, 1, 2]
        assert out[f"{name}-agents"].tolist() == ks
        np.testing.assert_array_equal(out[name], in_process(scores, weights, tw, ks, run["method"], run["delta"]))


def test_each_completed_run_is_saved_before_the_test_agent_refuses(task_identity):
    # the test agent's policy answers one one-shot message: the fourth run (a second osPFWCP) cannot calibrate, and the
    # three runs before it are already written
    scores, weights, tw = federation()
    pols = [QueryPolicy(test_agent=True, max_oneshot=1), QueryPolicy(), QueryPolicy()]
    saved = []
    with pytest.raises(RuntimeError, match=r"the test agent \(agent 0\) is not among the agents that answered.*"
                                           r"agent 0 \(node 7\) refused or failed"):
        calibrate(FleetGrid(app_for(scores, weights, pols)), tw, saved=saved)
    assert [len(s) for s in saved] == [2, 4, 6]                   # thresholds and agents, run after run


def test_deployed_main_writes_the_runs_and_the_log(task_identity, tmp_path):
    scores, weights, tw = federation()
    np.save(tmp_path / "tw.npy", tw)
    rc = {"test-weights": str(tmp_path / "tw.npy"), "out": str(tmp_path / "q.npz"), "agent-nodes": "7 8 9",
          "agent-max-n": "40 40 40", "node-timeout": 0.2, "score-range": "unbounded"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        deploy.deployed_main(FleetGrid(app_for(scores, weights), offline={8}),
                             Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=rc))
    got = np.load(tmp_path / "q.npz")
    assert any("agent 1 (node 8) is offline" in e for e in json.loads(str(got["events"])))
    np.testing.assert_array_equal(got["pfwcp-mc"], in_process(scores, weights, tw, [0, 2]))
    assert not (tmp_path / "q.npz.tmp").exists()


def test_plus_inf_must_agree_with_the_declared_weight_total(task_identity):
    # a liar (studies/redteam/attack_one_liar.py): agent 1 answers +inf at every test point; its own summary's W says most are scores: refused
    scores, weights, tw = federation()
    lie = lambda node, d: {**d, "quantiles": ["inf"] * len(d["quantiles"])} if node == 8 and d["type"] == "AgentMessage" else d
    out, events = calibrate(FleetGrid(app_for(scores, weights), tamper=lie), tw)
    assert any("agent 1 (node 8): field `quantiles` is +inf where the mass at +inf t/(W+t) is below beta" in e
               for e in events), events
    assert out["pfwcp-mc-agents"].tolist() == [0, 2]


@pytest.mark.parametrize("W", [1e300, 1e-300])
def test_a_weight_total_outside_the_agreed_range_is_left_out(task_identity, W):
    scores, weights, tw = federation()
    lie = lambda node, d: {**d, "weight_total": W} if node == 9 and d["type"] == "AgentSummary" else d
    out, events = calibrate(FleetGrid(app_for(scores, weights), tamper=lie), tw)
    assert any(e.startswith("summaries: an invalid answer: agent 2 (node 9): field `weight_total`") and
               "outside the agreed range" in e for e in events), events
    assert all(out[f"{name}-agents"].tolist() == [0, 1] for name in RUNS)


def test_the_robust_option_caps_an_agents_aggregation_weight(task_identity):
    # agent 3's n_eff is far above the others': with agg_cap=1 each of agents 1..3 counts at most the median of the
    # two others' (itself and the test agent left out), and the run equals the in-process PFWCP with those weights
    scores, weights, tw = federation(K=4)
    weights[3] = np.ones_like(weights[3])                              # n_eff = n, the others' are smaller
    agents = [AgentCalibration(s, w) for s, w in zip(scores, weights)]
    n_eff = np.array([a.summary().n_eff for a in agents])
    w = capped_agg_weights([a.summary() for a in agents], 1.0)
    capped = [n_eff[0]] + [min(n_eff[k], np.median(np.delete(n_eff[1:], k - 1))) for k in (1, 2, 3)]
    np.testing.assert_allclose(w, np.array(capped) / sum(capped), rtol=1e-12)
    assert w[3] == pytest.approx(np.median(n_eff[1:3]) / sum(capped))
    assert w[3] < n_eff[3] / n_eff.sum()
    nodes = [7, 8, 9, 10]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out, _ = calibrate_federation(FleetGrid(app_for(scores, weights), nodes=nodes), nodes, tw,
                                      {"pfwcp-mc": dict(method="pfwcp", alpha=0.1, delta=None, agg_cap=1.0,
                                                                    score_range=(0.0, 50.0))}, [40] * 4,
                                      timeout=0.2)
        ref = PFWCP(0.1, None, agg_weights=w).calibrate(agents).threshold(tw)
    np.testing.assert_array_equal(out["pfwcp-mc"], ref)


@pytest.mark.slow
def test_the_one_liar_script_refuses_bad_arguments():
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, str(root / "studies" / "redteam" / "attack_one_liar.py"), "--seeds", "0"],
                       capture_output=True, text=True, cwd=root)
    assert r.returncode == 2 and "usage:" in r.stderr and "--seeds" in r.stderr
    stored = json.loads((root / "results" / "flower_pipeline" / "one_liar.json").read_text())
    t = stored["table"]                                  # the robust option with a tight agreed weight range: one liar
    for run in ("pfwcp-mc", "pfwcp-ccc", "ospfwcp-mc", "ospfwcp-ccc"):   # moves coverage <= 2 points, the infinite share <= 5
        honest, liar = t[f"honest/-/{run}"], t[f"tight+cap2/inf/{run}"]
        assert abs(liar["coverage"] - honest["coverage"]) <= 0.02 and liar["infinite_share"] - honest["infinite_share"] <= 0.05


class ReplayGrid(FleetGrid):
    "As FleetGrid, but node `node` answers every request after its first with its first reply (a replay, same β and m)."
    def __init__(self, app, node, **kw):
        super().__init__(app, **kw)
        self.node, self.first = node, {}

    def send_and_receive(self, messages, timeout=None):
        out = super().send_and_receive(messages, timeout)
        for i, rep in enumerate(out):
            kind = json.loads(rep.content.config_records["pfwcp"]["json"])["type"] if not rep.has_error() else None
            if rep.metadata.src_node_id == self.node and kind is not None:
                first = self.first.setdefault(kind, rep.content)
                if first is not rep.content:
                    out[i] = Message(first, reply_to=[m for m in messages if m.metadata.dst_node_id == self.node][0])
        return out


def test_a_replayed_reply_is_refused_and_its_agent_left_out(task_identity):
    # before: messages carried no run id or nonce, so an earlier reply with the same beta and m could be replayed
    scores, weights, tw = federation()
    out, events = calibrate(ReplayGrid(app_for(scores, weights), node=8), tw)
    replayed = [e for e in events if "agent 1 (node 8)" in e and "a replayed or misdirected reply is refused" in e]
    assert replayed, events                      # the second PFWCP run (and the second one-shot run) replayed the first
    assert out["pfwcp-ccc-agents"].tolist() == [0, 2] and out["pfwcp-mc-agents"].tolist() == [0, 1, 2]


def test_a_request_of_another_run_is_refused_by_the_agent(task_identity):
    scores, weights, _ = federation()
    app = app_for(scores, weights)
    ctx = Context(run_id=1, node_id=7, node_config={"partition-id": 0}, state=RecordDict(), run_config={})
    msg = Message(pack(request("summary", run=2)), dst_node_id=7, message_type="query")    # Flower delivers it in run 1
    with pytest.raises(Exception, match="a request of run '2' delivered in Flower run 1"):
        app(msg, ctx)


def test_the_budget_is_per_run_two_honest_runs_pass_and_the_total_cap_holds(task_identity):
    # before: one honest run spent both default one-shot answers and every later run was refused
    scores, weights, tw = federation()
    pols = [QueryPolicy(test_agent=(k == 0), max_oneshot=2, max_test_weights=2 * len(tw), max_runs=2) for k in range(3)]
    for run in (1, 2):                                              # two Flower runs: each its own allowance
        TaskIdentity.run_id = run
        out, events = calibrate(FleetGrid(app_for(scores, weights, pols)), tw)
        assert all(out[f"{n}-agents"].tolist() == [0, 1, 2] for n in RUNS), events
    assert sorted(pols[1].used["runs"]) == ["1", "2"]
    TaskIdentity.run_id = 3                                          # a third run: above max_runs, refused by every agent
    with pytest.raises(RuntimeError, match="max_runs=2"):
        calibrate(FleetGrid(app_for(scores, weights, pols)), tw)


def test_a_run_names_its_score_range_and_an_unbounded_one_is_logged(task_identity, caplog):
    # before: the default (0, inf) let a liar send 1e300; a run now names its range (score_range_for), finite or not
    scores, weights, tw = federation()
    grid = FleetGrid(app_for(scores, weights))
    with pytest.raises(ValueError, match="give its `score_range`"):
        calibrate(grid, tw, runs={"pfwcp-mc": dict(method="pfwcp", alpha=0.1, delta=None)})
    calibrate(grid, tw, runs={"pfwcp-mc": dict(method="pfwcp", alpha=0.1, delta=None, score_range=(0, np.inf))})
    assert any("is unbounded" in r.getMessage() and "score_range_for" in r.getMessage() for r in caplog.records)
    lie = lambda node, d: {**d, "quantiles": [1e300] * len(d["quantiles"])} if node == 8 and d["type"] == "AgentMessage" else d
    out, events = calibrate(FleetGrid(app_for(scores, weights), tamper=lie), tw)    # the finite range refuses 1e300
    assert any("agent 1 (node 8): field `quantiles` holds 1e+300, outside the protocol's score range" in e for e in events)
    assert out["pfwcp-mc-agents"].tolist() == [0, 2]


@pytest.mark.parametrize("stored, cap, lies, worst", [
    ("one_liar", "cap2", ("inf", "zero"), 0.0112), ("one_liar", "cap1", ("inf", "zero"), 0.0088),
    ("2_liars", "cap1", ("inf", "zero"), 0.0248)])
def test_the_stored_liar_runs_support_the_notebook_table(stored, cap, lies, worst):
    # f liars of K = 11 against the same federation under the same robust option (tight agreed ranges + agg_cap, the
    # leave-out median of capped_agg_weights; no robust reading of the answers)
    t = json.loads((Path(__file__).resolve().parents[1] / "results" / "flower_pipeline" / f"{stored}.json").read_text())["table"]
    moves = [abs(t[f"tight+{cap}/{lie}/{run}"]["coverage"] - t[f"honest+{cap}/-/{run}"]["coverage"])
             for lie in lies for run in ("pfwcp-mc", "pfwcp-ccc", "ospfwcp-mc", "ospfwcp-ccc")]
    assert max(moves) == pytest.approx(worst, abs=0.0005)
    inf = [t[f"tight+{cap}/{lie}/{run}"]["infinite_share"] - t[f"honest+{cap}/-/{run}"]["infinite_share"]
           for lie in lies for run in ("pfwcp-mc", "pfwcp-ccc")]
    assert max(inf) <= 0.05
    top = t[f"tight+{cap}/top/pfwcp-mc"]["coverage"] - t[f"honest+{cap}/-/pfwcp-mc"]["coverage"]
    assert top > 0.02                                   # the upward lie: not met (the table says so)


@pytest.mark.slow
def test_the_liar_script_refuses_more_liars_than_it_has():
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, str(root / "studies" / "redteam" / "attack_one_liar.py"), "--liars", "3"],
                       capture_output=True, text=True, cwd=root)
    assert r.returncode == 2 and "usage:" in r.stderr and "--liars" in r.stderr


# ---------------------------------------------------------------- safe by default (outside red team): the deployed apps'
# run config names a finite score range, and the robust aggregation is on
def test_deployed_main_refuses_to_start_without_a_named_finite_score_range_or_with_a_bad_check(task_identity, tmp_path):
    scores, weights, tw = federation()
    np.save(tmp_path / "tw.npy", tw)
    rc = {"test-weights": str(tmp_path / "tw.npy"), "out": str(tmp_path / "q.npz"), "agent-nodes": "7 8 9",
          "agent-max-n": "40 40 40"}
    untouched = FleetGrid(None, absent=set(NODES))                     # no agent is asked anything
    ctx = lambda **kw: Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={**rc, **kw})
    for kw, match in [({}, "`score-range` is not set; state the label range"),
                      ({"score-range": "0 inf"}, "an infinite range is agreed only by its name"),
                      ({"score-range": "0 20", "agg-cap": -1.0}, "`agg-cap` must be a finite number >= 0"),
                      ({"score-range": "0 20", "agg-cap": "off"}, "`agg-cap` must be a finite number >= 0"),
                      ({"score-range": "0 20", "answer-bound": 0.5}, "`answer-bound` must be 0"),
                      ({"score-range": "0 20", "answer-bound": "inf"}, "`answer-bound` must be 0"),
                      ({"score-range": "0 20", "answer-bound": "off"}, "`answer-bound` must be 0"),
                      ({"score-range": "0 20", "weight-range": "0 1"}, "`weight-range`")]:
        with pytest.raises(ValueError, match=match):
            deploy.deployed_main(untouched, ctx(**kw))
        with pytest.raises(ValueError, match=match):
            deploy.app_pyproject({**rc, **kw})
    assert not (tmp_path / "q.npz").exists()


def test_the_robust_aggregation_is_on_by_default_and_off_only_by_name(task_identity, tmp_path):
    # K = 11: agent 5 has weights 1 (n_eff = n), the others heavy-tailed ones (small n_eff): agg-cap 2 binds it
    rng = np.random.default_rng(0)
    K, n, nodes = 11, 40, list(range(20, 31))
    scores = [rng.gamma(2.0, size=n) for _ in range(K)]
    weights = [np.ones(n)] + [rng.lognormal(0, 2.0, size=n) for _ in range(K - 1)]
    weights[5] = np.ones(n)
    tw = rng.lognormal(0, 1, size=(50, K)); tw[:, 0] = 1.0
    np.save(tmp_path / "tw.npy", tw)
    agents = [AgentCalibration(s, w) for s, w in zip(scores, weights)]
    capped = capped_agg_weights([a.summary() for a in agents], deploy.AGG_CAP)
    assert capped[5] < agents[5].summary().n_eff / sum(a.summary().n_eff for a in agents)     # the cap binds agent 5
    rc = {"test-weights": str(tmp_path / "tw.npy"), "out": str(tmp_path / "q.npz"), "agent-nodes": " ".join(map(str, nodes)),
          "agent-max-n": " ".join([str(n)] * K), "score-range": "0 50"}
    got = []
    for extra, kw in [({"answer-bound": 0}, {"agg_weights": capped}), ({"agg-cap": 0, "answer-bound": 0}, {})]:   # the weights alone
        grid = FleetGrid(app_for(scores, weights), nodes=nodes)            # fresh query budgets for each run
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            deploy.deployed_main(grid, Context(run_id=1, node_id=0, node_config={}, state=RecordDict(),
                                               run_config={**rc, **extra}))
            ref = PFWCP(0.1, **kw).calibrate(agents).threshold(tw)
        got.append(np.load(tmp_path / "q.npz")["pfwcp-mc"])
        np.testing.assert_array_equal(got[-1], ref)
    assert not np.array_equal(got[0], got[1])                               # the default is not the uncapped run


@pytest.mark.slow
def test_the_liar_script_measures_the_deployed_defaults_at_any_K(tmp_path):
    # its smallest run: one seed, K = 3; the deployed defaults' rows (agg-cap 2, the default weight range, a named
    # finite score range) beside the honest federation at the same defaults, and their table
    root = Path(__file__).resolve().parents[1]
    script = str(root / "studies" / "redteam" / "attack_one_liar.py")
    r = subprocess.run([sys.executable, script, "--seeds", "1", "--K", "3", "--out", str(tmp_path / "o.json")],
                       capture_output=True, text=True, cwd=root)
    assert r.returncode == 0, r.stderr
    d = json.loads((tmp_path / "o.json").read_text())
    assert (d["K"], d["liars"], d["command"]) == (3, [1], "python studies/redteam/attack_one_liar.py --seeds 1 --K 3")
    assert {f"deployed/{sg}/pfwcp-mc" for sg in ("inf", "zero", "up")} | {"honest+cap2/-/pfwcp-mc"} <= set(d["table"])
    r = subprocess.run([sys.executable, script, "--table", str(tmp_path / "o.json")], capture_output=True, text=True, cwd=root)
    assert r.returncode == 0 and r.stdout.count("\n| 3 | 1 | ") == 4, r.stdout + r.stderr


def test_the_liar_script_refuses_a_federation_without_two_other_agents():
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, str(root / "studies" / "redteam" / "attack_one_liar.py"), "--K", "2"],
                       capture_output=True, text=True, cwd=root)
    assert r.returncode == 2 and "--K" in r.stderr


def test_the_honest_mean_weight_study_prints_its_stored_table_and_refuses_bad_arguments():
    root = Path(__file__).resolve().parents[1]
    script = [sys.executable, str(root / "studies" / "redteam" / "honest_mean_weight.py")]
    stored = root / "results" / "flower_pipeline" / "honest_mean_weight.json"
    r = subprocess.run(script + ["--table", str(stored)], capture_output=True, text=True, cwd=root)
    d = json.loads(stored.read_text())
    assert r.returncode == 0 and r.stdout.count("| estimated |") == len(d["datasets"]), r.stdout + r.stderr
    r = subprocess.run(script + ["--draws", "0"], capture_output=True, text=True, cwd=root)
    assert r.returncode == 2 and "usage:" in r.stderr


def test_the_robust_reading_is_on_by_default_and_off_only_by_name(task_identity, tmp_path):
    # K = 11: agent 5 answers the top of the named score range at every test point (the upward lie, within every
    # check): by default (answer-bound 1.25) its answer counts at most 1.25 x the others' threshold; 0: as it came
    scores, weights, tw = federation(seed=0, K=11, n=40, m=50)
    nodes = list(range(20, 31))
    np.save(tmp_path / "tw.npy", tw)
    top = lambda q: [50.0 if isinstance(v, float) and np.isfinite(v) else v for v in q]        # +inf where forced
    up = lambda node, d: {**d, "quantiles": top(d["quantiles"])} if node == 25 and d["type"] == "AgentMessage" else d
    rc = {"test-weights": str(tmp_path / "tw.npy"), "out": str(tmp_path / "q.npz"), "agent-nodes": " ".join(map(str, nodes)),
          "agent-max-n": " ".join(["40"] * 11), "score-range": "0 50"}
    got = {}
    for extra in ({}, {"answer-bound": 0}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            deploy.deployed_main(FleetGrid(app_for(scores, weights), tamper=up, nodes=nodes), Context(
                run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={**rc, **extra}))
        got[len(extra)] = np.load(tmp_path / "q.npz")["pfwcp-mc"]
        assert np.load(tmp_path / "q.npz")["pfwcp-mc-agents"].tolist() == list(range(11))    # the lie passed every check
    agents = [AgentCalibration(s, w) for s, w in zip(scores, weights)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = PFWCP(0.1, agg_weights=capped_agg_weights([a.summary() for a in agents], deploy.AGG_CAP)).calibrate(agents)
        msgs = model.messages(tw)
    msgs[5] = AgentMessage(np.where(np.isinf(msgs[5].quantiles), np.inf, 50.0), msgs[5].beta)
    np.testing.assert_array_equal(got[0], robust_aggregate(msgs, model.agg_weights_, model.tau_, deploy.ANSWER_BOUND))
    np.testing.assert_array_equal(got[1], robust_aggregate(msgs, model.agg_weights_, model.tau_))
    assert np.all(got[0] <= got[1]) and not np.array_equal(got[0], got[1])         # the reading lowers what the lie raised
