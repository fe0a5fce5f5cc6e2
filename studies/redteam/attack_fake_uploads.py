"""Concurrent 16 MiB uploads through the Fleet-only proxy, with made-up or unregistered SuperNode headers.

usage: python studies/redteam/attack_fake_uploads.py [--uploads 24] [--mib 16] [--out results/flower_pipeline/fake_uploads.json]

The proxy (`network.fleet_proxy_server`, plain HTTP on loopback, the registered key given as `authorized_keys`) runs in
its own process in front of a sink that reads and discards what it gets (the SuperLink's place). For each case, N
connections at once send a request head with `Content-Length` = MIB MiB and then the body in 64 KiB pieces:
  fake          the first red team's attack: the three node-auth headers with made-up values
  unregistered  a valid flwr 1.42 signature by a key pair of the attacker's own (not registered)
  registered    a valid signature by the registered key (admitted: streamed to the sink; bodies above max_body are
                refused, so MIB must stay at most 16)
Prints and writes, per case: the status codes, the bytes the sink received, and the proxy's resident memory (VmRSS)
before and after and its peak (VmHWM) during the case, in MiB."""
import argparse, collections, json, os, socket, sys, threading
from pathlib import Path
from flwr.supercore.primitives.asymmetric import generate_key_pairs
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxy_common import headers, proxy_with_sink, received      # the proxy in its own process, a sink, signed heads


def mem(pid):
    "(VmRSS, VmHWM) of process `pid` in MiB."
    f = dict(l.split(":", 1) for l in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in l)
    return int(f["VmRSS"].split()[0]) / 1024, int(f["VmHWM"].split()[0]) / 1024


def upload(port, case, keys, size, codes):
    "One upload: the head, then the body in 64 KiB pieces while the proxy takes it; the status line's code."
    head = (f"POST /v1/fleet/push-object HTTP/1.1\r\nHost: link\r\nContent-Length: {size}\r\n".encode()
            + b"".join(f"{k}: {v}\r\n".encode() for k, v in headers(case, keys).items()) + b"\r\n")
    piece = b"x" * 65536
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(60)
        try:
            s.sendall(head)
            for _ in range(size // len(piece)):
                s.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass                                             # the proxy answered and closed: the rest is never sent
        try:
            codes[s.recv(64).split(b" ")[1].decode()] += 1
        except (IndexError, OSError):
            codes["closed"] += 1


def attack(uploads=24, mib=16):
    "Run the three cases against a fresh proxy process; {case: codes, sink bytes, memory}."
    keys = {"registered": generate_key_pairs(), "unregistered": generate_key_pairs()}
    with proxy_with_sink([keys["registered"][1]]) as (proxy_port, proc):
        out = {}
        for case in ("fake", "unregistered", "registered"):
            received.clear()
            before, codes = mem(proc.pid), collections.Counter()
            ts = [threading.Thread(target=upload, args=(proxy_port, case, keys, mib * 2**20, codes)) for _ in range(uploads)]
            for t in ts: t.start()
            for t in ts: t.join()
            after = mem(proc.pid)
            out[case] = dict(codes=dict(codes), sink_bytes=received["bytes"], rss_before_mib=round(before[0], 1),
                             rss_after_mib=round(after[0], 1), peak_rss_mib=round(after[1], 1))
        return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--uploads", type=int, default=24)
    ap.add_argument("--mib", type=int, default=16)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    if a.uploads < 1 or not 1 <= a.mib <= 16:
        ap.error("--uploads must be >= 1 and --mib in 1..16 (the proxy's max_body is 16 MiB)")
    res = attack(a.uploads, a.mib)
    for case, r in res.items():
        print(f"{case:13s} codes {r['codes']}  sink received {r['sink_bytes'] / 2**20:.1f} MiB  proxy RSS "
              f"{r['rss_before_mib']} -> {r['rss_after_mib']} MiB (peak {r['peak_rss_mib']} MiB)")
    if a.out:
        cmd = "python studies/redteam/attack_fake_uploads.py" + "".join(f" --{k} {v}" for k, v in
                                                                       (("uploads", a.uploads), ("mib", a.mib)))
        Path(a.out).write_text(json.dumps({"command": cmd + f" --out {a.out}", "uploads": a.uploads, "mib": a.mib,
                                           "cases": res}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
