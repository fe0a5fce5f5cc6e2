"""The ratio fits' minibatch: one full-batch local step per round by default (no client drift), the paper's sizes
unchanged, bad values refused; the selected ratio model cross-fitted and read by the label-free evidence."""
import numpy as np
import pytest

from pfwcp_nb.density_ratio import gaussian_oracle_ratio
from pfwcp_nb.federation.plan import FULL_BATCH, TaskPlan, ratio_plan_batch
from pfwcp_nb.ratio_evidence import crossfit_evidence
from pfwcp_nb.ratio_fit import fit_density_ratios, ratio_batch
from pfwcp_nb.ratio_selection import fit_selected_ratios, ratio_candidates


def _agents(n, shift=1.0, d=2, seed=5):
    rng = np.random.default_rng(seed)
    return [rng.normal(0.0, 1, size=(n, d)), rng.normal(shift, 1, size=(n, d))]


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "200", [64]])
def test_ratio_batch_refuses_bad_values(bad):
    with pytest.raises(ValueError, match="batch_size="):
        ratio_batch(bad, [np.zeros((5, 2))])


def test_ratio_batch_full_covers_every_client():
    "None: at least every client's data (one_vs_rest's own client holds its points twice)."
    F = [np.zeros((7, 2)), np.zeros((31, 2)), np.zeros((3, 2))]
    assert ratio_batch(None, F) >= 2 * 31 and ratio_batch(9, F) == 9


def test_paper_sizes_unchanged():
    "At the paper's 50 points per agent the old default (200) was one full batch already: the same fit, bit for bit."
    X = _agents(50)
    a = fit_density_ratios(X, seed=3, epochs=50, progress=False)
    b = fit_density_ratios(X, seed=3, epochs=50, batch_size=200, progress=False)
    np.testing.assert_array_equal(a[1].log(X[0]), b[1].log(X[0]))


def test_full_batch_removes_client_drift():
    "Each client holds one class: minibatches (several local steps a round) give a flatter fit than the full batch."
    X, orc = _agents(1000), gaussian_oracle_ratio(np.zeros(2), np.full(2, 1.0))
    Xe = np.random.default_rng(9).normal(0.0, 1, size=(3000, 2))
    lo = orc.log(Xe) - orc.log(Xe).mean()

    def slope(bs):
        le = fit_density_ratios(X, seed=0, batch_size=bs, standardize=False, progress=False)[1].log(Xe)
        le = le - le.mean()
        return float(le @ lo / (le @ le))
    full, mini = slope(None), slope(200)
    assert mini > 1.1 and abs(full - 1) < abs(mini - 1), (full, mini)


def test_flower_plan_carries_the_full_batch():
    assert ratio_plan_batch(None) == FULL_BATCH and ratio_plan_batch(64) == 64
    d = dict(name="ratios", d_in=2, hidden=[4], d_out=1, activation="relu", loss="bce", rounds=3, local_epochs=1,
             batch_size=FULL_BATCH, lr=1e-3, weight_decay=1e-4, server_optimizer="adam", client_lr=1.0,
             members=[[0, 1]], label=[[1, 0]], dp=None)
    assert TaskPlan.from_dict(d).batch_size == FULL_BATCH
    with pytest.raises(ValueError, match="invalid task plan"):
        TaskPlan.from_dict({**d, "batch_size": FULL_BATCH + 1})


def test_selected_ratios_crossfitted_feed_the_evidence():
    "fit_selected_ratios(crossfit=2): out-of-fold log-ratios on every agent, fold fits at the test agent, evidence readable."
    rng = np.random.default_rng(2)
    X = [rng.normal(m, 1, size=(60, 3)) for m in (0.0, 0.4, -0.4)]
    cands = [c for c in ratio_candidates("gaussian") if c.name in ("linear-std-wd0.01", "mlp-std-wd0.01-e200")]
    r = fit_selected_ratios(X, seed=0, candidates=cands, folds=2, crossfit=2)
    assert r[1].hparams["crossfit"] == 2 and r[1].oof_own.shape == (60,) and r[2].fold_log(X[0]).shape == (2, 60)
    ev = crossfit_evidence(r, X, features=r[1].features.transform)
    assert ev.K == 3 and ev.usable[0] and np.all(np.isfinite(ev.log_noise))
    with pytest.raises(ValueError, match="crossfit"):
        fit_selected_ratios(X, seed=0, candidates=cands, folds=2, crossfit=0)
