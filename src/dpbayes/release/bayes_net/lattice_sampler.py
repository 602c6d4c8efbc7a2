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
* :class:`ExactCategorical` selects an index with probability *exactly* w_i / sum w over the
  computed doubles w_i (dyadic rationals), from one uniform integer of the noise source
  (``randbelow``: the OS CSPRNG on the secure path).

Proof of the guarantee (the Lemma 2 ratio for the lattice posterior) and of the selection:
``PROOF_sampling.md`` §9 beside this file.
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np

from dpbayes.privacy.noise import as_noise_source

__all__ = [
    "FLOOR",
    "SAMPLING_LATTICE_POINTS",
    "ExactCategorical",
    "LatticeRowSampler",
    "exact_choice",
]

#: The most lattice points per node (points x categories at most 2^24 as for MAP).
SAMPLING_LATTICE_POINTS = 1 << 18

#: Log-weights are floored this far below the largest (e^-700 is a normal double).
FLOOR = 700.0

_LOW = 27  # the 53-bit integer mantissas are split into 26 + 27 bits for exact float sums


class ExactCategorical:
    """Draws of an index i with probability exactly ``weights[i] / sum(weights)``.

    ``weights`` are finite doubles >= 0, at least one > 0, at most 2^26 of them. Each is
    m_i 2^(e_i - 53) with an integer 2^52 <= m_i < 2^53 (``np.frexp``); the weights of
    one exponent e form a class of integer total S_e, and the classes together the integer
    T = sum_e S_e 2^(e - e_min). One uniform integer R on 0..T - 1 (``src.randbelow``)
    falls in class e's range with probability S_e 2^(e - e_min) / T; inside it
    q = (R - start) >> (e - e_min) is uniform on 0..S_e - 1 (the range is a whole number
    of blocks 2^(e - e_min)), and the index is the first of the class whose cumulative
    integer weight exceeds q: probability m_i / S_e. Every sum is exact: Python integers
    across classes, and within a class float64 cumulative sums of the 26- and 27-bit
    halves of m_i, below 2^53 for up to 2^26 weights. Set up once (O(N)); a draw is one
    ``randbelow`` and a bisection.
    """

    def __init__(self, weights: Any) -> None:
        w = np.asarray(weights, dtype=np.float64).ravel()
        if w.size == 0 or w.size > 1 << 26 or not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError("weights must be 1 to 2^26 finite numbers >= 0")
        positive = np.flatnonzero(w > 0)
        if positive.size == 0:
            raise ValueError("weights must not all be 0")
        mant, expo = np.frexp(w[positive])
        ints = mant * 2.0**53  # exact integers in [2^52, 2^53)
        high = np.floor(ints * 2.0**-_LOW)
        low = ints - high * 2.0**_LOW
        classes, which = np.unique(expo, return_inverse=True)
        order = np.argsort(which, kind="stable")  # members of each class, contiguous
        self._index = positive[order]
        self._hcum = np.cumsum(high[order])  # exact: per-class offsets subtracted below
        self._lcum = np.cumsum(low[order])
        counts = np.bincount(which, minlength=classes.size)
        self._ends = np.cumsum(counts)
        emin = int(classes[0])
        self._shifts = [int(e) - emin for e in classes]
        self._totals = []
        self._sizes = []
        for c in range(classes.size):
            total = self._class_cumulative(c, int(self._ends[c]) - 1)
            self._totals.append(total)
            self._sizes.append(total << self._shifts[c])
        self.total = sum(self._sizes)

    def _prefix(self, j: int) -> int:  # exact sum of m over the first j + 1 sorted members
        return (int(self._hcum[j]) << _LOW) + int(self._lcum[j]) if j >= 0 else 0

    def _class_cumulative(self, c: int, j: int) -> int:
        start = int(self._ends[c - 1]) if c else 0
        return self._prefix(j) - self._prefix(start - 1)

    def draw(self, src: Any = None) -> int:
        r = as_noise_source(src).randbelow(self.total)
        c = 0
        while r >= self._sizes[c]:
            r -= self._sizes[c]
            c += 1
        q = r >> self._shifts[c]  # uniform on 0..S_c - 1
        start, end = (int(self._ends[c - 1]) if c else 0), int(self._ends[c])
        j = bisect.bisect_right(range(start, end), q, key=lambda i: self._class_cumulative(c, i))
        return int(self._index[start + j])


def exact_choice(weights: Any, src: Any = None) -> int:
    """One draw of :class:`ExactCategorical` (``weights``)."""
    return ExactCategorical(weights).draw(src)


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
