"""Noise-aware posteriors of count releases whose n is private (add/remove; user level).

Under add/remove neighbours (one record, or at user level one user with <= k rows) a
count release noises every count and publishes no n (``release/counts/mechanism.py``). The
true counts c = (c_1..c_m) then have no known total, so the recipient needs a prior on the
total N = sum_j c_j. With theta ~ Dir(alpha) (A = sum alpha) and c | N, theta ~
Multinomial(N, theta), the prior predictive of the counts is

    P(c) = pi(N) N!/prod_j c_j! Gamma(A)/Gamma(A + N) prod_j Gamma(alpha_j + c_j)/Gamma(alpha_j)
         propto g(N) prod_j h_j(c_j),   g(N) = pi(N) Gamma(N + 1) / Gamma(N + A),
                                        h_j(c) = Gamma(alpha_j + c) / c!,

(the Dirichlet-multinomial times the prior pi of N). The noise is independent per
coordinate, so the posterior weight of c is g(N) prod_j h_j(c_j) L_j(c_j), L_j the
likelihood of the released value r_j (truncated to [0, inf): a released 0 has the
noise's tail P(c_j + Z <= 0)). Given c, theta ~ Dir(alpha + c); so theta_i's posterior is

    sum_{x, y} p_i(x) q_i(y) g(x + y) Beta(alpha_i + x, A - alpha_i + y),

p_i = h_i L_i, q_i the convolution of the other p_j: the coin (m = 2) is the case q = p_0.
:class:`CountPairBetaMixture` is that mixture, exact over a window of counts; its cdf,
pdf and quantiles run compiled (:mod:`._private_n_kernels`).

**Default prior on N: flat** (improper uniform on N >= 0, ``n_prior=None`` or
``"flat"``). It is the total of a Poisson process with a flat prior on its rate
(int Poisson(N; lam) d lam = 1), says nothing about the size, and keeps theta ~ Dir(alpha)
exactly and independent of N. The posterior is proper: every count is noised, so the
likelihood decays in every c_j. Alternatives: ``n_prior=(mean, sd)`` (a discretised
Normal on N >= 0) or any object with ``logpmf`` or ``pmf`` over the integers (a frozen
scipy.stats discrete distribution, e.g. ``scipy.stats.poisson(20000)``).

**Window and omitted mass.** For each coordinate, the log weight log h_j + log L_j is
computed on 0..r_j + 60 scales (the weight beyond is below e^-60 of the largest) and the
counts whose weight is below e^-36 of the largest are dropped from both ends; the
posterior records ``omitted_mass``, a bound on the dropped share of the posterior mass
(the dropped weights summed, times the largest ratio of g over the counts' range).
"""

from __future__ import annotations

import itertools
import math
import threading
from typing import Any, ClassVar, NamedTuple

import numpy as np
from scipy import special, stats

from dpbayes.display import PosteriorDisplay
from dpbayes.privacy.validation import check_int, check_probability
from dpbayes.release.counts._private_n_kernels import (
    cdf_pdf,
    convolve,
    quantiles,
    slice_moments,
)
from dpbayes.release.counts.n_prior import NPrior, n_prior, private_n_rows

__all__ = [
    "MAX_WINDOW",
    "CountPairBetaMixture",
    "Dropped",
    "NPrior",
    "PrivateNDirichletMixture",
    "check_window",
    "count_window",
    "n_prior",
]

LOG_DROP = -36.0  # counts whose weight is below e^-36 of the largest are dropped (ends)
TAIL_SCALES = 60.0  # the weights are computed up to the released value + 60 noise scales
SLICE_DROP = 1e-18  # totals N whose posterior weight is below 1e-18 of the largest: skipped
MAX_PAIRS = 4e9  # pairs (x, y) of the windows: ~2 s of CPU at 2e9 (eps 0.005 at k = 5, n = 20k)
#: The most true counts whose weights one coordinate computes (0 .. released + 60 scales +
#: 50), checked before any array is made: at eps 1e-7 the window's arrays took 14 GB before
#: the pairs were counted and refused.
MAX_WINDOW = 2e7


