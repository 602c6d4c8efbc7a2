"""Releases refuse public facts before the data are read.

A refusal that follows from the model, eps, delta and neighbours alone must not wait for
the statistics: with a missing value among the records (a data check that would answer
otherwise) the same refusal comes.
"""

from __future__ import annotations

import pytest

from dpbayes.models import BetaBernoulli, DirichletCategorical, NormalMean
from dpbayes.release import release

COIN = BetaBernoulli(alpha=1.0, beta=1.0)
THREE = DirichletCategorical(alpha=[1.0, 1.0, 1.0])
NORMAL = NormalMean(lower=-2, upper=2, prior_mean=0, prior_sd=5, noise_sd=1)


@pytest.mark.parametrize(
    ("model", "mechanism", "kwargs", "message"),
    [
        (COIN, "laplace", {"delta": 1e-6}, "delta must be 0 for the Laplace"),
        (COIN, "geometric", {"delta": 1e-6}, "delta must be 0 for the geometric"),
        (THREE, "gaussian", {}, "delta must be > 0"),
        (THREE, "laplace", {"epsilon": 1e-300}, "epsilon"),
        (NORMAL, "laplace", {"delta": 1e-6}, "delta must be 0 for the Laplace"),
        (NORMAL, "gaussian", {"neighbours": "add_remove"}, "delta must be > 0"),
        (NORMAL, "laplace", {"neighbours": "add_remove", "epsilon": 1e-300}, "too small"),
        (
            NORMAL,
            "gaussian",
            {"neighbours": "add_remove", "epsilon": 1e13, "delta": 1e-6},
            "epsilon must be at most",
        ),
        (NORMAL, "gaussian", {"epsilon": 1e13, "delta": 1e-6}, "epsilon must be at most"),
    ],
)
def test_public_refusals_come_before_the_data_checks(model, mechanism, kwargs, message):
    args = {"epsilon": 1.0, **kwargs}
    for data in ([0, 1, 1], [0, 1, None]):
        with pytest.raises(ValueError, match=message):
            release(model, data, mechanism=mechanism, **args)


def test_every_registered_release_checks_its_public_facts_before_the_data():
    """Each family's public checks (one function, shared with its planner) are registered
    as its precheck, which :func:`dpbayes.release.plan` runs before reading the data; the
    per-family tests (counts above; Bayes nets, expmech, input perturbation beside their
    code) check the refusals themselves."""
    import importlib

    from dpbayes.release import base

    for family in base.FAMILIES:
        importlib.import_module(family)
    missing = [(m.name, m.model_type.__name__) for m in base._REGISTRY.values() if not m.precheck]
    assert base._REGISTRY and not missing
