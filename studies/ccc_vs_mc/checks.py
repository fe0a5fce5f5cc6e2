"""Two small checks quoted in studies/ccc_vs_mc/README.md and 07b_baselines.

Usage: python studies/ccc_vs_mc/checks.py > results/ccc_vs_mc/checks.txt   (from the repository root; crime's models in .pfwcp_cache)

1. Procedure 1's (beta*, tau*) for MC and CCC on the first five crime draws (severe, seed 0, estimated weights).
2. The proposed `oneshot_level` for 03 (smallest rank r whose Beta(r, n_1+1-r) meets the criterion) against 07's
   `pfwcp_nb.oneshot.oneshot_level` (built on CP's `ccc_alpha`), for n_1 = 5..400, alpha in {0.05, 0.1, 0.2}, delta in {MC, 0.05, 0.1}.
"""
import os, sys, warnings
import numpy as np
from scipy import stats
from pfwcp_nb import grid, pipeline
from pfwcp_nb.cache import ResultCache, RunConfig
from pfwcp_nb.pfwcp import AgentCalibration
from pfwcp_nb.data import make_federation
from pfwcp_nb.oneshot import oneshot_level as package_oneshot_level
from pfwcp_nb.procedure import select_quantiles, FEAS_TOL


def agents_of(scores, weights) -> list:
    "One `AgentCalibration` per agent (what the package's private `baselines._agents` did at the time)."
    return [AgentCalibration(s, w) for s, w in zip(scores, weights)]

def oneshot_level(n1, alpha, delta=None):
    "The function proposed for pfwcp_nb/oneshot.py (without the warning)."
    r = np.arange(1, int(n1) + 1)
    ok = (r / (n1 + 1) >= 1.0 - alpha - FEAS_TOL) if delta is None else \
         (stats.beta.sf(1.0 - alpha, r, n1 + 1 - r) >= 1.0 - delta - FEAS_TOL)
    return 1.0 / (n1 + 1) if not ok.any() else 1.0 - r[np.argmax(ok)] / n1

def main():
    warnings.simplefilter("ignore")
    data_dir = os.environ.get("PFWCP_DATA_DIR")
    cfg = RunConfig("crime")
    st = grid.ensure_setup(cfg, ResultCache(".pfwcp_cache"), data_dir=data_dir, need_localizer=False, progress=False)
    fed = make_federation(cfg.dataset, cfg.heterogeneity, K=cfg.K, seed=cfg.seed, data_dir=data_dir)
    print("1. Procedure 1 on crime draws 0-4: n_eff (agent 0 first), (beta*, tau*) for MC and CCC")
    for s in range(5):
        d = pipeline.sample_draw(st, fed, s, n_test=10, localize=False)["estimated"]
        n_eff = np.array([a.summary().n_eff for a in agents_of(d.cal_scores, d.cal_weights)])
        a, b = select_quantiles(n_eff, 0.1, None), select_quantiles(n_eff, 0.1, 0.1)
        print(f"  draw {s}: n_eff {np.round(n_eff, 1).tolist()}  MC ({a.beta:.3f}, {a.tau:.3f})  "
              f"CCC ({b.beta:.3f}, {b.tau:.3f})")
    bad, rn, n = 0, 0, 0
    for alpha in (0.05, 0.1, 0.2):
        for delta in (None, 0.05, 0.1):
            for n1 in range(5, 401):
                n += 1
                mine = oneshot_level(n1, alpha, delta)
                if mine == 0.0:          # rank r = n_1: beta_breve 0 is not a level; the package uses 1/(n_1+1)
                    rn += 1
                    bad += abs(package_oneshot_level(alpha, delta, n1) - 1.0 / (n1 + 1)) > 1e-12
                    continue
                bad += abs(mine - package_oneshot_level(alpha, delta, n1)) > 1e-12
    print(f"2. oneshot_level vs pfwcp_nb.oneshot.oneshot_level: {bad} differences in {n} cases "
          f"({rn} cases with r = n_1, where the package returns 1/(n_1+1) instead of the invalid level 0)")
    print(f"   n_1 = 100, alpha = delta = 0.1: MC {oneshot_level(100, 0.1):.4f}, CCC {oneshot_level(100, 0.1, 0.1):.4f}")

if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__.strip()); sys.exit(0)
    main()
