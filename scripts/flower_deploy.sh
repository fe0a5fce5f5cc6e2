#!/usr/bin/env bash
# PFWCP and osPFWCP on a real Flower deployment on localhost (notebook 10_flower):
# a SuperLink, K SuperNodes as separate processes (one per agent of the Gaussian federation of
# pfwcp_nb.baselines.toy_draw, oracle weights) and `flwr run` of pfwcp_nb.flower's apps.
# Security: TLS everywhere (a throwaway CA and server certificate) and SuperNode authentication
# (--enable-supernode-auth; each agent's public key registered with `flwr supernode register`).
# Prints the thresholds, checks they equal the in-process estimators exactly, and stops every
# process it started (trap). Certificates, keys, data and logs live in a temporary directory,
# removed at exit unless --keep DIR is given.
#
#   scripts/flower_deploy.sh [--agents K] [--test-points M] [--rogue] [--keep DIR]
#     --agents K       agents = SuperNodes, K >= 2 (default 5)
#     --test-points M  test points of agent 0 (default 10)
#     --rogue          also start one SuperNode whose key is NOT registered; it must be refused
#     --keep DIR       keep certificates, keys, data and logs in DIR (must not exist)
# Needs the extra: pip install "pfwcp_nb[flower]", or pip install -e ".[flower]" from a clone. Exit 0 on success, 1 on failure, 2 on bad arguments.
set -euo pipefail

usage() { echo "usage: $0 [--agents K>=2] [--test-points M>=1] [--rogue] [--keep DIR]" >&2; exit 2; }
K=5; M=10; ROGUE=0; KEEP=""
while [ $# -gt 0 ]; do
  case "$1" in
    --agents) [ $# -ge 2 ] || usage; K="$2"; shift 2 ;;
    --test-points) [ $# -ge 2 ] || usage; M="$2"; shift 2 ;;
    --rogue) ROGUE=1; shift ;;
    --keep) [ $# -ge 2 ] || usage; KEEP="$2"; shift 2 ;;
    -h|--help) echo "usage: $0 [--agents K>=2] [--test-points M>=1] [--rogue] [--keep DIR]"; exit 0 ;;
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

export FLWR_HOME="$T/flwr-home"   # throwaway Flower configuration (SuperLink connection) and installed apps
mkdir -p "$FLWR_HOME" "$T/app" "$T/certs" "$T/keys" "$T/data"

# --- 1. credentials and data (python `cryptography` is a dependency of flwr itself: no openssl needed)
python - "$T" "$K" "$M" <<'PY'
import sys, datetime, ipaddress, socket
from pathlib import Path
import numpy as np
from cryptography import x509
from cryptography.x509.oid import NameOID
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from pfwcp_nb.baselines import toy_draw
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration
from pfwcp_nb.oneshot import OneShotPFWCP
T, K, M = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
now = datetime.datetime.now(datetime.timezone.utc)
def pem_key(k):
    return k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                           serialization.NoEncryption())
def cert(subject, issuer, pub, sign_key, ca, san=None):
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(pub)
         .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
         .not_valid_after(now + datetime.timedelta(days=1))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if san:
        b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return b.sign(sign_key, hashes.SHA256())
name = lambda cn: x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
ca_key, srv_key = ec.generate_private_key(ec.SECP384R1()), ec.generate_private_key(ec.SECP384R1())
ca = cert(name("pfwcp throwaway CA"), name("pfwcp throwaway CA"), ca_key.public_key(), ca_key, True)
srv = cert(name("localhost"), ca.subject, srv_key.public_key(), ca_key, False,
           [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
(T / "certs/ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
(T / "certs/server.pem").write_bytes(srv.public_bytes(serialization.Encoding.PEM))
(T / "certs/server.key").write_bytes(pem_key(srv_key))
for who in [f"agent_{k}" for k in range(K)] + ["rogue"]:          # SuperNode identities (EC P-384, OpenSSH format)
    key = ec.generate_private_key(ec.SECP384R1())
    (T / "keys" / who).write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                                     serialization.NoEncryption()))
    (T / "keys" / f"{who}.pub").write_bytes(key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                                          serialization.PublicFormat.OpenSSH))
d = toy_draw(0, m=M, K=K, n=100, noise_sd=0.0)
for k in range(K):
    np.savez(T / f"data/agent_{k}.npz", scores=d.cal_scores[k], weights=d.cal_weights[k])
np.save(T / "data/test_weights.npy", d.test_weights)
agents = [AgentCalibration(s, w) for s, w in zip(d.cal_scores, d.cal_weights)]
import warnings; warnings.simplefilter("ignore")
ref = {f"{me}-{cr}": Est(0.1, de).calibrate(agents).threshold(d.test_weights)
       for me, Est in (("pfwcp", PFWCP), ("ospfwcp", OneShotPFWCP)) for cr, de in (("mc", None), ("ccc", 0.1))}
