"""Noise-aware posterior of a linear-regression posterior-sampling release (issue 10).

The release (``dpbayes.release.regression.mechanism``, paper 004 §5.2) publishes D draws
w~_1..w~_D of N(mu(S), Sigma_T), Sigma_T = (lambda I + T / s2)^-1, mu = Sigma_T u / s2,
from the true sufficient statistics S = (T = X'X, u = X'y) and the public tempered noise
variance s2. The recipient wants p(w | w~) for the weights w of the model
y = x'w + N(0, sigma^2), w ~ N(0, I / lambda). That needs a model of the features (as in
Bernstein & Sheldon 2019, "Differentially private Bayesian linear regression"): here
x ~ N(0, Sigma_x), so T ~ Wishart(n, Sigma_x); the default Sigma_x = (B_x^2 / d) I uses
the public feature bound (E||x||^2 <= B_x^2), and the caller may give its own.

Given T everything else is linear-Gaussian: u | w, T ~ N(T w, sigma^2 T), and the mean
of the draws w-bar | u, T ~ N(M u, Sigma_T / D), M = Sigma_T / s2, so u and w integrate
out in closed form and

* p(w | T, w~) is Gaussian (exact conditioning), and
* p(w~ | T) is Gaussian in w-bar times the draws' spread around w-bar.

The sampler is Metropolis-Hastings on T alone, alternating a random walk
T' ~ Wishart(nu, T / nu) (nu adapted during burn-in) with independence proposals from
the Wishart prior (the release says little about T, so these mix fast), several chains
from over-dispersed starts; each kept T gives
p(w | T, w~) exactly, so the posterior is a Rao-Blackwellised mixture of Gaussians.
R-hat/ESS on every weight draw and log det T, RuntimeWarning when mixing is poor.

Approximation, stated: the release truncates the draws to ||w|| <= W; the truncation's
normaliser P(ball | S) is taken as 1 (exact when the posterior puts negligible mass
outside the ball, the usual case; ``ball_mass`` reports the noise-aware posterior's mass
inside the ball as a check).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy import optimize, special

from dpbayes.display import PosteriorDisplay
from dpbayes.models.linear_regression import BayesianLinearRegression
from dpbayes.privacy.noise import noise_source
from dpbayes.privacy.validation import check_array, check_int, check_probability
from dpbayes.progress import Progress
from dpbayes.release.base import Release, register_noise_aware
from dpbayes.release.mcmc import (
    Diagnostics,
    diagnose,
    diagnostics_rows,
    inference_data,
)
from dpbayes.release.regression._kernels import mh_steps, target_parts
from dpbayes.release.regression.record import RegressionSamplingRecord

__all__ = ["RegressionNoiseAwarePosterior", "regression_noise_aware"]

ADAPT = 50  # burn-in steps between adaptations of the random walk


@dataclass(frozen=True, eq=False, repr=False)
class RegressionNoiseAwarePosterior(PosteriorDisplay):
    """sum_s N(means[s], covs[s]) / S over the kept draws of T; ``draws`` are w draws."""

    means: np.ndarray
    covs: np.ndarray
    draws: np.ndarray
    diagnostics: Diagnostics
    ball_mass: float
    family: ClassVar[str] = "regression-noise-aware"

    def _display_extra(self) -> list[tuple[str, str]]:
        return diagnostics_rows(self.diagnostics)

    def to_inference_data(self) -> Any:
        """ArviZ ``InferenceData`` of the MCMC: the draws of the weights ``w`` and the
        conditional posterior means ``w_mean`` of every kept step, dims (chain, draw, coef)."""
        return inference_data(
            {"w": self.draws, "w_mean": self.means},
            self.diagnostics,
            dims={"w": ["coef"], "w_mean": ["coef"]},
            attrs={"model": "noise-aware posterior of a linear-regression release"},
        )

    def mean(self) -> np.ndarray:
        return np.asarray(self.means.mean(axis=0))

    def cov(self) -> np.ndarray:
        mu = self.mean()
        dev = self.means - mu
        return np.asarray(self.covs.mean(axis=0) + dev.T @ dev / self.means.shape[0])

    def var(self) -> np.ndarray:
        return np.diag(self.cov()).copy()

    def std(self) -> np.ndarray:
        return np.sqrt(self.var())

    def cdf(self, x: float, i: int) -> float:
        """P(w_i <= x): the mixture of the Gaussian marginals."""
        sd = np.sqrt(self.covs[:, i, i])
        return float(np.mean(special.ndtr((x - self.means[:, i]) / sd)))

    def interval(self, level: float = 0.95) -> np.ndarray:
        """Central marginal credible intervals, shape (d, 2)."""
        lvl = check_probability(level, "level", open_interval=True)
        out = np.empty((self.means.shape[1], 2))
        for i in range(self.means.shape[1]):
            sd = np.sqrt(self.covs[:, i, i])
            lo = float(np.min(self.means[:, i] - 10 * sd))
            hi = float(np.max(self.means[:, i] + 10 * sd))
            for k, q in enumerate(((1 - lvl) / 2, (1 + lvl) / 2)):
                out[i, k] = optimize.brentq(lambda x, i=i, q=q: self.cdf(x, i) - q, lo, hi)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "mean": self.mean().tolist(),
            "cov": self.cov().tolist(),
            "interval90": self.interval(0.9).tolist(),
            "ball_mass": self.ball_mass,
            "diagnostics": self.diagnostics.to_dict(),
        }


def _wishart_logpdf(x: np.ndarray, df: float, scale: np.ndarray) -> float:
    d = x.shape[0]
    _, ld_x = np.linalg.slogdet(x)
    _, ld_s = np.linalg.slogdet(scale)
    tr = float(np.trace(np.linalg.solve(scale, x)))
    return float(
        (df - d - 1) / 2 * ld_x
        - tr / 2
        - df * d / 2 * math.log(2.0)
        - df / 2 * ld_s
        - special.multigammaln(df / 2, d)
    )


def _wishart_draw(df: float, scale: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """Bartlett decomposition: L A A' L', A lower triangular with chi and normal entries."""
    d = scale.shape[0]
    chol = np.linalg.cholesky(scale)
    a = np.tril(gen.standard_normal((d, d)), -1)
    a[np.diag_indices(d)] = np.sqrt(gen.chisquare(df - np.arange(d)))
    la = chol @ a
    return np.asarray(la @ la.T)


class _Target:
    """The release's draws and the model constants of log p(w~ | T) and p(w | T, w~)
    (evaluated by :func:`~.noise_aware_regression_jit.target_parts`)."""

    def __init__(self, draws: np.ndarray, lam: float, sigma2: float, s2: float) -> None:
        self.wbar = draws.mean(axis=0)
        self.dev = draws - self.wbar
        self.dn = draws.shape[0]
        self.lam, self.sigma2, self.s2 = lam, sigma2, s2
        self.d = draws.shape[1]


def regression_noise_aware(
    rel: Release,
    *,
    n: int | None = None,
    feature_cov: Any = None,
    iterations: int = 2000,
    chains: int = 4,
    rng: Any = None,
) -> RegressionNoiseAwarePosterior:
    """p(w | released draws) for a ``sampling`` release of linear regression (module doc).

    ``n``: the number of records (default: the release's public n, substitute only);
    ``feature_cov``: Sigma_x of the feature model (default (B_x^2 / d) I); ``iterations``
    MH steps per chain (half burn-in); ``rng`` seeds the MCMC (inference draws only).
    """
    model: BayesianLinearRegression = rel.model
    rec = RegressionSamplingRecord.of(rel)
    n_rec = rec.n if n is None else n
    if n_rec is None:
        raise ValueError(
            "n must be given: the release does not publish the number of records "
            "(add/remove neighbours keep it private)"
        )
    n_rec = check_int(n_rec, "n", minimum=1)
    its = check_int(iterations, "iterations", minimum=40)
    m = check_int(chains, "chains", minimum=2)
    draws = np.atleast_2d(np.asarray(rel.released["draws"], dtype=float))
    d = draws.shape[1]
    if n_rec <= d - 1:
        raise ValueError(f"n must be > d - 1 = {d - 1} for the Wishart feature model")
    if feature_cov is None:
        bx = model.feature_bound if model.feature_bound is not None else 1.0
        sx = (bx * bx / d) * np.eye(d)
    else:
        sx = check_array(feature_cov, "feature_cov", ndim=2)
        if sx.shape != (d, d) or np.any(np.linalg.eigvalsh((sx + sx.T) / 2) <= 0):
            raise ValueError(f"feature_cov must be a positive definite ({d}, {d}) matrix")
    target = _Target(draws, model.prior_precision, model.noise_variance, float(rec.noise_variance))
    gen = noise_source(rng).generator()
    burn = its // 2
    kept = its - burn
    keep_means = np.empty((m, kept, d))
    keep_covs = np.empty((m, kept, d, d))
    keep_w = np.empty((m, kept, d))
    keep_ld = np.empty((m, kept))
    sx_chol = np.linalg.cholesky(sx)
    sx_inv = np.linalg.inv(sx)
    logdet_sx = float(np.linalg.slogdet(sx)[1])
    lam, sig2, s2 = target.lam, target.sigma2, target.s2
    # over-dispersed starts: prior draws
    t = np.stack([_wishart_draw(float(n_rec), sx, gen) for _ in range(m)])
    lp_prior = np.array([_wishart_logpdf(x, n_rec, sx) for x in t])
    ll, mu, cov = np.empty(m), np.empty((m, d)), np.empty((m, d, d))
    for c in range(m):
        ll[c], mu[c], cov[c] = target_parts(t[c], target.wbar, target.dev, lam, sig2, s2)
    nu = float(max(n_rec, d + 2))
    accepted = np.zeros(m, dtype=np.int64)
    empty = (np.empty((m, 0, d)), np.empty((m, 0, d, d)), np.empty((m, 0, d)), np.empty((m, 0)))
    step = 0
    bar = Progress(m * its, "noise-aware regression MCMC", unit="step")
    while step < its:
        # burn-in in blocks of ADAPT steps, the random walk's nu tuned after each; the
        # kept half runs with nu fixed (a fixed, valid MH kernel)
        size = min(ADAPT, burn - step) if step < burn else its - step
        outs = empty if step < burn else (keep_means, keep_covs, keep_w, keep_ld)
        mh_steps(
            t,
            lp_prior,
            ll,
            mu,
            cov,
            float(n_rec),
            sx_chol,
            sx_inv,
            logdet_sx,
            nu,
            target.wbar,
            target.dev,
            lam,
            sig2,
            s2,
            gen.standard_normal((m, size, d, d)),
            gen.chisquare(float(n_rec) - np.arange(d), size=(m, size, d)),
            gen.chisquare(nu - np.arange(d), size=(m, size, d)),
            gen.random((m, size)),
            gen.standard_normal((m, size, d)),
            step,
            accepted,
            *outs,
        )
        if step < burn:
            rate = float(accepted.sum()) / (m * size)  # over both kinds of step
            nu = nu / 1.5 if rate > 0.4 else (nu * 1.5 if rate < 0.15 else nu)
            nu = max(nu, d + 2.0)
        accepted[:] = 0
        step += size
        bar.update(m * size)
    bar.close()
    series = np.concatenate([keep_w, keep_ld[:, :, None]], axis=2)
    names = [f"w[{i}]" for i in range(d)] + ["log det X'X"]
    diag = diagnose(series, names, what="noise-aware linear-regression posterior")
    means = keep_means.reshape(-1, d)
    covs = keep_covs.reshape(-1, d, d)
    post_mean = means.mean(axis=0)
    wb = model.weight_bound
    ball = 1.0 if wb is None else _ball_mass(post_mean, covs.mean(axis=0), wb, gen)
    return RegressionNoiseAwarePosterior(means, covs, keep_w.reshape(-1, d), diag, ball)


def _ball_mass(mean: np.ndarray, cov: np.ndarray, radius: float, gen: np.random.Generator) -> float:
    z = mean + gen.standard_normal((4000, mean.size)) @ np.linalg.cholesky(cov).T
    return float(np.mean(np.einsum("ij,ij->i", z, z) <= radius * radius))


register_noise_aware("sampling", BayesianLinearRegression)(regression_noise_aware)
