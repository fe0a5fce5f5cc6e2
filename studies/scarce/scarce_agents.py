"""The scarce-local-data study with fewer agents: K in {3, 6, 11} at n_1 = 20 on gaussian (severe).

The other agents keep n_k = 100 calibration and 50 training points. Writes `OUT/results.csv` (one row per K x
method x guarantee, with a column `K`) and appends the command and wall time to `OUT/runs.jsonl`.

Usage: python studies/scarce/scarce_agents.py [--out results/scarce_agents] [--n-sims 500] [--n-test 500] [--jobs 2]
                                       [--cache .pfwcp_cache] [--ks 3 6 11] [--n-cal-test 20] [--weights estimated]
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

import pandas as pd

from pfwcp_nb.backends import Execution
from pfwcp_nb.grid import GridSpec
from pfwcp_nb.runner import run_grid

SCARCE_METHODS = ["CP", "FCP-QQ", "FWCP", "PFWCP", "osPFWCP"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="results/scarce_agents")
    p.add_argument("--cache", default=".pfwcp_cache")
    p.add_argument("--n-sims", type=int, default=500)
    p.add_argument("--n-test", type=int, default=500)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--ks", type=int, nargs="+", default=[3, 6, 11])
    p.add_argument("--n-cal-test", type=int, default=20)
    p.add_argument("--weights", nargs="+", default=["estimated"], choices=["estimated", "oracle"])
    a = p.parse_args(argv)
    if any(k < 2 for k in a.ks):
        p.error("--ks: every K must be at least 2 (the test agent and one other)")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0, frames = time.time(), []
    for k in a.ks:
        for w in a.weights:
            ms = SCARCE_METHODS if w == "estimated" else [m for m in SCARCE_METHODS if m not in ("CP", "FCP-QQ")]
            df = run_grid(GridSpec(["gaussian"], ms, ["mc", "ccc"], weights=w, K=k, n_cal_test=a.n_cal_test,
                                   n_sims=a.n_sims, n_test=a.n_test, seed=0),
                          Execution(jobs=a.jobs, cache_dir=a.cache, progress=False))
            frames.append(df.drop(columns=[c for c in df.columns if c == "K"]).assign(K=k))
            print(f"K={k} {w}: done after {time.time() - t0:.0f} s", flush=True)
    res = pd.concat(frames, ignore_index=True)
    res.to_csv(out / "results.csv", index=False)
    with open(out / "runs.jsonl", "a") as f:
        f.write(json.dumps({"command": "python studies/scarce/scarce_agents.py " + " ".join(sys.argv[1:] if argv is None else argv),
                            "wall_seconds": round(time.time() - t0, 1), "cpus": os.cpu_count()}) + "\n")
    cols = ["K", "weights", "guarantee", "method", "MC", "CCC", "inf_frac", "Eff_finite"]
    print(res[cols].to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
