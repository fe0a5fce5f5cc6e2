#!/usr/bin/env bash
# Training variability of the severe grid (issue 22): the same data, shift and calibration draws (--seed 0), five
# trainings of every model (--model-seed 0 = the stored grids' models, 1-4 new), 200 draws x 300 test points,
# every method except the two one-shot MC cells. Usage: bash results/training_variability/run.sh [CACHE]
# (PFWCP_DATA_DIR must point at the data; PFWCP overrides the command, e.g. "python -m pfwcp_nb.runner").
set -euo pipefail
CACHE=${1:-.pfwcp_cache_tv}
OUT=results/training_variability
PFWCP=${PFWCP:-pfwcp-experiments}
for m in ${MODEL_SEEDS:-1 0 2 3 4}; do
  if [ "$m" = 0 ] && [ -d "${SEED0_MODELS:-}" ]; then       # the stored grid's trained models (same code, same keys)
    mkdir -p "$CACHE/models" && cp -n "$SEED0_MODELS"/*.pkl "$CACHE/models/" || true
  fi
  $PFWCP --datasets all --guarantee mc ccc --heterogeneity severe --weights estimated --n-sims 200 --n-test 300 \
    --seed 0 --model-seed "$m" --jobs 2 --exclude osPFWCP:mc osPFWGLCP:mc --cache "$CACHE" \
    --out "$OUT/model_seed_$m" --no-figures --no-progress
done
