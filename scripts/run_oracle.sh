#!/usr/bin/env bash
# Oracle-weight variants (methods that use the density ratios) at severe heterogeneity, same draws as
# run_paper_tables.sh; rows are merged into results/severe/results.csv and its tables.
set -euo pipefail
cd "$(dirname "$0")/.."
export PFWCP_DATA_DIR="${PFWCP_DATA_DIR:-$(cd .. && pwd)/shared/data}"   # absolute: the shared data beside the clone
JOBS=${JOBS:-2}
N_SIMS=${N_SIMS:-500}; N_TEST=${N_TEST:-500}; OUT=${OUT:-results/severe}
mkdir -p "$OUT"
python -m pfwcp_nb.runner --datasets all --guarantee mc ccc --heterogeneity severe --weights oracle \
  --n-sims "$N_SIMS" --n-test "$N_TEST" --seed 0 --jobs "$JOBS" --cache .pfwcp_cache --out "$OUT" \
  "$@" 2>&1 | tee -a "$OUT/run.log"
