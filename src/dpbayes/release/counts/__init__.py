"""Noise on posterior counts and means (paper 002 §6.2; paper 004 Algorithm 1 for one node).

Laplace, geometric (discrete Laplace) and Gaussian noise on the counts of a Beta-Bernoulli
or Dirichlet-categorical model, and on the posterior mean of a Normal model; substitute
(n public) or add/remove and user-level data (n private).

- ``mechanism.py``: the planners (sensitivities, truncation, the guarantee); proof in
  ``PROOF.md``.
- ``record.py``: what the releases publish (``CountsRecord``, ``NormalMeanRecord``),
  written by the planners and read by the noise-aware posteriors.
- ``noise_aware.py``: the exact noise-aware posteriors of the counts (n public), with the
  coin's ladder mixture in ``coin.py``; ``private_n.py`` when n is private.
- ``normal.py``, ``normal_n.py``: the Normal mean's noise-aware posteriors.
- ``_kernels.py``, ``_private_n_kernels.py``: their compiled inner loops (numba).

Importing this package registers the mechanisms and their noise-aware posteriors.
"""

from dpbayes.release.counts import mechanism, noise_aware  # noqa: F401  (register)
