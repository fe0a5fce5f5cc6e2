#!/usr/bin/env bash
# PFWCP and osPFWCP on a real Flower deployment on localhost (notebook 10_flower), set up as it must be across
# machines: a SuperLink whose one HTTP port (Fleet + Control + runtime APIs) listens on loopback only, a
# Fleet-only reverse proxy (pfwcp_nb.flower.serve_fleet_proxy) that the agents' SuperNodes connect to, K SuperNodes
# as separate processes (one per agent of the Gaussian federation of pfwcp_nb.baselines.toy_draw, oracle weights),
# and `flwr run` of pfwcp_nb.flower's apps by the operator on the SuperLink's machine.
# Security: TLS everywhere (a throwaway CA and a certificate for localhost/127.0.0.1, pfwcp_nb.flower.make_tls_files),
# SuperNode authentication (--enable-supernode-auth; each agent's public key registered with
# `flwr supernode register`; the server talks to the registered node ids only, run_config agent-nodes), each
# agent's query policy (node_config policy-*; policy-n1: one-shot levels exactly osPFWCP's), the operator's cap on each
# agent's n (run_config agent-max-n). Checks, each printed:
#   --rogue    a SuperNode whose key is not registered is refused; registering a key and starting an app through
#              the agents' address (the proxy) are refused (the Control API is not on it)
#   --foreign  an app that is not signed by a trusted publisher is refused by a SuperNode started with
#              --trusted-entities (Flower's app verification), though the operator submitted it
# Prints the thresholds, checks they equal the in-process estimators exactly, and stops every process it
# started (trap). Certificates, keys, data and logs live in a temporary directory, removed at exit unless --keep.
#
#   scripts/flower_deploy.sh [--agents K] [--test-points M] [--rogue] [--foreign] [--keep DIR]
#     --agents K       agents = SuperNodes, K >= 2 (default 5)
#     --test-points M  test points of agent 0 (default 10)
#     --rogue          the rogue checks above
#     --foreign        the foreign-app check above
#     --keep DIR       keep certificates, keys, data and logs in DIR (must not exist)
# Needs the extra: pip install "pfwcp_nb[flower]", or pip install -e ".[flower]" from a clone. Exit 0 on success, 1 on failure, 2 on bad arguments.
set -euo pipefail

USAGE="usage: $0 [--agents K>=2] [--test-points M>=1] [--rogue] [--foreign] [--keep DIR]"
usage() { echo "$USAGE" >&2; exit 2; }
K=5; M=10; ROGUE=0; FOREIGN=0; KEEP=""
while [ $# -gt 0 ]; do
  case "$1" in
    --agents) [ $# -ge 2 ] || usage; K="$2"; shift 2 ;;
    --test-points) [ $# -ge 2 ] || usage; M="$2"; shift 2 ;;
    --rogue) ROGUE=1; shift ;;
    --foreign) FOREIGN=1; shift ;;
    --keep) [ $# -ge 2 ] || usage; KEEP="$2"; shift 2 ;;
    -h|--help) echo "$USAGE"; exit 0 ;;
    *) usage ;;
  esac
done
[[ "$K" =~ ^[0-9]+$ ]] && [ "$K" -ge 2 ] || { echo "--agents must be an integer >= 2, got '$K'" >&2; usage; }
[[ "$M" =~ ^[0-9]+$ ]] && [ "$M" -ge 1 ] || { echo "--test-points must be an integer >= 1, got '$M'" >&2; usage; }
if [ -n "$KEEP" ]; then
  [ ! -e "$KEEP" ] || { echo "--keep $KEEP exists; give a new directory" >&2; usage; }
  mkdir -p "$KEEP"; T="$(cd "$KEEP" && pwd)"
else
  T="$(mktemp -d)"
fi
for tool in flower-superlink flower-supernode flwr python; do
  command -v "$tool" >/dev/null || { echo "$tool not found: pip install \"pfwcp_nb[flower]\", or pip install -e \".[flower]\" from a clone" >&2; exit 1; }
done

PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
  [ -n "$KEEP" ] || rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

export FLWR_HOME="$T/flwr-home"   # throwaway Flower configuration (SuperLink connections) and installed apps
mkdir -p "$FLWR_HOME" "$T/app" "$T/foreign" "$T/certs" "$T/keys" "$T/data"

