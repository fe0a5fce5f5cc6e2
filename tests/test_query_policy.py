"The agent's query policy (`pfwcp_nb.query_policy`): a curious or malicious server's requests outside the policy are refused before anything is computed, budgets hold across restarts, and the score-recovery attack is bounded."
import json
import multiprocessing as mp

import numpy as np
import pytest

from pfwcp_nb.federation.agent import agent_reply
from pfwcp_nb.federation.protocol import request
from pfwcp_nb.oneshot import OneShotPFWCP
from pfwcp_nb.pfwcp import AgentCalibration
from pfwcp_nb.procedure import paper_grid
from pfwcp_nb.quantiles import weighted_quantile
from pfwcp_nb.query_policy import QueryPolicy, QueryRefused, recovered_scores

BETAS = paper_grid(0.1)[0]


def agent(seed=0, n=100, ones=False):
    rng = np.random.default_rng(seed)
    return rng.gamma(2.0, size=n), (None if ones else rng.lognormal(size=n))


class Spy(AgentCalibration):
    "An agent that records whether it computed anything."
    computed = 0

    def message(self, *a, **k):
        Spy.computed += 1
        return super().message(*a, **k)

    def oneshot_message(self, *a, **k):
        Spy.computed += 1
        return super().oneshot_message(*a, **k)


@pytest.mark.parametrize("req, policy, match", [
    (request("message", beta=0.99, test_weights=[1.0]), {}, "`beta`=0.99 is not a level of the agreed grid"),
    (request("message", beta=float(BETAS[0]) + 1e-9, test_weights=[1.0]), {}, "not a level of the agreed grid"),
    (request("message", beta=0.2, test_weights=[1.0]), dict(levels=[0.1]), "not a level"),
    (request("message", beta=float(BETAS[2]), test_weights=[1.0] * 11), dict(max_test_weights=10), "11 test weights asked, 10 left"),
    (request("message", beta=float(BETAS[2]), test_weights=[1.0, 3.0]), dict(test_agent=True), "the test agent's weights are all 1"),
    ({**request("message", beta=float(BETAS[2]), test_weights=[1.0]), "test_weights": [-1.0]}, {}, "finite numbers >= 0"),
    ({**request("message", beta=float(BETAS[2]), test_weights=[1.0]), "test_weights": ["inf"]}, {}, "finite numbers >= 0"),
    ({**request("message", beta=float(BETAS[2]), test_weights=[1.0]), "test_weights": []}, {}, "non-empty"),
    ({**request("message", beta=float(BETAS[2]), test_weights=[1.0]), "beta": "0.1"}, {}, "`beta` must be a finite number"),
    ({**request("oneshot", beta_breve=0.1), "beta_breve": 1.5}, {}, "`beta_breve` must be a number in (0, 1)"),
    ({**request("summary"), "ask": "scores"}, {}, "`ask`='scores' is not a pfwcp request"),
    ({**request("summary"), "give": "all"}, {}, "has exactly"),
])
def test_requests_outside_the_policy_are_refused_before_computing(req, policy, match):
    Spy.computed = 0
    s, w = agent()
    with pytest.raises(QueryRefused, match=__import__("re").escape(match)):
        agent_reply(Spy(s, w), req, QueryPolicy(**policy))
    assert Spy.computed == 0


def test_over_budget_queries_are_refused_and_nothing_is_charged_for_a_refusal():
    s, w = agent()
    pol = QueryPolicy(max_test_weights=5, max_oneshot=1)
    b = float(BETAS[4])
    agent_reply(AgentCalibration(s, w), request("message", beta=b, test_weights=[1.0, 2.0, 3.0]), pol)
    with pytest.raises(QueryRefused, match="3 test weights asked, 2 left"):
        agent_reply(AgentCalibration(s, w), request("message", beta=b, test_weights=[1.0, 2.0, 3.0]), pol)
    assert pol.used["test_weights"] == 3
    agent_reply(AgentCalibration(s, w), request("message", beta=b, test_weights=[4.0, 5.0]), pol)   # exactly the rest
    agent_reply(AgentCalibration(s, w), request("oneshot", beta_breve=0.09), pol)
    with pytest.raises(QueryRefused, match="max_oneshot=1"):
        agent_reply(AgentCalibration(s, w), request("oneshot", beta_breve=0.09), pol)
    with pytest.raises(QueryRefused, match="0 left"):
        agent_reply(AgentCalibration(s, w), request("message", beta=b, test_weights=[1.0]), pol)
    assert agent_reply(AgentCalibration(s, w), request("summary"), pol)["type"] == "AgentSummary"   # no score: answered


