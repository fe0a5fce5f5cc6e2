"""PFWCP and osPFWCP: personalized federated weighted conformal prediction.

The names below are the package's top-level API. This file is written by hand (nbdev_export only rewrites the
`__version__` line): each name is imported from its module on first use (PEP 562), so `import pfwcp_nb` stays cheap
and does not load scipy, pandas, torch, matplotlib or ray before a name that needs them is used."""
__version__ = "0.1.0"

import importlib
from typing import TYPE_CHECKING

_API = {  # name -> module that defines it
    "weighted_quantile": "quantiles",
    "select_quantiles": "procedure",
    "AgentCalibration": "pfwcp",
    "PFWCP": "pfwcp",
    "AbsoluteResidual": "scores",
    "NormalizedResidual": "scores",
    "CQR": "scores",
    "LAC": "scores",
    "APS": "scores",
    "RAPS": "scores",
    "split_conformal": "methods",
    "OneShotPFWCP": "oneshot",
    "trust_check": "trust",
    "choose_gamma": "trust",
    "recommend": "trust",
    "LocalCP": "value",
    "calibrate_recommended": "value",
    "ClassConditional": "mondrian",
    "FederatedConformalRegressor": "conformal",
    "FederatedConformalClassifier": "conformal",
    "diagnose": "diagnostics",
    "fit_density_ratios": "ratio_fit",
    "load_dataset": "data",
    "run_experiment": "runner",
}
__all__ = list(_API)

def __getattr__(name: str):
    if name not in _API:
        raise AttributeError(f"module 'pfwcp_nb' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_API[name]}", __name__), name)
    globals()[name] = value            # later look-ups skip this function
    return value

def __dir__():
    return sorted(set(globals()) | set(__all__))

if TYPE_CHECKING:                      # for type checkers and IDEs; not executed at run time
    from .quantiles import weighted_quantile
    from .procedure import select_quantiles
    from .scores import AbsoluteResidual, NormalizedResidual, CQR, LAC, APS, RAPS
    from .pfwcp import AgentCalibration, PFWCP
    from .oneshot import OneShotPFWCP
    from .trust import trust_check, choose_gamma, recommend
    from .value import LocalCP, calibrate_recommended
    from .mondrian import ClassConditional
    from .conformal import FederatedConformalRegressor, FederatedConformalClassifier
    from .diagnostics import diagnose
    from .ratio_fit import fit_density_ratios
    from .methods import split_conformal
    from .data import load_dataset
    from .runner import run_experiment
