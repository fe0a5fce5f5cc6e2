#!/usr/bin/env bash
# Training variability of the severe grid: the same data, shift and calibration draws (--seed 0), five
# trainings of every model (--model-seed 0 = the stored grid's models, 1-4 new), 200 calibration draws x 300 test
# points, estimated weights, every method except the localized ones (FGLCP, osPFWGLCP: their draws cost 3/4 of the
# draw time) and the one-shot MC cells. Two runs at a time (one worker each): first the synthetic datasets (5
# trainings), then star and concrete, protein (the cells in question), then the other real datasets. JOBS (e.g.
# "star,1 concrete,1 gaussian_poisson,4") runs those (DATASETS,MODEL_SEED) pairs instead, in that order; PAR: how
# many at a time (default 2).
# Every run also computes PFWCP in the recommended configuration (--select finite-first --gamma auto, studies/recommended/) on the
# same training and draws, into model_seed_M/recommended/. A run whose results.csv exists is not recomputed (SKIP_DONE=0
# recomputes it), so a queue of already-trained seeds adds only the recommended cells.
# Usage: bash studies/training_variability/run.sh [CACHE]   (PFWCP_DATA_DIR must point at the data;
# PFWCP overrides the command, e.g. "python -m pfwcp_nb.runner"; SEED0_MODELS: a cache's models/ of the stored grid)
set -euo pipefail
CACHE=${1:-.pfwcp_cache_tv}
OUT=results/training_variability/runs
export CACHE OUT PFWCP=${PFWCP:-pfwcp-experiments}
if [ -d "${SEED0_MODELS:-}" ]; then mkdir -p "$CACHE/models" && cp -n "$SEED0_MODELS"/*.pkl "$CACHE/models/" || true; fi
one() {   # one run: DATASETS (space separated) and MODEL_SEED
  local ds=$1 m=$2 dir="$OUT/${ds// /+}/model_seed_$m"
  [ "${SKIP_DONE:-1}" = 1 ] && [ -f "$dir/results.csv" ] || $PFWCP --datasets $ds --guarantee mc ccc --heterogeneity severe --weights estimated --n-sims 200 --n-test 300 \
    --seed 0 --model-seed "$m" --jobs 1 --methods CP FCP FCP-QQ FWCP FWCP-QQ PFWCP osPFWCP --exclude osPFWCP:mc --cache "$CACHE" \
    --out "$dir" --no-figures --no-progress > /dev/null
  $PFWCP --datasets $ds --guarantee mc ccc --heterogeneity severe --weights estimated --n-sims 200 --n-test 300 \
    --seed 0 --model-seed "$m" --jobs 1 --methods PFWCP --select finite-first --gamma auto --cache "$CACHE" \
    --out "$dir/recommended" --no-figures --no-progress > /dev/null
  echo "done $ds model seed $m $(date -u +%H:%M:%S)"
}
export -f one
if [ -n "${JOBS:-}" ]; then tr ' ' '\n' <<< "$JOBS" | tr '_' ' '; else   # JOBS="star,1 concrete,1 gaussian_poisson,4 ..."
  for m in 0 1 2 3 4; do echo "gaussian poisson,$m"; done
  for m in 0 1 2 3 4; do for ds in star concrete protein; do echo "$ds,$m"; done; done
  for m in 0 1 2 3 4; do for ds in airfoil bike crime cifar10c; do echo "$ds,$m"; done; done
fi | xargs -P "${PAR:-2}" -I{} bash -c 'IFS=, read -r ds m <<< "{}"; one "$ds" "$m"'
