"""A stranger floods the Fleet-only proxy with TCP connections that never start the TLS handshake: can it fill the proxy's open files and keep the agents out?

usage: python studies/redteam/attack_proxy_pretls.py [--nofile 1024] [--conns 1100] [--addresses 1] [--seconds 20] [--agents 3]
       python studies/redteam/attack_proxy_pretls.py --live DIR [--conns 1100] [--seconds 600]

The proxy (`network.serve_fleet_proxy`, TLS, the agents' keys registered) runs in its own process with an open-file
limit of NOFILE (`resource.setrlimit`; the usual default of a login shell and of a systemd service is 1,024) in front
of a stand-in SuperLink. The stranger holds no key and no certificate: it keeps CONNS TCP connections to the proxy
open from ADDRESSES loopback addresses (127.0.1.1, 127.0.1.2, ...; connects that do not wait for the proxy to accept)
and sends nothing, not even a TLS ClientHello; each connection the proxy closes is opened again at once. Meanwhile
AGENTS agents at 127.0.0.1, 127.0.0.2, ... each send a signed Fleet request over TLS on a new connection every 0.5 s
for SECONDS seconds, each with a 10-s timeout (Flower's SuperNode gives up and exits after 5 failed tries in a row).
The control: one request of each agent before the flood.
The defence holds if every agent's every request is answered 200 and the proxy process is still up; it is broken if
the flood makes any agent's request fail.
With --live DIR the flood goes to the proxy of a running `scripts/flower_deploy.sh --keep DIR` (its agents' address in
DIR/flwr-home/config.toml) until the run's result appears (DIR/data/pipeline.npz or thresholds.npz) or SECONDS pass:
start the deployment under the open-file limit to test (`ulimit -n 1024; scripts/flower_deploy.sh ... --keep DIR`).
The defence holds if the run's result appears and no SuperNode exited meanwhile (the script restarts one that exits:
"the SuperNode exited; restart" in DIR/supernode_*.log); the script's own exit code says whether the run passed.
Exit 0 if the defence held; 1 otherwise, naming what failed."""
import argparse, base64, collections, errno, os, resource, socket, ssl, subprocess, sys, tempfile, threading, time
from pathlib import Path
import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from flwr.supercore.date import now
from flwr.supercore.primitives.asymmetric import generate_key_pairs, public_key_to_bytes, sign_message
from pfwcp_nb.federation.network import NODE_AUTH_HEADERS, make_tls_files

PROXY = """import resource, sys; from pfwcp_nb.federation.network import serve_fleet_proxy
resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
serve_fleet_proxy(int(sys.argv[2]), sys.argv[3], sys.argv[4] + "/server.pem", sys.argv[4] + "/server.key",
                  host="0.0.0.0", authorized_keys=sys.argv[5:])"""


async def link(request):
    "The SuperLink's stand-in: reads the body, answers 200."
    await request.body()
    return PlainTextResponse("ok")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def signed(keys):
    "flwr 1.42's node-auth headers, signed now."
    sk, pk = keys
    stamp = now().isoformat()
    return {NODE_AUTH_HEADERS[0]: base64.b64encode(public_key_to_bytes(pk)).decode(),
            NODE_AUTH_HEADERS[1]: base64.b64encode(sign_message(sk, stamp.encode())).decode(), NODE_AUTH_HEADERS[2]: stamp}


def agent_request(port, ca, keys, source):
    "One signed Fleet request over TLS from `source`, a fresh connection (as a SuperNode's retry): its status, or the error."
    ctx = ssl.create_default_context(cafile=ca)
    try:
        with httpx.Client(verify=ctx, transport=httpx.HTTPTransport(verify=ctx, local_address=source), timeout=10) as c:
            return str(c.post(f"https://localhost:{port}/v1/fleet/pull-messages", headers=signed(keys), content=b"{}").status_code)
    except httpx.HTTPError as e:
        return type(e).__name__


