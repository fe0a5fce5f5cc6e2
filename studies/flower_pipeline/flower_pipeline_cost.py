#!/usr/bin/env python
"""Wall time and agreement of the whole pipeline over Flower's simulation engine next to the in-process pipeline.

usage: python studies/flower_pipeline/flower_pipeline_cost.py [--dataset gaussian] [--K 11] [--pred-epochs 5000] [--local-epochs 1]
                                              [--out results/flower_pipeline/gaussian.json]
Same data, seeds and defaults on both paths (`train_setup` + `sample_draw` + `PFWCP` in process;
`flower_pipeline.simulate_pipeline` over Flower); prints and writes the timings and the differences."""
import argparse, json, sys, tempfile, time, warnings
from pathlib import Path

import numpy as np

from pfwcp_nb.data import make_federation
from pfwcp_nb.federation.simulation import simulate_pipeline
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration
from pfwcp_nb.pipeline import sample_draw, train_setup


def max_diff(a, b):
    return max(float((p - q).abs().max()) for (_, p), (_, q) in zip(a.named_parameters(), b.named_parameters()))


def client_timer(path):
    "A client mod appending the seconds each ClientApp call takes (the agents' local work) to `path`."
    def mod(msg, context, call_next):
        t0 = time.perf_counter()
        reply = call_next(msg, context)
        with open(path, "a") as f:
            f.write(f"{msg.metadata.message_type} {time.perf_counter() - t0}\n")
        return reply
    return mod


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="gaussian")
    ap.add_argument("--K", type=int, default=11)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pred-epochs", type=int, default=5000)
    ap.add_argument("--local-epochs", type=int, default=1)
    ap.add_argument("--n-test", type=int, default=500)
    ap.add_argument("--node-timeout", type=float, default=600.0, help="seconds for Ray's start-up and the first round")
    ap.add_argument("--out", default="results/flower_pipeline/gaussian.json")
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    tk = {"predictor": {"epochs": a.pred_epochs, "local_epochs": a.local_epochs}}
    t0 = time.perf_counter()
    st = train_setup(a.dataset, seed=a.seed, K=a.K, train_kw=tk, need_localizer=False, progress=False)
    t_in = time.perf_counter() - t0
    fed = make_federation(a.dataset, "severe", K=a.K, seed=a.seed)
    dr = sample_draw(st, fed, 0, n_test=a.n_test, localize=False)["estimated"]
    q_in = PFWCP(0.1).calibrate([AgentCalibration(s, w) for s, w in zip(dr.cal_scores, dr.cal_weights)]).threshold(dr.test_weights)
    timer = Path(tempfile.mkdtemp()) / "client_seconds.txt"
    t0 = time.perf_counter()
    res = simulate_pipeline(a.dataset, K=a.K, seed=a.seed, n_test=a.n_test, train_kw=tk, client_mods=[client_timer(str(timer))],
                            node_timeout=a.node_timeout)
    t_fl = time.perf_counter() - t0
    calls = [line.split() for line in timer.read_text().splitlines()]
    client = {}
    for kind, sec in calls:
        client[kind] = client.get(kind, 0.0) + float(sec)
    out = dict(
        command="python studies/flower_pipeline/flower_pipeline_cost.py " + " ".join(sys.argv[1:] if argv is None else argv),
        dataset=a.dataset, K=a.K, seed=a.seed, pred_epochs=a.pred_epochs, local_epochs=a.local_epochs,
        rounds=res.rounds, machine="2 shared cores (other jobs running)",
        in_process_seconds=dict(wall=t_in, **{k: float(v) for k, v in st.seconds.items()}),
        flower_seconds=dict(wall=t_fl, **{k: float(v) for k, v in res.seconds.items()}),
        seconds_per_round=res.seconds["training"] / res.rounds,
        client_app_seconds=client,   # summed over all ClientApp calls (agents), by message type
        client_train_seconds_per_round=client.get("train", 0.0) / res.rounds,
        predictor_max_abs_diff=max_diff(res.predictor.model, st.predictor.model),
        ratio_max_abs_diff=max(max_diff(n, st.ratios[g + 1].nets[g]) for g, n in enumerate(res.ratio_nets)),
        thresholds_max_abs_diff=float(np.max(np.abs(res.thresholds - q_in))),
        thresholds_equal=bool(np.array_equal(res.thresholds, q_in)),
        coverage_flower=res.coverage, coverage_in_process=float(np.mean(dr.test_scores <= q_in)),
        mean_threshold=float(np.mean(q_in)), events=res.events)
    print(json.dumps(out, indent=1))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
