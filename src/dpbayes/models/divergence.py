"""Distances between distributions of one family: Hellinger, KL, total variation, f-divergences.

Hellinger and KL are closed forms in log space (Dimitrakakis et al. 2017, §6: the Beta
affinity ``B((a1+a2)/2, (b1+b2)/2) / sqrt(B(a1,b1) B(a2,b2))``, the Dirichlet one with
the multivariate beta function). To stay accurate for parameters up to 1e7 and beyond,
both are assembled from per-coordinate pieces of ``lgamma`` that are computed without
cancellation:

* the Hellinger log affinity is ``sum_i J(x_i, y_i) - J(sum x, sum y)`` with the Jensen
  gap ``J(x, y) = lgamma((x+y)/2) - (lgamma(x) + lgamma(y))/2`` (where the J's cancel,
  parameters ~1e6 or more apart, from log-beta values split into
  ``sum_{i != top} lgamma(x_i) - D(x_top, r) - r digamma(x_top)``, r the sum of the
  parameters but the largest, when those terms are smaller);
* KL is ``sum_i D(x_i, y_i) - D(sum x, sum y)`` with the Bregman divergence
  ``D(x, y) = lgamma(y) - lgamma(x) - (y - x) digamma(x)``;

both computed in :mod:`dpbayes.models.lgamma_differences` so that nothing of size
``x log x`` is subtracted. The vectorised functions (``hellinger_beta``,
``hellinger_dirichlet``, ``kl_beta``, ``kl_dirichlet``) broadcast over leading axes with
no Python loops; they serve the exponential mechanism over many candidates. Where the
Bregman form loses the smaller argument of a gap (a parameter far below its counterpart,
or a total below 1: KL(Beta(1, 11) || Beta(1e-300, 1e-300)) was NaN), the KLs take those
elements from the scalar functions of :mod:`dpbayes.models.divergence_exact`, one by one.

Domain: Beta and Dirichlet parameters are positive finite doubles; nothing here raises on
a parameter value (a function of private posterior parameters must not fail on some data
sets only). KL and the TV of Betas (and 2-category Dirichlets) are checked against mpmath
for parameters in [TINY, DBL_MAX], TINY = 2.2e-308 the smallest normal double, which is
where programs keep their parameters; below TINY (subnormal) the TV of Betas finds the
crossings past the doubles (at log x ~ -1/a) from their asymptotic tail masses, and KL is
finite or inf, never NaN, but loses digits (a subnormal has fewer than 52). A KL whose
sum of parameters passes DBL_MAX is NaN. The exponential mechanism's TV priors are at least
1e-250 and its counts non-negative (``TV_PRIOR_RANGE`` of ``dpbayes.release.expmech``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import special

from dpbayes.models import divergence_exact as _exact
from dpbayes.models.distributions import Beta, Dirichlet, Distribution, Normal
from dpbayes.models.lgamma_differences import (
    betaln,
    bregman_lgamma,
    gammaln,
    jensen_lgamma,
    log1pmx,
)

__all__ = [
    "f_divergence",
    "hellinger",
    "hellinger_beta",
    "hellinger_dirichlet",
    "kl",
    "kl_beta",
    "kl_dirichlet",
    "log_affinity_beta",
    "log_affinity_dirichlet",
    "total_variation",
]


def _hellinger_from_log_affinity(log_bc: np.ndarray) -> np.ndarray:
    """H = sqrt(1 - BC) with 1 - BC = -expm1(log BC), clamped into [0, 1]."""
    h2 = np.clip(-np.expm1(np.minimum(log_bc, 0.0)), 0.0, 1.0)
    return np.sqrt(h2)


def _scalar(x: np.ndarray) -> Any:
    return float(x) if np.ndim(x) == 0 else x


_CHUNK = 1 << 14  # elements per pass: temporaries stay in cache (about 2x faster at 1e6)


def _elementwise_chunked(fn: Callable[..., Any], *args: Any) -> np.ndarray:
    """``fn`` applied to the broadcast float arrays ``args``, in cache-sized chunks."""
    arrays = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in args))
    shape = arrays[0].shape
    if arrays[0].size <= _CHUNK:
        return np.asarray(fn(*arrays))
    flat = [a.reshape(-1) for a in arrays]
    out = np.empty(flat[0].size)
    for start in range(0, out.size, _CHUNK):
        out[start : start + _CHUNK] = fn(*(a[start : start + _CHUNK] for a in flat))
    return out.reshape(shape)


def _rowwise_chunked(fn: Callable[..., Any], x1: Any, x2: Any) -> np.ndarray:
    """``fn`` over the last axis of broadcast ``x1``, ``x2``, in cache-sized row chunks."""
    a, b = np.broadcast_arrays(np.asarray(x1, dtype=float), np.asarray(x2, dtype=float))
    if a.ndim == 0:
        raise ValueError("alpha1 and alpha2 must have a last axis of categories")
    if a.size <= _CHUNK:
        return np.asarray(fn(a, b))
    m = a.shape[-1]
    ra, rb = a.reshape(-1, m), b.reshape(-1, m)
    rows = max(1, _CHUNK // m)
    out = np.empty(ra.shape[0])
    for start in range(0, out.size, rows):
        out[start : start + rows] = fn(ra[start : start + rows], rb[start : start + rows])
    return out.reshape(a.shape[:-1])


# --------------------------------------------------------------------------- vectorised API
def _log_beta_terms(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log B(x) = sum_i lgamma(x_i) - lgamma(sum x) over the last axis, as
    sum_{i != top} lgamma(x_i) - D(x_top, r) - r psi(x_top), x_top the largest parameter,
    r the sum of the others, D the Bregman gap of lgamma; and the sum of the terms' sizes
    (its rounding error is ~1e-16 times that). Nothing of size x_top log x_top is formed."""
    top = np.argmax(x, axis=-1)
    is_top = np.arange(x.shape[-1]) == top[..., None]
    hi = np.max(x, axis=-1)
    r = np.sum(np.where(is_top, 0.0, x), axis=-1)
    lg = np.where(is_top, 0.0, gammaln(x))
    # r psi(x_top) with psi(x) = psi(x + 1) - 1/x below 1: psi of a parameter below
    # 5.6e-309 is -inf (-1/x passes the doubles) and r psi(x_top) was 0 * inf or inf
    # where r / x_top (<= m - 1) is finite
    low = hi < 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        psi_term = np.where(
            low,
            r * special.digamma(hi + 1.0) - r / np.where(low, hi, 1.0),
            r * special.digamma(hi),
        )
    d_term = bregman_lgamma(hi, r)
    value = np.sum(lg, axis=-1) - d_term - psi_term
    return value, np.sum(np.abs(lg), axis=-1) + np.abs(d_term) + np.abs(psi_term)


