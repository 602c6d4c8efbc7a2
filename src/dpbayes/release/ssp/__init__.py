"""Sufficient-statistics perturbation for regressions: ``mechanism="ssp"``.

Linear regression (Bernstein & Sheldon 2019) and logistic regression with the PASS-GLM
quadratic likelihood (Huggins et al. 2017; Kulkarni et al. 2021): the sufficient
statistics, clipped by public bounds, released once with Laplace (eps-DP) or Gaussian
((eps, delta)-DP) noise (:mod:`.mechanism`, publishing the facts of :mod:`.record`);
naive and noise-aware posteriors (:mod:`.noise_aware`). The guarantee, line by line
against the code: ``PROOF.md``. Importing this package registers the planners and the
noise-aware posteriors.
"""

from dpbayes.release.ssp.mechanism import (
    plan_linear_ssp,
    plan_logistic_ssp,
    quadratic_l1_sensitivity,
    quadratic_l2_sensitivity,
)
from dpbayes.release.ssp.noise_aware import (
    LogisticNoiseAwarePosterior,
    SSPNoiseAwarePosterior,
    linear_ssp_noise_aware,
    logistic_ssp_noise_aware,
)

__all__ = [
    "LogisticNoiseAwarePosterior",
    "SSPNoiseAwarePosterior",
    "linear_ssp_noise_aware",
    "logistic_ssp_noise_aware",
    "plan_linear_ssp",
    "plan_logistic_ssp",
    "quadratic_l1_sensitivity",
    "quadratic_l2_sensitivity",
]
