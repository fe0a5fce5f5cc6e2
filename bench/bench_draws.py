"""Benchmark of building calibration draws (scores, weights, localized scores): the previous path vs the current one.

    python bench/bench_draws.py [--datasets gaussian airfoil] [--n-draws 20]

For each dataset: a small trained setup (predictor, ratios, FWCP classifier and localizer, few epochs; the draw
cost does not depend on the epochs), then `sample_draw` for the same draw indices (K = 11, n_k = 100, m = 500,
estimated weights, localized fields) with
  old: the localizer's samples drawn fresh per draw (synthetic) or gathered from the pool (real datasets), and
  new: the samples of `frozen_localizer(setup)` (synthetic; real datasets: the pool, as before).
Printed: CPU seconds per draw (process time, one thread), the ratio old/new, and whether the non-localized fields
(scores, weights, FWCP weights) are identical. No assertion: this prints numbers.
"""
import argparse
import time

import numpy as np

from pfwcp_nb.data import make_federation
from pfwcp_nb.pipeline import frozen_localizer, pool_localizer_samples, sample_draw, train_setup

SMALL = {"predictor": {"epochs": 50}, "ratios": {"epochs": 50}, "localizer": {"epochs": 50}}
FIELDS = ("cal_scores", "cal_weights", "test_weights", "test_scores", "fwcp_cal_weights", "fwcp_test_weights")


def per_draw_cpu(build, n: int):
    "Build draws 0..n-1; return (CPU seconds per draw, the draws)."
    t0 = time.process_time()
    out = [build(s) for s in range(n)]
    return (time.process_time() - t0) / n, out


def same(a, b) -> bool:
    if isinstance(a, list):
        return all(np.array_equal(x, y) for x, y in zip(a, b))
    return np.array_equal(a, b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", nargs="+", default=["gaussian", "airfoil"])
    ap.add_argument("--n-draws", type=int, default=20)
    a = ap.parse_args()
    print(f"calibration draws: K=11, n_k=100, m=500, estimated weights, localized fields; {a.n_draws} draws each\n")
    print(f"{'dataset':10s} {'old [s/draw]':>13s} {'new [s/draw]':>13s} {'old/new':>8s}  scores+weights identical  "
          "localized samples")
    for ds in a.datasets:
        st = train_setup(ds, "severe", seed=0, train_kw=SMALL, progress=False)
        fed = make_federation(ds, "severe", K=11, seed=0)
        pool = pool_localizer_samples(st, fed)
        t0 = time.process_time()
        frozen = frozen_localizer(st) if pool is None else None
        t_frozen = time.process_time() - t0
        kw = dict(n_cal=100, n_test=500, weights=("estimated",), localize=True, loc_pool=pool)
        old, d_old = per_draw_cpu(lambda s: sample_draw(st, fed, s, **kw)["estimated"], a.n_draws)
        new, d_new = per_draw_cpu(lambda s: sample_draw(st, fed, s, loc_frozen=frozen, **kw)["estimated"], a.n_draws)
        ident = all(same(getattr(x, f), getattr(y, f)) for x, y in zip(d_old, d_new) for f in FIELDS)
        loc_same = all(same(x.loc_cal_scores, y.loc_cal_scores) for x, y in zip(d_old, d_new))
        how = "pooled (unchanged)" if pool is not None else f"frozen noise (setup: {t_frozen:.3f} s once)"
        print(f"{ds:10s} {old:13.4f} {new:13.4f} {old / new:7.1f}x  {str(ident):24s}  {how}; "
              f"localized scores identical: {loc_same}")


if __name__ == "__main__":
    main()
