#!/usr/bin/env bash
# PFWCP and osPFWCP on a real Flower deployment on localhost (notebooks 10_federation_protocol to 10h_federation_network), set up as it must be across
# machines: a SuperLink whose one HTTP port (Fleet + Control + runtime APIs) listens on loopback only, a
# Fleet-only reverse proxy (pfwcp_nb.federation.network.serve_fleet_proxy) that the agents' SuperNodes connect to, K SuperNodes
# as separate processes (one per agent of the Gaussian federation of pfwcp_nb.baselines.toy_draw, oracle weights),
# and `flwr run` of pfwcp_nb.federation.deploy's apps by the operator on the SuperLink's machine.
# Security: TLS everywhere (a throwaway CA and a certificate for localhost/127.0.0.1, pfwcp_nb.federation.network.make_tls_files),
# SuperNode authentication (--enable-supernode-auth; each agent's public key registered with
# `flwr supernode register`; the server talks to the registered node ids only, run_config agent-nodes), each
# agent's query policy (node_config policy-*; policy-n1: one-shot levels exactly osPFWCP's), the operator's cap on each
# agent's n (run_config agent-max-n). Checks, each printed:
#   --rogue    a SuperNode whose key is not registered is refused; registering a key and starting an app through
#              the agents' address (the proxy) are refused (the Control API is not on it)
#   --foreign  an operator's app whose ClientApp would send the node's data file back: with resident agents (the
#              default) it carries this package's publisher and name, reaches an agent's own installed ClientApp
#              and is refused by it; with --isolation subprocess it is refused by a SuperNode started with
#              --trusted-entities (Flower's app verification, only for apps the SuperLink verifies)
# Agents (--isolation process, the default): each SuperNode runs with Flower's process isolation (--isolation process,
# a secret shared with its agent, the Runtime API on loopback with TLS) and beside it a resident agent
# (python -m pfwcp_nb.federation.resident, notebook 10i_federation_resident) that answers every message with this
# package's ClientApp, imported once from the agent's own installation, never the operator's app bundle; one JSON
# line per message in agent_NAME.jsonl (CPU and wall seconds). --isolation subprocess: Flower's default, one
# flwr-clientapp process per message running the app bundle the operator submitted.
# Waits (--waits backoff, the default): each SuperNode is Flower's, started by python -m pfwcp_nb.federation.supernode
# (notebook 10f_federation_supernode), which pulls again 0.05 s after a message, doubling with each empty pull up to
# Flower's 3 s; --waits flower: flower-supernode itself (a pull every 3 s when there was no message).
# Prints the thresholds, checks they equal the in-process estimators exactly, and stops every process it
# started (trap). Certificates, keys, data and logs live in a temporary directory, removed at exit unless --keep.
# With --pipeline the same deployment runs the whole pipeline instead (notebooks 10a_federation_plan to 10f_federation_simulation): each SuperNode
# holds its agent's training, calibration (and, agent 0, test) points of a small gaussian federation
# (federation.simulation.federation_data), the app is pfwcp_nb.federation.deploy's pipeline app (federated training of the predictor and
# the pairwise ratio classifiers, then PFWCP's calibration and agent 0's prediction); prints the coverage, the
# thresholds, the server's events and its seconds by stage, and checks them against the in-process pipeline on the
# same data and seeds (thresholds within 1e-6 and coverage equal, or within --tolerance).
#
#   scripts/flower_deploy.sh [--agents K] [--test-points M] [--rogue] [--foreign] [--keep DIR]
#                            [--isolation process|subprocess] [--waits backoff|flower] [--pipeline [--train-kw JSON] [--train-points N] [--cal-points N]]
#     --agents K       agents = SuperNodes, K >= 2 (default 5)
#     --test-points M  test points of agent 0 (default 10)
#     --pipeline       the whole pipeline (training over Flower, calibration, prediction) instead of calibration only
#     --train-kw JSON  with --pipeline: the training schedule, as simulate_pipeline's train_kw
#                      (default '{"predictor": {"epochs": 4}, "ratios": {"epochs": 3}}': a few rounds)
#     --train-points N, --cal-points N   with --pipeline: training and calibration points per agent (default 20, 30)
#     --tolerance X    with --pipeline: the largest |threshold difference| to the in-process pipeline accepted (default
#                      1e-6, and then equal coverage; long schedules drift by float rounding amplified by Adam: give
#                      the drift measured for the simulation, results/flower_pipeline/gaussian_E10.json)
#     --rogue          the rogue checks above
#     --foreign        the foreign-app check above
#     --keep DIR       keep certificates, keys, data and logs in DIR (must not exist)
#     --isolation process|subprocess   resident agents running their own installed ClientApp (default), or Flower's
#                      process per message running the operator's app bundle
#     --waits backoff|flower   the SuperNodes' waits between pulls: a backoff from 0.05 s (default), or Flower's 3 s
# Needs the extra: pip install "pfwcp_nb[flower]", or pip install -e ".[flower]" from a clone. Exit 0 on success, 1 on failure, 2 on bad arguments.
set -euo pipefail
umask 077   # keys, certificates, data and logs: readable by this user only (also under --keep DIR)

