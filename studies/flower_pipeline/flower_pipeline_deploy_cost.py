#!/usr/bin/env python
"""Wall time of the whole gaussian pipeline in process, over Flower's simulation engine and on the hardened localhost
deployment (scripts/flower_deploy.sh --pipeline), on the same data, seeds and schedule, and where the time goes.

usage: python studies/flower_pipeline/flower_pipeline_deploy_cost.py [--K 11] [--n-train 50] [--n-cal 100] [--n-test 500]
           [--train-kw JSON] [--out results/flower_pipeline/deploy_K11.json] [--table results/flower_pipeline/deploy_K11.md]
The default schedule is the first rounds of gaussian_E10.json's (ten local predictor epochs and one FedAdam step of the
ratio classifiers per round), five rounds. Writes one JSON (all timings, the exact commands) and a markdown table."""
import argparse, json, os, re, subprocess, sys, tempfile, time, warnings
from pathlib import Path

import numpy as np

from pfwcp_nb.data import make_federation
from pfwcp_nb.federation.simulation import simulate_pipeline
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration
from pfwcp_nb.pipeline import sample_draw, train_setup

from flower_pipeline_cost import client_timer   # the sibling script's client mod (scripts/ is on sys.path when run)

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_KW = {"predictor": {"epochs": 50, "local_epochs": 10}, "ratios": {"epochs": 5}}




def import_seconds(repeat=3):
    "Wall seconds a fresh interpreter takes to import the ClientApp's module (what every deployed message pays)."
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import pfwcp_nb.federation.deploy"], check=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
        out.append(time.perf_counter() - t0)
    return out


