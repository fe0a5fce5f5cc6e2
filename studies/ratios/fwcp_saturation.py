"""FWCP's single-classifier weights on a severe federation, hparams "paper" vs "calibrated": n_eff of the weights on the
pooled calibration sample (as FWCP uses them), the share of weights at the clipping bound, the largest weight's share,
Spearman with the oracle omega' (tilting: exp(x'(zeta^1 - zeta^k)) mixed over k >= 2).

Usage: python studies/ratios/fwcp_saturation.py OUT.csv DATASET SEED[,SEED...]"""
import sys

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from pfwcp_nb.baselines import oracle_fwcp_weights
from pfwcp_nb.density_ratio import DEFAULT_EPS
from pfwcp_nb.ratio_fwcp import fit_fwcp_ratio
from pfwcp_nb.quantiles import effective_sample_size

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from ratio_calibration import federation_data  # noqa: E402


def main(argv):
    if len(argv) != 3:
        print(__doc__.splitlines()[-1], file=sys.stderr)
        return 2
    out, name, seeds = argv[0], argv[1], [int(s) for s in argv[2].split(",")]
    L = np.log1p(-DEFAULT_EPS) - np.log(DEFAULT_EPS)
    rows = []
    for seed in seeds:
        fed, train, cal, _ = federation_data(name, seed)
        Xc = np.concatenate(cal)
        lo = np.log(oracle_fwcp_weights(fed, Xc))       # log omega' = log p^1 - log mean_{k>=2} p^k
        for hp in ("paper", "calibrated"):
            r = fit_fwcp_ratio(train, seed=seed, hparams=hp, dataset=name, standardize=False)
            lw = r.log(Xc)
            w = np.exp(lw - lw.max())
            row = dict(dataset=name, seed=seed, hparams=hp, alpha=r.hparams["alpha"], temperature=r.hparams["temperature"],
                       n_pooled=len(Xc), n_eff=effective_sample_size(w), n_eff_oracle=effective_sample_size(np.exp(lo - lo.max())),
                       share_clipped=float(np.mean(np.abs(lw) >= L * (1 - 1e-9))), max_weight_share=float(w.max() / w.sum()),
                       spearman_oracle=spearmanr(lw, lo)[0], n_iter=r.classifier.n_iter_, train_loss=r.classifier.loss_)
            rows.append(row)
            print(row, flush=True)
            pd.DataFrame(rows).to_csv(out, index=False)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__.strip()); sys.exit(0)
    sys.exit(main(sys.argv[1:]))
