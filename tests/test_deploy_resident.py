"Resident agents (notebook 10i_federation_resident): one task answered in process by the agent's own ClientApp, a run of another app refused, failures as error replies, the command's bad arguments, a lean import."
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("flwr")
from flwr.app import Message, RecordDict, ConfigRecord, Context
from flwr.common.constant import ErrorCode, SubStatus
from flwr.clientapp import ClientApp

import pfwcp_nb.federation.resident as resident

ROOT = Path(__file__).resolve().parents[1]


class _Run:
    def __init__(self, fab_id): self.fab_id = fab_id


class _Client:
    def close(self): self.closed = True


@pytest.fixture
def fake_runtime(monkeypatch, task_identity):
    "run_task against a fake Runtime API: one query message of `fab_id`; records what was pushed."
    seen = {"fab_id": "pfwcp-nb/pfwcp-pipeline"}
    msg = Message(RecordDict({"q": ConfigRecord({"x": 1})}), dst_node_id=7, message_type="query")
    ctx = Context(run_id=1, node_id=7, node_config={"partition-id": 0}, state=RecordDict(), run_config={})
    monkeypatch.setattr(resident, "runtime_client", lambda address, certificates, interceptors: _Client())
    monkeypatch.setattr(resident, "pull_task_input", lambda client: (msg, ctx, _Run(seen["fab_id"]), None))
    monkeypatch.setattr(resident, "push_message", lambda client, reply, context: seen.update(reply=reply))
    monkeypatch.setattr(resident, "push_task_output",
                        lambda client, context, status, details: seen.update(status=status, details=details))
    class _Beat:
        def __init__(self, fn): pass
        def start(self): seen["beat"] = True
        def stop(self): seen["beat"] = False
    monkeypatch.setattr(resident, "HeartbeatSender", _Beat)
    return seen


def _echo_app():
    app = ClientApp()
    @app.query()
    def q(msg, context):
        context.state.config_records["seen"] = ConfigRecord({"n": 1})
        return Message(RecordDict({"a": ConfigRecord({"y": 2})}), reply_to=msg)
    return app


def test_a_task_is_answered_by_the_resident_app(fake_runtime):
    out = resident.run_task(_echo_app(), "127.0.0.1:9", "token", serve={"pfwcp-nb/pfwcp-pipeline"})
    assert out == {"status": SubStatus.COMPLETED, "type": "query", "details": ""}
    assert not fake_runtime["reply"].has_error() and fake_runtime["reply"].content.config_records["a"]["y"] == 2
    assert fake_runtime["status"] == SubStatus.COMPLETED and fake_runtime["beat"] is False


def test_a_run_of_another_app_gets_an_error_reply_and_runs_nothing(fake_runtime):
    fake_runtime["fab_id"] = "someone-else/foreign"
    ran = []
    app = ClientApp()
    @app.query()
    def q(msg, context):
        ran.append(1)
        return Message(RecordDict(), reply_to=msg)
    out = resident.run_task(app, "127.0.0.1:9", "token", serve={"pfwcp-nb/pfwcp-pipeline"})
    assert out["status"] == SubStatus.FAILED and "answers runs of ['pfwcp-nb/pfwcp-pipeline'] only" in out["details"]
    assert ran == [] and fake_runtime["reply"].has_error()
    assert fake_runtime["reply"].error.code == ErrorCode.CLIENT_APP_RAISED_EXCEPTION
    assert "someone-else/foreign" in fake_runtime["reply"].error.reason


def test_a_failing_app_is_an_error_reply_naming_the_failure(fake_runtime):
    app = ClientApp()
    @app.query()
    def q(msg, context):
        raise ValueError("agent 0: not a pfwcp message")
    out = resident.run_task(app, "127.0.0.1:9", "token")
    assert out["status"] == SubStatus.FAILED and "not a pfwcp message" in fake_runtime["reply"].error.reason
    assert fake_runtime["status"] == SubStatus.FAILED


def test_the_real_pipeline_app_refuses_a_foreign_query(fake_runtime):
    # the package's own ClientApp, as a resident agent runs it: a query that is not of the protocol is refused
    out = resident.run_task(resident.resident_app("pipeline"), "127.0.0.1:9", "token")
    assert out["status"] == SubStatus.FAILED and fake_runtime["reply"].has_error()


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "pfwcp_nb.federation.resident", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize("args, why", [
    ([], "required: --secret-file"),
    (["--secret-file", "/nonexistent/secret"], "--secret-file '/nonexistent/secret' is not a file"),
    (["--secret-file", __file__, "--root-certificates", "/nonexistent/ca.crt"], "is not a file"),
    (["--secret-file", __file__, "--app", "train"], "invalid choice"),
    (["--secret-file", __file__, "--poll", "0"], "--poll must be in (0, 60]"),
])
@pytest.mark.slow
def test_the_command_exits_2_with_usage_on_bad_arguments(args, why):
    r = _cli(*args)
    assert r.returncode == 2 and "usage:" in r.stderr and why in r.stderr, r.stderr[-600:]


