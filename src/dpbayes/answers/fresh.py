"""The noise of one fresh answer: how much a requirement needs, given the history.

Paper 000 §5 finds the smallest eps of one fresh Laplace answer y = q x + Lap(S / eps) of the
target query q such that the BLUE of the history plus that answer meets the requirement
P(|E| <= d) >= p. Beyond the paper, the fresh answer may be Gaussian, y = q x + N(0, sigma^2)
with sigma the analytic Gaussian calibration (Balle & Wang 2018, Thm 8) of (eps, delta) at
the query's sensitivity S (a scalar query's L2 sensitivity is its L1 sensitivity): the
smallest eps at the given delta, i.e. the largest sigma, that meets the requirement.

Both are searched over eps, so the plan's error distribution is the one of the noise the
mechanism will draw (:class:`~dpbayes.privacy.mechanisms.GaussianMechanism` computes sigma by
the same function of (eps, delta, S)). Nothing here draws noise or spends budget.

Termination: every loop has a fixed bound on its iterations (see :func:`required_epsilon`);
each step builds one :class:`LaplaceSum`, whose own loops are bounded
(error_distribution.py), and checks the time limit (``limits.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import special

from dpbayes.answers.blue import NOISES
from dpbayes.answers.error_distribution import LaplaceSum
from dpbayes.answers.limits import check_time
from dpbayes.privacy.mechanisms import (
    MAX_ANALYTIC_EPSILON,
    analytic_gaussian_epsilon,
    analytic_gaussian_sigma,
)

__all__ = [
    "MAX_GAUSSIAN_EPSILON",
    "MIN_EPSILON",
    "NOISES",
    "SLACK",
    "combined_error",
    "gaussian_alone_epsilon",
    "required_epsilon",
]

# The requirement P(|E| <= d) >= p is checked as P - (the method's error bound) >= p - slack,
# slack = min(1e-9, 1e-6 (1 - p)):
# conservative up to the method's accuracy, and an answer released to meet (d, p) exactly
# meets the same requirement again from the history.
SLACK = 1e-9
# The smallest eps of a fresh answer: a looser requirement is met by an answer at this eps
# (the noise of one answer alone only shrinks as eps grows). It keeps the noise scale
# S / eps and its square, the answer's variance, inside double precision.
MIN_EPSILON = 1e-12
_GROW = 1.5
_MAX_GROW_STEPS = 200  # 1.5^200 > 1e35 > any ratio cap / start (>= 1e-12 .. < 1e23)
_SCAN = 25
_MAX_BISECT = 64  # the bracket [lo, hi] has hi / lo <= 1e4 * 1.5: 14 halvings in log
_MAX_NUDGES = 64  # rounding nudges of a Gaussian answer's eps (each doubles the step)
# The largest eps of a Gaussian answer: the analytic calibration's own limit (its terms, of
# size e^eps, keep their precision up to there; a requirement that needs more is refused).
MAX_GAUSSIAN_EPSILON = MAX_ANALYTIC_EPSILON


def _ok(dist: LaplaceSum, d: float, p: float) -> bool:
    # the slack is at most a millionth of the miss probability 1 - p allowed: an absolute
    # 1e-9 let a requirement of p = 1 - 1e-14 be met by an answer that misses w.p. 1e-9
    return bool(dist.prob_within(d) - dist.error >= p - min(SLACK, 1e-6 * (1.0 - p)))


def combined_error(
    scales_h: np.ndarray,
    std_h: float,
    scale_new: float,
    *,
    method: str = "auto",
    accuracy: float = 1e-6,
    noise: str = "laplace",
    gaussian_sd_h: float = 0.0,
) -> LaplaceSum:
    """Error of the BLUE of history + one fresh answer of the target itself.

    ``scales_h``, ``std_h``, ``gaussian_sd_h``: the Laplace scales, the std and the sd of the
    Normal part of the history BLUE's error; ``scale_new``: the fresh answer's Laplace scale
    S / eps (``noise="laplace"``) or its sd sigma (``noise="gaussian"``). Appending an answer
    of q itself, the BLUE of q x is the inverse-variance weighted mean of the history's BLUE
    (variance V = std_h^2) and the fresh answer (variance v = 2 scale^2 or sigma^2)
    (Sherman-Morrison on eq. 15): weights lam = v / (V + v) and 1 - lam, so the error is
    lam E_h + (1 - lam) e_new: Laplace scales lam b_i (and (1 - lam) S / eps), Normal sd
    sqrt((lam s_h)^2 + ((1 - lam) sigma)^2). Written as lam = 1 / (1 + t^2),
    t = std_h / sd_new, so that no float divides by zero: for stds > 0, t is finite or +inf
    (then lam = 0), never NaN.
    """
    if noise not in NOISES:
        raise ValueError(f"noise must be one of {NOISES}, got {noise!r}")
    if noise == "laplace":
        t = std_h / (math.sqrt(2.0) * scale_new)
        lam = 1.0 / (1.0 + t * t)
        scales = np.concatenate(
            [lam * np.asarray(scales_h, dtype=float), [(1.0 - lam) * scale_new]]
        )
        return LaplaceSum(scales, gaussian_sd=lam * gaussian_sd_h, method=method, accuracy=accuracy)
    t = std_h / scale_new
    lam = 1.0 / (1.0 + t * t)
    scales = lam * np.asarray(scales_h, dtype=float)
    g = math.hypot(lam * gaussian_sd_h, (1.0 - lam) * scale_new)
    return LaplaceSum(scales, gaussian_sd=g, method=method, accuracy=accuracy)


def gaussian_alone_epsilon(sensitivity: float, d: float, p: float, delta: float) -> float:
    """The eps at ``delta`` of one Gaussian answer that meets (d, p) alone:
    P(|N(0, sigma^2)| <= d) = p at sigma = d / z, z = Phi^-1((1 + p) / 2), and eps is the
    analytic Gaussian's for that sigma (0 if any eps will do; inf if none will)."""
    z = -float(special.ndtri((1.0 - p) / 2.0))  # upper tail: exact for p near 1
    sigma = d / z
    if not sigma > 0:  # d / z underflowed: no sigma is small enough
        return math.inf
    if not math.isfinite(sigma):
        return 0.0
    return analytic_gaussian_epsilon(sigma, delta, sensitivity)


