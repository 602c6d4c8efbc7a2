"""A smooth prior for P: the Dirichlet-process mixture of truncated Normals.

Paper 001 puts the Dirichlet process on P itself, so every draw of P is discrete. Under
local noise the CDF of P is not estimable at the root-n rate (a deconvolution), and the
width of its posterior is then set by the prior's regularity: a discrete prior is far
rougher than a smooth truth, and its credible bands over-cover there (the experiment's
bimodal truth: 0.98-1.00 at 95%). This module gives P a smooth prior instead,

    P = sum_k w_k N(theta_k, s_k^2) restricted to [-r, r],
    w ~ stick-breaking(alpha) truncated at K components (the last takes the rest),
    theta_k ~ N(theta_mean, theta_sd^2),  log s_k ~ Uniform(log s_lo, log s_hi),
    alpha ~ Gamma(shape, rate),  X_i ~ P,  Z_i | X_i ~ Q(. | X_i),

the truncated Dirichlet-process mixture of Ishwaran & James (2001). It is a proper prior
in its own right (the truncated stick-breaking prior; its distance to the untruncated DP
mixture is at most 4 n e^{-(K-1)/alpha} in total variation of the data's law), and the
sampler below draws from its exact posterior. One sweep of their blocked Gibbs sampler,
with each X_i integrated out (the closed forms of :mod:`kernels_normal_mixture`):

1. labels: P(c_i = k) proportional to w_k m(z_i | theta_k, s_k), all i at once;
2. components: theta_k, then log s_k, of every occupied component by slice sampling
   (Neal 2003) on the sum of log m over its observations plus the log prior; empty
   components from the prior;
3. weights: v_k ~ Beta(1 + n_k, alpha + sum_{j > k} n_j), k < K;
4. alpha ~ Gamma(shape + K - 1, rate - sum_{k < K} log(1 - v_k)).

Each draw of P is then a smooth law: its CDF, density, mean, variance and quantiles are
computed exactly, without a smoothing bandwidth. The fit is post-processing of the
privatised data, so it carries the data's guarantee.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy import stats

from dpbayes import display
from dpbayes.nonparametric import kernels_normal_mixture as knm
from dpbayes.nonparametric.diagnostics import check_convergence, diagnose
from dpbayes.nonparametric.fit import DPMixtureFit
from dpbayes.nonparametric.mechanisms import LocalGaussian, LocalLaplace
from dpbayes.nonparametric.sampler import DEFAULT_ALPHA_PRIOR, privatized_values
from dpbayes.privacy.noise import noise_source
from dpbayes.privacy.validation import check_array, check_finite, check_int, check_positive
from dpbayes.progress import Progress

__all__ = ["DPNormalMixture", "NormalMixtureFit"]


def _log_gamma(shape: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """log of Gamma(shape, 1) variates, exact also where the variate underflows (shape
    below 1: G(a) = G(a + 1) U^(1/a))."""
    shape = np.asarray(shape, dtype=float)
    small = shape < 1.0
    g = np.log(gen.standard_gamma(np.where(small, shape + 1.0, shape)))
    u = gen.random(shape.shape)
    return np.where(small, g + np.log1p(-u) / np.where(small, shape, 1.0), g)  # type: ignore[no-any-return]


@dataclass
class NormalMixtureState:
    """One chain's state: component means and sds, log weights, concentration."""

    theta: np.ndarray
    s: np.ndarray
    logw: np.ndarray
    alpha: float
    counts: np.ndarray
    loglik: np.ndarray


