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
(the dropped weights summed, times the largest ratio of g over the counts' range, in
logs: :func:`_omitted_bound`). An informative Dir(alpha) pulls these windows away from the
posterior (h grows like x^(alpha - 1)); when their bound fails, the windows are bounded
through the likelihoods instead (:func:`_likelihood_windows`), for priors on N with a
known supremum (flat, Normal, a scipy.stats pmf).
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
    """The weights a count window leaves out, as log shares of the kept weights' sum (the
    bound :func:`_omitted_bound` needs where they lie): ``total`` (the whole share, a
    plain number); ``log_lower``, the log share of each count 0 .. x0 - 1 below the window;
    ``log_upper``, the log share above it (the tail beyond the computed counts included).
    In logs because a share far below the doubles can still weigh: the factor g(N) of a
    small total can be e^300 times that of the kept ones (Beta(100, 100), 8 records)."""

    total: float
    log_lower: np.ndarray
    log_upper: float


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
    log_kept = float(special.logsumexp(lw[i0 : i1 + 1]))
    # beyond ``top``: ratio of consecutive weights <= e^(-1/scale) (alpha + x)/(x + 1)
    log_ratio = -1.0 / scale + math.log(max(1.0, (alpha + top) / (top + 1.0)))
    if log_ratio < 0.0:
        tail = float(lw[-1]) + log_ratio - math.log(-math.expm1(log_ratio))
    else:  # pragma: no cover - top is 60 scales past the released value
        tail = math.inf
    with np.errstate(divide="ignore"):
        log_upper = float(np.logaddexp(special.logsumexp(lw[i1 + 1 :]), tail)) - log_kept
    log_lower = lw[:i0] - log_kept
    total = math.exp(min(float(np.logaddexp(special.logsumexp(log_lower), log_upper)), 700.0))
    w = np.exp(lw[i0 : i1 + 1])
    return i0, np.ascontiguousarray(w), Dropped(total, log_lower, log_upper)


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
    like N^(1 - A), A = 20.) Everything is summed in logs (:func:`log_convolve`, every term
    kept): in doubles a dropped share below 1e-308, or one lost to an FFT's rounding, met
    a g(N) of e^300 at a small total (Beta(100, 100), 8 records: a bound of 2e-11 on a
    posterior whose mean was off by 1.5e-5).
    """
    from dpbayes.models.mixtures import log_convolve

    m = len(weights)
    with np.errstate(divide="ignore"):
        kept = [np.log(w) - math.log(float(w.sum())) for w in weights]  # each kept law
    lg_all = np.asarray(log_g(np.arange(sum(tops) + 1)), dtype=float)
    sup_from = np.maximum.accumulate(lg_all[::-1])[::-1]  # sup_{N >= k} log g(N)
    last = lg_all.size - 1

    def law_of(indices: list[int]) -> tuple[int, np.ndarray]:  # (start, log law) of the sum
        out = np.zeros(1)
        for k in indices:
            out = log_convolve(out, kept[k])
        return sum(starts[k] for k in indices), out

    def expect(prof: np.ndarray, first: int, table: np.ndarray) -> float:
        """log sum_x e^prof(x) e^table(first + x) over the computed N."""
        if prof.size == 0:
            return -math.inf
        idx = np.minimum(first + np.arange(prof.size), last)
        with np.errstate(invalid="ignore"):
            return float(special.logsumexp(prof + table[idx]))

    r0, total = law_of(list(range(m)))
    log_mean_g = expect(total, r0, lg_all)
    if not math.isfinite(log_mean_g):
        return math.inf
    terms = []
    for j in range(m):  # count j dropped, the others kept: exact below, sup above
        r0, rest = law_of([k for k in range(m) if k != j])
        low = dropped[j].log_lower
        if low.size:
            terms.append(expect(log_convolve(low, rest), r0, lg_all))
        end = starts[j] + weights[j].size
        terms.append(dropped[j].log_upper + expect(rest, r0 + end, sup_from))
    for j, i in itertools.combinations(range(m), 2):  # two dropped, the others kept
        r0, rest = law_of([k for k in range(m) if k not in (i, j)])
        lj, li = dropped[j].log_lower, dropped[i].log_lower
        if lj.size and li.size:
            terms.append(expect(log_convolve(log_convolve(lj, li), rest), r0, lg_all))
        for a, b in ((j, i), (i, j)):  # a above its window: N >= its end + b's count
            end = starts[a] + weights[a].size
            spread = np.r_[
                dropped[b].log_lower, np.full(weights[b].size, -np.inf), dropped[b].log_upper
            ]
            terms.append(
                dropped[a].log_upper + expect(log_convolve(spread, rest), r0 + end, sup_from)
            )
    with np.errstate(divide="ignore"):
        shares = [float(np.logaddexp(special.logsumexp(d.log_lower), d.log_upper)) for d in dropped]
    for trio in itertools.combinations(range(m), 3):  # three or more dropped: crude
        others = sum(float(np.logaddexp(0.0, shares[k])) for k in range(m) if k not in trio)
        terms.append(others + sum(shares[k] for k in trio) + float(sup_from[0]))
    if any(math.isnan(t) for t in terms):
        return math.inf
    return math.exp(min(float(special.logsumexp(terms)) - log_mean_g, 700.0))


#: the floors (in e-folds below each window's largest weight) the windows bounded by the
#: likelihood try in turn; capped at 560 / m so that a product of m kept weights (and of
#: the normalised partial convolutions) stays a normal double
_FLOORS = (40.0, 100.0, 560.0)


def _likelihood_windows(
    al: np.ndarray,
    log_liks: list[Any],
    released: list[float],
    scale: float,
    log_g: Any,
    log_sup: float,
    floor: float,
    tilt: float = 0.0,
) -> tuple[list[int], list[np.ndarray], float]:
    """(starts, weights, omitted): windows whose omitted share is bounded through the
    likelihoods alone, for priors that pull the windows of :func:`count_window` away from
    the posterior (an informative Dir(alpha) under a private n).

    ``tilt`` t: the windows are chosen, and the weights returned, as h_j(x) L_j(x) e^(-t x)
    (the caller multiplies g(N) by e^(t N): the products are unchanged, since the counts
    sum to N). With t near -d log g / dN at the release's total, a strong prior's
    x^(alpha_j - 1) no longer outweighs the data by more than the doubles hold. The bound
    below does not depend on t: it sums the untilted weights.

    **The bound.** The weight of a count vector c (module docstring) is

        W(c) = g(N) prod_j h_j(c_j) L_j(c_j)
             = pi(N) DirMult(c | N, alpha) prod_j Gamma(alpha_j) / Gamma(A) prod_j L_j(c_j),

    since N!/prod c_j! Gamma(A)/Gamma(A + N) prod_j Gamma(alpha_j + c_j)/Gamma(alpha_j) is
    the Dirichlet-multinomial pmf. It is at most 1 and pi(N) <= e^log_sup, so

        W(c) <= K prod_j L_j(c_j),     K = e^log_sup prod_j Gamma(alpha_j) / Gamma(A).

    Each coordinate keeps the counts x = 0..top_j whose weight h_j L_j is within e^-floor
    of the largest (the rest are dropped: set to 0, or outside the window). Every vector
    with a dropped coordinate j is counted in the union bound

        sum_{c: some c_j dropped} W(c) <= K sum_j D_j prod_{k != j} T_k,

    D_j = sum of L_j over coordinate j's dropped counts, T_k = sum of L_k over all x >= 0.
    Both sums run over 0..top exactly and bound the tail beyond top by the geometric series
    L(top) rho / (1 - rho), rho = e^(-1/scale) (the likelihood's ratio of consecutive
    counts beyond the released value + 60 scales: exact for Laplace and geometric noise,
    an upper bound for Gaussian noise there). The kept mass sum_{kept c} W(c) is summed
    exactly, in log space (:func:`~dpbayes.models.mixtures.log_convolve`, every term
    kept). ``omitted`` is the ratio of the two. A product of m kept weights is at least
    e^(-m floor) of the largest, so ``floor`` <= 560 / m keeps the mixture's products normal.
    """
    from dpbayes.models.mixtures import log_convolve

    m = al.size
    log_rho = -1.0 / scale
    log_geom = log_rho - math.log(-math.expm1(log_rho))  # log(rho / (1 - rho))
    starts, weights, kept_logs = [], [], []
    log_d, log_t = [], []
    for j in range(m):
        top = check_window(float(released[j]), scale)
        x = np.arange(top + 1, dtype=float)
        ll = np.asarray(log_liks[j](x), dtype=float)
        lw = special.gammaln(al[j] + x) - special.gammaln(x + 1.0) + ll
        lt = lw - tilt * x
        best = float(np.max(lt))
        if not math.isfinite(best):
            raise ValueError("the release has probability 0 under every true count")
        keep = lt - best >= -floor
        idx = np.flatnonzero(keep)
        i0, i1 = int(idx[0]), int(idx[-1])
        tail = float(ll[-1]) + log_geom
        with np.errstate(divide="ignore"):
            log_d.append(float(np.logaddexp(special.logsumexp(np.where(keep, -np.inf, ll)), tail)))
        log_t.append(float(np.logaddexp(special.logsumexp(ll), tail)))
        part = np.where(keep[i0 : i1 + 1], lw[i0 : i1 + 1], -np.inf)
        starts.append(i0)
        kept_logs.append(part)
        weights.append(np.exp(np.where(keep[i0 : i1 + 1], lt[i0 : i1 + 1], -np.inf) - best))
    conv = kept_logs[0]
    for part in kept_logs[1:]:
        conv = log_convolve(conv, part)
    n = sum(starts) + np.arange(conv.size)
    with np.errstate(invalid="ignore"):
        log_kept = float(special.logsumexp(np.asarray(log_g(n), dtype=float) + conv))
    if not math.isfinite(log_kept):
        return starts, weights, math.inf
    total_t = float(np.sum(log_t))
    log_k = log_sup + float(np.sum(special.gammaln(al))) - float(special.gammaln(al.sum()))
    log_num = log_k + float(special.logsumexp(np.array(log_d) + (total_t - np.array(log_t))))
    return starts, weights, math.exp(min(log_num - log_kept, 700.0))


def _windows_fail_under_a_flat_n(
    starts: list[int],
    weights: list[np.ndarray],
    dropped: list[Dropped],
    tops: list[int],
    al: np.ndarray,
    extra_log_g: Any,
) -> bool:
    """Whether the windows' bound fails under the flat prior on n too (then the Dirichlet
    prior, not the prior on n, is what a refusal should name)."""
    from dpbayes.release.counts.n_prior import n_prior as make_prior

    flat = _log_g(make_prior(None), float(al.sum()), extra_log_g)
    return not _omitted_bound(starts, weights, dropped, tops, flat) < 1e-6


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
    windows = (list(starts), list(weights))  # the first windows, which ``dropped`` describes
    fallback = prior.log_sup is not None and extra_log_g is None
    tilt = 0.0
    if not omitted < 1e-10 and fallback and prior.log_sup is not None:
        # an informative prior pulls the windows away (or the bound is merely loose): bound
        # the windows through the likelihoods instead, and keep the smaller bound; if that
        # fails too, choose the windows tilted towards the release's total
        floors = sorted({min(f, 560.0 / al.size) for f in _FLOORS})
        # a whole number: a prior on n given as a pmf is -inf between the integers
        total = float(max(math.floor(sum(max(float(r), 0.0) for r in released)), 1))
        with np.errstate(invalid="ignore"):  # -inf - -inf where pi is 0 there: no tilt
            ends = np.asarray(log_g(np.array([total, total + 1.0])), dtype=float)
            slope = float(ends[1] - ends[0])
        tilts = [0.0] + ([-slope] if math.isfinite(slope) and slope != 0.0 else [])
        for t in tilts:
            for floor in floors:
                found = _likelihood_windows(
                    al, log_liks, released, scale, log_g, float(prior.log_sup), floor, t
                )
                if found[2] < omitted:
                    (starts, weights, omitted), tilt = found, t
                if omitted < 1e-10:
                    break
            if omitted < 1e-6:
                break
    if tilt:
        untilted = log_g

        def log_g(n: Any) -> Any:  # g(N) e^(t N): the windows' weights carry e^(-t x)
            return np.asarray(untilted(n), dtype=float) + tilt * np.asarray(n, dtype=float)

    if not omitted < 1e-6:
        bound = "> 1e300" if omitted >= 1e300 else f"{omitted:.3g}"
        family = "Beta" if al.size == 2 and not dirichlet else "Dir"
        named = f"{family}({', '.join(f'{v:g}' for v in al)})"
        if prior.kind == "flat" or (fallback and _windows_fail_under_a_flat_n(
            *windows, dropped, tops, al, extra_log_g
        )):  # fmt: skip
            on_n = "" if prior.kind == "flat" else " (under a flat prior on n too)"
            raise ValueError(
                "the exact sum over the true counts cannot bound the share its windows leave "
                f"out (bound {bound}): with n private, the prior {named} pulls each count's "
                "window up to about alpha noise scales, away from the posterior, and no "
                f"window of doubles holds both{on_n}; use the naive posterior rel.posterior "
                "or a flatter prior"
            )
        raise ValueError(
            "the prior on n puts its mass where the release is implausible (the posterior "
            f"lies outside the counts' windows: omitted share bound {bound}); choose a prior "
            "on n that agrees with the release (n_prior=None for the flat prior; a prior "
            "that is not a scipy.stats distribution gets no bound through the likelihoods)"
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
