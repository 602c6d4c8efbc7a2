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
    "smooth_sensitivity_path",
    "smooth_sensitivity_path_all",
]


def expmech_smooth_beta(epsilon: float, delta: float, n_candidates: int) -> float:
    """beta = ln(1 - eps / (2 ln(delta / (2 |R|)))): smoothing for the exponential mechanism.

    Paper 003 §2.3 (their |R| = n + 1 for the coin; here the candidate count in general).
    The exponential mechanism with exponent eps u / (2 S_beta(x)) then selects, except with
    probability delta / 2, a candidate whose |u| / S is at most 1 / (e^beta - 1), which is
    the dilation step of the notes' (eps, delta) argument.
    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    size = check_int(n_candidates, "n_candidates", minimum=1)
    if dlt == 0:
        raise ValueError("delta must be > 0 for smooth sensitivity")
    return math.log1p(eps / (2.0 * math.log(2.0 * size / dlt)))


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
