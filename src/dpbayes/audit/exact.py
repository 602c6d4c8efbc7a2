"""Exact privacy loss of mechanisms with finitely many outputs, and audit power.

A mechanism whose outputs are finite (the exponential mechanism over candidate
posteriors, randomized response, ...) may expose ``output_distribution(data) ->
(outputs, probabilities)``: ``outputs`` an (k, d) array of the output vectors the auditor
sees (:func:`dpbayes.audit.as_vector`), ``probabilities`` their probabilities. Then the
true eps of a pair of neighbours is the largest |ln P_x(o) / P_x'(o)| (for delta > 0 the
privacy profile of :func:`dpbayes.audit.bounds.exact_epsilon`), and the auditor states it
next to its sampling lower bound. No sampling bound can exceed it except with probability
1 - confidence: a sampling audit fails a mechanism only where this loss exceeds the claim.

Probabilities that underflow (eps in the hundreds, n in the thousands) make the loss of
linear-space probabilities wrong (0 / 0, or a ratio of denormals); a mechanism may then
expose ``output_log_distribution(data) -> (outputs, log-probabilities)`` instead, and the
functions here with ``log=True`` (or :func:`pair_exact_epsilon_log`) work on logs
throughout: ``-inf`` marks an impossible output, and an output impossible under both data
sets contributes nothing.

:func:`expected_lower_bound` is the Clopper-Pearson bound the auditor's best event would
give if the counts took their expected values; it ranks neighbouring pairs by how
detectable their loss is with a given number of samples (data-independent, so ranking
with it does not touch the samples the bound is computed from).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats
from scipy.special import logsumexp

from dpbayes.audit.bounds import exact_epsilon
from dpbayes.privacy.validation import check_delta, check_flag, check_int, check_probability

__all__ = [
    "Distribution",
    "OutputSet",
    "align",
    "align_log",
    "as_log_distribution",
    "best_output_sets",
    "exact_epsilon_log",
    "expected_lower_bound",
    "pair_exact_epsilon",
    "pair_exact_epsilon_log",
    "product_exact_epsilon",
]

Distribution = tuple[np.ndarray, np.ndarray]


def _shaped(dist: Distribution, name: str, what: str) -> tuple[np.ndarray, np.ndarray]:
    """(outputs as a (k, d) array, the k weights): checks the shapes only."""
    outputs, weights = dist
    out = np.asarray(outputs, dtype=float)
    w = np.asarray(weights, dtype=float)
    if out.ndim == 1:
        out = out[:, None]
    if out.ndim != 2 or w.ndim != 1 or out.shape[0] != w.size or w.size == 0:
        raise ValueError(f"{name} must be (outputs of shape (k, d), {what} of length k)")
    return out, w


def _check(dist: Distribution, name: str) -> tuple[np.ndarray, np.ndarray]:
    out, p = _shaped(dist, name, "probabilities")
    if np.any(p < 0) or not math.isclose(float(p.sum()), 1.0, abs_tol=1e-6):
        raise ValueError(f"{name} probabilities must be >= 0 and sum to 1")
    return out, p


def _check_log(dist: Distribution, name: str) -> tuple[np.ndarray, np.ndarray]:
    out, lp = _shaped(dist, name, "log-probabilities")
    if np.any(np.isnan(lp)) or np.any(lp == np.inf):
        raise ValueError(f"{name} log-probabilities must be numbers or -inf")
    if not math.isclose(float(logsumexp(lp)), 0.0, abs_tol=1e-6):
        raise ValueError(f"{name} log-probabilities must be logs of probabilities that sum to 1")
    return out, lp


def _rows_union(ox: np.ndarray, oy: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The union of two output sets, and where each row of ``ox`` then ``oy`` lies in it."""
    if ox.shape[1] != oy.shape[1]:
        raise ValueError("outputs on x and x_prime must have the same length")
    if ox.shape == oy.shape and np.array_equal(ox, oy):
        return ox, None
    allrows, inverse = np.unique(np.concatenate([ox, oy]), axis=0, return_inverse=True)
    return allrows, np.ravel(inverse)