# --- 1. credentials and data (python `cryptography` is a dependency of flwr itself: no openssl needed)
python - "$T" "$K" "$M" <<'PY'
import sys, socket, uuid, warnings
from pathlib import Path
import numpy as np
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from pfwcp_nb.baselines import toy_draw
from pfwcp_nb.flower import make_tls_files
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration
from pfwcp_nb.oneshot import OneShotPFWCP
T, K, M = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
make_tls_files(T / "certs", ["localhost", "127.0.0.1"])           # a real host: its name(s), see the README
ssh = lambda k: k.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
for who in [f"agent_{k}" for k in range(K)] + ["rogue", "guarded"]:   # SuperNode identities (EC P-384, OpenSSH)
    key = ec.generate_private_key(ec.SECP384R1())
    (T / "keys" / who).write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                                     serialization.NoEncryption()))
    (T / "keys" / f"{who}.pub").write_bytes(ssh(key))
publisher = ed25519.Ed25519PrivateKey.generate()                   # the one app publisher the guarded agent trusts
(T / "keys/trusted_entities.yaml").write_text(f"fpk_{uuid.uuid4()}: '{ssh(publisher).decode()}'\n")
d = toy_draw(0, m=M, K=K, n=100, noise_sd=0.0)
for k in range(K):
    np.savez(T / f"data/agent_{k}.npz", scores=d.cal_scores[k], weights=d.cal_weights[k])
np.save(T / "data/test_weights.npy", d.test_weights)
agents = [AgentCalibration(s, w) for s, w in zip(d.cal_scores, d.cal_weights)]
warnings.simplefilter("ignore")
ref = {f"{me}-{cr}": Est(0.1, de).calibrate(agents).threshold(d.test_weights)
       for me, Est in (("pfwcp", PFWCP), ("ospfwcp", OneShotPFWCP)) for cr, de in (("mc", None), ("ccc", 0.1))}
np.savez(T / "data/in_process.npz", **ref)
ports = []
for _ in range(K + 4):                       # free local ports: SuperLink, proxy, one per SuperNode, rogue, guarded
    s = socket.socket(); s.bind(("127.0.0.1", 0)); ports.append(s.getsockname()[1]); s.close()
(T / "ports").write_text(" ".join(map(str, ports)) + "\n")
PY
read -r -a PORTS < "$T/ports"
LINK="127.0.0.1:${PORTS[0]}"      # the SuperLink: loopback only (operator's `flwr` on this machine)
FLEET="127.0.0.1:${PORTS[1]}"     # the Fleet-only proxy: what agents (and anyone on the network) reach
cat > "$FLWR_HOME/config.toml" <<TOML
[superlink]
default = "pfwcp"

[superlink.pfwcp]
address = "$LINK"
root-certificates = "$T/certs/ca.crt"

[superlink.agents-address]
address = "$FLEET"
root-certificates = "$T/certs/ca.crt"
TOML

# --- 2. SuperLink (TLS, only registered SuperNodes, on loopback) and the Fleet-only proxy in front of it
echo "SuperLink on $LINK (loopback; TLS, SuperNode authentication), Fleet-only proxy on $FLEET; work dir $T"
flower-superlink --host 127.0.0.1 --port "${PORTS[0]}" --ssl-ca-certfile "$T/certs/ca.crt" \
  --ssl-certfile "$T/certs/server.pem" --ssl-keyfile "$T/certs/server.key" --enable-supernode-auth \
  --disable-runtime-dependency-installation > "$T/superlink.log" 2>&1 &
PIDS+=($!)
python -c 'import sys; from pfwcp_nb.flower import serve_fleet_proxy
serve_fleet_proxy(int(sys.argv[1]), "https://" + sys.argv[2], sys.argv[3] + "/server.pem", sys.argv[3] + "/server.key",
                  sys.argv[3] + "/ca.crt", host="127.0.0.1")' "${PORTS[1]}" "$LINK" "$T/certs" > "$T/proxy.log" 2>&1 &
PIDS+=($!)
for i in $(seq 1 120); do
  flwr supernode list pfwcp > /dev/null 2>&1 && break
  [ "$i" -lt 120 ] || { echo "SuperLink did not come up; log:" >&2; tail -20 "$T/superlink.log" >&2; exit 1; }
  sleep 1
done

