"""Private posterior releases (papers 002, 003, 004).

``release(model, data, *, mechanism, epsilon, ...)`` is the one entry point; each module
registers the mechanisms it implements:

- ``parameters``: Laplace / geometric / Gaussian noise on posterior parameters
  (paper 002 §6.2, paper 004 Algorithm 1 for one node).
"""

from dpbayes.release import parameters  # noqa: F401  (registers its mechanisms)
from dpbayes.release.base import Plan, Release, mechanisms_for, register, release

__all__ = ["Plan", "Release", "mechanisms_for", "register", "release"]
