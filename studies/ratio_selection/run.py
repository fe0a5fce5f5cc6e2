"""Ratio models chosen by data against the paper's: per (dataset, heterogeneity), the paper's
pairwise classifiers and `ratio_selection.fit_selected_ratios` on the same training split (seed 0, the runner's), both
against the oracle ratios on fresh calibration samples: per agent the n_eff ratio, Spearman and centred log-ratio RMSE
(`density_ratio.ratio_quality`), median over `--draws` calibration samples of 100 points per agent.
Writes OUT/quality.csv (per cell, ratio model, draw, agent), OUT/selection.csv (every candidate's pooled held-out
log-loss, the chosen one flagged). Models come from the runner's cache `--cache` where the paper setup is there
(the selected ratios are then fitted through `grid.ensure_setup` and cached under their own key), else are fitted here.

usage: python studies/ratio_selection/run.py OUT --cache CACHE [--draws 5] CELL...   (CELL = dataset:heterogeneity)
"""
import argparse
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from pfwcp_nb.cache import ResultCache, RunConfig
from pfwcp_nb.data import make_federation
from pfwcp_nb.density_ratio import oracle_density_ratios, ratio_quality
from pfwcp_nb.ratio_fit import fit_density_ratios
from pfwcp_nb.ratio_selection import fit_selected_ratios
from pfwcp_nb.pipeline import training_split
from pfwcp_nb.grid import ensure_setup


def _ratios(ds, het, cache: ResultCache, data_dir, fed):
    paper_cfg, sel_cfg = RunConfig(ds, het), RunConfig(ds, het, ratio_model="select")
    if cache.setup_path(paper_cfg).exists():
        p = ensure_setup(paper_cfg, cache, data_dir=data_dir, need_localizer=False, progress=False).ratios
        s = ensure_setup(sel_cfg, cache, data_dir=data_dir, need_localizer=False, progress=False).ratios
        return p, s, "cache"
    X = training_split(fed, paper_cfg.n_train, paper_cfg.seed)[0]
    return (fit_density_ratios(X, "pairwise", seed=paper_cfg.seed, dataset=ds, standardize=False, progress=False),
            fit_selected_ratios(X, seed=paper_cfg.seed, dataset=ds), "fitted")


def main(argv=None):
    p = argparse.ArgumentParser(prog="ratio_selection.py", description=__doc__.split("\n")[0])
    p.add_argument("out"); p.add_argument("cells", nargs="+")
    p.add_argument("--cache", required=True); p.add_argument("--data-dir", default=None)
    p.add_argument("--draws", type=int, default=5)
    a = p.parse_args(argv)
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    cache = ResultCache(a.cache)
    q_all = pd.read_csv(out / "quality.csv") if (out / "quality.csv").exists() else pd.DataFrame()
    s_all = pd.read_csv(out / "selection.csv") if (out / "selection.csv").exists() else pd.DataFrame()
    for cell in a.cells:
        ds, het = cell.split(":")
        if len(q_all) and ((q_all.dataset == ds) & (q_all.heterogeneity == het)).any():
            continue
        t0 = time.time()
        fed = make_federation(ds, het, K=11, seed=0, data_dir=a.data_dir)
        paper, sel, src = _ratios(ds, het, cache, a.data_dir, fed)
        oracle = oracle_density_ratios(fed)
        rng = np.random.default_rng([0, 23])
        rows = []
        for d in range(a.draws):
            cal = [fed.sample(k, 100, rng, return_info=True) for k in range(fed.K)]
            cX, cI = [c[0] for c in cal], [c[2] for c in cal]
            for name, w in (("paper", paper), ("select", sel)):
                q = ratio_quality(w, oracle, cX, cI)
                q["ratio_model"], q["draw"] = name, d
                rows.append(q)
        q = pd.concat(rows, ignore_index=True)
        q["dataset"], q["heterogeneity"], q["source"] = ds, het, src
        tab = sel[1].selection.copy()
        tab["dataset"], tab["heterogeneity"], tab["seconds"] = ds, het, float(sel[1].seconds)
        q_all = pd.concat([q_all, q], ignore_index=True); s_all = pd.concat([s_all, tab], ignore_index=True)
        q_all.to_csv(out / "quality.csv", index=False); s_all.to_csv(out / "selection.csv", index=False)
        med = q.groupby("ratio_model")[["n_eff_ratio", "spearman", "log_rmse"]].median().round(3)
        print(f"{ds} {het} ({src}, {time.time() - t0:.0f} s): chosen {sel[1].candidate.name}\n{med}", flush=True)
    with open(out / "commands.txt", "a") as f:
        f.write("python studies/ratio_selection/run.py " + shlex.join(sys.argv[1:] if argv is None else argv) + "\n")


if __name__ == "__main__":
    main()
