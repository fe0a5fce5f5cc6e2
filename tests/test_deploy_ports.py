"""scripts/flower_deploy.sh binds its servers' ports without the pick-then-bind race (outside red team: another local
process took a picked port before the SuperLink bound it, "address already in use"), and keeps an agent's SuperNode
up (Flower's SuperNode exits after 5 failed connection tries): its `keep_up` restart loop."""
import re
import socket
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = (ROOT / "scripts" / "flower_deploy.sh").read_text()


def keep_up_snippet(body: str) -> str:
    "A bash program with the script's own `keep_up` function, then `body`."
    fn = re.search(r"^keep_up\(\) \{.*?^\}$", SCRIPT, re.S | re.M).group(0)
    return "set -euo pipefail\n" + fn + "\n" + body


def test_keep_up_restarts_a_failing_command_until_it_succeeds(tmp_path):
    log, count = tmp_path / "log", tmp_path / "count"
    cmd = f'n=$(cat {count} 2>/dev/null || echo 0); echo $((n + 1)) > {count}; echo "try $n"; [ "$n" -ge 2 ]'
    r = subprocess.run(["bash", "-c", keep_up_snippet(f': > {log}; (keep_up {log} bash -c \'{cmd}\'); echo "rc $?"')],
                       capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "rc 0", r.stderr
    text = log.read_text()
    assert text.count("the SuperNode exited; restart") == 2 and "try 2" in text


def test_keep_up_does_not_restart_a_command_whose_port_was_taken(tmp_path):
    log = tmp_path / "log"
    cmd = 'echo "[Errno 98] error while attempting to bind: address already in use"; exit 1'
    body = f': > {log}; set +e; (keep_up {log} bash -c \'{cmd}\'); echo "rc $?"'
    r = subprocess.run(["bash", "-c", keep_up_snippet(body)], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "rc 98", r.stdout + r.stderr              # `settle_supernode` then picks another port
    assert "restart" not in log.read_text()


@pytest.mark.slow
def test_a_port_taken_after_it_was_picked_is_replaced_and_the_deployment_passes(run_deploy_script, monkeypatch):
    held = []
    for _ in range(3):                                   # three ports another process holds (listening)
        s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); held.append(s)
    a, b, c = (s.getsockname()[1] for s in held)
    # handed out in this order: the SuperLink gets a, then a fresh one; the proxy b, then a fresh one; agent 0's
    # SuperNode c (agent 1 a fresh one), then a fresh one
    monkeypatch.setenv("PFWCP_DEPLOY_FIRST_PORTS", f"{a} 0 {b} 0 {c}")
    try:
        rc, out, err = run_deploy_script(["--agents", "2", "--test-points", "4"], timeout=1200)
    finally:
        for s in held: s.close()
    assert rc == 0, out + err
    for who, port in (("SuperLink", a), ("the Fleet-only proxy", b), ("SuperNode agent_0", c)):
        assert f"{who}: port {port} was taken after it was picked; starting it on another" in err
    assert out.count("(== in process: True)") == 4