def _search(
    dist_at: Callable[[float], LaplaceSum], start: float, d: float, p: float, cap: float
) -> tuple[float, LaplaceSum | None]:
    """The smallest eps (to 0.1%) at which ``dist_at(eps)`` meets (d, p), searched from
    ``start`` (the eps that meets it with no history); ``(inf, None)`` above ``cap``."""
    if not cap >= MIN_EPSILON:
        return math.inf, None
    hi = min(max(start, MIN_EPSILON), cap)
    best = dist_at(hi)
    for _ in range(_MAX_GROW_STEPS):
        if _ok(best, d, p):
            break
        if hi >= cap:
            return math.inf, None
        hi = min(hi * _GROW, cap)
        best = dist_at(hi)
    else:
        return math.inf, None
    lo = max(hi * 1e-4, MIN_EPSILON)
    if lo >= hi:
        return hi, best
    low = dist_at(lo)
    if _ok(low, d, p):
        return lo, low
    # P(|E| <= d) is not monotone in eps: a little Laplace noise blunts the cusp of the
    # history's error density and can first lower it. It starts below p (the history alone
    # fails) and rises above p once; a coarse log-scan finds the first grid point that
    # meets p, and bisection in log eps (to 0.1 %) the crossing before it, keeping the end
    # that meets the requirement.
    grid = np.geomspace(lo, hi, _SCAN)
    for i in range(1, grid.size - 1):
        cand = dist_at(float(grid[i]))
        if _ok(cand, d, p):
            lo, hi, best = float(grid[i - 1]), float(grid[i]), cand
            break
    else:
        lo = float(grid[-2])
    for _ in range(_MAX_BISECT):
        if hi / lo <= 1.0 + 1e-3:
            break
        mid = math.sqrt(lo * hi)
        cand = dist_at(mid)
        if _ok(cand, d, p):
            hi, best = mid, cand
        else:
            lo = mid
    return hi, best


