"""Training on the CPU vs on a CUDA GPU (`device=`): one predictor and one set of density-ratio classifiers.

    python bench/bench_device.py [--epochs 5000] [--ratio-methods pairwise,one_vs_rest] [--cpu-threads 1]

The paper's severe Gaussian federation (K = 11, d = 10, 50 training points per agent). Trained on each device:
1. the synthetic-data predictor (2 x 30 LeakyReLU, Adam, batch 32) for --epochs epochs (the paper's 5000);
2. the density-ratio classifiers of each method in --ratio-methods at the paper's budget (600 epochs), with
   hparams="calibrated" (the default: (grid x folds + 1) trainings in one stack) and hparams="paper".
Printed per model: wall seconds on cpu and cuda, their ratio, and the largest absolute difference of the outputs
(predictions, log-ratios on 1000 fresh points). Without CUDA only the CPU times are printed. No assertion.
"""
import argparse
import sys

import numpy as np
import torch

from _util import timed

from pfwcp_nb.ratio_fit import fit_density_ratios
from pfwcp_nb.models import train_predictor
from pfwcp_nb.data import make_federation


def gaussian_federation(seed: int = 0, K: int = 11, n: int = 50):
    "Severe Gaussian shift of the paper's S3: training sets (X, y = sum x) of K agents and 1000 query points of agent 1."
    rng = np.random.default_rng(seed)
    M = make_federation("gaussian", "severe", K=K, seed=rng).shift["means"]   # (K, d = 10)
    d = M.shape[1]
    X = [rng.normal(M[k], 1.0, size=(n, d)) for k in range(K)]
    return X, [x.sum(1) for x in X], rng.normal(M[0], 1.0, size=(1000, d))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=5000, help="predictor epochs (the paper's 5000)")
    p.add_argument("--ratio-methods", default="pairwise,one_vs_rest", help="comma-separated ratio estimators")
    p.add_argument("--cpu-threads", type=int, default=1, help="torch threads of the CPU runs (the package's default 1)")
    a = p.parse_args(argv)
    X, y, Xq = gaussian_federation()
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    print(f"devices: {devices}" + (f" ({torch.cuda.get_device_name(0)})" if len(devices) > 1 else " (no CUDA: CPU only)"))
    jobs = [(f"predictor ({a.epochs} epochs)", lambda dev: train_predictor(
        "gaussian", X, y, epochs=a.epochs, seed=0, progress=False, device=dev,
        num_threads=a.cpu_threads if dev == "cpu" else None).predict(Xq))]
    for m in a.ratio_methods.split(","):
        for hp in ("calibrated", "paper"):
            jobs.append((f"ratios {m} ({hp})", lambda dev, m=m, hp=hp: np.stack([r.log(Xq) for r in fit_density_ratios(
                X, m, seed=0, hparams=hp, progress=False, device=dev,
                num_threads=a.cpu_threads if dev == "cpu" else None)[1:]])))
    if len(devices) > 1:     # warm up CUDA (context, kernels) outside the timings
        train_predictor("gaussian", X, y, epochs=2, progress=False, device="cuda")
    print(f"{'model':34s} {'cpu s':>8s} {'cuda s':>8s} {'cpu/cuda':>9s} {'max |diff|':>11s}")
    for name, job in jobs:
        out = {dev: timed(lambda: job(dev)) for dev in devices}
        t_cpu = out["cpu"][1]
        if "cuda" in out:
            t_gpu, diff = out["cuda"][1], float(np.max(np.abs(out["cuda"][0] - out["cpu"][0])))
            print(f"{name:34s} {t_cpu:8.1f} {t_gpu:8.1f} {t_cpu / t_gpu:9.2f} {diff:11.2e}", flush=True)
        else:
            print(f"{name:34s} {t_cpu:8.1f} {'-':>8s} {'-':>9s} {'-':>11s}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
