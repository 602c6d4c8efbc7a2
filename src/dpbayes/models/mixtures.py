"""Mixture and grid posteriors: what a noise-aware posterior looks like.

A noise-aware posterior (:mod:`dpbayes.release.counts.noise_aware`) averages the conjugate
posterior over the unknown true statistic, so it is a finite mixture of conjugate
posteriors (exact), or for a continuous parameter a density tabulated on a fine grid.

* :class:`BetaMixture`: sum_k w_k Beta(a_k, b_k) (coin);
* :class:`DirichletMixture`: sum_k w_k Dir(alpha + c_k) with explicit components;
* :class:`SeparableDirichletMixture`: the same mixture over *every* count vector c of a
  public n, with weights prod_j h_j(c_j) (a product of per-category factors restricted
  to sum c = n). Marginals, means and exact draws come from convolutions of the factors,
  never from the C(n + m - 1, m - 1) components;
* :class:`GridDistribution`: a 1-d density on a grid (trapezoid rule), e.g. the Normal
  mean after Laplace noise.

scipy.stats method names (``mean``, ``var``, ``std``, ``pdf``, ``logpdf``, ``cdf``,
``ppf``, ``interval``, ``rvs``); ``rvs`` draws only through scipy with the caller's
``random_state``. Nothing here draws noise.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from scipy import special

from dpbayes.display import PosteriorDisplay
from dpbayes.privacy.validation import check_array, check_int, check_probability

__all__ = [
    "BetaMixture",
    "DirichletMixture",
    "GridDistribution",
    "SeparableDirichletMixture",
    "log_convolve",
    "mixture_from_dict",
]

_MIN_WEIGHT = 1e-16


def _normalised(log_w: np.ndarray, name: str = "weights") -> np.ndarray:
    lw = np.asarray(log_w, dtype=float)
    top = float(np.max(lw))
    if not math.isfinite(top):
        raise ValueError(f"{name} must have a finite positive entry (all are zero or invalid)")
    w = np.exp(lw - top)
    return np.asarray(w / w.sum())


def _central(ppf: Any, level: float) -> tuple[float, float]:
    lvl = check_probability(level, "level", open_interval=True)
    return float(ppf((1.0 - lvl) / 2)), float(ppf((1.0 + lvl) / 2))


_BAND = 350.0  # log-range of one segment: a product of two scaled entries stays above e^-700
_LONG_RUN = 16  # shorter runs are added row by row (steep tails cut into one-entry runs)


def _segments(lv: np.ndarray) -> list[tuple[int, float, np.ndarray]]:
    """Runs of finite entries in one band of width _BAND below the maximum: (start, shift, exp).

    Band b holds the values in (top - _BAND (b + 1), top - _BAND b]; each run is returned
    scaled by its band's upper end, so its entries lie in (e^-350, 1] and a product of two
    never leaves the normal doubles. -inf entries (zeros) belong to no run.
    """
    finite = np.isfinite(lv)
    if not finite.any():
        return []
    top = float(np.max(lv[finite]))
    band = np.full(lv.size, -1.0)
    band[finite] = np.floor((top - lv[finite]) / _BAND)
    cuts = np.flatnonzero(np.diff(band)) + 1
    runs = []
    for start, stop in zip(np.r_[0, cuts], np.r_[cuts, lv.size], strict=True):
        if band[start] >= 0:
            shift = top - _BAND * float(band[start])
            runs.append((int(start), shift, np.exp(lv[start:stop] - shift)))
    return runs


def _log_rows(out: np.ndarray, lv: np.ndarray, rows: list[int], other: np.ndarray) -> None:
    """out[i + k] += exp(lv[i] + other[k]) in log space for every i in ``rows`` (each row
    over the span of ``other``'s finite entries only)."""
    size = out.size
    span = np.flatnonzero(np.isfinite(other))
    if span.size == 0:
        return
    k0, k1 = int(span[0]), int(span[-1]) + 1
    for i in rows:
        hi = min(size, i + k1)
        if i + k0 < hi:
            seg = out[i + k0 : hi]
            np.logaddexp(seg, lv[i] + other[k0 : hi - i], out=seg)


def _entries(runs: list[tuple[int, float, np.ndarray]], short: bool) -> list[int]:
    """Indices of the entries of the short (or the long) runs."""
    return [
        i
        for start, _, scaled in runs
        if (scaled.size < _LONG_RUN) == short
        for i in range(start, start + scaled.size)
    ]


def _padded(lv: np.ndarray, size: int) -> np.ndarray:
    return np.concatenate([lv[:size], np.full(max(0, size - lv.size), -np.inf)])


def log_convolve(la: np.ndarray, lb: np.ndarray, size: int | None = None) -> np.ndarray:
    """log of the convolution of exp(la) and exp(lb) (its first ``size`` entries).

    Every term is kept: each operand is cut into runs of one band of values
    (:func:`_segments`). Pairs of long runs are convolved directly (``np.convolve``: sums of
    positive products, each at least e^-700 of the pair's scale, so every entry carries a
    relative error of a few ulps times the run length); an entry of a short run (where the
    values fall steeply) is added as one row of log-space sums. Cost: the product of the
    lengths, plus a pass over the output per pair of long runs and per short-run entry.
    """
    la, lb = np.asarray(la, dtype=float), np.asarray(lb, dtype=float)
    total = la.size + lb.size - 1
    size = total if size is None else min(size, total)
    out = np.full(size, -np.inf)
    runs_a, runs_b = _segments(la[:size]), _segments(lb[:size])
    long_a = [r for r in runs_a if r[2].size >= _LONG_RUN]
    long_b = [r for r in runs_b if r[2].size >= _LONG_RUN]
    with np.errstate(divide="ignore"):
        for start_a, shift_a, ea in long_a:
            for start_b, shift_b, eb in long_b:
                lo = start_a + start_b
                if lo >= size:
                    continue
                room = size - lo
                part = np.convolve(ea[:room], eb[:room])[:room]
                seg = out[lo : lo + part.size]
                np.logaddexp(seg, np.log(part) + (shift_a + shift_b), out=seg)
    # short runs of la against all of lb; short runs of lb against the long runs of la
    _log_rows(out, la, _entries(runs_a, short=True), _padded(lb, size))
    la_long = np.full(size, -np.inf)
    keep = _entries(long_a, short=False)
    la_long[keep] = la[keep]
    _log_rows(out, lb, _entries(runs_b, short=True), la_long)
    return out


@dataclass(frozen=True, eq=False, repr=False)
class BetaMixture(PosteriorDisplay):
    """sum_k w_k Beta(a_k, b_k) on [0, 1]; weights >= 0 summing to 1, a_k, b_k > 0.

    Components with weight below 1e-16 are dropped (they change no printed digit).
    """

    weights: np.ndarray
    a: np.ndarray
    b: np.ndarray
    family: ClassVar[str] = "beta-mixture"
    _ladder: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        w = check_array(self.weights, "weights", ndim=1, min_size=1)
        a = check_array(self.a, "a", ndim=1, positive=True)
        b = check_array(self.b, "b", ndim=1, positive=True)
        if not (w.size == a.size == b.size):
            raise ValueError(
                f"weights, a and b must have one length, got {w.size}, {a.size}, {b.size}"
            )
        if np.any(w < 0) or not w.sum() > 0:
            raise ValueError("weights must be >= 0 with a positive sum")
        w = w / w.sum()
        keep = w >= _MIN_WEIGHT
        w, a, b = w[keep] / w[keep].sum(), a[keep].astype(float), b[keep].astype(float)
        object.__setattr__(self, "weights", w)
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "_ladder", _ladder(w, a, b))

    @classmethod
    def from_log_weights(cls, log_w: Any, a: Any, b: Any) -> BetaMixture:
        return cls(_normalised(np.asarray(log_w)), np.asarray(a), np.asarray(b))

    @property
    def params(self) -> dict[str, Any]:
        return {"weights": self.weights, "a": self.a, "b": self.b}

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, **{k: v.tolist() for k, v in self.params.items()}}

    def _display_title(self) -> str:
        return f"{type(self).__name__}({self.weights.size} Beta components)"

    def mean(self) -> float:
        return float(np.sum(self.weights * self.a / (self.a + self.b)))

    def var(self) -> float:
        s = self.a + self.b
        second = self.a * (self.a + 1.0) / (s * (s + 1.0))
        return float(max(np.sum(self.weights * second) - self.mean() ** 2, 0.0))

    def std(self) -> float:
        return math.sqrt(self.var())

    def pdf(self, x: Any) -> Any:
        from scipy import stats

        xs = np.asarray(x, dtype=float)[..., None]
        return np.sum(self.weights * stats.beta.pdf(xs, self.a, self.b), axis=-1)

    def logpdf(self, x: Any) -> Any:
        from scipy import stats

        xs = np.asarray(x, dtype=float)[..., None]
        return special.logsumexp(
            np.log(self.weights) + stats.beta.logpdf(xs, self.a, self.b), axis=-1
        )

    def cdf(self, x: Any) -> Any:
        xs = np.clip(np.asarray(x, dtype=float), 0.0, 1.0)[..., None]
        return np.sum(self.weights * special.betainc(self.a, self.b, xs), axis=-1)

    def sf(self, x: Any) -> Any:
        xs = np.clip(np.asarray(x, dtype=float), 0.0, 1.0)[..., None]
        return np.sum(self.weights * special.betaincc(self.a, self.b, xs), axis=-1)

    def _fast_cdf(self, t: float) -> tuple[float, float]:
        """(cdf(t), pdf(t)) for a ladder a_k = a_0 + k, a_k + b_k = s: O(K) exps.

        I_t(a + 1, b - 1) = I_t(a, b) - T(t), T = t^a (1-t)^(b-1) Gamma(a+b) /
        (Gamma(a+1) Gamma(b)), so sum_k w_k I_t(a_k, b_k) = I_t(a_0, b_0) - sum_j T_j R_j
        with R_j = sum_{k>j} w_k (absolute error ~ K * 1e-16); and the density of component
        j + 1 is T_j (b_0 - j - 1) / (1 - t).
        """
        a0, b0, j, log_c, tail, w = self._ladder
        if t <= 0.0 or t >= 1.0:
            return (0.0 if t <= 0.0 else 1.0), 0.0
        lt, l1t = math.log(t), math.log1p(-t)
        terms = np.exp(log_c + (a0 + j) * lt + (b0 - j - 1.0) * l1t)
        cdf = float(special.betainc(a0, b0, t)) - float(terms @ tail)
        first = math.exp((a0 - 1.0) * lt + (b0 - 1.0) * l1t - special.betaln(a0, b0))
        pdf = w[0] * first + float((terms * (b0 - j - 1.0)) @ w[1:]) / (1.0 - t)
        return min(max(cdf, 0.0), 1.0), max(pdf, 0.0)

    def _ladder_ppf(self, q: float) -> float:
        """Newton's method on the ladder cdf, safeguarded by bisection (|step| < 1e-13)."""
        lo, hi = 0.0, 1.0
        mu, sd = self.mean(), self.std()
        t = min(max(mu + sd * float(special.ndtri(q)), 1e-300), 1.0 - 1e-16)
        for _ in range(100):
            f, d = self._fast_cdf(t)
            if f < q:
                lo = t
            else:
                hi = t
            step = (f - q) / d if d > 0 else math.inf
            new = t - step
            if not lo < new < hi:
                new = (lo + hi) / 2
            if abs(new - t) < 1e-13 or hi - lo < 1e-14:
                return new
            t = new
        return t

    def _ppf1(self, q: float) -> float:
        from scipy import optimize

        if q <= 0.0:
            return 0.0
        if q >= 1.0:
            return 1.0
        if self._ladder is not None and 1e-8 <= q <= 1.0 - 1e-8:
            return self._ladder_ppf(q)
        # bracket with the components' own quantiles: the mixture's lies between them
        lo = float(np.min(special.betaincinv(self.a, self.b, q)))
        hi = float(np.max(special.betaincinv(self.a, self.b, q)))
        if hi - lo < 1e-15:
            return lo
        f = (
            (lambda t: float(self.cdf(t)) - q)
            if q <= 0.5
            else (lambda t: q - 1 + float(self.sf(t)))
        )
        f_lo, f_hi = f(lo), f(hi)
        if f_lo * f_hi > 0:  # rounding at the bracket's ends (tiny concentrations): no sign
            # change, so the quantile is the end where f is nearer 0 (f rises with t for
            # q <= 1/2 and falls for q > 1/2)
            return lo if abs(f_lo) <= abs(f_hi) else hi
        return float(optimize.brentq(f, lo, hi, xtol=1e-14, rtol=1e-12))

    def ppf(self, q: Any) -> Any:
        qs = np.asarray(q, dtype=float)
        if np.any((qs < 0) | (qs > 1)) or np.any(np.isnan(qs)):
            raise ValueError("q must be in [0, 1]")
        out = np.vectorize(self._ppf1, otypes=[float])(qs)
        return float(out) if out.ndim == 0 else out

    def interval(self, level: float = 0.95, kind: str = "central") -> tuple[float, float]:
        """Central credible interval of probability ``level``."""
        if kind != "central":
            raise ValueError(f"kind must be 'central' for a mixture, got {kind!r}")
        return _central(self.ppf, level)

    def rvs(self, size: Any = None, random_state: Any = None) -> Any:
        """Draws through scipy: a component index, then a Beta draw (``random_state``)."""
        from scipy import stats

        shape = () if size is None else (size if isinstance(size, tuple) else (int(size),))
        count = int(np.prod(shape)) if shape else 1
        idx = stats.rv_discrete(values=(np.arange(self.weights.size), self.weights)).rvs(
            size=count, random_state=random_state
        )
        draws = stats.beta.rvs(self.a[idx], self.b[idx], random_state=random_state)
        return float(draws[0]) if not shape else np.asarray(draws).reshape(shape)