def required_epsilon(
    hist: LaplaceSum | None,
    scales_h: np.ndarray | None,
    sensitivity: float,
    d: float,
    p: float,
    *,
    method: str = "auto",
    accuracy: float = 1e-6,
    cap: float = math.inf,
    noise: str = "laplace",
    delta: float = 0.0,
    floor: float = 0.0,
) -> tuple[float, LaplaceSum | None]:
    """The smallest eps of one fresh answer that meets (d, p), and its error distribution.

    ``floor``: the least eps a fresh answer is charged (a service's minimum charge, so that
    near-free answers cannot pile up on a cell): a smaller eps that meets (d, p) is raised to
    ``floor`` when the answer at ``floor`` meets it too (it does whenever the error shrinks as
    eps grows), and refused when ``floor`` is above ``cap``.

    ``hist``: the error of the history's BLUE of the query (its Normal part included),
    ``scales_h`` its Laplace scales (the BLUE's ``scales``; both ``None`` if the query is not
    estimable). ``noise="laplace"``: the answer is y = q x + Lap(S / eps);
    ``noise="gaussian"``: y = q x + N(0, sigma^2) with sigma =
    ``analytic_gaussian_sigma(eps, delta, S)`` (``delta`` > 0 required; ``cap`` is at most
    :data:`MAX_GAUSSIAN_EPSILON`).
    Returns ``(0.0, None)`` if the history meets the requirement, and ``(eps, None)`` if the
    eps needed is above ``cap`` (the caller refuses): the exact eps when the query is not
    estimable from the history, else ``math.inf`` (more than ``cap``). Bounded: at most
    200 growth steps (x1.5 from max(alone, MIN_EPSILON) up to ``cap``), a 25-point scan and
    64 bisection steps, one LaplaceSum each (and for a Gaussian answer with no history at
    most 64 rounding nudges).
    """
    if noise not in NOISES:
        raise ValueError(f"noise must be one of {NOISES}, got {noise!r}")
    s = sensitivity
    if noise == "gaussian" and not delta > 0:
        raise ValueError(f"delta must be > 0 for noise='gaussian', got {delta}")
    if hist is not None and _ok(hist, d, p):
        return 0.0, None
    eps, dist = _required(hist, scales_h, s, d, p, method, accuracy, cap, noise, delta)
    if dist is None or eps >= floor:
        return eps, dist
    if not floor <= cap:
        return floor, None
    if hist is None or scales_h is None:
        at_floor = _alone_at(s, floor, method, accuracy, noise, delta)
    else:
        at_floor = _dist_at(hist, scales_h, s, floor, method, accuracy, noise, delta)
    if _ok(at_floor, d, p):
        return floor, at_floor
    return eps, dist


def _alone_at(
    s: float, eps: float, method: str, accuracy: float, noise: str, delta: float
) -> LaplaceSum:
    """The error of one fresh answer at ``eps`` with no history."""
    if noise == "laplace":
        return LaplaceSum([s / eps], method=method, accuracy=accuracy)
    sd = analytic_gaussian_sigma(eps, delta, s)
    return LaplaceSum([], gaussian_sd=sd, method=method, accuracy=accuracy)


def _dist_at(
    hist: LaplaceSum,
    scales_h: np.ndarray,
    s: float,
    eps: float,
    method: str,
    accuracy: float,
    noise: str,
    delta: float,
) -> LaplaceSum:
    """The error of the BLUE with one fresh answer at ``eps`` added to the history."""
    check_time()
    new = s / eps if noise == "laplace" else analytic_gaussian_sigma(eps, delta, s)
    return combined_error(
        scales_h, hist.std, new, method=method, accuracy=accuracy, noise=noise,
        gaussian_sd_h=hist.gaussian_sd,
    )  # fmt: skip


def _required(
    hist: LaplaceSum | None,
    scales_h: np.ndarray | None,
    s: float,
    d: float,
    p: float,
    method: str,
    accuracy: float,
    cap: float,
    noise: str,
    delta: float,
) -> tuple[float, LaplaceSum | None]:
    """:func:`required_epsilon` without the floor."""
    if noise == "laplace":
        # A fresh answer alone: P(|Lap(S/eps)| <= d) = 1 - e^{-d eps / S} >= p.
        alone = s * math.log(1.0 / (1.0 - p)) / d
        if hist is None or scales_h is None:
            eps = max(alone, MIN_EPSILON)
            if not eps <= cap:  # also catches alone = inf (a subnormal d)
                return eps, None
            return eps, _alone_at(s, eps, method, accuracy, noise, delta)

        def laplace_at(eps: float) -> LaplaceSum:
            return _dist_at(hist, scales_h, s, eps, method, accuracy, noise, delta)

        return _search(laplace_at, alone, d, p, cap)

    cap = min(cap, MAX_GAUSSIAN_EPSILON)
    alone = gaussian_alone_epsilon(s, d, p, delta)
    if hist is None or scales_h is None:
        eps = max(alone, MIN_EPSILON)
        if not eps <= cap:
            return eps, None
        # sigma(eps) is within rounding of d / z: nudge eps up until it meets (d, p)
        step = 1e-13
        for _ in range(_MAX_NUDGES):
            check_time()
            dist = LaplaceSum(
                [], gaussian_sd=analytic_gaussian_sigma(eps, delta, s), method=method,
                accuracy=accuracy,
            )  # fmt: skip
            if _ok(dist, d, p):
                return eps, dist
            eps = eps * (1.0 + step)
            step *= 2.0
            if not eps <= cap:
                return eps, None
        return math.inf, None

    def gaussian_at(eps: float) -> LaplaceSum:
        return _dist_at(hist, scales_h, s, eps, method, accuracy, noise, delta)

    return _search(gaussian_at, alone, d, p, cap)