@dataclass(frozen=True, kw_only=True)
class DPNormalMixture:
    """Dirichlet-process mixture of Normals restricted to [-r, r] for the law P of X.

    Parameters
    ----------
    mechanism:
        :class:`LocalLaplace` or :class:`LocalGaussian` (clipping bound r).
    components:
        Truncation level K of the stick-breaking (>= 2; default 30).
    alpha, alpha_prior:
        Concentration (the starting value under a prior) and the (shape, rate) of its
        Gamma prior (default (2, 0.5)), or None to keep alpha fixed.
    theta_prior:
        (mean, sd) of the Normal prior of each component's mean (default (0, r)).
    scale_range:
        (lo, hi) of the log-uniform prior of each component's sd (default (r/40, 2r)).
    marginal_moves, atom_moves, pair_moves:
        After each blocked Gibbs sweep, move (theta, s, w) with the labels summed out:
        theta and s of the ``atom_moves`` heaviest components, and ``pair_moves`` weight
        transfers between random pairs of components (False: the blocked Gibbs sampler
        alone, which mixes slowly under heavy noise).
    """

    mechanism: LocalLaplace | LocalGaussian
    components: int = 30
    alpha: float = 1.0
    alpha_prior: tuple[float, float] | None = DEFAULT_ALPHA_PRIOR
    theta_prior: tuple[float, float] | None = None
    scale_range: tuple[float, float] | None = None
    marginal_moves: bool = True
    atom_moves: int = 6
    pair_moves: int = 20
    base_prior: None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        mech = self.mechanism
        if not isinstance(mech, LocalLaplace | LocalGaussian):
            raise TypeError(
                "mechanism must be a dpbayes.nonparametric LocalLaplace or LocalGaussian, "
                f"got {type(mech).__name__}"
            )
        check_int(self.components, "components", minimum=2)
        check_int(self.atom_moves, "atom_moves", minimum=0)
        check_int(self.pair_moves, "pair_moves", minimum=0)
        if not isinstance(self.marginal_moves, bool):
            raise TypeError(f"marginal_moves must be a bool, got {self.marginal_moves!r}")
        object.__setattr__(self, "alpha", check_positive(self.alpha, "alpha"))
        if self.alpha_prior is not None:
            shape, rate = self._pair(self.alpha_prior, "alpha_prior")
            check_positive(shape, "alpha_prior[0] (shape)")
            check_positive(rate, "alpha_prior[1] (rate)")
            object.__setattr__(self, "alpha_prior", (shape, rate))
        r = mech.r
        tm, ts = self._pair(self.theta_prior or (0.0, r), "theta_prior")
        check_finite(tm, "theta_prior[0] (mean)")
        check_positive(ts, "theta_prior[1] (sd)")
        object.__setattr__(self, "theta_prior", (tm, ts))
        lo, hi = self._pair(self.scale_range or (r / 40.0, 2.0 * r), "scale_range")
        check_positive(lo, "scale_range[0]")
        check_positive(hi, "scale_range[1]")
        if not lo < hi:
            raise ValueError(f"scale_range must have lo < hi, got ({lo}, {hi})")
        object.__setattr__(self, "scale_range", (lo, hi))

    @staticmethod
    def _pair(value: Any, name: str) -> tuple[float, float]:
        if not isinstance(value, tuple | list) or len(value) != 2:
            raise TypeError(f"{name} must be a pair, got {value!r}")
        return float(value[0]), float(value[1])

    # ------------------------------------------------------------------ the model
    @property
    def _kind(self) -> int:
        return knm.LAPLACE if isinstance(self.mechanism, LocalLaplace) else knm.GAUSSIAN

    @property
    def _scale(self) -> float:
        m = self.mechanism
        return m.scale if isinstance(m, LocalLaplace) else m.sigma

    @property
    def _noise_var(self) -> float:
        return 2.0 * self._scale**2 if self._kind == knm.LAPLACE else self._scale**2

    def loglik_matrix(self, z: np.ndarray, theta: np.ndarray, s: np.ndarray) -> np.ndarray:
        """(n, K) log m(z_i | theta_k, s_k): the density of Z_i under component k."""
        out = np.empty((z.shape[0], theta.shape[0]))
        knm.loglik_matrix(self._kind, z, self._scale, self.mechanism.r, theta, s, out)
        return out

    def _prior_components(
        self, gen: np.random.Generator, size: int
    ) -> tuple[np.ndarray, np.ndarray]:
        assert self.theta_prior is not None and self.scale_range is not None
        tm, ts = self.theta_prior
        lo, hi = np.log(self.scale_range[0]), np.log(self.scale_range[1])
        theta = tm + ts * gen.standard_normal(size)
        return theta, np.exp(lo + (hi - lo) * gen.random(size))

    def _log_weights(
        self, counts: np.ndarray, alpha: float, gen: np.random.Generator
    ) -> tuple[np.ndarray, float]:
        """Stick-breaking log weights given the counts (all zero: the prior), and
        sum_{k<K} log(1 - v_k)."""
        after = np.cumsum(counts[::-1])[::-1] - counts  # sum_{j > k} n_j
        la = _log_gamma(1.0 + counts[:-1], gen)
        lb = _log_gamma(alpha + after[:-1], gen)
        top = np.maximum(la, lb)
        lsum = top + np.log(np.exp(la - top) + np.exp(lb - top))
        log_v, log_1mv = la - lsum, lb - lsum
        rest = np.concatenate([[0.0], np.cumsum(log_1mv)])
        return np.concatenate([log_v + rest[:-1], rest[-1:]]), float(rest[-1])

    def _update_alpha(self, sum_log_1mv: float, alpha: float, gen: np.random.Generator) -> float:
        if self.alpha_prior is None:
            return alpha
        shape, rate = self.alpha_prior
        return float(gen.gamma(shape + self.components - 1, 1.0 / (rate - sum_log_1mv)))

    def initial_state(self, z: np.ndarray, gen: np.random.Generator) -> NormalMixtureState:
        """A draw from the prior (over-dispersed across chains)."""
        k = self.components
        theta, s = self._prior_components(gen, k)
        counts = np.zeros(k, dtype=np.int64)
        logw, _ = self._log_weights(counts, self.alpha, gen)
        lik = self.loglik_matrix(z, theta, s)
        return NormalMixtureState(theta, s, logw, self.alpha, counts, lik)

    def sweep(
        self, state: NormalMixtureState, z: np.ndarray, gen: np.random.Generator
    ) -> NormalMixtureState:
        """One blocked Gibbs sweep (labels, components, weights, alpha), then the moves
        with the labels summed out."""
        k = self.components
        r = self.mechanism.r
        lik = state.loglik
        labels = np.empty(z.shape[0], dtype=np.int64)
        knm.draw_labels(lik, state.logw, gen.random(z.shape[0]), labels)
        counts = np.bincount(labels, minlength=k).astype(np.int64)
        order = np.argsort(labels, kind="stable")
        zs = np.ascontiguousarray(z[order])
        starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        assert self.theta_prior is not None and self.scale_range is not None
        tm, ts = self.theta_prior
        lo, hi = math.log(self.scale_range[0]), math.log(self.scale_range[1])
        pool = gen.random(48 * int(np.count_nonzero(counts)) + 64)
        while True:  # rerun with more uniforms (the same ones first) if the pool ran out
            theta, s = state.theta.copy(), state.s.copy()
            used = knm.slice_components(
                self._kind, zs, starts, self._scale, r, theta, s, tm, ts, lo, hi,
                self._noise_var, pool,
            )  # fmt: skip
            if used >= 0:
                break
            pool = np.concatenate([pool, gen.random(pool.size)])
        empty = counts == 0
        theta[empty], s[empty] = self._prior_components(gen, int(empty.sum()))
        logw, sum_log_1mv = self._log_weights(counts, state.alpha, gen)
        alpha = self._update_alpha(sum_log_1mv, state.alpha, gen)
        lik = self.loglik_matrix(z, theta, s)
        if self.marginal_moves and (self.atom_moves or self.pair_moves):
            theta, s, logw, lik = self._marginal_moves(z, theta, s, logw, alpha, lik, gen)
        return NormalMixtureState(theta, s, logw, alpha, counts, lik)

    def _marginal_moves(
        self,
        z: np.ndarray,
        theta: np.ndarray,
        s: np.ndarray,
        logw: np.ndarray,
        alpha: float,
        lik: np.ndarray,
        gen: np.random.Generator,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        k = self.components
        w = np.exp(logw)
        atoms = np.argsort(-w, kind="stable")[: self.atom_moves].astype(np.int64)
        first = gen.integers(0, k, size=self.pair_moves)
        second = (first + gen.integers(1, k, size=self.pair_moves)) % k
        pairs = np.ascontiguousarray(np.column_stack([first, second]), dtype=np.int64)
        assert self.theta_prior is not None and self.scale_range is not None
        tm, ts = self.theta_prior
        lo, hi = math.log(self.scale_range[0]), math.log(self.scale_range[1])
        pool = gen.random(16 * (self.atom_moves + self.pair_moves) + 64)
        while True:  # rerun with more uniforms (the same ones first) if the pool ran out
            th, sd, ww, ll = theta.copy(), s.copy(), w.copy(), lik.copy()
            c = np.empty(z.shape[0])
            e = np.empty_like(ll)
            knm.scaled_likelihoods(ll, c, e)
            used = knm.marginal_moves(
                self._kind, z, self._scale, self.mechanism.r, th, sd, ww, alpha, ll, c, e,
                atoms, pairs, tm, ts, lo, hi, self._noise_var, pool,
            )  # fmt: skip
            if used >= 0:
                break
            pool = np.concatenate([pool, gen.random(pool.size)])
        moved = ww != w  # only transferred weights change; the others keep their logs
        new_logw = logw.copy()
        new_logw[moved] = np.log(ww[moved])
        return th, sd, new_logw, ll

    def prior_predictive(self, gen: np.random.Generator, n: int) -> tuple[np.ndarray, Any, float]:
        """One draw (P, X_1..X_n) from the prior: the X's, the CDF of P (a function of a
        grid) and alpha. For simulation-based calibration."""
        alpha = self.alpha
        if self.alpha_prior is not None:
            shape, rate = self.alpha_prior
            alpha = float(gen.gamma(shape, 1.0 / rate))
        counts = np.zeros(self.components, dtype=np.int64)
        logw, _ = self._log_weights(counts, alpha, gen)
        theta, s = self._prior_components(gen, self.components)
        w = np.exp(logw)
        r = self.mechanism.r
        comp = np.searchsorted(np.cumsum(w), gen.random(n) * w.sum(), side="right")
        comp = comp.clip(0, w.size - 1)
        a, b = (-r - theta[comp]) / s[comp], (r - theta[comp]) / s[comp]
        x = stats.truncnorm.rvs(a, b, loc=theta[comp], scale=s[comp], random_state=gen)

        def cdf(grid: Any) -> np.ndarray:
            g = np.ascontiguousarray(np.ravel(np.asarray(grid, dtype=float)))
            return knm.mixture_cdf(w[None], theta[None], s[None], r, g)[0]  # type: ignore[no-any-return]

        return np.asarray(x, dtype=float), cdf, alpha

    # ------------------------------------------------------------------ fitting
    def fit(
        self,
        z: Any,
        *,
        draws: int = 1000,
        warmup: int | None = None,
        chains: int = 4,
        thin: int = 1,
        rng: Any = None,
        progress: bool | None = None,
        diagnostics: bool = True,
    ) -> NormalMixtureFit:
        """Run ``chains`` chains of the blocked Gibbs sampler on the privatised ``z``.

        Arguments as :meth:`DPMixture.fit`: ``z`` an array or a :class:`PrivatizedColumn`
        of this mechanism; ``warmup`` defaults to ``draws // 2``; ``rng`` None or a seed.
        """
        values, guarantee = privatized_values(self.mechanism, z)
        draws = check_int(draws, "draws", minimum=1)
        warmup = draws // 2 if warmup is None else check_int(warmup, "warmup", minimum=0)
        chains = check_int(chains, "chains", minimum=1)
        thin = check_int(thin, "thin", minimum=1)
        if progress is not None and not isinstance(progress, bool):
            raise TypeError(f"progress must be None or a bool, got {progress!r}")
        gens = noise_source(rng).generator().spawn(chains)
        zz = np.ascontiguousarray(values, dtype=float)
        sweeps = warmup + draws * thin
        k = self.components
        out = {name: np.zeros((chains, draws, k)) for name in ("w", "theta", "s")}
        out_k = np.zeros((chains, draws), dtype=np.int64)
        out_alpha = np.zeros((chains, draws))
        bar = Progress(chains * sweeps, "DP mixture of Normals", unit="sweep", show=progress)
        t0 = time.perf_counter()
        try:
            for c, gen in enumerate(gens):
                state = self.initial_state(zz, gen)
                for i in range(sweeps):
                    state = self.sweep(state, zz, gen)
                    if i >= warmup and (i - warmup) % thin == thin - 1:
                        d = (i - warmup) // thin
                        out["w"][c, d] = np.exp(state.logw)
                        out["theta"][c, d] = state.theta
                        out["s"][c, d] = state.s
                        out_k[c, d] = np.count_nonzero(state.counts)
                        out_alpha[c, d] = state.alpha
                    if i % 10 == 9:
                        bar.update(10)
        finally:
            bar.close()
        fit = NormalMixtureFit(
            out["theta"],
            np.cumsum(out["w"], axis=-1),
            out_k,
            out_alpha,
            np.zeros((2, chains, draws)),
            self,
            zz.shape[0],
            guarantee,
            time.perf_counter() - t0,
            chains * sweeps,
            scales=out["s"],
        )
        if diagnostics:
            table = diagnose(fit.functionals())
            fit = replace(fit, diagnostics=table)
            check_convergence(table, chains, stacklevel=3)
        return fit


@dataclass(frozen=True)
class NormalMixtureFit(DPMixtureFit):
    """Posterior draws of P from :meth:`DPNormalMixture.fit`: ``atoms`` are the component
    means theta, ``scales`` their sds, ``cumw`` the cumulative weights (component order).
    Every draw of P is smooth and lives on [-r, r]; its functionals are exact."""

    scales: np.ndarray | None = None

    def _parts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        assert self.scales is not None
        k = self.atoms.shape[-1]
        w = np.ascontiguousarray(self.weights().reshape(-1, k))
        theta = np.ascontiguousarray(self.atoms.reshape(-1, k))
        s = np.ascontiguousarray(self.scales.reshape(-1, k))
        return w, theta, s, float(self.model.mechanism.r)

    def projected(self) -> NormalMixtureFit:
        """P already lives on [-r, r]: the law of clip(X) is P itself."""
        return self

    def mean_draws(self) -> np.ndarray:
        return self._shape(knm.mixture_moments(*self._parts())[:, 0])

    def var_draws(self) -> np.ndarray:
        return self._shape(knm.mixture_moments(*self._parts())[:, 1])

    def quantile_draws(self, q: Any) -> np.ndarray:
        qs = np.atleast_1d(np.asarray(q, dtype=float))
        for v in qs:
            if not 0.0 < v < 1.0:
                raise ValueError(f"q must be in (0, 1), got {v}")
        out = self._shape(knm.mixture_quantiles(*self._parts(), np.ascontiguousarray(qs)))
        return out[..., 0] if np.ndim(q) == 0 else out

    def cdf_draws(self, grid: Any) -> np.ndarray:
        g = check_array(grid, "grid", ndim=None)
        vals = knm.mixture_cdf(*self._parts(), np.ascontiguousarray(np.ravel(g), dtype=float))
        return self._shape(vals).reshape(self.chains, self.draws, *g.shape)

    def density_draws(self, grid: Any, bandwidth: float | None = None) -> np.ndarray:
        """Draws of the density of P (exact: a mixture of Normals needs no smoothing)."""
        if bandwidth is not None:
            raise ValueError("bandwidth must be None: a mixture of Normals has a density")
        g = check_array(grid, "grid")
        return self._shape(knm.mixture_pdf(*self._parts(), np.ascontiguousarray(g, dtype=float)))

    def __repr__(self) -> str:
        g = self.guarantee.describe() if self.guarantee is not None else "no guarantee"
        return (
            f"NormalMixtureFit(n={self.n}, chains={self.chains}, draws={self.draws}, "
            f"mean={self.mean():.4g}, {g})"
        )

    def _display(self) -> tuple[str, list[tuple[str, str]]]:
        _, rows = super()._display()
        rows[3] = ("components", f"{np.mean(self.n_clusters):.1f} occupied on average")
        return "NormalMixtureFit (DP mixture of Normals on locally private data)", rows

    def _repr_html_(self) -> str:
        return display.html(self)
