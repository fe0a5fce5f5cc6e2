"The Fleet-only proxy (`pfwcp_nb.federation.network.fleet_proxy_app`) against the red team's attacks: exact Fleet routes on the raw path, no redirect naming the SuperLink, SuperNode headers before the body, bounded bodies (Content-Length and chunked)."
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from flwr.common.constant import TIMESTAMP_HEADER
from flwr.supercore.constant import FLEET_HTTP_PUBLIC_KEY_HEADER, FLEET_HTTP_SIGNATURE_HEADER
from flwr.supernode import fleet_http_client
from starlette.testclient import TestClient

from pfwcp_nb.federation import network
from pfwcp_nb.federation.protocol import MAX_JSON_CHARS
from pfwcp_nb.federation.network import FLEET_ROUTES, MAX_FLEET_BODY, MAX_PER_KEY, NODE_AUTH_HEADERS, fleet_proxy_app

FAKE = dict.fromkeys(NODE_AUTH_HEADERS, "x")   # present, made up: the attack of studies/redteam/attack_fake_uploads.py (refused)


def counted_body(read: list):
    "A chunked body of 4 x 1000 bytes that notes each chunk the proxy reads in `read`."
    for _ in range(4):
        read.append(1)
        yield b"x" * 1000


@pytest.fixture
def upstream(monkeypatch):
    "A fake SuperLink behind the proxy: records every forwarded request; answers `reply` (status, headers)."
    seen, reply = [], {"status": 200, "headers": {}}
    real = httpx.AsyncClient

    def handler(request):
        seen.append((request.url.raw_path, request.content))
        return httpx.Response(reply["status"], headers=reply["headers"], content=b"ok")
    monkeypatch.setattr(network.httpx, "AsyncClient",
                        lambda base_url, **kw: real(base_url=base_url, transport=httpx.MockTransport(handler)))
    return seen, reply


def test_flwr_fleet_routes_are_the_ones_the_supernode_calls():
    # the allowlist is flwr 1.42's list: every route its Fleet HTTP client posts to, and nothing else
    assert set(re.findall(r'path="(/v1/fleet/[a-z-]+)"', inspect.getsource(fleet_http_client))) == FLEET_ROUTES
    assert set(NODE_AUTH_HEADERS) == {FLEET_HTTP_PUBLIC_KEY_HEADER, FLEET_HTTP_SIGNATURE_HEADER, TIMESTAMP_HEADER}


@pytest.mark.parametrize("path", [
    "/v1/fleet/%252e%252e/control/list-runs",   # red team finding 4: the SuperLink's uvicorn decodes it to ../control
    "/v1/fleet/%2e%2e/control/list-runs", "/v1/fleet/../control/list-runs", "/v1/fleet/get-run/",   # finding 5: 307
    "/v1/fleet/%67et-run", "/v1/fleet/get-run?a=1", "/v1/fleet/", "/v1/fleet//get-run", "/v1/control/list-runs",
    "/v1/fleet/get-run%2F",
])
def test_anything_but_an_exact_fleet_route_is_refused_and_not_forwarded(upstream, path):
    seen, _ = upstream
    with TestClient(fleet_proxy_app("https://superlink.internal:9093")) as tc:
        r = tc.post(path, headers=FAKE, content=b"x")
    assert r.status_code == 403 and "only the Fleet API" in r.text and seen == []


def test_an_exact_route_is_forwarded_verbatim_without_upstream_location_date_or_server(upstream, node_auth):
    seen, reply = upstream
    reply["headers"] = {"location": "https://127.0.0.1:58767/v1/fleet/get-run", "server": "uvicorn", "x-ok": "1"}
    with TestClient(fleet_proxy_app("https://superlink.internal:9093")) as tc:
        r = tc.post("/v1/fleet/get-run", headers=node_auth(), content=b"body")
    assert r.status_code == 200 and seen == [(b"/v1/fleet/get-run", b"body")]
    assert "location" not in r.headers and r.headers["x-ok"] == "1" and "127.0.0.1" not in str(r.headers)


def test_a_redirect_from_the_superlink_is_not_passed_on(upstream, node_auth):
    seen, reply = upstream
    reply.update(status=307, headers={"location": "https://127.0.0.1:58767/v1/fleet/get-run"})
    with TestClient(fleet_proxy_app("https://superlink.internal:9093")) as tc:
        r = tc.post("/v1/fleet/get-run", headers=node_auth(), content=b"x", follow_redirects=False)
    assert r.status_code == 502 and "127.0.0.1" not in r.text + str(r.headers)


def test_a_request_without_supernode_headers_is_refused_before_its_body_is_read(upstream, node_auth):
    # red team finding 3: a 256 MiB body with no auth headers was buffered by the proxy and the SuperLink
    seen, _ = upstream
    read = []
    body = lambda: counted_body(read)
    with TestClient(fleet_proxy_app("https://superlink.internal:9093")) as tc:
        for missing in NODE_AUTH_HEADERS:
            r = tc.post("/v1/fleet/push-messages", headers={k: v for k, v in node_auth().items() if k != missing}, content=b"x")
            assert r.status_code == 401 and missing in r.text
        r = tc.post("/v1/fleet/push-messages", content=body())
    assert r.status_code == 401 and seen == []


