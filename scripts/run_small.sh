#!/usr/bin/env bash
# Smaller-size severe run of all nine datasets (a quick look; its output is not part of results/, whose severe/ holds
# the paper-size grid of scripts/run_paper_tables.sh): 100 calibration draws x 200 test points, estimated weights, all
# methods and both guarantees except the MC variants of the two one-shot methods (their exact per-test-point tau
# search costs 12-35 s per draw at m=500; run them with `--methods osPFWCP osPFWGLCP --guarantee mc`).
# Predictors trained for 1000 epochs instead of the paper's 5000 (compute budget of the session; see
# results/README.md). Resumable; models are shared through the cache .pfwcp_cache.
set -euo pipefail
cd "$(dirname "$0")/.."
export PFWCP_DATA_DIR="${PFWCP_DATA_DIR:-$(cd .. && pwd)/shared/data}"   # absolute: the shared data beside the clone
JOBS=${JOBS:-2}
OUT=${OUT:-pfwcp_results/severe_100x200}
mkdir -p "$OUT"
python -m pfwcp_nb.runner --datasets all --guarantee mc ccc --heterogeneity severe --weights estimated \
  --n-sims 100 --n-test 200 --seed 0 --jobs "$JOBS" --chunk-size 20 --cache .pfwcp_cache \
  --out "$OUT" --train-kw '{"predictor": {"epochs": 1000}}' --exclude osPFWCP:mc osPFWGLCP:mc \
  --no-progress "$@" 2>&1 | tee -a "$OUT/run.log"