np.savez(T / "data/in_process.npz", **ref)
ports = []
for _ in range(K + 2):                                             # free local ports: SuperLink + one per SuperNode
    s = socket.socket(); s.bind(("127.0.0.1", 0)); ports.append(s.getsockname()[1]); s.close()
(T / "ports").write_text(" ".join(map(str, ports)) + "\n")
PY
read -r -a PORTS < "$T/ports"
LINK="127.0.0.1:${PORTS[0]}"

# --- 2. the Flower app project (pfwcp_nb.flower.write_app_project, as in notebook 10_flower), and the SuperLink connection
python -c 'import sys; from pfwcp_nb.flower import write_app_project
write_app_project(sys.argv[1], {"test-weights": sys.argv[2], "out": sys.argv[3], "node-timeout": 300.0})' \
  "$T/app" "$T/data/test_weights.npy" "$T/data/thresholds.npz"
cat > "$FLWR_HOME/config.toml" <<TOML
[superlink]
default = "pfwcp"

[superlink.pfwcp]
address = "$LINK"
root-certificates = "$T/certs/ca.crt"
TOML

# --- 3. SuperLink (TLS, only registered SuperNodes), then register the K agents' public keys
echo "SuperLink on $LINK (TLS, SuperNode authentication); work dir $T"
flower-superlink --port "${PORTS[0]}" --ssl-ca-certfile "$T/certs/ca.crt" --ssl-certfile "$T/certs/server.pem" \
  --ssl-keyfile "$T/certs/server.key" --enable-supernode-auth --disable-runtime-dependency-installation \
  > "$T/superlink.log" 2>&1 &
PIDS+=($!)
for i in $(seq 1 120); do
  flwr supernode list pfwcp > /dev/null 2>&1 && break
  [ "$i" -lt 120 ] || { echo "SuperLink did not come up; log:" >&2; tail -20 "$T/superlink.log" >&2; exit 1; }
  sleep 1
done
for k in $(seq 0 $((K - 1))); do
  flwr supernode register "$T/keys/agent_$k.pub" pfwcp > "$T/register_$k.log" 2>&1 \
    || { echo "registering agent $k failed:" >&2; cat "$T/register_$k.log" >&2; exit 1; }
done
echo "registered $K SuperNode public keys"

# --- 4. one SuperNode per agent (separate processes), plus an unregistered one with --rogue
start_supernode() {  # name port node-config
  flower-supernode --superlink "$LINK" --root-certificates "$T/certs/ca.crt" --port "$2" \
    --auth-supernode-private-key "$T/keys/$1" \
    --node-config "$3" > "$T/supernode_$1.log" 2>&1 &
  PIDS+=($!)
}
for k in $(seq 0 $((K - 1))); do
  start_supernode "agent_$k" "${PORTS[$((k + 1))]}" "partition-id=$k data-path=\"$T/data/agent_$k.npz\""
done
if [ "$ROGUE" = 1 ]; then
  start_supernode rogue "${PORTS[$((K + 1))]}" "partition-id=0 data-path=\"$T/data/agent_0.npz\""
fi
echo "started $K SuperNodes$([ "$ROGUE" = 1 ] && echo ' and 1 unregistered one')"

# --- 5. the run: summaries, Procedure 1, PFWCP and osPFWCP for MC and CCC
START=$(date +%s)
(cd "$T/app" && flwr run . pfwcp --stream) > "$T/run.log" 2>&1 || { echo "flwr run failed:" >&2; tail -30 "$T/run.log" >&2; exit 1; }
for i in $(seq 1 60); do [ -f "$T/data/thresholds.npz" ] && break; sleep 1; done
echo "flwr run finished in $(( $(date +%s) - START )) s"

if [ "$ROGUE" = 1 ]; then   # the SuperLink refuses to activate a SuperNode whose public key was not registered
  REFUSAL="No SuperNode found with the given public key"
  if grep -q "$REFUSAL" "$T/superlink.log" && grep -q "Failed to activate SuperNode" "$T/supernode_rogue.log"; then
    echo "unregistered SuperNode: refused (SuperLink: \"$REFUSAL\"; the SuperNode exits: \"Failed to activate SuperNode\")"
  else
    echo "unregistered SuperNode: NOT refused; its log:" >&2; tail -20 "$T/supernode_rogue.log" >&2; exit 1
  fi
fi

# --- 6. thresholds, and the exact comparison with the in-process estimators
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
