"""Exact selection of an index with probability proportional to given doubles.

The exponential mechanism's Gumbel noisy-max (:meth:`NoiseSource.gumbel_argmax`) draws
from exp(score / scale); this draws from the weights themselves, exactly in the doubles
given, from one uniform integer of a noise source (``randbelow``: the OS CSPRNG on the
secure path). Used by the lattice posterior draws of the Bayesian-network ``sampling``
release (``release/bayes_net/PROOF_sampling.md`` §9).
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np

from dpbayes.privacy.noise import as_noise_source

__all__ = ["ExactCategorical"]

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
