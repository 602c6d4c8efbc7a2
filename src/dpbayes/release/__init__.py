"""Private posterior releases (papers 002, 003, 004).

``release(model, data, *, mechanism, epsilon, ...)`` is the one entry point; each module
registers the mechanisms it implements:

- ``parameters``: Laplace / geometric / Gaussian noise on posterior parameters
  (paper 002 §6.2, paper 004 Algorithm 1 for one node).
- ``expmech``: exponential mechanism over candidate posteriors with divergence scores
  (paper 002 §6.3, paper 003).
- ``input``: input perturbation (randomized response / Gaussian per record), naive and
  noise-aware posteriors (paper 002 §6.1).
- ``bayes_net``: Laplace on the count tables of a Bayesian network (paper 004, Alg. 1).
- ``fourier``: Laplace in the Fourier domain, consistent marginals (paper 004, Alg. 2).
- ``sampling``: posterior sampling with trimming (Lemma 2) and private MAP (Alg. 3).
- ``linear_regression``: Bayesian linear regression by posterior sampling (§5.2).
"""

from dpbayes.release import (  # noqa: F401  (each module registers its mechanisms)
    bayes_net,
    expmech,
    fourier,
    input,
    linear_regression,
    parameters,
    sampling,
)
from dpbayes.release.base import Plan, Release, mechanisms_for, register, release

__all__ = ["Plan", "Release", "mechanisms_for", "register", "release"]
