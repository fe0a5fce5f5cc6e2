#!/usr/bin/env python
"""What fewer, longer rounds change: the gaussian pipeline in process with the predictor trained by FedAvg at
E local epochs per round (5000 / E rounds), E = 1 (the default, 5000 rounds) against larger E.

usage: python studies/flower_pipeline/flower_pipeline_schedule.py [--local-epochs 1 10 50] [--seeds 3] [--n-sims 50]
                                                  [--out results/flower_pipeline/local_epochs.json]
Per seed and E: `train_setup` (need_localizer=False), then `n_sims` calibration draws of `sample_draw` with PFWCP
(MC, alpha 0.1): mean coverage, median interval length and the share of infinite intervals."""
import argparse, json, sys, time, warnings
from pathlib import Path

import numpy as np

from pfwcp_nb.data import make_federation
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration
from pfwcp_nb.pipeline import sample_draw, train_setup


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="gaussian")
    ap.add_argument("--local-epochs", type=int, nargs="+", default=[1, 10, 50])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--n-sims", type=int, default=50)
    ap.add_argument("--out", default="results/flower_pipeline/local_epochs.json")
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    rows = []
    for seed in range(a.seeds):
        fed = make_federation(a.dataset, "severe", seed=seed)
        for E in a.local_epochs:
            t0 = time.perf_counter()
            st = train_setup(a.dataset, seed=seed, train_kw={"predictor": {"local_epochs": E}}, need_localizer=False,
                             progress=False)
            secs = time.perf_counter() - t0
            cov, width, inf = [], [], []
            for sim in range(a.n_sims):
                dr = sample_draw(st, fed, sim, localize=False)["estimated"]
                q = PFWCP(0.1).calibrate([AgentCalibration(s, w) for s, w in zip(dr.cal_scores, dr.cal_weights)]).threshold(dr.test_weights)
                cov.append(float(np.mean(dr.test_scores <= q))); width.append(float(np.median(2 * q)))
                inf.append(float(np.mean(np.isinf(q))))
            rows.append(dict(seed=seed, local_epochs=E, rounds=5000 // E, train_seconds=secs,
                             coverage=float(np.mean(cov)), coverage_se=float(np.std(cov) / np.sqrt(len(cov))),
                             median_length=float(np.mean(width)), median_length_se=float(np.std(width) / np.sqrt(len(width))),
                             infinite_share=float(np.mean(inf))))
            print(json.dumps(rows[-1]), flush=True)
    out = dict(command="python studies/flower_pipeline/flower_pipeline_schedule.py " + " ".join(sys.argv[1:] if argv is None else argv),
               machine="2 shared cores (other jobs running)", rows=rows)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
