"""dpbayes: differentially private Bayesian inference.

import dpbayes as dpb
model = dpb.models.BetaBernoulli(alpha=1, beta=1)
rel = dpb.release(model, data, mechanism="laplace", epsilon=1.0)
rel.posterior, rel.guarantee
"""

from dpbayes import models, privacy
from dpbayes.privacy import Accountant, BudgetExceeded, Guarantee, Neighbours
from dpbayes.release import Release, mechanisms_for, release

__version__ = "0.1.0"

__all__ = [
    "Accountant",
    "BudgetExceeded",
    "Guarantee",
    "Neighbours",
    "Release",
    "mechanisms_for",
    "models",
    "privacy",
    "release",
]
