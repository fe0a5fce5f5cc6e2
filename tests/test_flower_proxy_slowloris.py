"""The Fleet-only proxy against a stranger who would starve it: 40 idle connections with unfinished
request heads, held open, do not stop an honest request; such connections are closed after `header_timeout`; a slow body
gets 408, a trickled one too (red team 2); above `max_per_client` connections of one address its oldest head-less one is
closed (red team 2); requests in flight are bounded, in all and per SuperNode key (red team 2)."""
import re
import socket
import time

import httpx
import pytest

from pfwcp_nb.federation.network import NODE_AUTH_HEADERS, fleet_proxy_server

HEAD = b"POST /v1/fleet/pull-messages HTTP/1.1\r\nHost: link\r\nflwr-public-key: x\r\n"   # never finished


@pytest.fixture
def proxy(start_proxy):
    "start(**limits) -> port: a proxy (plain HTTP on loopback) in front of a fake SuperLink (`start_proxy`, conftest)."
    return start_proxy


def idle(port, n):
    "n connections that send part of a request head and then nothing."
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(HEAD)
        socks.append(s)
    return socks


def closed(sock, wait=20.0) -> bool:
    "Whether the server closed the connection within `wait` seconds (recv returns b'' or the connection resets), data before it read and dropped."
    end = time.monotonic() + wait
    try:
        while (left := end - time.monotonic()) > 0:
            sock.settimeout(left)
            if sock.recv(65536) == b"":
                return True
        return False
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def slow_upload(port, node_auth, sent=10):
    "A signed upload announcing 100 bytes that has sent `sent` of them: a request in flight, holding a slot."
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/fleet/push-messages HTTP/1.1\r\nHost: link\r\n" + node_auth.raw() + b"Content-Length: 100\r\n\r\n"
              + b"x" * sent)
    return s


def answer(sock) -> bytes:
    sock.settimeout(20)
    return sock.recv(1024)


def post(port, headers, source="127.0.0.1"):
    "A small signed Fleet request from address `source`."
    with httpx.Client(transport=httpx.HTTPTransport(local_address=source), timeout=30) as c:
        return c.post(f"http://127.0.0.1:{port}/v1/fleet/pull-messages", headers=headers, content=b"{}")


def until_503(port, node_auth, source="127.0.0.1"):
    "Signed requests until one gets 503 (the slow uploads before it hold their slots); the last answer."
    for _ in range(100):
        r = post(port, node_auth(), source)
        if r.status_code == 503: break
        time.sleep(0.05)
    return r


def test_forty_idle_connections_do_not_stop_an_honest_request(proxy, node_auth):
    port = proxy(header_timeout=60.0)
    socks = idle(port, 40)
    try:
        for _ in range(3):                                   # three honest requests while the 40 are held
            r = httpx.post(f"http://127.0.0.1:{port}/v1/fleet/pull-messages", headers=node_auth(), content=b"{}", timeout=30)
            assert (r.status_code, r.content) == (200, b"ok")
    finally:
        for s in socks: s.close()


def test_an_unfinished_request_head_is_closed_after_the_header_timeout(proxy, node_auth):
    port = proxy(header_timeout=0.5)
    socks = idle(port, 3)
    try:
        assert all(closed(s) for s in socks)
        r = httpx.post(f"http://127.0.0.1:{port}/v1/fleet/pull-messages", headers=node_auth(), content=b"{}", timeout=30)
        assert r.status_code == 200                          # an honest request afterwards is served
    finally:
        for s in socks: s.close()


def test_a_slow_body_gets_408(proxy, node_auth):
    port = proxy(body_timeout=0.5)
    s = slow_upload(port, node_auth)
    try:
        assert answer(s).startswith(b"HTTP/1.1 408")
    finally:
        s.close()


def test_over_the_per_client_limit_the_oldest_connection_without_a_request_head_is_closed(proxy, node_auth):
    # red team 2 (attack_proxy_conns.py): a stranger's idle connections filled the limit and the agents' new ones were closed
    port = proxy(max_per_client=5, max_per_key=1, header_timeout=60.0, body_timeout=60.0, body_grace=60.0)
    busy = slow_upload(port, node_auth)                      # the oldest: a request in mid-body, kept
    assert until_503(port, node_auth, "127.0.0.2").status_code == 503   # the proxy has read its head: it holds the key's slot
    socks = idle(port, 4)
    extra = socket.create_connection(("127.0.0.1", port))
    try:
        assert closed(socks[0])                              # the oldest head-less one goes, not the new one
        assert not closed(extra, wait=0.5) and not closed(socks[1], wait=0.1)
        busy.sendall(b"x" * 90)
        assert answer(busy).startswith(b"HTTP/1.1 200")      # the request in flight was kept and served
    finally:
        for s in [busy, extra, *socks]: s.close()


