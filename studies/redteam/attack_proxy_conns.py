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
import argparse, collections, os, socket, sys, threading, time
from flwr.supercore.primitives.asymmetric import generate_key_pairs
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxy_common import proxy_with_sink, signed_request      # the proxy in its own process, a sink, signed requests


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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog="Exit 0: no agent was locked out.")
    ap.add_argument("--conns", type=int, default=64, help="idle connections the stranger keeps (default 64, MAX_PER_CLIENT)")
    ap.add_argument("--seconds", type=float, default=6.0, help="how long the agents keep asking (default 6)")
    a = ap.parse_args(argv)
    if not 0 <= a.conns <= 200 or not 0 < a.seconds <= 60:
        ap.error("--conns in 0..200 and --seconds in (0, 60]")
    keys = {"agent": generate_key_pairs()}
    stop, seen, control = threading.Event(), collections.Counter(), collections.Counter()
    codes = {"127.0.0.1": collections.Counter(), "127.0.0.2": collections.Counter()}
    with proxy_with_sink([keys["agent"][1]], quiet=True) as (port, _):
        signed_request(port, keys, "agent", control)                    # the control: before the attack, it passes
        ts = [threading.Thread(target=idle, args=(port, stop, seen), daemon=True) for _ in range(a.conns)]
        for t in ts: t.start()
        time.sleep(1.0)
        t0 = time.monotonic()
        while time.monotonic() - t0 < a.seconds:
            for src in codes:
                signed_request(port, keys, "agent", codes[src], src)
            time.sleep(0.25)
        stop.set()
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
