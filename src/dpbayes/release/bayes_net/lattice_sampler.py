"""Posterior draws on a public lattice, selected exactly: the sampler the ``sampling``
release calls.

A continuous sampler that builds doubles from uniforms of finite precision reaches a set of
output doubles that depends on the data: with 2^52 uniforms, the inverse cdf of the
trimmed Beta posterior of a binary row reached outputs under one data set that no uniform
reaches under its neighbour (5% of the draws at eps 1, n = 1570, 1 against 2 ones; 58% at
eps 20), an unbounded privacy loss (Mironov 2012's observation for Laplace noise). Here the
output space is finite, public and the same for every data set, and the draw from it is
exact:

* the lattice of a node with k categories is :func:`~.sampling.map_grid`'s lattice on the
  trimmed simplex (every entry in [p, 1 - (k - 1) p]), with at most
  :data:`SAMPLING_LATTICE_POINTS` points: 2^18 for k = 2 (spacing about 4e-6), G = 723
  steps for k = 3, 115 for k = 4;
* a CPT row with posterior concentrations r draws lattice point g with probability
  proportional to w(g) = exp(max(s(g) - max s, -700)), s(g) = sum_j (r_j - 1) log g_j: the
  posterior restricted to the lattice (prior density times likelihood at g, the counting
  measure as base), its log-weights floored 700 below the top so that none underflows
  (the floor moves no score by more than the data move it);
* :class:`~dpbayes.privacy.exact_choice.ExactCategorical` selects an index with
  probability *exactly* w_i / sum w over the computed doubles w_i (dyadic rationals), from
  one uniform integer of the noise source (``randbelow``: the OS CSPRNG on the secure
  path).

Proof of the guarantee (the Lemma 2 ratio for the lattice posterior) and of the selection:
``PROOF_sampling.md`` §9 beside this file.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpbayes.privacy.exact_choice import ExactCategorical
from dpbayes.privacy.noise import as_noise_source

__all__ = ["FLOOR", "SAMPLING_LATTICE_POINTS", "LatticeRowSampler"]

#: The most lattice points per node (points x categories at most 2^24 as for MAP).
SAMPLING_LATTICE_POINTS = 1 << 18

#: Log-weights are floored this far below the largest (e^-700 is a normal double).
FLOOR = 700.0


class LatticeRowSampler:
    """Draws of every CPT row of ``rows`` (R x k posterior concentrations > 0) from its
    posterior restricted to ``lattice`` (N x k points with entries in [p, 1 - (k - 1) p]),
    selected exactly (:func:`exact_choice`)."""

    def __init__(self, rows: Any, lattice: np.ndarray) -> None:
        r = np.atleast_2d(np.asarray(rows, dtype=float))
        if r.ndim != 2 or r.shape[1] != lattice.shape[1] or not np.all(r > 0):
            raise ValueError("rows must be an R x k array of positive numbers")
        self.rows = r
        self.lattice = lattice
        self.log_lattice = np.log(lattice)
        self._choices: list[ExactCategorical | None] = [None] * r.shape[0]

    def weights(self, i: int) -> np.ndarray:
        """w(g) = exp(max(s(g) - max s, -FLOOR)) of row i over the lattice (the largest is
        1, the smallest e^-700 > 2^-1022: no weight underflows, so every lattice point can
        be drawn under every data set; the floor is a function of the scores that moves by
        no more than they do, PROOF_sampling.md §9)."""
        scores = self.log_lattice @ (self.rows[i] - 1.0)
        return np.exp(np.maximum(scores - scores.max(), -FLOOR))

    def draw(self, src: Any = None) -> np.ndarray:
        """One draw of every row (R x k lattice points)."""
        src = as_noise_source(src)
        picks = []
        for i in range(self.rows.shape[0]):
            choice = self._choices[i]
            if choice is None:  # set up on the first draw, reused by later ones
                choice = self._choices[i] = ExactCategorical(self.weights(i))
            picks.append(choice.draw(src))
        return self.lattice[picks]
