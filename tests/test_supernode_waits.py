"""The deployment's waits (notebook 10f_federation_supernode): the backoff of a SuperNode's pulls, the clock put in
Flower's SuperNode loop, quick retries of a message's objects, the command's bad arguments; the resident agent's own
waits (notebook 10i_federation_resident)."""
import inspect
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

pytest.importorskip("flwr")
import flwr.supernode.start_client_internal as supernode_loop
import flwr.superlink.grid.http_grid as http_grid
from flwr.proto.message_pb2 import Message as MessageProto, ObjectTree
from flwr.proto.runtime_pb2 import AcquireTaskResponse, PullAppMessagesResponse, PullTaskInputResponse
from flwr.proto.task_pb2 import Task
from flwr.supercore.inflatable.inflatable_utils import pull_objects

import pfwcp_nb.federation.resident as resident
import pfwcp_nb.federation.supernode as sn

ROOT = Path(__file__).resolve().parents[1]


@given(first=st.floats(0.001, 3.0), factor=st.floats(1.0, 20.0), pulls=st.lists(st.booleans(), max_size=40))
def test_the_backoff_stays_between_first_and_cap_and_starts_over_after_a_message(first, factor, pulls):
    cap = min(60.0, first * factor)
    b, before = sn.Backoff(first, cap), None
    for got in pulls:
        b.pulled(got)
        assert first <= b.wait <= cap
        if got:
            assert b.wait == first
        elif before is not None:
            assert b.wait >= before                      # empty pulls never shorten the wait
        before = b.wait


@pytest.mark.parametrize("first, cap", [(0, 1), (2, 1), (1, 61), (-0.1, 3), (float("nan"), 3)])
def test_a_bad_backoff_is_refused(first, cap):
    with pytest.raises(ValueError, match="0 < first <= cap <= 60"):
        sn.Backoff(first, cap)


def test_the_clock_maps_flowers_two_waits_and_refuses_any_other():
    waited, b = [], sn.Backoff(0.05, 3.0)
    clock = sn.SuperNodeClock(b, reply=0.01, wait=waited.append)
    b.pulled(False); b.pulled(False)
    clock.sleep(3); clock.sleep(0.5)
    assert waited == [0.1, 0.01]
    with pytest.raises(ValueError, match="a wait SuperNodeClock does not know"):
        clock.sleep(2)
    with pytest.raises(ValueError, match=r"`reply` must be in \(0, 0.5\]"):
        sn.SuperNodeClock(b, reply=0)


def test_the_installed_flower_loop_is_accepted_and_a_changed_one_refused():
    src = inspect.getsource(supernode_loop)
    sn.check_loop(src)
    for changed in (src.replace("time.sleep(3)", "time.sleep(5)"), src + "\nt = time.time()",
                    src.replace("run_id = _pull_and_store_message(", "run_id = pull_next(")):
        with pytest.raises(RuntimeError, match="cannot be shortened here"):
            sn.check_loop(changed)


def test_the_patch_counts_pulls_and_shortens_object_retries(monkeypatch):
    for name in ("time", "_pull_and_store_message", "pull_objects"):       # undone after the test
        monkeypatch.setattr(supernode_loop, name, getattr(supernode_loop, name))
    answers = iter([None, None, 11])
    monkeypatch.setattr(supernode_loop, "_pull_and_store_message", lambda **kw: next(answers))
    clock = sn.SuperNodeClock(sn.Backoff(0.05, 3.0))
    original = sn.patch_supernode(clock)
    assert supernode_loop.time is clock
    assert supernode_loop.pull_objects.keywords == {"initial_backoff": 0.01, "backoff_cap": 0.5, "max_time": 7200.0}
    waits = []
    for _ in range(3):
        supernode_loop._pull_and_store_message(state=None)
        waits.append(clock.backoff.wait)
    assert waits == [0.05, 0.1, 0.05] and original["pull_objects"] is pull_objects
    with pytest.raises(RuntimeError, match="not Flower's pull_objects"):
        sn.quick_object_pulls(supernode_loop)                                # twice: refused