_FAR_SIZE = 1e3  # J sizes above which the log-beta assembly is tried (see below) ...
_CANCELLED = 1e-3  # ... if their sum has cancelled to below this share of them


def _far_apart(out: np.ndarray, size: np.ndarray, x1: np.ndarray, x2: np.ndarray) -> None:
    """Far-apart pairs (Beta(20, 0.5) against Beta(1e12, 1000)): each J is of size
    m log 2 ~ 1e11 and their sum cancels to a few units, leaving ~1e-16 |J| ~ 1e-4. The
    assembly log B((x1 + x2)/2) - (log B(x1) + log B(x2)) / 2 has terms of size b log a
    there (~1e4); where it has the smaller terms it replaces ``out`` (in place). Tried
    only where the J's cancel: candidates far from a posterior have |log BC| of the size
    of the J's. ``x1``, ``x2``: (rows, categories); ``out``, ``size``: (rows,)."""
    far = (size > _FAR_SIZE) & (np.abs(out) < _CANCELLED * size)
    if np.any(far):
        f1, f2 = x1[far], x2[far]
        lm, sm = _log_beta_terms((f1 + f2) / 2)
        l1, s1 = _log_beta_terms(f1)
        l2, s2 = _log_beta_terms(f2)
        better = sm + (s1 + s2) / 2 < size[far]
        out[far] = np.where(better, lm - (l1 + l2) / 2, out[far])


