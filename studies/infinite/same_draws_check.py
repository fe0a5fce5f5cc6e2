"""Are the draws of the paper-hparam and calibrated setups the same (scores, oracle weights)? Draw 3, severe.

Usage: python studies/infinite/same_draws_check.py   (from the repository root; trains or loads gaussian and poisson
in /tmp/dinf/cache)"""
import importlib.util, json, sys, warnings
from pathlib import Path
import numpy as np
from pfwcp_nb import grid, pipeline
from pfwcp_nb.cache import ResultCache, RunConfig
from pfwcp_nb.data import make_federation

def main():
    warnings.simplefilter("ignore")
    spec = importlib.util.spec_from_file_location("inf", Path(__file__).with_name("run.py")); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    for ds in ("gaussian", "poisson"):
        out = []
        for kind in ("paper", "calibrated"):
            cfg = RunConfig(ds, "severe", n_sims=200, n_test=300, train_kw=json.dumps(m.train_kw(kind), sort_keys=True))
            st = grid.ensure_setup(cfg, ResultCache("/tmp/dinf/cache"), need_localizer=False, progress=False)
            out.append(pipeline.sample_draw(st, make_federation(cfg.dataset, cfg.heterogeneity, K=cfg.K, seed=cfg.seed), 3, n_test=300, weights=["oracle"], localize=False)["oracle"])
        print(ds, "same test scores:", np.array_equal(out[0].test_scores, out[1].test_scores),
              "same calibration scores:", all(np.array_equal(a, b) for a, b in zip(out[0].cal_scores, out[1].cal_scores)),
              "same oracle test weights:", np.array_equal(out[0].test_weights, out[1].test_weights))


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__.strip()); sys.exit(0)
    main()
