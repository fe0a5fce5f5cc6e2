"""Estimated vs oracle density ratios, hparams "paper" vs "calibrated", on severe federations (K=11, 50 training and
100 calibration points per agent): per agent n_eff ratio, Spearman, centred log-ratio RMSE (`ratio_quality`).

Usage: python studies/ratios/ratio_calibration.py OUT.csv DATASET[,DATASET...] SEED[,SEED...] [METHOD[,METHOD...]]"""
import sys
import time

import numpy as np
import pandas as pd

from pfwcp_nb.data import make_federation
from pfwcp_nb.density_ratio import RATIO_METHODS, oracle_density_ratios, ratio_quality
from pfwcp_nb.ratio_fit import fit_density_ratios


def federation_data(name: str, seed: int, n_train: int = 50, n_cal: int = 100):
    "The severe federation of `seed`, its training covariates and calibration covariates (+ info) per agent."
    fed = make_federation(name, "severe", seed=seed)
    rt, rc = np.random.default_rng([seed, 0]), np.random.default_rng([seed, 1])
    train = [fed.sample(k, n_train, rt)[0] for k in range(fed.K)]
    cal = [fed.sample(k, n_cal, rc, return_info=True) for k in range(fed.K)]
    return fed, train, [c[0] for c in cal], [c[2] for c in cal]


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__.splitlines()[-1], file=sys.stderr)
        return 2
    out, names, seeds = argv[0], argv[1].split(","), [int(s) for s in argv[2].split(",")]
    methods = argv[3].split(",") if len(argv) == 4 else list(RATIO_METHODS)
    rows = []
    for name in names:
        for seed in seeds:
            fed, train, cal, info = federation_data(name, seed)
            oracle = oracle_density_ratios(fed)
            for method in methods:
                for hp in ("paper", "calibrated"):
                    t0 = time.perf_counter()
                    est = fit_density_ratios(train, method, seed=seed, hparams=hp, dataset=name, standardize=False,
                                             progress=False)
                    q = ratio_quality(est, oracle, cal, info)
                    q = q.assign(dataset=name, seed=seed, method=method, hparams=hp,
                                 weight_decay=est[1].hparams["weight_decay"], temperature=est[1].hparams["temperature"],
                                 seconds=time.perf_counter() - t0)
                    rows.append(q)
                    print(f"{name} seed {seed} {method:11s} {hp:10s} wd {q.weight_decay[0]:g} T {q.temperature[0]:.2f}: "
                          f"median n_eff ratio {q.n_eff_ratio.median():.2f}, Spearman {q.spearman.median():.3f}, "
                          f"log RMSE {q.log_rmse.median():.3f} ({q.seconds[0]:.0f} s)", flush=True)
                    pd.concat(rows).to_csv(out, index=False)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__.strip()); sys.exit(0)
    sys.exit(main(sys.argv[1:]))
