"""Privacy core: noise sources, mechanisms, guarantees, the budget accountant.

This is the only package in dpbayes that draws random numbers or counts budget. It
knows nothing about Bayesian models.
"""

from dpbayes.privacy.accountant import Accountant, BudgetExceeded, LedgerError, Spend
from dpbayes.privacy.guarantee import (
    Guarantee,
    Neighbours,
    PrivacyLeakWarning,
    compose_sequential,
)
from dpbayes.privacy.mechanisms import (
    ExponentialMechanism,
    GaussianMechanism,
    GeometricMechanism,
    LaplaceMechanism,
    Noisy,
    RandomizedResponse,
    analytic_gaussian_epsilon,
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
)
from dpbayes.privacy.noise import NoiseSource, SecureNoise, SimulatedNoise, noise_source

__all__ = [
    "Accountant",
    "BudgetExceeded",
    "ExponentialMechanism",
    "GaussianMechanism",
    "GeometricMechanism",
    "Guarantee",
    "LaplaceMechanism",
    "LedgerError",
    "Neighbours",
    "NoiseSource",
    "Noisy",
    "PrivacyLeakWarning",
    "RandomizedResponse",
    "SecureNoise",
    "SimulatedNoise",
    "Spend",
    "analytic_gaussian_epsilon",
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "compose_sequential",
    "noise_source",
]
