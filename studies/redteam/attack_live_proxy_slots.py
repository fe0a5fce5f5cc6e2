"""attack_proxy_slots.py on a live deployment: one agent's slow uploads hold the proxy's in-flight slots during a pipeline run.

usage: python studies/redteam/attack_live_proxy_slots.py [--keep DIR] [--hold 120] [--slow 32]

Runs scripts/flower_deploy.sh --agents 3 --pipeline (a short schedule) in the background. Once the run has started,
the malicious agent (agent 2's own registered key, read from the deployment's keys/) opens SLOW TLS uploads to the
Fleet-only proxy, each announcing 1 MiB and sending a byte every 2 s (each opened again when the proxy closes it),
for HOLD seconds. Agents 0 and 1 are honest. The defence holds if the run completes with agents 0 and 1 trained and
calibrated; it is broken if the run fails, or an honest agent is left out.
Exit 0 if the defence held, 1 if it broke (naming what the server logged), 2 on bad arguments."""
import argparse, collections, json, os, re, signal, socket, ssl, subprocess, sys, tempfile, threading, time
from pathlib import Path
from cryptography.hazmat.primitives import serialization
from flwr.supercore.primitives.asymmetric import public_key_to_bytes
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxy_common import headers        # flwr 1.42 node-auth headers, signed

ROOT = Path(__file__).resolve().parents[2]


def slow_uploads(T: Path, slow: int, hold: float) -> collections.Counter:
    "SLOW uploads signed by agent 2's key to the proxy of deployment T for `hold` seconds; what happened to them."
    sk = serialization.load_ssh_private_key((T / "keys/agent_2").read_bytes(), None)
    keys = {"liar": (sk, sk.public_key())}
    port = int((T / "ports").read_text().split()[1])
    ctx = ssl.create_default_context(cafile=str(T / "certs/ca.crt"))
    stop, held = threading.Event(), collections.Counter()
    def one():
        while not stop.is_set():
            head = (f"POST /v1/fleet/push-object HTTP/1.1\r\nHost: localhost\r\nContent-Length: {2**20}\r\n".encode()
                    + b"".join(f"{k}: {v}\r\n".encode() for k, v in headers("liar", keys).items()) + b"\r\n")
            try:
                with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost") as s:
                    s.sendall(head); held["opened"] += 1
                    s.settimeout(0.05)
                    while not stop.is_set():
                        s.sendall(b"x"); stop.wait(2.0)
                        try:
                            if s.recv(64):                 # the proxy answered (408 after its body timeout): again
                                held["answered (body timeout)"] += 1; break
                        except (socket.timeout, ssl.SSLWantReadError):
                            pass
            except OSError as e:
                held[f"failed: {type(e).__name__}"] += 1
                stop.wait(0.5)
    ts = [threading.Thread(target=one, daemon=True) for _ in range(slow)]
    for t in ts: t.start()
    stop.wait(hold); stop.set()
    return held


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog="Exit 0: the honest agents were served.")
    ap.add_argument("--keep", default="", help="the deployment's directory (must not exist); default: a temporary one")
    ap.add_argument("--hold", type=float, default=120.0, help="seconds the slow uploads are held (default 120)")
    ap.add_argument("--slow", type=int, default=32, help="slow uploads at once (default 32, the proxy's MAX_INFLIGHT)")
    a = ap.parse_args(argv)
    if not 0 < a.hold <= 600 or not 1 <= a.slow <= 60:
        ap.error("--hold in (0, 600] and --slow in 1..60")
    with tempfile.TemporaryDirectory(prefix="redteam2_") as tmp:
        T = Path(a.keep or Path(tmp) / "run")
        out = open(Path(tmp) / "deploy.out", "w+")
        proc = subprocess.Popen(["bash", str(ROOT / "scripts/flower_deploy.sh"), "--agents", "3", "--pipeline",
                                 "--train-kw", '{"predictor": {"epochs": 3}, "ratios": {"epochs": 2}}', "--keep", str(T)],
                                cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            t0 = time.monotonic()
            while not ((T / "run.log").exists() and "Successfully started run" in (T / "run.log").read_text()):
                if proc.poll() is not None or time.monotonic() - t0 > 600:
                    out.seek(0); sys.exit(f"the deployment did not start its run:\n{out.read()[-2000:]}")
                time.sleep(0.5)
            held = slow_uploads(T, a.slow, a.hold)
            rc = proc.wait(timeout=1500)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM); proc.wait(30)
        out.seek(0); text = out.read()
        proxy = (T / "proxy.log").read_text(errors="replace") if (T / "proxy.log").exists() else ""
    print(text[-2500:])
    print(f"malicious agent 2: {a.slow} slow uploads for {a.hold:g} s ({dict(held)}); the proxy refused "
          f"{proxy.count('requests in flight')} requests as 'in flight'; flower_deploy.sh exited {rc}")
    trained = re.search(r"trained over agents (\[[^\]]*\]).*calibrated over agents (\[[^\]]*\])", text)
    events = re.search(r"server events: (.*)", text)
    if rc != 0 and not trained:
        sys.exit(f"BROKEN: the run did not complete (exit {rc}) while agent 2 held the proxy's slots")
    tr, ca = (json.loads(trained[1]), json.loads(trained[2])) if trained else ([], [])
    if not {0, 1} <= set(tr) or not {0, 1} <= set(ca):
        sys.exit(f"BROKEN: an honest agent was left out (trained {tr}, calibrated {ca}); server events: "
                 f"{events[1][:400] if events else '?'}")
    print(f"held: agents 0 and 1 trained and calibrated (trained {tr}, calibrated {ca})")


if __name__ == "__main__":
    main()
