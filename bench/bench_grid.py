"""The full severe grid's wall time and CPU, new against the reference, read from the runs' own logs.

Reads `runs.jsonl` and `results.csv` of two result folders of the same grid (9 datasets x 9 methods x {MC, CCC},
500 x 500): the current one (default `results/severe`, one invocation from an empty cache) and the reference (default
`results/archive/severe_5c99045`, the code of commit 5c99045 in resumable passes), and prints wall time, CPU in the methods,
CPU in the one-shot MC cells and CPU building the draws, with the ratios reference / new.

Usage: python bench/bench_grid.py [NEW_FOLDER [REFERENCE_FOLDER]]
"""
import json
import sys
from pathlib import Path

import pandas as pd


def summary(folder: Path, full_grid_only: bool) -> dict:
    runs = [json.loads(line) for line in (folder / "runs.jsonl").read_text().splitlines() if line.strip()]
    # the passes that computed the grid: `--datasets all` invocations that did more than re-typeset (> 60 s)
    grid = [r for r in runs if "--datasets all" in r["command"] and r["wall_seconds"] > 60]
    if full_grid_only:
        grid = [r for r in grid if r.get("cache") == "cold"][-1:]
    df = pd.read_csv(folder / "results.csv")
    oneshot_mc = df[df.method.isin(["osPFWCP", "osPFWGLCP"]) & (df.guarantee == "mc")].seconds.sum()
    draws = df.groupby(["dataset", "guarantee"]).draw_seconds.first().sum()
    return dict(invocations=len(grid), cache=",".join(str(r.get("cache", "?")) for r in grid),
                wall_s=sum(r["wall_seconds"] for r in grid), method_cpu_s=df.seconds.sum(),
                oneshot_mc_cpu_s=oneshot_mc, draw_cpu_s=draws, cells=len(df))


if __name__ == "__main__":
    new = Path(sys.argv[1] if len(sys.argv) > 1 else "results/severe")
    ref = Path(sys.argv[2] if len(sys.argv) > 2 else "results/archive/severe_5c99045")
    for f in (new, ref):
        if not (f / "runs.jsonl").exists() or not (f / "results.csv").exists():
            sys.exit(f"usage: python bench/bench_grid.py [NEW [REFERENCE]]: {f} lacks runs.jsonl or results.csv")
    a, b = summary(new, True), summary(ref, False)
    print(f"{'':22s} {'new':>12s} {'reference':>12s} {'ref/new':>8s}")
    print(f"{'folder':22s} {str(new):>12s} {str(ref):>12s}")
    for k in ("cells", "invocations", "cache"):
        print(f"{k:22s} {str(a[k]):>12s} {str(b[k]):>12s}")
    for k in ("wall_s", "method_cpu_s", "oneshot_mc_cpu_s", "draw_cpu_s"):
        print(f"{k:22s} {a[k]:12.1f} {b[k]:12.1f} {b[k] / a[k]:8.2f}")
    print("reference wall time: the sum of its passes that computed cells (its training ran in earlier sessions and "
          "is not all included); new: one invocation, training included")