@pytest.mark.parametrize("chunked", [False, True])
def test_bodies_above_the_limit_are_refused_with_or_without_content_length(upstream, chunked, node_auth):
    seen, _ = upstream
    with TestClient(fleet_proxy_app("https://superlink.internal:9093", max_body=4096)) as tc:
        big = b"x" * 5000
        r = tc.post("/v1/fleet/push-object", headers=node_auth(), content=iter([big[:2500], big[2500:]]) if chunked else big)
        assert r.status_code == 413 and "max_body=4096" in r.text and seen == []
        ok = tc.post("/v1/fleet/push-object", headers=node_auth(), content=iter([b"y" * 2000] * 2) if chunked else b"y" * 4096)
    assert ok.status_code == 200 and len(seen[0][1]) in (4000, 4096)
    assert MAX_FLEET_BODY >= MAX_JSON_CHARS   # a message the server accepts fits through the proxy


def test_proxy_options_are_checked():
    with pytest.raises(ValueError, match="max_body"):
        fleet_proxy_app("https://x:1", max_body=0)
    for bad in [dict(max_per_key=-1), dict(max_per_key=2.5), dict(min_body_rate=float("nan")), dict(body_grace=0)]:
        with pytest.raises(ValueError, match=f"`{next(iter(bad))}` must be"):
            fleet_proxy_app("https://x:1", **bad)


def test_fake_or_foreign_signatures_are_refused_before_the_body_is_read(upstream, node_auth, tmp_path):
    # before: any values in the three headers passed, and 24 uploads of 16 MiB took the proxy to 1,540 MiB
    seen, _ = upstream
    read = []
    body = lambda: counted_body(read)
    (tmp_path / "node.pem").write_bytes(node_auth.pem)
    stale = node_auth()
    stale[NODE_AUTH_HEADERS[2]] = "2020-01-01T00:00:00+00:00"      # a timestamp far outside flwr's 300 s window
    other = node_auth(node_auth.new_key())                          # a valid signature by a key of the attacker's own
    forged = {**node_auth(), NODE_AUTH_HEADERS[1]: other[NODE_AUTH_HEADERS[1]]}
    with TestClient(fleet_proxy_app("https://superlink.internal:9093", authorized_keys=[tmp_path / "node.pem"])) as tc:
        for bad, why in [(FAKE, "malformed"), (stale, "outside flwr's window"), (other, "not one of the registered"),
                         (forged, "does not verify")]:
            r = tc.post("/v1/fleet/push-messages", headers=bad, content=body())
            assert r.status_code == 401 and why in r.text and r.headers["connection"] == "close"
        assert read == [] and seen == []                            # not a byte of any body read, nothing forwarded
        ok = tc.post("/v1/fleet/push-messages", headers=node_auth(), content=body())
    assert ok.status_code == 200 and read == [1] * 4 and seen == [(b"/v1/fleet/push-messages", b"x" * 4000)]


def test_without_a_key_list_any_key_that_signs_is_admitted_and_fake_values_are_not(upstream, node_auth):
    seen, _ = upstream
    with TestClient(fleet_proxy_app("https://superlink.internal:9093")) as tc:
        assert tc.post("/v1/fleet/get-run", headers=FAKE, content=b"x").status_code == 401
        assert tc.post("/v1/fleet/get-run", headers=node_auth(node_auth.new_key()), content=b"x").status_code == 200
    assert seen == [(b"/v1/fleet/get-run", b"x")]


def test_authorized_keys_must_be_ec_public_keys(tmp_path):
    (tmp_path / "bad.pub").write_text("ssh-ed25519 AAAA")
    with pytest.raises(ValueError, match="not an OpenSSH or PEM public key"):
        network.load_authorized_keys([tmp_path / "bad.pub"])
    with pytest.raises(ValueError, match="empty"):
        network.load_authorized_keys([])


def test_concurrent_fake_uploads_leave_the_proxy_memory_flat_and_admitted_ones_stream(tmp_path):
    # studies/redteam/attack_fake_uploads.py: 24 uploads of 16 MiB at once against a proxy process; memory from /proc
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "fake_uploads.json"
    r = subprocess.run([sys.executable, str(root / "studies" / "redteam" / "attack_fake_uploads.py"), "--uploads", "24",
                        "--mib", "16", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    c = json.loads(out.read_text())["cases"]
    for case in ("fake", "unregistered"):                # refused from the head: nothing read, nothing forwarded
        assert c[case]["codes"] == {"401": 24} and c[case]["sink_bytes"] == 0
        assert c[case]["peak_rss_mib"] - c[case]["rss_before_mib"] < 4       # buffered: 24 x 16 MiB = 384 MiB
    reg = c["registered"]                                 # admitted bodies stream: about 1 MiB per request in flight
    admitted = reg["codes"].get("200", 0)                 # one key: at most MAX_PER_KEY at once (red team 2), the rest 503
    assert set(reg["codes"]) <= {"200", "503"} and sum(reg["codes"].values()) == 24 and admitted >= MAX_PER_KEY
    assert reg["sink_bytes"] == admitted * 16 * 2**20
    assert reg["peak_rss_mib"] - reg["rss_before_mib"] < 24 + 16


def test_tls_private_keys_are_written_for_their_owner_only(tmp_path):
    # red team 2 (attack_local_runtime.py, files): certs/server.key and certs/ca.key were readable by any local user
    (tmp_path / "server.key").write_bytes(b"an older key"); (tmp_path / "server.key").chmod(0o644)
    network.make_tls_files(tmp_path)
    modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    assert modes["ca.key"] == modes["server.key"] == 0o600 and b"PRIVATE KEY" in (tmp_path / "server.key").read_bytes()