def check_window(released: float, scale: float, what: str = "count") -> int:
    """The window's top (:func:`_top`), or ValueError (from the released value and the
    public scale, before any array is made) beyond :data:`MAX_WINDOW` counts."""
    top = _top(released, scale)
    if not top + 1 <= MAX_WINDOW:
        raise ValueError(
            f"the noisy {what} {released:.6g} with noise scale {scale:.6g} needs the weights "
            f"of {top + 1:.3g} true values (more than {MAX_WINDOW:.0e}): too many for the "
            "exact sum over them; release with a larger epsilon (or use the naive posterior)"
        )
    return top


def _top(released: float, scale: float) -> int:
    """The largest count whose weight is computed: the released value + 60 scales + 50."""
    return math.ceil(max(float(released), 0.0) + TAIL_SCALES * scale + 50.0)


class Dropped(NamedTuple):
    """The weights a count window leaves out, as shares of the kept weights' sum (the
    bound :func:`_omitted_bound` needs where they lie): ``total``; ``lower``, the share of
    each count 0 .. x0 - 1 below the window; ``upper``, the share above it (the tail
    beyond the computed counts included)."""

    total: float
    lower: np.ndarray
    upper: float


def count_window(
    alpha: float, log_lik: Any, released: float, scale: float
) -> tuple[int, np.ndarray, Dropped]:
    """(x0, w, dropped): the weights w (max 1) of the true count x = x0.. of one noised
    coordinate, h(x) L(x) with h(x) = Gamma(alpha + x) / x!, and the dropped shares of
    their sum (module docstring). ``log_lik(x)`` is log P(released | x) for an array x."""
    top = check_window(released, scale)
    x = np.arange(top + 1, dtype=float)
    lw = special.gammaln(alpha + x) - special.gammaln(x + 1.0) + np.asarray(log_lik(x))
    best = float(np.max(lw))
    if not math.isfinite(best):
        raise ValueError("the release has probability 0 under every true count")
    lw -= best
    keep = np.flatnonzero(lw > LOG_DROP)
    i0, i1 = int(keep[0]), int(keep[-1])
    w = np.exp(lw)
    total = float(w.sum())
    upper = float(w[i1 + 1 :].sum())
    # beyond ``top``: ratio of consecutive weights <= e^(-1/scale) (alpha + x)/(x + 1)
    ratio = math.exp(-1.0 / scale) * max(1.0, (alpha + top) / (top + 1.0))
    if ratio < 1.0:
        upper += float(w[-1]) * ratio / (1.0 - ratio)
    else:  # pragma: no cover - top is 60 scales past the released value
        upper = math.inf
    lower = w[:i0] / total
    dropped = Dropped(float(lower.sum()) + upper / total, lower, upper / total)
    return i0, np.ascontiguousarray(w[i0 : i1 + 1]), dropped


