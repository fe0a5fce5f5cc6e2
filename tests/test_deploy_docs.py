"The multi-machine deployment notes (docs/deploy.md, section 'Deploying across machines', from nbs/docs_deploy.ipynb) and scripts/flower_deploy.sh use only flags that the installed Flower commands have (`--help`), and cover what a deployment facing a network needs (the SuperLink on loopback behind the Fleet proxy, certificates, node keys, the Control API, the agents' policy)."
import os
import importlib
import re
import subprocess
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "docs" / "deploy.md").read_text()
SCRIPT = (ROOT / "scripts" / "flower_deploy.sh").read_text()
COMMANDS = ("flower-superlink", "flower-supernode", "flwr")
LAUNCHER = "python -m pfwcp_nb.federation.supernode"     # Flower's SuperNode with shorter waits (its own flags dropped)
LAUNCHER_FLAGS = r"--(first-wait|max-wait|reply-wait) \S+ "


def section(text, title):
    a = text.index(f"## {title}")
    b = text.find("\n## ", a + 3)
    return text[a: b if b > 0 else None]


DEPLOY = section(README, "Deploying across machines")


def command_lines(text):
    "Shell command lines (continuations joined) that call a Flower command, as (command words, flags)."
    text = re.sub(r"\\\n\s*", " ", text)
    out = []
    for line in text.splitlines():
        line = line.split(" #")[0].strip().lstrip("(").strip()
        line = re.sub(r"^cd \S+ && ", "", line)
        line = re.sub(r"^start_supernode ", "flower-supernode ", line)     # the script's wrapper (its extra flags)
        line = re.sub(r"^local cmd=\(|^cmd\+=\(", '"${SUPERNODE[@]}" ', line)    # the script's SuperNode command, built
        line = re.sub(r'^serve ("[^"]*"|\S+) \S+ ', "", line)                # the script's port-taking start of a server
        line = re.sub(r'^"\$\{SUPERNODE\[@\]\}" ', "flower-supernode ", line)  # the script's SuperNode command
        if line.startswith(LAUNCHER):
            line = "flower-supernode" + re.sub(LAUNCHER_FLAGS, "", line[len(LAUNCHER):] + " ")
        if not line.startswith(COMMANDS):
            continue
        words = line.split()
        cmd = words[:1] if words[0] != "flwr" else [w for w in words[:3] if not w.startswith(("-", '"', "$", "."))]
        if cmd[0] == "flwr" and len(cmd) > 1 and cmd[1] == "run":
            cmd = cmd[:2]
        flags = sorted({m.group(0) for w in words if (m := re.match(r"--[a-z][a-z0-9-]*", w))})
        out.append((tuple(cmd), flags))
    return out


@lru_cache(maxsize=None)
def help_text(cmd):
    env = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1", "TERM": "dumb"}
    r = subprocess.run([*cmd, "--help"], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, f"{' '.join(cmd)} --help failed: {r.stderr[-2000:]}"
    return r.stdout + r.stderr


README_CMDS = command_lines("\n".join(re.findall(r"```bash\n(.*?)\n```", DEPLOY, re.S)))
SCRIPT_CMDS = command_lines(SCRIPT)


def test_the_notes_and_the_script_call_each_flower_command():
    for cmds in (README_CMDS, SCRIPT_CMDS):
        names = {c for c, _ in cmds}
        assert {("flower-superlink",), ("flower-supernode",), ("flwr", "supernode", "register"), ("flwr", "run")} <= names


@pytest.mark.slow
@pytest.mark.parametrize("cmd, flags", sorted(set((c, tuple(f)) for c, f in README_CMDS + SCRIPT_CMDS)))
def test_every_flag_exists_in_the_installed_command(cmd, flags):
    text = help_text(cmd)
    missing = [f for f in flags if not re.search(re.escape(f) + r"(?![a-z0-9-])", text)]
    assert not missing, f"{' '.join(cmd)} has no flag(s) {missing} in flwr's installed version (--help)"


def test_the_superlink_stays_on_loopback_and_agents_get_the_fleet_proxy():
    superlink = [f for c, f in README_CMDS if c == ("flower-superlink",)]
    assert superlink and "--host" in superlink[0] and "--port" in superlink[0]
    assert re.search(r"flower-superlink --host 127\.0\.0\.1 --port \d+", DEPLOY)
    assert re.search(r"flower-superlink --host 127\.0\.0\.1 --port", re.sub(r"\\\n\s*", " ", SCRIPT))
    assert "serve_fleet_proxy" in DEPLOY and "serve_fleet_proxy" in SCRIPT
    # SuperNodes dial the proxy's port, never the SuperLink's
    port = re.search(r"serve_fleet_proxy\((\d+)", DEPLOY).group(1)
    assert re.search(rf"(flower-supernode|{LAUNCHER}) --superlink \S+:{port} ", DEPLOY)
    assert '"${SUPERNODE[@]}" --superlink "$FLEET"' in SCRIPT


def test_the_notes_cover_certificate_keys_control_api_and_policy():
    for needed in ("make_tls_files", "link.example.org", "ssh-keygen -t ecdsa -b 384", "flwr supernode register",
                   "--format json", "agent-nodes", "Control API", "policy-max-test-weights", "agent-max-n", "score-range",
                   "policy-n1", "LimitNOFILE", "Restart=on-failure", "handshake_timeout", "open_file_budget", "unbounded",
                   "agg-cap", "weight-range"):
        assert needed in DEPLOY, needed
    # who can learn what: the server, the operator, another agent, the network; the calibration and the pipeline app
    WHO = section(README, "Who can learn what")
    for needed in ("order statistic", "Flower Hub", "--trusted-entities", "weight_above", "TIMESTAMP_TOLERANCE",
                   "push-messages", "pull-object", "not robust", "the operator", "another agent", "without TLS",
                   "The pipeline app", "(privacy.md)", "attack_one_liar.py --table"):
        assert needed in WHO, needed


def test_python_one_liners_in_the_notes_call_real_functions():
    found = re.findall(r"from pfwcp_nb\.(federation\.\w+) import (\w+)", DEPLOY)
    assert found, "the notes import no function of the federation"
    for module, name in found:
        assert callable(getattr(importlib.import_module(f"pfwcp_nb.{module}"), name)), (module, name)


def test_a_flag_that_does_not_exist_is_caught():
    cmd, flags = command_lines("flower-supernode --superlink h:1 --trusted-entitie x.yaml")[0]
    assert flags == ["--superlink", "--trusted-entitie"]
    assert not re.search(re.escape("--trusted-entitie") + r"(?![a-z0-9-])", help_text(cmd))
    assert ("flower-supernode",) in {c for c, f in SCRIPT_CMDS if "--trusted-entities" in f}


def test_the_launchers_own_flags_exist_and_the_rest_are_flowers():
    text = subprocess.run([*LAUNCHER.split(), "--help"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    for flag in ("--first-wait", "--max-wait", "--reply-wait"):
        assert flag in text
    (cmd, flags), = command_lines(f"{LAUNCHER} --first-wait 0.05 --superlink h:1 --isolation process")
    assert cmd == ("flower-supernode",) and flags == ["--isolation", "--superlink"]