# --- 3. register the K agents' public keys (operator, loopback); the node ids bind agents to SuperNodes
NODES=()
register() {  # key-name -> node id on stdout
  flwr supernode register "$T/keys/$1.pub" pfwcp --format json > "$T/register_$1.log" 2>&1 \
    || { echo "registering $1 failed:" >&2; cat "$T/register_$1.log" >&2; exit 1; }
  python -c 'import json, sys; t = open(sys.argv[1]).read(); print(json.loads(t[t.index("{"):])["node-id"])' "$T/register_$1.log"
}
for k in $(seq 0 $((K - 1))); do NODES+=("$(register "agent_$k")"); done
echo "registered $K SuperNode public keys: node ids ${NODES[*]}"

# --- 4. the app project (pfwcp_nb.flower.write_app_project, as in notebook 10_flower)
# agent-max-n: the n the operator agreed with each agent (here: the size of each agent's data file)
NS=$(python -c 'import sys, numpy as np; print(" ".join(str(np.load(f"{sys.argv[1]}/agent_{k}.npz")["scores"].size)
                                                   for k in range(int(sys.argv[2]))))' "$T/data" "$K")
read -r N1 _ <<< "$NS"
python -c 'import sys; from pfwcp_nb.flower import write_app_project
write_app_project(sys.argv[1], {"test-weights": sys.argv[2], "out": sys.argv[3], "node-timeout": 300.0,
                                "agent-nodes": sys.argv[4], "agent-max-n": sys.argv[5]})' \
  "$T/app" "$T/data/test_weights.npy" "$T/data/thresholds.npz" "${NODES[*]}" "$NS"

# --- 5. one SuperNode per agent (separate processes, through the proxy), plus an unregistered one with --rogue
start_supernode() {  # name port node-config [more flags]
  local name="$1" port="$2" cfg="$3"; shift 3
  flower-supernode --superlink "$FLEET" --root-certificates "$T/certs/ca.crt" --port "$port" \
    --auth-supernode-private-key "$T/keys/$name" --node-config "$cfg" "$@" > "$T/supernode_$name.log" 2>&1 &
  PIDS+=($!)
}
for k in $(seq 0 $((K - 1))); do
  start_supernode "agent_$k" "${PORTS[$((k + 2))]}" "partition-id=$k data-path=\"$T/data/agent_$k.npz\" policy-n1=$N1"
done
if [ "$ROGUE" = 1 ]; then
  start_supernode rogue "${PORTS[$((K + 2))]}" "partition-id=0 data-path=\"$T/data/agent_0.npz\""
fi
echo "started $K SuperNodes$([ "$ROGUE" = 1 ] && echo ' and 1 unregistered one')"

# --- 6. the run (operator, loopback): summaries, Procedure 1, PFWCP and osPFWCP for MC and CCC
START=$(date +%s)
(cd "$T/app" && flwr run . pfwcp --stream) > "$T/run.log" 2>&1 || { echo "flwr run failed:" >&2; tail -30 "$T/run.log" >&2; exit 1; }
for i in $(seq 1 60); do [ -f "$T/data/thresholds.npz" ] && break; sleep 1; done
[ -f "$T/data/thresholds.npz" ] || { echo "the ServerApp wrote no thresholds; the run's log:" >&2; tail -30 "$T/run.log" >&2; exit 1; }
echo "flwr run finished in $(( $(date +%s) - START )) s"

# --- 7. a foreign app: its ClientApp would send the node's data file to whoever runs it
cat > "$T/foreign/pyproject.toml" <<TOML
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "foreign"
version = "1.0.0"
license = "Apache-2.0"
dependencies = []

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "someone-else"

[tool.flwr.app.components]
serverapp = "foreign_app:server"
clientapp = "foreign_app:client"

[tool.flwr.app.config]
target-node = "0"
out = "$T/data/foreign.json"
TOML
cat > "$T/foreign/foreign_app.py" <<'PY'
import json, time
from pathlib import Path
from flwr.app import ConfigRecord, Message, MessageType, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import ServerApp

client = ClientApp()

@client.query()
def steal(msg, context):
    data = Path(str(context.node_config["data-path"])).read_bytes()
    return Message(RecordDict({"loot": ConfigRecord({"size": len(data), "head": data[:64].hex()})}), reply_to=msg)

server = ServerApp()