def test_an_empty_secret_is_refused():
    with pytest.raises(ValueError, match="`secret` is empty"):
        resident.serve_agent(resident.resident_app("calibration"), "127.0.0.1:9", b"")


@pytest.mark.slow
def test_the_agent_process_imports_neither_ray_nor_the_simulation_engine():
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", "import pfwcp_nb.federation.resident"],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-1000:]
    mods = {l.split("|")[-1].strip() for l in r.stderr.splitlines() if l.startswith("import time:")}
    assert "pfwcp_nb.federation.resident" in mods and "torch" in mods
    assert not {m for m in mods if m == "ray" or m.startswith(("ray.", "flwr.simulation"))}


@pytest.mark.parametrize("args, why", [
    (["--isolation", "thread"], "--isolation must be process or subprocess"),
    (["--pipeline", "--tolerance", "-1"], "--tolerance must be a number >= 0"),
    (["--pipeline", "--tolerance", "nan"], "--tolerance must be a number >= 0"),
])
def test_the_deploy_script_refuses_bad_isolation_and_tolerance(args, why):
    r = subprocess.run(["bash", str(ROOT / "scripts" / "flower_deploy.sh"), *args], capture_output=True, text=True)
    assert r.returncode == 2 and why in r.stderr and "usage:" in r.stderr


# --- packed messages (notebook 10g_federation_deploy: pack_content, unpack_content, packing_mod)
import json as _json
import numpy as _np
from flwr.app import Array, ArrayRecord
from pfwcp_nb.federation.deploy import PACKED, pack_content, unpack_content, packing_mod, PollingGrid


@pytest.mark.parametrize("seed", range(5))
def test_packing_round_trips_any_records(seed, task_identity):
    rng = _np.random.default_rng(seed)
    rd = RecordDict({"cfg": ConfigRecord({"json": "{}"})})
    for r in range(rng.integers(1, 5)):
        rd[f"rec-{r}"] = ArrayRecord({f"a{i}": Array(_np.asarray(rng.normal(size=tuple(rng.integers(0, 4, size=rng.integers(0, 3)))),
                                                                  dtype=rng.choice(["float32", "float64", "int64"])))
                                      for i in range(rng.integers(1, 4))})
    back = unpack_content(pack_content(rd), "the server")
    assert list(back.array_records) == list(rd.array_records) and list(back.config_records) == ["cfg"]
    for name, rec in rd.array_records.items():
        for k, a in rec.items():
            b = back.array_records[name][k]
            assert (b.dtype, tuple(b.shape), b.data) == (a.dtype, tuple(a.shape), a.data)


@pytest.mark.parametrize("index", [
    [["r", "a", "float32", [2], "numpy.ndarray", 999]],          # more bytes than packed
    [["r", "a", "float32", [-1], "numpy.ndarray", 8]],           # a negative dimension
    [["r", "a", "float32", [2], "numpy.ndarray"]],               # a field missing
    {"r": 1},                                                    # not a list
])
def test_an_index_that_does_not_add_up_is_refused_naming_the_sender(index):
    rd = pack_content(RecordDict({"r": ArrayRecord({"a": Array(_np.zeros(2, _np.float32))})}))
    rd[PACKED + "-index"] = ConfigRecord({"json": _json.dumps(index)})
    with pytest.raises(ValueError, match="node 9: an invalid packed message"):
        unpack_content(rd, "node 9")


def test_a_packed_record_with_more_than_the_blob_is_refused():
    rd = pack_content(RecordDict({"r": ArrayRecord({"a": Array(_np.zeros(2, _np.float32))})}))
    rd.array_records[PACKED]["extra"] = Array(_np.zeros(1, _np.uint8))
    with pytest.raises(ValueError, match="one 1-d uint8 array 'blob'"):
        unpack_content(rd, "node 9")


def test_the_mod_answers_in_kind(task_identity):
    rd = RecordDict({"r": ArrayRecord({"a": Array(_np.arange(3.0))})})
    echo = lambda m, ctx: Message(RecordDict({**m.content.array_records}), reply_to=m)
    packed = packing_mod(Message(pack_content(rd), dst_node_id=5, message_type="train"), None, echo)
    assert list(packed.content.array_records) == [PACKED]
    plain = packing_mod(Message(rd, dst_node_id=5, message_type="train"), None, echo)
    assert list(plain.content.array_records) == ["r"]


def test_polling_grid_refuses_a_bad_poll():
    with pytest.raises(ValueError, match=r"`poll` must be in \(0, 3\]"):
        PollingGrid(None, 5.0)