USAGE="usage: $0 [--agents K>=2] [--test-points M>=1] [--rogue] [--foreign] [--keep DIR] [--isolation process|subprocess] [--waits backoff|flower] [--pipeline [--train-kw JSON] [--train-points N>=2] [--cal-points N>=1] [--tolerance X>=0]]"
usage() { echo "$USAGE" >&2; exit 2; }
K=5; M=10; ROGUE=0; FOREIGN=0; KEEP=""; PIPELINE=0; TRAIN_KW='{"predictor": {"epochs": 4}, "ratios": {"epochs": 3}}'
NTRAIN=20; NCAL=30; ISOLATION=process; TOL=1e-6; WAITS=backoff
while [ $# -gt 0 ]; do
  case "$1" in
    --agents) [ $# -ge 2 ] || usage; K="$2"; shift 2 ;;
    --test-points) [ $# -ge 2 ] || usage; M="$2"; shift 2 ;;
    --rogue) ROGUE=1; shift ;;
    --foreign) FOREIGN=1; shift ;;
    --keep) [ $# -ge 2 ] || usage; KEEP="$2"; shift 2 ;;
    --pipeline) PIPELINE=1; shift ;;
    --train-kw) [ $# -ge 2 ] || usage; TRAIN_KW="$2"; shift 2 ;;
    --train-points) [ $# -ge 2 ] || usage; NTRAIN="$2"; shift 2 ;;
    --cal-points) [ $# -ge 2 ] || usage; NCAL="$2"; shift 2 ;;
    --tolerance) [ $# -ge 2 ] || usage; TOL="$2"; shift 2 ;;
    --isolation) [ $# -ge 2 ] || usage; ISOLATION="$2"; shift 2 ;;
    --waits) [ $# -ge 2 ] || usage; WAITS="$2"; shift 2 ;;
    -h|--help) echo "$USAGE"; exit 0 ;;
    *) usage ;;
  esac
done
[[ "$K" =~ ^[0-9]+$ ]] && [ "$K" -ge 2 ] || { echo "--agents must be an integer >= 2, got '$K'" >&2; usage; }
[[ "$M" =~ ^[0-9]+$ ]] && [ "$M" -ge 1 ] || { echo "--test-points must be an integer >= 1, got '$M'" >&2; usage; }
[[ "$NTRAIN" =~ ^[0-9]+$ ]] && [ "$NTRAIN" -ge 2 ] || { echo "--train-points must be an integer >= 2, got '$NTRAIN'" >&2; usage; }
[ "$ISOLATION" = process ] || [ "$ISOLATION" = subprocess ] || { echo "--isolation must be process or subprocess, got '$ISOLATION'" >&2; usage; }
[ "$WAITS" = backoff ] || [ "$WAITS" = flower ] || { echo "--waits must be backoff or flower, got '$WAITS'" >&2; usage; }
[[ "$NCAL" =~ ^[0-9]+$ ]] && [ "$NCAL" -ge 1 ] || { echo "--cal-points must be an integer >= 1, got '$NCAL'" >&2; usage; }
python -c 'import math, sys; assert math.isfinite(float(sys.argv[1])) and float(sys.argv[1]) >= 0' "$TOL" 2>/dev/null \
  || { echo "--tolerance must be a number >= 0, got '$TOL'" >&2; usage; }
