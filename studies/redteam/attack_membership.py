"""usage: python studies/redteam/attack_membership.py [--eps 8 inf] [--trials 1000] [--rounds 1] [--dataset gaussian] [--out FILE]

A server that follows the protocol decides whether a candidate row is one of an agent's training rows from the
agent's ratio-classifier update(s). The strongest adversary of differential privacy's definition: it knows the
network it sent, the agent's other 49 rows and the label, and asks of each candidate whether it is the 50th row. Per
trial the agent (agent 1 of K = 3, the package's own `agent_train`, noise from fresh OS entropy) trains on its 49 rows
plus a member drawn from its own distribution; a non-member is drawn likewise. The server scores a candidate c by the
Gaussian log-likelihood ratio of the residual r = n g - (the 49 known rows' clipped gradients):
2 <r, clip(g_c)> - |clip(g_c)|^2, summed over the rounds it watches, and names the higher-scored candidate of the
trial's pair the member; the advantage is 2 P(right) - 1 (with its s.e.; beside it 2 AUC - 1 of the scores pooled over
trials, the best threshold's TPR - FPR, and for one round the bound of its (epsilon, delta)).

--eps: the test agent's target epsilon of `privacy.private_train_kw` (inf: the paper's non-private schedule).
Exit 0 when the defence holds: at every private epsilon asked that is at most `privacy.DEFAULT_EPSILON`, the one-round
advantage is at most 0.1; 1 naming the setting otherwise; 2 on bad arguments."""
import argparse, json, math, os, sys, time
import numpy as np
import torch
if sys.argv[1:] in (["-h"], ["--help"]):
    print(__doc__); sys.exit(0)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import setup, train, pipe_content                             # noqa: E402
from flwr.app import Context, RecordDict                                  # noqa: E402
from pfwcp_nb.federation.agent import agent_query                        # noqa: E402
from pfwcp_nb.federation.plan import initial_networks                     # noqa: E402
from pfwcp_nb.federation.agent import AgentData                           # noqa: E402
from pfwcp_nb.privacy import DEFAULT_EPSILON, private_train_kw, dp_epsilon, DPConfig   # noqa: E402

K, N, AGENT = 3, 50, 1


def per_row(plan, net: dict, X: np.ndarray, label: float) -> np.ndarray:
    "Every row's gradient of the BCE loss at the network `net` (rows, parameters), flattened."
    m = plan.make()
    with torch.no_grad():
        for n_, p in m.named_parameters(): p.copy_(torch.as_tensor(net[n_]))
    out = []
    for x in np.asarray(X, np.float32):
        m.zero_grad()
        z = m(torch.as_tensor(x[None]))[:, 0]
        torch.nn.functional.binary_cross_entropy_with_logits(z, torch.full((1,), label)).backward()
        out.append(torch.cat([p.grad.reshape(-1) for _, p in m.named_parameters()]).numpy().astype(np.float64))
    return np.array(out)


def clip(G: np.ndarray, C: float | None) -> np.ndarray:
    if C is None: return G
    return G * np.minimum(1.0, C / np.maximum(np.linalg.norm(G, axis=1, keepdims=True), 1e-12))


def fresh_context(ag, f, data) -> Context:
    "A new run of the agent, after the honest set-up (features) message."
    ctx = Context(run_id=1, node_id=100 + AGENT, node_config={"partition-id": AGENT}, state=RecordDict(), run_config={})
    msg = {"type": "Request", "stage": "features", "features": f}
    agent_query(ctx, data, AGENT, msg, pipe_content(msg), ag)
    return ctx


def trial(rounds, rng, pool, world):
    "One member and one non-member: their scores over `rounds` rounds of the agent's ratio classifier."
    data, ag, plans, f = world
    ctx = fresh_context(ag, f, data[AGENT])
    P = plans["ratios"]
    C = P.dp["max_grad_norm"] if P.dp else None
    i, j = rng.choice(len(pool), 2, replace=False)
    member, non = pool[i], pool[j]
    d = data[AGENT]
    X = np.asarray(d.train_X, float).reshape(N, -1).copy()
    X[0] = member                                                          # the 50th row: the member
    mine = AgentData(X, d.train_y, d.cal_X, d.cal_y)
    (g, _), = P.replicas(AGENT)
    label = float(P.label[g][0 if P.members[g][0] == AGENT else 1])
    start, opt = None, {}
    s_mem = s_non = 0.0
    for rnd in range(1, rounds + 1):
        nets = None if start is None else {"ratios": [start] * len(P.members)}
        sent = start or initial_networks(P, 0)[g]
        out = train(ctx, mine, AGENT, ag, plans, rnd, nets or {})[f"ratios-{g}"]
        names = list(sent)
        th = np.concatenate([np.asarray(sent[n_], np.float64).reshape(-1) for n_ in names])
        new = np.concatenate([np.asarray(out[n_], np.float64).reshape(-1) for n_ in names])
        gm = (th - new) / P.client_lr - P.weight_decay * th                # the agent's (noisy) mean gradient
        G = clip(per_row(P, sent, np.vstack([X[1:], member[None], non[None]]), label), C)
        r = N * gm - G[:N - 1].sum(0)                                      # the 49 known rows removed
        s_mem += 2 * r @ G[N - 1] - G[N - 1] @ G[N - 1]
        s_non += 2 * r @ G[N] - G[N] @ G[N]
        start = server_adam(opt, sent, out, P.lr)                           # honest: FedAdam's server step
    return s_mem, s_non