def _log_affinity_beta_core(a1: np.ndarray, b1: np.ndarray, a2: np.ndarray, b2: np.ndarray) -> Any:
    shape = np.shape(a1)  # the four are broadcast already (_elementwise_chunked)
    a1, b1, a2, b2 = (np.ravel(x) for x in (a1, b1, a2, b2))
    ma, da = (a1 + a2) / 2, (a2 - a1) / 2
    mb, db = (b1 + b2) / 2, (b2 - b1) / 2
    # each J with its smaller argument exact (jensen_lgamma: lost in m - |d| when tiny)
    parts = (
        jensen_lgamma(ma, da, np.minimum(a1, a2)),
        jensen_lgamma(mb, db, np.minimum(b1, b2)),
        -jensen_lgamma(ma + mb, da + db, np.minimum(a1 + b1, a2 + b2)),
    )
    out = parts[0] + parts[1] + parts[2]
    size = np.abs(parts[0]) + np.abs(parts[1]) + np.abs(parts[2])
    _far_apart(out, size, np.stack([a1, b1], axis=-1), np.stack([a2, b2], axis=-1))
    return np.minimum(out, 0.0).reshape(shape)


def log_affinity_beta(a1: Any, b1: Any, a2: Any, b2: Any) -> Any:
    """log of the Bhattacharyya coefficient of Beta(a1, b1) and Beta(a2, b2), broadcasting.

    ``log B((a1+a2)/2, (b1+b2)/2) - (log B(a1,b1) + log B(a2,b2))/2`` (<= 0).
    """
    return _scalar(_elementwise_chunked(_log_affinity_beta_core, a1, b1, a2, b2))


def hellinger_beta(a1: Any, b1: Any, a2: Any, b2: Any) -> Any:
    """Hellinger distance between Beta(a1, b1) and Beta(a2, b2), broadcasting, in [0, 1].

    H^2 = 1 - B((a1+a2)/2, (b1+b2)/2) / sqrt(B(a1,b1) B(a2,b2))  (Dimitrakakis et al. 2017).
    Parameters must be positive; they are not re-checked here (speed); use :func:`hellinger`
    for checked scalar calls.
    """
    return _scalar(_hellinger_from_log_affinity(np.asarray(log_affinity_beta(a1, b1, a2, b2))))


def _log_affinity_dirichlet_core(x1: np.ndarray, x2: np.ndarray) -> Any:
    shape, k = x1.shape[:-1], x1.shape[-1]  # broadcast already (_rowwise_chunked)
    x1, x2 = x1.reshape(-1, k), x2.reshape(-1, k)
    m, d = (x1 + x2) / 2, (x2 - x1) / 2
    lo_total = np.minimum(np.sum(x1, axis=-1), np.sum(x2, axis=-1))
    parts = jensen_lgamma(m, d, np.minimum(x1, x2))
    total = jensen_lgamma(np.sum(m, axis=-1), np.sum(d, axis=-1), lo_total)
    out = np.sum(parts, axis=-1) - total
    _far_apart(out, np.sum(np.abs(parts), axis=-1) + np.abs(total), x1, x2)
    return np.minimum(out, 0.0).reshape(shape)


def log_affinity_dirichlet(alpha1: Any, alpha2: Any) -> Any:
    """log Bhattacharyya coefficient of Dirichlets; last axis = categories, broadcasting."""
    return _scalar(_rowwise_chunked(_log_affinity_dirichlet_core, alpha1, alpha2))


def hellinger_dirichlet(alpha1: Any, alpha2: Any) -> Any:
    """Hellinger distance between Dirichlet(alpha1) and Dirichlet(alpha2), broadcasting.

    H^2 = 1 - B((alpha1 + alpha2)/2) / sqrt(B(alpha1) B(alpha2)), with the multivariate beta
    function B(alpha) = prod Gamma(alpha_i) / Gamma(sum alpha_i); last axis = categories.
    """
    log_bc = np.asarray(log_affinity_dirichlet(alpha1, alpha2))
    return _scalar(_hellinger_from_log_affinity(log_bc))


