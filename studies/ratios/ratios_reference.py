"""Reference outputs of the CPU training code (predictor, the three ratio estimators, FWCP's classifier) on a small
seeded federation; run before a change to record them and after it to check they are bit-for-bit the same.
Usage: python studies/ratios/ratios_reference.py OUT.npz"""
import sys

import numpy as np

from pfwcp_nb.density_ratio import RATIO_METHODS
from pfwcp_nb.ratio_fit import fit_density_ratios
from pfwcp_nb.ratio_fwcp import fit_fwcp_ratio
from pfwcp_nb.models import train_predictor


def _paper_kw(fn) -> dict:
    "The paper's settings, named only where `fn` has the option (the script also runs on the commits before them)."
    names = fn.__code__.co_varnames
    return {k: v for k, v in (("hparams", "paper"), ("standardize", False)) if k in names}


def reference_outputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(123)
    means = rng.normal(scale=0.5, size=(4, 3))
    X = [rng.normal(size=(30, 3)) + m for m in means]
    y = [x.sum(1) + 0.1 * rng.normal(size=len(x)) for x in X]
    Xq = rng.normal(size=(7, 3))
    out = {}
    pred = train_predictor("regression", X, y, arch=(8,), epochs=30, seed=3, progress=False)
    out["predictor"] = pred.predict(Xq)
    clf = train_predictor("classification", X, [(v > 0).astype(int) for v in y], arch=(8,), pca=None, epochs=30,
                          seed=3, progress=False)
    out["classifier"] = clf.predict_proba(Xq)
    for m in RATIO_METHODS:
        r = fit_density_ratios(X, m, seed=4, epochs=60, progress=False, **_paper_kw(fit_density_ratios))
        out[f"ratio_{m}"] = np.stack([r[k].log(Xq) for k in range(1, 4)])
    out["fwcp"] = fit_fwcp_ratio(X, seed=5, epochs=60, **_paper_kw(fit_fwcp_ratio)).log(Xq)
    return out


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__.strip()); sys.exit(0)
    if len(sys.argv) != 2:
        print(__doc__.splitlines()[-1], file=sys.stderr); sys.exit(2)
    out = reference_outputs()
    np.savez(sys.argv[1], **out)
    for k, v in out.items():
        print(k, v.ravel()[:3].tolist())
