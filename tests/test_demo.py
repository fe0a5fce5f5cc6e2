"Smoke test of the pfwcp-demo console entry point (tiny sizes)."
import numpy as np
import pytest
from pfwcp_nb.demo import main, run_demo


def test_demo_cli_prints_table(capsys):
    res = main(["--n-sims", "4", "--n-test", "60", "--no-progress", "--seed", "3"])
    out = capsys.readouterr().out
    for name in ["CP", "FCP-QQ", "PFWCP-MC", "PFWCP-CCC"]:
        assert name in out
    assert list(res.index) == ["CP", "FCP-QQ", "PFWCP-MC", "PFWCP-CCC"]
    assert np.all(res.MC.between(0, 1)) and np.all(res.inf_frac.between(0, 1))


def test_demo_is_seeded():
    a = run_demo(3, 50, seed=7, progress=False)
    b = run_demo(3, 50, seed=7, progress=False)
    assert a.equals(b)


def test_demo_bad_input():
    with pytest.raises(ValueError, match="n_sims"):
        run_demo(0, 10, progress=False)
    with pytest.raises(SystemExit):
        main(["--heterogeneity", "extreme"])
