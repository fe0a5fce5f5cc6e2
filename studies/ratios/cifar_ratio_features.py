"""How much of the brightness severity the ratio features can see on cifar10c (severe): calibrated pairwise ratios
on three feature sets, against the severity oracle (median over agents of the n_eff ratio and Spearman):
(a) the 11 `image_statistics`; (b) three of them (mean, min, 1 % quantile of V); (c) the latent severity itself,
one-hot (an upper bound: what the classifier reaches when the severity is observed). Also the Spearman correlation of
each image statistic with the severity on 2000 images of agent 4.

Usage: python studies/ratios/cifar_ratio_features.py SEED[,SEED...]"""
import sys

import numpy as np
from scipy.stats import spearmanr

from pfwcp_nb.density_ratio import image_statistics, oracle_density_ratios
from pfwcp_nb.ratio_fit import fit_density_ratios
from pfwcp_nb.quantiles import effective_sample_size

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from ratio_calibration import federation_data  # noqa: E402

NAMES = ["mean V", "sd V", "min V", "q01 V", "q10 V", "q50 V", "q90 V", "saturated", "mean R", "mean G", "mean B"]


def main(argv):
    if len(argv) != 1:
        print(__doc__.splitlines()[-1], file=sys.stderr)
        return 2
    for seed in [int(s) for s in argv[0].split(",")]:
        fed, tr, ca, info = federation_data("cifar10c", seed)
        if seed == int(argv[0].split(",")[0]):
            X, _, inf = fed.sample(3, 2000, np.random.default_rng([seed, 9]), return_info=True)
            S = image_statistics(X)
            print("Spearman with severity, 2000 images of agent 4:",
                  ", ".join(f"{n} {spearmanr(S[:, j], inf['severity'])[0]:.3f}" for j, n in enumerate(NAMES)), flush=True)
        rt = np.random.default_rng([seed, 0])          # replays the training draw of `federation_data`
        sev_tr = [fed.sample(k, 50, rt, return_info=True)[2]["severity"] for k in range(fed.K)]
        oracle = oracle_density_ratios(fed)
        st_tr, st_ca = [image_statistics(x) for x in tr], [image_statistics(x) for x in ca]
        mu, sd = np.concatenate(st_tr).mean(0), np.concatenate(st_tr).std(0)
        sets = {"11 image statistics": ([(s - mu) / sd for s in st_tr], [(s - mu) / sd for s in st_ca]),
                "mean, min, q01 of V": ([((s - mu) / sd)[:, [0, 2, 3]] for s in st_tr], [((s - mu) / sd)[:, [0, 2, 3]] for s in st_ca]),
                "severity one-hot (bound)": ([np.eye(5)[s] for s in sev_tr], [np.eye(5)[i["severity"]] for i in info])}
        for name, (ftr, fca) in sets.items():
            est = fit_density_ratios(ftr, "pairwise", seed=seed, standardize=False, progress=False)
            r = []
            for k in range(1, fed.K):
                le, lo = est[k].log(fca[k]), oracle[k].log(ca[k], info[k])
                r.append((effective_sample_size(np.exp(le - le.max())) / effective_sample_size(np.exp(lo - lo.max())),
                          spearmanr(le, lo)[0]))
            r = np.array(r)
            print(f"seed {seed} {name:26s}: median n_eff ratio {np.nanmedian(r[:, 0]):.2f}, "
                  f"median Spearman {np.nanmedian(r[:, 1]):.3f}", flush=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__.strip()); sys.exit(0)
    sys.exit(main(sys.argv[1:]))
