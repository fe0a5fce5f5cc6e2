"`scripts/flower_deploy.sh --pipeline`: the whole pipeline (federated training, calibration, prediction) on the hardened localhost deployment (TLS, SuperNode authentication, the Fleet-only proxy), against the in-process pipeline."
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "flower_deploy.sh"


@pytest.mark.parametrize("args, match", [
    (["--pipeline", "--train-kw", "[1]"], "--train-kw must be a JSON object"),
    (["--pipeline", "--train-kw"], "usage:"),
    (["--pipeline", "--train-points", "1"], "--train-points must be an integer >= 2"),
    (["--pipeline", "--cal-points", "x"], "--cal-points must be an integer >= 1"),
])
def test_pipeline_bad_arguments(args, match):
    r = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True)
    assert r.returncode == 2 and "usage:" in r.stderr and match in r.stderr


@pytest.mark.slow
def test_deployed_pipeline_trains_calibrates_and_predicts_as_in_process(tmp_path, run_deploy_script):
    # two agents, two rounds of each task, few points: the deployment's path end to end, not the accuracy
    keep = tmp_path / "deploy"
    tk = {"predictor": {"epochs": 2}, "ratios": {"epochs": 2}}
    rc, out, err = run_deploy_script(["--pipeline", "--agents", "2", "--test-points", "8", "--train-points", "12",
                               "--cal-points", "15", "--train-kw", json.dumps(tk), "--keep", str(keep)], timeout=900)
    assert rc == 0, out + err
    assert "TLS, SuperNode authentication" in out and "Fleet-only proxy" in out
    assert "pipeline: trained over agents [0, 1] in 2 rounds, calibrated over agents [0, 1]" in out
    assert "(== in process within 1e-6: True" in out and "equal: True" in out
    with np.load(keep / "data" / "pipeline.npz") as z:
        s = json.loads(str(z["summary"]))
        assert z["thresholds"].shape == (8,) and np.all(np.isfinite(z["thresholds"]))
        assert set(s["seconds"]) >= {"connect", "training", "calibration", "total"}
    assert 0.0 <= s["coverage"] <= 1.0 and s["events"] == []
    # each agent's query policy (node_config policy-*, a state file) admitted and counted one PFWCP run's 8 test weights
    for k in range(2):
        used = json.loads((keep / "data" / f"agent_{k}.npz.queries.json").read_text())
        assert used["test_weights"] == 8 and used["oneshot"] == 0
    # each agent answered every message in its resident process (the default --isolation process): set-up, the
    # rounds, the models and the calibration and prediction queries, all completed, one JSON line each
    for k in range(2):
        tasks = [json.loads(l) for l in (keep / f"agent_agent_{k}.jsonl").read_text().splitlines()]
        assert sum(t["type"] == "train" for t in tasks) == 2 and all(t["status"] == "completed" for t in tasks)
        assert all(t["cpu"] >= 0 and t["wall"] >= 0 for t in tasks) and len({t["task"] for t in tasks}) == len(tasks)
    # every process the script started is gone
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(keep) not in ps
    shutil.rmtree(keep)