def server_adam(st: dict, sent: dict, got: dict, lr: float) -> dict:
    "The honest server of FedAdam (one agent's update): one Adam step along the pseudo-gradient sent - got."
    st["t"] = st.get("t", 0) + 1
    out = {}
    for n_, v in sent.items():
        g = np.asarray(v, np.float64) - np.asarray(got[n_], np.float64)
        m = st[f"m{n_}"] = 0.9 * st.get(f"m{n_}", 0.0) + 0.1 * g
        w = st[f"v{n_}"] = 0.999 * st.get(f"v{n_}", 0.0) + 0.001 * g * g
        step = lr * (m / (1 - 0.9 ** st["t"])) / (np.sqrt(w / (1 - 0.999 ** st["t"])) + 1e-8)
        out[n_] = (np.asarray(v, np.float64) - step).astype(np.float32)
    return out


def auc(pos, neg) -> float:
    pos, neg = np.asarray(pos), np.asarray(neg)
    return float(((pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean()))


def best_gap(pos, neg) -> float:
    t = np.sort(np.concatenate([pos, neg]))
    return float(max(np.mean(np.asarray(pos) >= v) - np.mean(np.asarray(neg) >= v) for v in t))


def main(argv=None):
    p = argparse.ArgumentParser(usage=__doc__.split("\n")[0][7:])
    p.add_argument("--eps", nargs="+", default=[str(DEFAULT_EPSILON), "inf"])
    p.add_argument("--trials", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--dataset", default="gaussian")
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    try:
        eps = [float(e) for e in a.eps]
    except ValueError:
        p.error(f"--eps: numbers > 0 or inf, got {a.eps}")
    if any(not e > 0 for e in eps) or a.trials < 2 or a.rounds < 1:
        p.error("--eps must be > 0 (inf: not private), --trials >= 2, --rounds >= 1")
    rng = np.random.default_rng(39)
    data, *_ = setup(a.dataset, K=K, n_train=4000, ks=())
    pool = np.asarray(data[AGENT].train_X, float).reshape(4000, -1)        # the agent's distribution: candidates
    rows, holes = [], []
    for e in eps:
        t0 = time.time()
        kw = None if math.isinf(e) else private_train_kw(e, K)
        d_, ctxs_, ag_, plans_, f_ = setup(a.dataset, K=K, n_train=N, train_kw=kw, ks=())
        sc = [trial(a.rounds, rng, pool, (d_, ag_, plans_, f_)) for _ in range(a.trials)]
        pos, neg = [s for s, _ in sc], [s for _, s in sc]
        A = float(np.mean([(s > t) + 0.5 * (s == t) for s, t in sc]))     # the pair of the same trial: which is the member
        se = 2 * math.sqrt(max(A * (1 - A), 1 / a.trials) / a.trials)
        one = None if kw is None else dp_epsilon([(kw["ratios"]["dp"], 1)])
        row = dict(eps=e, rounds=a.rounds, trials=a.trials, paired_accuracy=A, advantage=2 * A - 1, advantage_se=se,
                   pooled_auc_advantage=2 * auc(pos, neg) - 1, best_tpr_minus_fpr=best_gap(pos, neg),
                   sigma=None if kw is None else kw["ratios"]["dp"].noise_multiplier,
                   eps_of_one_round=one, bound_one_round=None if one is None else (math.exp(one) - 1 + 2e-5) / (math.exp(one) + 1),
                   seconds=time.time() - t0)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if not math.isinf(e) and e <= DEFAULT_EPSILON and a.rounds == 1 and row["advantage"] > 0.1:
            holes.append(f"epsilon {e:g}: membership advantage {row['advantage']:.3f} from one round (target <= 0.1)")
    if a.out:
        with open(a.out, "w") as fh: json.dump(rows, fh, indent=1)
    if holes:
        print("HOLE: " + "; ".join(holes)); sys.exit(1)
    print("held: " + ", ".join(f"epsilon {r['eps']:g}: advantage {r['advantage']:.3f}" if not math.isinf(r["eps"])
                               else f"not private: advantage {r['advantage']:.3f}" for r in rows))


if __name__ == "__main__":
    main()
