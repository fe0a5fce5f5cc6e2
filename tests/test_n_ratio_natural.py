"""Ratios on more covariates (`train_setup(n_ratio=...)`) and the natural federations in the harness: the paper's run
is unchanged bit for bit, only the ratio models move, the cache keys tell the settings apart, and a natural federation
runs through `pipeline`, the grid and `pfwcp-experiments` at its own level and K."""
import json
import subprocess
import sys

import numpy as np
import pytest

from pfwcp_nb.cache import RunConfig
from pfwcp_nb.data import DATASET_SPECS, NATURAL, NATURAL_DATASETS, make_federation
from pfwcp_nb.grid import GridSpec
from pfwcp_nb.pipeline import alone_setup, ratio_covariates, sample_draw, train_setup
from pfwcp_nb.models import training_split

TINY = {"predictor": {"epochs": 20}, "ratios": {"hparams": "paper", "epochs": 20}}


def _setup(**kw):
    return train_setup("gaussian", K=3, n_train=20, train_kw=TINY, need_localizer=False, progress=False, **kw)


def _flat(st, sim=0):
    d = sample_draw(st, make_federation("gaussian", K=3), sim, n_cal=15, n_test=10)["estimated"]
    return np.concatenate([np.concatenate(d.cal_scores), np.concatenate(d.cal_weights), d.test_weights.ravel()])


@pytest.mark.slow
def test_n_ratio_moves_only_the_ratio_models():
    paper, same, more = _setup(), _setup(n_ratio=20), _setup(n_ratio=60)
    assert (paper.n_ratio, same.n_ratio, more.n_ratio) == (None, None, 60)
    np.testing.assert_array_equal(_flat(paper), _flat(same))                     # n_ratio = n_train: the paper's run
    X = np.random.default_rng(0).standard_normal((7, 10))
    np.testing.assert_array_equal(paper.predictor.predict(X), more.predictor.predict(X))   # the predictor is the same
    a, b = sample_draw(paper, make_federation("gaussian", K=3), 1)["estimated"], \
        sample_draw(more, make_federation("gaussian", K=3), 1)["estimated"]
    np.testing.assert_array_equal(a.test_scores, b.test_scores)                  # the same draw, scored the same
    assert not np.allclose(a.test_weights[:, 1:], b.test_weights[:, 1:])         # other ratios
    again = train_setup("gaussian", K=3, n_train=20, train_kw=TINY, need_localizer=False, progress=False,
                        n_ratio=60, base=paper)                                   # the paper's predictor reused
    assert again.predictor is paper.predictor and again.ratios is not paper.ratios
    np.testing.assert_array_equal(_flat(again), _flat(more))


def test_ratio_covariates_leave_the_training_split_alone():
    fed = make_federation("gaussian", K=3)
    X = training_split(fed, 20, 0)[0]
    Xr = ratio_covariates(fed, X, 45, 0)
    assert [x.shape for x in Xr] == [(45, 10)] * 3
    for k in range(3):
        np.testing.assert_array_equal(Xr[k][:20], X[k])
        np.testing.assert_array_equal(training_split(fed, 20, 0)[0][k], X[k])
    with pytest.raises(ValueError, match="`n_ratio` must be an integer >= n_train = 20"):
        ratio_covariates(fed, X, 10, 0)


@pytest.mark.slow
def test_the_test_agent_alone_scores_the_same_points():
    st = _setup()
    one = alone_setup(st, n_train=20)
    fed = make_federation("gaussian", K=3)
    a, b = sample_draw(st, fed, 2, n_cal=15, n_test=10)["estimated"], sample_draw(one, fed, 2, n_cal=15, n_test=10)["estimated"]
    assert a.cal_scores[0].shape == b.cal_scores[0].shape and not np.allclose(a.test_scores, b.test_scores)
    np.testing.assert_array_equal(b.test_weights, 1.0)
    X = training_split(fed, 20, 0)[0][0]          # its predictor saw only agent 0's training points
    assert one.alone and one.predictor.predict(X).shape == (20,)


def test_cache_keys_name_n_ratio():
    assert RunConfig("gaussian", n_ratio=50) == RunConfig("gaussian")
    assert "-n200" in RunConfig("gaussian", n_ratio=200).setup_key()
    assert "-n200" not in RunConfig("gaussian").setup_key()


def test_grid_runs_a_natural_federation_at_its_level_and_K():
    plan = GridSpec(["gaussian", "bike-season"], ["CP"], ["mc"], heterogeneity=["severe", "mild"]).plan()
    got = [(c.dataset, c.heterogeneity, c.K) for c, _ in plan]
    assert got == [("gaussian", "severe", 11), ("gaussian", "mild", 11), ("bike-season", NATURAL, 8)]
    with pytest.raises(ValueError, match="no true density ratios"):
        GridSpec(["bike-season"], ["PFWCP"], ["mc"], weights=["estimated", "oracle"])
    with pytest.raises(ValueError, match="`n_ratio` must be >= n_train"):
        GridSpec(["gaussian"], ["CP"], ["mc"], n_ratio=10)


@pytest.mark.slow
@pytest.mark.parametrize("name", NATURAL_DATASETS)
def test_a_natural_federation_through_the_pipeline(name, require_dataset):
    root = require_dataset(name)
    st = train_setup(name, train_kw=TINY, need_localizer=False, progress=False, data_dir=root, n_train=10)
    fed = make_federation(name, data_dir=root)
    assert (st.K, st.heterogeneity) == (len(DATASET_SPECS[name].agents), NATURAL)
    d = sample_draw(st, fed, 0, n_cal=12, n_test=9, own_weights=True)["estimated"]
    assert d.K == fed.K and d.own_test_weights.shape == (12, fed.K)
    with pytest.raises(ValueError, match="oracle ratios exist for"):
        sample_draw(st, fed, 0, n_cal=12, n_test=9, weights=("oracle",))


@pytest.mark.slow
def test_pfwcp_experiments_runs_a_natural_federation(tmp_path, require_dataset):
    root = require_dataset("airfoil")
    r = subprocess.run([sys.executable, "-m", "pfwcp_nb.runner", "--datasets", "airfoil-velocity", "--methods", "CP",
                        "PFWCP", "--guarantee", "mc", "--n-sims", "2", "--n-test", "20", "--no-figures", "--no-progress",
                        "--train-kw", json.dumps(TINY), "--n-ratio", "60", "--data-dir", str(root),
                        "--out", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    import pandas as pd
    res = pd.read_csv(tmp_path / "results.csv")
    assert set(res.dataset) == {"airfoil-velocity"} and set(res.heterogeneity) == {NATURAL}
