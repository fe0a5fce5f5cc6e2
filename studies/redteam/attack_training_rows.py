"""usage: python studies/redteam/attack_training_rows.py [dataset=gaussian] [K=3] [skip=0]   (skip=1: jump round 1 -> round R0+1) (what it does: the comments below)."""
# Red team, third review of the pipeline over Flower: a curious server that RESPECTS round_move (8e-3 per coordinate per round for the FedAdam ratio
# classifiers) reads an agent's training rows X out of its ratio-classifier updates.
# Round 1 honest (seeded nets). Rounds 2..: each coordinate moves <= 8e-3 (x 0.999) per round towards a "trap":
# every hidden unit's row = w = eps*a (one direction a, eps=1e-3), biases = -thresholds (nested along a).
# Client step: one full-batch SGD step at client_lr=1, so theta - theta' = grad + wd*theta. Per unit u:
#   dL/db_u * n / w2_u = sum_{i: w.x_i > t_u} e_i,  dL/dW_u * n / w2_u = sum_{...} e_i x_i,   e_i = sigmoid(f(x_i)) - y.
# Bins between thresholds measured in the same round give sum e and sum e*x of their rows; known rows are peeled off
# exactly (the server recomputes their e_i from the network it sent); a bin whose remainder satisfies
# e(xhat) == N (xhat = S/N) holds exactly one row -> recovered exactly. Other bins are split at their e-weighted mean.
# usage: python studies/redteam/attack_training_rows.py [dataset=gaussian] [K=3] [skip=0]   (skip=1: jump round 1 -> round R0+1)
import sys, os, time, numpy as np, torch
if sys.argv[1:] in (["-h"], ["--help"]):   # the usage line, then exit 0
    print(__doc__); sys.exit(0)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import setup, train
from pfwcp_nb.federation.plan import round_move, initial_networks
dataset = sys.argv[1] if len(sys.argv) > 1 else "gaussian"
K = int(sys.argv[2]) if len(sys.argv) > 2 else 3
SKIP = len(sys.argv) > 3 and sys.argv[3] == "1"
n = 50
data, ctxs, ag, plans, f = setup(dataset, K=K, n_train=n)
P = plans["ratios"]; H = P.hidden[0]; clr = P.client_lr; wd = P.weight_decay
STEP = round_move(P, n) * 0.999
T = P.rounds
rng = np.random.default_rng(1)
EPS = 1e-3


def net_e(net, X, y):
    m = P.make()
    with torch.no_grad():
        for k_, p in m.named_parameters(): p.copy_(torch.as_tensor(net[k_]))
        z = m(torch.as_tensor(np.asarray(X, np.float32))).reshape(-1).double()
    return (torch.sigmoid(z) - y).numpy()


