"""Noise-aware posteriors of SSP releases: the posterior given the noisy statistics.

Linear regression (Bernstein & Sheldon 2019, "Gibbs-SS-Noisy", known noise variance):
with v = (x, y), x ~ N(0, Sigma_x), y = x'w + N(0, sigma^2), the vector v is Gaussian
with covariance C(w, Sigma_x), and the upper triangle s of S = sum v v' is approximately
(central limit theorem) N(n vech C, n K(C)) with K from Isserlis' theorem,
Cov(v_i v_j, v_k v_l) = C_ik C_jl + C_il C_jk. The release is s~ = s + e. Gibbs sampler,
several chains vectorised, each step exact given the others:

1. s | w, Sigma_x, s~: Gaussian (prior N(n vech C, n K), noise N(0, diag omega)), drawn
   by Matheron's rule: one solve with K + diag omega, no inverse of K;
2. w | s: the conjugate Gaussian posterior from X'X (projected onto the PSD cone) and X'y;
3. Sigma_x | X'X ~ InvWishart(nu0 + n, Psi0 + X'X) (prior IW(d + 2, (B^2 / 3) I));
4. Laplace noise only: e_k ~ N(0, omega_k), omega_k ~ Exp(mean 2 b^2) is Laplace(b), and
   1 / omega_k | e_k ~ InverseGaussian(1 / (b |e_k|), 1 / b^2) (Park & Casella 2008);
   Gaussian noise: omega fixed at the noise variance.

y'y enters only through step 1 (it informs the feature and residual scale). The posterior
of w is the Rao-Blackwellised mixture of the Gaussians of step 2 over the kept steps,
with split R-hat/ESS of the weights and a RuntimeWarning when mixing is poor.
Approximations, stated: the CLT for s and the zero-mean Gaussian feature model.

Logistic regression (PASS-GLM statistics): analytic, no MCMC. The approximate posterior
given exact statistics is N((lambda I + H)^-1 a1 t1, (lambda I + H)^-1), H = -2 a2 T2,
i.e. a Gaussian pseudo-observation w^ = H^-1 a1 t1 ~ N(w, H^-1). The noise moves
w^ by zeta = H^-1 (a1 e1 + 2 a2 E w) to first order (e1, E the noise on t1, T2), so the
noise-aware pseudo-likelihood is N(w^~; w, H^-1 + H^-1 N H^-1), N = a1^2 diag(Var e1) +
4 a2^2 Cov(E w), whose precision is H (H + N)^-1 H: the noise covariance is added to the
approximate likelihood analytically (delta method), with Cov(E w) averaged over the
posterior (fixed point from the naive posterior). It integrates over the noise, not over
the error of the quadratic approximation.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy import special

from dpbayes.display import PosteriorDisplay
from dpbayes.models.linear_regression import BayesianLinearRegression, MultivariateNormal
from dpbayes.models.logistic_regression import BayesianLogisticRegression, psd_projection
from dpbayes.privacy.noise import noise_source
from dpbayes.privacy.validation import check_int, check_probability
from dpbayes.release.base import Release, register_noise_aware
from dpbayes.release.mcmc import Diagnostics, diagnose, diagnostics_rows
from dpbayes.release.ssp.mechanism import entry_noise_sd_from
from dpbayes.release.ssp.record import SspLinearRecord, SspLogisticRecord

__all__ = [
    "LogisticNoiseAwarePosterior",
    "SSPNoiseAwarePosterior",
    "linear_ssp_noise_aware",
    "logistic_ssp_noise_aware",
]


@dataclass(frozen=True, eq=False, repr=False)
class SSPNoiseAwarePosterior(PosteriorDisplay):
    """sum_s N(means[s], covs[s]) / S over the kept Gibbs steps; ``draws`` are w draws."""

    means: np.ndarray
    covs: np.ndarray
    draws: np.ndarray
    diagnostics: Diagnostics
    family: ClassVar[str] = "ssp-noise-aware"

    def _display_extra(self) -> list[tuple[str, str]]:
        return diagnostics_rows(self.diagnostics)

    def mean(self) -> np.ndarray:
        return np.asarray(self.means.mean(axis=0))

    def cov(self) -> np.ndarray:
        dev = self.means - self.mean()
        return np.asarray(self.covs.mean(axis=0) + dev.T @ dev / self.means.shape[0])

    def var(self) -> np.ndarray:
        return np.diag(self.cov()).copy()

    def std(self) -> np.ndarray:
        return np.sqrt(self.var())

    def cdf(self, x: Any, i: int) -> Any:
        """P(w_i <= x): the mixture of the Gaussian marginals (vectorised over x)."""
        sd = np.sqrt(self.covs[:, i, i])
        xa = np.asarray(x, dtype=float)
        z = (xa[..., None] - self.means[:, i]) / sd
        return special.ndtr(z).mean(axis=-1)

    def ppf(self, q: Any, i: int) -> np.ndarray:
        """Quantiles of w_i by bisection on the mixture CDF (to 1e-10 of the range)."""
        qa = np.atleast_1d(np.asarray(q, dtype=float))
        sd = np.sqrt(self.covs[:, i, i])
        lo = np.full(qa.shape, float(np.min(self.means[:, i] - 10 * sd)))
        hi = np.full(qa.shape, float(np.max(self.means[:, i] + 10 * sd)))
        for _ in range(60):
            mid = (lo + hi) / 2
            below = self.cdf(mid, i) < qa
            lo = np.where(below, mid, lo)
            hi = np.where(below, hi, mid)
        return np.asarray((lo + hi) / 2)

    def interval(self, level: float = 0.95) -> np.ndarray:
        """Central marginal credible intervals, shape (d, 2)."""
        lvl = check_probability(level, "level", open_interval=True)
        qs = np.array([(1 - lvl) / 2, (1 + lvl) / 2])
        return np.stack([self.ppf(qs, i) for i in range(self.means.shape[1])])

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "mean": self.mean().tolist(),
            "cov": self.cov().tolist(),
            "interval90": self.interval(0.9).tolist(),
            "diagnostics": self.diagnostics.to_dict(),
        }


@dataclass(frozen=True, eq=False, repr=False)
class LogisticNoiseAwarePosterior(MultivariateNormal):
    """N(mean, cov) of the weights given noisy PASS-GLM statistics (module docstring)."""

    iterations: int = 0
    family = "logistic-ssp-noise-aware"

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "family": self.family, "iterations": self.iterations}


def _noise_sd(rec: SspLinearRecord | SspLogisticRecord, m: int) -> tuple[str, np.ndarray]:
    return rec.noise, entry_noise_sd_from(rec, m)


def _batch_chol_sample(prec: np.ndarray, lin: np.ndarray, z: np.ndarray) -> tuple[Any, Any]:
    """Draws of N(prec^-1 lin, prec^-1) for a stack of precisions; also the means."""
    chol = np.linalg.cholesky(prec)
    mean = np.linalg.solve(prec, lin[..., None])[..., 0]
    dev = np.linalg.solve(np.swapaxes(chol, -1, -2), z[..., None])[..., 0]
    return mean + dev, mean


_HALF_SQRT2 = math.sqrt(0.5)


@functools.lru_cache(maxsize=16)
def _isserlis_index(m: int) -> tuple[np.ndarray, ...]:
    """Flat indices into an m x m matrix C giving, over pairs of upper-triangle entries
    (i, j), (k, l), the matrices C_ik, C_jl, C_il, C_jk (p x p each)."""
    rows, cols = np.triu_indices(m)
    ri, ci = rows[:, None], cols[:, None]
    rj, cj = rows[None, :], cols[None, :]
    return ri * m + rj, ci * m + cj, ri * m + cj, ci * m + rj


def _sample_statistics(
    c: np.ndarray,
    n: int,
    s_obs: np.ndarray,
    omega: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    gen: np.random.Generator,
) -> np.ndarray:
    """Draws of s | s~ for a stack of covariances c (chains, m, m): prior
    N(n vech C, n K(C)), noise s~ - s ~ N(0, diag omega) (step 1 of the module docstring).

    By Matheron's rule, s = s0 + K (K + Omega)^-1 (s~ - s0 - e0) with s0 from the prior and
    e0 ~ N(0, Omega) is an exact draw of the conditional, so only K + Omega is factorised.
    The prior draw needs no factor of K: with L L' = C and G symmetric with N(0, 2)
    diagonal and N(0, 1) off-diagonal entries, Cov((L G L')_ij, (L G L')_kl) =
    C_ik C_jl + C_il C_jk = K_(ij),(kl) (Isserlis), so s0 = n vech C + sqrt(n) vech(L G L').
    """
    nc, m, _ = c.shape
    p = rows.size
    rr, cc, rc, cr = _isserlis_index(m)
    flat = c.reshape(nc, m * m)
    k = n * (flat[:, rr] * flat[:, cc] + flat[:, rc] * flat[:, cr])
    lc = np.linalg.cholesky(c)
    g = np.zeros((nc, m, m))
    g[:, rows, cols] = gen.standard_normal((nc, p)) * np.where(rows == cols, _HALF_SQRT2, 1.0)
    g = g + np.swapaxes(g, 1, 2)  # off-diagonal N(0, 1), diagonal sqrt(2) N(0, 1)
    s0 = n * c + math.sqrt(n) * (lc @ g @ np.swapaxes(lc, 1, 2))
    e0 = np.sqrt(omega) * gen.standard_normal((nc, p))
    prior = s0[:, rows, cols]
    kw = k + omega[:, None, :] * np.eye(p)
    return np.asarray(prior + (k @ np.linalg.solve(kw, (s_obs - prior - e0)[..., None]))[..., 0])


def _psd_batch(a: np.ndarray) -> np.ndarray:
    vals, vecs = np.linalg.eigh((a + np.swapaxes(a, -1, -2)) / 2)
    return np.asarray((vecs * np.maximum(vals, 0.0)[..., None, :]) @ np.swapaxes(vecs, -1, -2))


def linear_ssp_noise_aware(
    rel: Release,
    *,
    n: int | None = None,
    iterations: int = 1000,
    chains: int = 4,
    rng: Any = None,
) -> SSPNoiseAwarePosterior:
    """p(w | noisy X'X, X'y, y'y) of an ``ssp`` linear-regression release (module doc).

    ``n``: number of records (default: the release's public n; required under add/remove);
    ``iterations``: Gibbs steps per chain (the first half burn-in); ``chains`` >= 2;
    ``rng`` seeds the MCMC (inference draws only, never privacy noise).
    """
    model: BayesianLinearRegression = rel.model
    rec = SspLinearRecord.of(rel)
    n_rec = rec.n if n is None else n
    if n_rec is None:
        raise ValueError(
            "n must be given: the release does not publish the number of records "
            "(add/remove neighbours keep it private)"
        )
    n_rec = check_int(n_rec, "n", minimum=1)
    its = check_int(iterations, "iterations", minimum=40)
    nc = check_int(chains, "chains", minimum=2)
    xtx = np.asarray(rel.released["xtx"], dtype=float)
    d = xtx.shape[0]
    m = d + 1
    obs = np.zeros((m, m))
    obs[:d, :d] = xtx
    obs[:d, d] = obs[d, :d] = np.asarray(rel.released["xty"], dtype=float)
    obs[d, d] = float(rel.released["yty"])
    rows, cols = np.triu_indices(m)
    s_obs = obs[rows, cols]
    kind, sd = _noise_sd(rec, m)
    b = sd[rows, cols] / math.sqrt(2.0)  # Laplace scales (used for Laplace noise only)
    lam, sig2 = model.prior_precision, model.noise_variance
    bx = float(rec.bounds[0])
    nu0 = d + 2.0
    psi0 = (bx * bx / 3.0) * np.eye(d)
    gen = noise_source(rng).generator()
    p = rows.size
    theta = gen.standard_normal((nc, d)) / math.sqrt(lam)
    sx = np.broadcast_to(psi0 / (nu0 - d - 1.0), (nc, d, d)).copy()
    omega = np.broadcast_to(2.0 * b * b if kind == "laplace" else sd[rows, cols] ** 2, (nc, p))
    omega = omega.copy()
    burn = its // 2
    kept = its - burn
    keep_means = np.empty((nc, kept, d))
    keep_covs = np.empty((nc, kept, d, d))
    keep_w = np.empty((nc, kept, d))
    keep_tr = np.empty((nc, kept))
    eye_d = np.eye(d)
    for it in range(its):
        # 1. s | w, Sigma_x, omega: CLT prior N(n vech C, n K(C)) times the noise
        sxt = sx @ theta[..., None]
        c = np.empty((nc, m, m))
        c[:, :d, :d] = sx
        c[:, :d, d] = c[:, d, :d] = sxt[..., 0]
        c[:, d, d] = (theta[:, None, :] @ sxt)[:, 0, 0] + sig2
        s = _sample_statistics(c, n_rec, s_obs, omega, rows, cols, gen)
        smat = np.empty((nc, m, m))
        smat[:, rows, cols] = s
        smat[:, cols, rows] = s
        a = _psd_batch(smat[:, :d, :d])
        # 2. w | X'X, X'y: conjugate
        wprec = lam * eye_d + a / sig2
        theta, wmean = _batch_chol_sample(
            wprec, smat[:, :d, d] / sig2, gen.standard_normal((nc, d))
        )
        # 3. Sigma_x | X'X: inverse Wishart by Bartlett's decomposition
        scale = np.linalg.inv(psi0 + a)
        lchol = np.linalg.cholesky((scale + np.swapaxes(scale, 1, 2)) / 2)
        bart = np.tril(gen.standard_normal((nc, d, d)), -1)
        diag = np.sqrt(gen.chisquare(nu0 + n_rec - np.arange(d), size=(nc, d)))
        bart[:, np.arange(d), np.arange(d)] = diag
        la = lchol @ bart
        sx = np.linalg.inv(la @ np.swapaxes(la, 1, 2))
        sx = (sx + np.swapaxes(sx, 1, 2)) / 2
        # 4. omega | e (Laplace noise as a scale mixture of normals)
        if kind == "laplace":
            e = np.maximum(np.abs(s_obs - s), 1e-12)
            omega = 1.0 / gen.wald(1.0 / (b * e), 1.0 / (b * b))
        if it >= burn:
            t = it - burn
            keep_means[:, t] = wmean
            keep_covs[:, t] = np.linalg.inv(wprec)
            keep_w[:, t] = theta
            keep_tr[:, t] = np.trace(a, axis1=1, axis2=2)
    series = np.concatenate([keep_w, keep_tr[:, :, None]], axis=2)
    names = [f"w[{i}]" for i in range(d)] + ["tr X'X"]
    diag_ = diagnose(series, names, what="noise-aware SSP linear-regression posterior")
    covs = keep_covs.reshape(-1, d, d)
    return SSPNoiseAwarePosterior(
        keep_means.reshape(-1, d),
        (covs + np.swapaxes(covs, 1, 2)) / 2,
        keep_w.reshape(-1, d),
        diag_,
    )


def logistic_ssp_noise_aware(
    rel: Release, *, iterations: int = 50, tol: float = 1e-10
) -> LogisticNoiseAwarePosterior:
    """p(w | noisy t1, T2) of an ``ssp`` logistic release: the delta-method posterior of
    the module docstring, its Cov(E w) term iterated to a fixed point from the naive
    posterior (at most ``iterations`` steps, stopping at relative change ``tol``)."""
    model: BayesianLogisticRegression = rel.model
    its = check_int(iterations, "iterations", minimum=1)
    t2 = np.asarray(rel.released["xtx"], dtype=float)
    t1 = np.asarray(rel.released["t1"], dtype=float)
    d = t1.size
    rec = SspLogisticRecord.of(rel)
    _, a1, a2 = np.asarray(rec.coefficients, dtype=float)
    _, sd = _noise_sd(rec, d + 1)
    v2 = sd[:d, :d] ** 2  # variance of each noisy entry of T2
    v1 = sd[:d, d] ** 2  # ... and of t1
    lam = model.prior_precision
    h = -2.0 * a2 * psd_projection(t2)
    naive = rel.posterior
    g = naive.cov + np.outer(naive.mean_, naive.mean_)
    mean, cov = naive.mean_, naive.cov
    done = 0
    for done in range(1, its + 1):  # noqa: B007  (the count is reported)
        cov_ew = g * v2
        np.fill_diagonal(cov_ew, v2 @ np.diag(g))
        noise = a1 * a1 * np.diag(v1) + 4.0 * a2 * a2 * cov_ew
        hn = np.linalg.solve(h + noise, np.column_stack([h, a1 * t1]))
        info = h @ hn[:, :d]
        prec = lam * np.eye(d) + (info + info.T) / 2
        new_cov = np.linalg.inv(prec)
        new_cov = (new_cov + new_cov.T) / 2
        new_mean = new_cov @ (h @ hn[:, d])
        change = np.max(np.abs(new_mean - mean)) + np.max(np.abs(new_cov - cov))
        mean, cov = new_mean, new_cov
        g = cov + np.outer(mean, mean)
        if change <= tol * (1.0 + np.max(np.abs(cov))):
            break
    return LogisticNoiseAwarePosterior(mean_=mean, cov=cov, iterations=done)


register_noise_aware("ssp", BayesianLinearRegression)(linear_ssp_noise_aware)
register_noise_aware("ssp", BayesianLogisticRegression)(logistic_ssp_noise_aware)
