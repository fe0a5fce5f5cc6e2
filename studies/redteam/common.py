"Shared set-up of the red-team scripts: honest agents after the set-up message (the agreed plans), one training request."
import os, json, warnings, numpy as np, torch
warnings.simplefilter("ignore")
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, RecordDict
from flwr.supercore.task_identity import TaskIdentity
TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
from pfwcp_nb.federation.protocol import PIPE
from pfwcp_nb.federation.plan import TaskPlan, plan_tasks, initial_networks
from pfwcp_nb.federation.agreement import TrainingAgreement
from pfwcp_nb.federation.agent import agent_query, agent_train
from pfwcp_nb.federation.simulation import federation_data

def pipe_content(d: dict, arrays: dict | None = None) -> RecordDict:
    "The attacker's own builder of a pipeline message, from the wire format: ConfigRecord PIPE = {json}, ArrayRecords by name."
    rd = RecordDict({PIPE: ConfigRecord({"json": json.dumps(d, allow_nan=False)})})
    for name, arrs in (arrays or {}).items():
        rd[name] = ArrayRecord(array_dict={k: Array(np.ascontiguousarray(v.detach().numpy() if torch.is_tensor(v) else v))
                                           for k, v in arrs.items()})
    return rd

def setup(dataset="gaussian", K=3, n_train=50, n_test=100, train_kw=None, ks=(0, 1), y_mean=0.0, y_std=1.0):
    "Honest set-up of agents ks (features message with the agreed plans). Returns data, {k: ctx}, ag, plans."
    data = federation_data(dataset, K=K, seed=0, n_train=n_train, n_cal=100, n_test=n_test)
    ag = TrainingAgreement(dataset, agents=K, max_train=n_train, seed=0, train_kw=train_kw)
    d = data[0].train_X.reshape(n_train, -1).shape[1]
    plans = plan_tasks(ag.pred, ag.rat, K, d, d, None if ag.pred["task"] == "regression" else 10)
    plans[1].members, plans[1].label = [[0, j] for j in range(1, K)], [[1, 0]] * (K - 1)
    f = {"task": ag.pred["task"], "y_mean": y_mean, "y_std": y_std, "d": d, "eps": ag.rat["eps"],
         "plans": {p.name: p.to_dict() for p in plans}, "predictor": None, "ratios": None,
         "ratio_std": {"mean": [0.0] * d, "sd": [1.0] * d} if ag.rat["standardize"] else None}
    ctxs = {}
    for k in ks:
        ctxs[k] = Context(run_id=1, node_id=100 + k, node_config={"partition-id": k}, state=RecordDict(), run_config={})
        msg = {"type": "Request", "stage": "features", "features": f}
        agent_query(ctxs[k], data[k], k, msg, pipe_content(msg), ag)
    return data, ctxs, ag, {p.name: p for p in plans}, f

def train(ctx, data, k, ag, plans, rnd, start, orders=None, lockstep=True):
    "One training request; start {task: [per federation {name: array}]} (missing: seeded nets). Returns {name: arrays}."
    arrs, info = {"orders": {}}, {}
    n = len(data.train_X)
    for t, p in plans.items():
        if rnd > p.rounds or not p.replicas(k): continue
        init = start.get(t) or initial_networks(p, 0)
        info[t] = {"plan": p.to_dict(), "lockstep": lockstep}
        for g, _ in p.replicas(k):
            arrs[f"{t}-{g}"] = init[g]
            arrs["orders"][f"{t}-{g}"] = (orders or {}).get(f"{t}-{g}", np.arange(n)[None, :])
    msg = {"type": "Request", "stage": "train", "round": rnd, "tasks": info}
    rep = agent_train(ctx, data, k, msg, pipe_content(msg, arrs), ag)
    return {name: {kk: v.numpy() for kk, v in rec.items()} for name, rec in rep.array_records.items()}
