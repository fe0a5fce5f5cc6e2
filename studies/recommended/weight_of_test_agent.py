"""The test agent's aggregation weight w_1 = n_eff^1 / sum_k n_eff^k per dataset and level (the
quantity `trust.recommend` reads), on the first draws of the paper's pipeline, next to the paper grid's CP and PFWCP
finite widths (results/<level>/results.csv).

    python studies/recommended/weight_of_test_agent.py --cache CACHE --draws 20 --out results/recommended_summary/test_agent_weight.csv
"""
import argparse
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from pfwcp_nb.cache import ResultCache, RunConfig
from pfwcp_nb.data import make_federation
from pfwcp_nb.pfwcp import AgentCalibration
from pfwcp_nb.pipeline import sample_draw
from pfwcp_nb.grid import ensure_setup
from pfwcp_nb.trust import recommend


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache", required=True)
    p.add_argument("--draws", type=int, default=20)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    cache, rows = ResultCache(a.cache), []
    for f in sorted(Path(a.cache, "models").glob("*__seed0__dfd7bdc036.pkl")):
        ds, level = f.name.split("__")[:2]
        cfg = RunConfig(ds, level)
        st = ensure_setup(cfg, cache, data_dir=a.data_dir, need_localizer=False, progress=False)
        fed = make_federation(ds, level, K=cfg.K, seed=cfg.seed, data_dir=a.data_dir)
        w1, methods = [], []
        for s in range(a.draws):
            d = sample_draw(st, fed, s, weights=("estimated",), localize=False)["estimated"]
            summ = [AgentCalibration(sc, w).summary() for sc, w in zip(d.cal_scores, d.cal_weights)]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for dl in (None, 0.1):
                    r = recommend(summ, 0.1, dl)
                    methods.append(r.method)
            w1.append(r.test_agent_weight)
        grid = pd.read_csv(f"results/{level}/results.csv")
        get = lambda m, g: grid[(grid.dataset == ds) & (grid.method == m) & (grid.guarantee == g)]["Eff_finite"].iloc[0]
        rows.append(dict(dataset=ds, level=level, draws=a.draws, w1_median=float(np.median(w1)), w1_min=float(np.min(w1)),
                         w1_max=float(np.max(w1)), share_recommend_cp=float(np.mean(np.array(methods) == "CP")),
                         cp_width_mc=get("CP", "mc"), pfwcp_width_mc=get("PFWCP", "mc"),
                         cp_width_ccc=get("CP", "ccc"), pfwcp_width_ccc=get("PFWCP", "ccc")))
        print(rows[-1], flush=True)
    out = pd.DataFrame(rows)
    for g in ("mc", "ccc"):
        out[f"pfwcp_vs_cp_{g}"] = out[f"pfwcp_width_{g}"] / out[f"cp_width_{g}"] - 1
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    out.to_csv(a.out, index=False)
    print(out.to_string())


if __name__ == "__main__":
    main()
