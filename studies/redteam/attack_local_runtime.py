"""A local unprivileged process on an agent's machine, without the secret file, against a live deployment (the resident agents of notebook `10i_federation_resident`).

usage: python studies/redteam/attack_local_runtime.py DIR [--agent agent_0] [--as-user 65534]

DIR is a live `scripts/flower_deploy.sh --keep DIR` set-up (run it in the background; this script waits for the
SuperNodes). Run as root, it reads the CA certificate (public) and then drops to uid/gid --as-user (default 65534,
nobody: an unprivileged local user); every attempt below runs as that user:
  files    which of the agent's secrets it can read or write: the SuperExec secret (keys/NAME.secret), the SuperNode's
           node-auth private key (keys/NAME), the TLS keys (certs/server.key, certs/ca.key), the agent's data
           (data/NAME.npz) and its query-budget files (data/NAME.npz.queries.json, .pipeline.json): a data file read
           is the agent's raw data; a private key read lets it pose as the agent's SuperNode (node-auth) or as its
           Runtime API (TLS); a budget file written resets the agent's budget
  acquire  the SuperNode's Runtime API (TLS on 127.0.0.1, --isolation process): AcquireTask without the SuperExec
           headers, and with headers signed by a guessed secret (it would hand the process the next task: the
           server's message, and the right to answer it in the agent's name)
  token    PullTaskInput with a made-up task token
Exit 0 if every attempt was refused; 1 otherwise, naming each that worked."""
import argparse, os, sys, time
from pathlib import Path
import httpx
from flwr.proto.runtime_pb2 import AcquireTaskRequest, PullTaskInputRequest
from flwr.supercore.constant import TaskType
from flwr.supercore.interceptors import (RuntimeTokenHttpInterceptor, RuntimeVersionHttpInterceptor,
                                         SuperExecAuthHttpInterceptor)
from pfwcp_nb.federation.resident import runtime_client


def try_call(fn) -> tuple:
    "(None, why) if the call was refused, else (what it returned, '') (an empty answer: accepted, no task pending)."
    try:
        res = fn()
    except (Exception, KeyboardInterrupt) as e:   # flwr 1.42 gives up on a 401 by sending itself SIGINT
        cause = e.__context__ if isinstance(e, KeyboardInterrupt) and e.__context__ else e
        return None, f"{type(cause).__name__}: {str(cause).splitlines()[0][:90]}"
    return str(res)[:200] or "(an empty answer: accepted, no task pending)", ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog="Exit 0: every attempt refused.")
    ap.add_argument("dir", help="the --keep DIR of a live scripts/flower_deploy.sh")
    ap.add_argument("--agent", default="agent_0", help="whose SuperNode to attack (default agent_0)")
    ap.add_argument("--as-user", type=int, default=65534, help="uid and gid to drop to when run as root (default 65534)")
    ap.add_argument("--wait", type=float, default=120.0, help="seconds to wait for the SuperNode (default 120)")
    a = ap.parse_args(argv)
    T = Path(a.dir)
    t0 = time.monotonic()
    while not (T / f"supernode_{a.agent}.log").exists() and time.monotonic() - t0 < a.wait:
        time.sleep(0.5)
    if not (T / "ports").exists():
        ap.error(f"{T} is not a flower_deploy.sh --keep directory (no 'ports' file)")
    ports = (T / "ports").read_text().split()
    k = int(a.agent.split("_")[1])
    address, ca = f"127.0.0.1:{ports[k + 2]}", (T / "certs/ca.crt").read_bytes()
    time.sleep(3)                                   # the SuperNode's Runtime API up
    secret = (T / f"keys/{a.agent}.secret").read_bytes() if os.getuid() == 0 else None
    if os.getuid() == 0:
        os.setgroups([]); os.setgid(a.as_user); os.setuid(a.as_user)
    print(f"attacking {a.agent}'s SuperNode at {address} as uid {os.getuid()}")
    worked = []
    files = [f"keys/{a.agent}.secret", f"keys/{a.agent}", "certs/server.key", "certs/ca.key", f"data/{a.agent}.npz",
             f"data/{a.agent}.npz.queries.json", f"data/{a.agent}.npz.pipeline.json"]
    for f in files:
        p = T / f
        for mode, what in (("rb", "read"), ("r+b", "write")):
            try:
                with open(p, mode):
                    pass
            except FileNotFoundError:
                break
            except OSError:
                continue
            worked.append(f"{what} {f}")
        print(f"  {f:36s} " + ("absent" if not p.exists() and not any(w.endswith(f) for w in worked) else
                               ", ".join(w.split()[0] for w in worked if w.endswith(" " + f)) or "refused"))
    version = RuntimeVersionHttpInterceptor(component_name="SuperExec")
    if secret:   # the control: the API is reachable and the real secret accepted (a task type no one queues: no task taken)
        client = runtime_client(address, ca, [version, SuperExecAuthHttpInterceptor(
            master_secret=secret, protected_methods={"/flwr.proto.Runtime/AcquireTask"})])
        try:
            got, why = try_call(lambda: client.AcquireTask(AcquireTaskRequest(supported_task_types=[TaskType.CONNECTOR])))
        finally:
            client.close()
        print(f"  {'(control) AcquireTask with the real secret':44s} {'accepted' if got is not None else 'refused: ' + why}")
        if got is None:
            sys.exit(f"the control failed: the Runtime API at {address} refused the real secret ({why}); is the set-up live?")
    attempts = {
        "AcquireTask without SuperExec headers": ([version], "acquire"),
        "AcquireTask signed with a guessed secret": ([version, SuperExecAuthHttpInterceptor(
            master_secret=os.urandom(32), protected_methods={"/flwr.proto.Runtime/AcquireTask"})], "acquire"),
        "PullTaskInput with a made-up task token": ([RuntimeVersionHttpInterceptor(component_name="flwr-clientapp"),
                                                     RuntimeTokenHttpInterceptor(os.urandom(32).hex())], "input"),
    }
    for name, (icpt, call) in attempts.items():
        client = runtime_client(address, ca, icpt)
        try:
            got, why = try_call(lambda: client.AcquireTask(AcquireTaskRequest(supported_task_types=[TaskType.CLIENT_APP]))
                           if call == "acquire" else client.PullTaskInput(PullTaskInputRequest()))
        finally:
            client.close()
        print(f"  {name:44s} {'refused (' + why + ')' if got is None else 'ANSWERED: ' + got}")
        if got is not None:
            worked.append(name)
    if worked:
        sys.exit("BROKEN: a local unprivileged process could " + "; ".join(worked))
    print("held: no secret, key, data or budget file, and no task, for a local process without the secret")


if __name__ == "__main__":
    main()
