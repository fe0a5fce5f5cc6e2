"""The agents' query budgets fail closed: a corrupt state file (a NaN or negative count, a level out of
range, text that is not JSON) refuses every request with a ValueError naming the file; the budget is checked before the
request's test weights are."""
import json

import pytest
from flwr.app import Context, RecordDict

from pfwcp_nb.federation.agreement import TrainingAgreement, _spend
from pfwcp_nb.federation.protocol import request
from pfwcp_nb.query_policy import QueryPolicy, QueryRefused

GOOD = {"test_weights": 3, "oneshot": 1, "level": 0.05}
CORRUPT = ['{"test_weights": NaN, "oneshot": 0, "level": null}', '{"test_weights": -1000000000, "oneshot": 0, "level": null}',
           '{"test_weights": "3", "oneshot": 0, "level": null}', '{"test_weights": 3, "oneshot": 0, "level": Infinity}',
           '{"test_weights": 3, "oneshot": 0, "level": 2.0}', '{"test_weights": 3.5, "oneshot": 0, "level": null}',
           '{"test_weights": true, "oneshot": 0, "level": null}', '{"test_weights": 3, "oneshot": 0', "\xff\xfe", "[]"]


@pytest.mark.parametrize("text", CORRUPT)
def test_a_corrupt_policy_state_refuses_everything_naming_the_file(tmp_path, text):
    state = tmp_path / "agent_1.queries.json"
    state.write_text(json.dumps(GOOD))
    QueryPolicy(state=state)                                           # a good file is read
    state.write_text(text, encoding="latin-1")
    with pytest.raises(ValueError, match=str(state)):
        QueryPolicy(state=state)
    ok = QueryPolicy()                                                 # a policy made before the file went bad
    ok.state = state
    with pytest.raises(ValueError, match=str(state)):
        ok.admit(request("summary"))


def test_the_budget_is_checked_before_the_test_weights(tmp_path):
    p = QueryPolicy(max_test_weights=10)
    b = float(p.levels[0])
    big = {**request("message", beta=b, test_weights=[1.0]), "test_weights": ["x"] + [1.0] * 2_000_000}
    with pytest.raises(QueryRefused, match=r"2000001 test weights asked, 10 left"):
        p.admit(big)
    with pytest.raises(QueryRefused, match="finite numbers >= 0"):       # within the budget, the elements are checked
        p.admit({**big, "test_weights": ["x", 1.0]})


@pytest.mark.parametrize("text", ['{"predict": NaN}', '{"predict": -5}', '{"predict": 1', '{"predict": 1.0}', '[1]'])
def test_a_corrupt_pipeline_budget_refuses_naming_the_file(tmp_path, text):
    state = tmp_path / "agent_0.npz.pipeline.json"
    ag = TrainingAgreement("gaussian", agents=3, max_train=20, runs=2, state=state)
    ctx = Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})
    _spend(ctx, ag, "predict", "agent 0")
    assert json.loads(state.read_text()) == {"predict": 1}
    state.write_text(text)
    with pytest.raises(ValueError, match=f"agent 0: {state}"):
        _spend(ctx, ag, "predict", "agent 0")
