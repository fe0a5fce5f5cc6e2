"""usage: python studies/redteam/attack_test_weights.py [dataset=gaussian] [K=3] [mode=skip|rounds] [s=0.1] (what it does: the comments below)."""
# Red team, third review of the pipeline over Flower: the test agent's test_X through ONE test-weights answer, with ratio networks moved within round_move.
# Net g (pair [0, g+1]) is drifted from the seeded one to: unit A (init w2_A > 0) = relu(s*x_c), unit B (init w2_B < 0)
# = relu(-s*x_c), every other unit's w2 -> 0, b2 kept: logit = w2_A relu(s x_c) + w2_B relu(-s x_c) + b2, strictly
# increasing in x_c only -> the server inverts each column of the answer (bisection on its own copy of the weights).
# mode "rounds": rounds 2..T each move <= 8e-3*0.999 (then models one round later): the bound respected round by round.
# mode "skip":   round 1 (honest), then the models message at once (refused since rounds must come one after the other).
# usage: python studies/redteam/attack_test_weights.py [dataset=gaussian] [K=3] [mode=skip|rounds] [s=0.1]
import sys, os, time, numpy as np, torch
if sys.argv[1:] in (["-h"], ["--help"]):   # the usage line, then exit 0
    print(__doc__); sys.exit(0)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import setup, train, pipe_content, agent_query
from pfwcp_nb.federation.plan import round_move, initial_networks, TaskPlan
from pfwcp_nb.density_ratio import pairwise_ratio_functions, RatioFeatures
dataset = sys.argv[1] if len(sys.argv) > 1 else "gaussian"
K = int(sys.argv[2]) if len(sys.argv) > 2 else 3
mode = sys.argv[3] if len(sys.argv) > 3 else "skip"
s = float(sys.argv[4]) if len(sys.argv) > 4 else 0.1
n = 50
t0 = time.time()
# the predictor's schedule shortened to the ratio classifiers' 600 rounds: the server then sends the models after
# round 600 (with the paper's 5000 predictor rounds it would only have to go on sending honest predictor rounds)
data, ctxs, ag, plans, f = setup(dataset, K=K, n_train=n, n_test=500, ks=(0,), train_kw={"predictor": {"epochs": 600}})
P = plans["ratios"]; H = P.hidden[0]; STEP = round_move(P, n) * 0.999; T = P.rounds
init = initial_networks(P, 0); pinit = initial_networks(plans["predictor"], 0)[0]
Xt = np.asarray(data[0].test_X, float).reshape(len(data[0].test_X), -1); d = Xt.shape[1]
targets = []
for g in range(K - 1):
    c = g % d
    net = {k: v.astype(np.float64).copy() for k, v in init[g].items()}
    w2 = net["2.weight"][0]
    A, B = int(np.argmax(w2)), int(np.argmin(w2))
    for u in range(H):
        if u not in (A, B): net["2.weight"][0, u] = 0.0
    net["0.weight"][A] = 0; net["0.weight"][A, c] = s; net["0.bias"][A] = 0
    net["0.weight"][B] = 0; net["0.weight"][B, c] = -s; net["0.bias"][B] = 0
    targets.append(net)
need = max(np.abs(t[k] - init[g][k]).max() for g, t in enumerate(targets) for k in t)
print(f"trap needs a move of {need:.3f} per coordinate = {int(np.ceil(need / STEP))} rounds of round_move {STEP / 0.999:.3g}")
ctx = ctxs[0]
train(ctx, data[0], 0, ag, plans, 1, {})
cur = [{k: v.astype(np.float64) for k, v in init[g].items()} for g in range(K - 1)]
if mode == "rounds":
    for rnd in range(2, T + 1):
        cur = [{k: (c_[k] + np.clip(t[k] - c_[k], -STEP, STEP)).astype(np.float32).astype(np.float64) for k in c_}
               for c_, t in zip(cur, targets)]
        train(ctx, data[0], 0, ag, plans, rnd, {"ratios": [{k: v.astype(np.float32) for k, v in c_.items()} for c_ in cur]})
    lim = STEP
else:
    lim = T * STEP
final = [{k: (c_[k] + np.clip(t[k] - c_[k], -lim, lim)).astype(np.float32) for k in c_} for c_, t in zip(cur, targets)]
print("trap reached exactly:", all(np.allclose(fi[k], t[k], atol=1e-7) for fi, t in zip(final, targets) for k in t))
arrs = {"predictor-0": pinit, **{f"ratios-{g}": final[g] for g in range(K - 1)}}
msg = {"type": "Request", "stage": "models"}
agent_query(ctx, data[0], 0, msg, pipe_content(msg, arrs), ag)
msg = {"type": "Request", "stage": "test-weights", "agents": list(range(K))}
rep = agent_query(ctx, data[0], 0, msg, pipe_content(msg), ag)
W = rep.array_records["test-weights"]["w"].numpy()
# server side: invert each column with its own copy of the weight functions
nets = []
for g in range(K - 1):
    m = P.make()
    with torch.no_grad():
        for k, p in m.named_parameters(): p.copy_(torch.as_tensor(final[g][k]))
    nets.append(m.eval())
fns = pairwise_ratio_functions(nets, RatioFeatures(None), d, f["eps"])
errs, cols = [], []
for g in range(K - 1):
    c = g % d
    lo, hi = np.full(len(Xt), -20.0), np.full(len(Xt), 20.0)
    for _ in range(60):
        mid = (lo + hi) / 2
        Z = np.zeros((len(Xt), d)); Z[:, c] = mid
        v = fns[g + 1](Z)
        up = v < W[:, g + 1] if fns[g + 1](np.eye(d)[[c]] * 1)[0] > fns[g + 1](np.zeros((1, d)))[0] else v > W[:, g + 1]
        lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
    xr = (lo + hi) / 2
    errs.append(np.abs(xr - Xt[:, c]).max()); cols.append(c)
print(f"{dataset} K={K} mode={mode} s={s}: {len(set(cols))} of {d} coordinates of all {len(Xt)} test points from one "
      f"test-weights answer; max abs error {max(errs):.1e} (per column {np.round(errs, 7).tolist()}); {time.time() - t0:.0f}s")
