"""Bounds for the observe rule: how far one changed record moves a conjugate posterior.

Paper 002 §6.3, Lemmas 6.1 (Hellinger, Beta), 6.2 (total variation, Beta) and 6.3
(Hellinger, Dirichlet). The seed text lost the lemmas' formulas; what is implemented
here is their content, derived and checked numerically:

* Lemma 6.1: for a Beta(a, b) prior with a, b >= 1, observing 1 instead of 0 moves the
  posterior by at most H(Beta(2, 1), Beta(1, 2)) = sqrt(1 - pi/4) ~ 0.4633.
* The checker uses the *tight* value for the program at hand: with n public records of
  which one differs, the two posteriors are Beta(a + k + 1, b + n - 1 - k) and
  Beta(a + k, b + n - k) for some k in 0..n-1 (the other records are equal, and the
  posterior depends on the data only through the count), so the largest of these n
  distances bounds every neighbouring pair; it is <= the lemma's constant for a, b >= 1.
* Lemma 6.3 (Dirichlet): the same maximum over the counts of the n - 1 equal records and
  the pair of categories (i, j) the changed record moves between, in closed form (the
  affinity is g(alpha_i + c_i) g(alpha_j + c_j), largest distance at c_i = c_j = 0).
* Lemma 6.2 (TV): from the Hellinger bound by Le Cam's inequality
  TV <= H sqrt(2 - H^2) (with H^2 = 1 - affinity), valid for any pair of distributions.
* Normal mean with known variance: the posterior means differ by at most
  Delta = B / kv / (1/v0 + n/kv) for records that change by at most B, the variances are
  equal, so H^2 = 1 - exp(-Delta^2 / (8 v)), KL = Delta^2 / (2 v), TV = 2 Phi(Delta / 2 sd) - 1
  (computed as erf(Delta / 2 sqrt(2 v)), which does not cancel for a small Delta).
* Floating point: every bound is an upper bound of the exact value (A4 in ``PROOF.md``):
  rational expressions are evaluated exactly and rounded up, the values of special
  functions (lgamma, erf, expm1) get the margin of :func:`~dpbayes.programs.outward.special`.
* Several records: k changed records are k neighbouring steps (:func:`several_records`).

Every function returns a dict with ``hellinger``, ``tv``, ``kl``, ``coords`` (the
largest change of each posterior parameter), ``l1`` and ``l2`` (of the parameter vector:
one record moves one count up and one down, so 2 and sqrt 2 for Beta and Dirichlet), and
``note`` (how it was obtained).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from scipy import special

from dpbayes.models import hellinger_beta, hellinger_dirichlet, kl_beta, kl_dirichlet
from dpbayes.programs import outward

__all__ = [
    "LEMMA_6_1_HELLINGER",
    "MAX_LEMMA_N",
    "beta_bernoulli_bounds",
    "dirichlet_categorical_bounds",
    "le_cam_tv",
    "normal_mean_bounds",
    "normal_shift_bounds",
    "several_records",
]

LEMMA_6_1_HELLINGER = math.sqrt(1.0 - math.pi / 4.0)


_SQRT2 = outward.hypot([1.0, 1.0])  # the smallest double >= sqrt(2)


def le_cam_tv(h: float) -> float:
    """TV <= sqrt(1 - (1 - H^2)^2) = H sqrt(2 - H^2) (Le Cam; H^2 = 1 - affinity).

    Increasing in H on [0, 1]; rounded up (:func:`~dpbayes.programs.outward.special`).
    """
    h = min(max(h, 0.0), 1.0)
    return min(1.0, outward.special(h * math.sqrt(2.0 - h * h)))


#: Largest n the Beta lemma enumerates (arrays of n doubles; ~17 s at this n). The same
#: as ``dpbayes audit``'s largest --n (``cli.cmd_audit.MAX_AUDIT_N``); at n = 10^11 the
#: enumeration asked numpy for 745 GiB.
MAX_LEMMA_N = 10_000_000


def beta_bernoulli_bounds(a: float, b: float, n: int) -> dict[str, Any]:
    """Largest distances between Beta posteriors of n coin flips differing in one flip.

    n (records observed, public ones included) is at most :data:`MAX_LEMMA_N`: the
    maximum is taken over all n counts.
    """
    if n > MAX_LEMMA_N:
        raise ValueError(
            f"n must be at most {MAX_LEMMA_N:,} for a Beta (or 2-category Dirichlet) "
            f"posterior: the observe lemma enumerates the n counts, got n = {n:,}"
        )
    k = np.arange(n, dtype=float)
    a1, b1 = a + k + 1.0, b + (n - 1) - k
    a2, b2 = a + k, b + n - k
    h = np.atleast_1d(hellinger_beta(a1, b1, a2, b2))
    i = int(np.argmax(h))
    kl12 = np.atleast_1d(kl_beta(a1, b1, a2, b2))
    kl21 = np.atleast_1d(kl_beta(a2, b2, a1, b1))
    hb = min(1.0, outward.special(float(h[i])))  # accurate to ~1e-14; rounded up
    lemma = (
        f"; Lemma 6.1 constant sqrt(1 - pi/4) = {LEMMA_6_1_HELLINGER:.4f} holds as a, b >= 1"
        if a >= 1 and b >= 1
        else ""
    )
    return {
        "hellinger": hb,
        "tv": le_cam_tv(hb),
        "kl": outward.special(float(max(kl12.max(), kl21.max()))),
        "coords": (1.0, 1.0),
        "l1": 2.0,
        "l2": _SQRT2,
        "note": (
            f"max over k of H(Beta({a:g}+k+1, {b:g}+{n - 1}-k), Beta({a:g}+k, {b:g}+{n}-k)) "
            f"= {hb:.4f} at k={i}{lemma}"
        ),
    }


def dirichlet_categorical_bounds(alpha: np.ndarray, n: int) -> dict[str, Any]:
    """Largest distances between Dirichlet posteriors of n records differing in one record.

    Lemma 6.3, in closed form. With beta = alpha + c (c the counts of the n - 1 equal
    records) and the changed record in category i or j, the posteriors are
    Dir(beta + e_i) and Dir(beta + e_j), and B(beta + e_i) = B(beta) beta_i / sum(beta), so

        affinity = g(beta_i) g(beta_j),  g(x) = Gamma(x + 1/2) / (Gamma(x) sqrt(x)),
        KL(Dir(beta + e_i) || Dir(beta + e_j)) = 1/beta_i - u(beta_i) + u(beta_j),

    with u(x) = log x - psi(x). Both depend on beta_i and beta_j only, and both distances
    decrease as either grows (g' > 0: psi(x + 1/2) - psi(x) > 1/(2x) termwise in their
    series; u' = 1/x - psi' < 0 and psi'(x) < 1/x + 1/x^2). So the largest distance is at
    the smallest beta_i, beta_j the counts allow: with m >= 3 categories c_i = c_j = 0
    (the other records in a third category), exactly; with m = 2 the counts of the two
    categories add up to n - 1, which :func:`beta_bernoulli_bounds` enumerates. The bound
    is exact for every n (no enumeration cap).
    """
    alpha = np.asarray(alpha, dtype=float)
    m = alpha.size
    if m == 2:
        out = beta_bernoulli_bounds(float(alpha[0]), float(alpha[1]), n)
        out["coords"] = (1.0, 1.0)
        out["note"] = "Lemma 6.3 with 2 categories: " + out["note"]
        return out
    # both distances decrease in beta_i and beta_j: the worst pair is the two smallest alphas
    i, j = (int(x) for x in np.argsort(alpha, kind="stable")[:2])
    e_i, e_j = np.eye(m)[i], np.eye(m)[j]
    # the models' divergences (lgamma Jensen gaps, Bregman divergences) keep their relative
    # accuracy for large alpha, where log g by lgamma differences cancels (1% at 1e6)
    hb = min(1.0, outward.special(float(hellinger_dirichlet(alpha + e_i, alpha + e_j))))
    kl_ij = float(kl_dirichlet(alpha + e_i, alpha + e_j))
    kl_ji = float(kl_dirichlet(alpha + e_j, alpha + e_i))
    return {
        "hellinger": hb,
        "tv": le_cam_tv(hb),
        "kl": outward.special(max(kl_ij, kl_ji, 0.0)),
        "coords": (1.0,) * m,
        "l1": 2.0,
        "l2": _SQRT2,
        "note": (
            f"Lemma 6.3 in closed form: H^2 = 1 - g(alpha_i) g(alpha_j) at the worst pair "
            f"(i, j) = ({i}, {j}), the other {n - 1} records elsewhere: H = {hb:.4f}"
        ),
    }


def several_records(one: dict[str, Any], k: int) -> dict[str, Any]:
    """Bounds when up to k records differ, from the one-record bounds ``one``.

    Change the records one at a time: k neighbouring steps, each bounded by ``one``; the
    metrics (Hellinger, TV, parameter L1/L2, each coordinate) add by the triangle
    inequality and stay capped at 1 where they are (H, TV); KL is not a metric: unbounded.
    """
    if k <= 1:
        return one
    h = min(1.0, outward.mul(k, one["hellinger"]))
    return {
        "hellinger": h,
        "tv": min(1.0, outward.mul(k, one["tv"])),
        "kl": math.inf,
        "coords": tuple(outward.mul(k, c) for c in one["coords"]),
        "l1": outward.mul(k, one["l1"]),
        "l2": outward.mul(k, one["l2"]),
        "note": f"{k} records may differ: {k} x ({one['note']}) by the triangle inequality",
    }


def normal_shift_bounds(d: float | Fraction, var: float | Fraction) -> dict[str, float]:
    """H, TV and KL between two Normals of variance ``var`` whose means differ by <= d.

    H^2 = 1 - exp(-x), TV = erf(sqrt x), KL = 4 x with x = d^2 / 8 var (each increasing in
    d); x is computed exactly and rounded up, and the results get the margin of
    :func:`~dpbayes.programs.outward.special` (the special functions, and a run's standard
    deviation sqrt(var) rounded to nearest). erf, not 2 Phi - 1, which cancels for a small
    shift.
    """
    x = outward.up(Fraction(d) ** 2 / (8 * Fraction(var)))  # exact, then rounded up
    return {
        "hellinger": min(1.0, outward.special(math.sqrt(-math.expm1(-x)))),
        "tv": min(1.0, outward.special(float(special.erf(math.sqrt(x))))),
        "kl": outward.special(outward.mul(4.0, x)),
    }


def normal_mean_bounds(
    prior_var: float, known_var: float, n: int, bound: float | None
) -> dict[str, Any]:
    """Distances between Normal-mean posteriors when one of n records moves by <= bound."""
    if bound is None:
        return {
            "hellinger": 1.0,
            "tv": 1.0,
            "kl": math.inf,
            "coords": (math.inf, 0.0),
            "l1": math.inf,
            "l2": math.inf,
            "note": "records are unbounded: the posterior mean moves arbitrarily far",
        }
    # exact rationals, rounded up: the mean's shift B / kv / (1/v0 + n/kv), and the
    # distances of two Normals of variance 1/prec whose means differ by that much
    prec = 1 / Fraction(prior_var) + n / Fraction(known_var)
    exact = Fraction(bound) / Fraction(known_var) / prec
    delta = outward.up(exact)
    var = float(1 / prec)
    shifted = normal_shift_bounds(exact, 1 / prec)
    return {
        "hellinger": shifted["hellinger"],
        "tv": shifted["tv"],
        "kl": shifted["kl"],
        "coords": (delta, 0.0),
        "l1": delta,
        "l2": delta,
        "note": (
            f"posterior mean moves by <= {bound:g}/kv/(1/v0 + n/kv) = {delta:.4g}; "
            f"posterior variance {var:.4g} is public"
        ),
    }
