"""How far an honest agent's mean calibration weight W/n lies from 1: what weight range could the deployed apps agree by default?

usage: python studies/redteam/honest_mean_weight.py [--datasets gaussian airfoil] [--draws 20] [--out results/flower_pipeline/honest_mean_weight.json]
       python studies/redteam/honest_mean_weight.py --table results/flower_pipeline/honest_mean_weight.json

A density ratio has mean 1 under its agent, so an honest agent's W/n should be near 1, and a tight agreed weight range
(run config `weight-range`) would bound the +inf lie (an agent that claims a small W may answer +inf almost
everywhere). For each dataset: the in-process training of the value benchmark's setting (severe heterogeneity, K = 11,
seed 0, `train_setup`), DRAWS calibration draws of 100 points per agent (`sample_draw`), and per draw and agent 1..K-1
the mean of its calibration weights W/n with the estimated ratios (what a deployed agent sends) and with the true ones;
the quantiles over draws and agents, and the share outside (0.5, 2) and (0.2, 5)."""
import argparse, json, sys, time, warnings
import numpy as np
from pfwcp_nb.data import DATASETS, make_federation
from pfwcp_nb.pipeline import sample_draw, train_setup

LEVELS = [0, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1]
RANGES = {"0.5-2": (0.5, 2.0), "0.2-5": (0.2, 5.0)}


def measure(ds: str, draws: int) -> dict:
    "The quantiles of W/n over draws and agents 1..K-1, estimated and true ratios, and the shares outside each range."
    t0 = time.process_time()
    st = train_setup(ds, "severe", seed=0, need_localizer=False, progress=False)
    fed = make_federation(ds, "severe", K=st.K, seed=0)
    got = {"estimated": [], "oracle": []}
    for sim in range(draws):
        d = sample_draw(st, fed, sim, n_cal=100, n_test=200, weights=("estimated", "oracle"), localize=False)
        for kind in got:
            got[kind] += [float(np.mean(w)) for w in d[kind].cal_weights[1:]]
    out = {kind: {"quantiles": np.quantile(v, LEVELS).tolist(),
                  "outside": {r: float(np.mean((np.array(v) < lo) | (np.array(v) > hi))) for r, (lo, hi) in RANGES.items()}}
           for kind, v in got.items()}
    return {**out, "agents_x_draws": len(got["estimated"]), "cpu_seconds": time.process_time() - t0}


def table(path: str) -> str:
    "The markdown table of a stored run (the red team README and docs/deploy.md quote it)."
    with open(path) as f:
        d = json.load(f)
    lines = ["| dataset | ratios | W/n: min / 5 % / median / 95 % / max | outside (0.5, 2) | outside (0.2, 5) |", "|---" * 5 + "|"]
    for ds, v in d["datasets"].items():
        for kind in ("estimated", "oracle"):
            q = v[kind]["quantiles"]
            lines.append(f"| {ds} | {'estimated' if kind == 'estimated' else 'true'} | {q[0]:.2f} / {q[2]:.2f} / {q[4]:.2f} / "
                         f"{q[6]:.2f} / {q[8]:.2f} | {100 * v[kind]['outside']['0.5-2']:.0f} % | "
                         f"{100 * v[kind]['outside']['0.2-5']:.0f} % |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["gaussian", "airfoil"], choices=list(DATASETS))
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--out", default="results/flower_pipeline/honest_mean_weight.json")
    ap.add_argument("--table", metavar="FILE", help="print the table of a stored run instead")
    a = ap.parse_args(argv)
    if a.table:
        print(table(a.table))
        return
    if a.draws < 1:
        ap.error("argument --draws: must be >= 1")
    out = {"command": "python studies/redteam/honest_mean_weight.py" + (f" --datasets {' '.join(a.datasets)}"
           if a.datasets != ["gaussian", "airfoil"] else "") + ("" if a.draws == 20 else f" --draws {a.draws}"),
           "heterogeneity": "severe", "n_cal": 100, "draws": a.draws, "levels": LEVELS, "datasets": {}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for ds in a.datasets:
            out["datasets"][ds] = measure(ds, a.draws)
            print(ds, json.dumps(out["datasets"][ds]), flush=True)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print(table(a.out))


if __name__ == "__main__":
    sys.exit(main())
