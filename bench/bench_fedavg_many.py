"""Benchmark of `fedavg_many` (all federations in one vectorised stack) against a loop of `fedavg` (one vectorised
call per federation) and a loop of `fedavg_loop` (the plain reference: one torch.optim.Adam per client).

    python bench/bench_fedavg_many.py [--federations 120] [--epochs 200] [--n 50] [--d 10] [--hidden 10]

The job is that of the density-ratio classifiers of `06_density_ratio`: G federations of two clients (agent 1, label 1,
and agent k, label 0; n points each), a network with one hidden layer, binary cross-entropy, full batches (200),
FedAvg of local Adam. The calibrated ratios (`hparams="calibrated"`) train 4 weight decays x 3 folds x 10 pairs = 120
such federations in one stack, hence the default G. All three start from the same module and see full batches, so
they must return the same networks up to rounding (the largest parameter difference is printed). Prints wall-clock
and CPU seconds (`time.process_time`, run with OMP_NUM_THREADS=1) and the ratios to `fedavg_many`; the load average
is printed because the machine is shared. No assertion: this prints numbers.
"""
import argparse
import os
import sys
import time

import numpy as np
import torch

from pfwcp_nb.federated import fedavg, fedavg_loop, fedavg_many, make_mlp


def max_diff(a, b):
    with torch.no_grad():
        return max(float((p - q).abs().max()) for p, q in zip(a.parameters(), b.parameters()))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--federations", type=int, default=120)
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--n", type=int, default=50, help="points per client")
    ap.add_argument("--d", type=int, default=10, help="covariates")
    ap.add_argument("--hidden", type=int, default=10, help="hidden units")
    a = ap.parse_args(argv)
    if min(a.federations, a.epochs, a.n, a.d, a.hidden) < 1:
        ap.error("--federations, --epochs, --n, --d and --hidden must be >= 1")
    rng = np.random.default_rng(0)
    X1 = rng.normal(size=(a.n, a.d))
    feds = [[(X1, np.ones(a.n)), (rng.normal(0.3, 1.0, size=(a.n, a.d)), np.zeros(a.n))] for _ in range(a.federations)]
    torch.manual_seed(0)
    net = make_mlp(a.d, (a.hidden,), 1, "relu")
    kw = dict(loss="bce", epochs=a.epochs, batch_size=200, lr=1e-3, weight_decay=1e-4)
    fedavg_many(net, feds[:2], loss="bce", epochs=2, batch_size=200, progress=False)      # warm-up
    print(f"{a.federations} federations x 2 clients x {a.n} points, d={a.d}, hidden={a.hidden}, {a.epochs} epochs; "
          f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), load average {os.getloadavg()[0]:.2f}")
    runs = {}
    for name, fn in [("fedavg_many", lambda: fedavg_many(net, feds, progress=False, **kw)[0]),
                     ("loop of fedavg", lambda: [fedavg(net, f, progress=False, **kw)[0] for f in feds]),
                     ("loop of fedavg_loop", lambda: [fedavg_loop(net, f, **kw) for f in feds])]:
        t0, c0 = time.perf_counter(), time.process_time()
        models = fn()
        runs[name] = (models, time.perf_counter() - t0, time.process_time() - c0)
    _, base_wall, base_cpu = runs["fedavg_many"]
    for name, (models, wall, cpu) in runs.items():
        diff = max(max_diff(m, r) for m, r in zip(models, runs["loop of fedavg_loop"][0]))
        print(f"{name:20s} wall {wall:8.2f} s ({wall / base_wall:5.1f}x)   CPU {cpu:8.2f} s ({cpu / base_cpu:5.1f}x)   "
              f"max |param - fedavg_loop's| {diff:.1e}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
