#!/usr/bin/env python
"""The gaussian pipeline on the hardened localhost deployment with resident agents (notebook 10i_federation_resident):
cost by stage, an agent's CPU per message, the import an agent pays, against today's process per message.

usage: python studies/deploy_speed/run.py imports [--repeat 3] [--out studies/deploy_speed/imports.json]
       python studies/deploy_speed/run.py schedule [--K 11] [--rounds R] [--schedule E10|paper]
                                                   [--isolation process|subprocess] [--waits backoff|flower]
                                                   [--out studies/deploy_speed/schedule_K11_E10_R_packed[_backoff].json]
       python studies/deploy_speed/run.py table [--out studies/deploy_speed/table.md]   # also summary.md (whole runs)
`schedule` runs scripts/flower_deploy.sh --pipeline with R rounds of gaussian_E10.json's schedule (per round ten local
predictor epochs and one FedAdam step of the ratio classifiers; R = 600 is the whole schedule; --schedule paper: the
paper's, gaussian.json's, one local epoch per round, 5000 rounds), the sizes of
results/flower_pipeline/deploy_K11.json (50 training, 100 calibration points per agent, 500 test points), the
thresholds checked against the in-process pipeline within the drift measured for the simulation (gaussian_E10.json,
gaussian.json). Fewer rounds: the per-round cost is extrapolated to the whole schedule (stated as such in the table).
--waits backoff (default): each SuperNode started by python -m pfwcp_nb.federation.supernode (notebook
10f_federation_supernode: pulls again 0.05 s after a message, doubling up to 3 s); --waits flower: Flower's 3-s poll."""
import argparse, json, os, re, resource, subprocess, sys, tempfile, time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
E10 = ROOT / "results/flower_pipeline/gaussian_E10.json"
TODAY = ROOT / "results/flower_pipeline/deploy_K11.json"
SIZES = dict(n_train=50, n_cal=100, n_test=500)
PAPER = ROOT / "results/flower_pipeline/gaussian.json"
FULL_ROUNDS = {"E10": 600, "paper": 5000}     # gaussian_E10.json's schedule; the paper's (gaussian.json)


def schedule_kw(rounds: int, schedule: str = "E10") -> dict:
    """train_kw of the first `rounds` rounds of a schedule: E10 (gaussian_E10.json: ten local predictor epochs and one
    FedAdam step of the ratio classifiers per round, 600 rounds) or paper (gaussian.json: one local epoch per round,
    5000 rounds, the ratio classifiers' step in the first 600)."""
    if schedule == "E10":
        return {"predictor": {"epochs": 10 * min(rounds, 500), "local_epochs": 10}, "ratios": {"epochs": rounds}}
    return {"predictor": {"epochs": rounds, "local_epochs": 1}, "ratios": {"epochs": min(rounds, 600)}}


def child_import(module: str) -> dict:
    "Wall and CPU seconds of a fresh interpreter importing `module`, and whether Ray / flwr.simulation came with it."
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    p = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    mods = [l.split("|")[-1].strip() for l in p.stderr.splitlines() if l.startswith("import time:")]
    return dict(wall=wall, cpu=(r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), modules=len(mods),
                ray=any(m == "ray" or m.startswith("ray.") for m in mods),
                flwr_simulation=any(m.startswith("flwr.simulation") for m in mods))


def imports(a) -> dict:
    # subprocess isolation: every message starts flwr-clientapp, which imports the app's ClientApp module
    # (pfwcp_nb.federation.deploy; before the package split the federation by party: pfwcp_nb.flower_pipeline, with Ray);
    # resident agents import pfwcp_nb.federation.resident once per agent process
    out = {m: [child_import(m) for _ in range(a.repeat)] for m in
           ("pfwcp_nb.federation.deploy", "pfwcp_nb.federation.resident", "flwr.simulation")}
    return dict(command="python studies/deploy_speed/run.py imports " + " ".join(sys.argv[2:]),
                load_before=os.getloadavg(), imports=out)


