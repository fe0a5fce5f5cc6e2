"""Which band factor `trust.choose_gamma` picks per draw (PFWCP-CCC, select finite-first, estimated
weights) and the leave-one-out counts behind it, on the first draws of the pipeline.

    python studies/recommended/gamma_chosen.py --cache CACHE --draws 30 --out results/recommended_summary/gamma_chosen.csv severe:concrete mild:gaussian ...
"""
import argparse
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from pfwcp_nb.cache import ResultCache, RunConfig
from pfwcp_nb.data import make_federation
from pfwcp_nb.pfwcp import PFWCP, AgentCalibration
from pfwcp_nb.pipeline import sample_draw
from pfwcp_nb.grid import ensure_setup
from pfwcp_nb.trust import choose_gamma, loo_target


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache", required=True)
    p.add_argument("--draws", type=int, default=30)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", required=True)
    p.add_argument("cells", nargs="+", help="LEVEL:DATASET")
    a = p.parse_args()
    cache, rows = ResultCache(a.cache), []
    for item in a.cells:
        level, ds = item.split(":")
        cfg = RunConfig(ds, level)
        st = ensure_setup(cfg, cache, data_dir=a.data_dir, need_localizer=False, progress=False)
        fed = make_federation(ds, level, K=cfg.K, seed=cfg.seed, data_dir=a.data_dir)
        for s in range(a.draws):
            d = sample_draw(st, fed, s, weights=("estimated",), localize=False, own_weights=True)["estimated"]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = PFWCP(0.1, 0.1, select="finite-first").calibrate(
                    [AgentCalibration(sc, w) for sc, w in zip(d.cal_scores, d.cal_weights)])
                g, counts = choose_gamma(model, d.cal_scores[0], d.own_test_weights)
            rows.append(dict(level=level, dataset=ds, draw=s, gamma=g, count_at_1=int(counts[0]),
                             target=loo_target(d.cal_scores[0].size, 0.1, 0.1), w1=float(model.agg_weights_[0])))
    out = pd.DataFrame(rows)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    out.to_csv(a.out, index=False)
    print(out.groupby(["level", "dataset"]).agg(gamma_median=("gamma", "median"), share_hedged=("gamma", lambda g: float((g > 1).mean())),
                                                 count_at_1=("count_at_1", "median"), target=("target", "first")).to_string())


if __name__ == "__main__":
    main()
