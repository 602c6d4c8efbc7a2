"""The exponential mechanism over candidate posteriors (paper 003; paper 002 §6.3).

- ``mechanism.py``: the planners (global, smooth and local sensitivity; the secure
  selection); proof in ``PROOF.md``.
- ``record.py``: what the releases publish (``ExpmechCoinRecord``,
  ``ExpmechDirichletRecord``), read by the noise-aware posterior.
- ``candidates.py``: the candidate posteriors and their divergence scores.
- ``noise_aware.py``: the exact noise-aware posterior from the selection probabilities.
- ``_kernels.py``: the compiled Hellinger scores (numba).

Importing this package registers the mechanism and its noise-aware posterior.
"""

from dpbayes.release.expmech import mechanism, noise_aware  # noqa: F401  (register)