def attack(k):
    ctx = ctxs[k]
    X = np.asarray(data[k].train_X, float).reshape(n, -1); d = X.shape[1]
    reps = P.replicas(k)                                # [(g, j)]
    G = len(reps)
    init = initial_networks(P, 0)
    cur = {g: {n_: v.astype(np.float64).copy() for n_, v in init[g].items()} for g, _ in reps}
    ylab = {g: float(P.label[g][j]) for g, j in reps}
    a = rng.normal(size=d); a /= np.linalg.norm(a)
    w = (EPS * a).astype(np.float32).astype(np.float64)
    # threshold grid in units of the projection p(x) = w.x (EPS*a.x); a.x ~ N(0, ~1)
    def trap(g, ts):
        t = cur[g]
        return {"0.weight": np.tile(w, (H, 1)), "0.bias": -np.asarray(ts, float), "2.weight": t["2.weight"], "2.bias": t["2.bias"]}
    def move_to(g, target, rounds):
        lim = STEP * rounds
        cur[g] = {n_: cur[g][n_] + np.clip(target[n_] - cur[g][n_], -lim, lim) for n_ in target}
        cur[g] = {n_: v.astype(np.float32).astype(np.float64) for n_, v in cur[g].items()}
    start = {g: {n_: v.astype(np.float32) for n_, v in init[g].items()} for g, _ in reps}
    full = lambda: {"ratios": [start.get(gg) or init[gg] for gg in range(len(P.members))]}
    train(ctx, data[k], k, ag, plans, 1, {})            # honest round 1
    known = []                                          # recovered rows
    grid = list(EPS * np.linspace(-3, 3, H * G - 1))
    intervals = None                                    # list of (lo, hi) unresolved (hi may be inf)
    rnd, first_round, hist = 1, None, []
    aligned_at = None
    lo0 = -EPS * 8
    while rnd < T:
        # thresholds per replica
        if intervals is None:
            plan_ts = [[lo0] + grid[:H - 1]] + [grid[(H - 1) + (gi - 1) * H:(H - 1) + gi * H] for gi in range(1, G)]
            groups = None
        else:
            plan_ts, groups = [[] for _ in range(G)], [[] for _ in range(G)]
            gi = 0
            for (lo, hi, mean) in intervals:
                need = [lo] + ([mean] if mean is not None else []) + ([hi] if np.isfinite(hi) else [])
                while gi < G and len(set(plan_ts[gi]) | set(need)) > H: gi += 1
                if gi == G: break
                plan_ts[gi] = sorted(set(plan_ts[gi]) | set(need)); groups[gi].append((lo, hi, mean))
        targets, planned = {}, {}
        for gi, (g, _) in enumerate(reps):
            ts = list(plan_ts[gi]) or [lo0]
            ts = (ts + [ts[-1]] * H)[:H]
            targets[g] = trap(g, ts); planned[g] = ts
        rs = 1
        if SKIP and aligned_at is None:
            rs = int(np.ceil(max(np.abs(targets[g][n_] - cur[g][n_]).max() for g in targets for n_ in targets[g]) / STEP)) + 1
        if rnd + rs > T: break
        for g in targets: move_to(g, targets[g], rs)
        rnd += rs
        start = {g: {n_: v.astype(np.float32) for n_, v in cur[g].items()} for g in cur}
        out = train(ctx, data[k], k, ag, plans, rnd, full())
        ok = all(np.allclose(cur[g][n_], targets[g][n_], atol=1e-12) for g in targets for n_ in targets[g])
        if not ok: continue                             # still drifting towards the trap
        if aligned_at is None: aligned_at = rnd
        meas = {}
        for gi, (g, _) in enumerate(reps):
            sent, new = start[g], out[f"ratios-{g}"]
            gb = (sent["0.bias"].astype(float) - new["0.bias"]) / clr - wd * sent["0.bias"]
            gW = (sent["0.weight"].astype(float) - new["0.weight"]) / clr - wd * sent["0.weight"]
            w2 = sent["2.weight"].astype(float)[0]
            ts = planned[g]
            ek = net_e(sent, np.array(known), ylab[g]) if known else np.zeros(0)
            pk = (np.array(known) @ sent["0.weight"][0].astype(float)) if known else np.zeros(0)
            for u in range(H):
                N = gb[u] * n / w2[u]; S = gW[u] * n / w2[u]
                act = pk + sent["0.bias"][u] > 0 if known else np.zeros(0, bool)
                # note: exact float32 activation of known rows
                if known:
                    act = (np.asarray(known, np.float32) @ sent["0.weight"][u] + sent["0.bias"][u]) > 0
                    N -= ek[act].sum(); S = S - (ek[act, None] * np.array(known)[act]).sum(0)
                meas[(gi, float(ts[u]))] = (N, S)
            meas[(gi, np.inf)] = (0.0, np.zeros(d))
        def bins(gi, edges):
            res = []
            for lo, hi in zip(edges[:-1], edges[1:]):
                N = meas[(gi, lo)][0] - meas[(gi, hi)][0]; S = meas[(gi, lo)][1] - meas[(gi, hi)][1]
                res.append((lo, hi, N, S))
            return res
        new_int = []
        sent0 = start[reps[0][0]]
        todo = []
        if groups is None:
            for gi in range(G):
                todo.append((gi, sorted(set(plan_ts[gi])) + ([np.inf] if gi == G - 1 else [])))
        else:
            for gi in range(G):
                for (lo, hi, mean) in groups[gi]:
                    todo.append((gi, [lo] + ([mean] if mean is not None else []) + [hi]))
            done = {(lo, hi) for gi in range(G) for (lo, hi, _) in groups[gi]}
            new_int += [iv for iv in intervals if (iv[0], iv[1]) not in done]
        new_int2 = []
        for gi, edges in todo:
            for (lo, hi, N, S) in bins(gi, edges):
                e0 = net_e(start[reps[gi][0]], np.zeros((1, d)), ylab[reps[gi][0]])[0]
                if abs(N) < 0.2 * abs(e0):                  # empty bin (N is a sum of e_i ~ e0 each)
                    continue
                xh = S / N
                e1 = net_e(start[reps[gi][0]], xh[None], ylab[reps[gi][0]])[0]
                p = float(np.asarray(xh, np.float32) @ start[reps[gi][0]]["0.weight"][0])
                if os.environ.get("DBG") and rnd < aligned_at + 4: print(rnd, gi, lo, hi, N, e1, p)
                if abs(e1 - N) < 2e-4 * abs(N) and lo - 1e-12 <= p <= hi:
                    known.append(xh); continue
                new_int2.append((lo, hi, p if lo < p < hi else (lo + hi) / 2 if np.isfinite(hi) else lo + EPS))
        intervals = new_int + new_int2
        # first round cross-replica edges not measured: add unresolved coverage
        if groups is None:
            for gi in range(G - 1):
                lo, hi = plan_ts[gi][-1], plan_ts[gi + 1][0]
                intervals.append((lo, hi, (lo + hi) / 2))
        intervals.sort()
        hist.append((rnd, len(known)))
        if first_round is None and known: first_round = rnd
        if not intervals: break
    R = np.array(known) if known else np.zeros((0, d))
    err = [np.min(np.max(np.abs(X - r), axis=1)) for r in R]
    idx = {int(np.argmin(np.max(np.abs(X - r), axis=1))) for r, e in zip(R, err) if e < 1e-3}
    prog = ", ".join(f"r{r}:{c}" for r, c in hist if c and (c in (1, 10, 25, 40) or r == hist[-1][0]))
    print(f"{dataset} K={K} agent {k} (d={d}, H={H}, {G} replica(s), skip={SKIP}): trap set at round {aligned_at}; "
          f"{len(idx)}/{n} distinct rows exact (max abs err {max(err) if err else float('nan'):.1e}); "
          f"last round used {rnd} of {T}; progress {prog}", flush=True)


t0 = time.time()
for k in ctxs: attack(k)
print(f"time {time.time() - t0:.1f}s")