def table(r):
    "Markdown table of one result file: wall seconds by stage on the three paths."
    ip, sim, dep = r["in_process_seconds"], r["simulation_seconds"], r["deployment_seconds"]
    f = lambda x: "" if x is None else f"{x:.1f}"
    rows = [("start-up (simulation: Ray and the first message; deployment: certificates, keys, data, SuperLink, "
             "proxy, key registration, SuperNodes)", None, sim["connect"], dep["start_up"]),
            ("first message to the agents (deployment: `flwr run` until the server has every agent's counts)",
             None, None, dep["server"]["connect"]),
            ("set-up (features, PCA)", None, sim["setup"], dep["server"]["setup"]),
            (f"training, {r['rounds']} rounds", ip["training"], sim["training"], dep["server"]["training"]),
            ("per round", ip["training"] / r["rounds"], sim["training"] / r["rounds"],
             dep["server"]["training"] / r["rounds"]),
            ("models to the agents", None, sim["models"], dep["server"]["models"]),
            ("calibration and prediction", ip["calibration"], sim["calibration"], dep["server"]["calibration"]),
            ("total wall (deployment: without the script's in-process reference)", ip["wall"], sim["wall"],
             dep["wall"] - dep["in_process_reference"])]
    out = ["| stage | in process (s) | simulation (s) | localhost deployment (s) |", "|---|---|---|---|"]
    out += [f"| {a} | {f(b)} | {f(c)} | {f(d)} |" for a, b, c, d in rows]
    out.append("")
    out.append(f"Seconds per message exchange in the deployment (training and set-up/calibration exchanges together): "
               f"{dep['seconds_per_exchange']:.1f}; a fresh interpreter importing the ClientApp's module "
               f"(`pfwcp_nb.federation.deploy`), which every deployed SuperNode does for every message: "
               f"{min(r['import_seconds']):.1f}-{max(r['import_seconds']):.1f}. Simulation: the ClientApps' own work, "
               f"summed over agents, {sum(r['simulation_client_seconds'].values()):.1f}. "
               f"Thresholds, deployment vs in process: max |diff| {r['deployment_thresholds_max_abs_diff']:.2g}; "
               f"coverage {r['coverage']['deployment']:.3f} (simulation {r['coverage']['simulation']:.3f}, in process "
               f"{r['coverage']['in_process']:.3f}).")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--K", type=int, default=11)
    ap.add_argument("--n-train", type=int, default=50)
    ap.add_argument("--n-cal", type=int, default=100)
    ap.add_argument("--n-test", type=int, default=500)
    ap.add_argument("--train-kw", default=json.dumps(DEFAULT_KW))
    ap.add_argument("--out", default="results/flower_pipeline/deploy_K11.json")
    ap.add_argument("--table", default=None, help="markdown table to write (default: --out with .md)")
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    tk = json.loads(a.train_kw)
    sizes = dict(n_train=a.n_train, n_cal=a.n_cal, n_test=a.n_test)
    # in process
    t0 = time.perf_counter()
    st = train_setup("gaussian", K=a.K, seed=0, n_train=a.n_train, train_kw=tk, need_localizer=False, progress=False)
    t_train = time.perf_counter() - t0
    dr = sample_draw(st, make_federation("gaussian", K=a.K, seed=0), 0, n_cal=a.n_cal, n_test=a.n_test,
                     localize=False)["estimated"]
    q_in = PFWCP(0.1).calibrate([AgentCalibration(s, w) for s, w in zip(dr.cal_scores, dr.cal_weights)]).threshold(dr.test_weights)
    t_in = time.perf_counter() - t0
    # simulation
    timer = Path(tempfile.mkdtemp()) / "client_seconds.txt"
    t0 = time.perf_counter()
    res = simulate_pipeline("gaussian", K=a.K, seed=0, train_kw=tk, client_mods=[client_timer(str(timer))],
                            node_timeout=600.0, round_timeout=600.0, **sizes)
    t_sim = time.perf_counter() - t0
    client = {}
    for kind, sec in (line.split() for line in timer.read_text().splitlines()):
        client[kind] = client.get(kind, 0.0) + float(sec)
    # localhost deployment
    keep = Path(tempfile.mkdtemp()) / "deploy"
    cmd = ["bash", "scripts/flower_deploy.sh", "--pipeline", "--agents", str(a.K), "--test-points", str(a.n_test),
           "--train-points", str(a.n_train), "--cal-points", str(a.n_cal), "--train-kw", json.dumps(tk), "--keep", str(keep)]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    t_dep = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"flower_deploy.sh failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    with np.load(keep / "data" / "pipeline.npz") as z:
        summ, q_dep = json.loads(str(z["summary"])), z["thresholds"]
    with np.load(keep / "data" / "in_process.npz") as z:
        t_ref = float(z["seconds"])          # the script's own in-process reference, before the deployment starts
    run_s = float(re.search(r"flwr run finished in ([0-9.]+) s", p.stdout).group(1))
    exchanges = summ["rounds"] + 7      # stats, features, rounds, models, test weights, summaries, messages, prediction
    out = dict(
        command="python studies/flower_pipeline/flower_pipeline_deploy_cost.py " + " ".join(sys.argv[1:] if argv is None else argv),
        deploy_command=" ".join(cmd[:-2]), machine="2 cores shared with other jobs (heavily loaded)",
        K=a.K, **sizes, train_kw=tk, rounds=res.rounds,
        in_process_seconds=dict(wall=t_in, training=t_train, calibration=t_in - t_train),
        simulation_seconds=dict(wall=t_sim, **{k: float(v) for k, v in res.seconds.items()}),
        simulation_client_seconds=client,
        deployment_seconds=dict(wall=t_dep, flwr_run=run_s, in_process_reference=t_ref, start_up=t_dep - run_s - t_ref,
                                server=summ["seconds"],
                                seconds_per_exchange=summ["seconds"]["total"] / exchanges, exchanges=exchanges),
        import_seconds=import_seconds(),
        deployment_thresholds_max_abs_diff=float(np.max(np.abs(q_dep - q_in))),
        simulation_thresholds_max_abs_diff=float(np.max(np.abs(res.thresholds - q_in))),
        coverage=dict(in_process=float(np.mean(dr.test_scores <= q_in)), simulation=res.coverage,
                      deployment=summ["coverage"]),
        events=dict(simulation=res.events, deployment=summ["events"]), deploy_stdout=p.stdout)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    Path(a.table or Path(a.out).with_suffix(".md")).write_text(table(out))
    print(table(out), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
