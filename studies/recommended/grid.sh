#!/usr/bin/env bash
# PFWCP's recommended configuration (--select finite-first --gamma auto) beside the paper's
# configuration, on the same models and the same 500 x 500 calibration draws, MC and CCC, estimated and oracle weights,
# at one heterogeneity level, all nine datasets. Four runs per level, each resumable (rerun the same command):
#   results/recommended_LEVEL/          recommended, CCC, estimated weights
#   results/recommended_LEVEL/check/    paper configuration + the test agent's check (--check), CCC, estimated + oracle
#   results/recommended_LEVEL/mc/       recommended, MC, estimated + oracle
#   results/recommended_LEVEL/mc_paper/ paper configuration, MC, estimated + oracle
# then `python studies/recommended/summary.py --cache CACHE` makes results/recommended_summary/.
# Usage: bash studies/recommended/grid.sh LEVEL [CACHE] [N_SIMS]   (PFWCP_DATA_DIR must point at the data; JOBS
# worker processes, default 2; DATASETS overrides "all"). LIGHT=1 (used for moderate and mild, for time): the
# recommended MC run with estimated weights only, and no mc_paper/ run. recommended_summary.py reads the paper
# configuration's MC cells from mc_paper/ where it has the dataset, else from the stored grid results/LEVEL/results.csv,
# which is valid where that grid's models are the same (its column same_models_as_grid: check/'s paper CCC cells equal
# the stored grid's); for a dataset whose models differ, run its mc_paper/ cells alone (the last command below with
# --datasets DATASET). The stored results: severe ran without LIGHT but its mc_paper/ run was stopped for time (the
# stored grid's models are the same for all nine); cifar10c at moderate had its mc_paper/ run.
set -euo pipefail
USAGE="usage: bash studies/recommended/grid.sh {severe|moderate|mild} [CACHE] [N_SIMS>=2]"
LEVEL=${1:-}
CACHE=${2:-.pfwcp_cache}
N=${3:-500}
case "$LEVEL" in severe|moderate|mild) ;; *) echo "$USAGE" >&2; exit 2 ;; esac
[[ "$N" =~ ^[0-9]+$ ]] && [ "$N" -ge 2 ] || { echo "$USAGE" >&2; exit 2; }
OUT=results/recommended_$LEVEL
COMMON=(--datasets ${DATASETS:-all} --methods PFWCP --heterogeneity "$LEVEL" --n-sims "$N" --n-test 500 --seed 0
        --jobs "${JOBS:-2}" --cache "$CACHE" --no-figures --no-progress)
REC=(--select finite-first --gamma auto)
pfwcp-experiments "${COMMON[@]}" --guarantee ccc --weights estimated "${REC[@]}" --out "$OUT"
pfwcp-experiments "${COMMON[@]}" --guarantee ccc --weights estimated oracle --check --out "$OUT/check"
if [ "${LIGHT:-0}" = 1 ]; then
  pfwcp-experiments "${COMMON[@]}" --guarantee mc --weights estimated "${REC[@]}" --out "$OUT/mc"
else
  pfwcp-experiments "${COMMON[@]}" --guarantee mc --weights estimated oracle "${REC[@]}" --out "$OUT/mc"
  pfwcp-experiments "${COMMON[@]}" --guarantee mc --weights estimated oracle --out "$OUT/mc_paper"
fi
echo "done $LEVEL $(date -u +%H:%M:%S)"
