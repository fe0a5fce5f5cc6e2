"""The label-free diagnostics of fitted density ratios (`ratio_diagnostics`, notebook 06a_ratio_diagnostics) on the
paper's federations: per dataset, heterogeneity and seed, the K-1 pairwise ratios fitted as the paper fits them
(the pipeline's training split, n_train points per agent, standardize=False) and with standardised features, evaluated
at each agent's own training covariates: the share of log-weights at the clip and n_eff / n_k; and their quality against
the oracle ratios on 100 fresh calibration points per agent (`ratio_quality`: Spearman, log-ratio RMSE). It sets the
warning thresholds (CLIP_SHARE_WARN, N_EFF_SHARE_WARN) beyond what the paper's fits show, and measures whether
standardised features (the default) fit the paper's federations as well as the paper's own features.

Usage: python studies/ratios/ratio_diagnostics_paper.py OUT.csv DATASETS SEEDS [HETEROGENEITIES]
  e.g. python studies/ratios/ratio_diagnostics_paper.py results/ratios/diagnostics_paper.csv gaussian,poisson 0,1 severe"""
import sys
import time
import warnings

import numpy as np
import pandas as pd

from pfwcp_nb.data import make_federation
from pfwcp_nb.density_ratio import oracle_density_ratios, ratio_quality
from pfwcp_nb.models import training_seed, training_split
from pfwcp_nb.ratio_diagnostics import RatioWarning, ratio_diagnostics
from pfwcp_nb.ratio_fit import fit_density_ratios


def rows(dataset: str, heterogeneity: str, seed: int, n_train: int = 50) -> list[dict]:
    fed = make_federation(dataset, heterogeneity, K=11, seed=seed)
    X, _, _ = training_split(fed, n_train, seed)
    oracle, rng = oracle_density_ratios(fed), np.random.default_rng([seed, 29])
    cal = [fed.sample(k, 100, rng, return_info=True) for k in range(fed.K)]
    out = []
    for std in (False, True):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RatioWarning)
            r = fit_density_ratios(X, seed=training_seed(seed, 0), dataset=fed.name, standardize=std, progress=False)
        d = ratio_diagnostics(r, X).merge(ratio_quality(r, oracle, [c[0] for c in cal], [c[2] for c in cal]), on="agent")
        d = d[d.agent > 1].assign(dataset=dataset, heterogeneity=heterogeneity, seed=seed, standardize=std,
                                  seconds=time.perf_counter() - t0)
        out += d.drop(columns="log_bound").to_dict("records")
    return out


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__.strip()); sys.exit(0)
    if len(sys.argv) not in (4, 5):
        print(__doc__.splitlines()[-2], file=sys.stderr); sys.exit(2)
    out, datasets, seeds = sys.argv[1], sys.argv[2].split(","), [int(s) for s in sys.argv[3].split(",")]
    hets = sys.argv[4].split(",") if len(sys.argv) == 5 else ["severe"]
    res = pd.DataFrame([r for ds in datasets for h in hets for s in seeds for r in rows(ds, h, s)])
    res.to_csv(out, index=False)
    summ = res.groupby(["dataset", "heterogeneity", "standardize"]).agg(
        clip_share_max=("clip_share", "max"), n_eff_share_min=("n_eff_share", "min"),
        n_eff_share_median=("n_eff_share", "median"), spearman=("spearman", "median"), log_rmse=("log_rmse", "median"))
    print(summ.round(3).to_string())