#: KL elements from the scalar functions: a total below this, or a parameter below this
#: share of its counterpart (the closed form's error there is about 2e-16 / share)
_EXACT_BELOW = 1e-6


def _exact_where(out: Any, hard: np.ndarray, fn: Callable[[int], float]) -> np.ndarray:
    """``out`` with its elements where ``hard`` (flat index i) replaced by ``fn(i)``; NaN
    where that overflows (a sum of parameters past DBL_MAX: ``math.fsum`` raises)."""
    out = np.array(out, dtype=float)  # a contiguous copy: its flat view writes through
    if np.any(hard):
        flat = out.reshape(-1)
        for i in np.flatnonzero(hard):
            try:
                flat[i] = fn(int(i))
            except OverflowError:
                flat[i] = math.nan
    return out


def _kl_beta_core(a1: np.ndarray, b1: np.ndarray, a2: np.ndarray, b2: np.ndarray) -> Any:
    da, db = a2 - a1, b2 - b1
    x0, y0 = a1 + b1, a2 + b2
    with np.errstate(invalid="ignore"):
        out = np.maximum(
            bregman_lgamma(a1, da) + bregman_lgamma(b1, db) - bregman_lgamma(x0, da + db), 0.0
        )
        # where x + delta loses the smaller argument's digits, terms of size 1/x0 cancel,
        # or the closed form failed (a Python loop: only these, for speed)
        hard = (x0 < _EXACT_BELOW) | (a2 < _EXACT_BELOW * a1) | (b2 < _EXACT_BELOW * b1)
        hard |= (y0 < _EXACT_BELOW * x0) | ~np.isfinite(out)
    p1, q1, p2, q2 = (np.ravel(v) for v in (a1, b1, a2, b2))
    return _exact_where(out, hard, lambda i: _exact.kl_beta(p1[i], q1[i], p2[i], q2[i]))


def kl_beta(a1: Any, b1: Any, a2: Any, b2: Any) -> Any:
    """KL(Beta(a1, b1) || Beta(a2, b2)), broadcasting, >= 0 (inf past DBL_MAX, never NaN).

    ``log B(a2,b2) - log B(a1,b1) + (a1-a2) psi(a1) + (b1-b2) psi(b1)
    + (a2-a1+b2-b1) psi(a1+b1)``, assembled from lgamma Bregman divergences; elements with
    a parameter below 1e-6 of its counterpart, or a1 + b1 < 1e-6, from
    :func:`dpbayes.models.divergence_exact.kl_beta` (a Python loop over those only).
    """
    return _scalar(_elementwise_chunked(_kl_beta_core, a1, b1, a2, b2))


def _kl_dirichlet_core(x1: np.ndarray, x2: np.ndarray) -> Any:
    d = x2 - x1
    x0, y0 = np.sum(x1, axis=-1), np.sum(x2, axis=-1)
    with np.errstate(invalid="ignore"):
        out = np.sum(bregman_lgamma(x1, d), axis=-1) - bregman_lgamma(x0, np.sum(d, axis=-1))
        out = np.maximum(out, 0.0)
        # the rows the closed form may lose (see _kl_beta_core)
        hard = (x0 < _EXACT_BELOW) | np.any(x2 < _EXACT_BELOW * x1, axis=-1)
        hard |= (y0 < _EXACT_BELOW * x0) | ~np.isfinite(out)
    k = x1.shape[-1]
    r1, r2 = x1.reshape(-1, k), x2.reshape(-1, k)
    return _exact_where(out, hard, lambda i: _exact.kl_dirichlet(r1[i], r2[i]))


def kl_dirichlet(alpha1: Any, alpha2: Any) -> Any:
    """KL(Dirichlet(alpha1) || Dirichlet(alpha2)); last axis = categories, broadcasting.

    As :func:`kl_beta`: rows with a parameter below 1e-6 of its counterpart, or a total
    of alpha1 below 1e-6, from :func:`dpbayes.models.divergence_exact.kl_dirichlet`.
    """
    return _scalar(_rowwise_chunked(_kl_dirichlet_core, alpha1, alpha2))


