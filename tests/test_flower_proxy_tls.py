"""The Fleet-only proxy over TLS, before the handshake (outside red team): connections that never start or never finish
the TLS handshake are dropped after `handshake_timeout` and counted per address and in all from the TCP accept, so a
flood of them cannot fill the proxy's open files and keep the agents out (`studies/redteam/attack_proxy_pretls.py`)."""
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from pfwcp_nb.federation import network
from pfwcp_nb.federation.network import FD_RESERVE, fleet_proxy_server, make_tls_files, open_file_budget

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def tls_proxy(start_proxy, tmp_path):
    "start(**limits) -> (port, an ssl context trusting it): a TLS proxy in front of a fake SuperLink (`start_proxy`, conftest)."
    make_tls_files(tmp_path, ["localhost", "127.0.0.1"])

    def start(**limits):
        port = start_proxy(certfile=str(tmp_path / "server.pem"), keyfile=str(tmp_path / "server.key"), **limits)
        return port, ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    return start


def silent(port, n, source="127.0.0.1"):
    "n TCP connections from `source` that send nothing: no TLS ClientHello."
    return [socket.create_connection(("127.0.0.1", port), source_address=(source, 0)) for _ in range(n)]


def closed(sock, wait) -> bool:
    "Whether the proxy closed (or reset) the connection within `wait` seconds."
    sock.settimeout(wait)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def post_tls(port, ctx, headers, source="127.0.0.1"):
    "A signed Fleet request over TLS on a new connection from `source`: its status code."
    with httpx.Client(verify=ctx, transport=httpx.HTTPTransport(verify=ctx, local_address=source), timeout=20) as c:
        return c.post(f"https://localhost:{port}/v1/fleet/pull-messages", headers=headers, content=b"{}").status_code


def test_a_connection_that_never_starts_its_handshake_is_dropped_after_the_handshake_timeout(tls_proxy, node_auth):
    port, ctx = tls_proxy(handshake_timeout=0.5, header_timeout=60.0)
    socks = silent(port, 3)
    try:
        assert post_tls(port, ctx, node_auth()) == 200          # served while the three wait
        assert all(closed(s, wait=10.0) for s in socks)         # asyncio's own bound was 60 s
    finally:
        for s in socks: s.close()


def test_a_handshake_that_never_finishes_is_dropped_too(tls_proxy):
    port, _ = tls_proxy(handshake_timeout=0.5, header_timeout=60.0)
    s = socket.create_connection(("127.0.0.1", port))
    try:
        client = ssl.create_default_context()
        client.check_hostname, client.verify_mode = False, ssl.CERT_NONE
        hello = ssl.MemoryBIO(); obj = client.wrap_bio(ssl.MemoryBIO(), hello)
        with pytest.raises(ssl.SSLWantReadError):
            obj.do_handshake()
        s.sendall(hello.read()[:20])                           # the first 20 bytes of a ClientHello, then nothing
        assert closed(s, wait=10.0)
    finally:
        s.close()


def test_connections_are_counted_per_address_before_the_handshake(tls_proxy, node_auth):
    # red team (attack_proxy_pretls.py): the per-address limit counted only connections that had finished the handshake
    port, ctx = tls_proxy(max_per_client=3, handshake_timeout=60.0, header_timeout=60.0)
    socks = silent(port, 5)
    try:
        assert closed(socks[0], wait=5.0) and closed(socks[1], wait=5.0)     # over the limit: the oldest go at once
        assert not closed(socks[4], wait=0.5)
        assert post_tls(port, ctx, node_auth()) == 200          # an agent at the same address pushes out another one
        assert post_tls(port, ctx, node_auth(), "127.0.0.2") == 200
    finally:
        for s in socks: s.close()


def test_over_the_count_in_all_the_address_holding_the_most_gives_one_up(tls_proxy, node_auth):
    port, ctx = tls_proxy(max_connections=4, handshake_timeout=60.0, header_timeout=60.0)
    mine = silent(port, 1, "127.0.0.2")                          # an address holding one connection
    flood = silent(port, 3, "127.0.0.3")                         # four in all
    try:
        assert not closed(flood[0], wait=0.5)
        more = silent(port, 1, "127.0.0.3")                      # five: the flood's address gives up its oldest
        assert closed(flood[0], wait=5.0) and not closed(mine[0], wait=0.5)
        assert post_tls(port, ctx, node_auth(), "127.0.0.4") == 200
        more[0].close()
    finally:
        for s in mine + flood: s.close()


def test_the_open_file_budget_is_checked():
    assert open_file_budget(nofile=1024) == 1024 - FD_RESERVE - network.MAX_INFLIGHT
    with pytest.raises(ValueError, match="LimitNOFILE"):
        open_file_budget(nofile=FD_RESERVE)
    with pytest.raises(ValueError, match="`max_connections`.*LimitNOFILE"):
        fleet_proxy_server("https://127.0.0.1:9", 8080, max_connections=open_file_budget() + 1)
    for bad in [dict(handshake_timeout=0), dict(handshake_timeout=float("nan")), dict(max_connections=0)]:
        with pytest.raises(ValueError, match=f"`{next(iter(bad))}`"):
            fleet_proxy_server("https://127.0.0.1:9", 8080, **bad)


@pytest.mark.slow
def test_a_pre_handshake_flood_at_a_low_open_file_limit_keeps_no_agent_out():
    # the outside red team's attack, scaled down: open-file limit 256 (1,024 in the full run), 300 connections (1,100)
    r = subprocess.run([sys.executable, "studies/redteam/attack_proxy_pretls.py", "--nofile", "256", "--conns", "300",
                        "--seconds", "8", "--agents", "2"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "held: every agent request was answered 200" in r.stdout
    assert "closed by the proxy" in r.stdout and " 0 closed by the proxy" not in r.stdout