python -c 'import json, sys; d = json.loads(sys.argv[1]); assert isinstance(d, dict)' "$TRAIN_KW" 2>/dev/null \
  || { echo "--train-kw must be a JSON object, e.g. '{\"predictor\": {\"epochs\": 4}}', got '$TRAIN_KW'" >&2; usage; }
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
python - "$T" "$K" "$M" "$PIPELINE" "$TRAIN_KW" "$NTRAIN" "$NCAL" <<'PY'
import json, sys, socket, time, uuid, warnings
from pathlib import Path
import numpy as np
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from pfwcp_nb.baselines import toy_draw
from pfwcp_nb.federation.network import make_tls_files
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration
from pfwcp_nb.oneshot import OneShotPFWCP
from pfwcp_nb.federation.server import capped_agg_weights, robust_aggregate
from pfwcp_nb.federation.deploy import AGG_CAP, ANSWER_BOUND
T, K, M, PIPELINE = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
make_tls_files(T / "certs", ["localhost", "127.0.0.1"])           # a real host: its name(s), see the README
ssh = lambda k: k.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
for who in [f"agent_{k}" for k in range(K)] + ["rogue", "guarded"]:   # SuperNode identities (EC P-384, OpenSSH)
    key = ec.generate_private_key(ec.SECP384R1())
    (T / "keys" / who).write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                                     serialization.NoEncryption()))
    (T / "keys" / f"{who}.pub").write_bytes(ssh(key))
