"""Which scale should the ratio classifiers see? The paper's pairwise ratio classifiers (`fit_density_ratios`,
hparams="paper": 600 epochs, L2 1e-4) are not invariant to the scale of their features. On the severe federation of
each dataset (K = 11, the pipeline's training split of 50 points per agent, seed SEEDS), the same classifiers fitted on
the dataset's features (the paper's: min-max scaled to [0, 1] for the real data, N(mu_k, I) for the synthetic) and on
the features mapped affinely per column, from their pooled mean m_j and s.d. s_j (what one summary round of per-agent
sums gives), to mean `loc` and s.d. `sd`:  x_j -> loc + sd (x_j - m_j) / s_j; "standardize=True" is the library's
default (`fit_density_ratios(standardize=True)`: loc 1/2, sd 1/sqrt(12), the moments of a feature uniform on [0, 1]).  Quality against the oracle ratios on 100
fresh calibration points per agent (`ratio_quality`: Spearman, log-ratio RMSE, n_eff ratio), median over agents.

Usage: python studies/ratios/ratio_scale.py OUT.csv DATASETS SEEDS
  e.g. python studies/ratios/ratio_scale.py results/ratios/ratio_scale.csv gaussian,poisson,airfoil,bike 0"""
import sys
import time
import warnings

import numpy as np
import pandas as pd

from pfwcp_nb.data import make_federation
from pfwcp_nb.density_ratio import DensityRatio, oracle_density_ratios, ratio_quality
from pfwcp_nb.models import training_seed, training_split
from pfwcp_nb.ratio_diagnostics import RatioWarning
from pfwcp_nb.ratio_fit import fit_density_ratios

VARIANTS = {"paper": None, "standardize=True": "default", "loc0_sd1": (0.0, 1.0), "loc0_sd0.29": (0.0, 0.29),
            "loc0_sd0.5": (0.0, 0.5)}     # 0.29: about the s.d. of a uniform feature on [0, 1]


def rows(dataset: str, seed: int) -> list[dict]:
    fed = make_federation(dataset, "severe", K=11, seed=seed)
    X, _, _ = training_split(fed, 50, seed)
    oracle, rng = oracle_density_ratios(fed), np.random.default_rng([seed, 29])
    cal = [fed.sample(k, 100, rng) for k in range(11)]
    P = np.concatenate(X)
    m, s = P.mean(0), P.std(0)
    s = np.where(s > 0, s, 1.0)
    out = []
    for name, v in VARIANTS.items():
        f = (lambda Z: Z) if v in (None, "default") else (lambda Z, v=v: v[0] + v[1] * (Z - m) / s)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RatioWarning)
            r = fit_density_ratios([f(x) for x in X], seed=training_seed(seed, 0), dataset=dataset,
                                   standardize=v == "default", progress=False)
        est = [DensityRatio(lambda Z, info, rr=rr: rr.log(f(Z)), rr.name, None) for rr in r]   # on the original scale
        q = ratio_quality(est, oracle, [c[0] for c in cal])
        out += q.assign(dataset=dataset, seed=seed, variant=name, seconds=time.perf_counter() - t0).to_dict("records")
    return out


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__.strip()); sys.exit(0)
    if len(sys.argv) != 4:
        print(__doc__.splitlines()[-2], file=sys.stderr); sys.exit(2)
    res = pd.DataFrame([r for ds in sys.argv[2].split(",") for s in sys.argv[3].split(",") for r in rows(ds, int(s))])
    res.to_csv(sys.argv[1], index=False)
    tab = res.groupby(["dataset", "variant", "seed"])[["spearman", "log_rmse", "n_eff_ratio"]].median()
    print(tab.groupby(["dataset", "variant"]).mean().round(3).to_string())
