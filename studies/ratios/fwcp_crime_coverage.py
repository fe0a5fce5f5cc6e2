"""FWCP's MC/CCC coverage on crime (severe, seed 0) with its classifier fitted with hparams "paper" and "calibrated",
and with oracle weights (the paper's omega' = p_1 / mean_{k>=2} p_k, and the ratio for the pooled sample of all K
agents, p_1 / mean_{k>=1} p_k = K omega' / (omega' + K - 1), "oracle_pooled"; estimated: `target="all"`,
"calibrated_all"): one trained setup (the paper's predictor), the FWCP weight functions swapped in, the same
calibration draws. The trained setup is pickled to the temp directory (reused when present).

Usage: python studies/ratios/fwcp_crime_coverage.py OUT.csv N_SIMS"""
import dataclasses
import pickle
import sys
import tempfile
import time

from pathlib import Path

import numpy as np
import pandas as pd

from pfwcp_nb.methods import fwcp
from pfwcp_nb.data import make_federation
from pfwcp_nb.ratio_fwcp import fit_fwcp_ratio
from pfwcp_nb.pipeline import sample_draw, train_setup, training_split
from pfwcp_nb.metrics import evaluate_thresholds
from pfwcp_nb.quantiles import effective_sample_size


def main(argv):
    if len(argv) != 2:
        print(__doc__.splitlines()[-1], file=sys.stderr)
        return 2
    out, n_sims = argv[0], int(argv[1])
    t0 = time.perf_counter()
    pkl = Path(tempfile.gettempdir()) / "fwcp_crime_setup.pkl"
    if pkl.exists():
        setup = pickle.loads(pkl.read_bytes())
    else:
        setup = train_setup("crime", "severe", seed=0, need_localizer=False, progress=False,
                            train_kw={"fwcp": {"hparams": "paper"}, "ratios": {"hparams": "paper"}})
        pkl.write_bytes(pickle.dumps(setup))
    print(f"setup ready in {time.perf_counter() - t0:.0f} s", flush=True)
    fed = make_federation("crime", "severe", seed=0)
    X, _, _ = training_split(fed, 50, 0)
    setups = {"paper": setup, "calibrated": dataclasses.replace(setup, fwcp=fit_fwcp_ratio(X, seed=0, dataset="crime", standardize=False)),
              "calibrated_all": dataclasses.replace(setup, fwcp=fit_fwcp_ratio(X, seed=0, dataset="crime", target="all", standardize=False))}
    rows = []
    for sim in range(n_sims):
        draws = {hp: sample_draw(st, fed, sim, weights=("estimated",), localize=False)["estimated"] for hp, st in setups.items()}
        draws["oracle"] = d = sample_draw(setup, fed, sim, weights=("oracle",), localize=False)["oracle"]
        pooled = lambda w: fed.K * w / (w + fed.K - 1)
        draws["oracle_pooled"] = dataclasses.replace(d, fwcp_cal_weights=[pooled(w) for w in d.fwcp_cal_weights],
                                                     fwcp_test_weights=pooled(d.fwcp_test_weights))
        for hp, draw in draws.items():
            st = setup
            w = np.concatenate(draw.fwcp_cal_weights)
            for g, delta in (("mc", None), ("ccc", 0.1)):
                t = fwcp(draw, 0.1, delta)
                cov, size, n_inf = evaluate_thresholds(st.task, draw.test_scores, t, draw.test_labels)
                rows.append(dict(hparams=hp, guarantee=g, sim=sim, coverage=cov, size=size, n_inf=n_inf,
                                 n_eff_pooled=effective_sample_size(w),
                                 test_weight_share=float(np.median(draw.fwcp_test_weights / (w.sum() + draw.fwcp_test_weights)))))
    df = pd.DataFrame(rows)
    df.to_csv(out, index=False)
    s = df.groupby(["hparams", "guarantee"]).agg(MC=("coverage", "mean"), CCC=("coverage", lambda c: np.mean(c >= 0.9)),
                                                 size=("size", "mean"), n_eff=("n_eff_pooled", "median"),
                                                 test_share=("test_weight_share", "median"))
    print(s.to_string(), flush=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__.strip()); sys.exit(0)
    sys.exit(main(sys.argv[1:]))
