"""Bayesian networks, naive Bayes included (paper 004, Algorithms 1-3).

- ``laplace.py``: Algorithm 1, Laplace on the count tables.
- ``fourier.py``: Algorithm 2, Laplace on Fourier coefficients, consistent marginals.
- ``sampling.py``: posterior sampling with trimming (Lemma 2, Theorem 4.1) and the
  private MAP (Algorithm 3), exact draws by ``trimmed_dirichlet.py`` and
  ``trimmed_sampler.py`` (compiled in ``_sampling_kernels.py``).
- ``record.py``: what the releases publish (``LaplaceTablesRecord``, ``FourierRecord``,
  ``SamplingRecord``, ``MapRecord``), written by the planners and read by the inverses.
- ``noise_aware.py``: the noise-aware posterior of every release above (exact without
  edges; MCMC on the true joint table otherwise: ``gibbs.py`` drives ``sampler.py``'s
  ``init`` / ``step`` over NamedTuple states, compiled in ``_kernels.py``);
  ``noise_aware_n.py`` when n is private.
- Proofs: ``PROOF_laplace_fourier.md``, ``PROOF_sampling.md``.

Importing this package registers the mechanisms and their noise-aware posteriors.
"""

from dpbayes.release.bayes_net import (  # noqa: F401  (register)
    fourier,
    laplace,
    noise_aware,
    sampling,
)