def flood(port, source, n, stop, seen):
    "n connections from `source` that send nothing, opened without waiting (non-blocking connects); each one the proxy closes is opened again."
    socks = []
    while not stop.is_set():
        socks = [s for s in socks if not closed_now(s, seen)]
        while len(socks) < n:
            s = socket.socket()
            s.setblocking(False)
            s.bind((source, 0))
            if s.connect_ex(("127.0.0.1", port)) not in (0, errno.EINPROGRESS):
                seen["connect failed"] += 1; s.close(); break
            socks.append(s); seen["opened"] += 1
        seen[f"held from {source}"] = max(seen[f"held from {source}"], len(socks))
        stop.wait(0.2)
    for s in socks:
        s.close()


def closed_now(s, seen):
    "Whether the proxy has closed (or reset) `s`, without waiting; a connection still being set up is not."
    try:
        gone = s.recv(1) == b""
    except (BlockingIOError, InterruptedError):
        gone = False
    except OSError as e:                                      # reset by the proxy; ENOTCONN: still connecting
        gone = e.errno != errno.ENOTCONN
    if gone:
        seen["closed by the proxy"] += 1
        s.close()
    return gone


def live(a):
    "The flood against a running flower_deploy.sh --keep DIR until its run's result appears; whether any SuperNode exited."
    d = Path(a.live)
    config = d / "flwr-home" / "config.toml"
    for _ in range(1200):
        if config.exists() and "agents-address" in config.read_text(): break
        time.sleep(0.5)
    else:
        sys.exit(f"{config} names no agents' address after 600 s: is `flower_deploy.sh --keep {d}` running?")
    text = config.read_text()
    port = int(text[text.index("[superlink.agents-address]"):].split("address = ")[1].split('"')[1].rsplit(":", 1)[1])
    stop, seen, t0 = threading.Event(), collections.Counter(), time.monotonic()
    per = [a.conns // a.addresses + (i < a.conns % a.addresses) for i in range(a.addresses)]
    ts = [threading.Thread(target=flood, args=(port, f"127.0.1.{i + 1}", n, stop, seen), daemon=True) for i, n in enumerate(per)]
    for t in ts: t.start()
    result = lambda: [p for p in (d / "data" / "pipeline.npz", d / "data" / "thresholds.npz") if p.exists()]
    while not result() and time.monotonic() - t0 < a.seconds:
        time.sleep(1.0)
    stop.set()
    for t in ts: t.join(10)
    restarts = {p.name: p.read_text().count("the SuperNode exited; restart") for p in sorted(d.glob("supernode_*.log"))}
    print(f"stranger: {a.conns} connections without a TLS handshake from {a.addresses} address(es) to the proxy on port "
          f"{port} for {time.monotonic() - t0:.0f} s ({seen['opened']} opened in all, {seen['closed by the proxy']} closed "
          f"by the proxy, {seen['connect failed']} connects failed)")
    print(f"the run's result: {[p.name for p in result()] or 'none'}; SuperNode restarts: {restarts}")
    if not result() or any(restarts.values()):
        sys.exit("BROKEN: " + ("no result within the flood; " if not result() else "") +
                 (f"SuperNodes exited and were restarted: {restarts}" if any(restarts.values()) else ""))
    print("held: the run finished and every SuperNode stayed up during the flood")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog="Exit 0: every agent request was answered 200.")
    ap.add_argument("--nofile", type=int, default=1024, help="the proxy's open-file limit (default 1024)")
    ap.add_argument("--conns", type=int, default=1100, help="connections the stranger holds (default 1100)")
    ap.add_argument("--addresses", type=int, default=1, help="loopback addresses the stranger spreads them over (default 1)")
    ap.add_argument("--seconds", type=float, default=20.0, help="how long the agents keep asking during the flood (default 20)")
    ap.add_argument("--agents", type=int, default=3, help="agents asking, at 127.0.0.1, 127.0.0.2, ... (default 3)")
    ap.add_argument("--live", metavar="DIR", help="flood the proxy of a running flower_deploy.sh --keep DIR instead")
    a = ap.parse_args(argv)
    if not 64 <= a.nofile <= 65536 or not 0 <= a.conns <= 20000 or not 1 <= a.addresses <= 250:
        ap.error("--nofile in 64..65536, --conns in 0..20000, --addresses in 1..250")
    if not 0 < a.seconds <= 3600 or not 1 <= a.agents <= 20:
        ap.error("--seconds in (0, 3600], --agents in 1..20")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = a.conns + 256
    if soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            sys.exit(f"this process may open {hard} files at most; the flood needs {need}: lower --conns")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    if a.live:
        return live(a)
    agents = [generate_key_pairs() for _ in range(a.agents)]
    sources = [f"127.0.0.{i + 1}" for i in range(a.agents)]
    link_port, port = free_port(), free_port()
    srv = uvicorn.Server(uvicorn.Config(Starlette(routes=[Route("/{p:path}", link, methods=["POST"])]), port=link_port,
                                        log_level="critical"))
    threading.Thread(target=srv.run, daemon=True).start()
    stop, seen = threading.Event(), collections.Counter()
    codes = {s: collections.Counter() for s in sources}
    with tempfile.TemporaryDirectory(prefix="redteam_pretls_") as d:
        make_tls_files(d, ["localhost", "127.0.0.1"])
        pems = []
        for i, (_, pk) in enumerate(agents):
            pems.append(str(Path(d, f"agent{i}.pem"))); Path(pems[-1]).write_bytes(public_key_to_bytes(pk))
        log = open(Path(d, "proxy.log"), "w+")
        proc = subprocess.Popen([sys.executable, "-c", PROXY, str(a.nofile), str(port), f"http://127.0.0.1:{link_port}", d,
                                 *pems], stdout=log, stderr=subprocess.STDOUT)
        try:
            for _ in range(600):
                try:
                    socket.create_connection(("127.0.0.1", port)).close(); break
                except OSError:
                    time.sleep(0.05)
            ca = str(Path(d, "ca.crt"))
            control = [agent_request(port, ca, k, s) for k, s in zip(agents, sources)]
            per = [a.conns // a.addresses + (i < a.conns % a.addresses) for i in range(a.addresses)]
            ts = [threading.Thread(target=flood, args=(port, f"127.0.1.{i + 1}", n, stop, seen), daemon=True)
                  for i, n in enumerate(per)]
            for t in ts: t.start()
            time.sleep(3.0)                                 # the flood in place before the agents ask
            t0 = time.monotonic()
            while time.monotonic() - t0 < a.seconds:
                for k, s in zip(agents, sources):
                    codes[s][agent_request(port, ca, k, s)] += 1
                time.sleep(0.5)
            stop.set()
            for t in ts: t.join(10)
            alive = proc.poll() is None
        finally:
            proc.terminate(); proc.wait(10); srv.should_exit = True
        log.seek(0)
        lines = log.read().splitlines()
    print(f"proxy: open-file limit {a.nofile}; control (before the flood): {control}")
    print(f"stranger: {a.conns} connections without a TLS handshake from {a.addresses} address(es) "
          f"({seen['opened']} opened in all, {seen['closed by the proxy']} closed by the proxy, "
          f"{seen['connect failed']} connects failed; most held at once per address: "
          f"{max((v for k, v in seen.items() if k.startswith('held from')), default=0)})")
    for s, c in codes.items():
        print(f"  agent at {s}: {dict(c)}")
    if control != ["200"] * a.agents:
        print("the proxy's log ends:", *lines[-15:], sep="\n  ")
        sys.exit(f"the control failed: {control}; the set-up is broken")
    bad = {s: dict(c) for s, c in codes.items() if set(c) != {"200"}}
    if bad or not alive:
        sys.exit(f"BROKEN: {'the proxy process died; ' if not alive else ''}agents whose requests failed during the flood: "
                 f"{bad}")
    print("held: every agent request was answered 200 during the flood")


if __name__ == "__main__":
    main()
