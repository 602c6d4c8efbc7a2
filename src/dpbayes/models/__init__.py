"""Conjugate Bayesian models (exact, non-private), their distributions and divergences.

``models`` never draws noise: releases in :mod:`dpbayes.release` add it to the sufficient
statistics returned by ``model.statistics(data)`` and call ``model.posterior_from(stats)``.
"""

from __future__ import annotations

from typing import Any

from dpbayes.models.bayes_net import (
    BayesNet,
    BayesNetParameters,
    BayesNetPosterior,
    BayesNetStatistics,
    NaiveBayes,
)
from dpbayes.models.beta_bernoulli import BetaBernoulli
from dpbayes.models.dirichlet_categorical import DirichletCategorical
from dpbayes.models.distributions import (
    Beta,
    Dirichlet,
    Distribution,
    Normal,
    distribution_from_dict,
)
from dpbayes.models.divergence import (
    f_divergence,
    hellinger,
    hellinger_beta,
    hellinger_dirichlet,
    kl,
    kl_beta,
    kl_dirichlet,
    log_affinity_beta,
    log_affinity_dirichlet,
    total_variation,
)
from dpbayes.models.linear_regression import (
    BayesianLinearRegression,
    MultivariateNormal,
    RegressionStatistics,
)
from dpbayes.models.logistic_regression import BayesianLogisticRegression, LogisticStatistics
from dpbayes.models.normal_mean import NormalMean
from dpbayes.models.statistics import CountStatistics, SumStatistics

__all__ = [
    "BayesNet",
    "BayesNetParameters",
    "BayesNetPosterior",
    "BayesNetStatistics",
    "BayesianLinearRegression",
    "BayesianLogisticRegression",
    "Beta",
    "BetaBernoulli",
    "CountStatistics",
    "Dirichlet",
    "DirichletCategorical",
    "Distribution",
    "LogisticStatistics",
    "Model",
    "MultivariateNormal",
    "NaiveBayes",
    "Normal",
    "NormalMean",
    "RegressionStatistics",
    "SumStatistics",
    "distribution_from_dict",
    "f_divergence",
    "hellinger",
    "hellinger_beta",
    "hellinger_dirichlet",
    "kl",
    "kl_beta",
    "kl_dirichlet",
    "log_affinity_beta",
    "log_affinity_dirichlet",
    "model_from_dict",
    "total_variation",
]

Model = BetaBernoulli | DirichletCategorical | NormalMean

MODELS: dict[str, type[Any]] = {
    BetaBernoulli.name: BetaBernoulli,
    DirichletCategorical.name: DirichletCategorical,
    NormalMean.name: NormalMean,
}


def model_from_dict(d: dict[str, Any]) -> Model:
    """Rebuild a model from its ``to_dict()`` output (``{"name": ..., <parameters>}``)."""
    if not isinstance(d, dict) or "name" not in d:
        raise TypeError("d must be a dict with a 'name' key")
    kind = MODELS.get(d["name"])
    if kind is None:
        raise ValueError(f"d['name'] must be one of {sorted(MODELS)}, got {d['name']!r}")
    params = {k: v for k, v in d.items() if k != "name"}
    return kind(**params)  # type: ignore[no-any-return]
