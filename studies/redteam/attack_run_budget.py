"""A curious operator against an agent's per-run query budget (policy-max-runs), through the deployed calibration ClientApp.

usage: python studies/redteam/attack_run_budget.py [--max-runs 2] [--max-test-weights 20] [--runs 6] [--threads 8]

The agent is `deploy.client_app` (the ClientApp a resident agent of --app calibration serves) with the node_config a
SuperNode gives it (partition-id 1, policy-max-runs, policy-max-test-weights, a data file and its budget file on
disk); each message builds its QueryPolicy from that file afresh, as in a deployment. The operator controls the
SuperLink, so it chooses every Flower run id and every request field. It tries:
  runs       RUNS Flower runs (new run ids), each asking for the whole per-run allowance of test weights
  spoofed    requests naming another run than the one they are delivered in, and run ids spelled '007', '+7',
             ' 7', with non-ASCII digits, or longer than a uint64
  small      many one-weight requests in a run already at its cap
  parallel   THREADS requests at once for a new run, each for the whole allowance (two processes sharing the file)
The defence holds if the agent answered at most MAX_RUNS x MAX_TEST_WEIGHTS test weights in all, in at most
MAX_RUNS runs; exit 0 then, 1 otherwise (naming how many were answered)."""
import argparse, sys, tempfile, threading, warnings
from pathlib import Path
import numpy as np
warnings.simplefilter("ignore")
from flwr.app import Context, Message, RecordDict
from flwr.supercore.task_identity import TaskIdentity
from pfwcp_nb.federation.protocol import request, pack, unpack
from pfwcp_nb.federation.deploy import client_app
from pfwcp_nb.procedure import paper_grid

BETA = float(paper_grid(0.1)[0][0])            # a level of the agreed grid


def ask(cfg: dict, delivered: int, run_field: str, m: int) -> int:
    "Test weights answered for one 'message' request of `m` weights naming `run_field`, delivered in Flower run `delivered`."
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = delivered, 7, 1
    req = request("message", run=0, beta=BETA, test_weights=np.full(m, 0.5))
    req["run"] = run_field
    ctx = Context(run_id=delivered, node_id=7, node_config=cfg, state=RecordDict(), run_config={})
    try:                     # a refusal raises here (Flower's runtime turns it into an error reply)
        rep = client_app(Message(pack(req), dst_node_id=7, message_type="query"), ctx)
    except Exception:        # noqa: BLE001 - a refusal of any kind answers nothing
        return 0
    if rep.has_error():
        return 0
    d, _ = unpack(rep.content, "agent 1")
    return len(d["quantiles"]) if "quantiles" in d else m


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog="Exit 0: the budget held.")
    ap.add_argument("--max-runs", type=int, default=2, help="the agent's policy-max-runs (default 2)")
    ap.add_argument("--max-test-weights", type=int, default=20, help="its policy-max-test-weights per run (default 20)")
    ap.add_argument("--runs", type=int, default=6, help="Flower runs the operator starts (default 6)")
    ap.add_argument("--threads", type=int, default=8, help="requests sent at once in the parallel try (default 8)")
    a = ap.parse_args(argv)
    if min(a.max_runs, a.max_test_weights, a.runs, a.threads) < 1:
        ap.error("every option must be >= 1")
    with tempfile.TemporaryDirectory(prefix="redteam2_budget_") as tmp:
        data = Path(tmp) / "agent_1.npz"
        rng = np.random.default_rng(0)
        np.savez(data, scores=rng.exponential(size=50), weights=rng.uniform(0.5, 2, size=50))
        cfg = {"partition-id": 1, "data-path": str(data), "policy-max-runs": a.max_runs,
               "policy-max-test-weights": a.max_test_weights}
        got = {}
        M = a.max_test_weights
        spoofs = [(201, "202"), (7, "007"), (7, "+7"), (7, " 7"), (7, "\u0667"), (7, "1" * 21), (101, "101 ")]
        for delivered, field in spoofs:                                    # spoofed
            got[f"run field {field!r} in run {delivered}"] = ask(cfg, delivered, field, M)
        got["run 101"] = ask(cfg, 101, "101", M)                            # a first run, at its cap
        out, lock = [], threading.Lock()
        def worker():
            n = ask(cfg, 999, "999", M)
            with lock: out.append(n)
        ts = [threading.Thread(target=worker) for _ in range(a.threads)]   # parallel
        for t in ts: t.start()
        for t in ts: t.join()
        got[f"{a.threads} parallel requests in run 999"] = sum(out)
        for run in range(102, 101 + a.runs):                               # runs
            got[f"run {run}"] = ask(cfg, run, str(run), M)
        got["small requests in run 101"] = sum(ask(cfg, 101, "101", 1) for _ in range(5))   # small
        state = (Path(str(data) + ".queries.json")).read_text()
    total, cap = sum(got.values()), a.max_runs * M
    for k, v in got.items():
        print(f"  {k:40s} {v} test weights answered")
    runs_answered = [k for k, v in got.items() if v]
    print(f"answered {total} test weights in all (cap {a.max_runs} runs x {M} = {cap}); state file: {state[:160]}")
    if total > cap or len(runs_answered) > a.max_runs:
        sys.exit(f"BROKEN: the agent answered {total} test weights in {len(runs_answered)} tries, above its cap {cap} "
                 f"({a.max_runs} runs x {M})")
    print("held: the operator got at most max_runs x max_test_weights test weights")


if __name__ == "__main__":
    main()