# --------------------------------------------------------------------------- scalar API
def _same_family(p: Any, q: Any) -> None:
    for name, v in (("p", p), ("q", q)):
        if not isinstance(v, Beta | Dirichlet | Normal):
            raise TypeError(f"{name} must be a Beta, Dirichlet or Normal, got {type(v).__name__}")
    if type(p) is not type(q):
        raise TypeError(
            f"p and q must be of the same family, got {type(p).__name__} and {type(q).__name__}"
        )
    if isinstance(p, Dirichlet) and p.m != q.m:
        raise ValueError(f"p and q must have the same number of categories, got {p.m} and {q.m}")


def _normal_log_affinity(p: Normal, q: Normal) -> float:
    v = p.sd**2 + q.sd**2
    return 0.5 * float(np.log1p(-((p.sd - q.sd) ** 2) / v)) - (p.loc - q.loc) ** 2 / (4 * v)


def hellinger(p: Distribution, q: Distribution) -> float:
    """Hellinger distance H(p, q) = sqrt(1 - int sqrt(p q)) in [0, 1], closed form.

    Normal: 1 - BC with BC = sqrt(2 s1 s2 / (s1^2 + s2^2)) exp(-(m1-m2)^2 / (4 (s1^2 + s2^2))).
    """
    _same_family(p, q)
    if isinstance(p, Beta):
        return float(hellinger_beta(p.a, p.b, q.a, q.b))  # type: ignore[attr-defined]
    if isinstance(p, Dirichlet):
        return float(hellinger_dirichlet(p.alpha, q.alpha))  # type: ignore[attr-defined]
    assert isinstance(p, Normal) and isinstance(q, Normal)
    return float(_hellinger_from_log_affinity(np.asarray(_normal_log_affinity(p, q))))


def kl(p: Distribution, q: Distribution) -> float:
    """Kullback-Leibler divergence KL(p || q) = int p log(p/q) >= 0, closed form.

    Normal: log(s2/s1) + (s1^2 + (m1-m2)^2) / (2 s2^2) - 1/2.
    """
    _same_family(p, q)
    if isinstance(p, Beta):
        return float(kl_beta(p.a, p.b, q.a, q.b))  # type: ignore[attr-defined]
    if isinstance(p, Dirichlet):
        return float(kl_dirichlet(p.alpha, q.alpha))  # type: ignore[attr-defined]
    assert isinstance(p, Normal) and isinstance(q, Normal)
    r2m1 = (p.sd - q.sd) * (p.sd + q.sd) / q.sd**2  # (s1/s2)^2 - 1
    out = -0.5 * float(log1pmx(np.asarray(r2m1))) + (p.loc - q.loc) ** 2 / (2 * q.sd**2)
    return max(out, 0.0)


# --------------------------------------------------------------------------- total variation
_ZMAX = 745.0  # logit range: expit(-745) is the smallest positive double


def _log_expit(z: float) -> float:
    """log(1 / (1 + exp(-z))) for a float, without overflow."""
    return -math.log1p(math.exp(-z)) if z >= 0 else z - math.log1p(math.exp(z))


def _l1_from_tails(wp: float, wq: float, bounds: list[tuple[bool, float, float]]) -> float:
    """int |wp p - wq q| from the tail masses at the crossing points of wp p and wq q.

    ``bounds`` lists the crossing points in increasing order as ``(upper, tp, tq)``: lower
    tail masses ``(P(X <= c), Q(X <= c))`` if ``upper`` is False, else upper tail masses.
    ``G(c) = wp P(X <= c) - wq Q(X <= c)`` is kept as (constant, variable) parts so that
    differences of two upper tails never subtract numbers close to ``wp - wq``.
    """
    parts: list[tuple[float, float]] = [(0.0, 0.0)]
    for upper, tp, tq in bounds:
        if upper:
            parts.append((wp - wq, -(wp * tp - wq * tq)))
        else:
            parts.append((0.0, wp * tp - wq * tq))
    parts.append((wp - wq, 0.0))
    return float(
        sum(abs((c1 - c0) + (v1 - v0)) for (c0, v0), (c1, v1) in itertools.pairwise(parts))
    )