def _union_log(
    dist_x: Distribution, dist_y: Distribution
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Outputs over the union and the two log-probability vectors on them."""
    ox, lx = _check_log(dist_x, "dist_x")
    oy, ly = _check_log(dist_y, "dist_y")
    rows, inverse = _rows_union(ox, oy)
    if inverse is None:
        return rows, lx, ly
    lp = np.full(rows.shape[0], -np.inf)
    lq = np.full(rows.shape[0], -np.inf)
    np.logaddexp.at(lp, inverse[: lx.size], lx)
    np.logaddexp.at(lq, inverse[lx.size :], ly)
    return rows, lp, lq


def _union(dist_x: Distribution, dist_y: Distribution) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ox, px = _check(dist_x, "dist_x")
    oy, py = _check(dist_y, "dist_y")
    allrows, inverse = _rows_union(ox, oy)
    if inverse is None:
        return ox, px, py
    p = np.bincount(inverse[: px.size], weights=px, minlength=allrows.shape[0])
    q = np.bincount(inverse[px.size :], weights=py, minlength=allrows.shape[0])
    return allrows, p, q


def align(dist_x: Distribution, dist_y: Distribution) -> tuple[np.ndarray, np.ndarray]:
    """The two probability vectors over the union of both output sets (same order)."""
    _, p, q = _union(dist_x, dist_y)
    return p, q


def align_log(dist_x: Distribution, dist_y: Distribution) -> tuple[np.ndarray, np.ndarray]:
    """:func:`align` for (outputs, log-probabilities): two log vectors over the union."""
    _, lp, lq = _union_log(dist_x, dist_y)
    return lp, lq


def pair_exact_epsilon(dist_x: Distribution, dist_y: Distribution, delta: float = 0.0) -> float:
    """The true eps of one pair of neighbours from the two output distributions.

    Probabilities that underflowed to 0 or to denormals make this wrong; with
    log-probabilities use :func:`pair_exact_epsilon_log`.
    """
    p, q = align(dist_x, dist_y)
    return exact_epsilon(p, q, delta)


def pair_exact_epsilon_log(dist_x: Distribution, dist_y: Distribution, delta: float = 0.0) -> float:
    """:func:`pair_exact_epsilon` from (outputs, log-probabilities), exact in log space."""
    lp, lq = align_log(dist_x, dist_y)
    return exact_epsilon_log(lp, lq, delta)


def as_log_distribution(dist: Distribution, name: str = "distribution") -> Distribution:
    """(outputs, probabilities) as (outputs, log-probabilities), 0 as -inf."""
    out, p = _check(dist, name)
    with np.errstate(divide="ignore"):
        return out, np.log(p)


@dataclass(frozen=True)
class OutputSet:
    """An event fixed in advance: a set of whole outputs (rows of output vectors)."""

    rows: np.ndarray
    direction: str
    expected_bound: float
    description: str

    def contains(self, outputs: np.ndarray) -> np.ndarray:
        """Which rows of ``outputs`` (n, d) lie in the set."""
        members = {tuple(r) for r in np.asarray(self.rows, dtype=float).tolist()}
        out = np.asarray(outputs, dtype=float)
        return np.array([tuple(r) in members for r in out.tolist()], dtype=bool)


def _prefix_bounds(
    lu: np.ndarray, lv: np.ndarray, m: int, alpha: float, delta: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Outputs by decreasing ratio u/v, candidate prefix lengths, their expected bounds.

    ``lu``, ``lv`` are log-probabilities: the ratio is ranked in log space (exact where the
    probabilities underflow); outputs impossible under u (or under both) come last.
    """
    key = np.full(lu.shape, np.inf)
    live = lu > -np.inf
    key[live] = lv[live] - lu[live]  # -inf where only v is impossible: first
    order = np.argsort(key, kind="stable")
    # prefixes at geometrically spaced lengths: the short ones (the most extreme outputs)
    # all, the long ones sparsely (a choice of event, not a bound)
    cut = np.unique(np.geomspace(1, order.size, min(order.size, 512)).astype(int)) - 1
    ku = np.minimum(np.round(np.cumsum(np.exp(lu[order]))[cut] * m), m)
    kv = np.minimum(np.round(np.cumsum(np.exp(lv[order]))[cut] * m), m)
    lo = np.zeros(ku.shape)
    pos = ku > 0
    lo[pos] = stats.beta.ppf(alpha, ku[pos], m - ku[pos] + 1)
    hi = np.ones(kv.shape)
    low = kv < m
    hi[low] = stats.beta.ppf(1.0 - alpha, kv[low] + 1, m - kv[low])
    bound = np.zeros(cut.shape)
    ok = lo - delta > 0
    bound[ok] = np.maximum(0.0, np.log((lo[ok] - delta) / hi[ok]))
    return order, cut + 1, bound


def expected_lower_bound(
    dist_x: Distribution,
    dist_y: Distribution,
    samples: int,
    *,
    alpha: float = 0.0125,
    delta: float = 0.0,
    log: bool = False,
) -> float:
    """The eps lower bound of the best likelihood-ratio event at the expected counts.

    For each direction the outputs are sorted by their likelihood ratio and the prefixes
    (the Neyman-Pearson sets) are scored as the auditor scores an event measured on
    ``samples`` outputs per data set: ln((CP_lower(P(E)) - delta) / CP_upper(P'(E))) at
    one-sided level ``alpha``, with the counts replaced by samples * probability. With
    ``log=True`` the distributions are (outputs, log-probabilities).
    """
    return max(
        (
            e.expected_bound
            for e in best_output_sets(dist_x, dist_y, samples, alpha, delta, log=log)
        ),
        default=0.0,
    )


def best_output_sets(
    dist_x: Distribution,
    dist_y: Distribution,
    samples: int,
    alpha: float,
    delta: float = 0.0,
    *,
    log: bool = False,
) -> list[OutputSet]:
    """For each direction, the output set with the largest :func:`expected_lower_bound`.

    Chosen from the distributions alone, so the samples it is then measured on can all be
    used (no selection half): the Clopper-Pearson bound of a fixed event is valid. The
    outputs are ranked by their log likelihood ratio; ``log=True`` takes (outputs,
    log-probabilities), which keeps the ranking exact where probabilities underflow.
    """
    m = check_int(samples, "samples", minimum=1)
    a = check_probability(alpha, "alpha", open_interval=True)
    dlt = check_delta(delta)
    if not check_flag(log, "log"):
        dist_x, dist_y = (
            as_log_distribution(dist_x, "dist_x"),
            as_log_distribution(dist_y, "dist_y"),
        )
    rows, lp, lq = _union_log(dist_x, dist_y)
    out = []
    for lu, lv, label in ((lp, lq, "x over x'"), (lq, lp, "x' over x")):
        order, lengths, bound = _prefix_bounds(lu, lv, m, a, dlt)
        i = int(np.argmax(bound))
        chosen = rows[order[: lengths[i]]]
        shown = ", ".join(
            "[" + ", ".join(f"{c:.6g}" for c in r) + "]" for r in chosen[:4].tolist()
        ) + (" ..." if chosen.shape[0] > 4 else "")
        desc = f"output in {{{shown}}} ({chosen.shape[0]} outputs, by exact likelihood ratio)"
        out.append(OutputSet(chosen, label, float(bound[i]), f"{desc} ({label})"))
    return out


def exact_epsilon_log(logp: np.ndarray, logq: np.ndarray, delta: float = 0.0) -> float:
    """:func:`~dpbayes.audit.bounds.exact_epsilon` from log-probabilities over one support.

    For mechanisms whose probabilities underflow (eps = 100, n in the thousands): the
    ratio of two probabilities of 1e-400 is still exact here. ``-inf`` marks an output
    impossible under one data set; if the other gives it positive mass the loss is
    infinite (delta = 0). For delta > 0 the privacy profile sum max(0, p - e^eps q) is
    summed in linear space (terms below 1e-300 cannot matter against a delta >= 1e-300).
    """
    lp = np.asarray(logp, dtype=float)
    lq = np.asarray(logq, dtype=float)
    if lp.shape != lq.shape or lp.ndim != 1:
        raise ValueError("logp and logq must be 1-dimensional arrays of the same length")
    dlt = check_delta(delta)

    def one_way(a: np.ndarray, b: np.ndarray) -> float:
        live = a > -np.inf
        if not live.any():
            return 0.0
        if np.any(live & (b == -np.inf)) and dlt == 0.0:
            return math.inf
        if dlt == 0.0:
            return max(0.0, float(np.max(a[live] - b[live])))

        def excess(eps: float) -> float:
            d = a[live] - (eps + b[live])
            m = d > 0
            return float(np.sum(np.exp(a[live][m]) * -np.expm1(-d[m])))

        if excess(0.0) <= dlt:
            return 0.0
        lo, hi = 0.0, 1.0
        while excess(hi) > dlt:
            hi *= 2.0
            if hi > 1e6:
                return math.inf
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if excess(mid) > dlt else (lo, mid)
        return hi

    return max(one_way(lp, lq), one_way(lq, lp))


def product_exact_epsilon(factors_x: list[np.ndarray], factors_y: list[np.ndarray]) -> float:
    """The exact pure eps of a product of independent finite outputs, from log-probabilities.

    For P = prod_i P_i and Q = prod_i Q_i the largest ln(P(o) / Q(o)) is the sum over the
    factors of their largest ln(P_i / Q_i) (each factor's output can be chosen freely), so
    eps = max(sum_i max ln P_i/Q_i, sum_i max ln Q_i/P_i). Factor i's two arrays share one
    support (``-inf`` for impossible outputs).
    """
    if len(factors_x) != len(factors_y) or not factors_x:
        raise ValueError("factors_x and factors_y must be equally long, non-empty lists")
    up = down = 0.0
    for fx, fy in zip(factors_x, factors_y, strict=True):
        a, b = np.asarray(fx, dtype=float), np.asarray(fy, dtype=float)
        if a.shape != b.shape or a.ndim != 1:
            raise ValueError("each factor must be two 1-dimensional arrays of one length")
        for sign, (u, v) in ((1, (a, b)), (-1, (b, a))):
            live = u > -np.inf
            if np.any(live & (v == -np.inf)):
                loss = math.inf
            else:
                loss = float(np.max(u[live] - v[live])) if live.any() else 0.0
            if sign > 0:
                up += loss
            else:
                down += loss
    return max(0.0, up, down)
