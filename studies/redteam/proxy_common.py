"Shared set-up of the red team's proxy attacks: the Fleet-only proxy in its own process in front of a sink, signed requests."
import base64, collections, contextlib, socket, subprocess, sys, tempfile, threading, time
from pathlib import Path
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from flwr.supercore.date import now
from flwr.supercore.primitives.asymmetric import public_key_to_bytes, sign_message
from pfwcp_nb.federation.network import NODE_AUTH_HEADERS

received = collections.Counter()


async def sink(request):
    "The SuperLink's stand-in: reads a body chunk by chunk and keeps only its size."
    async for chunk in request.stream():
        received["bytes"] += len(chunk)
    return PlainTextResponse("ok")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def headers(case, keys):
    "flwr 1.42's node-auth headers: made-up values for case 'fake', else signed now by keys[case] = (private, public)."
    if case == "fake":
        return dict.fromkeys(NODE_AUTH_HEADERS, "x" * 40)
    sk, pk = keys[case]
    stamp = now().isoformat()
    return {NODE_AUTH_HEADERS[0]: base64.b64encode(public_key_to_bytes(pk)).decode(),
            NODE_AUTH_HEADERS[1]: base64.b64encode(sign_message(sk, stamp.encode())).decode(), NODE_AUTH_HEADERS[2]: stamp}


PROXY = """import sys; from pfwcp_nb.federation.network import fleet_proxy_server
fleet_proxy_server(sys.argv[1], int(sys.argv[2]), authorized_keys=sys.argv[3:]).run()"""


@contextlib.contextmanager
def proxy_with_sink(public_keys: list, quiet: bool = False):
    "A sink (uvicorn thread) and the proxy (its own process, `public_keys` registered) in front of it: yields (port, process)."
    sink_port, proxy_port = free_port(), free_port()
    srv = uvicorn.Server(uvicorn.Config(Starlette(routes=[Route("/{p:path}", sink, methods=["POST"])]), port=sink_port,
                                        log_level="critical" if quiet else "warning"))
    threading.Thread(target=srv.run, daemon=True).start()
    with tempfile.TemporaryDirectory(prefix="redteam_proxy_") as d:
        pems = []
        for i, pk in enumerate(public_keys):
            pems.append(str(Path(d, f"node{i}.pem"))); Path(pems[-1]).write_bytes(public_key_to_bytes(pk))
        proc = subprocess.Popen([sys.executable, "-c", PROXY, f"http://127.0.0.1:{sink_port}", str(proxy_port), *pems],
                                stderr=subprocess.DEVNULL if quiet else None)
        try:
            for _ in range(600):
                try:
                    socket.create_connection(("127.0.0.1", proxy_port)).close(); break
                except OSError:
                    time.sleep(0.05)
            time.sleep(0.5)
            yield proxy_port, proc
        finally:
            proc.terminate(); proc.wait(10); srv.should_exit = True


def signed_request(port, keys, who, codes, source="127.0.0.1"):
    "One small Fleet request signed by keys[who], from address `source`; its status code counted in `codes`."
    body = b"x" * 200
    head = (f"POST /v1/fleet/pull-messages HTTP/1.1\r\nHost: link\r\nContent-Length: {len(body)}\r\n".encode()
            + b"".join(f"{k}: {v}\r\n".encode() for k, v in headers(who, keys).items()) + b"\r\n")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0)) as s:
            s.sendall(head + body)
            codes[s.recv(64).split(b" ")[1].decode()] += 1
    except (OSError, IndexError):
        codes["closed at once"] += 1