def _ladder(w: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[Any, ...] | None:
    """(a_0, b_0, j, log c_j, R_j, w) when a_k = a_0 + k and a_k + b_k is one constant s.

    That is the shape of every posterior mixture over a true count (Beta(a + k, b + n - k)),
    where :meth:`BetaMixture._fast_cdf` applies; ``None`` otherwise. Missing rungs get
    weight 0.
    """
    if a.size < 2:
        return None
    total = a + b
    steps = a - a[0]
    idx = np.rint(steps).astype(np.int64)
    if (
        np.ptp(total) > 1e-9 * total[0]
        or np.any(np.abs(steps - idx) > 1e-9)
        or np.any(np.diff(idx) <= 0)
        or idx[-1] > 4 * a.size + 16
    ):
        return None
    dense = np.zeros(int(idx[-1]) + 1)
    dense[idx] = w
    a0, s = float(a[0]), float(total[0])
    b0 = s - a0
    j = np.arange(dense.size - 1, dtype=float)
    log_c = special.gammaln(s) - special.gammaln(a0 + j + 1.0) - special.gammaln(s - a0 - j)
    tail = 1.0 - np.cumsum(dense)[:-1]
    return a0, b0, j, log_c, np.maximum(tail, 0.0), dense


class _DirichletMarginals(PosteriorDisplay, ABC):
    """Mean, variance and intervals of a Dirichlet mixture from its Beta-mixture marginals."""

    m: int

    @abstractmethod
    def marginal(self, i: int) -> BetaMixture:
        """The exact marginal of category ``i``."""

    def mean(self) -> np.ndarray:
        return np.array([self.marginal(i).mean() for i in range(self.m)])

    def var(self) -> np.ndarray:
        return np.array([self.marginal(i).var() for i in range(self.m)])

    def std(self) -> np.ndarray:
        return np.sqrt(self.var())

    def interval(self, level: float = 0.95, kind: str = "central") -> np.ndarray:
        """Per-component marginal central credible intervals, shape (m, 2)."""
        if kind != "central":
            raise ValueError(f"kind must be 'central' for a mixture, got {kind!r}")
        return np.array([self.marginal(i).interval(level) for i in range(self.m)])


@dataclass(frozen=True, eq=False, repr=False)
class DirichletMixture(_DirichletMarginals):
    """sum_k w_k Dir(alpha_k) with explicit components (rows of ``alphas``, shape (K, m))."""

    weights: np.ndarray
    alphas: np.ndarray
    family: ClassVar[str] = "dirichlet-mixture"

    def __post_init__(self) -> None:
        w = check_array(self.weights, "weights", ndim=1, min_size=1)
        al = check_array(self.alphas, "alphas", ndim=2, positive=True)
        if al.shape[0] != w.size or al.shape[1] < 2:
            raise ValueError(f"alphas must have shape ({w.size}, m >= 2), got {al.shape}")
        if np.any(w < 0) or not w.sum() > 0:
            raise ValueError("weights must be >= 0 with a positive sum")
        w = w / w.sum()
        keep = w >= _MIN_WEIGHT
        object.__setattr__(self, "weights", w[keep] / w[keep].sum())
        object.__setattr__(self, "alphas", al[keep])

    @property
    def m(self) -> int:  # type: ignore[override]
        return int(self.alphas.shape[1])

    def marginal(self, i: int) -> BetaMixture:
        a = self.alphas[:, i]
        return BetaMixture(self.weights, a, np.delete(self.alphas, i, axis=1).sum(axis=1))

    def pdf(self, x: Any) -> Any:
        return np.exp(self.logpdf(x))

    def logpdf(self, x: Any) -> Any:
        """log density at simplex points ``x``, shape (m,) or (N, m)."""
        from scipy import stats

        xs = np.asarray(x, dtype=float)
        pts = np.atleast_2d(xs)
        comp = np.array([np.atleast_1d(stats.dirichlet.logpdf(pts.T, al)) for al in self.alphas])
        out = special.logsumexp(np.log(self.weights)[:, None] + comp, axis=0)
        return float(out[0]) if xs.ndim == 1 else out

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "weights": self.weights.tolist(),
            "alphas": self.alphas.tolist(),
        }

    def rvs(self, size: Any = None, random_state: Any = None) -> Any:
        from scipy import stats

        count = 1 if size is None else int(size)
        idx = stats.rv_discrete(values=(np.arange(self.weights.size), self.weights)).rvs(
            size=count, random_state=random_state
        )
        gam = stats.gamma.rvs(self.alphas[idx], random_state=random_state)
        draws = gam / gam.sum(axis=1, keepdims=True)
        return draws[0] if size is None else draws


