"""A stranger without any key fills the Fleet-only proxy's per-address connection limit: are agents at the same address (a shared host, one NAT) locked out?

usage: python studies/redteam/attack_proxy_conns.py [--conns 64] [--seconds 6]

The proxy (`network.fleet_proxy_server`, plain HTTP on loopback, one registered key) closes at once every connection
above MAX_PER_CLIENT from one address, and closes a connection that sends no whole request head within
HEADER_TIMEOUT seconds. The stranger keeps CONNS idle connections open from 127.0.0.1 (each opened again as soon
as it is closed). A registered agent sends a small signed Fleet request every 0.25 s for SECONDS seconds, from
127.0.0.1 (the same address: scripts/flower_deploy.sh's SuperNodes, or agents behind one NAT) and from 127.0.0.2
(an agent on another machine). The defence holds if both agents' requests pass; it is broken if the stranger, who
holds no key, keeps an agent out.
Exit 0 if the defence held; 1 otherwise, naming which address was locked out."""
import argparse, collections, os, socket, subprocess, sys, tempfile, threading, time
from pathlib import Path
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Route
from flwr.supercore.primitives.asymmetric import generate_key_pairs, public_key_to_bytes
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attack_fake_uploads import PROXY, free_port, headers, sink          # the first red team's proxy set-up


def idle(port, stop, seen):
    "One idle connection from 127.0.0.1 (no request at all), opened again whenever the proxy closes it."
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port)) as s:
                seen["opened"] += 1
                s.settimeout(0.5)
                while not stop.is_set():
                    try:
                        if s.recv(1) == b"": break          # closed by the proxy (header timeout, or over the limit)
                    except socket.timeout:
                        pass
        except OSError:
            pass
        stop.wait(0.01)


def request(port, keys, source, codes):
    body = b"x" * 200
    head = (f"POST /v1/fleet/pull-messages HTTP/1.1\r\nHost: link\r\nContent-Length: {len(body)}\r\n".encode()
            + b"".join(f"{k}: {v}\r\n".encode() for k, v in headers("agent", keys).items()) + b"\r\n")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0)) as s:
            s.sendall(head + body)
            codes[s.recv(64).split(b" ")[1].decode()] += 1
    except (OSError, IndexError):
        codes["closed at once"] += 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog="Exit 0: no agent was locked out.")
    ap.add_argument("--conns", type=int, default=64, help="idle connections the stranger keeps (default 64, MAX_PER_CLIENT)")
    ap.add_argument("--seconds", type=float, default=6.0, help="how long the agents keep asking (default 6)")
    a = ap.parse_args(argv)
    if not 0 <= a.conns <= 200 or not 0 < a.seconds <= 60:
        ap.error("--conns in 0..200 and --seconds in (0, 60]")
    keys = {"agent": generate_key_pairs()}
    sink_port, proxy_port = free_port(), free_port()
    srv = uvicorn.Server(uvicorn.Config(Starlette(routes=[Route("/{p:path}", sink, methods=["POST"])]), port=sink_port,
                                        log_level="critical"))
    threading.Thread(target=srv.run, daemon=True).start()
    stop, seen = threading.Event(), collections.Counter()
    codes = {"127.0.0.1": collections.Counter(), "127.0.0.2": collections.Counter()}
    with tempfile.TemporaryDirectory(prefix="redteam2_conns_") as d:
        Path(d, "agent.pem").write_bytes(public_key_to_bytes(keys["agent"][1]))
        proc = subprocess.Popen([sys.executable, "-c", PROXY, f"http://127.0.0.1:{sink_port}", str(proxy_port),
                                 str(Path(d, "agent.pem"))], stderr=subprocess.DEVNULL)
        try:
            for _ in range(600):
                try:
                    socket.create_connection(("127.0.0.1", proxy_port)).close(); break
                except OSError:
                    time.sleep(0.05)
            time.sleep(0.5)
            control = collections.Counter()
            request(proxy_port, keys, "127.0.0.1", control)
            ts = [threading.Thread(target=idle, args=(proxy_port, stop, seen), daemon=True) for _ in range(a.conns)]
            for t in ts: t.start()
            time.sleep(1.0)
            t0 = time.monotonic()
            while time.monotonic() - t0 < a.seconds:
                for src in codes:
                    request(proxy_port, keys, src, codes[src])
                time.sleep(0.25)
        finally:
            stop.set(); proc.terminate(); proc.wait(10); srv.should_exit = True
    print(f"control (before the attack, from 127.0.0.1): {dict(control)}")
    print(f"stranger: {a.conns} idle connections from 127.0.0.1 ({seen['opened']} opened in all)")
    for src, c in codes.items():
        print(f"  agent at {src}: {dict(c)}")
    if dict(control) != {"200": 1}:
        sys.exit(f"the control failed: {dict(control)}; the set-up is broken")
    out = [src for src, c in codes.items() if sum(v for k, v in c.items() if k != "200")]
    if out:
        sys.exit(f"BROKEN: a stranger without any key kept the agent at {', '.join(out)} out "
                 f"({', '.join(str(dict(codes[s])) for s in out)}): the per-address limit counts connections before "
                 "any key is checked")
    print("held: both agents' requests passed")


if __name__ == "__main__":
    main()
