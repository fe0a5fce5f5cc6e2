"""One registered (malicious) agent takes every in-flight slot of the Fleet-only proxy with slow uploads: do the other agents' requests still pass?

usage: python studies/redteam/attack_proxy_slots.py [--slow 32] [--seconds 8]

The proxy (`network.fleet_proxy_server`, plain HTTP on loopback, two registered keys) runs in its own process in front
of a sink (the SuperLink's place), as in attack_fake_uploads.py. The proxy admits at most MAX_INFLIGHT requests at
once (503 above), and gives each request's body BODY_TIMEOUT seconds. The malicious agent opens SLOW uploads with
its own valid signature, each announcing 1 MiB and sending one byte every 2 s (each held until the body timeout,
then opened again). Meanwhile an honest agent (the other key, from another loopback address, as from its own
machine) sends a small signed Fleet request every 0.25 s for SECONDS seconds: pulls, pushes and heartbeats look
like this. A SuperNode whose heartbeats fail for long enough is taken as offline by the SuperLink, and the server
leaves its agent out.
Exit 0 if every honest request passed (the defence held); 1 otherwise, naming how many were refused and how."""
import argparse, collections, os, socket, sys, threading, time
from flwr.supercore.primitives.asymmetric import generate_key_pairs
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxy_common import headers, proxy_with_sink, signed_request      # the proxy in its own process, a sink


def slow_upload(port, keys, stop, held):
    "Hold one in-flight slot: a signed head announcing 1 MiB, then a byte every 2 s; again when the proxy closes it."
    while not stop.is_set():
        head = (f"POST /v1/fleet/push-object HTTP/1.1\r\nHost: link\r\nContent-Length: {2**20}\r\n".encode()
                + b"".join(f"{k}: {v}\r\n".encode() for k, v in headers("liar", keys).items()) + b"\r\n")
        try:
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.sendall(head); held["opened"] += 1
                while not stop.is_set():
                    s.sendall(b"x"); stop.wait(2.0)
        except OSError:
            held["closed by the proxy"] += 1
            stop.wait(0.05)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog="Exit 0: the honest agent's requests passed.")
    ap.add_argument("--slow", type=int, default=32, help="slow uploads the malicious agent keeps open (default 32, MAX_INFLIGHT)")
    ap.add_argument("--seconds", type=float, default=8.0, help="how long the honest agent keeps asking (default 8)")
    a = ap.parse_args(argv)
    if not 0 <= a.slow <= 60 or not 0 < a.seconds <= 60:
        ap.error("--slow in 0..60 (below MAX_PER_CLIENT) and --seconds in (0, 60]")
    keys = {"liar": generate_key_pairs(), "honest": generate_key_pairs()}
    stop, held, codes, control = threading.Event(), collections.Counter(), collections.Counter(), collections.Counter()
    with proxy_with_sink([keys["liar"][1], keys["honest"][1]], quiet=True) as (port, _):
        signed_request(port, keys, "honest", control, "127.0.0.2")     # the control: before the attack, it passes
        ts = [threading.Thread(target=slow_upload, args=(port, keys, stop, held), daemon=True) for _ in range(a.slow)]
        for t in ts: t.start()
        time.sleep(1.0)
        t0 = time.monotonic()
        while time.monotonic() - t0 < a.seconds:
            signed_request(port, keys, "honest", codes, "127.0.0.2"); time.sleep(0.25)
        stop.set()
    control = dict(control)
    print(f"control (before the attack): honest request answered {control}")
    print(f"malicious agent: {a.slow} slow uploads ({dict(held)}); honest agent over {a.seconds:g} s: {dict(codes)}")
    if control != {"200": 1}:
        sys.exit(f"the control failed: an honest request before the attack got {control}; the set-up is broken")
    refused = sum(v for k, v in codes.items() if k != "200")
    if refused:
        sys.exit(f"BROKEN: with one registered agent's {a.slow} slow uploads in flight, {refused} of "
                 f"{sum(codes.values())} honest requests were refused ({dict(codes)}): the in-flight slots are shared by "
                 "all keys and a slot is held for the whole body timeout however slowly the body comes")
    print("held: the honest agent's requests passed while the malicious agent held its slow uploads")


if __name__ == "__main__":
    main()