def agent_messages(keep: Path) -> dict:
    "Each resident agent's per-message log (agent_agent_k.jsonl): CPU and wall seconds by message type."
    rows = [json.loads(l) for f in sorted(keep.glob("agent_agent_*.jsonl")) for l in f.read_text().splitlines()]
    by = {}
    for r in rows:
        by.setdefault(r["type"], []).append(r)
    stat = lambda xs: dict(n=len(xs), mean=float(np.mean(xs)), median=float(np.median(xs)), p95=float(np.quantile(xs, 0.95)),
                           max=float(np.max(xs)))
    out = {t: dict(cpu=stat([r["cpu"] for r in rs]), wall=stat([r["wall"] for r in rs])) for t, rs in by.items()}
    first = [json.loads(f.read_text().splitlines()[0])["cpu"] for f in sorted(keep.glob("agent_agent_*.jsonl"))]
    trains = [[json.loads(l) for l in f.read_text().splitlines() if json.loads(l)["type"] == "train"]
              for f in sorted(keep.glob("agent_agent_*.jsonl"))]
    return dict(by_type=out, all_cpu=stat([r["cpu"] for r in rows]), failed=sum(r["status"] != "completed" for r in rows),
                first_message_cpu=stat(first), first_train_cpu=stat([t[0]["cpu"] for t in trains if t]),
                later_train_cpu=stat([r["cpu"] for t in trains for r in t[1:]]) if any(len(t) > 1 for t in trains) else None)


REFERENCE = {("E10", 11): E10, ("paper", 11): PAPER, ("paper", 3): HERE / "simulation_K3_paper.json"}


def reference(schedule: str, K: int) -> Path:
    "The simulation run whose drift from the in-process pipeline is the tolerance: the same schedule and K if stored."
    same = REFERENCE.get((schedule, K))
    return same if same is not None and same.is_file() else E10 if schedule == "E10" else PAPER


def collect(a, keep: Path, stdout: str, wall: float, cpu_all, load0, load1, cmd: list, tol: float, note: str = "") -> dict:
    "The JSON of one deployment run from its kept directory (`--keep`) and the script's output."
    tk, full = schedule_kw(a.rounds, a.schedule), FULL_ROUNDS[a.schedule]
    with np.load(keep / "data" / "pipeline.npz") as z:
        summ, q_dep = json.loads(str(z["summary"])), z["thresholds"]
    with np.load(keep / "data" / "in_process.npz") as z:
        q_in, cov_in, t_ref = z["thresholds"], float(z["coverage"]), float(z["seconds"])
    run_s = float(re.search(r"flwr run finished in ([0-9.]+) s", stdout).group(1))
    s = summ["seconds"]
    return dict(command="python studies/deploy_speed/run.py " + " ".join(sys.argv[1:]),
                deploy_command=" ".join(cmd[:-2]), K=a.K, rounds=summ["rounds"], isolation=a.isolation, train_kw=tk,
                schedule=a.schedule, full_rounds=full, transport="packed", waits=a.waits, note=note,
                **SIZES, load_before=load0, load_after=load1, nproc=os.cpu_count(),
                seconds=dict(wall=wall, **({} if cpu_all is None else dict(cpu_all_processes=cpu_all)), flwr_run=run_s,
                             in_process_reference=t_ref, start_up=wall - run_s - t_ref, server=s, per_round=s["training"] / summ["rounds"]),
                extrapolated_full=dict(training=full * s["training"] / summ["rounds"],
                                       end_to_end=(wall - t_ref) - s["training"] + full * s["training"] / summ["rounds"]),
                agents=agent_messages(keep) if a.isolation == "process" else None,
                thresholds_max_abs_diff=float(np.max(np.abs(q_dep - q_in))), tolerance=tol,
                tolerance_from=str(reference(a.schedule, a.K).relative_to(ROOT)),
                coverage=dict(deployment=summ["coverage"], in_process=cov_in), events=summ["events"], deploy_stdout=stdout)


def deploy_cmd(a, keep: Path, tol: float) -> list:
    return ["bash", "scripts/flower_deploy.sh", "--pipeline", "--agents", str(a.K), "--test-points", str(SIZES["n_test"]),
            "--train-points", str(SIZES["n_train"]), "--cal-points", str(SIZES["n_cal"]),
            "--train-kw", json.dumps(schedule_kw(a.rounds, a.schedule)), "--isolation", a.isolation, "--waits", a.waits,
            "--tolerance", repr(tol), "--keep", str(keep)]