def test_quick_object_pulls_refuses_bad_retries():
    m = types.SimpleNamespace(pull_objects=pull_objects, __name__="stand_in")
    with pytest.raises(ValueError, match="0 < retry <= cap <= 10"):
        sn.quick_object_pulls(m, retry=1.0, cap=0.5)
    assert http_grid.pull_objects is pull_objects          # the ServerApp's patch happens in flwr-serverapp only


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "pfwcp_nb.federation.supernode", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)


@pytest.mark.parametrize("args, why", [
    ([], "give flower-supernode's arguments"),
    (["--first-wait", "0", "--superlink", "x:1"], "0 < first <= max <= 60"),
    (["--first-wait", "5", "--superlink", "x:1"], "0 < first <= max <= 60"),
    (["--reply-wait", "0.6", "--superlink", "x:1"], "--reply-wait must be in (0, 0.5]"),
    (["--max-wait", "soon"], "invalid float value"),
])
@pytest.mark.slow
def test_the_command_exits_2_with_usage_on_bad_arguments(args, why):
    r = _cli(*args)
    assert r.returncode == 2 and "usage:" in r.stderr and why in r.stderr, r.stderr[-600:]


@pytest.mark.slow
def test_the_command_passes_flowers_arguments_to_flower():
    r = _cli("--isolation", "thread", "--superlink", "127.0.0.1:9")
    assert r.returncode == 2 and "flower-supernode" in r.stderr and "invalid choice: 'thread'" in r.stderr, r.stderr[-600:]


def test_the_deploy_script_refuses_bad_waits():
    r = subprocess.run(["bash", str(ROOT / "scripts" / "flower_deploy.sh"), "--waits", "fast"], capture_output=True, text=True)
    assert r.returncode == 2 and "--waits must be backoff or flower" in r.stderr and "usage:" in r.stderr


class _NoTask:
    "A Runtime API with `empty` AcquireTask answers without a task, then one task."
    def __init__(self, empty):
        self.left = empty
    def AcquireTask(self, req):
        self.left -= 1
        return AcquireTaskResponse() if self.left >= 0 else AcquireTaskResponse(task=Task(task_id=5), token="t")
    def close(self): pass


def test_the_resident_agent_asks_for_tasks_with_a_backoff(monkeypatch):
    waited = []
    monkeypatch.setattr(resident, "runtime_client", lambda address, certificates, interceptors: _NoTask(6))
    monkeypatch.setattr(resident.time, "sleep", waited.append)
    monkeypatch.setattr(resident, "run_task", lambda app, address, token, certificates, serve: {"status": "completed"})
    assert resident.serve_agent(None, "127.0.0.1:9", b"secret", poll=0.25, max_tasks=1) == 1
    assert waited == [0.01, 0.02, 0.04, 0.08, 0.16, 0.25]


def test_the_resident_pull_retries_objects_after_its_own_short_wait(monkeypatch):
    seen = {}
    def inflate(tree, pull, confirm, **kw):
        seen.update(kw)
        raise RuntimeError("stop here")
    class _Client:
        def PullTaskInput(self, req):
            return PullTaskInputResponse(task_id=3)
        def PullMessages(self, req):
            return PullAppMessagesResponse(messages_list=[MessageProto()], message_object_trees=[ObjectTree(object_id="a")])
        def PullObject(self, req): raise AssertionError("not reached: the pull is a stand-in")
        def ConfirmMessageReceived(self, req): raise AssertionError("not reached")
    monkeypatch.setattr(resident, "pull_and_inflate_object_from_tree", inflate)
    with pytest.raises(RuntimeError, match="stop here"):
        resident.pull_task_input(_Client(), retry=0.02)
    assert seen["initial_backoff"] == 0.02 and seen["backoff_cap"] == 0.5


def test_quick_object_pulls_bounds_the_time_and_refuses_a_bad_one():
    m = types.SimpleNamespace(pull_objects=pull_objects, __name__="stand_in")
    sn.quick_object_pulls(m, max_time=120.0)
    assert m.pull_objects.keywords["max_time"] == 120.0
    for bad in (0, -1, 10**5):
        with pytest.raises(ValueError, match="`max_time` must be in"):
            sn.quick_object_pulls(types.SimpleNamespace(pull_objects=pull_objects, __name__="x"), max_time=bad)
