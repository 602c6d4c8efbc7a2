"""Smooth-sensitivity helpers (Nissim, Raskhodnikova & Smith 2007), model-free.

A function of the data x with local sensitivity LS(x) has the beta-smooth sensitivity
S_beta(x) = max_y LS(y) e^{-beta d(x, y)}, the smallest beta-smooth upper bound of LS
(S(x) <= e^beta S(y) for neighbours x, y). These helpers take LS as an array indexed by
a data set's position on a path (d(x, y) = |i - j|, e.g. the count of ones in n
booleans), and the smoothing parameter beta of paper 003 §2.3.
"""

from __future__ import annotations

import math

import numpy as np

from dpbayes.privacy.validation import (
    check_array,
    check_delta,
    check_epsilon,
    check_int,
    check_positive,
)

__all__ = [
    "expmech_smooth_beta",
    "expmech_smooth_epsilon",
    "smooth_sensitivity_path",
    "smooth_sensitivity_path_all",
]


def expmech_smooth_epsilon(
    exponent_epsilon: float, beta: float, n_candidates: int, delta: float
) -> float:
    """The eps proven for the smooth-sensitivity exponential mechanism at this delta.

    The mechanism picks r with probability proportional to exp(e' u(x, r) / (2 S_beta(x))),
    u <= 0 with max_r u(x, r) = 0, S_beta a beta-smooth upper bound of the local
    sensitivity, |R| candidates. It is (eps, delta)-DP with (src/dpbayes/release/
    release/expmech/PROOF.md, Theorem 2)

        eps = e' + (e^beta - 1) ln(|R| / delta) + c (1 + ln(|R| / c)),  c = 1 - e^{-beta}:

    e'/2 + (e^beta - 1) ln(|R|/delta) bounds the weight of every output outside an event of
    probability < delta, and e'/2 + c (1 + ln(|R|/c)) bounds the normaliser.
    """
    eps = check_epsilon(exponent_epsilon, "exponent_epsilon")
    b = check_positive(beta, "beta")
    size = check_int(n_candidates, "n_candidates", minimum=1)
    dlt = check_delta(delta)
    if dlt == 0:
        raise ValueError("delta must be > 0 for smooth sensitivity")
    c = -math.expm1(-b)
    return eps + math.expm1(b) * math.log(size / dlt) + c * (1.0 + math.log(size / c))


def expmech_smooth_beta(epsilon: float, delta: float, n_candidates: int) -> float:
    """The largest beta for which exponent eps/2 proves (eps, delta) (Theorem 2).

    :func:`expmech_smooth_epsilon` states the bound.

    The smooth-sensitivity exponential mechanism runs with exponent eps/2 (eps/2 u / (2 S));
    the other eps/2 pays for the data-dependent scale: beta solves
    (e^beta - 1) ln(|R|/delta) + c (1 + ln(|R|/c)) = eps/2, c = 1 - e^{-beta} (increasing in
    beta, so bisection finds it), and the value returned never exceeds the root.
    Replaces paper 003 §2.3's beta = ln(1 - eps / (2 ln(delta / (2|R|)))), whose argument
    bounds each candidate's weight but not the normaliser.
    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    size = check_int(n_candidates, "n_candidates", minimum=1)
    if dlt == 0:
        raise ValueError("delta must be > 0 for smooth sensitivity")
    half = eps / 2.0

    def excess(b: float) -> float:
        return expmech_smooth_epsilon(half, b, size, dlt) - eps

    # at hi the first term alone is eps/2, so excess(hi) > 0; excess(0+) -> -eps/2 < 0
    lo, hi = 0.0, math.log1p(half / math.log(size / dlt))
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        lo, hi = (mid, hi) if excess(mid) <= 0 else (lo, mid)
    if not lo > 0:  # pragma: no cover - eps below ~1e-300
        raise ValueError(f"epsilon={eps} is too small for smooth sensitivity")
    return lo


def smooth_sensitivity_path(local: np.ndarray, index: int, beta: float) -> float:
    """S_beta at position ``index``: max_j local[j] e^{-beta |index - j|}, in O(len(local)).

    Nissim et al. 2007, Definition 2.2, for data sets on a path (Hamming distance between
    two boolean data sets of the same size with i and j ones is at least |i - j|, and
    equal for some pair, so the maximum over data sets is this maximum over counts).
    """
    ls = check_array(local, "local")
    i = check_int(index, "index", minimum=0)
    if i >= ls.size:
        raise ValueError(f"index must be < {ls.size}, got {i}")
    b = check_positive(beta, "beta")
    j = np.arange(ls.size, dtype=float)
    return float(np.max(ls * np.exp(-b * np.abs(j - i))))


def smooth_sensitivity_path_all(local: np.ndarray, beta: float) -> np.ndarray:
    """S_beta at every position of the path at once, in O(len(local)).

    S[i] = max(max_{j<=i} local[j] e^{-beta (i-j)}, max_{j>=i} local[j] e^{-beta (j-i)}),
    computed in log space with running maxima (no overflow for long paths).
    """
    ls = check_array(local, "local", positive=True)
    b = check_positive(beta, "beta")
    pos = np.arange(ls.size, dtype=float) * b
    log_ls = np.log(ls)
    left = np.maximum.accumulate(log_ls + pos) - pos
    right = (np.maximum.accumulate((log_ls - pos)[::-1]))[::-1] + pos
    return np.asarray(np.exp(np.maximum(left, right)))
