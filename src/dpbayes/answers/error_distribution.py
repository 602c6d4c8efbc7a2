"""The distribution of a BLUE's error: a weighted sum of independent Laplace variables,
plus an independent Normal when some answers carry Gaussian noise.

Paper 000 §4: the error of the estimate is E = sum_i A_i Lap(S_i / eps_i) = sum_i b_i L_i with
L_i ~ Lap(1) independent and scales b_i = |A_i| S_i / eps_i (Laplace noise is symmetric, so
the sign of A_i does not matter). Its characteristic function is prod_i 1 / (1 + b_i^2 t^2)
(eqs. 20-22). Beyond the paper, answers released with Gaussian noise N(0, sigma_j^2) add
sum_j c_j sigma_j G_j = s G, G ~ N(0, 1) with s^2 = sum_j c_j^2 sigma_j^2 (a sum of
independent Normals is Normal), which multiplies the characteristic function by
exp(-s^2 t^2 / 2). Four ways to evaluate it, each with its own error measure:

* ``"exact"``: for equal scales and no Normal part the closed form of eq. 23 (its CDF is a
  negative-binomial mixture of Gamma CDFs, computed with ``scipy.special.gammainc``); with
  no Laplace part the Normal CDF (``erf``); for mixed scales, or Laplace and Normal parts
  together, the Gil-Pelaez inversion of the characteristic function by composite
  Clenshaw-Curtis quadrature, with an estimated quadrature error plus a proven bound on the
  truncated tail.
* ``"pc"``: paper 000's Algorithm 2 (each b_i L_i, and s G, discretised on a grid of step h,
  the probability mass vectors convolved), done by FFT: the discrete Fourier transform of
  a discretised Laplace, and of a discretised Normal, is known in closed form, so the
  convolution of k vectors costs O(k n + n log n). Error: the wrapped (lost) mass, eqs.
  31-32, bounded by a Chernoff bound, plus the discretisation error estimated from the grid
  of step 2h.
* ``"pc-direct"``: Algorithm 2 literally (truncated vectors, ``numpy.convolve`` shortest
  first); the baseline the benchmark compares against.
* ``"mc"``: Algorithm 1 (Monte Carlo histogram); error: eq. 27 (sum of the variances of
  the probability mass vector) and a 3-sigma bound on the CDF.

``method="auto"`` picks the cheapest of ``exact`` and ``pc`` by a cost model and checks that
the reported error meets ``accuracy`` (absolute error of the CDF); Monte Carlo is used
only on request because its answer is random.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize, special

from dpbayes.answers.laplace_numerics import (
    gil_pelaez_nodes,
    log_char_fn,
    pc_direct_pmf,
    pc_fft_pmf,
)
from dpbayes.answers.limits import check_time
from dpbayes.privacy.noise import noise_source
from dpbayes.privacy.validation import (
    check_array,
    check_int,
    check_positive,
    check_probability,
)

__all__ = ["MAX_SCALES", "METHODS", "LaplaceSum", "round_up_scales"]

METHODS = ("auto", "exact", "pc", "pc-direct", "mc")
#: ``method="auto"`` rounds the Laplace scales up to at most this many distinct values.
MAX_SCALES = 48
# The finest grid: 64 points per octave (scales at most 1.1 % larger).
_MAX_PER_OCTAVE = 64


def _round_in_octaves(r: np.ndarray, octave: np.ndarray, per: np.ndarray) -> np.ndarray:
    """r rounded up to 2^-(o + j / m) (o the octave of r, m = per[o], j = 0..m-1)."""
    m = per[octave].astype(float)
    frac = -np.log2(r) - octave  # in [0, 1)
    j = np.clip(np.floor(frac * m), 0.0, m - 1.0)
    up = np.exp2(-(octave + j / m))
    # rounding could leave a grid point a hair below r: one step up (never down)
    up = np.where(up < r, np.exp2(-(octave + (j - 1.0) / m)), up)
    return np.minimum(np.maximum(up, r), 1.0)


def round_up_scales(r: np.ndarray, max_distinct: int) -> tuple[np.ndarray, float]:
    """Laplace scales ``r`` (sorted ascending, in (0, 1]) rounded UP to at most
    ``max_distinct`` distinct values; ``(r, 1.0)`` if ``r`` has no more than that already.
    Returns (the rounded scales, sorted ascending; the largest ratio rounded/original
    allowed, an upper bound on r'_i / r_i).

    The grid: each octave (2^-(o+1), 2^-o] gets 2^-(o + j / m_o), j = 0..m_o - 1, with m_o
    a power of two up to 64. Starting from one point per octave, the octave whose
    doubling of m_o removes the most added variance sum_i (r'_i^2 - r_i^2) per extra
    distinct value is refined while the total stays within ``max_distinct``: the large
    scales, which carry the variance, get a fine grid and the tiny ones a coarse one. When
    the octaves are more than ``max_distinct``, several octaves share a point (the grid
    2^-(2^a j)).

    Why the result is conservative. Write E = sum_i r_i L_i (+ s G) and E' for the same sum
    with each r_i replaced by r'_i >= r_i. Each term r_i L_i is symmetric and unimodal
    (a Laplace density, log-concave), and r_i L_i is more peaked than r'_i L_i:
    P(|r_i L_i| <= t) = 1 - e^{-t / r_i} >= 1 - e^{-t / r'_i} for every t >= 0. By
    Birnbaum's theorem (Ann. Math. Stat. 19, 1948: if X_1, X_2 are independent, symmetric
    and unimodal, and likewise Y_1, Y_2, with X_i more peaked than Y_i, then X_1 + X_2 is
    more peaked than Y_1 + Y_2; a sum of independent symmetric unimodal variables is again
    symmetric unimodal, so it extends to any number of terms by induction, and an
    unchanged term such as s G is trivially as peaked as itself), E is more peaked than E':
    P(|E| <= d) >= P(|E'| <= d) for every d >= 0. So a coverage computed for E' (less its
    error bound) is a lower bound on the true coverage, a half-width computed for E' at
    level p is at least the true one, and any accuracy promise made from E' holds for E.
    Every rounded scale stays <= 1 (1 is the grid point j = 0 of octave 0), so the
    normalisation of :class:`LaplaceSum` (largest scale or Normal sd = 1) still bounds it.

    Cost: O(k) per refinement, at most 7 per octave (and O(k log) when octaves merge).
    """
    if r.size == 0 or np.unique(r).size <= max_distinct:
        return r, 1.0
    octave = np.minimum(np.floor(-np.log2(r)), 1100.0).astype(int)
    octave = np.where(np.exp2(-octave.astype(float)) < r, octave - 1, octave)
    octave = np.maximum(octave, 0)
    occupied = np.unique(octave)
    if occupied.size > max_distinct:
        # merge octaves: the grid 2^-(w j), w = 2, 4, 8, ... octaves per point
        w = 2
        while True:
            up = np.minimum(np.exp2(-w * np.floor(-np.log2(r) / w)), 1.0)
            up = np.maximum(up, r)
            if np.unique(up).size <= max_distinct:
                return np.sort(up), float(2.0**w)
            w *= 2
    per = np.ones(int(octave.max()) + 1, dtype=int)
    up = _round_in_octaves(r, octave, per)
    sq = r * r
    members = {int(o): octave == o for o in occupied}
    count = {o: int(np.unique(up[mask]).size) for o, mask in members.items()}
    added = {o: float(np.sum(up[mask] ** 2 - sq[mask])) for o, mask in members.items()}
    total = sum(count.values())
    while True:
        best, best_gain = None, 0.0
        trial: dict[int, tuple[np.ndarray, int, float]] = {}
        for o, mask in members.items():
            if per[o] >= _MAX_PER_OCTAVE or added[o] <= 0.0:
                continue
            per2 = per.copy()
            per2[o] *= 2
            cand = _round_in_octaves(r[mask], octave[mask], per2)
            c2 = int(np.unique(cand).size)
            a2 = float(np.sum(cand**2 - sq[mask]))
            if total - count[o] + c2 > max_distinct:
                continue
            gain = (added[o] - a2) / max(c2 - count[o], 1)
            trial[o] = (cand, c2, a2)
            if best is None or gain > best_gain:
                best, best_gain = o, gain
        if best is None:
            break
        cand, c2, a2 = trial[best]
        up[members[best]] = cand
        total += c2 - count[best]
        count[best], added[best] = c2, a2
        per[best] *= 2
    ratio = float(np.max(np.exp2(1.0 / per[occupied])))
    return np.sort(up), ratio


# Extending a distribution's inversion nodes (rare: a requirement far in the tails) is
# done under this lock, shared by all distributions so that they stay picklable.
_EXTEND_LOCK = threading.Lock()


@dataclass
class _Quadrature:
    """Gauss-Legendre nodes for the Gil-Pelaez integrals, valid for |z| <= zmax."""

    t: np.ndarray
    w: np.ndarray
    w_lo: np.ndarray  # weights of the embedded lower-order rule (error estimate)
    phi: np.ndarray
    zmax: float
    tail: float


class LaplaceSum:
    """Distribution of E = sum_i b_i L_i + s G, L_i ~ Lap(1), G ~ N(0, 1), all independent
    (paper 000 §4, eqs. 20-32; the Normal part comes from Gaussian answers).

    Parameters
    ----------
    scales:
        The Laplace scales b_i >= 0 (zeros are dropped; at least one must be > 0 unless
        ``gaussian_sd`` is).
    gaussian_sd:
        The standard deviation s >= 0 of the Normal part (default 0: a pure Laplace sum).
    method:
        One of ``"auto"``, ``"exact"``, ``"pc"``, ``"pc-direct"``, ``"mc"`` (see the module).
    accuracy:
        Target absolute error of the CDF, in (0, 0.1]. ``auto`` meets it (or raises); the
        other methods report their error in :attr:`error` whether or not they meet it.
    grid_step:
        Grid step h for ``pc``/``pc-direct``/``mc`` (default: chosen from ``accuracy``).
    n_samples:
        Sample size for ``mc`` (default: enough for ``accuracy``, at most 10^7).
    rng:
        Randomness for ``mc`` (None, an int seed or a numpy Generator).
    max_scales:
        With ``method="auto"``, more than this many distinct Laplace scales (after the
        smallest are dropped) are rounded up to a geometric grid with at most this many
        points (:func:`round_up_scales`), so that the cost of every method is bounded in
        the number of distinct scales, not of terms. Conservative: the distribution is
        then that of a sum at least as spread out, so ``prob_within`` (minus ``error``) is
        a lower bound on the true P(|E| <= d), and ``half_width`` an upper bound on the
        true one. :attr:`rounding_ratio` is the grid's ratio (1.0: nothing rounded).
        ``None``: never round. Other methods never round.
    """

    def __init__(
        self,
        scales: Any,
        *,
        gaussian_sd: float = 0.0,
        method: str = "auto",
        accuracy: float = 1e-6,
        grid_step: float | None = None,
        n_samples: int | None = None,
        rng: Any = None,
        max_scales: int | None = MAX_SCALES,
    ) -> None:
        check_time()
        b = check_array(scales, "scales", ndim=1, min_size=0)
        if np.any(b < 0):
            raise ValueError("scales must be >= 0")
        g_sd = check_positive(gaussian_sd, "gaussian_sd", allow_zero=True)
        b = b[b > 0]
        if b.size == 0 and g_sd == 0:
            raise ValueError(
                "scales must contain at least one positive scale (or gaussian_sd must be > 0)"
            )
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        acc = check_positive(accuracy, "accuracy")
        if acc > 0.1:
            raise ValueError(f"accuracy must be in (0, 0.1], got {acc}")
        b = np.sort(b)
        # Everything is computed for E / unit with unit = max(b_max, s) (Laplace scales and
        # the Normal sd in (0, 1], the largest exactly 1) and scaled back at the public
        # methods: P(|E| <= d) = P(|E / unit| <= d / unit). So no scale, however small or
        # large (subnormal or 1e300), underflows or overflows inside (b_i^2 would), and
        # every loop below runs on numbers of order one.
        self._unit = max(float(b[-1]) if b.size else 0.0, g_sd)
        r = b / self._unit
        g = g_sd / self._unit
        var_lap = float(2.0 * np.sum(r * r))  # of all the scales, dropped ones included
        var_n = var_lap + g * g
        # Drop the smallest scales while their sum times the density bound M stays below 2%
        # of accuracy: the density of E is at most M = min(1 / (2 b_max), 1 / (sqrt(2 pi) s))
        # (adding an independent variable never raises the largest density), so adding Y
        # moves any probability P(E in [x, y]) by at most M E|Y| <= M sum(dropped) (counted
        # in the error). This removes round-off weights (~1e-16) that would otherwise give
        # the characteristic function a needlessly long tail.
        bound = min(
            0.5 / float(r[-1]) if r.size else math.inf,
            1.0 / (math.sqrt(2.0 * math.pi) * g) if g > 0 else math.inf,
        )
        keep_from = int(np.searchsorted(np.cumsum(r), 0.02 * acc / bound, side="right"))
        dropped = float(r[:keep_from].sum())
        kept = r[keep_from:]
        self.rounding_ratio = 1.0
        if method == "auto" and max_scales is not None:
            kept, self.rounding_ratio = round_up_scales(
                kept, check_int(max_scales, "max_scales", minimum=1)
            )
        if self.rounding_ratio > 1.0:
            # the distribution is now that of the rounded-up sum (see round_up_scales):
            # its variance, and the Chernoff bound below, are those of the larger scales
            var_lap = float(2.0 * (np.sum(kept * kept) + np.sum(r[:keep_from] ** 2)))
            var_n = var_lap + g * g
        self.scales = kept * self._unit
        self.gaussian_sd = g_sd
        self._b = kept
        self._g = g
        self.accuracy = acc
        # the bound M of what is kept (the largest scale may itself have been dropped)
        kept_bound = min(
            0.5 / float(self._b[-1]) if self._b.size else math.inf,
            1.0 / (math.sqrt(2.0 * math.pi) * g) if g > 0 else math.inf,
        )
        self._dropped_error = dropped * kept_bound if dropped > 0 else 0.0
        uniq, counts = np.unique(self._b, return_counts=True)
        self._u, self._c = uniq, counts.astype(float)
        self._sd = math.sqrt(var_n)  # std of E / unit, in [1, sqrt(2 k + 1)]
        # P(|E / unit| > z) <= 2 exp(-z / 2 + sum r_i^2 / 3 + g^2 / 8) (Chernoff at
        # theta = 1/2, with -log(1 - x) <= 4x/3 for x <= 1/4 and E e^{theta g G} =
        # e^{theta^2 g^2 / 2}): below 1e-17 beyond _z_sure, where P(|E| <= z) is 1 in
        # double precision whatever the method.
        self._z_sure = var_lap / 3.0 + g * g / 4.0 + 2.0 * (math.log(2.0) + 17.0 * math.log(10.0))
        self.std = self._unit * self._sd
        self.var = self.std * self.std
        self.mean = 0.0
        self._normal_only = self._b.size == 0
        self.iid = bool(g == 0 and uniq.max() <= uniq.min() * (1 + 1e-12))
        self.details: dict[str, Any] = {}
        self.error = 0.0
        self._quad: _Quadrature | None = None
        self._pf: tuple[np.ndarray, np.ndarray] | None = None
        self._grid: tuple[np.ndarray, np.ndarray] | None = None  # half-points, CDF there
        self._h = 0.0
        t0 = time.perf_counter()
        self._auto = method == "auto"
        if method == "auto":
            self._init_auto()
        elif method == "exact":
            self.method = "exact"
            self._init_exact()
        elif method in ("pc", "pc-direct"):
            self.method = method
            h = (
                self._default_step()
                if grid_step is None
                else check_positive(grid_step, "grid_step") / self._unit
            )
            self._init_pc(h, direct=method == "pc-direct")
        else:
            self.method = "mc"
            n = n_samples
            if n is None:
                n = int(min(10**7, max(10**4, math.ceil((1.5 / acc) ** 2))))
            n = check_int(n, "n_samples", minimum=100)
            h = (
                self._sd / 200
                if grid_step is None
                else check_positive(grid_step, "grid_step") / self._unit
            )
            self._init_mc(n, h, rng)
        self.error += self._dropped_error
        self.details["seconds"] = time.perf_counter() - t0
        self.details["dropped_scales"] = keep_from
        if self.rounding_ratio > 1.0:
            self.details["scales_rounded_up_to_ratio"] = self.rounding_ratio

    # ------------------------------------------------------------------ choice
    def _init_auto(self) -> None:
        """Exact when it is cheap and meets the accuracy, else PC by FFT (never Monte Carlo).

        The closed form (equal scales) and the characteristic-function inversion cost
        O(nodes x distinct scales) with a few thousand nodes; PC costs O(grid x distinct
        scales) with a grid that must grow like sqrt(k / accuracy), so inversion is the
        faster one except when one scale dominates and the characteristic function has a
        long, slowly decaying tail; then PC is used.
        """
        self.method = "exact"
        try:
            self._init_exact()
            if self.error <= self.accuracy:
                return
        except ValueError:
            pass
        self._init_pc_to_accuracy()

    def _init_pc_to_accuracy(self, extra_error: float = 0.0) -> None:
        """PC by FFT, the grid step halved until the error meets the accuracy (or raise).
        The state changes only once the grid is found, the method last: another thread
        reading this distribution meanwhile sees the old method whole."""
        h = self._default_step()
        for _ in range(4):
            grid, h, error, found = self._pc_result(h, direct=False)
            if error <= self.accuracy:
                self._grid, self._h, self.error = grid, h, error + extra_error
                self.details.update(found)
                self.method = "pc"
                return
            h /= 2.0
        raise ValueError(
            f"accuracy {self.accuracy:g} cannot be met by the exact or PC method "
            f"(best error {error:.2g}); ask for a larger accuracy"
        )

    def _default_step(self) -> float:
        # Rounding each of the k terms to the grid adds noise of variance k h^2 / 12, which
        # moves the CDF by about (k h^2 / 24) max|f'| <= (k h^2 / 24) 0.25 / std^2 (the
        # Normal part is one more term).
        k = self._b.size + (1 if self._g > 0 else 0)
        return self._sd * min(1.0 / 64.0, math.sqrt(96.0 * self.accuracy / k))

    # ------------------------------------------------------------------ exact
    def _init_exact(self) -> None:
        if self._normal_only:
            # E / unit = g G: P(|E| <= z) = erf(z / (g sqrt 2)), to rounding.
            self.error = 1e-15
            self.details.update(formula="Normal (no Laplace terms)")
            return
        if self.iid:
            k = self._b.size
            b = float(self._b[0])
            j = np.arange(k)
            # eq. 23 as a mixture: w_j = C(k-1+j, j) 2^-(k-1+j), Gamma(k-j, b) for |E|.
            logw = (
                special.gammaln(k + j)
                - special.gammaln(j + 1)
                - special.gammaln(k)
                - (k - 1 + j) * math.log(2.0)
            )
            self._iid = (k, b, np.exp(logw), (k - j).astype(float))
            self.error = 1e-13 * k
            self.details.update(formula="eq. 23 (i.i.d. closed form)", k=k)
            return
        if self._g == 0 and self._init_partial_fractions():
            return
        # Nodes for |z| <= 3 std (levels up to ~0.98 even for a single Laplace); rebuilt
        # for a wider range on demand.
        self._build_quadrature(3.0 * self._sd)
        assert self._quad is not None
        self.details.update(
            formula="Gil-Pelaez inversion of prod 1/(1+b^2 t^2)"
            + (" x exp(-s^2 t^2 / 2)" if self._g > 0 else "")
        )

    def _log_phi(self, t: np.ndarray) -> np.ndarray:
        """log of the characteristic function of E / unit at t >= 0."""
        out = log_char_fn(t, self._u, self._c)
        if self._g > 0:
            out = out - 0.5 * (self._g * np.asarray(t, dtype=float)) ** 2
        return out

    def _init_partial_fractions(self) -> bool:
        """Distinct scales: f(z) = sum_i c_i e^{-|z|/b_i} / (2 b_i) (partial fractions).

        c_i = prod_{j != i} b_i^2 / (b_i^2 - b_j^2): the partial-fraction expansion of
        prod 1/(1 + b_i^2 t^2). Used when the scales are few and well separated: the
        rounding error is about 1e-16 sum |c_i|, which must be below a tenth of the
        accuracy (close scales cancel catastrophically otherwise).
        """
        u, c = self._u, self._c
        if u.size > 40 or np.any(c != 1.0):
            return False
        b2 = u * u
        diff = b2[:, None] - b2[None, :]
        np.fill_diagonal(diff, 1.0)
        # Row i sums log(b_i^2) - log|b_i^2 - b_j^2| over j; the diagonal term (j = i,
        # diff set to 1) contributed log(b_i^2), which is removed.
        logc = np.sum(np.log(b2)[:, None] - np.log(np.abs(diff)), axis=1) - np.log(b2)
        sign = np.where(np.sum(diff < 0, axis=1) % 2 == 0, 1.0, -1.0)
        cond = float(np.sum(np.exp(logc)))
        if not math.isfinite(cond) or cond * 1e-15 > 0.1 * self.accuracy:
            return False
        self._pf = (u, sign * np.exp(logc))
        self.error = max(1e-15, cond * 1e-15 * u.size)
        self.details.update(formula="partial fractions (distinct scales)", condition=cond)
        return True

    def _build_quadrature(self, zmax: float) -> None:
        extension = self._quad is not None
        t, w, w_lo, tail, big_t = gil_pelaez_nodes(
            self._log_phi, float(self._u.max()), self._g, self._u.size, self.accuracy, zmax
        )
        phi = np.exp(self._log_phi(t))
        self._quad = _Quadrature(t, w, w_lo, phi, zmax, tail)
        # Error: tail bound + |17-point - embedded 9-point| at a few z; an extension of
        # the nodes (after __init__ added the dropped scales' error) keeps that term too
        zs = np.linspace(0.25, 1.0, 4) * zmax
        diff = np.abs(self._gp_within(zs, lo_order=False) - self._gp_within(zs, lo_order=True))
        dropped = self._dropped_error if extension else 0.0
        self.error = float(max(self.error, tail + diff.max() + dropped))
        self.details.update(nodes=int(t.size), tail_bound=tail, t_max=big_t)

    def _gp_within(self, d: np.ndarray, *, lo_order: bool = False) -> np.ndarray:
        """P(|E| <= d) = (2/pi) int_0^inf phi(t) sin(t d) / t dt (Gil-Pelaez)."""
        q = self._quad
        assert q is not None
        t, w, phi = q.t, (q.w_lo if lo_order else q.w), q.phi
        d = np.atleast_1d(np.asarray(d, dtype=float))
        out = np.empty(d.shape)
        chunk = max(1, 4_000_000 // t.size)
        wphi = w * phi / t
        for s in range(0, d.size, chunk):
            check_time()
            out[s : s + chunk] = np.sin(np.multiply.outer(d[s : s + chunk], t)) @ wphi
        return np.clip(out * (2.0 / math.pi), 0.0, 1.0)

    def _gp_pdf(self, z: np.ndarray) -> np.ndarray:
        q = self._quad
        assert q is not None
        z = np.atleast_1d(np.abs(np.asarray(z, dtype=float)))
        out = np.empty(z.shape)
        chunk = max(1, 4_000_000 // q.t.size)
        wphi = q.w * q.phi
        for s in range(0, z.size, chunk):
            check_time()
            out[s : s + chunk] = np.cos(np.multiply.outer(z[s : s + chunk], q.t)) @ wphi
        return np.maximum(out / math.pi, 0.0)

    def _ensure_quadrature(self, zmax: float) -> bool:
        """Extend the nodes to |z| <= zmax; False if ``auto`` moved to PC instead.

        ``auto`` chose the inversion on nodes for |z| <= 3 std. Further out (a requirement
        at a level near 1) the nodes needed can pass the inversion's limit (many distinct
        scales, one of them dominant: 171 scales of a query service's history needed it at
        8 std). ``auto`` then moves to PC, as it would have at the start, rather than fail
        a request that PC answers; ``exact`` asked for by name still raises.
        """
        assert self._quad is not None
        if zmax <= self._quad.zmax:
            return True
        # One extension at a time (a service answers from several threads): a thread that
        # waited here finds the nodes already extended, or the move to PC already made.
        with _EXTEND_LOCK:
            if self.method != "exact":
                return False
            if zmax <= self._quad.zmax:
                return True
            # never beyond where P(|E| <= z) is 1 and the density 0 (see __init__)
            try:
                self._build_quadrature(min(max(zmax, 2.0 * self._quad.zmax), self._z_sure + 1.0))
            except ValueError:
                if not self._auto:
                    raise
                self.details["moved_to_pc_at"] = zmax * self._unit
                self._init_pc_to_accuracy(self._dropped_error)
                for key in ("nodes", "tail_bound", "t_max"):
                    self.details.pop(key, None)
                self.details["formula"] = "PC by FFT (moved from the inversion)"
                return False
        return True

    # ------------------------------------------------------------------ PC (Algorithm 2)
    def _pc_fft(self, h: float) -> tuple[np.ndarray, float]:
        return pc_fft_pmf(self._u, self._c, self._b.size, self._sd, h, self.accuracy, gauss=self._g)

    def _pc_direct(self, h: float) -> tuple[np.ndarray, float]:
        return pc_direct_pmf(self._b, h, self.accuracy, gauss=self._g)

    def _init_pc(self, h: float, *, direct: bool) -> None:
        self._grid, self._h, self.error, found = self._pc_result(h, direct=direct)
        self.details.update(found)

    def _pc_result(
        self, h: float, *, direct: bool
    ) -> tuple[tuple[np.ndarray, np.ndarray], float, float, dict[str, Any]]:
        """(grid, h, error, details) of PC at step h, computed without changing ``self``."""
        run = self._pc_direct if direct else self._pc_fft
        pmf, lost = run(h)
        grid_fine = self._grid_of(pmf, h)
        pmf2, _ = run(2 * h)
        grid_coarse = self._grid_of(pmf2, 2 * h)
        xs = np.linspace(-3, 3, 61) * self._sd
        gap = self._grid_cdf(xs, grid_fine) - self._grid_cdf(xs, grid_coarse)
        disc = float(np.max(np.abs(gap)))
        # In the O(h^2) regime the error at h is about a third of |F_h - F_2h|; the whole
        # difference is reported, as a margin for being outside that regime.
        details = {
            "grid_step": h * self._unit,
            "grid_points": int(pmf.size),
            "lost_mass": lost,
            "discretisation_estimate": disc,
        }
        return grid_fine, h, lost + disc, details

    def _set_grid(self, pmf: np.ndarray, h: float) -> None:
        self._grid, self._h = self._grid_of(pmf, h), h

    @staticmethod
    def _grid_of(pmf: np.ndarray, h: float) -> tuple[np.ndarray, np.ndarray]:
        n = pmf.size
        centre = n // 2 if n % 2 == 0 else (n - 1) // 2
        upper = (np.arange(n) - centre + 0.5) * h
        cdf = np.cumsum(pmf)
        cdf = cdf / cdf[-1]
        return np.concatenate([[upper[0] - h], upper]), np.concatenate([[0.0], cdf])

    @staticmethod
    def _grid_cdf(z: np.ndarray, grid: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        return np.interp(z, grid[0], grid[1], left=0.0, right=1.0)

    # ------------------------------------------------------------------ MC (Algorithm 1)
    def _init_mc(self, n: int, h: float, rng: Any) -> None:
        gen = noise_source(rng).generator()
        k = self._b.size
        m = math.ceil(12 * self._sd / h)
        edges = (np.arange(-m, m + 2) - 0.5) * h
        counts = np.zeros(edges.size - 1)
        chunk = max(1, 4_000_000 // max(k, 1))
        done = 0
        outside = 0
        while done < n:
            check_time()
            c = min(chunk, n - done)
            y = gen.laplace(0.0, 1.0, size=(c, k)) @ self._b
            if self._g > 0:
                y += self._g * gen.standard_normal(c)
            hist, _ = np.histogram(y, bins=edges)
            counts += hist
            outside += c - int(hist.sum())
            done += c
        # Mass outside +-12 std (never seen in practice) is split to the ends.
        counts[0] += outside / 2
        counts[-1] += outside / 2
        u = counts / n
        self._set_grid(u, h)
        assert self._grid is not None
        cdf = self._grid[1]
        eq27 = float(np.sum(u * (1 - u)) / n)
        self.error = float(3.0 * np.max(np.sqrt(cdf * (1 - cdf) / n)))
        self.details.update(n_samples=n, grid_step=h * self._unit, eq27_error=eq27, simulation=True)

    # ------------------------------------------------------------------ normalised
    def _within_n(self, dd: np.ndarray) -> np.ndarray:
        """P(|E / b_max| <= z) for z = dd >= 0 (array)."""
        out = np.ones(dd.shape)
        inside = dd < self._z_sure  # beyond: 1 in double precision (see __init__)
        z = dd[inside]
        if z.size:
            out[inside] = self._within_method(z)
        return np.clip(out, 0.0, 1.0)

    def _within_method(self, dd: np.ndarray) -> np.ndarray:
        if self.method == "exact" and self._normal_only:
            return np.asarray(special.erf(dd / (self._g * math.sqrt(2.0))))
        if self.method == "exact" and self.iid:
            _k, b, w, shape = self._iid
            x = np.multiply.outer(dd / b, np.ones_like(shape))
            return np.asarray(special.gammainc(shape, x) @ w)
        if self.method == "exact" and self._pf is not None:
            bs, coef = self._pf
            return np.asarray(-np.expm1(-np.multiply.outer(dd, 1.0 / bs)) @ coef)
        if self.method == "exact" and self._ensure_quadrature(float(np.max(dd, initial=0.0))):
            return self._gp_within(dd.ravel()).reshape(dd.shape)
        assert self._grid is not None
        return np.asarray(self._grid_cdf(dd, self._grid) - self._grid_cdf(-dd, self._grid))

    def _pdf_n(self, az: np.ndarray) -> np.ndarray:
        """Density of E / b_max at |z| = az (array)."""
        out = np.zeros(az.shape)
        # E is log-concave (a sum of Laplaces and a Normal), so f(z) <= P(|E| > z - 1)
        # <= 1e-17 beyond _z_sure + 1: zero there.
        inside = az < self._z_sure + 1.0
        z = az[inside]
        if not z.size:
            return out
        if self.method == "exact" and self._normal_only:
            g = self._g
            out[inside] = np.exp(-0.5 * (z / g) ** 2) / (g * math.sqrt(2.0 * math.pi))
        elif self.method == "exact" and self.iid:
            _k, b, w, shape = self._iid
            x = np.multiply.outer(z / b, np.ones_like(shape))
            # Gamma(shape) density at x; at x = 0 only shape 1 contributes.
            with np.errstate(divide="ignore", invalid="ignore"):
                logg = (shape - 1) * np.log(x) - x - special.gammaln(shape)
            g = np.where(x > 0, np.exp(logg), (shape == 1).astype(float))
            out[inside] = (g @ w) / (2.0 * b)
        elif self.method == "exact" and self._pf is not None:
            bs, coef = self._pf
            out[inside] = np.exp(-np.multiply.outer(z, 1.0 / bs)) @ (coef / (2.0 * bs))
        elif self.method == "exact" and self._ensure_quadrature(float(np.max(z))):
            out[inside] = self._gp_pdf(z)
        else:
            assert self._grid is not None
            xs, cs = self._grid
            idx = np.clip(np.searchsorted(xs, z) - 1, 0, xs.size - 2)
            out[inside] = np.where(z > xs[-1], 0.0, (cs[idx + 1] - cs[idx]) / self._h)
        return out

    # ------------------------------------------------------------------ public
    def prob_within(self, d: Any) -> Any:
        """P(|E| <= d) for d >= 0 (vectorised)."""
        arr = np.asarray(d, dtype=float)
        with np.errstate(over="ignore"):  # d / b_max = inf: probability 1
            out = self._within_n(np.abs(arr) / self._unit)
        return float(out) if np.ndim(arr) == 0 else out

    def cdf(self, z: Any) -> Any:
        """P(E <= z); symmetric: 1/2 + sign(z) P(|E| <= |z|) / 2."""
        zz = np.asarray(z, dtype=float)
        out = 0.5 + np.sign(zz) * 0.5 * np.asarray(self.prob_within(np.abs(zz)))
        return float(out) if np.ndim(zz) == 0 else out

    def sf(self, z: Any) -> Any:
        """P(E > z)."""
        zz = np.asarray(z, dtype=float)
        out = np.asarray(self.cdf(-zz))
        return float(out) if np.ndim(zz) == 0 else out

    def pdf(self, z: Any) -> Any:
        """Density of E (eq. 23 for i.i.d. scales, the Normal density without Laplace terms;
        inversion or grid slope otherwise)."""
        zz = np.asarray(z, dtype=float)
        with np.errstate(over="ignore"):
            out = self._pdf_n(np.abs(zz) / self._unit) / self._unit
        return float(out) if np.ndim(zz) == 0 else np.asarray(out)

    def half_width(self, p: float) -> float:
        """The smallest d with P(|E| <= d) >= p: the narrowest interval is [-d, d] (Alg. 3).

        Terminates: in units of b_max, P(|E| <= z) = 1 for z >= _z_sure, so the doubling
        from z = std (>= sqrt 2) stops after at most log2(_z_sure / std) + 1 < 64 steps,
        and Brent's method is capped at 200 iterations.
        """
        p = check_probability(p, "p", open_interval=True)

        def within(z: float) -> float:
            return float(self._within_n(np.array([z]))[0])

        lo, hi = 0.0, self._sd
        for _ in range(64):
            if within(hi) >= p:
                break
            lo, hi = hi, 2.0 * hi
        else:  # pragma: no cover - unreachable: within(z) = 1 for z >= _z_sure
            raise ValueError(f"p={p} is beyond the accuracy of the method {self.method!r}")
        if within(lo) >= p:  # lo = 0 and a point mass? never for Laplace sums; be safe
            return lo * self._unit
        z = optimize.brentq(
            lambda x: within(x) - p, lo, hi, xtol=1e-12 * hi, maxiter=200, disp=False
        )
        return float(z) * self._unit

    def interval(self, p: float) -> tuple[float, float]:
        d = self.half_width(p)
        return -d, d

    def ppf(self, q: float) -> float:
        q = check_probability(q, "q", open_interval=True)
        if q == 0.5:
            return 0.0
        d = self.half_width(abs(2 * q - 1))
        return d if q > 0.5 else -d

    def rvs(self, size: int = 1, rng: Any = None) -> np.ndarray:
        """Draws of E (simulation only; randomness through dpbayes.privacy.noise)."""
        n = check_int(size, "size", minimum=1)
        gen = noise_source(rng).generator()
        out = gen.laplace(0.0, 1.0, size=(n, self.scales.size)) @ self.scales
        if self.gaussian_sd > 0:
            out += self.gaussian_sd * gen.standard_normal(n)
        return np.asarray(out)

    def __repr__(self) -> str:
        normal = f", gaussian_sd={self.gaussian_sd:.4g}" if self.gaussian_sd > 0 else ""
        return (
            f"LaplaceSum(k={self.scales.size}{normal}, std={self.std:.4g}, "
            f"method={self.method!r}, error={self.error:.2g})"
        )