def tolerance(a) -> float:
    return json.loads(reference(a.schedule, a.K).read_text())["thresholds_max_abs_diff"] if a.rounds > 5 else 1e-6


def schedule(a) -> dict:
    tol, keep = tolerance(a), Path(tempfile.mkdtemp()) / "deploy"
    cmd = deploy_cmd(a, keep, tol)
    load0, t0, r0 = os.getloadavg(), time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_all = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)   # every process of the deployment, reaped
    if p.returncode != 0:
        sys.exit(f"flower_deploy.sh failed ({p.returncode}; its directory is kept: {keep}, `collect` reads it):\n"
                 f"{p.stdout[-4000:]}\n{p.stderr[-4000:]}")
    return collect(a, keep, p.stdout, wall, cpu_all, load0, os.getloadavg(), cmd, tol)


def collect_kept(a) -> dict:
    """The JSON of a run whose script stopped on a check after the run (its `--keep` directory and its printed output):
    the wall from the directory's times (created at the start; pipeline.npz written at the end), no CPU of the processes."""
    keep, tol = Path(a.keep), tolerance(a)
    wall = (keep / "data" / "pipeline.npz").stat().st_mtime - keep.parent.stat().st_ctime
    return collect(a, keep, Path(a.stdout).read_text(), wall, None, None, None, deploy_cmd(a, keep, tol), tol, note=a.note)