publisher = ed25519.Ed25519PrivateKey.generate()                   # the one app publisher the guarded agent trusts
(T / "keys/trusted_entities.yaml").write_text(f"fpk_{uuid.uuid4()}: '{ssh(publisher).decode()}'\n")
warnings.simplefilter("ignore")
if PIPELINE:   # each agent's training, calibration [and test] points; the in-process pipeline on the same data and seeds
    from pfwcp_nb.federation.simulation import federation_data
    from pfwcp_nb.federation.deploy import write_node_data
    from pfwcp_nb.pipeline import train_setup, sample_draw
    from pfwcp_nb.data import make_federation
    tk, n_train, n_cal = json.loads(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
    write_node_data(T / "data", federation_data("gaussian", K=K, seed=0, n_train=n_train, n_cal=n_cal, n_test=M))
    t0 = time.perf_counter()
    st = train_setup("gaussian", K=K, seed=0, n_train=n_train, train_kw=tk, need_localizer=False, progress=False)
    dr = sample_draw(st, make_federation("gaussian", K=K, seed=0), 0, n_cal=n_cal, n_test=M, localize=False)["estimated"]
    agents = [AgentCalibration(s, w) for s, w in zip(dr.cal_scores, dr.cal_weights)]
    robust = capped_agg_weights([a.summary() for a in agents], AGG_CAP)     # the deployed defaults, agg-cap and answer-bound
    mo = PFWCP(0.1, agg_weights=robust).calibrate(agents)
    q = robust_aggregate(mo.messages(dr.test_weights), mo.agg_weights_, mo.tau_, ANSWER_BOUND)
    np.savez(T / "data/in_process.npz", thresholds=q, coverage=np.mean(dr.test_scores <= q),
             seconds=time.perf_counter() - t0, n_cal=np.array([len(s) for s in dr.cal_scores]))
else:
    d = toy_draw(0, m=M, K=K, n=100, noise_sd=0.0)
    for k in range(K):
        np.savez(T / f"data/agent_{k}.npz", scores=d.cal_scores[k], weights=d.cal_weights[k])
    np.save(T / "data/test_weights.npy", d.test_weights)
    agents = [AgentCalibration(s, w) for s, w in zip(d.cal_scores, d.cal_weights)]
    robust = capped_agg_weights([a.summary() for a in agents], AGG_CAP)     # the deployed defaults, agg-cap and answer-bound
    read = lambda mo: robust_aggregate(mo.messages(d.test_weights), mo.agg_weights_, mo.tau_, ANSWER_BOUND)
    ref = {f"{me}-{cr}": (read(mo) if me == "pfwcp" else mo.threshold(d.test_weights))
           for me, Est in (("pfwcp", PFWCP), ("ospfwcp", OneShotPFWCP)) for cr, de in (("mc", None), ("ccc", 0.1))
           for mo in [Est(0.1, de, agg_weights=robust).calibrate(agents)]}
    np.savez(T / "data/in_process.npz", **ref)
PY

# --- ports: each server is started on a port picked just before and binds it itself. Another local process can take
# that port in between (the pick-then-bind race); the server then exits with "address already in use", and `serve`
# starts it again on another port (`holds_port` reads /proc: the server's own process, or one it started, must
# listen on the port). PFWCP_DEPLOY_FIRST_PORTS: ports to hand out first, 0 for a fresh one (tests: a port held
# elsewhere shows the retry).
[ -r /proc/net/tcp ] || { echo "this script needs Linux's /proc (to see which process holds a port)" >&2; exit 1; }
read -r -a FIRST_PORTS <<< "${PFWCP_DEPLOY_FIRST_PORTS:-}"
fresh_port() {  # sets PORT
  PORT=0
  if [ "${#FIRST_PORTS[@]}" -gt 0 ]; then PORT="${FIRST_PORTS[0]}"; FIRST_PORTS=("${FIRST_PORTS[@]:1}"); fi
  [ "$PORT" != 0 ] || PORT=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
}
holds_port() {  # PID PORT LOG: 0 once PID (or a process it started) listens on PORT; 2 if it exited as the port was
                # taken ("address already in use" in LOG); 1 if it exited otherwise, or after 300 s
  python - "$@" <<'PY'
import os, sys, time
pid, port, log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def listening():   # the socket inodes listening on `port`
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = open(table).read().splitlines()[1:]
        except OSError:
            continue
        found |= {f"socket:[{r.split()[9]}]" for r in rows
                  if r.split()[3] == "0A" and int(r.split()[1].rsplit(":", 1)[1], 16) == port}
    return found
def tree(root):    # root and its descendants still running
    kids, alive = {}, set()
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            state, ppid = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[:2]
        except OSError:
            continue
        kids.setdefault(int(ppid), []).append(int(d))
        if state != "Z":
            alive.add(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out += [p] if p in alive else []
        todo += kids.get(p, [])
    return out
def holds(pids, want):
    for p in pids:
        try:
            links = [os.readlink(f"/proc/{p}/fd/{fd}") for fd in os.listdir(f"/proc/{p}/fd")]
        except OSError:
            continue
        if want & set(links):
            return True
    return False
for _ in range(3000):
    pids = tree(pid)
    if not pids:
        sys.exit(2 if "address already in use" in open(log, errors="replace").read().lower() else 1)
    if holds(pids, listening()):
        sys.exit(0)
    time.sleep(0.1)
sys.exit(1)
PY
}
serve() {  # NAME LOG CMD... (@PORT@ in CMD: its port): starts CMD in the background until it holds its port; sets PORT
  local name="$1" log="$2" try rc pid; shift 2
  for try in 1 2 3 4 5; do
    fresh_port
    "${@//@PORT@/$PORT}" > "$log" 2>&1 &
    pid=$!; PIDS+=("$pid")
    rc=0; holds_port "$pid" "$PORT" "$log" || rc=$?
    [ "$rc" = 0 ] && return 0
    wait "$pid" 2>/dev/null || true
    [ "$rc" = 2 ] || { echo "$name did not start; its log:" >&2; tail -20 "$log" >&2; exit 1; }
    echo "$name: port $PORT was taken after it was picked; starting it on another" >&2
  done
  echo "$name: five picked ports in a row were taken; giving up" >&2; exit 1
}

# --- 2. SuperLink (TLS, only registered SuperNodes, on loopback) and the Fleet-only proxy in front of it
serve SuperLink "$T/superlink.log" flower-superlink --host 127.0.0.1 --port @PORT@ --ssl-ca-certfile "$T/certs/ca.crt" \
  --ssl-certfile "$T/certs/server.pem" --ssl-keyfile "$T/certs/server.key" --enable-supernode-auth \
  --disable-runtime-dependency-installation
LINK="127.0.0.1:$PORT"      # the SuperLink: loopback only (operator's `flwr` on this machine)
# the proxy admits only the agents' registered keys (and the guarded agent's): an unknown key is refused (401) from the
# request's head, before any body is read or forwarded
serve "the Fleet-only proxy" "$T/proxy.log" python -c 'import sys; from pfwcp_nb.federation.network import serve_fleet_proxy
serve_fleet_proxy(int(sys.argv[1]), "https://" + sys.argv[2], sys.argv[3] + "/server.pem", sys.argv[3] + "/server.key",
                  sys.argv[3] + "/ca.crt", host="127.0.0.1", authorized_keys=sys.argv[4:])' \
  @PORT@ "$LINK" "$T/certs" "$T"/keys/agent_*.pub "$T/keys/guarded.pub"
FLEET="127.0.0.1:$PORT"     # the Fleet-only proxy: what agents (and anyone on the network) reach
echo "SuperLink on $LINK (loopback; TLS, SuperNode authentication), Fleet-only proxy on $FLEET; work dir $T"
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

# --- 4. the app project (pfwcp_nb.federation.deploy.write_app_project, as in notebook 10g_federation_deploy)
# agent-max-n: the n the operator agreed with each agent (here: the size of each agent's data file); score-range: the
# range of the scores, which must be named (the toy federation's |y - 0.9 sum X| lie below 2: 0 10); agg-cap: its default
APP_KIND=calibration; [ "$PIPELINE" = 0 ] || APP_KIND=pipeline
if [ "$PIPELINE" = 1 ]; then
  # the pipeline's app (pfwcp_nb.federation.deploy.write_pipeline_app_project): gaussian, the training schedule, MC;
  # agent-max-n, agent-max-train: the calibration and training points the operator agreed with each agent (here:
  # --cal-points and --train-points each)
  OUT="$T/data/pipeline.npz"
  python -c 'import sys; from pfwcp_nb.federation.deploy import write_pipeline_app_project
write_pipeline_app_project(sys.argv[1], {"dataset": "gaussian", "agent-nodes": sys.argv[2], "out": sys.argv[3],
                                         "train-kw": sys.argv[4], "node-timeout": 300.0, "round-timeout": 300.0,
                                         "score-range": "0 100",   # gaussian: labels within about +-15, predictions near them
                                         "agent-max-n": " ".join([sys.argv[5]] * len(sys.argv[2].split())),
                                         "agent-max-train": " ".join([sys.argv[6]] * len(sys.argv[2].split()))})' \
    "$T/app" "${NODES[*]}" "$OUT" "$TRAIN_KW" "$NCAL" "$NTRAIN"
  N1="$NCAL"
  # each agent's calibration budget: two PFWCP runs over agent 0's M test points; its training agreement
  # (federation.deploy.PIPELINE_NODE_CONFIG): the dataset and schedule the operator agreed with it, the seed (0)
  POLICY=" policy-max-test-weights=$((2 * M)) pipeline-dataset=\"gaussian\" pipeline-train-kw='$TRAIN_KW' pipeline-agents=$K pipeline-max-train=$NTRAIN"
else
  OUT="$T/data/thresholds.npz"; POLICY=""
  NS=$(python -c 'import sys, numpy as np; print(" ".join(str(np.load(f"{sys.argv[1]}/agent_{k}.npz")["scores"].size)
                                                     for k in range(int(sys.argv[2]))))' "$T/data" "$K")
  read -r N1 _ <<< "$NS"
  python -c 'import sys; from pfwcp_nb.federation.deploy import write_app_project
write_app_project(sys.argv[1], {"test-weights": sys.argv[2], "out": sys.argv[3], "node-timeout": 300.0,
                                "agent-nodes": sys.argv[4], "agent-max-n": sys.argv[5],
                                "score-range": "0 10"})' \
    "$T/app" "$T/data/test_weights.npy" "$OUT" "${NODES[*]}" "$NS"
fi

# --- 5. one SuperNode per agent (separate processes, through the proxy), plus an unregistered one with --rogue.
# Flower's SuperNode exits after 5 failed connection tries in a row (exit code 305; e.g. while the proxy is flooded):
# an agent's SuperNode runs in a restart loop (`keep_up`, what systemd's Restart=on-failure does: docs/deploy.md);
# the rogue's does not. Each binds its own Runtime API port, picked just before (`settle_supernode`: another if taken).
if [ "$WAITS" = backoff ]; then SUPERNODE=(python -m pfwcp_nb.federation.supernode); else SUPERNODE=(flower-supernode); fi
keep_up() {  # LOG CMD...: CMD, and again 3 s after it exits with an error (at most 20 times), except when its port was
             # taken (then `settle_supernode` starts it on another); TERM stops it and CMD
  local log="$1" n=0 child="" at; shift
  trap '[ -z "$child" ] || kill "$child" 2>/dev/null; exit 0' TERM
  while :; do
    at=$(stat -c %s "$log")
    "$@" >> "$log" 2>&1 &
    child=$!
    if wait "$child"; then exit 0; fi
    if tail -c +$((at + 1)) "$log" | grep -qi "address already in use"; then exit 98; fi
    n=$((n + 1)); [ "$n" -le 20 ] || exit 1
    echo "flower_deploy.sh: the SuperNode exited; restart $n of 20 in 3 s" >> "$log"
    sleep 3
  done
}
declare -A SN_PID SN_PORT RES_PID
launch_supernode() {  # name restart(0|1) node-config [more flags]: its SuperNode on a fresh port, and its resident agent
  local name="$1" restart="$2" cfg="$3" log="$T/supernode_$1.log"; shift 3
  fresh_port; SN_PORT[$name]=$PORT
  local cmd=("${SUPERNODE[@]}" --superlink "$FLEET" --root-certificates "$T/certs/ca.crt" --port "$PORT" \
    --auth-supernode-private-key "$T/keys/$name" --node-config "$cfg")
  if [ "$ISOLATION" = process ]; then
    if [ ! -f "$T/keys/$name.secret" ]; then
      python -c 'import secrets, sys; open(sys.argv[1], "wb").write(secrets.token_bytes(32))' "$T/keys/$name.secret"
      chmod 600 "$T/keys/$name.secret"
    fi
    cmd+=(--isolation process --superexec-auth-secret-file "$T/keys/$name.secret" --ssl-certfile "$T/certs/server.pem" \
      --ssl-keyfile "$T/certs/server.key" --ssl-ca-certfile "$T/certs/ca.crt")
  fi
  cmd+=("$@")
  : > "$log"
  if [ "$restart" = 1 ]; then keep_up "$log" "${cmd[@]}" & else "${cmd[@]}" >> "$log" 2>&1 & fi
  SN_PID[$name]=$!; PIDS+=($!)
  if [ "$ISOLATION" = process ]; then
    python -m pfwcp_nb.federation.resident --runtime-api-address "127.0.0.1:$PORT" --secret-file "$T/keys/$name.secret" \
      --root-certificates "$T/certs/ca.crt" --app "$APP_KIND" --log "$T/agent_$name.jsonl" > "$T/resident_$name.log" 2>&1 &
    RES_PID[$name]=$!; PIDS+=($!)
  fi
}
settle_supernode() {  # the same arguments: waits until its SuperNode holds its port; one that found it taken starts again
  local name="$1" restart="$2" try rc
  for try in 1 2 3 4 5; do
    rc=0; holds_port "${SN_PID[$name]}" "${SN_PORT[$name]}" "$T/supernode_$name.log" || rc=$?
    [ "$rc" = 0 ] || { [ "$rc" = 1 ] && [ "$restart" = 0 ]; } && return 0   # the rogue may have been refused and gone
    [ "$rc" = 2 ] || { echo "SuperNode $name did not start; its log:" >&2; tail -20 "$T/supernode_$name.log" >&2; exit 1; }
    echo "SuperNode $name: port ${SN_PORT[$name]} was taken after it was picked; starting it on another" >&2
    [ -z "${RES_PID[$name]:-}" ] || kill "${RES_PID[$name]}" 2>/dev/null || true
    launch_supernode "$@"
  done
  echo "SuperNode $name: five picked ports in a row were taken; giving up" >&2; exit 1
}
start_supernode() { launch_supernode "$@"; settle_supernode "$@"; }   # the same arguments
agent_cfg() { echo "partition-id=$1 data-path=\"$T/data/agent_$1.npz\" policy-n1=$N1$POLICY"; }
for k in $(seq 0 $((K - 1))); do launch_supernode "agent_$k" 1 "$(agent_cfg "$k")"; done
[ "$ROGUE" = 0 ] || launch_supernode rogue 0 "partition-id=0 data-path=\"$T/data/agent_0.npz\""
for k in $(seq 0 $((K - 1))); do settle_supernode "agent_$k" 1 "$(agent_cfg "$k")"; done
[ "$ROGUE" = 0 ] || settle_supernode rogue 0 "partition-id=0 data-path=\"$T/data/agent_0.npz\""
echo "started $K SuperNodes$([ "$ROGUE" = 1 ] && echo ' and 1 unregistered one')"

# --- 6. the run (operator, loopback): summaries, Procedure 1, PFWCP and osPFWCP for MC and CCC
#        (--pipeline: training rounds, calibration, prediction)
START=$(date +%s.%N)
(cd "$T/app" && flwr run . pfwcp --stream) > "$T/run.log" 2>&1 || { echo "flwr run failed:" >&2; tail -30 "$T/run.log" >&2; exit 1; }
for i in $(seq 1 60); do [ -f "$OUT" ] && break; sleep 1; done
[ -f "$OUT" ] || { echo "the ServerApp wrote no result; the run's log:" >&2; tail -30 "$T/run.log" >&2; exit 1; }
echo "flwr run finished in $(python -c 'import sys, time; print(round(time.time() - float(sys.argv[1]), 1))' "$START") s"

# --- 7. a foreign app: its ClientApp would send the node's data file to whoever runs it (resident agents: under
#        this package's own publisher and name, as an operator who wants the agents' data would submit it)
if [ "$ISOLATION" = process ]; then
  FOREIGN_PUBLISHER=pfwcp-nb; FOREIGN_NAME=$([ "$PIPELINE" = 1 ] && echo pfwcp-pipeline || echo pfwcp-deploy)
else
  FOREIGN_PUBLISHER=someone-else; FOREIGN_NAME=foreign
fi
cat > "$T/foreign/pyproject.toml" <<TOML
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "$FOREIGN_NAME"
version = "1.0.0"
license = "Apache-2.0"
dependencies = []

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "$FOREIGN_PUBLISHER"

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
  # (a) a SuperNode whose public key was not registered is refused: by the proxy (401, its key is not one of the
  # registered keys) before the SuperLink sees it, or by the SuperLink
  REFUSAL="No SuperNode found with the given public key"
  PROXY_REFUSAL="the public key is not one of the registered SuperNodes'"
  if grep -q "$PROXY_REFUSAL" "$T/proxy.log" && ! grep -q "$REFUSAL" "$T/superlink.log"; then
    echo "unregistered SuperNode: refused by the proxy (401: \"$PROXY_REFUSAL\") before the SuperLink saw it"
  elif grep -q "$REFUSAL" "$T/superlink.log" && grep -q "Failed to activate SuperNode" "$T/supernode_rogue.log"; then
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
  # a SuperNode holding agent 0's data: with a resident agent (its own ClientApp), or (--isolation subprocess)
  # accepting only apps signed by its trusted publisher (Flower's --trusted-entities)
  GUARDED="$(register guarded)"
  if [ "$ISOLATION" = process ]; then
    start_supernode guarded 1 "partition-id=0 data-path=\"$T/data/agent_0.npz\"$POLICY"
  else
    start_supernode guarded 1 "partition-id=0 data-path=\"$T/data/agent_0.npz\"" \
      --trusted-entities "$T/keys/trusted_entities.yaml"
  fi
  (cd "$T/foreign" && flwr run . pfwcp --stream --run-config "target-node=\"$GUARDED\"") > "$T/foreign_run.log" 2>&1 \
    || { echo "flwr run of the foreign app failed to start:" >&2; tail -30 "$T/foreign_run.log" >&2; exit 1; }
  for i in $(seq 1 60); do [ -f "$T/data/foreign.json" ] && break; sleep 1; done
  [ -f "$T/data/foreign.json" ] || { echo "the foreign ServerApp wrote nothing; its log:" >&2; tail -30 "$T/foreign_run.log" >&2; exit 1; }
  python - "$T" "$ISOLATION" <<'PY'
import json, sys
from pathlib import Path
T, isolation = Path(sys.argv[1]), sys.argv[2]
r = json.loads((T / "data/foreign.json").read_text())
if isolation == "process":
    served = [json.loads(l) for l in (T / "agent_guarded.jsonl").read_text().splitlines()]
    if r.get("loot") is None and r.get("error") and served and all(t["status"] == "failed" for t in served):
        print(f"foreign app (publisher/name pfwcp-nb's own): refused by the resident agent's own ClientApp "
              f"(reply error: {r['error'][:160]!r})")
    else:
        sys.exit(f"foreign app: NOT refused: {r}")
else:
    log = (T / "supernode_guarded.log").read_text()
    if r.get("loot") is None and r.get("error") and "could not be verified" in log:
        print(f"foreign app: refused by the SuperNode with --trusted-entities (reply error: {r['error']!r})")
    else:
        sys.exit(f"foreign app: NOT refused: {r}")
PY
fi

# --- 8. thresholds, and the exact comparison with the in-process estimators (--pipeline: within 1e-6)
if [ "$PIPELINE" = 1 ]; then
  python - "$T" "$TOL" <<'PY'
import json, sys
from pathlib import Path
import numpy as np
T, tol = Path(sys.argv[1]), float(sys.argv[2])
got, ref = np.load(T / "data/pipeline.npz"), np.load(T / "data/in_process.npz")
s = json.loads(str(got["summary"]))
np.set_printoptions(precision=4, linewidth=120)
print(f"pipeline: trained over agents {s['trained']} in {s['rounds']} rounds, calibrated over agents {s['agents']}")
print(f"server events: {s['events'] or 'none'}")
print("server seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in s["seconds"].items())
      + f"; in process (training + draw + PFWCP) {float(ref['seconds']):.1f}")
dq = float(np.max(np.abs(got["thresholds"] - ref["thresholds"])))
same_cov = s["coverage"] == float(ref["coverage"])
print(f"coverage {s['coverage']:.4f} (in process {float(ref['coverage']):.4f}, equal: {same_cov}); "
      f"mean interval length {s['mean_size']:.4f}")
print(f"thresholds {got['thresholds'][:8]}  (== in process within {sys.argv[2]}: {dq <= tol}; max |diff| {dq:.2g})")
used = [json.loads((T / f"data/agent_{k}.npz.queries.json").read_text()) for k in range(len(s["trained"]))]
print("query policies (answered): " + "; ".join(f"agent {k} {u['test_weights']} test weights at beta {u['level']}"
                                                for k, u in enumerate(used)))
sys.exit(0 if dq <= tol and (same_cov or tol > 1e-6) else 1)
PY
  exit $?
fi
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
