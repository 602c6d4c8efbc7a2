"""Sufficient-statistics perturbation (SSP) for linear and logistic regression.

Bernstein & Sheldon 2019 ("Differentially private Bayesian linear regression") release
the sufficient statistics of a linear regression once, with Laplace noise, and do all
inference on the noisy statistics; Kulkarni et al. 2021 and Huggins et al. 2017
(PASS-GLM) do the same for logistic regression with the statistics of a quadratic
approximation of its log-likelihood. Both statistics are one quadratic form:

* linear: v = (x, y) in the box |x_j| <= B, |y| <= B_y; S = sum v v' holds X'X, X'y, y'y;
* logistic: v = (y x, 1) with y in {-1, +1}; S = sum v v' holds X'X (y^2 = 1), t1 = sum y x
  and the constant n (not released).

The upper triangle of S is released (linear: (d+1)(d+2)/2 numbers, logistic: d(d+3)/2)
with Laplace noise of scale Delta_1 / eps (eps-DP) or, on the vector whose off-diagonal
entries are multiplied by sqrt(2) (its L2 norm is the Frobenius norm of S), Gaussian
noise calibrated to Delta_2 ((eps, delta)-DP, Balle & Wang's analytic calibration).
With b the coordinate bounds of v, S_b = sum b_j and R^2 = sum b_j^2 (PROOF.md):

* Delta_1 = (S_b^2 + R^2) / 2 under substitute or add/remove one record (attained:
  one record at the corner b, the other 0); logistic: (S_b^2 + R^2) / 2 - 1/2, since the
  constant entry never changes (an upper bound). With a bound R_x^2 on ||x||^2 below the
  box's (a row-norm bound, or clip="ball"), S_b and R^2 are those of a = max(|v|, |w|):
  ||a_x||^2 <= 2 R_x^2 (substitute) or R_x^2 (add/remove), ||a_x||_1 <= sqrt(d ||a_x||^2);
* Delta_2 = sqrt(2) R^2 under substitute, R^2 under add/remove (logistic:
  sqrt(2) R^2 and sqrt(R^4 - 1));
* user level (k rows per user, add/remove): k times these (triangle inequality).

That is the joint release (``first_order_share=None``; the default for logistic regression
with Laplace noise). By default (``first_order_share="auto"``: rho = 0.5) for Gaussian
noise, and for linear regression with Laplace noise too, the entries are
split into two blocks, the second-order block Q = upper triangle of X'X and the
first-order block L = the last row (X'y and y'y; t1), each divided by its own sensitivity
and multiplied by sqrt(1 - rho), sqrt(rho) (Gaussian) or 1 - rho, rho (Laplace), so
that one mechanism of sensitivity 1 releases both: the budget is shared between them
(rho = 0.5: equally; PROOF.md §3b). The Gaussian block
sensitivities use R_x^2, the bound on ||x||^2 (d B^2 for the box, smaller with a
row-norm bound ``norm_bound`` on the model): Delta_Q = sqrt(2) R_x^2 (substitute) or
R_x^2, Delta_L^2 = 8 b_u^2 R_x^2 (+ b_u^4 for y'y) or 2 b_u^2 R_x^2 (+ b_u^4).

Noise is drawn by :class:`~dpbayes.privacy.LaplaceMechanism` /
:class:`~dpbayes.privacy.GaussianMechanism` from the release's noise source (secure unless
a seed is given). Everything after the noise (symmetrising, projection of X'X onto the
PSD cone, the posteriors) is post-processing.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from typing import Any

import numpy as np

from dpbayes.data.exact import ExactMoments, grid_exponents
from dpbayes.models.linear_regression import BayesianLinearRegression, RegressionStatistics
from dpbayes.models.logistic_regression import (
    BayesianLogisticRegression,
    LogisticStatistics,
)
from dpbayes.privacy import GaussianMechanism, LaplaceMechanism, Neighbours
from dpbayes.privacy.guarantee import user_level
from dpbayes.privacy.noise import NoiseSource
from dpbayes.release.base import Plan, Release, as_rng, register
from dpbayes.release.ssp.record import SspLinearRecord, SspLogisticRecord

__all__ = [
    "CLAMP_BITS",
    "FIRST_ORDER_SHARE",
    "NOISES",
    "SENSITIVITY_MARGIN",
    "block_l1_sensitivities",
    "block_l2_sensitivities",
    "entry_noise_sd",
    "plan_linear_ssp",
    "plan_logistic_ssp",
    "quadratic_l1_sensitivity",
    "quadratic_l2_sensitivity",
    "sensitivity_margin",
    "upper_triangle",
]

NOISES = ("laplace", "gaussian")
#: Default share rho of the budget spent on the first-order block (X'y, y'y; t1)
#: (``first_order_share="auto"``): for Gaussian noise, and for linear regression with
#: Laplace noise; the logistic Laplace release stays joint (docs/regression.md).
FIRST_ORDER_SHARE = 0.5


#: Each weighted entry handed to the noise is clamped to +-2**CLAMP_BITS times its public
#: scale before its one rounding (PROOF.md §3c): the clamp binds only beyond 2**37 (1.4e11)
#: records, and the rounding adds 2**-15 of each entry's scale to the sensitivity.
CLAMP_BITS = 37

#: Relative margin on the sensitivities: covers the few roundings of their formulas.
SENSITIVITY_MARGIN = 2.0**-40


def sensitivity_margin(m: int) -> float:
    """The relative margin for m coordinates: :data:`SENSITIVITY_MARGIN` plus (m + 8)
    2^-52, the most by which a row scaled into a ball in doubles can overshoot R_x^2
    (PROOF.md §3c, step 1)."""
    return SENSITIVITY_MARGIN + (m + 8) * 2.0**-52


#: The largest noise sd a release draws: squares of noisy values (the noise-aware
#: posteriors' variances) stay finite. Reached only at absurdly small eps.
MAX_NOISE_SD = 1e150

#: The smallest noise sd a release draws: the smallest normal double. Below it the noise
#: loses its precision to underflow, down to a scale of 0 (Laplace at eps = 1e300 with
#: bounds 1e-60), which the noise source refused inside the release. Reached only at
#: absurdly large eps.
MIN_NOISE_SD = sys.float_info.min

#: The public bounds a release accepts: within this range every sensitivity below (sums
#: of fourth powers of the bounds over up to 10^6 coordinates) is a normal float, so no
#: bound is lost to underflow or cancellation and none overflows.
BOUND_RANGE = (1e-60, 1e60)


def _bounds_vector(bounds: Any) -> np.ndarray:
    b = np.asarray(bounds, dtype=float).ravel()
    if b.size == 0 or not np.all(np.isfinite(b)) or np.any(b <= 0):
        raise ValueError(f"bounds must be finite and > 0, got {b.tolist()}")
    lo, hi = BOUND_RANGE
    if np.any(b < lo) or np.any(b > hi):
        raise ValueError(
            f"bounds must be in [{lo:g}, {hi:g}] (rescale the data), got "
            f"{float(b.min()):g} to {float(b.max()):g}"
        )
    return b


def quadratic_l1_sensitivity(
    bounds: Any,
    *,
    constant_last: bool = False,
    neighbours: Neighbours = Neighbours.SUBSTITUTE,
    x_norm2: float | None = None,
) -> float:
    """L1 sensitivity of the upper triangle of v v' over the box |v_j| <= b_j.

    (S_a^2 + R_a^2) / 2 (PROOF.md, §2), where S_a and R_a^2 bound the L1 norm and the
    squared L2 norm of a = max(|v|, |w|) over two neighbours' records v, w. On the box,
    S_a = S_b = sum b_j and R_a^2 = R^2 = sum b_j^2, for substitute and add/remove one
    record. With ``x_norm2``, a bound on ||x||^2 of the first m - 1 coordinates below the
    box's, the x part of a has ||a_x||^2 <= min(box, c x_norm2) (c = 2 substitute,
    1 add/remove) and ||a_x||_1 <= min(S_bx, sqrt((m - 1) ||a_x||^2)); the last
    coordinate adds b_last and b_last^2. ``constant_last``: v_last is +-1 (logistic), so
    the entry v_last^2 = 1 never changes and is not released: the bound minus 1/2
    (b_last = 1).
    """
    b = _bounds_vector(bounds)
    if constant_last and b[-1] != 1.0:
        raise ValueError("a constant last coordinate must have bound 1")
    bx, bu = b[:-1], float(b[-1])
    sx, rx2 = _a_norms(bx, neighbours, x_norm2)
    out = ((sx + bu) ** 2 + rx2 + bu * bu) / 2.0
    return out - 0.5 if constant_last else out


def _a_norms(bx: np.ndarray, neighbours: Neighbours, x_norm2: float | None) -> tuple[float, float]:
    """(S, R^2): bounds on ||a||_1 and ||a||^2 of a = max(|x|, |x'|) over two neighbours'
    feature vectors (x' = 0 under add/remove), from the box of x and the bound
    ``x_norm2`` on ||x||^2 (PROOF.md §2)."""
    box2 = float(bx @ bx)
    s_box = float(bx.sum())
    if x_norm2 is None:
        return s_box, box2
    c = 2.0 if neighbours is Neighbours.SUBSTITUTE else 1.0
    r2 = c * _x_norm2(np.r_[bx, 1.0], x_norm2)  # checks x_norm2
    if r2 >= box2:
        return s_box, box2  # the box alone (sqrt(m box) >= S_b by Cauchy-Schwarz)
    return min(s_box, math.sqrt(bx.size * r2)), r2


def quadratic_l2_sensitivity(
    bounds: Any,
    neighbours: Neighbours,
    *,
    constant_last: bool = False,
    x_norm2: float | None = None,
) -> float:
    """L2 sensitivity of the Frobenius-weighted upper triangle of v v' (PROOF.md, §3).

    Substitute: ||vv' - ww'||_F^2 = ||v||^4 + ||w||^4 - 2 (v'w)^2 <= 2 R^4, so sqrt(2) R^2.
    Add/remove: ||vv'||_F = ||v||^2 <= R^2 (logistic: the constant entry 1 is not released,
    sqrt(R^4 - 1)). R^2 = sum b_j^2, or ``x_norm2`` + b_last^2 when the first m - 1
    coordinates have the smaller public bound ||x||^2 <= x_norm2.
    """
    b = _bounds_vector(bounds)
    rx2 = _x_norm2(b, x_norm2)
    r2 = rx2 + float(b[-1]) ** 2
    if neighbours is Neighbours.SUBSTITUTE:
        return math.sqrt(2.0) * r2
    if constant_last:
        if b[-1] != 1.0:
            raise ValueError("a constant last coordinate must have bound 1")
        # sqrt(R^4 - 1) with R^2 = R_x^2 + 1, written without the cancellation of R^4 - 1
        return math.sqrt(rx2 * (rx2 + 2.0))
    return r2


def _x_norm2(b: np.ndarray, x_norm2: float | None) -> float:
    """The bound on ||x||^2 of the first m - 1 coordinates: the box's, or a smaller one."""
    box = float(b[:-1] @ b[:-1])
    if x_norm2 is None:
        return box
    if not (math.isfinite(x_norm2) and x_norm2 >= BOUND_RANGE[0] ** 2):
        raise ValueError(f"x_norm2 must be finite and >= {BOUND_RANGE[0] ** 2:g}, got {x_norm2}")
    return min(box, float(x_norm2))


def block_l2_sensitivities(
    bounds: Any,
    neighbours: Neighbours,
    *,
    constant_last: bool = False,
    x_norm2: float | None = None,
) -> tuple[float, float]:
    """(Delta_Q, Delta_L): L2 sensitivities of the two weighted blocks (PROOF.md, §3b).

    v = (x, u), ||x||^2 <= R_x^2 (``x_norm2``, at most the box's), |u| <= b_u. Q: the
    Frobenius-weighted upper triangle of x x': sqrt(2) R_x^2 (substitute), R_x^2
    (add/remove). L: (sqrt(2) u x, u^2): 8 b_u^2 R_x^2 + b_u^4 (substitute),
    2 b_u^2 R_x^2 + b_u^4 (add/remove), square-rooted; without the b_u^4 term when u is
    the constant 1 whose square is not released (logistic).
    """
    b = _bounds_vector(bounds)
    rx2 = _x_norm2(b, x_norm2)
    bu2 = float(b[-1]) ** 2
    sub = neighbours is Neighbours.SUBSTITUTE
    dq = math.sqrt(2.0) * rx2 if sub else rx2
    dl2 = (8.0 if sub else 2.0) * bu2 * rx2 + (0.0 if constant_last else bu2 * bu2)
    return dq, math.sqrt(dl2)


def block_l1_sensitivities(
    bounds: Any,
    neighbours: Neighbours,
    *,
    constant_last: bool = False,
    x_norm2: float | None = None,
) -> tuple[float, float]:
    """(Delta_Q, Delta_L): L1 sensitivities of the two blocks (PROOF.md, §3b).

    Q, the upper triangle of x x': (S_a^2 + R_a^2) / 2 with §2's bounds on
    a = max(|x|, |x'|) (on the box, S_x and R_x^2). L, (u x, u^2):
    b_u (||x||_1 + ||x'||_1) + b_u^2, that is 2 b_u S_1 + b_u^2 (substitute) or
    b_u S_1 + b_u^2 (add/remove), with S_1 = min(S_x, sqrt(m - 1) R_x) the bound on one
    record's ||x||_1; without b_u^2 when u is the constant 1 (logistic).
    """
    b = _bounds_vector(bounds)
    bx, bu = b[:-1], float(b[-1])
    sa, ra2 = _a_norms(bx, neighbours, x_norm2)
    dq = (sa * sa + ra2) / 2.0
    s1, _ = _a_norms(bx, Neighbours.ADD_REMOVE, x_norm2)  # one record's ||x||_1
    dl = (2.0 if neighbours is Neighbours.SUBSTITUTE else 1.0) * bu * s1
    return dq, dl + (0.0 if constant_last else bu * bu)


def upper_triangle(m: int, *, constant_last: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices (i <= j) of the released entries of an m x m statistic."""
    rows, cols = np.triu_indices(m)
    if constant_last:
        keep = ~((rows == m - 1) & (cols == m - 1))
        rows, cols = rows[keep], cols[keep]
    return rows, cols


def entry_noise_sd_from(facts: Any, m: int) -> np.ndarray:
    """The sd of the noise on every entry of the released m x m matrix, from a record.

    Blocks: X'X's diagonal and off-diagonal entries, the first-order row (X'y; t1) and the
    corner (y'y). Records written before the blocks were split lack the last two facts:
    their entries follow :func:`entry_noise_sd` (first-order = off-diagonal, corner =
    diagonal).
    """
    diag = float(facts.noise_sd_diagonal)
    off = facts.noise_sd_offdiagonal
    off = diag if off is None else float(off)
    first = getattr(facts, "noise_sd_first_order", None)
    label = getattr(facts, "noise_sd_label", None)
    out = np.full((m, m), off)
    np.fill_diagonal(out, diag)
    out[:-1, -1] = out[-1, :-1] = off if first is None else float(first)
    out[-1, -1] = diag if label is None else float(label)
    return out


def entry_noise_sd(kind: str, sigma_or_scale: float, m: int) -> np.ndarray:
    """Standard deviation of the noise on each entry of the released m x m matrix.

    Laplace of scale s: sqrt(2) s everywhere. Gaussian of sd sigma on the weighted vector
    (off-diagonal entries times sqrt(2)): sigma on the diagonal, sigma / sqrt(2) off it.
    """
    if kind == "laplace":
        return np.full((m, m), math.sqrt(2.0) * sigma_or_scale)
    out = np.full((m, m), sigma_or_scale / math.sqrt(2.0))
    np.fill_diagonal(out, sigma_or_scale)
    return out


def _share(first_order_share: Any, kind: str, joint_laplace: bool) -> float | None:
    """rho, or None for one joint release. ``"auto"``: :data:`FIRST_ORDER_SHARE`, except
    for Laplace noise where ``joint_laplace`` (logistic regression)."""
    if first_order_share is None:
        return None
    if isinstance(first_order_share, str):
        if first_order_share != "auto":
            raise ValueError(
                f"first_order_share must be in (0, 1), 'auto' or None, got {first_order_share!r}"
            )
        return None if kind == "laplace" and joint_laplace else FIRST_ORDER_SHARE
    rho = float(first_order_share)
    if not 0.0 < rho < 1.0:
        raise ValueError(
            f"first_order_share must be in (0, 1), 'auto' or None, got {first_order_share!r}"
        )
    return rho


def _noise_kind(noise: Any, delta: float) -> str:
    if noise is None:
        return "gaussian" if delta > 0 else "laplace"
    if noise not in NOISES:
        raise ValueError(f"noise must be 'laplace' or 'gaussian', got {noise!r}")
    if noise == "laplace" and delta:
        raise ValueError("delta must be 0 for noise='laplace' (it is pure eps-DP)")
    if noise == "gaussian" and not delta > 0:
        raise ValueError("delta must be > 0 for noise='gaussian'")
    return str(noise)


class _QuadraticRelease:
    """The noise of one SSP release: which entries, which mechanism, how much noise."""

    def __init__(
        self,
        bounds: np.ndarray,
        *,
        constant_last: bool,
        kind: str,
        epsilon: float,
        delta: float,
        neighbours: Neighbours,
        rows_per_user: int | None,
        what: str,
        first_order_share: float | str | None = None,
        x_norm2: float | None = None,
    ) -> None:
        self.m = bounds.size
        self.rows, self.cols = upper_triangle(self.m, constant_last=constant_last)
        factor, self.user = user_level(rows_per_user, neighbours)
        self.kind = kind
        rho = _share(first_order_share, kind, joint_laplace=constant_last)  # logistic
        first = self.cols == self.m - 1  # the last row: the first-order block L
        # Frobenius weights: off-diagonal entries count twice in ||.||_F^2 (Gaussian only)
        frob = np.where(self.rows == self.cols, 1.0, math.sqrt(2.0))
        extra: dict[str, Any] = {}
        if rho is None:  # one joint release (PROOF.md §2, §3)
            if kind == "laplace":
                sens = quadratic_l1_sensitivity(
                    bounds, constant_last=constant_last, neighbours=neighbours, x_norm2=x_norm2
                )
                self.weights = np.ones(self.rows.size)
            else:
                sens = quadratic_l2_sensitivity(
                    bounds, neighbours, constant_last=constant_last, x_norm2=x_norm2
                )
                self.weights = frob
        else:  # two blocks, each scaled to its share of a sensitivity-1 release (§3b)
            if kind == "laplace":
                dq, dl = block_l1_sensitivities(
                    bounds, neighbours, constant_last=constant_last, x_norm2=x_norm2
                )
                wq, wl = (1.0 - rho) / dq, rho / dl
                self.weights = np.where(first, wl, wq)
            else:
                dq, dl = block_l2_sensitivities(
                    bounds, neighbours, constant_last=constant_last, x_norm2=x_norm2
                )
                wq, wl = math.sqrt(1.0 - rho) / dq, math.sqrt(rho) / dl
                self.weights = frob * np.where(first, wl, wq)
            sens = 1.0
            extra = {
                "first_order_share": rho,
                "sensitivity_second_order": factor * dq,
                "sensitivity_first_order": factor * dl,
            }
        # The statistic handed to the noise is each weighted exact entry, clamped to
        # +-2**CLAMP_BITS U_e w_e and rounded once (statistic(); PROOF.md §3c): the
        # rounding moves an entry by at most 2**-53 of that clamp, so two neighbours'
        # entries differ by at most their real difference plus a_e = 2**(CLAMP_BITS - 52)
        # U_e w_e, with U_e = 2**(e_r + e_c) >= b_r b_c the entry's public grid scale.
        self.exponents = grid_exponents(bounds)
        ex = np.asarray(self.exponents)
        self.scale_exponents = ex[self.rows] + ex[self.cols]
        allowance = np.ldexp(self.weights, self.scale_exponents + CLAMP_BITS - 52)
        if kind == "laplace":
            rounding = float(np.sum(allowance))
        else:
            rounding = float(np.sqrt(np.sum(allowance**2)))
        extra["sensitivity_exact"] = factor * sens
        extra["sensitivity_rounding"] = rounding
        sens = (factor * sens + rounding) * (1.0 + sensitivity_margin(self.m))
        if kind == "laplace":
            self.mech: Any = LaplaceMechanism(
                epsilon=epsilon,
                sensitivity=sens,
                neighbours=neighbours,
                name=f"ssp: laplace on {what} sufficient statistics",
            )
            # Laplace of scale s has sd sqrt(2) s
            noise_sd_vec = math.sqrt(2.0) * self.mech.scale / self.weights
        else:
            self.mech = GaussianMechanism(
                epsilon=epsilon,
                delta=delta,
                sensitivity=sens,
                neighbours=neighbours,
                name=f"ssp: gaussian on {what} sufficient statistics",
            )
            noise_sd_vec = self.mech.sigma / self.weights
        if not np.all(noise_sd_vec <= MAX_NOISE_SD):  # also catches inf and NaN
            raise ValueError(
                f"epsilon = {epsilon:g} is too small for these bounds: the noise sd "
                f"{float(np.max(noise_sd_vec)):g} exceeds {MAX_NOISE_SD:g}, where the "
                "statistics computed from the noisy values would overflow"
            )
        if not np.all(noise_sd_vec >= MIN_NOISE_SD):
            raise ValueError(
                f"epsilon = {epsilon:g} is too large for these bounds: the noise sd "
                f"{float(np.min(noise_sd_vec)):g} is below {MIN_NOISE_SD:g} (the smallest "
                "normal double), where it underflows to 0 (rescale the data or lower epsilon)"
            )
        self.sd = np.zeros((self.m, self.m))
        self.sd[self.rows, self.cols] = noise_sd_vec
        self.sd[self.cols, self.rows] = noise_sd_vec
        # the sd an entry of each kind has (also for kinds absent at this m)
        diag = float(self.sd[0, 0])
        off = diag / math.sqrt(2.0) if kind == "gaussian" else diag
        self.details = {
            "noise": kind,
            "bounds": bounds.tolist(),
            "noise_sd_diagonal": diag,
            "noise_sd_offdiagonal": off if self.m > 1 else None,
            "released_entries": int(self.rows.size),
            **self.user,
            "noise_sd_first_order": float(self.sd[0, -1]) if self.m > 1 else None,
            **({} if constant_last else {"noise_sd_label": float(self.sd[-1, -1])}),
            **({} if x_norm2 is None else {"x_norm2": _x_norm2(bounds, x_norm2)}),
            **extra,
        }

    def statistic(self, values: np.ndarray, moments: ExactMoments | None) -> np.ndarray:
        """The vector handed to the noise: each released entry's exact value (from
        ``moments`` when they are on this release's grid, else the doubles in ``values``
        taken as exact) times its weight, clamped to +-2**CLAMP_BITS U_e w_e and rounded
        once to the nearest double (PROOF.md §3c)."""
        if moments is not None and moments.exponents != self.exponents:
            moments = None  # another grid (a hand-made statistic): the doubles are read
        out = np.empty(self.rows.size)
        for k, (r, c) in enumerate(zip(self.rows.tolist(), self.cols.tolist(), strict=True)):
            entry = moments.fraction(r, c) if moments is not None else Fraction(values[r, c])
            w = Fraction(float(self.weights[k]))
            clamp = w * Fraction(2) ** (int(self.scale_exponents[k]) + CLAMP_BITS)
            out[k] = float(min(max(entry * w, -clamp), clamp))  # correctly rounded
        return out

    def noisy(
        self, exact: np.ndarray, src: NoiseSource, moments: ExactMoments | None = None
    ) -> np.ndarray:
        """The symmetric matrix of noisy entries (unreleased constant entry kept exact)."""
        vec = self.statistic(exact, moments)
        noisy = self.mech.release(vec, rng=as_rng(src)).value / self.weights
        out = np.array(exact, dtype=float)
        out[self.rows, self.cols] = noisy
        out[self.cols, self.rows] = noisy
        return out


def _facts(q: _QuadraticRelease, neighbours: Neighbours, n: int) -> dict[str, Any]:
    """The public facts shared by both regressions' records."""
    return {
        "n": neighbours.public_n(n),
        "neighbours": neighbours,
        "sensitivity": q.mech.sensitivity,
        "sensitivity_norm": "L1" if q.kind == "laplace" else "L2",
        **q.details,
    }


def _check_linear_bounds(model: BayesianLinearRegression, **_: Any) -> None:
    """The public bounds the linear SSP release needs (also before the data are read)."""
    if model.feature_bound is None or model.label_bound is None:
        raise ValueError("model must set feature_bound and label_bound for mechanism 'ssp'")
    _bounds_vector([model.feature_bound, model.label_bound])


def _check_logistic_bounds(model: BayesianLogisticRegression, **_: Any) -> None:
    """The public bound the logistic SSP release needs (also before the data are read)."""
    if model.feature_bound is None:
        raise ValueError("model must set feature_bound for mechanism 'ssp'")
    _bounds_vector([model.feature_bound])


@register(
    "ssp",
    BayesianLinearRegression,
    options=("noise", "first_order_share"),
    user_level=True,
    record=SspLinearRecord,
    precheck=_check_linear_bounds,
)
def plan_linear_ssp(
    model: BayesianLinearRegression,
    stats_: RegressionStatistics,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    allow_non_private: bool = False,
    noise: str | None = None,
    rows_per_user: int | None = None,
    first_order_share: float | str | None = "auto",
) -> Plan:
    """Noisy (X'X, X'y, y'y) of linear regression (Bernstein & Sheldon 2019, §3).

    Privacy: features in |x_j| <= B (the box contains the model's ball when
    ``clip="ball"``), labels in |y| <= B_y; the upper triangle of S = sum (x, y)(x, y)'
    changes by at most Delta_1 in L1 / Delta_2 in L2 (module docstring, PROOF.md), so
    Laplace(Delta_1 / eps) is eps-DP and the analytic Gaussian is (eps, delta)-DP.
    ``first_order_share``: rho of the budget for (X'y, y'y), the rest for X'X (§3b);
    ``None``: one joint release. Both noises use the model's bound on ||x||^2.
    """
    kind = _noise_kind(noise, delta)
    _check_linear_bounds(model)
    d = stats_.xtx.shape[0]
    bounds = np.r_[np.full(d, model.feature_bound), model.label_bound]
    q = _QuadraticRelease(
        bounds,
        constant_last=False,
        kind=kind,
        epsilon=epsilon,
        delta=delta,
        neighbours=neighbours,
        rows_per_user=rows_per_user,
        what="linear-regression",
        first_order_share=first_order_share,
        x_norm2=model.row_norm2(d),
    )
    exact = np.zeros((d + 1, d + 1))
    exact[:d, :d] = stats_.xtx
    exact[:d, d] = exact[d, :d] = stats_.xty
    exact[d, d] = stats_.yty
    n = int(stats_.n)
    record = SspLinearRecord(**_facts(q, neighbours, n))

    def run(src: NoiseSource) -> Release:
        s = q.noisy(exact, src, stats_.exact)
        xtx, xty, yty = s[:d, :d], s[:d, d], float(s[d, d])
        # posterior_from projects X'X onto the PSD cone (ridge_gaussian)
        naive = RegressionStatistics(xtx=xtx, xty=xty, yty=yty, n=n)
        return Release(
            model=model,
            mechanism="ssp",
            posterior=model.posterior_from(naive),
            guarantee=q.mech.guarantee(simulation=src.simulation, **q.details),
            released={"xtx": xtx.tolist(), "xty": xty.tolist(), "yty": yty},
            public=record.to_public(),
        )

    return Plan(guarantee=q.mech.guarantee(**q.details), run=run)


@register(
    "ssp",
    BayesianLogisticRegression,
    options=("noise", "first_order_share"),
    user_level=True,
    record=SspLogisticRecord,
    precheck=_check_logistic_bounds,
)
def plan_logistic_ssp(
    model: BayesianLogisticRegression,
    stats_: LogisticStatistics,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    allow_non_private: bool = False,
    noise: str | None = None,
    rows_per_user: int | None = None,
    first_order_share: float | str | None = "auto",
) -> Plan:
    """Noisy PASS-GLM statistics (t1 = sum y x, T2 = X'X) of logistic regression.

    Privacy: v = (y x, 1) lies in the box (B, ..., B, 1) and S = sum v v' holds T2, t1 and
    the constant n; its released upper triangle changes by at most Delta_1 in L1 /
    Delta_2 in L2 (module docstring, PROOF.md). ``first_order_share``: rho of the budget
    for t1, the rest for X'X (§3b); ``None``: one joint release.
    """
    kind = _noise_kind(noise, delta)
    d = stats_.t1.size
    bounds = np.r_[np.full(d, model.feature_bound), 1.0]
    q = _QuadraticRelease(
        bounds,
        constant_last=True,
        kind=kind,
        epsilon=epsilon,
        delta=delta,
        neighbours=neighbours,
        rows_per_user=rows_per_user,
        what="PASS-GLM logistic",
        first_order_share=first_order_share,
        x_norm2=model.row_norm2(d),
    )
    n = int(stats_.n)
    exact = np.zeros((d + 1, d + 1))
    exact[:d, :d] = stats_.t2
    exact[:d, d] = exact[d, :d] = stats_.t1
    exact[d, d] = 0.0  # the constant n: never released
    a = model.coefficients(d)
    record = SspLogisticRecord(
        **_facts(q, neighbours, n),
        radius=model.approximation_radius(d),
        coefficients=a.tolist(),
    )

    def run(src: NoiseSource) -> Release:
        s = q.noisy(exact, src, stats_.exact)
        t2, t1 = s[:d, :d], s[:d, d]
        return Release(
            model=model,
            mechanism="ssp",
            posterior=model.posterior_from(LogisticStatistics(t1=t1, t2=t2, n=n)),
            guarantee=q.mech.guarantee(simulation=src.simulation, **q.details),
            released={"xtx": t2.tolist(), "t1": t1.tolist()},
            public=record.to_public(),
        )

    return Plan(guarantee=q.mech.guarantee(**q.details), run=run)
