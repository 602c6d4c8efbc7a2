"""Exact scalar KL and total variation of Betas and Dirichlets at tiny parameters.

The domain is every parameter in [TINY, DBL_MAX], TINY = 2.2e-308 the smallest normal
double; the results agree with mpmath at 420 digits there
(``tests/programs/test_tiny_parameters.py``, ``tests/models/test_divergence_exact.py``).
They serve :func:`dpbayes.models.divergence.total_variation` (Betas, 2-category
Dirichlets), the fallback of the vectorised ``kl_beta``/``kl_dirichlet`` of
:mod:`dpbayes.models.divergence` where their closed form loses digits, and the private
programs' runs (``dpbayes/programs/PROOF.md`` §4). The vectorised closed forms alone lose
the tiny parameters:

* KL: the Bregman form D(x, x + delta) rebuilds the smaller argument as x + delta, which
  rounds to 0 (or loses all its digits) once it is below an ulp of x:
  KL(Beta(1, 11) || Beta(1e-300, 1e-300)) was inf - inf = NaN.
* TV: the crossings were searched only for x in [expit(-745), expit(745)]; for a
  parameter far below 0.01 the crossing is at log x ~ -1/a (down to -4.5e307 at TINY), and
  TV(Beta(1e-300, 1), Beta(2e-300, 1)) was 0 instead of 1/4.

Here both are computed in log space. KL: each D(x, y) is taken from its two (exact)
endpoints; below 1 by the shift lgamma(x) = lgamma(x + 1) - log x, which leaves
r - 1 - log r with r = y / x; the parts of size 1/x of the Dirichlet's terms are combined
as sum_i (beta_i / alpha_i)(1 - alpha_i / alpha_0) >= 0, so nothing of size 1/x cancels.
TV: the crossings are found on the whole real line of logit coordinates (compressed by
v = sign(u) log1p|u|), and the tail masses at a crossing whose x is below 1e-304 are
x^a / (a B(a, b)) (series, where b x < 1e-17) or the Gamma(a, rate b) cdf (b above 1e286).
Below TINY (subnormal parameters, which programs refuse) a crossing can lie at
log x ~ -1/a past the doubles; :func:`tv_beta` takes its tail masses from their asymptotic
form (:func:`_deep_tail`), so the models' ``total_variation`` takes every positive double.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Sequence

import numpy as np
from scipy import optimize, special

from dpbayes.models.lgamma_differences import betaln, bregman_lgamma, gammaln, stirling_tail

__all__ = ["TINY", "kl_beta", "kl_dirichlet", "tv_beta"]

_Vector = Sequence[float] | np.ndarray
TINY = sys.float_info.min
_MAX = sys.float_info.max
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_STIRLING = 20.0


def _breg(x: float, delta: float) -> float:
    """The models' D(x, x + delta) for one pair (their vectorised function)."""
    return float(bregman_lgamma(np.asarray(x, dtype=float), np.asarray(delta, dtype=float)))


def _digamma_tail(x: float) -> float:
    """log x - 1/(2x) - digamma(x) for x >= 20 (series to x^-10)."""
    r2 = 1.0 / (x * x)
    return r2 * (1 / 12 - r2 * (1 / 120 - r2 * (1 / 252 - r2 * (1 / 240 - r2 / 132))))


def _rm1mlog(r: float) -> float:
    """r - 1 - log r (>= 0) for r > 0, without cancellation near 1 (inf past DBL_MAX)."""
    if abs(r - 1.0) < 0.5:
        return -float(special.log1p(r - 1.0) - (r - 1.0)) if r != 1.0 else 0.0
    return r - 1.0 - math.log(r)