def table(a) -> str:
    """The README's table: today's process per message (deploy_K11.json) next to resident agents (schedule_K*.json of at
    least 60 rounds; files without `waits` were run before the backoff, with Flower's 3-s poll)."""
    today = json.loads(TODAY.read_text())
    runs = sorted((r for f in HERE.glob("schedule_K*.json") if (r := json.loads(f.read_text()))["rounds"] >= 60),
                  key=lambda r: (-r["K"], r.get("waits", "flower") == "backoff", r["transport"] == "packed", r["rounds"]))
    imp = json.loads((HERE / "imports.json").read_text())["imports"]
    f = lambda x: f"{x:.1f}"
    hours = lambda x: f"{x:.0f} = {x / 3600:.1f} h"
    d = today["deployment_seconds"]
    head = ["| stage (gaussian, 50/100/500 points per agent) | today: K = 11, a process per message, 5 rounds (s) | "
            + " | ".join(f"resident agents, arrays {'packed' if r['transport'] == 'packed' else 'one object each'}, "
                         + ("waits as a backoff" if r.get("waits", "flower") == "backoff" else "Flower's 3-s poll")
                         + f": K = {r['K']}, {r['rounds']} rounds of {r['schedule']} (s)" for r in runs) + " |",
            "|---|---|" + "---|" * len(runs)]
    S = lambda key: [f(r["seconds"]["server"][key]) for r in runs]
    rows = [("start-up (certificates, keys, data, SuperLink, proxy, key registration, SuperNodes)", f(d["start_up"]),
             [f(r["seconds"]["start_up"]) for r in runs]),
            ("first message (`flwr run` until the server has every agent's counts)", f(d["server"]["connect"]), S("connect")),
            ("set-up (features, PCA)", f(d["server"]["setup"]), S("setup")),
            ("training", f(d["server"]["training"]), S("training")),
            ("per round", f(d["server"]["training"] / today["rounds"]), [f"{r['seconds']['per_round']:.2f}" for r in runs]),
            ("models to the agents", f(d["server"]["models"]), S("models")),
            ("calibration and prediction", f(d["server"]["calibration"]), S("calibration")),
            ("total wall (without the script's in-process reference)", f(d["wall"] - d["in_process_reference"]),
             [f(r["seconds"]["wall"] - r["seconds"]["in_process_reference"]) for r in runs]),
            ("the whole schedule end to end: 600 rounds (E10), 5000 (paper); measured if run whole, else extrapolated from "
             "the per-round cost",
             hours(d["wall"] - d["in_process_reference"] - d["server"]["training"] + 600 * d["server"]["training"] / today["rounds"]) + " (600, extrapolated)",
             [hours(r["extrapolated_full"]["end_to_end"]) + f" ({r['full_rounds']}" + ("" if r["rounds"] == r["full_rounds"] else ", extrapolated") + ")"
              for r in runs]),
            ("calibration, per exchange (test weights, summaries, PFWCP messages, prediction: 4 exchanges)",
             f(d["server"]["calibration"] / 4), [f(r["seconds"]["server"]["calibration"] / 4) for r in runs]),
            ("CPU of all the deployment's processes / wall: cores in use on average", "not measured",
             [f"{r['seconds']['cpu_all_processes'] / r['seconds']['wall']:.2f}" if "cpu_all_processes" in r["seconds"]
              else "not measured" for r in runs]),
            ("CPU per round, all processes (≈ that CPU × the training's share of the wall / rounds) / the agents' own "
             "(sum over agents of the mean training message)", "not measured",
             [(f"{r['seconds']['cpu_all_processes'] * r['seconds']['server']['training'] / r['seconds']['wall'] / r['rounds']:.1f}"
               if "cpu_all_processes" in r["seconds"] else "not measured")
              + f" / {r['K'] * r['agents']['later_train_cpu']['mean']:.1f}" for r in runs]),
            ("load average (1 min) before / after, 2 cores shared with other jobs", "heavily loaded (not recorded)",
             [f"{r['load_before'][0]:.1f} / {r['load_after'][0]:.1f}" if r["load_before"] else "not recorded" for r in runs]),
            ("an agent's CPU per message: median / 95 % / largest (the largest: its first training message, torch's "
             "first use)", f"{min(today['import_seconds']):.1f}-{max(today['import_seconds']):.1f} wall for the import alone",
             [f"{r['agents']['all_cpu']['median']:.2f} / {r['agents']['all_cpu']['p95']:.2f} / {r['agents']['all_cpu']['max']:.2f}"
              for r in runs]),
            ("thresholds vs in process: max abs diff", f"{today['deployment_thresholds_max_abs_diff']:.2g}",
             [f"{r['thresholds_max_abs_diff']:.2g} (tolerance {r['tolerance']:.2g})" for r in runs]),
            ("coverage deployment / in process", f"{today['coverage']['deployment']:.3f} / {today['coverage']['in_process']:.3f}",
             [f"{r['coverage']['deployment']:.3f} / {r['coverage']['in_process']:.3f}" for r in runs])]
    out = head + [f"| {a_} | {b} | " + " | ".join(c) + " |" for a_, b, c in rows]
    out += ["", "A fresh interpreter's import, wall / CPU seconds (least of " + str(len(imp["pfwcp_nb.federation.deploy"]))
            + " tries; `python studies/deploy_speed/run.py imports`): "
            + "; ".join(f"`{m}` {min(x['wall'] for x in xs):.2f} / {min(x['cpu'] for x in xs):.2f} (Ray or flwr.simulation "
                        f"imported: {'yes' if xs[0]['ray'] or xs[0]['flwr_simulation'] else 'no'})" for m, xs in imp.items())
            + ". With a process per message (today) each SuperNode pays the first for every message; a resident agent pays "
              "the second once."]
    return "\n".join(out) + "\n"