def _feasible(lf: np.ndarray, lo: np.ndarray, hi: np.ndarray, n: int) -> np.ndarray | None:
    """A count vector c of sum n with every lf[j, c_j] finite, between the modes ``lo``
    (sum <= n) and ``hi`` (sum >= n), or None: the remainder spread greedily from ``lo``,
    else put on one coordinate (of ``lo``, or taken from one of ``hi``)."""
    m = lf.shape[0]
    rows = np.arange(m)
    c = lo.copy()
    left = n - int(c.sum())
    for j in range(m):
        step = min(int(hi[j] - c[j]), left)
        c[j] += step
        left -= step
    candidates = [c] if left == 0 else []
    for base, change in ((lo, n - int(lo.sum())), (hi, n - int(hi.sum()))):
        for j in range(m):
            alt = base.copy()
            alt[j] += change
            if 0 <= alt[j] <= n:
                candidates.append(alt)
    best, best_value = None, -math.inf
    for cand in candidates:
        value = float(np.sum(lf[rows, cand]))
        if value > best_value:
            best, best_value = cand, value
    return best


@dataclass(frozen=True, eq=False, repr=False)
class SeparableDirichletMixture(_DirichletMarginals):
    """sum over count vectors c >= 0 with sum n of w(c) Dir(alpha + c), w(c) = prod_j h_j(c_j).

    ``log_factors`` has shape (m, n + 1): log h_j(x) for x = 0..n (-inf allowed). The
    weight of c_j = x is h_j(x) times the (m-1)-fold convolution of the other factors at
    n - x, so every marginal is exact up to the terms :meth:`_factors` drops (together
    below e^-50 of the total weight).

    Speed: every weight is unchanged when each h_j(x) is multiplied by e^{t x} (the product
    gains e^{t n}, a constant). With t at the saddle point (the factors' modes summing to
    n), the largest weight is close to the product of the factors' maxima, so a factor's
    entries far below its maximum, and partial convolutions far below theirs, carry no
    weight and are dropped with a proven bound; what is left is convolved directly
    (:func:`log_convolve`). Cost O(m w^2) for windows of w entries around the modes
    (w is about 200 times the noise scale for Laplace noise), at most O(m n^2).
    """

    alpha: np.ndarray
    n: int
    log_factors: np.ndarray
    family: ClassVar[str] = "separable-dirichlet-mixture"
    _cache: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        al = check_array(self.alpha, "alpha", ndim=1, min_size=2, positive=True)
        n = check_int(self.n, "n", minimum=0)
        lf = np.asarray(self.log_factors, dtype=float)
        if lf.shape != (al.size, n + 1):
            raise ValueError(f"log_factors must have shape ({al.size}, {n + 1}), got {lf.shape}")
        if np.any(np.isnan(lf)) or np.any(lf == np.inf):
            raise ValueError("log_factors must be finite or -inf")
        object.__setattr__(self, "alpha", al)
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "log_factors", lf)

    @property
    def m(self) -> int:  # type: ignore[override]
        return int(self.alpha.size)

    def _factors(self) -> tuple[np.ndarray, float, float, np.ndarray, float]:
        """(tilted, trimmed log factors; tilt t; log lower bound L; row maxima U; margin D).

        Tilted: g_j(x) = log h_j(x) + t (x - c*_j), with t found by bisection so that the
        modes straddle a count vector c* of sum n (the saddle point; every weight and the
        evidence unchanged, as sum_j t (c_j - c*_j) = 0); L = sum_j g_j(c*_j) <=
        log of the total tilted weight Z~. Any count vector whose weight contains g_j(x)
        weighs at most exp(g_j(x) + sum_{l != j} U_l), and there are at most (n+1)^(m-1)
        of them. An entry, or an entry of a partial convolution (:meth:`_partials`), is
        dropped when that bound times e^(sum of the other maxima) falls below e^(L - D)
        per vector; at most 3 (m + 1)(n + 1) entries are dropped, so with
        D = 50 + log(3 (m + 1)) + m log(n + 1) the dropped weight is below e^-50 Z~ (each
        dropped vector is counted at the first entry that drops it, which bounds the
        union). Without a feasible c* (no count vector has positive weight, or the
        bisection's c* has weight 0) nothing is tilted or dropped.
        """
        if "factors" in self._cache:
            return self._cache["factors"]  # type: ignore[no-any-return]
        lf, n = self.log_factors, self.n
        x = np.arange(n + 1, dtype=float)
        finite = np.isfinite(lf)
        result: tuple[np.ndarray, float, float, np.ndarray, float] = (
            lf,
            0.0,
            -np.inf,
            np.max(lf, axis=1),
            np.inf,
        )
        if finite.any(axis=1).all():
            first = np.argmax(finite, axis=1)
            last = n - np.argmax(finite[:, ::-1], axis=1)
            if first.sum() <= n <= last.sum():
                result = self._tilt(lf, x, first, last)
        self._cache["factors"] = result
        return result

    def _tilt(
        self, lf: np.ndarray, x: np.ndarray, first: np.ndarray, last: np.ndarray
    ) -> tuple[np.ndarray, float, float, np.ndarray, float]:
        n, m = self.n, self.m
        finite = lf[np.isfinite(lf)]
        reach = float(np.max(finite) - np.min(finite)) + 1.0  # > any row's finite range
        # bisection on asinh(t): 100 halvings resolve t to ~1e-25 relative even when a
        # sentinel entry (-1e300) makes the bracket astronomically wide
        u_lo, u_hi = -math.asinh(reach), math.asinh(reach)
        modes_lo, modes_hi = first, last  # the modes at t = -reach and t = reach
        t_lo = -reach
        for _ in range(100):
            mid = 0.5 * (u_lo + u_hi)
            if not u_lo < mid < u_hi:
                break
            t = math.sinh(mid)
            modes = np.argmax(lf + t * x, axis=1)
            if modes.sum() <= n:
                u_lo, modes_lo, t_lo = mid, modes, t
            else:
                u_hi, modes_hi = mid, modes
        modes_hi = np.maximum(modes_hi, modes_lo)  # argmax is nondecreasing in t
        c = _feasible(lf, modes_lo, modes_hi, n)
        margin = 50.0 + math.log(3.0 * (m + 1)) + m * math.log(n + 1.0)
        if c is None:
            return lf, 0.0, -np.inf, np.max(lf, axis=1), np.inf
        # centred at c*: sum_j t (c_j - c*_j) = t (n - n) = 0, so no weight and not the
        # evidence changes, and the rounding of t x stays at the scale of x - c*
        g = lf + t_lo * (x[None, :] - c[:, None])
        upper = np.max(g, axis=1)
        lower = float(np.sum(g[np.arange(m), c]))
        others = float(np.sum(upper)) - upper
        g = np.where(g + others[:, None] >= lower - margin, g, -np.inf)
        return g, t_lo, lower, upper, margin

    def _trim(self, partial: np.ndarray, rest: float) -> np.ndarray:
        """Drop entries of a partial convolution whose every completion is negligible."""
        _, _, lower, _, margin = self._factors()
        return np.where(partial + rest >= lower - margin, partial, -np.inf)

    def _partials(self, key: str) -> list[np.ndarray]:
        """suffix[j] = log conv of factors j..m-1, prefix[j] of factors 0..j-1 (trimmed)."""
        if key not in self._cache:
            g, _, _, upper, _ = self._factors()
            size, m = self.n + 1, self.m
            out: list[np.ndarray] = [np.empty(0)] * (m + 1)
            delta = np.full(size, -np.inf)
            delta[0] = 0.0
            if key == "suffix":
                out[m] = delta
                for j in range(m - 1, -1, -1):
                    conv = log_convolve(g[j], out[j + 1], size)
                    out[j] = self._trim(conv, float(np.sum(upper[:j]))) if j else conv
            else:
                out[0] = delta
                for j in range(m):
                    conv = log_convolve(out[j], g[j], size)
                    out[j + 1] = self._trim(conv, float(np.sum(upper[j + 1 :])))
            self._cache[key] = out
        return list(self._cache[key])

    def _suffix(self) -> list[np.ndarray]:
        return self._partials("suffix")

    def _prefix(self) -> list[np.ndarray]:
        return self._partials("prefix")

    def log_evidence(self) -> float:
        """log sum_c prod_j h_j(c_j) (the normaliser of the weights; the tilt is centred on
        a count vector of sum n, so it cancels)."""
        return float(self._suffix()[0][self.n])

    def count_marginal(self, i: int) -> np.ndarray:
        """P(c_i = x | released), x = 0..n."""
        i = check_int(i, "i", minimum=0)
        if i >= self.m:
            raise ValueError(f"i must be < m = {self.m}, got {i}")
        key = f"count{i}"
        if key not in self._cache:
            g = self._factors()[0]
            if self.m == 2:
                others = g[1 - i]
            else:
                others = log_convolve(self._prefix()[i], self._suffix()[i + 1], self.n + 1)
            lw = g[i] + others[::-1]
            self._cache[key] = _normalised(lw, "the weights of the mixture")
        return np.asarray(self._cache[key])

    def marginal(self, i: int) -> BetaMixture:
        w = self.count_marginal(i)
        x = np.arange(self.n + 1, dtype=float)
        a = self.alpha[i] + x
        # (sum of the others) + (n - x), not (sum + n) - a: at alpha = 1e-30 that rounds to 0
        rest = float(self.alpha.sum() - self.alpha[i]) if self.m > 2 else float(self.alpha[1 - i])
        return BetaMixture(w, a, rest + (self.n - x))

    def to_dict(self) -> dict[str, Any]:
        lf = np.where(np.isfinite(self.log_factors), self.log_factors, np.nan).astype(object)
        lf[~np.isfinite(self.log_factors)] = None
        return {
            "family": self.family,
            "alpha": self.alpha.tolist(),
            "n": self.n,
            "log_factors": lf.tolist(),
        }

    def rvs_counts(self, size: int = 1, random_state: Any = None) -> np.ndarray:
        """Exact draws of the true count vector c, shape (size, m): c_1, then c_2 | c_1, ..."""
        from scipy import stats

        size = check_int(size, "size", minimum=1)
        suf, g = self._suffix(), self._factors()[0]
        out = np.zeros((size, self.m), dtype=np.int64)
        left = np.full(size, self.n)
        u = stats.uniform.rvs(size=(size, self.m), random_state=random_state)
        for j in range(self.m - 1):
            for r in range(size):
                x = np.arange(left[r] + 1)
                lw = g[j][: left[r] + 1] + suf[j + 1][left[r] - x]
                cdf = np.cumsum(_normalised(lw))
                out[r, j] = min(int(np.searchsorted(cdf, u[r, j] * cdf[-1])), int(left[r]))
            left = left - out[:, j]
        out[:, -1] = left
        return out

    def rvs(self, size: Any = None, random_state: Any = None) -> Any:
        """Exact draws of theta: a true count vector c, then Dir(alpha + c)."""
        from scipy import stats

        count = 1 if size is None else int(size)
        c = self.rvs_counts(count, random_state=random_state)
        gam = stats.gamma.rvs(self.alpha + c, random_state=random_state)
        draws = gam / gam.sum(axis=1, keepdims=True)
        return draws[0] if size is None else draws