class CountPairBetaMixture(PosteriorDisplay):
    """sum_{x, y} p(x) q(y) g(x + y) Beta(a + x, b + y), x = x0.., y = y0.. (exact).

    The posterior of one proportion after a count release with a private n (module
    docstring). scipy.stats-like: ``mean``, ``var``, ``std``, ``pdf``, ``logpdf``,
    ``cdf``, ``sf``, ``ppf``, ``interval``, ``rvs``, ``to_dict``; ``n_prior`` (the prior
    on N that was used), ``omitted_mass`` (bound on the dropped posterior share) and
    ``n_marginal()`` (the posterior of N).
    """

    family: ClassVar[str] = "count-pair-beta-mixture"

    def _display_extra(self) -> list[tuple[str, str]]:
        return private_n_rows(self.n_prior, self.omitted_mass)

    def __init__(
        self,
        a: float,
        b: float,
        x0: int,
        p: np.ndarray,
        y0: int,
        q: np.ndarray,
        log_g: np.ndarray,
        *,
        n_prior: NPrior,
        omitted_mass: float,
    ) -> None:
        """Trusted constructor: p (max 1), q >= 0; ``log_g`` over N = x0 + y0 + k,
        k < p.size + q.size - 1 (log g(N) up to a constant)."""
        self.a, self.b = float(a), float(b)
        self.x0, self.y0 = int(x0), int(y0)
        self.p = np.ascontiguousarray(p, dtype=float)
        self.q = np.ascontiguousarray(q / np.max(q), dtype=float)
        mom = slice_moments(self.p, self.q, self.x0)
        lg = np.asarray(log_g, dtype=float)
        with np.errstate(divide="ignore"):
            lw = lg + np.log(mom[0])
        top = float(np.max(lw))
        if not math.isfinite(top):
            raise ValueError("the release has probability 0 under every true count")
        g = np.exp(lg - top)
        g /= float(g @ mom[0])
        # slices (totals N) with weight below 1e-18 of the largest are skipped from the
        # ends: their share joins ``omitted_mass``
        wk = g * mom[0]
        keep = np.flatnonzero(wk > SLICE_DROP * float(np.max(wk)))
        skipped = float(wk[: keep[0]].sum() + wk[keep[-1] + 1 :].sum())
        g_run = np.zeros_like(g)
        g_run[keep[0] : keep[-1] + 1] = g[keep[0] : keep[-1] + 1] / (1.0 - skipped)
        self._g = np.ascontiguousarray(g_run)
        self._u0 = np.ascontiguousarray(mom[0])
        self.n_prior = n_prior
        self.omitted_mass = float(omitted_mass) + skipped
        s = self.a + self.b + self.x0 + self.y0 + np.arange(g.size, dtype=float)
        ex = self.a * mom[0] + mom[1]  # sum p q (a + x)
        ex2 = ex + self.a * self.a * mom[0] + 2.0 * self.a * mom[1] + mom[2]  # (a+x)(a+x+1)
        self._mean = float(g @ (ex / s))
        second = float(g @ (ex2 / (s * (s + 1.0))))
        self._var = max(second - self._mean**2, 0.0)
        self._inv = 1.0 / (self.a + self.x0 + np.arange(self.p.size, dtype=float) + 1.0)
        self._lstart = np.full(g.size, -1, dtype=np.int64)
        self._lsum = np.zeros(g.size)
        self._lock = threading.Lock()

    # -- moments ---------------------------------------------------------------------
    def mean(self) -> float:
        return self._mean

    def var(self) -> float:
        return self._var

    def std(self) -> float:
        return math.sqrt(self._var)

    def n_marginal(self) -> tuple[np.ndarray, np.ndarray]:
        """(N values, posterior probabilities) of the true total."""
        n = self.x0 + self.y0 + np.arange(self._g.size)
        w = self._g * self._u0
        return n, w / w.sum()

    # -- cdf, pdf, quantiles ---------------------------------------------------------
    def _args(self) -> tuple[Any, ...]:
        return (self.p, self.q, self._g, self._u0, self.a, self.b, self.x0, self.y0)

    def _cdf_pdf(self, x: Any, with_cdf: bool = True) -> tuple[np.ndarray, np.ndarray]:
        xs = np.asarray(x, dtype=float)
        flat = xs.ravel()
        cdf = np.where(flat >= 1.0, 1.0, 0.0)
        pdf = np.zeros(flat.size)
        inner = np.flatnonzero((flat > 0.0) & (flat < 1.0))
        with self._lock:
            for i in inner[np.argsort(flat[inner])]:
                c, d = cdf_pdf(  # type: ignore[call-arg]
                    float(flat[i]), *self._args(), self._lstart, self._lsum, self._inv, with_cdf
                )
                cdf[i], pdf[i] = c, d
        return cdf.reshape(xs.shape), pdf.reshape(xs.shape)

    def cdf(self, x: Any) -> Any:
        out = self._cdf_pdf(x)[0]
        return float(out) if out.ndim == 0 else out

    def sf(self, x: Any) -> Any:
        out = 1.0 - np.asarray(self._cdf_pdf(x)[0])
        return float(out) if out.ndim == 0 else out

    def pdf(self, x: Any) -> Any:
        out = self._cdf_pdf(x, with_cdf=False)[1]
        return float(out) if out.ndim == 0 else out

    def logpdf(self, x: Any) -> Any:
        with np.errstate(divide="ignore"):
            out = np.log(np.asarray(self._cdf_pdf(x, with_cdf=False)[1]))
        return float(out) if out.ndim == 0 else out

    def _ppf_many(self, qs: np.ndarray) -> np.ndarray:
        sd = max(self.std(), 1e-300)
        z = special.ndtri(qs)
        starts = np.clip(self._mean + sd * z, 1e-300, 1.0 - 1e-16)
        with self._lock:
            return np.asarray(
                quantiles(  # type: ignore[call-arg]
                    qs, starts, sd, *self._args(), self._lstart, self._lsum, self._inv
                )
            )

    def ppf(self, q: Any) -> Any:
        qs = np.asarray(q, dtype=float)
        if np.any((qs < 0) | (qs > 1)) or np.any(np.isnan(qs)):
            raise ValueError("q must be in [0, 1]")
        flat = qs.ravel()
        out = np.where(flat <= 0.0, 0.0, 1.0)
        inner = (flat > 0.0) & (flat < 1.0)
        if inner.any():
            out[inner] = self._ppf_many(flat[inner])
        out = out.reshape(qs.shape)
        return float(out) if out.ndim == 0 else out

    def interval(self, level: float = 0.95, kind: str = "central") -> tuple[float, float]:
        """Central credible interval of probability ``level`` (both ends in one solve)."""
        if kind != "central":
            raise ValueError(f"kind must be 'central' for a mixture, got {kind!r}")
        lvl = check_probability(level, "level", open_interval=True)
        lo, hi = self._ppf_many(np.array([(1.0 - lvl) / 2, (1.0 + lvl) / 2]))
        return float(lo), float(hi)

    # -- draws and records ----------------------------------------------------------
    def rvs_counts(self, size: int = 1, random_state: Any = None) -> np.ndarray:
        """Exact draws of (x, y), shape (size, 2): N from its marginal, then x | N."""
        size = check_int(size, "size", minimum=1)
        n_vals, w_n = self.n_marginal()
        u = stats.uniform.rvs(size=(size, 2), random_state=random_state)
        ks = np.minimum(np.searchsorted(np.cumsum(w_n), u[:, 0] * w_n.sum()), w_n.size - 1)
        out = np.empty((size, 2), dtype=np.int64)
        for r, k in enumerate(ks.tolist()):
            i_lo, i_hi = max(0, k - self.q.size + 1), min(self.p.size - 1, k)
            i = np.arange(i_lo, i_hi + 1)
            cw = np.cumsum(self.p[i] * self.q[k - i])
            pick = i_lo + min(int(np.searchsorted(cw, u[r, 1] * cw[-1])), i.size - 1)
            out[r] = (self.x0 + pick, int(n_vals[k]) - self.x0 - pick)
        return out

    def rvs(self, size: Any = None, random_state: Any = None) -> Any:
        """Exact draws of theta: (x, y), then Beta(a + x, b + y) (through scipy)."""
        count = 1 if size is None else int(size)
        c = self.rvs_counts(count, random_state=random_state)
        draws = stats.beta.rvs(self.a + c[:, 0], self.b + c[:, 1], random_state=random_state)
        return float(np.asarray(draws).ravel()[0]) if size is None else np.asarray(draws)

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "a": self.a,
            "b": self.b,
            "mean": self.mean(),
            "sd": self.std(),
            "interval90": list(self.interval(0.9)),
            "n_prior": self.n_prior.to_dict(),
            "omitted_mass": self.omitted_mass,
        }


