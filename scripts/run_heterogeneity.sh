#!/usr/bin/env bash
# Moderate and mild heterogeneity (Tables S3-S6 of the supplement), estimated and oracle weights.
# N_SIMS / N_TEST default to the paper's 500 x 500; set them smaller for a quick look.
set -euo pipefail
cd "$(dirname "$0")/.."
export PFWCP_DATA_DIR="${PFWCP_DATA_DIR:-$(cd .. && pwd)/shared/data}"   # absolute: the shared data beside the clone
JOBS=${JOBS:-2}
N_SIMS=${N_SIMS:-500}; N_TEST=${N_TEST:-500}
for H in moderate mild; do
  OUT=results/$H
  [ "$N_SIMS" = 500 ] && [ "$N_TEST" = 500 ] || OUT=results/${H}_${N_SIMS}x${N_TEST}
  mkdir -p "$OUT"
  python -m pfwcp_nb.runner --datasets all --guarantee mc ccc --heterogeneity "$H" --weights estimated oracle \
    --n-sims "$N_SIMS" --n-test "$N_TEST" --seed 0 --jobs "$JOBS" --cache .pfwcp_cache --out "$OUT" \
    "$@" 2>&1 | tee -a "$OUT/run.log"
done
