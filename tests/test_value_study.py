"""studies/value: the stored summaries are what run.py computes from the stored per-draw files (the README's tables are
generated from them: tests/test_readme_numbers.py), the end-to-end table pairs the same draws, bad arguments exit 2."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
STUDY, RESULTS = ROOT / "studies" / "value", ROOT / "results" / "value"
DRAWS = [RESULTS / "draws_n_ratio.csv.gz", RESULTS / "draws_natural.csv.gz"]


def run(*args):
    return subprocess.run([sys.executable, str(STUDY / "run.py"), *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT)


def _module(name):
    sys.path.insert(0, str(STUDY))
    try:
        spec = importlib.util.spec_from_file_location(f"value_{name}", STUDY / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(STUDY))


def test_the_summary_is_the_stored_draws(tmp_path):
    r = run("--summary", *DRAWS, "--out", tmp_path / "s.csv")
    assert r.returncode == 0, r.stderr
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "s.csv"), pd.read_csv(RESULTS / "summary_n_ratio.csv"))


def test_the_end_to_end_table_is_the_stored_draws(tmp_path):
    r = run("--end-to-end", *DRAWS, "--out", tmp_path / "e.csv")
    assert r.returncode == 0, r.stderr
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "e.csv"), pd.read_csv(RESULTS / "end_to_end.csv"))


def test_end_to_end_pairs_the_same_draws():
    "Every cell holds the three answers on the same draws; the ratio to the test agent alone is paired per draw."
    d = _module("run").load([str(p) for p in DRAWS])
    e = pd.read_csv(RESULTS / "end_to_end.csv")
    keys = ["dataset", "heterogeneity", "n1", "n_ratio", "ratio_hparams", "guarantee"]
    assert (e.groupby(keys).method.apply(set) == {"Alone", "CP", "Recommended"}).all()
    assert (e.groupby(keys).n_sims.nunique() == 1).all()
    one = e[(e.method == "CP") & np.isfinite(e.ratio_to_alone)].iloc[0]
    cell = d[(d[keys] == one[keys]).all(axis=1) & (d.weights == "estimated")]
    cp, alone = (cell[cell.method == m].set_index("sim").size_finite for m in ("CP", "Alone"))
    r = (cp / alone.reindex(cp.index)).to_numpy()
    assert np.isclose(np.nanmean(r[np.isfinite(r)]), one.ratio_to_alone)


def test_a_later_run_of_a_method_replaces_its_rows():
    "The preset re-run on the same draws (`--methods Recommended`) wins over the rows of the first run."
    mod = _module("run")
    row = dict(dataset="gaussian", heterogeneity="severe", n1=100, n_ratio=50, ratio_hparams="paper", weights="estimated",
               guarantee="ccc", inf_share=0.0, n_eff_pool=100.0, seconds=0.0)
    df = pd.DataFrame([dict(row, sim=s, method=m, coverage=c, size_finite=w) for s in (0, 1)
                       for m, c, w in (("CP", 0.95, 2.0), ("Recommended", 0.95, 2.0), ("Recommended", 0.93, 1.0))])
    s = mod.summarise(df).set_index("method")
    assert s.loc["Recommended", "ratio"] == 0.5 and s.loc["Recommended", "n_sims"] == 2


def test_bad_arguments_exit_2_with_usage():
    for args in (["--n-sims", "1", "--out", "x.csv", "--methods", "WCP"], ["--n-ratio", "20", "--out", "x.csv"],
                 ["--datasets", "mnist", "--out", "x.csv"], [], ["--table", "n-ratio"]):
        r = run(*args)
        assert r.returncode == 2 and r.stderr.startswith("usage:"), (args, r.stderr[-500:])


def test_pools_table_is_the_stored_csv():
    r = subprocess.run([sys.executable, str(STUDY / "pools.py"), "--table", str(RESULTS / "pools.csv")],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.strip() in (STUDY / "README.md").read_text()


@pytest.mark.slow
def test_selected_ratio_model_smallest_run(tmp_path):
    "`--ratio-hparams select`: the classifier chosen by federated held-out log-loss, cross-fitted, its evidence read by the preset."
    r = run("--datasets", "gaussian", "--n1", "20", "--n-sims", "2", "--n-test", "50", "--n-ratio", "100",
            "--ratio-hparams", "select", "--methods", "CP", "Recommended", "--cache", tmp_path / "cache",
            "--out", tmp_path / "d.csv")
    assert r.returncode == 0, r.stderr[-2000:]
    d = pd.read_csv(tmp_path / "d.csv")
    assert set(d.ratio_hparams) == {"select"} and set(d.method) >= {"CP", "Recommended"} and (d.n_ratio == 100).all()
    assert sorted(p.name for p in (tmp_path / "cache").glob("*select*")) == [
        "gaussian_severe_0_nratio100_select.pt", "gaussian_severe_0_nratio100_select_evidence.pt"]