def _betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta I_x(a, b), finite where scipy's is NaN.

    scipy returns NaN at some x for a parameter near 1e300 against a small one (at
    a = 3 or 1e5 with b = 1e300, around x = a / b). There Beta(a, b) is b^-1 Gamma(a) to a
    relative error of order a / b (and Beta(a, b) is 1 - that of the mirror), so the Gamma
    cdf stands in: gammainc(a, b x) if b > a, else gammaincc(b, a (1 - x)).
    """
    value = float(special.betainc(a, b, x))
    if not math.isnan(value):
        return value
    with np.errstate(over="ignore"):
        if b > a:
            return float(special.gammainc(a, b * x))
        return float(special.gammaincc(b, a * (1.0 - x)))


def _weighted_beta_l1(lwp: float, a1: float, b1: float, lwq: float, a2: float, b2: float) -> float:
    """int_0^1 |wp Beta(a1,b1)(x) - wq Beta(a2,b2)(x)| dx with wp = exp(lwp), wq = exp(lwq).

    log(wp p / wq q) = const + (a1-a2) log x + (b1-b2) log(1-x) is monotone on each side of
    its one stationary point, so it has at most two zeros; they are found in logit space by
    Brent's method, and the integral is a sum of differences of (regularised incomplete
    beta) tail masses between them. Zeros below x = 5e-324 (parameters far below 0.01)
    are not resolved.
    """
    from scipy import optimize

    wp, wq = float(np.exp(lwp)), float(np.exp(lwq))
    if wp == 0.0 or wq == 0.0:
        return wp + wq
    const = lwp - lwq + (betaln(a2, b2) - betaln(a1, b1))
    da, db = a1 - a2, b1 - b2

    def h(z: float) -> float:
        return const + da * _log_expit(z) + db * _log_expit(-z)

    knots = [-_ZMAX, _ZMAX]
    if da != 0 and db != 0 and (da > 0) == (db > 0):
        zstar = float(np.log(abs(da)) - np.log(abs(db)))
        if -_ZMAX < zstar < _ZMAX:
            knots = [-_ZMAX, zstar, _ZMAX]
    roots = []
    for lo, hi in itertools.pairwise(knots):
        hl, hh = h(lo), h(hi)
        if hl * hh < 0:
            # at extreme parameters (a = 1e16 against b = 1e50) h is so steep that Brent's
            # method needed 102 steps, past scipy's default 100, and raised: a failure for
            # some parameters only, which a private program's data could choose. 1000 steps,
            # and past them the bracketed estimate, never an exception
            z, _ = optimize.brentq(
                h, lo, hi, xtol=1e-13, maxiter=1000, full_output=True, disp=False
            )
            roots.append(float(z))
    bounds = []
    for z in roots:
        if z <= 0:
            x = float(special.expit(z))
            bounds.append((False, _betainc(a1, b1, x), _betainc(a2, b2, x)))
        else:  # P(X > x) = P(1 - X < 1 - x), 1 - X ~ Beta(b, a), 1 - x = expit(-z)
            y = float(special.expit(-z))
            bounds.append((True, _betainc(b1, a1, y), _betainc(b2, a2, y)))
    return _l1_from_tails(wp, wq, bounds)


def _tv_normal(p: Normal, q: Normal) -> float:
    if p.sd == q.sd:
        return float(special.erf(abs(p.loc - q.loc) / (2.0 * np.sqrt(2.0) * p.sd)))
    # log p - log q = A x^2 + B x + C
    A = 1 / (2 * q.sd**2) - 1 / (2 * p.sd**2)
    B = p.loc / p.sd**2 - q.loc / q.sd**2
    C = q.loc**2 / (2 * q.sd**2) - p.loc**2 / (2 * p.sd**2) + np.log(q.sd / p.sd)
    disc = B * B - 4 * A * C
    roots: list[float] = []
    if disc > 0:
        r = -(B + np.copysign(np.sqrt(disc), B)) / 2
        roots = sorted([r / A, C / r] if r != 0 else [0.0])
    bounds = []
    for x in roots:
        upper = x > p.loc
        tp = float(p.sf(x) if upper else p.cdf(x))
        tq = float(q.sf(x) if upper else q.cdf(x))
        bounds.append((upper, tp, tq))
    return min(max(0.5 * _l1_from_tails(1.0, 1.0, bounds), 0.0), 1.0)


def _tv_dirichlet3(p: Dirichlet, q: Dirichlet) -> float:
    """TV of two 3-category Dirichlets: 1-d quadrature over x_0 of an exact inner integral.

    With x_0 ~ Beta(a_0, a_1 + a_2) and y = x_1/(1 - x_0) ~ Beta(a_1, a_2) independent of
    x_0, TV = 1/2 int dx_0 int dy |p_0(x_0) p_y(y) - q_0(x_0) q_y(y)|; the inner integral is
    :func:`_weighted_beta_l1`. The outer integral runs over the central 1 - 4e-13 of both
    marginals of x_0 (the error of that cut is below 4e-13).
    """
    from scipy import integrate, stats

    a, b = p.alpha, q.alpha
    mp = stats.beta(a[0], a[1] + a[2])
    mq = stats.beta(b[0], b[1] + b[2])

    def inner(x0: float) -> float:
        return _weighted_beta_l1(
            float(mp.logpdf(x0)),
            float(a[1]),
            float(a[2]),
            float(mq.logpdf(x0)),
            float(b[1]),
            float(b[2]),
        )

    lo = float(min(mp.ppf(1e-13), mq.ppf(1e-13)))
    hi = float(max(mp.isf(1e-13), mq.isf(1e-13)))
    qs = [1e-6, 1e-3, 0.05, 0.25, 0.5, 0.75, 0.95, 1 - 1e-3, 1 - 1e-6]
    pts = sorted({float(v) for d in (mp, mq) for v in d.ppf(qs) if lo < v < hi})
    val, _ = integrate.quad(inner, lo, hi, points=pts or None, limit=200, epsabs=1e-10, epsrel=1e-9)
    return min(max(0.5 * val, 0.0), 1.0)


def total_variation(p: Distribution, q: Distribution) -> float:
    """Total variation distance sup_A |P(A) - Q(A)| = (1/2) int |p - q|, in [0, 1].

    Beta and Normal: exact up to root finding, as sums of tail-mass differences between
    the (at most two) points where the densities cross; Betas by
    :func:`dpbayes.models.divergence_exact.tv_beta`, which finds crossings down to
    log x ~ -4.5e307. Dirichlet: m = 2 is the TV of Beta(alpha_0, alpha_1) (read
    directly: sum(alpha) - alpha_0 rounds away an alpha_1 below an ulp of alpha_0); m = 3
    by 1-d quadrature of an exact inner integral (a fraction of a second to a few seconds;
    not accurate at parameters far below 0.01); m >= 4 raises ValueError. Every positive
    finite parameter is taken, subnormals included (module docstring).
    """
    _same_family(p, q)
    if isinstance(p, Beta) and isinstance(q, Beta):
        return _exact.tv_beta(float(p.a), float(p.b), float(q.a), float(q.b))
    if isinstance(p, Normal) and isinstance(q, Normal):
        return _tv_normal(p, q)
    assert isinstance(p, Dirichlet) and isinstance(q, Dirichlet)
    if p.m == 2:
        a1, b1 = (float(v) for v in p.alpha)
        a2, b2 = (float(v) for v in q.alpha)
        return _exact.tv_beta(a1, b1, a2, b2)
    if p.m == 3:
        return _tv_dirichlet3(p, q)
    raise ValueError(
        f"total_variation of Dirichlets is implemented for 2 or 3 categories, got {p.m}: "
        "exact integration over a higher-dimensional simplex is not practical"
    )


_F_QUANTILES = (1e-6, 1e-3, 0.05, 0.25, 0.5, 0.75, 0.95, 1 - 1e-3, 1 - 1e-6)


def _f_divergence_beta(p: Beta, q: Beta, f: Callable[[float], float]) -> float:
    """int q f(p/q) over [0, 1] in logit coordinates z, dx = x (1 - x) dz.

    In z the integrand is smooth even when a or b < 1 (the density's poles at 0 and 1
    become exponential tails), so quadrature needs no special endpoint treatment.
    """
    from scipy import integrate, stats

    cq = betaln(q.a, q.b)
    clr = cq - betaln(p.a, p.b)
    da, db = p.a - q.a, p.b - q.b

    def integrand(z: float) -> float:
        lx, l1x = _log_expit(z), _log_expit(-z)
        log_w = q.a * lx + q.b * l1x - cq  # log(q(x) x (1 - x))
        if log_w < -745.0:
            return 0.0
        ratio = math.exp(min(da * lx + db * l1x + clr, 700.0))
        return math.exp(log_w) * float(f(ratio))

    def logit_lo(d: Beta, prob: float) -> float:  # logit of the lower ``prob`` quantile
        x, y = float(d.ppf(prob)), float(stats.beta.isf(prob, d.b, d.a))  # y = 1 - x
        return float(np.log(x) - np.log1p(-x)) if x < 0.5 else float(np.log1p(-y) - np.log(y))

    def logit_hi(d: Beta, prob: float) -> float:  # logit of the upper ``prob`` quantile
        return -logit_lo(Beta(d.b, d.a), prob)

    lo = max(-_ZMAX, min(logit_lo(d, 1e-15) for d in (p, q)))
    hi = min(_ZMAX, max(logit_hi(d, 1e-15) for d in (p, q)))
    pts = sorted({z for d in (p, q) for pr in _F_QUANTILES if lo < (z := logit_lo(d, pr)) < hi})
    val, _ = integrate.quad(integrand, lo, hi, points=pts or None, limit=400, epsabs=1e-13)
    return float(val)


def _f_divergence_normal(p: Normal, q: Normal, f: Callable[[float], float]) -> float:
    from scipy import integrate

    cq = math.log(q.sd) + 0.5 * math.log(2 * math.pi)
    clr = math.log(q.sd / p.sd)

    def integrand(x: float) -> float:
        zq, zp = (x - q.loc) / q.sd, (x - p.loc) / p.sd
        log_q = -0.5 * zq * zq - cq
        if log_q < -745.0:
            return 0.0
        ratio = math.exp(min(-0.5 * zp * zp + 0.5 * zq * zq + clr, 700.0))
        return math.exp(log_q) * float(f(ratio))

    lo = min(float(d.ppf(1e-15)) for d in (p, q))
    hi = max(2 * d.loc - float(d.ppf(1e-15)) for d in (p, q))
    pts = sorted({float(v) for d in (p, q) for v in d.ppf(list(_F_QUANTILES)) if lo < v < hi})
    val, _ = integrate.quad(integrand, lo, hi, points=pts, limit=400, epsabs=1e-13)
    return float(val)


def f_divergence(p: Distribution, q: Distribution, f: Callable[[float], float]) -> float:
    """D_f(P || Q) = int q(x) f(p(x) / q(x)) dx by numerical quadrature (Beta or Normal).

    ``f`` is convex with f(1) = 0 (e.g. ``lambda t: t * log(t)`` gives KL(P||Q),
    ``lambda t: abs(t - 1) / 2`` total variation, ``lambda t: (sqrt(t) - 1)**2 / 2`` the
    squared Hellinger distance); it is called with one float at a time. The integral
    runs over all but 2e-15 of the mass of both distributions (Betas in logit
    coordinates), with breakpoints at their quantiles; ratios above e^700 are capped.
    """
    _same_family(p, q)
    if not callable(f):
        raise TypeError(f"f must be callable, got {type(f).__name__}")
    if isinstance(p, Beta) and isinstance(q, Beta):
        return _f_divergence_beta(p, q, f)
    if isinstance(p, Normal) and isinstance(q, Normal):
        return _f_divergence_normal(p, q, f)
    raise TypeError("f_divergence supports Beta and Normal distributions, got Dirichlet")