class PrivateNDirichletMixture(PosteriorDisplay):
    """The posterior of Dir(alpha + c) over the true counts c with a private total.

    Weights g(N) prod_j p_j(c_j) over windows of every c_j (module docstring);
    ``marginal(i)`` is the exact :class:`CountPairBetaMixture` of theta_i. ``mean``,
    ``var``, ``std``, ``interval`` (per category, shape (m, 2)), ``rvs`` and
    ``rvs_counts`` (exact joint draws), ``n_prior``, ``omitted_mass``, ``to_dict``.
    """

    family: ClassVar[str] = "private-n-dirichlet-mixture"

    def _display_extra(self) -> list[tuple[str, str]]:
        return private_n_rows(self.n_prior, self.omitted_mass)

    def __init__(
        self,
        alpha: np.ndarray,
        starts: list[int],
        weights: list[np.ndarray],
        log_g: Any,
        *,
        n_prior: NPrior,
        omitted_mass: float,
    ) -> None:
        """``log_g(N)``: log g over an integer array N (the prior's factor, module
        docstring); ``starts``/``weights``: each coordinate's window."""
        self.alpha = np.asarray(alpha, dtype=float)
        self.starts = [int(s) for s in starts]
        self.weights = [np.ascontiguousarray(w, dtype=float) for w in weights]
        self._log_g = log_g
        self.n_prior = n_prior
        self.omitted_mass = float(omitted_mass)
        self._marginals: dict[int, CountPairBetaMixture] = {}
        self._lock = threading.Lock()

    @property
    def m(self) -> int:
        return int(self.alpha.size)

    def _others(self, i: int) -> tuple[int, np.ndarray]:
        y0, q = 0, np.ones(1)
        for j in range(self.m):
            if j != i:
                y0 += self.starts[j]
                q = convolve(q, self.weights[j])
                q /= np.max(q)
        return y0, q

    def marginal(self, i: int) -> CountPairBetaMixture:
        """The exact posterior of theta_i."""
        i = check_int(i, "i", minimum=0)
        if i >= self.m:
            raise ValueError(f"i must be < m = {self.m}, got {i}")
        with self._lock:
            if i not in self._marginals:
                y0, q = self._others(i)
                x0, p = self.starts[i], self.weights[i]
                n = x0 + y0 + np.arange(p.size + q.size - 1)
                self._marginals[i] = CountPairBetaMixture(
                    self.alpha[i],
                    float(self.alpha.sum() - self.alpha[i]),
                    x0,
                    p,
                    y0,
                    q,
                    self._log_g(n),
                    n_prior=self.n_prior,
                    omitted_mass=self.omitted_mass,
                )
            return self._marginals[i]

    def mean(self) -> np.ndarray:
        return np.array([self.marginal(i).mean() for i in range(self.m)])

    def var(self) -> np.ndarray:
        return np.array([self.marginal(i).var() for i in range(self.m)])

    def std(self) -> np.ndarray:
        return np.sqrt(self.var())

    def interval(self, level: float = 0.95, kind: str = "central") -> np.ndarray:
        """Per-category marginal central credible intervals, shape (m, 2)."""
        if kind != "central":
            raise ValueError(f"kind must be 'central' for a mixture, got {kind!r}")
        return np.array([self.marginal(i).interval(level) for i in range(self.m)])

    def rvs_counts(self, size: int = 1, random_state: Any = None) -> np.ndarray:
        """Exact draws of the true count vector, shape (size, m): N, then c_1 | N, ..."""
        size = check_int(size, "size", minimum=1)
        suffix: list[tuple[int, np.ndarray]] = [(0, np.ones(1))] * (self.m + 1)
        for j in range(self.m - 1, -1, -1):
            s0, sw = suffix[j + 1]
            conv = convolve(self.weights[j], sw)
            suffix[j] = (self.starts[j] + s0, conv / np.max(conv))
        n0, total = suffix[0]
        n_vals = n0 + np.arange(total.size)
        with np.errstate(divide="ignore"):
            lw = np.asarray(self._log_g(n_vals)) + np.log(total)
        w_n = np.exp(lw - np.max(lw))
        u = stats.uniform.rvs(size=(size, self.m), random_state=random_state)
        out = np.zeros((size, self.m), dtype=np.int64)
        left = n_vals[
            np.minimum(np.searchsorted(np.cumsum(w_n), u[:, 0] * w_n.sum()), w_n.size - 1)
        ]
        for j in range(self.m - 1):
            s0, sw = suffix[j + 1]
            for r in range(size):
                x = self.starts[j] + np.arange(self.weights[j].size)
                rest = left[r] - x - s0
                ok = (rest >= 0) & (rest < sw.size)
                w = np.where(ok, self.weights[j] * sw[np.clip(rest, 0, sw.size - 1)], 0.0)
                cw = np.cumsum(w)
                out[r, j] = x[min(int(np.searchsorted(cw, u[r, j + 1] * cw[-1])), x.size - 1)]
            left = left - out[:, j]
        out[:, -1] = left
        return out

    def rvs(self, size: Any = None, random_state: Any = None) -> Any:
        """Exact draws of theta: a true count vector, then Dir(alpha + c)."""
        count = 1 if size is None else int(size)
        c = self.rvs_counts(count, random_state=random_state)
        gam = stats.gamma.rvs(self.alpha + c, random_state=random_state)
        draws = gam / gam.sum(axis=1, keepdims=True)
        return draws[0] if size is None else draws

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "alpha": self.alpha.tolist(),
            "mean": self.mean().tolist(),
            "sd": self.std().tolist(),
            "interval90": self.interval(0.9).tolist(),
            "n_prior": self.n_prior.to_dict(),
            "omitted_mass": self.omitted_mass,
        }


