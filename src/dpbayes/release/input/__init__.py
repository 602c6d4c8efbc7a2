"""Input perturbation: privatise every record, then infer (paper 002 §6.1).

- ``mechanism.py``: randomized response on booleans, Gaussian noise on bounded values;
  proof in ``PROOF.md``.
- ``record.py``: what the releases publish (``InputCoinRecord``, ``InputNormalRecord``).
- ``noise_aware.py``: the exact noise-aware posteriors for the recipient.

Importing this package registers the mechanism and its noise-aware posterior.
"""

from dpbayes.release.input import mechanism, noise_aware  # noqa: F401  (register)
