"""Packed messages that cannot be unpacked: a malicious peer agent's reply to the ServerApp, a malicious server's request to a resident agent.

usage: python studies/redteam/attack_packed_reply.py [--case deep-index|empty-blob|huge-header|bad-sum|all]

The server's rule (notebook 10d_federation_server): an agent that answers invalidly is logged and left out; the other
agents' answers are used. Packed messages (notebook 10g_federation_deploy: `pack_content`, `unpack_content`,
`PollingGrid`) add a step before that rule: `PollingGrid.pull_messages` unpacks each reply and, on a ValueError, logs
it and leaves the reply as it came. Here two agents answer one summary request through the real `PollingGrid` and the
real `ask_each` (a stand-in for Flower's Grid delivers the replies): agent 0 honestly, agent 1 with a packed record
built to make the unpacking raise something else than ValueError:
  deep-index   the index (`pfwcp-packed-index`.json) is a list nested 100000 deep: json.loads raises RecursionError
  empty-blob   the blob Array says uint8 (0,) and holds no bytes: numpy.load raises EOFError
  huge-header  the blob holds only a .npy header claiming 2**50 uint8: numpy.load allocates first, MemoryError
  bad-sum      (control) an index describing more bytes than packed: ValueError, which PollingGrid handles
The defence holds if ask_each returns with agent 0's answer (agent 1 left out or its junk ignored); it is broken if
an exception escapes (in a deployment: the ServerApp's run dies, every agent's work of the run is lost).
The other direction (a malicious server's packed request to an agent) is tried too: the resident agent's `run_task`
(its Runtime API calls stubbed) with the real pipeline ClientApp and `packing_mod`; it holds if the task ends as an
error reply and `run_task` returns (the resident keeps serving).
Exit 0 if the defence held for every case tried, 1 otherwise (the message names each case that broke it)."""
import argparse, io, json, sys
import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, RecordDict
from flwr.supercore.task_identity import TaskIdentity
from pfwcp_nb.pfwcp import PROTOCOL_VERSION
from pfwcp_nb.federation.protocol import request, pack
from pfwcp_nb.federation.deploy import PACKED, PollingGrid
from pfwcp_nb.federation.server import ask_each

HONEST, LIAR = 101, 102          # node ids of agent 0 (honest) and agent 1 (malicious)


def blob_record(data: bytes) -> ArrayRecord:
    "The packed record with a blob whose metadata (uint8, 1-d, numpy.ndarray) passes unpack_content's checks."
    return ArrayRecord({"blob": Array(dtype="uint8", shape=(len(data),), stype="numpy.ndarray", data=data)})


def npy_header(shape: tuple) -> bytes:
    f = io.BytesIO()
    np.lib.format.write_array_header_1_0(f, {"descr": "|u1", "fortran_order": False, "shape": shape})
    return f.getvalue()


CASES = {   # case -> (packed ArrayRecord, index json)
    "deep-index": lambda: (blob_record(np.lib.format.MAGIC_PREFIX + b"\x01\x00" + npy_header((0,))[8:]),
                           "[" * 100000 + "]" * 100000),
    "empty-blob": lambda: (blob_record(b""), "[]"),
    "huge-header": lambda: (blob_record(npy_header((2 ** 50,))), "[]"),
    "bad-sum": lambda: (blob_record(npy_header((0,))), '[["r", "a", "uint8", [4], "numpy.ndarray", 4]]'),   # control
}


class StubGrid:
    "Flower's Grid as PollingGrid sees it: pushes get ids, a pull returns each node's reply (the liar's crafted)."
    def __init__(self, case):
        self.case, self.sent = case, {}
    def push_messages(self, messages):
        ids = []
        for m in messages:
            m.metadata.__dict__["_message_id"] = m.object_id
            self.sent[m.object_id] = m; ids.append(m.object_id)
        return ids
    def pull_messages(self, message_ids):
        out = []
        for mid in message_ids:
            m = self.sent[mid]
            req = json.loads(m.content.config_records["pfwcp"]["json"])
            k = 0 if m.metadata.dst_node_id == HONEST else 1
            content = pack({"version": PROTOCOL_VERSION, "type": "Summary", "agent": k}, agent=k, reply_to=req)
            if k == 1:
                rec, index = CASES[self.case]()
                content[PACKED] = rec
                content[PACKED + "-index"] = ConfigRecord({"json": index})
            rep = Message(content, reply_to=m)
            rep.metadata.__dict__["_src_node_id"] = m.metadata.dst_node_id
            out.append(rep)
        return out