def test_lock_level_answers_only_the_first_level():
    s, w = agent()
    pol = QueryPolicy(lock_level=True)
    agent_reply(AgentCalibration(s, w), request("message", beta=float(BETAS[5]), test_weights=[1.0]), pol)
    with pytest.raises(QueryRefused, match="lock_level"):
        agent_reply(AgentCalibration(s, w), request("message", beta=float(BETAS[6]), test_weights=[1.0]), pol)


def test_the_budget_survives_a_new_run_and_a_new_process(tmp_path):
    state = tmp_path / "agent_3.queries.json"
    b = float(BETAS[1])
    QueryPolicy(max_test_weights=4, max_oneshot=1, state=state).admit(request("message", beta=b, test_weights=[1.0] * 3))
    QueryPolicy(max_test_weights=4, max_oneshot=1, state=state).admit(request("oneshot", beta_breve=0.1))
    again = QueryPolicy(max_test_weights=4, max_oneshot=1, state=state)       # what a new flwr-clientapp process sees
    assert json.loads(state.read_text()) == {"test_weights": 3, "oneshot": 1, "level": b}
    with pytest.raises(QueryRefused, match="2 test weights asked, 1 left"):
        again.admit(request("message", beta=b, test_weights=[1.0, 1.0]))
    with pytest.raises(QueryRefused, match="max_oneshot=1"):
        again.admit(request("oneshot", beta_breve=0.1))
    state.write_text('{"test_weights": 0}')
    with pytest.raises(ValueError, match="not a query-policy state"):
        QueryPolicy(state=state)


@pytest.mark.parametrize("kw, match", [
    (dict(levels=[]), "non-empty"), (dict(levels=[0.1, 1.0]), "in \\(0, 1\\)"), (dict(levels=[np.nan]), "levels"),
    (dict(max_test_weights=0), "max_test_weights"), (dict(max_oneshot=-1), "max_oneshot"), (dict(alpha=1.0), "alpha"),
])
def test_bad_policy_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        QueryPolicy(**kw)


@pytest.mark.parametrize("seed", range(10))
def test_score_recovery_attack(seed):
    # the score-recovery attack: one crafted request per level, sweeping the test weight, recovers every score of an agent
    # that answers everything; under the default policy only scores at or above its weighted (1 - 1/4)-quantile,
    # and the test agent (weights 1, test weight 1 only) gives at most one score per grid level
    s, w = agent(seed)
    assert recovered_scores(s, w, None) == 100
    top = weighted_quantile(np.sort(s), np.asarray(w)[np.argsort(s)], alpha=BETAS.max())
    got = recovered_scores(s, w, QueryPolicy())
    assert 0 < got <= int((s >= top).sum()) < 100
    s1, _ = agent(seed + 100, ones=True)
    assert recovered_scores(s1, None, QueryPolicy(test_agent=True)) <= BETAS.size + 2    # + max_oneshot one-shot answers
    assert recovered_scores(s1, None, QueryPolicy(test_agent=True, lock_level=True)) <= 1 + 2
    assert recovered_scores(s1, None, QueryPolicy(test_agent=True, lock_level=True, max_oneshot=1)) <= 1 + 1
    assert recovered_scores(s, w, QueryPolicy(max_test_weights=30)) <= 30 + 2


