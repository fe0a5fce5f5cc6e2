"""attack_packed_reply.py on a live deployment: one malicious resident agent whose every reply carries a packed index nested too deep for json.

usage: python studies/redteam/attack_live_packed_reply.py [--keep DIR] [--agents 3] [--liar agent_1]

Runs scripts/flower_deploy.sh --pipeline (K agents, a short schedule) from a copy in which the resident agent of
--liar is this script in its `--resident` role: the package's own resident agent (`resident.serve_agent`, the same
ClientApp and `packing_mod`) with one more ClientApp mod outside `packing_mod` that puts into every reply a packed
record `pfwcp-packed` and an index `pfwcp-packed-index` of 100000 nested lists (200 KB of JSON). Every other agent
is honest. The defence holds if the run completes with the liar left out (the server's rule for an invalid answer);
it is broken if the ServerApp's run dies (RecursionError out of `PollingGrid.pull_messages`).
Exit 0 if the defence held, 1 if it broke (the message quotes the ServerApp's error), 2 on bad arguments."""
import argparse, os, re, subprocess, sys, tempfile
from pathlib import Path
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DEPTH = 100000


def liar_mod(msg, context, call_next):
    "A ClientApp mod: the honest reply, then a packed record and an index json.loads cannot parse (RecursionError)."
    from flwr.app import Array, ArrayRecord, ConfigRecord
    from pfwcp_nb.federation.deploy import PACKED
    reply = call_next(msg, context)
    if not reply.has_error():
        if PACKED not in reply.content.array_records:
            reply.content[PACKED] = ArrayRecord({"blob": Array(np.zeros(0, np.uint8))})
        reply.content[PACKED + "-index"] = ConfigRecord({"json": "[" * DEPTH + "]" * DEPTH})
    return reply


def resident_role(name: str, argv: list) -> None:
    "The resident agent of `name`: the package's own, with `liar_mod` if `name` is the liar (env REDTEAM_LIAR)."
    import pfwcp_nb.federation.resident as resident
    from pfwcp_nb.federation.agent import pipeline_client_app
    from pfwcp_nb.federation.deploy import load_node_data, load_pipeline_policy, load_node_agreement, packing_mod
    if name == os.environ.get("REDTEAM_LIAR"):
        resident.resident_app = lambda kind: pipeline_client_app(
            resident.cached(load_node_data), load_pipeline_policy, load_node_agreement, mods=[liar_mod, packing_mod])
    resident.main(argv)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--resident"]:
        return resident_role(argv[1], argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog="Exit 0: the liar was left out, the run completed.")
    ap.add_argument("--keep", default="", help="keep the deployment's directory here (must not exist); default: a temporary one")
    ap.add_argument("--agents", type=int, default=3, help="K (default 3)")
    ap.add_argument("--liar", default="agent_1", help="the malicious agent (default agent_1; agent_0 is the test agent)")
    a = ap.parse_args(argv)
    if a.agents < 2 or not re.fullmatch(r"agent_[1-9][0-9]*", a.liar) or int(a.liar[6:]) >= a.agents:
        ap.error("--agents >= 2 and --liar agent_J with 1 <= J < K")
    src = (ROOT / "scripts/flower_deploy.sh").read_text()
    needle = "python -m pfwcp_nb.federation.resident "
    if src.count(needle) != 1:
        sys.exit(f"scripts/flower_deploy.sh no longer starts its residents with '{needle.strip()}' once: update this script")
    with tempfile.TemporaryDirectory(prefix="redteam2_") as tmp:
        script = Path(tmp) / "flower_deploy_liar.sh"
        script.write_text(src.replace(needle, f'python "{Path(__file__).resolve()}" --resident "$name" '))
        keep = a.keep or str(Path(tmp) / "run")
        env = {**os.environ, "REDTEAM_LIAR": a.liar, "PYTHONPATH": str(ROOT)}
        r = subprocess.run(["bash", str(script), "--agents", str(a.agents), "--pipeline", "--train-kw",
                            '{"predictor": {"epochs": 3}, "ratios": {"epochs": 2}}', "--keep", keep],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
        print(r.stdout[-1500:], r.stderr[-1500:], sep="\n")
        T = Path(keep)
        log = "\n".join(p.read_text(errors="replace") for p in [T / "run.log", T / "superlink.log"] if p.exists())
        served = (T / f"agent_{a.liar}.jsonl").read_text().count("\n") if (T / f"agent_{a.liar}.jsonl").exists() else 0
    print(f"the liar ({a.liar}) answered {served} message(s); flower_deploy.sh exited {r.returncode}")
    if "RecursionError" in log:
        line = next(l for l in log.splitlines() if "RecursionError" in l)
        sys.exit(f"BROKEN: one malicious agent's packed reply killed the ServerApp's run: {line.strip()[:200]}")
    if r.returncode != 0:
        sys.exit(f"BROKEN (or the set-up failed): the run did not complete (exit {r.returncode}); see the output above")
    print("held: the run completed; the liar's replies were left out")


if __name__ == "__main__":
    main()
