#!/usr/bin/env bash
# Severe heterogeneity, estimated weights, all nine datasets at the paper's sizes (500 calibration draws x 500 test
# points, K=11, n_k=100, n~_k=50): the paper's Table 2 (MC) and Table 3 (CCC) from the same draws, the comparison
# with the paper, Figure 3 (boxplots on star), the coverage-efficiency scatter and Figure 1.
# Resumable: rerun the same command after an interruption. Wall time is appended to results/severe/runs.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
export PFWCP_DATA_DIR="${PFWCP_DATA_DIR:-$(cd .. && pwd)/shared/data}"   # absolute: the shared data beside the clone
JOBS=${JOBS:-2}
mkdir -p results/severe
python -m pfwcp_nb.runner --datasets all --guarantee mc ccc --heterogeneity severe --weights estimated \
  --n-sims 500 --n-test 500 --seed 0 --jobs "$JOBS" --cache .pfwcp_cache --out results/severe --figure1 \
  "$@" 2>&1 | tee -a results/severe/run.log
