#!/usr/bin/env python
"""How far the federated run drifts from the in-process one with K = 11 agents, by number of rounds (float rounding of
a batch of one replica instead of eleven, amplified by Adam): in-process Grid stand-in of tests/test_pipeline_over_flower.py.

usage: python studies/flower_pipeline/flower_pipeline_drift.py   (prints: predictor epochs, ratio epochs, max |diff| ratio params, predictor params, thresholds, seconds)"""
import sys, time; sys.path.insert(0, "tests")
from flwr.supercore.task_identity import TaskIdentity
TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
import test_pipeline_over_flower as T
T.SIZES.update(n_train=50, n_cal=100, n_test=100)
for pe, re_ in ((50, 20), (500, 200)):
    tk = {"predictor": {"epochs": pe, "local_epochs": 10}, "ratios": {"epochs": re_}}
    t0 = time.time()
    res = T.run_in_process(11, train_kw=tk)
    st, dr, q = T.in_process(11, train_kw=tk)
    print(pe, re_, "ratio", max(T.max_param_diff(n, st.ratios[g + 1].nets[g]) for g, n in enumerate(res.ratio_nets)),
          "pred", T.max_param_diff(res.predictor.model, st.predictor.model), "q", abs(res.thresholds - q).max(), time.time() - t0, flush=True)