def test_an_honest_request_passes_while_a_stranger_fills_the_per_client_limit(proxy, node_auth):
    port = proxy(max_per_client=5, header_timeout=60.0)
    socks = idle(port, 5)
    try:
        for _ in range(3):                                   # each new connection pushes out a stranger's oldest one
            assert post(port, node_auth()).status_code == 200
    finally:
        for s in socks: s.close()


def test_one_key_holds_at_most_max_per_key_requests_in_flight(proxy, node_auth):
    # red team 2 (attack_proxy_slots.py): one registered agent's slow uploads took every slot; other keys got 503
    port = proxy(max_per_key=2, body_timeout=60.0, body_grace=60.0)
    socks = [slow_upload(port, node_auth) for _ in range(2)]
    try:
        r = until_503(port, node_auth)                       # both slow uploads hold their key's slots
        assert r.status_code == 503 and b"max_per_key" in r.content
        assert post(port, node_auth(node_auth.new_key())).status_code == 200   # another SuperNode's key still gets through
    finally:
        for s in socks: s.close()


def test_a_trickled_body_gets_408_long_before_the_body_timeout(proxy, node_auth):
    port = proxy(body_timeout=600.0, body_grace=0.5, min_body_rate=1000.0)
    s = slow_upload(port, node_auth)
    try:
        reply = answer(s)                                    # body_timeout is 600 s; recv gives up after 20
        assert reply.startswith(b"HTTP/1.1 408") and b"min_body_rate=1000" in reply
    finally:
        s.close()


def test_a_client_hanging_up_mid_body_is_one_log_line(proxy, node_auth, caplog):
    port = proxy(body_timeout=60.0, body_grace=60.0)
    s = slow_upload(port, node_auth)
    time.sleep(0.2)                                          # let the proxy start reading the body
    s.close()
    lines = []
    for _ in range(200):                                     # until the proxy logs it (a traceback before the fix)
        lines = [r.getMessage() for r in caplog.records if "closed the connection after" in r.getMessage()]
        if lines: break
        time.sleep(0.05)
    assert len(lines) == 1 and re.fullmatch(r"refused \(400\): the client closed the connection after \d+ bytes of its body\.", lines[0])


def test_limits_are_checked():
    for bad in [dict(max_per_key=0), dict(min_body_rate=-1.0), dict(body_grace=float("inf")), dict(body_timeout=0)]:
        with pytest.raises(ValueError, match=f"`{next(iter(bad))}`"):
            fleet_proxy_server("https://127.0.0.1:9", 8080, **bad)


def test_requests_in_flight_are_bounded(proxy, node_auth):
    # max_inflight=1: while one request's body is still being read, a second request gets 503 at once
    port = proxy(max_inflight=1, body_timeout=60.0)
    s = slow_upload(port, node_auth)
    try:
        r = until_503(port, node_auth)                        # the first request holds the slot
        assert r.status_code == 503 and b"1 requests in flight" in r.content
        s.sendall(b"x" * 90)                                  # the first body completes: it is forwarded
        assert answer(s).startswith(b"HTTP/1.1 200")
    finally:
        s.close()


def test_a_16_mib_upload_with_fake_headers_is_refused_from_its_head_and_closed(proxy):
    # before: made-up node-auth values passed and the body was read; now 401 before a byte of it, connection closed
    port = proxy()
    s = socket.create_connection(("127.0.0.1", port))
    try:
        s.sendall(b"POST /v1/fleet/push-object HTTP/1.1\r\nHost: link\r\n" +
                  b"".join(f"{h}: x\r\n".encode() for h in NODE_AUTH_HEADERS) + b"Content-Length: 16777216\r\n\r\n")
        s.settimeout(20)
        assert s.recv(1024).startswith(b"HTTP/1.1 401")       # no body was sent at all
        assert closed(s)
    finally:
        s.close()