def test_recovered_score_counts_over_seeds_are_reported(capsys):
    # the numbers quoted in notebook 03b_query_policy and the README: 100 agents' worth of seeds, default policy
    counts = np.array([recovered_scores(*agent(seed), QueryPolicy()) for seed in range(100)])
    test1 = np.array([recovered_scores(agent(seed, ones=True)[0], None, QueryPolicy(test_agent=True)) for seed in range(100)])
    print(f"default policy: recovered {counts.min()}-{counts.max()} of 100 scores (median {np.median(counts):.0f}); "
          f"test agent: {test1.min()}-{test1.max()}")
    assert counts.max() < 100 and test1.max() <= BETAS.size + 2


def test_answer_all_is_explicit_and_admits_any_level():
    pol = QueryPolicy.answer_all()
    pol.admit(request("message", beta=0.99, test_weights=[1e9] * 5000))
    assert repr(pol) == "QueryPolicy.answer_all()"
    with pytest.raises(QueryRefused, match="must lie in"):
        pol.admit({**request("message", beta=0.5, test_weights=[1.0]), "beta": 1.0})
    assert not QueryPolicy().any_level


def test_oneshot_level_outside_the_agreed_levels_is_refused_so_the_lowest_score_stays_home():
    # red team finding 1: beta_breve = 0.999999 was answered with the agent's minimum score (and the weight above it)
    s, w = agent()
    for pol in (QueryPolicy(), QueryPolicy(n1=100)):
        Spy.computed = 0
        for bb in (0.999999, 0.5, 0.26):
            with pytest.raises(QueryRefused, match=r"`beta_breve`=.* is not an agreed one-shot level"):
                agent_reply(Spy(s, w), request("oneshot", beta_breve=bb), pol)
        assert Spy.computed == 0 and pol.used["oneshot"] == 0
    # with n1 agreed, exactly osPFWCP's levels (notebook 03: cp-rank MC and CCC, a grid level for procedure1)
    summaries = [AgentCalibration(*agent(k, ones=(k == 0))).summary() for k in range(3)]
    pol = QueryPolicy(n1=100, max_oneshot=10)
    for delta in (None, 0.1):
        level = OneShotPFWCP(0.1, delta).plan(summaries)
        pol.admit(request("oneshot", beta_breve=level))
    with pytest.raises(QueryRefused, match="not an agreed one-shot level"):
        pol.admit(request("oneshot", beta_breve=0.06))   # in (0, 1/4], but not osPFWCP's level for n1 = 100
    with pytest.raises(ValueError, match="oneshot_levels"):
        QueryPolicy(oneshot_levels=[0.1, 1.0])


def _spend(state, n):
    ok = 0
    for _ in range(n):
        try:
            QueryPolicy(max_test_weights=60, state=state).admit(request("message", beta=float(BETAS[0]), test_weights=[1.0]))
            ok += 1
        except QueryRefused:
            pass
    return ok


def test_two_policies_sharing_a_state_file_cannot_both_spend_the_budget(tmp_path):
    # red team finding 7: two QueryPolicy objects loaded before either saved both answered 5 + 5 of a budget of 5
    state = tmp_path / "q.json"
    a, b = QueryPolicy(max_test_weights=5, state=state), QueryPolicy(max_test_weights=5, state=state)
    a.admit(request("message", beta=float(BETAS[0]), test_weights=[1.0] * 5))
    with pytest.raises(QueryRefused, match="5 test weights asked, 0 left"):
        b.admit(request("message", beta=float(BETAS[0]), test_weights=[1.0] * 5))
    assert json.loads(state.read_text())["test_weights"] == 5
    # two processes racing on one file (fcntl.flock around load-admit-save): exactly the budget is spent
    state2 = tmp_path / "race.json"
    with mp.get_context("fork").Pool(2) as pool:
        answered = sum(pool.starmap(_spend, [(state2, 50), (state2, 50)]))
    assert answered == 60 and json.loads(state2.read_text())["test_weights"] == 60
