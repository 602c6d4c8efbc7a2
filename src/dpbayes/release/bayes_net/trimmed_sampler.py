"""Exact trimmed-posterior samplers in real arithmetic (issue 14); public utilities.

The ``sampling`` release no longer outputs their doubles (they are not floating-point
hardened: PROOF_sampling.md §5); it draws on a public lattice (:mod:`.lattice_sampler`).

Proof: ``PROOF_sampling.md`` beside this file. Every CPT row's posterior
Dirichlet(alpha + counts) restricted to {theta_j >= p} is drawn exactly:

* binary rows: the inverse cdf in log space (:func:`~.truncated_jit.truncated_beta_ppf`),
  vectorised over rows; the entry with the smaller concentration is drawn and the other
  is its exact complement;
* rows with k >= 3 entries: rounds of rejection proposals, first from the piecewise-
  exponential envelopes of :mod:`.trimmed_dirichlet` (one per flat level), then (if none
  was accepted) from the stick-breaking box (:func:`~.truncated_jit.trimmed_dirichlet_box`,
  stick ordered by increasing alpha); the first accepted proposal in this fixed order is
  returned.

A :class:`TrimmedRowSampler` is set up once per table (envelopes) and drawn many times
(``draws > 1``, audits). Randomness: uniforms of a noise source only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpbayes.privacy.noise import as_noise_source
from dpbayes.release.bayes_net._sampling_kernels import trimmed_dirichlet_box, truncated_beta_many
from dpbayes.release.bayes_net.trimmed_dirichlet import FLAT_LEVELS, Envelope, envelope, propose

__all__ = [
    "MAX_ROUNDS",
    "MIN_WIDTH",
    "TrimmedRowSampler",
    "truncated_beta",
    "truncated_dirichlet",
]

NO_MASS = (
    "the truncated Beta's interval holds no computable mass (narrower than the incomplete "
    "beta's precision): use a larger epsilon or fewer nodes"
)

# the trimmed region {theta_j >= p} must be at least this wide (1 - k p): below it the
# inverse cdf's error (about 1e-16 / (alpha (1 - k p))) is no longer negligible
MIN_WIDTH = 1e-6

# rounds of the k >= 3 sampler: round r tries min(64 * 4^r, 65536) proposals from each
# envelope, then (if none was accepted) 4 stick-breaking box proposals: about 4e6 or more
# proposals in all
MAX_ROUNDS = 64


def check_trim(k: int, lower: float, name: str = "trim") -> float:
    """A trim p for k categories: 0 < p and the region's width 1 - k p >= MIN_WIDTH
    (public facts only: the refusal never depends on the data)."""
    p = float(lower)
    if not 0.0 < p < 1.0 / k:
        raise ValueError(f"{name} must be in (0, 1/{k}), got {p}")
    if 1.0 - k * p < MIN_WIDTH:
        raise ValueError(
            f"{name}={p:.12g} leaves a trimmed region of width 1 - {k} p = {1.0 - k * p:.3g} "
            f"< {MIN_WIDTH:g}, too narrow for an exact draw: use a larger epsilon or fewer nodes"
        )
    return p


class TrimmedRowSampler:
    """Exact draws of Dirichlet(row) restricted to {theta_j >= lower} for every row of
    ``rows`` (R x k concentrations > 0), set up once and drawn by :meth:`draw`."""

    def __init__(self, rows: Any, lower: float, *, max_rounds: int = MAX_ROUNDS) -> None:
        r = np.atleast_2d(np.asarray(rows, dtype=float))
        if r.ndim != 2 or r.shape[1] < 2 or not np.all(r > 0):
            raise ValueError("rows must be an R x k array (k >= 2) of positive numbers")
        self.k = r.shape[1]
        self.lower = check_trim(self.k, lower, "lower")
        self.rows = r
        self.max_rounds = int(max_rounds)
        self._envelopes: list[list[Envelope] | None] = [None] * r.shape[0]
        if self.k == 2:
            self.swap = r[:, 0] > r[:, 1]
            self.small = np.ascontiguousarray(np.where(self.swap, r[:, 1], r[:, 0]))
            self.large = np.ascontiguousarray(np.where(self.swap, r[:, 0], r[:, 1]))

    def draw(self, src: Any = None) -> np.ndarray:
        """One exact draw of every row (R x k); ``src`` a noise source, None (secure), a
        seed or a Generator (simulation)."""
        src = as_noise_source(src)
        if self.k == 2:
            bound = np.full(self.rows.shape[0], self.lower)
            u = src.uniform(self.rows.shape[0])
            x, y = truncated_beta_many(self.small, self.large, bound, bound, u)
            if np.isnan(x).any():
                raise ValueError(NO_MASS)
            return np.stack([np.where(self.swap, y, x), np.where(self.swap, x, y)], axis=1)
        return np.stack([self._draw_row(i, src) for i in range(self.rows.shape[0])])

    def _draw_row(self, i: int, src: Any) -> np.ndarray:
        a, k, p = self.rows[i], self.k, self.lower
        envs = self._envelopes[i]
        if envs is None:
            envs = self._envelopes[i] = [envelope(a, p, FLAT_LEVELS[-1])]
        order = np.argsort(a, kind="stable")
        sorted_a = np.ascontiguousarray(a[order])
        for r in range(self.max_rounds):
            if r == 1 and len(envs) == 1:
                # the first round found nothing: add the envelopes of the other flat
                # levels (a schedule chosen from past rejections keeps every draw exact)
                for level in FLAT_LEVELS[:-1]:
                    e = envelope(a, p, level)
                    if not any(np.array_equal(e.flat, f.flat) for f in envs):
                        envs.append(e)
            size = min(64 * 4**r, 65536)
            for env in envs:
                theta, ok = propose(env, src.uniform((size, 2 * k + 2)))
                if ok.any():
                    return np.asarray(theta[int(np.argmax(ok))])
            stick, hit = trimmed_dirichlet_box(sorted_a, p, src.uniform((4, k - 1)))
            if hit == -2:
                raise ValueError(NO_MASS)
            if hit >= 0:
                out = np.empty(k)
                out[order] = stick
                return out
        raise RuntimeError(
            f"truncated Dirichlet (k={k}, trim={p:.3g}): no proposal accepted in "
            f"{self.max_rounds} rounds; nothing was released"
        )


def truncated_dirichlet(
    alpha: Any, lower: float, src: Any = None, *, max_rounds: int = MAX_ROUNDS
) -> np.ndarray:
    """One exact draw of Dirichlet(alpha) restricted to {theta : theta_j >= lower for all j}
    (:class:`TrimmedRowSampler` of one row). RuntimeError (nothing released) if
    ``max_rounds`` rounds accept nothing: probability (1 - A)^N for acceptance rate A over
    N ~ 4e6 proposals (the proof, §4, gives the rates measured at the numerical edges)."""
    a = np.asarray(alpha, dtype=float)
    if a.ndim != 1:
        raise ValueError("alpha must be a vector of k >= 2 positive numbers")
    return TrimmedRowSampler(a[None, :], lower, max_rounds=max_rounds).draw(src)[0]


def truncated_beta(a: Any, b: Any, lo: Any, hi: Any, src: Any = None) -> np.ndarray:
    """Exact Beta(a, b) draws restricted to [lo, hi] (vectorised; 0 <= lo < hi <= 1).

    The inverse cdf in log space at uniforms of ``src``
    (:func:`~.truncated_jit.truncated_beta_ppf`): exact however far the mass lies outside
    the interval (no underflow, never the bound itself as a point mass). ``src``: a noise
    source, or None (secure) / a seed / a Generator (simulation).
    """
    src = as_noise_source(src)
    arrays = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (a, b, lo, hi)))
    shape = arrays[0].shape
    flat = [np.array(x.ravel(), dtype=float) for x in arrays]
    if not np.all((flat[0] > 0) & (flat[1] > 0)):
        raise ValueError("a and b must be > 0")
    if not np.all((flat[2] >= 0) & (flat[2] < flat[3]) & (flat[3] <= 1)):
        raise ValueError("the interval must satisfy 0 <= lo < hi <= 1")
    u = src.uniform(flat[0].size)
    x, _ = truncated_beta_many(flat[0], flat[1], flat[2], 1.0 - flat[3], u)
    if np.isnan(x).any():
        raise ValueError(NO_MASS)
    return x.reshape(shape)
