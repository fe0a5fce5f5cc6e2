"""How the one-shot inner level beta_breve changes osPFWCP's coverage (the paper fixes it without saying how).

    python scripts/oneshot_beta_breve.py [--draws 60] [--m 300] > results/oneshot_beta_breve.txt

Toy federation with oracle weights (`baselines.toy_draw`), and the cached severe setups of gaussian and crime with
estimated weights (needs `.pfwcp_cache` from `scripts/run_paper_tables.sh`). For each calibration draw, osPFWCP with
beta_breve = Procedure 1's beta* (our default) and with fixed values; prints MC (mean coverage) and CCC (share of
draws with empirical coverage >= 0.9) over the draws. No assertion: this prints numbers.
"""
import argparse, os, pickle, warnings
import numpy as np
from pfwcp_nb import pipeline, runner
from pfwcp_nb.cache import ResultCache, RunConfig
from pfwcp_nb.baselines import toy_draw, _agents
from pfwcp_nb.oneshot import OneShotPFWCP

def summarise(label, res):
    for (name, g), v in res.items():
        v = np.asarray(v)
        print(f"{label:10s} beta_breve={name:6s} guarantee={g:3s}  MC {100 * v.mean():6.2f} %  CCC {100 * (v >= 0.9).mean():6.1f} %")

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--draws", type=int, default=60); ap.add_argument("--m", type=int, default=300)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    choices = [("beta*", None), ("0.10", 0.10), ("0.15", 0.15), ("0.25", 0.25)]
    print(f"osPFWCP, alpha = delta = 0.1, {args.draws} calibration draws x {args.m} test points\n")
    def run(label, draws):
        res = {}
        for d in draws:
            ag = _agents(d.cal_scores, d.cal_weights)
            for name, bb in choices:
                for g in (None, 0.1):
                    thr = OneShotPFWCP(0.1, g).calibrate(ag, beta_breve=bb).threshold(d.test_weights)
                    res.setdefault((name, "mc" if g is None else "ccc"), []).append(np.mean(d.test_scores <= thr))
        summarise(label, res)
    run("toy/oracle", (toy_draw(s, m=args.m, noise_sd=0.0) for s in range(args.draws)))
    data_dir = os.environ.get("PFWCP_DATA_DIR", "../shared/data")
    for ds in ("gaussian", "crime"):
        cfg = RunConfig(ds)
        st = runner.ensure_setup(cfg, ResultCache(".pfwcp_cache"), data_dir=data_dir, need_localizer=False, progress=False)
        fed = runner._federation(cfg, data_dir)
        run(f"{ds}/est", (pipeline.sample_draw(st, fed, s, n_test=args.m, localize=False)["estimated"]
                          for s in range(args.draws)))

if __name__ == "__main__":
    main()
