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

import math
from typing import Any

import numpy as np
from numba import njit

from dpbayes.privacy.exact_choice import ExactCategorical
from dpbayes.privacy.noise import as_noise_source

__all__ = [
    "FLOOR",
    "SAMPLING_LATTICE_POINTS",
    "LatticeRowSampler",
    "rounding_allowance",
    "row_log_weights",
]

#: The most lattice points per node (points x categories at most 2^24 as for MAP).
SAMPLING_LATTICE_POINTS = 1 << 18

#: Log-weights are floored this far below the largest (e^-700 is a normal double).
FLOOR = 700.0


# -- the scores in double-double --------------------------------------------------------
# s(g) = sum_j (alpha - 1 + c_j) log g_j has size up to (alpha k + n) |log p|; formed in
# doubles it rounds by that size times 2^-53, which grows with n while one record moves it
# by at most L: at n = 10^9 and eps 4e-6 the computed law's loss was 2% above eps, 20% at
# 10^10 (and the MAP mechanism's, at a trim near 1/k, 19% at n = 10^9). Here each count's
# product c_j l_j is split exactly (Dekker) and the sum carried as an unevaluated pair of
# doubles, so the error no longer scales with n (PROOF_sampling.md §9).

_SPLITTER = 134217729.0  # 2^27 + 1


