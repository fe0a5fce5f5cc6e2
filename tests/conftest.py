"""Shared fixtures of the test suite.

**Notebooks or pytest?** One rule: *worked examples live in the notebooks* (a hand-computed case, a figure, the
check that follows an exported cell, run by `nbdev_test`); *property tests, bad-input tests and integration tests
live in tests/* (hypothesis or many seeds, every `ValueError` with its message, subprocess runs of the console
scripts, statistical checks over many draws). A case is written once: a value checked in a notebook is not checked
again here.

**Two tiers.** The README's test command runs every notebook and `pytest tests -m "not slow"`, within ten minutes on
two idle cores; `.ci/run` runs that command, then `pytest tests -m slow`, so every test runs in CI. Mark a test
`@pytest.mark.slow` (or a module `pytestmark = pytest.mark.slow`) when it
- starts the package in a subprocess: a console script (`pfwcp-experiments`, `pfwcp-demo`, `pfwcp-reproduce`,
  `pfwcp-data`), a study or a tool (`studies/*`, `tools/make_readme.py`), a deployment (`scripts/flower_deploy.sh`), a
  Flower simulation or a Ray cluster — importing the harness alone costs about 7 s of CPU per process;
- or takes more than about 10 s alone on an idle core in process: a long simulation, a grid, a real-data grid.
The rest — property, bad-input and integration tests in process — stays fast. A slow test must still be able to
fail, and it runs in CI; there is no timing assertion (a loaded machine must not fail a test). When a module-scoped
fixture is shared, mark by the test's own cost: the fixture's cost moves to the next test that uses it.
`pytest tests -q -m "not slow" --durations=20` shows the fast tier's slowest tests.

Fixtures:
- `severe_gaussian(K, seed)`: the severe Gaussian-shift federation of the paper's S3, built by
  `data.make_federation`, and the Generator that drew its shift (go on drawing from it).
- `gaussian_oracle(K, seed)`: the same shift with its true density ratios and the supplement's score, as a
  `GaussianOracle` (and the Generator): the one simulation behind the statistical checks of PFWCP, FCP-QQ and osPFWCP
  with oracle weights (test_pfwcp, test_oneshot, test_coverage).
- `require_dataset(name)` / `data_dir`: the real data files. A missing file skips the test with the reason (the
  FileNotFoundError of the loader, which names the file and the `pfwcp-data fetch` command); under
  PFWCP_REQUIRE_DATA=1 it fails instead, so a run that is meant to use the data cannot pass by skipping.

Toy calibration draws (scores, weights, test weights, oracle localizer) come from the package's own builder
`baselines.toy_draw(seed, m=...)`, as in test_baselines.py. Bench scripts, which cannot use fixtures, call
`make_federation` and `toy_draw` directly."""
import os
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pfwcp_nb import data as D
from pfwcp_nb.pfwcp import AgentCalibration


def _unavailable(reason: str):
    if os.environ.get("PFWCP_REQUIRE_DATA") == "1":
        pytest.fail(f"PFWCP_REQUIRE_DATA=1 but {reason}")
    pytest.skip(f"real data not available: {reason}")


@pytest.fixture
def require_dataset():
    "A function `require(name)`: the data directory if dataset `name`'s files are there, else skip (or fail)."
    def require(name: str):
        try:
            D.data_path(name)
        except FileNotFoundError as e:
            _unavailable(str(e))
        return D.resolve_data_dir()
    return require


@pytest.fixture
def data_dir(require_dataset):
    "The data directory, when it holds the files of every real dataset (else skip, or fail under PFWCP_REQUIRE_DATA=1)."
    for name in D.DATA_FILES:
        root = require_dataset(name)
    return root


class GaussianOracle:
    "Agent k draws X ~ N(g_k, I); the score is |Y - f(X)| = 0.1 |sum X| (Y = sum X, f = 0.9 sum X); true ratios known."
    def __init__(self, g):
        self.g = np.asarray(g, float)  # (K, d) the agents' means, agent 0 = the test agent

    def weights(self, X):
        "(m, K): the true density ratio p_0 / p_k of each agent k at the rows of X."
        g = self.g
        return np.exp(X @ (g[0] - g).T - 0.5 * (g[0] @ g[0] - np.sum(g * g, axis=1)))

    def score(self, X):
        return 0.1 * np.abs(X.sum(axis=1))

    def draw(self, rng, n: int, k: int = 0):
        "n covariate rows of agent k."
        return self.g[k] + rng.standard_normal((n, self.g.shape[1]))

    def calibration(self, rng, n: int = 100) -> list:
        "One calibration draw: (scores, weights) per agent, n points each, true ratios (ones for agent 0)."
        out = []
        for k in range(len(self.g)):
            X = self.draw(rng, n, k)
            out.append((self.score(X), np.ones(n) if k == 0 else self.weights(X)[:, k]))
        return out

    def agents(self, rng, n: int = 100) -> list:
        "One calibration draw as an `AgentCalibration` per agent."
        return [AgentCalibration(s, w) for s, w in self.calibration(rng, n)]