def _log_g(prior: NPrior, big_a: float, extra: Any = None) -> Any:
    """log g(N) = log pi(N) + lgamma(N + 1) - lgamma(N + A) (+ ``extra(N)``)."""

    def log_g(n: np.ndarray) -> np.ndarray:
        nf = np.asarray(n, dtype=float)
        out = prior.log_pmf(nf) + special.gammaln(nf + 1.0) - special.gammaln(nf + big_a)
        return out if extra is None else out + extra(nf)

    return log_g


def _omitted_bound(
    starts: list[int],
    weights: list[np.ndarray],
    dropped: list[Dropped],
    tops: list[int],
    log_g: Any,
) -> float:
    """A bound on the posterior share outside the windows (relative to the kept mass).

    With every count in its window but x_j, its mass is sum_x share_j(x) E[g(x + R)], R the
    sum of the other (kept) counts: computed exactly for the counts below the window, and
    with sup_{N >= end_j + R} g(N) for the share above it. Two dropped, the others kept: the
    same with the convolution of the two. Three or more: the product of their shares times
    sup_N g(N) and prod (1 + share) of the rest. The kept mass is E_kept[g]; the bound is
    the ratio. (With the whole dropped share at the smallest N the others allow, as before,
    a Beta(10, 10) prior was refused at every noise draw of a 100-record coin: g(N) falls
    like N^(1 - A), A = 20.)
    """
    from scipy.signal import fftconvolve

    m = len(weights)
    kept = [w / w.sum() for w in weights]  # each window's kept law
    total = np.ones(1)
    for w in kept:
        total = np.maximum(fftconvolve(total, w), 0.0)
    n_kept = sum(starts) + np.arange(total.size)
    lg_all = np.asarray(log_g(np.arange(sum(tops) + 1)), dtype=float)
    top = float(np.max(lg_all))
    g_all = np.exp(lg_all - top)
    mean_g = float(g_all[np.minimum(n_kept, g_all.size - 1)] @ total) / float(total.sum())
    if not mean_g > 0.0:
        return math.inf
    # sup_{N >= k} g(N) for every k (suffix maxima)
    sup_from = np.maximum.accumulate(g_all[::-1])[::-1]
    last = g_all.size - 1

    def law_of(indices: list[int]) -> tuple[int, np.ndarray]:  # (start, law) of their sum
        out = np.ones(1)
        for k in indices:
            out = np.maximum(fftconvolve(out, kept[k]), 0.0)
        return sum(starts[k] for k in indices), out

    def lower(j: int) -> np.ndarray:  # dropped shares of the counts 0 .. x0 - 1
        return np.maximum(dropped[j].lower, 0.0)

    def expect(prof: np.ndarray, first: int, table: np.ndarray) -> float:
        """sum_x prof(x) table(first + x) over the computed N (``table`` g or its sup)."""
        idx = np.minimum(first + np.arange(prof.size), last)
        return float(prof @ table[idx])

    bound = 0.0
    for j in range(m):  # count j dropped, the others kept: exact below, sup above
        r0, rest = law_of([k for k in range(m) if k != j])
        bound += expect(fftconvolve(lower(j), rest), r0, g_all)
        end = starts[j] + weights[j].size
        bound += dropped[j].upper * expect(rest, r0 + end, sup_from)
    for j, i in itertools.combinations(range(m), 2):  # two dropped, the others kept
        r0, rest = law_of([k for k in range(m) if k not in (i, j)])
        both = fftconvolve(fftconvolve(lower(j), lower(i)), rest)
        bound += expect(np.maximum(both, 0.0), r0, g_all)
        for a, b in ((j, i), (i, j)):  # a above its window: N >= its end + b's count
            end = starts[a] + weights[a].size
            prof = fftconvolve(np.r_[lower(b), kept[b] * 0.0 + 0.0, dropped[b].upper], rest)
            bound += dropped[a].upper * expect(np.maximum(prof, 0.0), r0 + end, sup_from)
    shares = [d.total for d in dropped]
    for trio in itertools.combinations(range(m), 3):  # three or more dropped: crude
        others = math.prod(1.0 + shares[k] for k in range(m) if k not in trio)
        bound += others * math.prod(shares[k] for k in trio) * float(sup_from[0])
    return bound / mean_g