@dataclass(frozen=True, eq=False, repr=False)
class GridDistribution(PosteriorDisplay):
    """A 1-d density tabulated on an increasing grid (piecewise linear, trapezoid rule).

    ``log_density`` may be unnormalised; the density is zero outside the grid.
    """

    x: np.ndarray
    log_density: np.ndarray
    family: ClassVar[str] = "grid"
    _cdf: np.ndarray = field(init=False, repr=False)
    _dens: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        x = check_array(self.x, "x", ndim=1, min_size=3)
        ld = np.asarray(self.log_density, dtype=float)
        if ld.shape != x.shape:
            raise ValueError(f"log_density must have shape {x.shape}, got {ld.shape}")
        if np.any(np.diff(x) <= 0):
            raise ValueError("x must be strictly increasing")
        dens = np.exp(ld - np.max(ld))
        mass = np.concatenate([[0.0], np.cumsum(np.diff(x) * (dens[1:] + dens[:-1]) / 2)])
        if not mass[-1] > 0:
            raise ValueError("log_density must be finite somewhere")
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "log_density", ld)
        object.__setattr__(self, "_dens", dens / mass[-1])
        object.__setattr__(self, "_cdf", mass / mass[-1])

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "x": self.x.tolist(), "density": self._dens.tolist()}

    def pdf(self, x: Any) -> Any:
        return np.interp(x, self.x, self._dens, left=0.0, right=0.0)

    def logpdf(self, x: Any) -> Any:
        with np.errstate(divide="ignore"):
            return np.log(self.pdf(x))

    def cdf(self, x: Any) -> Any:
        return np.interp(x, self.x, self._cdf, left=0.0, right=1.0)

    def sf(self, x: Any) -> Any:
        return 1.0 - self.cdf(x)

    def ppf(self, q: Any) -> Any:
        """Quantile: exact for the piecewise-linear density (a quadratic within a cell)."""
        qs = np.asarray(q, dtype=float)
        if np.any((qs < 0) | (qs > 1)) or np.any(np.isnan(qs)):
            raise ValueError("q must be in [0, 1]")
        i = np.clip(np.searchsorted(self._cdf, qs, side="right") - 1, 0, self.x.size - 2)
        x0, h = self.x[i], self.x[i + 1] - self.x[i]
        f0, f1 = self._dens[i], self._dens[i + 1]
        r = qs - self._cdf[i]
        slope = (f1 - f0) / h
        with np.errstate(divide="ignore", invalid="ignore"):
            quad = np.where(
                np.abs(slope) * h > 1e-12 * np.maximum(f0, 1e-300),
                (-f0 + np.sqrt(np.maximum(f0 * f0 + 2 * slope * r, 0.0))) / slope,
                r / np.maximum(f0, 1e-300),
            )
        out = x0 + np.clip(quad, 0.0, h)
        return float(out) if out.ndim == 0 else out

    def _moment(self, k: int) -> float:
        # exact integral of x^k times the piecewise-linear density, cell by cell (Simpson
        # is exact for the cubic x^2 * linear)
        x0, x1 = self.x[:-1], self.x[1:]
        f0, f1 = self._dens[:-1], self._dens[1:]
        xm, fm = (x0 + x1) / 2, (f0 + f1) / 2
        return float(np.sum((x1 - x0) / 6 * (x0**k * f0 + 4 * xm**k * fm + x1**k * f1)))

    def mean(self) -> float:
        return self._moment(1)

    def var(self) -> float:
        mu = self.mean()
        return max(self._moment(2) - mu * mu, 0.0)

    def std(self) -> float:
        return math.sqrt(self.var())

    def interval(self, level: float = 0.95, kind: str = "central") -> tuple[float, float]:
        """Central credible interval of probability ``level``."""
        if kind != "central":
            raise ValueError(f"kind must be 'central' for a grid distribution, got {kind!r}")
        return _central(self.ppf, level)

    def rvs(self, size: Any = None, random_state: Any = None) -> Any:
        """Inverse-CDF draws from scipy uniforms (``random_state``)."""
        from scipy import stats

        return self.ppf(stats.uniform.rvs(size=size, random_state=random_state))


def mixture_from_dict(d: dict[str, Any]) -> Any:
    """Rebuild a mixture or grid distribution from its ``to_dict()`` output."""
    if not isinstance(d, dict) or "family" not in d:
        raise TypeError("d must be a dict with a 'family' key")
    fam = d["family"]
    if fam == "beta-mixture":
        return BetaMixture(np.asarray(d["weights"]), np.asarray(d["a"]), np.asarray(d["b"]))
    if fam == "dirichlet-mixture":
        return DirichletMixture(np.asarray(d["weights"]), np.asarray(d["alphas"]))
    if fam == "separable-dirichlet-mixture":
        lf = np.array([[-np.inf if v is None else v for v in row] for row in d["log_factors"]])
        return SeparableDirichletMixture(np.asarray(d["alpha"]), int(d["n"]), lf)
    if fam == "grid":
        with np.errstate(divide="ignore"):
            return GridDistribution(np.asarray(d["x"]), np.log(np.asarray(d["density"])))
    raise ValueError(
        "d['family'] must be one of beta-mixture, dirichlet-mixture, "
        f"separable-dirichlet-mixture, grid; got {fam!r}"
    )