@pytest.fixture
def gaussian_oracle(severe_gaussian):
    "A function `(K=11, seed=0) -> (GaussianOracle, Generator)` on the severe Gaussian shift's means."
    def build(K: int = 11, seed: int = 0):
        fed, rng = severe_gaussian(K, seed)
        return GaussianOracle(fed.shift["means"]), rng
    return build


@pytest.fixture
def severe_gaussian():
    "A function `(K=11, seed=0) -> (Federation, Generator)`: the severe Gaussian shift, and the Generator after its draw."
    def build(K: int = 11, seed: int = 0):
        rng = np.random.default_rng(seed)
        return D.make_federation("gaussian", "severe", K=K, seed=rng), rng
    return build


def _run_deploy_script(args, timeout: float):
    "Run scripts/flower_deploy.sh ARGS in its own process group; on a timeout stop it and all it started, then fail."
    root = Path(__file__).resolve().parents[1]
    p = subprocess.Popen(["bash", str(root / "scripts" / "flower_deploy.sh"), *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True,
                         env={**os.environ, "PYTHONPATH": str(root)})
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
        pytest.fail(f"flower_deploy.sh ran over {timeout} s and was stopped:\n{out}\n{err}")
    return p.returncode, out, err


@pytest.fixture
def run_deploy_script():
    "`run(args, timeout) -> (returncode, stdout, stderr)` of scripts/flower_deploy.sh (the deployment tests)."
    return _run_deploy_script


@pytest.fixture
def task_identity():
    "Flower messages built outside Flower's runtime need a run identity (the runtime sets it): the federation tests."
    from flwr.supercore.task_identity import TaskIdentity   # the flower extra: only tests that ask for it need it
    old = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    yield
    TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = old


def grid_run(datasets=("gaussian", "poisson"), methods=None, guarantees=("mc", "ccc"), **settings):
    """`runner.run_grid` from keywords, for the tests: the fields of `backends.Execution` (jobs, backend, address,
    chunk_size, cache_dir, data_dir, progress, log_every) make the execution, the others `grid.GridSpec`."""
    from dataclasses import fields
    from pfwcp_nb.backends import Execution
    from pfwcp_nb.grid import GridSpec
    from pfwcp_nb.runner import run_grid
    how = {f.name: settings.pop(f.name) for f in fields(Execution) if f.name in settings}
    return run_grid(GridSpec(datasets, methods, guarantees, **settings), Execution(**how))


@pytest.fixture
def start_proxy(monkeypatch):
    """Fleet-only proxies in threads on loopback in front of a fake SuperLink (every call: 200 "ok"): `start(**options)`
    starts one with `network.fleet_proxy_server`'s options (limits, certfile/keyfile) and returns its port; all stop at
    teardown (the proxy tests)."""
    import socket
    import threading
    import time
    import httpx
    from pfwcp_nb.federation import network        # the flower extra: only tests that ask for it need it
    real = httpx.AsyncClient
    monkeypatch.setattr(network.httpx, "AsyncClient", lambda base_url, **kw: real(
        base_url=base_url, transport=httpx.MockTransport(lambda r: httpx.Response(200, content=b"ok"))))
    servers = []

    def start(**options):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
        server = network.fleet_proxy_server("https://127.0.0.1:9", port, **options)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        for _ in range(200):
            if server.started: break
            time.sleep(0.05)
        assert server.started, "the proxy did not start"
        servers.append((server, thread))
        return port
    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(10)


@pytest.fixture
def node_auth():
    """A flwr 1.42 SuperNode's signing of Fleet calls (`NodeAuthHttpInterceptor`): returns `headers()`, fresh signed headers
    for one key pair (its public key file in PEM as `.pem`, and `.raw()`: the same headers as HTTP/1.1 header lines)."""
    import base64
    from flwr.supercore.date import now
    from flwr.supercore.primitives.asymmetric import generate_key_pairs, public_key_to_bytes, sign_message
    from pfwcp_nb.federation.network import NODE_AUTH_HEADERS
    sk, pk = generate_key_pairs()

    def headers(key=None):
        stamp = now().isoformat()
        private, public = key or (sk, pk)
        return {NODE_AUTH_HEADERS[0]: base64.b64encode(public_key_to_bytes(public)).decode(),
                NODE_AUTH_HEADERS[1]: base64.b64encode(sign_message(private, stamp.encode())).decode(),
                NODE_AUTH_HEADERS[2]: stamp}
    headers.pem = public_key_to_bytes(pk)
    headers.raw = lambda: b"".join(f"{k}: {v}\r\n".encode() for k, v in headers().items())
    headers.new_key = generate_key_pairs
    return headers