@server.main()
def main(grid, context):
    node, t0 = int(context.run_config["target-node"]), time.monotonic()
    while node not in set(grid.get_node_ids()) and time.monotonic() - t0 < 120:
        time.sleep(0.2)
    reps = list(grid.send_and_receive([Message(RecordDict(), dst_node_id=node, message_type=MessageType.QUERY)],
                                      timeout=120))
    out = {"replies": len(reps)}
    if reps:
        r = reps[0]
        out.update(error=r.error.reason if r.has_error() else None,
                   loot=None if r.has_error() else dict(r.content.config_records["loot"]))
    Path(context.run_config["out"]).write_text(json.dumps(out))
PY

if [ "$ROGUE" = 1 ]; then
  # (a) the SuperLink refuses to activate a SuperNode whose public key was not registered
  REFUSAL="No SuperNode found with the given public key"
  if grep -q "$REFUSAL" "$T/superlink.log" && grep -q "Failed to activate SuperNode" "$T/supernode_rogue.log"; then
    echo "unregistered SuperNode: refused (SuperLink: \"$REFUSAL\"; the SuperNode exits: \"Failed to activate SuperNode\")"
  else
    echo "unregistered SuperNode: NOT refused; its log:" >&2; tail -20 "$T/supernode_rogue.log" >&2; exit 1
  fi
  # (b) through the agents' address (the proxy) the Control API is not there: no key registration, no app start
  if flwr supernode register "$T/keys/rogue.pub" agents-address > "$T/rogue_register.log" 2>&1 \
     || ! grep -q "403 Forbidden" "$T/rogue_register.log"; then
    echo "registering a key through the agents' address: NOT refused with 403" >&2; cat "$T/rogue_register.log" >&2; exit 1
  fi
  if (cd "$T/foreign" && flwr run . agents-address) > "$T/rogue_run.log" 2>&1 || ! grep -q "403 Forbidden" "$T/rogue_run.log"; then
    echo "starting an app through the agents' address: NOT refused with 403" >&2; cat "$T/rogue_run.log" >&2; exit 1
  fi
  echo "Control API through the agents' address: refused (flwr supernode register and flwr run get 403 Forbidden; the proxy serves only POST /v1/fleet/...)"
fi

if [ "$FOREIGN" = 1 ]; then
  # a SuperNode holding agent 0's data that accepts only apps signed by its trusted publisher (Flower's --trusted-entities)
  GUARDED="$(register guarded)"
  start_supernode guarded "${PORTS[$((K + 3))]}" "partition-id=0 data-path=\"$T/data/agent_0.npz\"" \
    --trusted-entities "$T/keys/trusted_entities.yaml"
  (cd "$T/foreign" && flwr run . pfwcp --stream --run-config "target-node=\"$GUARDED\"") > "$T/foreign_run.log" 2>&1 \
    || { echo "flwr run of the foreign app failed to start:" >&2; tail -30 "$T/foreign_run.log" >&2; exit 1; }
  for i in $(seq 1 60); do [ -f "$T/data/foreign.json" ] && break; sleep 1; done
  [ -f "$T/data/foreign.json" ] || { echo "the foreign ServerApp wrote nothing; its log:" >&2; tail -30 "$T/foreign_run.log" >&2; exit 1; }
  python - "$T" <<'PY'
import json, sys
from pathlib import Path
T = Path(sys.argv[1])
r = json.loads((T / "data/foreign.json").read_text())
log = (T / "supernode_guarded.log").read_text()
if r.get("loot") is None and r.get("error") and "could not be verified" in log:
    print(f"foreign app: refused by the SuperNode with --trusted-entities (reply error: {r['error']!r})")
else:
    sys.exit(f"foreign app: NOT refused: {r}")
PY
fi

# --- 8. thresholds, and the exact comparison with the in-process estimators
python - "$T" <<'PY'
import sys
from pathlib import Path
import numpy as np
T = Path(sys.argv[1])
got, ref = np.load(T / "data/thresholds.npz"), np.load(T / "data/in_process.npz")
np.set_printoptions(precision=4, linewidth=120)
ok = True
for key in ref.files:
    same = np.array_equal(got[key], ref[key])
    ok &= same
    print(f"{key:12s} {got[key]}  (== in process: {same})")
sys.exit(0 if ok else 1)
PY
