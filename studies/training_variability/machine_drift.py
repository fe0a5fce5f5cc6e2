"""How far trained models move between "machines" emulated on this one: the same training (data, seed,
budget) in child processes whose torch/MKL code paths differ, in float32 (the stored grids) and float64 (opt-in,
`fedavg_many(dtype=)`), against the yardstick of another training seed on the same machine.

Emulated machines: ATEN_CPU_CAPABILITY=default / avx2 (torch's vectorised kernels: another CPU generation),
MKL_CBWR=COMPATIBLE (MKL's conditional-numerical-reproducibility path: another BLAS code path). The thread counts
are not a machine difference any more: training runs on one torch thread (`fedavg_many(num_threads=1)`) and the runner
pins one torch and one BLAS thread.
Usage: python studies/training_variability/machine_drift.py OUT_DIR [--datasets gaussian:5000 airfoil:1000]   (DATASET:EPOCHS)"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

VARIANTS = {"base": {}, "aten-default": {"ATEN_CPU_CAPABILITY": "default"}, "aten-avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
            "mkl-compatible": {"MKL_CBWR": "COMPATIBLE"}}   # thread counts: fixed to one by fedavg and the runner


def child(dataset: str, epochs: int, dtype: str, model_seed: int, threads: int, out: str):
    "Train the predictor (and, in float32, the pairwise ratios) of `dataset`; save their outputs on fixed points."
    import torch
    from pfwcp_nb.data import make_federation
    from pfwcp_nb.ratio_fit import fit_density_ratios
    from pfwcp_nb.models import train_predictor
    from pfwcp_nb.pipeline import training_seed, training_split
    fed = make_federation(dataset, "severe", seed=0)
    X, y, _ = training_split(fed, 50, 0)
    rng = np.random.default_rng([0, 99])                     # evaluation points: 100 per agent, fixed
    ev = [fed.sample(k, 100, rng) for k in range(fed.K)]
    Xe, ye = np.concatenate([e[0] for e in ev]), np.concatenate([e[1] for e in ev])
    t0 = time.process_time()
    pred = train_predictor(dataset, X, y, epochs=epochs, seed=training_seed(0, model_seed), progress=False,
                           dtype=dtype, num_threads=threads)
    res = dict(pred=pred.predict(Xe) if pred.task == "regression" else pred.predict_proba(Xe), y=ye,
               cpu_seconds=time.process_time() - t0, capability=torch.backends.cpu.get_cpu_capability())
    if dtype == "float32":
        r = fit_density_ratios(X, "pairwise", seed=training_seed(0, model_seed), dataset=dataset, standardize=False,
                               progress=False)
        res["log_ratio"] = np.stack([r[k].log(Xe) for k in range(1, fed.K)])
    np.savez(out, **res)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--datasets", nargs="+", default=["gaussian:5000", "airfoil:1000"])
    p.add_argument("--child", nargs=5, metavar=("DATASET", "EPOCHS", "DTYPE", "MODEL_SEED", "THREADS"))
    p.add_argument("--child-out")
    a = p.parse_args()
    if a.child:
        ds, ep, dt, ms, th = a.child
        return child(ds, int(ep), dt, int(ms), int(th), a.child_out)
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    rows = []
    for spec in a.datasets:
        ds, ep = spec.split(":")
        runs = {}
        for dt in ("float32", "float64"):
            jobs = [(v, 0) for v in VARIANTS] + [("base", 1)]
            for v, ms in jobs:
                f = out / f"{ds}_{ep}_{dt}_{v}_model{ms}.npz"
                if not f.exists():
                    env = {**os.environ, **VARIANTS[v], "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
                    subprocess.run([sys.executable, __file__, str(out), "--child", ds, ep, dt, str(ms),
                                    "1", "--child-out", str(f)], env=env, check=True)
                runs[(dt, v, ms)] = dict(np.load(f))
            b = runs[(dt, "base", 0)]
            scale = float(np.sqrt(np.mean((b["y"] - b["pred"]) ** 2))) if b["pred"].ndim == 1 else 1.0
            for (dt_, v, ms), r in runs.items():
                if dt_ != dt or (v, ms) == ("base", 0):
                    continue
                d = r["pred"] - b["pred"]
                row = dict(dataset=ds, epochs=int(ep), dtype=dt, machine=v if ms == 0 else "base, model seed 1",
                           capability=str(r["capability"]), pred_max_abs=float(np.abs(d).max()),
                           pred_rms_rel=float(np.sqrt(np.mean(d ** 2)) / scale), identical=bool((d == 0).all()),
                           cpu_seconds=float(r["cpu_seconds"]))
                if "log_ratio" in r:
                    row["log_ratio_max_abs"] = float(np.abs(r["log_ratio"] - b["log_ratio"]).max())
                rows.append(row)
    df = pd.DataFrame(rows)
    df.to_csv(out / "drift.csv", index=False)
    (out / "command.txt").write_text("python studies/training_variability/machine_drift.py " + " ".join(sys.argv[1:]) + "\n")
    print(df.to_string(index=False))


if __name__ == "__main__":
    main()