def attack(case: str) -> tuple:
    "(held, what happened) for one case."
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    nodes, events = {0: HONEST, 1: LIAR}, []
    reqs = {k: request("summary", run=1) for k in nodes}
    try:
        got = ask_each(PollingGrid(StubGrid(case), poll=0.01), reqs, nodes, lambda k, d: d, events, "summary", timeout=2.0)
    except BaseException as e:      # noqa: BLE001 - what escapes is the finding
        return False, f"{type(e).__name__} escaped ask_each: {str(e)[:120]}"
    if 0 not in got:
        return False, f"the honest agent's answer was lost: answers {sorted(got)}, events {events}"
    return True, f"answers from agents {sorted(got)}; events: {events or 'none'}"


def agent_side(case: str) -> tuple:
    "(held, what happened) for a malicious server's packed request of `case` to a resident agent."
    import pfwcp_nb.federation.resident as resident
    from flwr.app import Context
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 7, 1
    rec, index = CASES[case]()
    content = RecordDict({PACKED: rec, PACKED + "-index": ConfigRecord({"json": index})})
    msg = Message(content, dst_node_id=7, message_type="train")
    ctx = Context(run_id=1, node_id=7, node_config={"partition-id": 1}, state=RecordDict(), run_config={})
    seen = {}
    class _Run: fab_id = resident.AGENT_APPS["pipeline"]
    class _Client:
        def close(self): pass
    class _Beat:
        def __init__(self, fn): pass
        def start(self): pass
        def stop(self): pass
    saved = {n: getattr(resident, n) for n in ("runtime_client", "pull_task_input", "push_message", "push_task_output",
                                               "HeartbeatSender")}
    resident.runtime_client = lambda address, certificates, interceptors: _Client()
    resident.pull_task_input = lambda client: (msg, ctx, _Run(), None)
    resident.push_message = lambda client, reply, context: seen.update(reply=reply)
    resident.push_task_output = lambda client, context, status, details: seen.update(status=status)
    resident.HeartbeatSender = _Beat
    try:
        out = resident.run_task(resident.resident_app("pipeline"), "127.0.0.1:9", "token",
                                serve={resident.AGENT_APPS["pipeline"]})
    except BaseException as e:      # noqa: BLE001 - what escapes is the finding
        return False, f"{type(e).__name__} escaped the resident's run_task: {str(e)[:120]}"
    finally:
        for n, v in saved.items(): setattr(resident, n, v)
    rep = seen.get("reply")
    if rep is None or not rep.has_error() or out["status"] != "failed":
        return False, f"the task was not refused: {out}"
    return True, f"error reply: {out['details'][:110]}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog="Exit 0: the defence held for every case.")
    ap.add_argument("--case", choices=[*CASES, "all"], default="all", help="which malformed packed reply (default: all)")
    a = ap.parse_args(argv)
    broken = []
    for case in (CASES if a.case == "all" else [a.case]):
        held, what = attack(case)
        print(f"server {case:12s} {'held' if held else 'BROKEN'}: {what}")
        if not held: broken.append(f"{case} (to the server)")
        held, what = agent_side(case)
        print(f"agent  {case:12s} {'held' if held else 'BROKEN'}: {what}")
        if not held: broken.append(f"{case} (to an agent)")
    if broken:
        sys.exit(f"BROKEN: a malformed packed message ({', '.join(broken)}) is not refused as an invalid answer: a reply "
                 "to the server aborts its round instead of being left out (PollingGrid.pull_messages catches "
                 "ValueError only; unpack_content lets RecursionError, EOFError and MemoryError through).")
    print("held: every malformed packed message was refused: a reply left out, a request answered with an error")


if __name__ == "__main__":
    main()
