"""More covariates per agent, better density ratios: the paper's pairwise ratio classifiers (`fit_density_ratios`,
hparams="paper") on the severe federation of a synthetic dataset (K = 11), fitted on n ratio covariates per agent and
compared with the oracle ratios on 100 fresh calibration points per agent (`ratio_quality`: Spearman, centred
log-ratio RMSE, n_eff ratio). Settings: (n, standardize, crossfit, batch_size) in SETTINGS (batch_size None: the
default, one full-batch local step per round; 200: the old default's minibatches, 5 local steps a round at n = 1000,
whose client drift flattens the ratios); one row per seed, setting and agent.

Usage: python studies/ratios/ratio_size.py OUT.csv DATASET SEEDS [SIZES]
  e.g. python studies/ratios/ratio_size.py results/ratios/ratio_size.csv gaussian 0,1,2
  SIZES (default 50,200,1000) keeps the settings whose n is listed."""
import sys
import time
import warnings

import numpy as np
import pandas as pd

from pfwcp_nb.data import make_federation
from pfwcp_nb.density_ratio import oracle_density_ratios, ratio_quality
from pfwcp_nb.ratio_diagnostics import RatioWarning
from pfwcp_nb.ratio_fit import fit_density_ratios

SETTINGS = [(50, False, 1, None), (50, True, 1, None), (200, True, 1, None), (1000, True, 1, None), (1000, True, 1, 200),
            (50, True, 5, None), (200, True, 5, None)]


def rows(dataset: str, seed: int, sizes) -> list[dict]:
    fed = make_federation(dataset, "severe", K=11, seed=seed)
    oracle = oracle_density_ratios(fed)
    rng = np.random.default_rng([seed, 1])
    cal = [fed.sample(k, 100, rng)[0] for k in range(11)]
    pool = [fed.sample(k, max(sizes), rng)[0] for k in range(11)]        # the first n rows: n ratio covariates per agent
    out = []
    for n, std, cf, bs in SETTINGS:
        if n not in sizes: continue
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RatioWarning)
            est = fit_density_ratios([P[:n] for P in pool], seed=seed, standardize=std, crossfit=cf, batch_size=bs,
                                     progress=False)
        q = ratio_quality(est, oracle, cal)
        out += q.assign(dataset=dataset, seed=seed, n_ratio=n, standardize=std, crossfit=cf, batch="full" if bs is None else str(bs),
                        seconds=time.perf_counter() - t0).to_dict("records")
    return out


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__.strip()); sys.exit(0)
    if len(sys.argv) not in (4, 5):
        print(__doc__.splitlines()[-3], file=sys.stderr); sys.exit(2)
    sizes = [int(s) for s in sys.argv[4].split(",")] if len(sys.argv) == 5 else [50, 200, 1000]
    res = pd.DataFrame([r for s in sys.argv[3].split(",") for r in rows(sys.argv[2], int(s), sizes)])
    res.to_csv(sys.argv[1], index=False)
    per_seed = res.groupby(["n_ratio", "standardize", "crossfit", "batch", "seed"])[["spearman", "log_rmse", "n_eff_ratio", "seconds"]].median()
    print(per_seed.groupby(["n_ratio", "standardize", "crossfit", "batch"]).mean().round(3).to_string())