def _bregman(x: float, y: float, delta: float) -> float:
    """D(x, y) = lgamma(y) - lgamma(x) - (y - x) digamma(x) >= 0, from both endpoints.

    ``delta`` is y - x as the caller has it (exact for a difference of sums). Where
    y >= x / 2 the models' :func:`bregman_lgamma` (x, delta) is accurate (y = x + delta is
    recovered to a relative ~1e-16); below, y is taken as it is.
    """
    if y >= 0.5 * x:
        return _breg(x, delta)
    r = y / x  # in (0, 1/2)
    if x < 1.0:
        # D(x, y) = D(x + 1, y + 1) + r - 1 - log r (lgamma, digamma shifted by one)
        return _breg(x + 1.0, y - x) + _rm1mlog(r)
    if y >= _STIRLING:  # both >= 20: Stirling's series in r, every term >= 0 or tiny
        rl = r * math.log(r)
        head = x * (rl - r + 1.0) + 0.5 * _rm1mlog(r)
        return head + stirling_tail(y) - stirling_tail(x) + (y - x) * _digamma_tail(x)
    lg_y = float(gammaln(y))
    if x >= _STIRLING:  # lgamma(x) and digamma(x) by Stirling: no x log x is formed
        return (
            lg_y
            + (0.5 - y) * math.log(x)
            + x
            - 0.5
            - _HALF_LOG_2PI
            - stirling_tail(x)
            + y / (2.0 * x)
            - (x - y) * _digamma_tail(x)
        )
    return lg_y - math.lgamma(x) + (x - y) * float(special.digamma(x))


def kl_dirichlet(alpha1: _Vector, alpha2: _Vector) -> float:
    """KL(Dir(alpha1) || Dir(alpha2)) >= 0 for parameters in [TINY, DBL_MAX].

    sum_i D(alpha_i, beta_i) - D(alpha_0, beta_0) (sums alpha_0, beta_0). With
    alpha_0 < 1 every D is shifted by one, and the parts of size beta / alpha combine into
    sum_i (beta_i / alpha_i)(alpha_0 - alpha_i) / alpha_0, a sum of terms >= 0. A value past
    DBL_MAX (a parameter near TINY against one near 1 gives ~1/TINY, finite) is inf; never
    NaN.
    """
    a = [float(v) for v in np.ravel(alpha1)]
    b = [float(v) for v in np.ravel(alpha2)]
    d = [y - x for x, y in zip(a, b, strict=True)]
    a0, b0, d0 = math.fsum(a), math.fsum(b), math.fsum(d)
    if a0 >= 1.0:
        terms = [_bregman(x, y, dl) for x, y, dl in zip(a, b, d, strict=True)]
        out = math.fsum(terms) - _bregman(a0, b0, d0)
    else:
        shifted = [_breg(x + 1.0, dl) for x, dl in zip(a, d, strict=True)]
        logs = [math.log(y) - math.log(x) for x, y in zip(a, b, strict=True)]
        # y (rest / a0) / x: the share rest / a0 <= 1 first, so the term overflows only where
        # it passes DBL_MAX (y / x first overflowed at KL(Dir(TINY, TINY) || Dir(5, 1)) =
        # 3 / TINY = 1.35e308, and at a subnormal x against a y of 1)
        with np.errstate(over="ignore"):
            big = [
                y * (math.fsum(a[:i] + a[i + 1 :]) / a0) / x
                for i, (x, y) in enumerate(zip(a, b, strict=True))
            ]
        out = (
            math.fsum(shifted)
            - _breg(a0 + 1.0, d0)
            - math.fsum(logs)
            + (math.log(b0) - math.log(a0))
            - (len(a) - 1)
            + math.fsum(big)
        )
    if math.isnan(out):  # only from inf - inf of two terms past DBL_MAX
        return math.inf
    return max(out, 0.0)


def kl_beta(a1: float, b1: float, a2: float, b2: float) -> float:
    """KL(Beta(a1, b1) || Beta(a2, b2)): the Dirichlet's with two categories."""
    return kl_dirichlet([a1, b1], [a2, b2])


# --------------------------------------------------------------------------- total variation
_BOTH_TINY = 1e-250  # both parameters below: I_x(a, b) = b / (a + b) for x >= 1e-304
_DEEP = -700.0  # below (x < 1e-304) the tail masses come from their asymptotic forms
_VMAX = 709.7  # the compressed logit range: expm1(709.7) = 1.65e308


def _log_expit(u: float) -> float:
    return -math.log1p(math.exp(-u)) if u >= 0 else u - math.log1p(math.exp(u))


