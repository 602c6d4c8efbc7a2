"""Bayesian linear regression by posterior sampling (paper 004 §5.2).

- ``mechanism.py``: the planner (draws from the truncated, tempered posterior); exact
  draws on a public lattice by ``lattice_gaussian.py``; proof in ``PROOF.md``.
- ``record.py``: what the release publishes (``RegressionSamplingRecord``).
- ``noise_aware.py``: the noise-aware posterior (MCMC, compiled in ``_kernels.py``).

Importing this package registers the mechanism and its noise-aware posterior.
"""

from dpbayes.release.regression import mechanism, noise_aware  # noqa: F401  (register)