@njit(cache=True)
def _two_sum(a: float, b: float) -> tuple[float, float]:  # pragma: no cover - compiled
    """a + b = s + e exactly (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@njit(cache=True)
def _split(a: float) -> tuple[float, float]:  # pragma: no cover - compiled
    t = _SPLITTER * a
    hi = t - (t - a)
    return hi, a - hi


@njit(cache=True)
def _dd_scores(
    log_lattice: np.ndarray, prior_scores: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """(hi, lo) with hi + lo within k 2^-104 max|s| of s(g) = prior_scores(g) + sum_j
    counts_j log_lattice[g, j]: each product split exactly (Dekker: a b = p + e, |a b| far
    below the overflow threshold), each addition an exact two-sum."""
    n, k = log_lattice.shape
    hi = prior_scores.copy()
    lo = np.zeros(n)
    for j in range(k):
        c = counts[j]
        if c == 0.0:
            continue
        ch, cl = _split(c)
        for g in range(n):
            a = log_lattice[g, j]
            p = a * c
            ah, al = _split(a)
            e = ((ah * ch - p) + ah * cl + al * ch) + al * cl
            s, t = _two_sum(hi[g], p)
            hi[g], lo[g] = _two_sum(s, t + (lo[g] + e))
    return hi, lo


@njit(cache=True)
def _dd_below(
    hi: np.ndarray, lo: np.ndarray, top: float, top_lo: float
) -> np.ndarray:  # pragma: no cover - compiled
    """(hi + lo) - (top + top_lo), rounded once: hi - top exactly by a two-sum."""
    out = np.empty(hi.size)
    for g in range(hi.size):
        d, e = _two_sum(hi[g], -top)
        out[g] = d + (e + (lo[g] - top_lo))
    return out


def row_log_weights(
    log_lattice: np.ndarray, prior_scores: np.ndarray, counts: np.ndarray, floor: float
) -> np.ndarray:
    """D(g) = max(s(g) - max_G s, -floor), s(g) = prior_scores(g) + sum_j counts_j
    log_lattice[g, j], with an error below floor 2^-53 + 8 k 2^-104 max|s| at every g.

    ``prior_scores`` (the data-free sum_j (alpha - 1) log g_j, one double per point) and
    ``log_lattice`` are fixed functions of the public lattice, so the exact s is the
    exponential mechanism's score for that lattice; ``counts`` are the row's counts.
    The sum is an unevaluated pair (hi, lo) of doubles (:func:`_dd_scores`), within
    k 2^-104 max|s| of s; the maximum is taken exactly (on hi, then lo), the difference
    hi - max hi is exact, and D is rounded once.
    """
    c = np.asarray(counts, dtype=float)
    if not (np.all(c >= 0) and float(np.sum(c)) < 2.0**53):
        raise ValueError("a row's counts must be >= 0 and sum below 2^53 (exact as doubles)")
    hi, lo = _dd_scores(
        np.ascontiguousarray(log_lattice, dtype=float),
        np.ascontiguousarray(prior_scores, dtype=float),
        np.ascontiguousarray(c),
    )
    top = float(np.max(hi))
    top_lo = float(np.max(lo[hi == top]))
    return np.maximum(_dd_below(hi, lo, top, top_lo), -floor)


def rounding_allowance(
    k: int, trim: float, alpha: float, floor: float, scale: float = 1.0
) -> float:
    """How far the computed law of one row's draw can be from the exact one, in its
    log-ratio between any two data sets (public: the node's k, its trim, the prior, the
    floor and the temperature ``scale``); PROOF_sampling.md §9.

    D is within eta = (floor scale 2^-53 + 8 k 2^-104 B) / scale of the exact utility,
    B = (|alpha - 1| k + 2^53) 1.01 |log trim| bounding |s| (a row's counts summing below
    2^53, entries at least ``trim``); the weight exp(D) (or OpenDP's exact selection from D / scale)
    adds at most 2^-52. A weight ratio and the normaliser ratio each take 2 of each:
    4 (eta + 2^-52), rounded up.
    """
    big = (abs(alpha - 1.0) * k + 2.0**53) * 1.01 * abs(math.log(trim))
    eta = floor * 2.0**-53 + 8.0 * k * 2.0**-104 * big / scale
    return 4.0 * (eta + 2.0**-52) * (1.0 + 1e-6)


class LatticeRowSampler:
    """Draws of every CPT row of ``rows`` (R x k posterior concentrations > 0) from its
    posterior restricted to ``lattice`` (N x k points with entries in [p, 1 - (k - 1) p]),
    selected exactly (:func:`exact_choice`)."""

    def __init__(self, alpha: float, counts: Any, lattice: np.ndarray) -> None:
        c = np.atleast_2d(np.asarray(counts, dtype=float))
        if c.ndim != 2 or c.shape[1] != lattice.shape[1] or not np.all((c >= 0) & (c < 2**53)):
            raise ValueError("counts must be an R x k array of numbers in [0, 2^53)")
        if not (math.isfinite(alpha) and alpha > 0):
            raise ValueError(f"alpha must be a positive number, got {alpha!r}")
        self.alpha = float(alpha)
        self.counts = c
        self.lattice = lattice
        self.log_lattice = np.log(lattice)
        self.prior_scores = self.log_lattice @ np.full(lattice.shape[1], self.alpha - 1.0)
        self._choices: list[ExactCategorical | None] = [None] * c.shape[0]

    def weights(self, i: int) -> np.ndarray:
        """w(g) = exp(max(s(g) - max s, -FLOOR)) of row i over the lattice, s(g) = sum_j
        (alpha - 1 + c_j) log g_j summed in double-double (:func:`row_log_weights`): the
        largest is 1, the smallest e^-700 > 2^-1022, so no weight underflows and every
        lattice point can be drawn under every data set; the floor is a function of the
        scores that moves by no more than they do (PROOF_sampling.md §9)."""
        d = row_log_weights(self.log_lattice, self.prior_scores, self.counts[i], FLOOR)
        return np.exp(d)

    def draw(self, src: Any = None) -> np.ndarray:
        """One draw of every row (R x k lattice points)."""
        src = as_noise_source(src)
        picks = []
        for i in range(self.counts.shape[0]):
            choice = self._choices[i]
            if choice is None:  # set up on the first draw, reused by later ones
                choice = self._choices[i] = ExactCategorical(self.weights(i))
            picks.append(choice.draw(src))
        return self.lattice[picks]