def _betainc(a: float, b: float, x: float) -> float:
    """I_x(a, b) for x in [1e-304, 1/2], finite and in [0, 1] for every a, b >= TINY."""
    if a < _BOTH_TINY and b < _BOTH_TINY:
        # scipy returns 0 for both parameters below ~1e-307 (0.5 is right at a = b). Here
        # t^a, (1 - t)^b are 1 - O(1e-247) on [x, 1/2]: the mass below x is the atom-like
        # mass near 0, b / (a + b), up to a relative 1e-247
        return 1.0 / (1.0 + a / b)
    value = float(special.betainc(a, b, x))
    if not math.isnan(value):
        return value
    with np.errstate(over="ignore"):  # NaN near x ~ a / b for b ~ 1e300: the Gamma cdf
        if b > a:
            return float(special.gammainc(a, b * x))
        return float(special.gammaincc(b, a * (1.0 - x)))


def _lower_tail(a: float, b: float, u: float) -> float:
    """P(X <= x) for X ~ Beta(a, b), x = expit(u), u <= 0 (any size)."""
    if u >= _DEEP:
        return _betainc(a, b, float(special.expit(u)))
    ell = _log_expit(u)  # log x, below -700
    log_bx = math.log(b) + ell
    if log_bx < -40.0:
        # I_x(a, b) = x^a (1 - x)^b / (a B(a, b)) (1 + O((a + b) x)), b x and x < 1e-17
        with np.errstate(over="ignore"):
            return min(1.0, math.exp(min(a * ell - math.log(a) - betaln(a, b), 0.0)))
    # b > 1e286 and x < 1e-304: Beta(a, b) is Gamma(a, rate b) to a relative O(a^2 / b + x)
    return float(special.gammainc(a, math.exp(log_bx)))


def _lgamma_step(x: float, y: float, d: float) -> float:
    """lgamma(y) - lgamma(x), with d = y - x as the caller has it (exact or nearly).

    For x, y >= 20 within a factor of 2 of each other by Stirling's series as
    (x - 1/2) log1p(d / x) + d log y - d
    + T(y) - T(x) (T = :func:`stirling_tail`): of the size of d log y, not of y log y as
    the two lgammas are (at 1e14 an ulp of each is 0.016), and insensitive to a rounding
    of x (the derivative in x at fixed d is ~ d / x). Below, the two lgammas.
    """
    if min(x, y) >= _STIRLING and 0.5 * x <= y <= 2.0 * x and math.isfinite(x + y):
        head = (x - 0.5) * math.log1p(d / x) + d * (math.log(y) - 1.0)
        return head + float(stirling_tail(y) - stirling_tail(x))
    return float(gammaln(y) - gammaln(x))


def _betaln_change(a1: float, b1: float, a2: float, b2: float) -> float:
    """log B(a2, b2) - log B(a1, b1) without the cancellation of two large log B's.

    Each log B is of the size of (a + b) log(a + b); their difference, of the size of the
    parameters' changes, is taken as three lgamma steps (:func:`_lgamma_step`) where every
    parameter is at least 20 and within a factor of 2 of its counterpart (elsewhere the
    difference is as large as the log B's), with the change of a + b summed exactly
    (math.fsum): a + b itself rounds by up to 0.008 at 1e14, which moved the TV's density crossings.
    """
    near = 0.5 * a1 <= a2 <= 2.0 * a1 and 0.5 * b1 <= b2 <= 2.0 * b1
    if not near or min(a1, b1, a2, b2) < _STIRLING or not math.isfinite(a1 + b1 + a2 + b2):
        return betaln(a2, b2) - betaln(a1, b1)
    d0 = math.fsum((a2, b2, -a1, -b1))
    return (
        _lgamma_step(a1, a2, a2 - a1)
        + _lgamma_step(b1, b2, b2 - b1)
        - _lgamma_step(a1 + b1, a2 + b2, d0)
    )


def _to_u(v: float) -> float:
    return math.copysign(math.expm1(abs(v)), v)


def _deep_tail(a: float, b: float, const: float, da: float) -> float:
    """P(X <= x*) for X ~ Beta(a, b) at the crossing log x* = L = -const / da past the
    doubles (|L| > 1.6e308, a subnormal parameter): x*^a / (a B(a, b)), with a L formed as
    -const (a / da) (L itself overflows)."""
    a_l = -const * (a / da)
    return math.exp(min(a_l - math.log(a) - betaln(a, b), 0.0))