def summary() -> str:
    "The README's short table: every schedule run whole on the deployment, next to the targets and the process per message."
    today = json.loads(TODAY.read_text())
    d = today["deployment_seconds"]
    whole = sorted((r for f in HERE.glob("schedule_K*.json") if (r := json.loads(f.read_text()))["rounds"] == r["full_rounds"]),
                   key=lambda r: -r["K"])
    target = {600: "1 h", 5000: "3 h"}
    sim = lambda r: json.loads(reference(r["schedule"], r["K"]).read_text())["coverage_flower"]   # same schedule and K
    today_h = (d["wall"] - d["in_process_reference"] - d["server"]["training"] + 600 * d["server"]["training"] / today["rounds"]) / 3600
    out = ["| schedule on the deployment (gaussian, resident agents, packed, waits as a backoff) | end to end | target | "
           "per round | calibration, per exchange | an agent's CPU per message (median) | thresholds vs in process "
           "(max diff / tolerance: the simulation's drift) | coverage: deployment / in process / Flower's simulation |",
           "|---|---|---|---|---|---|---|---|"]
    for r in whole:
        s_ = r["seconds"]
        out.append(f"| {r['full_rounds']} rounds of {r['schedule']} at K = {r['K']} | "
                   f"{(s_['wall'] - s_['in_process_reference']) / 3600:.2f} h (measured) | {target[r['full_rounds']]} | "
                   f"{s_['per_round']:.2f} s | {s_['server']['calibration'] / 4:.2f} s | {r['agents']['all_cpu']['median']:.2f} s | "
                   f"{r['thresholds_max_abs_diff']:.2g} / {r['tolerance']:.2g} | {r['coverage']['deployment']:.3f} / "
                   f"{r['coverage']['in_process']:.3f} / {sim(r):.3f} |")
    out.append(f"| before resident agents: 600 rounds of E10 at K = 11, a process per message | {today_h:.1f} h "
               f"(extrapolated from {today['rounds']} rounds) | 1 h | {d['server']['training'] / today['rounds']:.1f} s | "
               f"{d['server']['calibration'] / 4:.1f} s | the import alone: {min(today['import_seconds']):.1f} s or more | | |")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    i = sub.add_parser("imports"); i.add_argument("--repeat", type=int, default=3); i.add_argument("--out", default=str(HERE / "imports.json"))
    s = sub.add_parser("schedule")
    s.add_argument("--K", type=int, default=11); s.add_argument("--rounds", type=int, default=20)
    s.add_argument("--schedule", choices=sorted(FULL_ROUNDS), default="E10")
    s.add_argument("--isolation", choices=["process", "subprocess"], default="process"); s.add_argument("--out", default="")
    s.add_argument("--waits", choices=["backoff", "flower"], default="backoff",
                   help="the SuperNodes' waits between pulls (scripts/flower_deploy.sh --waits)")
    c = sub.add_parser("collect", help="the JSON of a kept run whose script stopped on a check after the run")
    c.add_argument("--keep", required=True); c.add_argument("--stdout", required=True); c.add_argument("--note", default="")
    c.add_argument("--K", type=int, default=11); c.add_argument("--rounds", type=int, default=20)
    c.add_argument("--schedule", choices=sorted(FULL_ROUNDS), default="E10")
    c.add_argument("--isolation", choices=["process", "subprocess"], default="process"); c.add_argument("--out", default="")
    c.add_argument("--waits", choices=["backoff", "flower"], default="backoff")
    t = sub.add_parser("table"); t.add_argument("--out", default=str(HERE / "table.md"))
    a = ap.parse_args(argv)
    if a.what in ("schedule", "collect") and not (a.K >= 2 and 1 <= a.rounds <= FULL_ROUNDS[a.schedule]):
        ap.error(f"--K must be >= 2 and --rounds in 1..{FULL_ROUNDS[a.schedule]} for --schedule {a.schedule}, got {a.K}, {a.rounds}")
    if a.what == "table":
        text = table(a); Path(a.out).write_text(text); print(text, end="")
        Path(a.out).with_name("summary.md").write_text(summary()); return 0
    if a.what == "collect" and not (Path(a.keep, "data", "pipeline.npz").is_file() and Path(a.stdout).is_file()):
        ap.error(f"--keep {a.keep!r} must be a kept deployment directory with data/pipeline.npz and --stdout {a.stdout!r} a file")
    res = imports(a) if a.what == "imports" else schedule(a) if a.what == "schedule" else collect_kept(a)
    out = Path(a.out or HERE / (f"schedule_K{a.K}_{a.schedule}_{a.rounds}_packed{'' if a.isolation == 'process' else '_subprocess'}"
                                f"{'_backoff' if a.waits == 'backoff' else ''}.json"))
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps({k: v for k, v in res.items() if k != "deploy_stdout"}, indent=1)[:3000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
