"Smoke test of the pfwcp-demo console entry point (tiny sizes); the installed script is tested in test_cli.py."
import numpy as np
import pytest
from pfwcp_nb.demo import main, run_demo


def test_demo_cli_prints_table(capsys):
    assert main(["--n-sims", "4", "--n-test", "60", "--no-progress", "--seed", "3"]) is None   # sys.exit(None): 0
    out = capsys.readouterr().out
    for name in ["CP", "FCP-QQ", "PFWCP-MC", "PFWCP-CCC"]:
        assert name in out
    res = run_demo(4, 60, seed=3, progress=False)
    assert list(res.index) == ["CP", "FCP-QQ", "PFWCP-MC", "PFWCP-CCC"]
    assert np.all(res.MC.between(0, 1)) and np.all(res.inf_frac.between(0, 1))
    assert f"{100 * res.loc['CP', 'MC']:.2f}" in out           # the printed table is this run's


def test_demo_is_seeded():
    a = run_demo(3, 50, seed=7, progress=False)
    b = run_demo(3, 50, seed=7, progress=False)
    assert a.equals(b)


@pytest.mark.parametrize("argv, opt", [(["--heterogeneity", "extreme"], "--heterogeneity"),
                                       (["--alpha", "1.5"], "--alpha"), (["--delta", "0"], "--delta"),
                                       (["--n-sims", "-1"], "--n-sims"), (["--n-test", "0"], "--n-test"),
                                       (["--seed", "-2"], "--seed"), (["--alpha", "nan"], "--alpha")])
def test_demo_bad_input(argv, opt, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: pfwcp-demo") and f"argument {opt}" in err
    with pytest.raises(ValueError, match="n_sims"):
        run_demo(0, 10, progress=False)