def tv_beta(a1: float, b1: float, a2: float, b2: float) -> float:
    """TV(Beta(a1, b1), Beta(a2, b2)) in [0, 1] for every positive finite parameter.

    log(p / q) = C + (a1 - a2) log x + (b1 - b2) log(1 - x) has at most two zeros; they are
    found (Brent) in v = sign(u) log1p|u| of the logit u, over all of u's doubles, so a
    crossing at log x ~ -4.5e307 is found; TV = (1/2) sum |G(c_j+1) - G(c_j)| with
    G = P(X <= c) - Q(X <= c) (upper tails above 1/2). With a subnormal parameter (below
    TINY) a crossing can lie past u's doubles, at log x ~ -1/a down to -2e323: it is
    there if h at the end of u's range has not yet the sign of its limit, and its tail
    masses are x^a / (a B(a, b)) (:func:`_deep_tail`; log(1 - x) there is 0). With every
    parameter at least TINY the result is kept within Le Cam's H^2 <= TV <= H sqrt(2 - H^2)
    of the models' Hellinger distance.
    """
    if (a1, b1) == (a2, b2):
        return 0.0
    const = _betaln_change(a1, b1, a2, b2)
    da, db = a1 - a2, b1 - b2

    def h(v: float) -> float:
        u = _to_u(v)
        with np.errstate(over="ignore", invalid="ignore"):
            value = float(np.float64(const) + np.float64(da) * _log_expit(u) + db * _log_expit(-u))
        # an overflow keeps its sign: the bracket is still one (inf - inf does not arise:
        # where one log-expit is large the other is tiny)
        return min(max(value, -_MAX), _MAX)

    knots = [-_VMAX, _VMAX]
    if da != 0 and db != 0 and (da > 0) == (db > 0):
        ustar = math.log(abs(da)) - math.log(abs(db))
        vstar = math.copysign(math.log1p(abs(ustar)), ustar)
        if -_VMAX < vstar < _VMAX:
            knots = [-_VMAX, vstar, _VMAX]
    gs = [0.0]
    for lo, hi in itertools.pairwise(knots):
        hl, hh = h(lo), h(hi)
        if math.isnan(hl) or math.isnan(hh) or (hl > 0) == (hh > 0) or hl == 0 or hh == 0:
            continue
        v, _ = optimize.brentq(h, lo, hi, xtol=1e-12, maxiter=1000, full_output=True, disp=False)
        u = _to_u(float(v))
        if u <= 0:
            gs.append(_lower_tail(a1, b1, u) - _lower_tail(a2, b2, u))
        else:  # P(X > x) = P(1 - X < 1 - x), 1 - X ~ Beta(b, a)
            gs.append(_lower_tail(b2, a2, -u) - _lower_tail(b1, a1, -u))
    if da != 0 and min(a1, a2) < TINY:  # h -> -sign(da) inf as log x -> -inf
        hl = h(-_VMAX)
        if not math.isnan(hl) and hl != 0 and (hl > 0) == (da > 0):
            gs.insert(1, _deep_tail(a1, b1, const, da) - _deep_tail(a2, b2, const, da))
    if db != 0 and min(b1, b2) < TINY:  # the mirror: log(1 - x) -> -inf, 1 - X ~ Beta(b, a)
        hh = h(_VMAX)
        if not math.isnan(hh) and hh != 0 and (hh > 0) == (db > 0):
            gs.append(_deep_tail(b2, a2, const, db) - _deep_tail(b1, a1, const, db))
    gs.append(0.0)
    tv = 0.5 * math.fsum(abs(g1 - g0) for g0, g1 in itertools.pairwise(gs))
    from dpbayes.models.divergence import hellinger_beta  # it imports this module

    hel = float(hellinger_beta(a1, b1, a2, b2))
    # not below TINY: a subnormal midpoint (a1 + a2) / 2 loses its digits (at 5e-324
    # against 1e-323 H came out 0, and the clamp made the TV of 1/4 zero)
    if math.isfinite(hel) and min(a1, b1, a2, b2) >= TINY:
        hel = min(max(hel, 0.0), 1.0)
        tv = min(max(tv, hel * hel), hel * math.sqrt(2.0 - hel * hel))
    return min(max(tv, 0.0), 1.0)