def private_n_counts(
    alpha: Any,
    log_liks: list[Any],
    released: list[float],
    scale: float,
    prior: NPrior,
    extra_log_g: Any = None,
    dirichlet: bool = False,
) -> CountPairBetaMixture | PrivateNDirichletMixture:
    """The posterior of theta ~ Dir(alpha) given independently noised counts of every
    category and no n (module docstring): the coin's (m = 2) is the
    :class:`CountPairBetaMixture` of theta_1; m >= 3 a :class:`PrivateNDirichletMixture`.

    ``log_liks[j](x)`` is log P(released_j | c_j = x); ``scale`` the noise's scale (its
    sigma for Gaussian noise) bounds the weights' tails; ``extra_log_g(N)`` adds a factor
    of the total (the other tables of a Bayesian network); ``dirichlet=True`` returns the
    :class:`PrivateNDirichletMixture` for m = 2 too.
    """
    al = np.asarray(alpha, dtype=float)
    starts, weights, tops = [], [], []
    dropped: list[Dropped] = []
    for j, fn in enumerate(log_liks):
        x0, w, d = count_window(float(al[j]), fn, float(released[j]), scale)
        starts.append(x0)
        weights.append(w)
        dropped.append(d)
        tops.append(_top(released[j], scale))
    sizes = sorted(w.size for w in weights)
    pairs = float(sizes[-1]) * float(sum(sizes[:-1]))
    if pairs > MAX_PAIRS:
        raise ValueError(
            f"the noise (scale {scale:g}) is too large for the exact sum over the true counts "
            f"({pairs:.3g} pairs of counts > {MAX_PAIRS:.0e}, about a minute of CPU): "
            "release with a larger epsilon"
        )
    log_g = _log_g(prior, float(al.sum()), extra_log_g)
    omitted = _omitted_bound(starts, weights, dropped, tops, log_g)
    if not omitted < 1e-6 and prior.kind == "flat":
        family = "Beta" if al.size == 2 and not dirichlet else "Dir"
        raise ValueError(
            "the exact sum over the true counts cannot bound the share its windows leave "
            f"out (bound {omitted:.3g}): with n private, the prior "
            f"{family}({', '.join(f'{v:g}' for v in al)}) pulls each count's window up to "
            "about alpha noise scales, away from the posterior (informative priors are not "
            "supported here yet); use the naive posterior rel.posterior or a flatter prior"
        )
    if not omitted < 1e-6:
        raise ValueError(
            "the prior on n puts its mass where the release is implausible (the posterior "
            f"lies outside the counts' windows: omitted share bound {omitted:.3g}); choose "
            "a prior on n that agrees with the release (n_prior=None for the flat prior)"
        )
    if al.size == 2 and not dirichlet:
        n = starts[0] + starts[1] + np.arange(weights[0].size + weights[1].size - 1)
        return CountPairBetaMixture(
            float(al[0]),
            float(al[1]),
            starts[0],
            weights[0],
            starts[1],
            weights[1],
            log_g(n),
            n_prior=prior,
            omitted_mass=omitted,
        )
    return PrivateNDirichletMixture(al, starts, weights, log_g, n_prior=prior, omitted_mass=omitted)
