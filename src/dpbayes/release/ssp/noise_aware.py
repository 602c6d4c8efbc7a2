"""Noise-aware posteriors of SSP releases: the posterior given the noisy statistics.

Linear regression (Bernstein & Sheldon 2019, "Gibbs-SS-Noisy", known noise variance):
with v = (x, y), x ~ N(0, Sigma_x), y = x'w + N(0, sigma^2), the vector v is Gaussian
with covariance C(w, Sigma_x), and the upper triangle s of S = sum v v' is approximately
(central limit theorem) N(n vech C, n K(C)) with K from Isserlis' theorem,
Cov(v_i v_j, v_k v_l) = C_ik C_jl + C_il C_jk. The release is s~ = s + e. Gibbs sampler,
several chains, each step an exact draw given the others or a
Metropolis-Hastings step that leaves that conditional invariant (steps 1-4 compiled,
one call per block of up to 25 Gibbs steps for all chains:
:func:`dpbayes.release.ssp.kernels.gibbs_block`, given the normals and uniforms drawn
here from the chain's generator):

0. (optional, ``collapsed_moves=True``) (w, Sigma_x) | omega, s~ with s integrated out
   (s~ ~ N(n vech C, n K(C) + diag omega)): Metropolis-Hastings moves of w and of the
   feature scales (:class:`_CollapsedMoves`), then step 1 draws s afresh, a partially
   collapsed Gibbs step. Without step 0 or 1b, w, Sigma_x and s nearly determine one
   another when the noise dominates and the chains crawl;
1. s | w, Sigma_x, s~: Gaussian (prior N(n vech C, n K), noise N(0, diag omega)), drawn
   by Matheron's rule: one solve with K + diag omega, no inverse of K;
   1b. (w, Sigma_x) | G, omega, s~ in the non-centred parameterisation
   s = n vech C + sqrt(n) vech(L G L'), L = chol(C), G standard and independent of
   (w, Sigma_x): Metropolis-within-Gibbs moves of w, of each entry of Sigma_x and of each
   feature's scale with its weight (:class:`_NoncentredMoves`), then s from the new
   (w, Sigma_x) and the same G. These move (w, Sigma_x) far when the noise dominates,
   where steps 2-3 (centred: given s) barely move them; step 0 alone mixes slowly at
   d = 10 because the 55 entries of Sigma_x move only through steps 1-3;
2. w | s: the conjugate Gaussian posterior from X'X (projected onto the PSD cone) and X'y;
3. Sigma_x | X'X: under the prior ``feature_prior="inverse-wishart"``, IW(d + 2,
   (B^2 / 3) I), the conjugate InvWishart(nu0 + n, Psi0 + X'X);
   3b. under the default ``"bounded"`` prior, uniform feature variances Sigma_jj on
   [0, B^2] (clipped features have E x_j^2 <= B^2) with tr Sigma_x <= R_x^2 when the
   release has a row-norm bound, and a uniform correlation matrix: density
   prod_j Sigma_jj^(-(d-1)/2) on that set. One independence Metropolis-Hastings step
   with the conjugate draw of 3 as proposal, accepted with the ratio of the two priors'
   densities (:class:`FeatureCovariancePrior`). The IW prior puts most of its mass on
   small variances (its marginal mode for Sigma_jj is B^2 / 15 at d = 2), which widens
   the intervals of w when the noise on X'X leaves Sigma_x poorly determined;
4. Laplace noise only: e_k ~ N(0, omega_k), omega_k ~ Exp(mean 2 b^2) is Laplace(b), and
   1 / omega_k | e_k ~ InverseGaussian(1 / (b |e_k|), 1 / b^2) (Park & Casella 2008);
   Gaussian noise: omega fixed at the noise variance.

y'y enters through steps 0 and 1 (it informs the feature and residual scale). The posterior
of w is the Rao-Blackwellised mixture of the Gaussians of step 2 over the kept steps,
with split R-hat/ESS of the weights and a RuntimeWarning when mixing is poor.
Approximations, stated: the CLT for s (steps 0 and 1; steps 2 and 3 use the exact
likelihood of the statistics) and the zero-mean Gaussian feature model.

Logistic regression (PASS-GLM statistics t1 = sum y x, T2 = sum x x', y in {-1, +1}):
analytic, no MCMC. Both likelihoods below read t1 as a Gaussian observation
t1 ~ N(c T2 w, kappa T2), linear in w given the slope c; they differ in c and kappa.

- ``likelihood="adaptive"`` (the default ``"auto"`` when the number of records n is
  known: public under substitute, or given). E[y x | x] = x (2 sigmoid(x'w) - 1), and for
  x ~ N(0, Sigma) Stein's lemma gives E[y x] = c(w) Sigma w with
  c(w) = E[2 sigmoid'(m)], m = x'w ~ N(0, w' Sigma w): the link's average slope at the
  margins the data have under w (:func:`margin_slope`; 1/2 at w = 0, about
  2 / sqrt(2 pi v) for a large margin variance v). With y^2 = 1, Cov(y x) =
  E[x x'] - E[y x] E[y x]' ~ Sigma, so t1 ~ N(c T2 w, T2) (kappa = 1), Sigma = T2 / n.
  The mean is exact in expectation under a zero-mean Gaussian design and right to first
  order in w for any design (c(0) = 1/2 is the Taylor slope of log sigmoid at 0).
- ``likelihood="pass-glm"`` (``"auto"`` when n is private): the likelihood of the PASS-GLM
  polynomial a0 + a1 s + a2 s^2
  itself (the naive posterior's): a1 t1 ~ N(H w, H), H = -2 a2 T2, i.e. the fixed slope
  c = -2 a2 / a1 and kappa = -2 a2 / a1^2. Its slope is the polynomial's fit over the
  whole interval [-R, R], not at the data's margins: on the simulated data sets of
  ``benchmarks/bench_glm.py --only coverage`` its 90% intervals from exact statistics
  cover 0.856, where the logistic posterior itself covers 0.897.

The noise (e1, E on t1, T2) moves t1~ - c T2~ w by e1 - c E w to first order, so the
noise-aware likelihood is N(t1~; c T2 w, kappa T2 + N), N = diag(Var e1) + c^2 Cov(E w):
the noise covariance is added analytically (delta method). Given c, the posterior is
Gaussian with precision lambda I + c^2 T2 (kappa T2 + N)^-1 T2 and mean
Cov c T2 (kappa T2 + N)^-1 t1~ (T2 projected onto the PSD cone). Cov(E w) is averaged
over the posterior and, for the adaptive likelihood, c is taken at the posterior's margin
variance v = E[w' T2 w] / n = (m' T2 m + tr(T2 Cov)) / n, both by a fixed point from the
naive posterior. The adaptive likelihood corrects the approximation's slope; it assumes a Gaussian
design for the spread of the margins and integrates over the noise, not over that
assumption.
"""

from __future__ import annotations

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
from dpbayes.release.mcmc import (
    ESS_MIN,
    RHAT_MAX,
    Diagnostics,
    diagnose,
    diagnostics_rows,
    measure_mixing,
)
from dpbayes.release.ssp.kernels import (
    collapsed_loglik_stack,
    covariance_stack,
    gibbs_block,
    joint_covariance_into,
)
from dpbayes.release.ssp.mechanism import entry_noise_sd_from
from dpbayes.release.ssp.record import SspLinearRecord, SspLogisticRecord

__all__ = [
    "LOGISTIC_LIKELIHOODS",
    "FeatureCovariancePrior",
    "LogisticNoiseAwarePosterior",
    "SSPNoiseAwarePosterior",
    "linear_ssp_noise_aware",
    "logistic_ssp_noise_aware",
    "margin_slope",
]

# iterations="auto": the first run's length and the cap of its extensions (4 chains at
# d = 10: about 0.9 s per 1,000 steps)
AUTO_FIRST_ITERATIONS = 1000
AUTO_MAX_ITERATIONS = 4000


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
    """N(mean, cov) of the weights given noisy PASS-GLM statistics (module docstring):
    ``likelihood`` the one used, ``slope`` its c at the fixed point."""

    iterations: int = 0
    likelihood: str = "adaptive"
    slope: float = 0.5
    family = "logistic-ssp-noise-aware"

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "family": self.family,
            "iterations": self.iterations,
            "likelihood": self.likelihood,
            "slope": self.slope,
        }


def _noise_sd(rec: SspLinearRecord | SspLogisticRecord, m: int) -> tuple[str, np.ndarray]:
    return rec.noise, entry_noise_sd_from(rec, m)


def _joint_covariance(sx: np.ndarray, theta: np.ndarray, sig2: float) -> np.ndarray:
    """C = Cov(x, y) for x ~ N(0, Sigma_x), y = x'w + N(0, sig2), stacked over chains
    (:func:`dpbayes.release.ssp.kernels.joint_covariance_into`, chain by chain)."""
    nc, d, _ = sx.shape
    c = np.empty((nc, d + 1, d + 1))
    sxc = np.ascontiguousarray(sx, dtype=float)
    wc = np.ascontiguousarray(theta, dtype=float)
    for b in range(nc):
        joint_covariance_into(sxc[b], wc[b], float(sig2), c[b])
    return c


@dataclass(frozen=True)
class _Observed:
    """The release as the sampler sees it: n, the noisy upper triangle s~ of S and the
    (row, column) of each of its entries."""

    n: int
    s_obs: np.ndarray
    rows: np.ndarray
    cols: np.ndarray

    @property
    def pos(self) -> np.ndarray:
        """pos[i, j]: the index in s of entry (i, j) of S (either triangle)."""
        m = int(self.rows.max()) + 1
        pos = np.zeros((m, m), dtype=np.int64)
        pos[self.rows, self.cols] = pos[self.cols, self.rows] = np.arange(self.rows.size)
        return pos


def _collapsed_loglik(
    c: np.ndarray, obs: _Observed, omega: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """log N(s~; n vech C, n K(C) + diag omega): the likelihood of the release with the
    statistics s integrated out (CLT model), per chain, up to a constant; also n K(C) and
    the Cholesky factor of n K(C) + diag omega, which step 1 reuses (compiled:
    :func:`dpbayes.release.ssp.kernels.collapsed_loglik_stack`)."""
    ll, k, chol = collapsed_loglik_stack(
        np.ascontiguousarray(c, dtype=float),
        float(obs.n),
        obs.s_obs,
        obs.rows,
        obs.cols,
        np.ascontiguousarray(omega, dtype=float),
    )
    return np.asarray(ll), np.asarray(k), np.asarray(chol)


@dataclass(frozen=True)
class FeatureCovariancePrior:
    """The prior of Sigma_x and its Gibbs step (steps 3 and 3b of the module doc).

    ``kind="inverse-wishart"``: IW(nu0, psi0), drawn from its conjugate conditional.
    ``kind="bounded"``: density prod_j Sigma_jj^(-(d-1)/2) on {Sigma_jj <= var_max,
    tr Sigma <= tr_max}, i.e. independent uniform variances on [0, var_max] and a
    uniform (LKJ(1)) correlation matrix, restricted by the trace bound: what the public
    bounds say about the second moments of clipped features and nothing more. Its step
    is independence Metropolis-Hastings with the IW(nu0, psi0) conditional as proposal:
    the acceptance ratio is the ratio of prior densities (bounded / IW) at the proposal
    and at the current value.
    """

    kind: str
    nu0: float
    psi0: np.ndarray
    var_max: float
    tr_max: float

    def _log_iw(self, sx: np.ndarray) -> np.ndarray:
        """log IW(sx; nu0, psi0), up to a constant."""
        d = sx.shape[-1]
        _, logdet = np.linalg.slogdet(sx)
        tr_psi_inv = np.trace(self.psi0 @ np.linalg.inv(sx), axis1=-2, axis2=-1)
        return np.asarray(-0.5 * (self.nu0 + d + 1) * logdet - 0.5 * tr_psi_inv)

    def _log_bounded(self, sx: np.ndarray) -> np.ndarray:
        """log of the bounded prior, up to a constant (-inf outside the bounds)."""
        d = sx.shape[-1]
        diag = np.diagonal(sx, axis1=-2, axis2=-1)
        inside = (diag <= self.var_max).all(axis=-1) & (diag.sum(axis=-1) <= self.tr_max)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = -0.5 * (d - 1) * np.log(diag).sum(axis=-1)
        return np.asarray(np.where(inside, out, -np.inf))

    def log_ratio(self, sx: np.ndarray) -> np.ndarray:
        """log(bounded prior / IW prior) at a stack of covariances, up to a constant
        (-inf outside the bounds)."""
        return np.asarray(self._log_bounded(sx) - self._log_iw(sx))

    def log_density(self, sx: np.ndarray) -> np.ndarray:
        """The prior's log density at a stack of covariances, up to a constant."""
        if self.kind == "inverse-wishart":
            return self._log_iw(sx)
        return self._log_bounded(sx)

    @property
    def code(self) -> int:
        """The kind as the compiled kernels take it: 0 bounded, 1 inverse-Wishart."""
        return 0 if self.kind == "bounded" else 1

    def draws(
        self, n: int, shape: tuple[int, ...], d: int, gen: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The random inputs of steps of shape ``shape`` (chains, or steps x chains):
        Bartlett's normals and chi-square draws (nu0 + n - j degrees of freedom) of the
        IW(nu0 + n, psi0 + X'X) proposal and, for the bounded prior, the uniforms of its
        acceptance (ones otherwise, unused)."""
        z_b = gen.standard_normal((*shape, d, d))
        chi2 = gen.chisquare(self.nu0 + n - np.arange(d), size=(*shape, d))
        u = gen.random(shape) if self.kind == "bounded" else np.ones(shape)
        return z_b, chi2, u

    def step(self, a: np.ndarray, n: int, sx: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        """One Gibbs step of Sigma_x given X'X = a (stacks over chains), from sx
        (compiled: :func:`dpbayes.release.ssp.kernels.covariance_draw`)."""
        nc, d, _ = a.shape
        z_b, chi2, u = self.draws(n, (nc,), d, gen)
        out = np.array(sx, dtype=float, order="C")
        covariance_stack(
            np.ascontiguousarray(a, dtype=float), float(n), out, self.code, self.var_max,
            self.tr_max, self.nu0, np.ascontiguousarray(self.psi0, dtype=float), z_b, chi2, u,
        )  # fmt: skip
        return out


@dataclass(frozen=True)
class _Setting:
    """What every move of the linear sampler is given: the number of features d, the prior
    precision of w, the noise variance, the release, the prior of Sigma_x and the number
    of burn-in steps (the proposals adapt during these only)."""

    d: int
    lam: float
    sig2: float
    obs: _Observed
    cov_prior: FeatureCovariancePrior
    burn: int


class _CollapsedMoves:
    """Step 0 of the linear Gibbs sampler: Metropolis-Hastings moves of w and of the
    feature scales with the statistics s integrated out, i.e. on the target
    p(w) p(Sigma_x) N(s~; n vech C, n K(C) + diag omega) given omega (the CLT model of
    step 1). Given s, w and Sigma_x are nearly determined by each other when the noise
    dominates (X'y = X'X w, X'X ~ n Sigma_x), so the Gibbs steps alone move them slowly;
    these moves do not condition on s. Drawing (w, Sigma_x) from a kernel that leaves
    p(w, Sigma_x | omega, s~) invariant and then s from p(s | w, Sigma_x, omega) (step 1)
    is a partially collapsed Gibbs step (van Dyk & Park 2008).

    (a) w' = w + scale_w L z, z ~ N(0, I) (symmetric); (b) Sigma_x' = D Sigma_x D,
    D = diag(exp(delta)), delta ~ N(0, scale_s^2 I): the map has Jacobian
    prod_j D_jj^(d+1) on symmetric matrices, which enters the acceptance ratio. L and the
    scales adapt during burn-in only (L L' the covariance of the burn-in w draws, the
    scales towards acceptance 0.3) and are fixed afterwards, so the kept steps are a
    Markov chain with the posterior as its invariant law.
    """

    ADAPT_EVERY = 25
    TARGET = 0.3

    def __init__(self, setting: _Setting) -> None:
        d = setting.d
        self.d, self.lam, self.sig2, self.obs = d, setting.lam, setting.sig2, setting.obs
        self.cov_prior, self.burn = setting.cov_prior, setting.burn
        self.chol_w = np.eye(d) / math.sqrt(self.lam)
        self.log_scale_w = math.log(0.5 / math.sqrt(d))
        self.log_scale_s = math.log(0.1)
        self.accepted = np.zeros(2)
        self.tried = 0
        self.history: list[np.ndarray] = []

    def _loglik(
        self, sx: np.ndarray, theta: np.ndarray, omega: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        c = _joint_covariance(sx, theta, self.sig2)
        return _collapsed_loglik(c, self.obs, omega)

    def step(
        self,
        it: int,
        theta: np.ndarray,
        sx: np.ndarray,
        omega: np.ndarray,
        gen: np.random.Generator,
    ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """One move of w, then one of the feature scales; also n K(C) and the Cholesky
        factor of n K(C) + diag omega at the state returned (for step 1)."""
        nc, d = theta.shape
        ll, k, chol = self._loglik(sx, theta, omega)
        # (a) w
        step_w = gen.standard_normal((nc, d)) @ self.chol_w.T
        prop = theta + math.exp(self.log_scale_w) * step_w
        ll_prop, k_prop, chol_prop = self._loglik(sx, prop, omega)
        log_a = ll_prop - ll - 0.5 * self.lam * ((prop * prop).sum(1) - (theta * theta).sum(1))
        acc_w = np.log(gen.random(nc)) < log_a
        theta = np.where(acc_w[:, None], prop, theta)
        ll[acc_w], k[acc_w], chol[acc_w] = ll_prop[acc_w], k_prop[acc_w], chol_prop[acc_w]
        # (b) the feature scales
        delta = math.exp(self.log_scale_s) * gen.standard_normal((nc, d))
        dd = np.exp(delta)
        prop_s = sx * dd[:, :, None] * dd[:, None, :]
        lp_both = self.cov_prior.log_density(np.concatenate([prop_s, sx]))
        lp = lp_both[:nc] - lp_both[nc:]
        ll_prop, k_prop, chol_prop = self._loglik(prop_s, theta, omega)
        with np.errstate(invalid="ignore"):
            log_a = ll_prop - ll + lp + (d + 1) * delta.sum(1)
        acc_s = np.log(gen.random(nc)) < log_a
        sx = np.where(acc_s[:, None, None], prop_s, sx)
        k[acc_s], chol[acc_s] = k_prop[acc_s], chol_prop[acc_s]
        if it < self.burn:
            self.accepted += (acc_w.mean(), acc_s.mean())
            self.tried += 1
        return theta, sx, (k, chol)

    def record(self, it: int, theta: np.ndarray) -> None:
        """Adapt the proposals from the burn-in (never after it)."""
        if it >= self.burn:
            return
        self.history.append(theta.copy())
        if self.tried < self.ADAPT_EVERY:
            return
        rate_w, rate_s = self.accepted / self.tried
        self.log_scale_w += rate_w - self.TARGET
        self.log_scale_s += rate_s - self.TARGET
        self.accepted[:] = 0.0
        self.tried = 0
        draws = np.concatenate(self.history[len(self.history) // 2 :])
        if draws.shape[0] > 2 * self.d:
            cov = np.cov(draws.T).reshape(self.d, self.d)
            scale = float(np.trace(cov)) / self.d
            if scale > 0.0 and math.isfinite(scale):
                ridged = cov + 1e-9 * scale * np.eye(self.d)
                self.chol_w = np.asarray(np.linalg.cholesky(ridged), dtype=float)


class _NoncentredMoves:
    """Step 1b of the linear Gibbs sampler: moves of (w, Sigma_x) with the standardised
    statistics held fixed, the non-centred parameterisation of step 1's CLT model.

    With L = chol(C) and G = L^-1 (S - n C) L^-T / sqrt(n), G is symmetric with
    independent N(0, 2) diagonal and N(0, 1) off-diagonal entries whatever (w, Sigma_x)
    are (step 1's docstring), so (w, Sigma_x, G, omega) is a reparameterisation of the
    same joint law with a likelihood N(s~; s(w, Sigma_x, G), diag omega), s(w, Sigma_x, G) =
    vech(n C + sqrt(n) L G L'), and no Jacobian: the map G -> s is the linear map that
    carries N(0, K) to N(n vech C, n K(C)). Given G, moves of (w, Sigma_x) that leave
    p(w) p(Sigma_x) N(s~; s(w, Sigma_x, G), diag omega) invariant, followed by
    s = s(w, Sigma_x, G), leave the joint posterior invariant (Papaspiliopoulos, Roberts &
    Skold 2007 on centred and non-centred steps). When the noise dominates, G hardly
    constrains (w, Sigma_x), which is where the centred steps 2-3 crawl.

    The moves (compiled, :func:`dpbayes.release.ssp.kernels.noncentred_moves`):
    (a) w: the entries of S other than y'y are linear in w, so p(w) times their
    likelihood is an exact Gaussian; a draw from it is an independence proposal accepted
    on the y'y entry's likelihood ratio;
    (b) each entry of Sigma_x in turn by a symmetric Gaussian random walk (rejected
    outside the prior's support, which includes positive definiteness);
    (c) each feature's scale jointly with its weight: Sigma_x -> D Sigma_x D,
    w -> D^-1 w for D = diag(1, .., e^delta, .., 1), delta ~ N(0, h^2), which keeps
    w' Sigma_x w (so y'y) and moves along the ridge X'y = X'X w; Jacobian
    e^((d + 1) delta) e^(-delta).
    Each Gibbs step runs ``SWEEPS`` sweeps of (a)-(c) with the same G. The random-walk
    scales adapt towards acceptance 0.44 during burn-in only.
    """

    ADAPT_EVERY = 25
    TARGET = 0.44
    SWEEPS = 2  # per Gibbs step: at d = 10, 1.4x the time of one and 2-3x its ESS

    def __init__(self, setting: _Setting, start: float) -> None:
        d, obs = setting.d, setting.obs
        self.d, self.lam, self.sig, self.obs = d, setting.lam, math.sqrt(setting.sig2), obs
        self.cov_prior, self.burn = setting.cov_prior, setting.burn
        self.log_scale = np.full(d * (d + 1) // 2 + d, math.log(0.2 * start))
        self.log_scale[-d:] = math.log(0.1)
        self.accepted = np.zeros(self.log_scale.size)
        self.tried = 0

    def draws(
        self, steps: int, nc: int, gen: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The random inputs of the sweeps of ``steps`` Gibbs steps for nc chains, indexed
        [step, sweep, chain]: normals and uniforms of the w move, of the random walks and
        scale moves."""
        d, q, sw = self.d, self.log_scale.size, self.SWEEPS
        z_w = gen.standard_normal((steps, sw, nc, d))
        u_w = gen.random((steps, sw, nc))
        z_s = gen.standard_normal((steps, sw, nc, q))
        u_s = gen.random((steps, sw, nc, q))
        return z_w, u_w, z_s, u_s

    def adapt(self, it: int, steps: int, accepted: np.ndarray, nc: int) -> None:
        """Move the random-walk scales towards acceptance ``TARGET`` (burn-in only), from
        the acceptances of ``steps`` Gibbs steps from step ``it`` summed over chains, steps
        and sweeps. The caller's blocks of steps end at every multiple of
        ``ADAPT_EVERY`` and at the end of the burn-in, so the scales change where they
        would step by step."""
        if it >= self.burn:
            return
        self.accepted += accepted / (nc * self.SWEEPS)
        self.tried += steps
        if self.tried >= self.ADAPT_EVERY:
            self.log_scale += self.accepted / self.tried - self.TARGET
            self.accepted[:] = 0.0
            self.tried = 0


def _next_total(total: int, mixing: Diagnostics) -> int:
    """The next length of ``iterations="auto"`` chains that mix poorly at ``total`` steps:
    half as long again while an R-hat is above its bound; when only an ESS is short, the
    length at which the smallest ESS, growing in proportion to the kept draws, would reach
    1.1 x ``ESS_MIN`` (at least a tenth more, at most half again). Rounded up to a
    multiple of 100, so that the dropped first quarter is a whole number of steps."""
    grow = 1.5
    if mixing.max_rhat <= RHAT_MAX and mixing.min_ess > 0.0:
        grow = min(1.5, max(1.1, 1.1 * ESS_MIN / mixing.min_ess))
    return math.ceil(total * grow / 100.0) * 100


def linear_ssp_noise_aware(
    rel: Release,
    *,
    n: int | None = None,
    iterations: int | str = "auto",
    chains: int = 4,
    feature_prior: str = "bounded",
    collapsed_moves: bool = False,
    noncentred_moves: bool = True,
    rng: Any = None,
) -> SSPNoiseAwarePosterior:
    """p(w | noisy X'X, X'y, y'y) of an ``ssp`` linear-regression release (module doc).

    ``n``: number of records (default: the release's public n; required under add/remove);
    ``iterations``: Gibbs steps per chain (the first quarter warm-up, in which the proposals
    adapt; the rest kept), or ``"auto"`` (default): 1,000 steps, then the chains continue
    (the first quarter of all steps dropped) while max R-hat > 1.01 or min ESS < 400, up
    to ``AUTO_MAX_ITERATIONS``: by half their length again while R-hat is too high, else
    to the length the ESS asks for (:func:`_next_total`); ``chains`` >= 2;
    ``feature_prior``: the prior of the feature covariance Sigma_x, ``"bounded"`` (default;
    uniform feature variances within the public bounds, step 3b of the module doc) or
    ``"inverse-wishart"`` (IW(d + 2, (B^2 / 3) I), conjugate); ``collapsed_moves`` and
    ``noncentred_moves``: steps 0 and 1b of the module doc (default False and True: at
    d = 10 step 0 costs 15-40% more time per step than it gains in mixing; with both
    False the sampler is the plain Gibbs sampler of steps 1-4, which mixes far worse when
    the noise dominates); ``rng`` seeds the MCMC (inference draws only, never privacy
    noise).
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
    auto = isinstance(iterations, str)
    if auto and iterations != "auto":
        raise ValueError(f"iterations must be a positive integer or 'auto', got {iterations!r}")
    its = AUTO_FIRST_ITERATIONS if auto else check_int(iterations, "iterations", minimum=40)
    nc = check_int(chains, "chains", minimum=2)
    for name, flag in (
        ("collapsed_moves", collapsed_moves),
        ("noncentred_moves", noncentred_moves),
    ):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool, got {flag!r}")
    if feature_prior not in ("bounded", "inverse-wishart"):
        raise ValueError(
            f"feature_prior must be 'bounded' or 'inverse-wishart', got {feature_prior!r}"
        )
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
    gen = noise_source(rng).generator()
    eye_d = np.eye(d)
    p = rows.size
    theta = gen.standard_normal((nc, d)) / math.sqrt(lam)
    tr_max = min(d * bx * bx, rec.x_norm2 if rec.x_norm2 is not None else math.inf)
    cov_prior = FeatureCovariancePrior(
        feature_prior, d + 2.0, (bx * bx / 3.0) * eye_d, bx * bx, tr_max
    )
    start = min(bx * bx, tr_max / d) / 3.0  # inside the bounds: the IW prior's mean or less
    sx = np.broadcast_to(start * eye_d, (nc, d, d)).copy()
    omega = np.broadcast_to(2.0 * b * b if kind == "laplace" else sd[rows, cols] ** 2, (nc, p))
    omega = omega.copy()
    burn = its // 4  # warm-up: enough for the proposals to adapt (R-hat checks it)
    keep_means: list[np.ndarray] = []  # per step after the warm-up: (chains, ...) arrays
    keep_covs: list[np.ndarray] = []
    keep_w: list[np.ndarray] = []
    keep_tr: list[np.ndarray] = []
    obs_rel = _Observed(n_rec, s_obs, rows, cols)
    setting = _Setting(d, lam, sig2, obs_rel, cov_prior, burn)
    moves = _CollapsedMoves(setting)
    noncentred = _NoncentredMoves(setting, start) if noncentred_moves else None
    psi0 = np.ascontiguousarray(cov_prior.psi0, dtype=float)
    pos = obs_rel.pos  # entry (i, j) of S -> its index in s
    sweeps = noncentred.SWEEPS if noncentred is not None else 0
    q = d * (d + 1) // 2 + d
    scale_s = np.ones(q)
    lap_b = np.ascontiguousarray(b) if kind == "laplace" else np.empty(0)
    names = [f"w[{i}]" for i in range(d)] + ["tr X'X"]
    block = _NoncentredMoves.ADAPT_EVERY
    it, total = 0, its
    while True:
        while it < total:
            # a block of steps in one compiled call: up to the next multiple of
            # ADAPT_EVERY (where the proposals adapt) and not across the burn-in's end
            k = min(block - it % block, total - it)
            if it < burn:
                k = min(k, burn - it)
            # 0. (w, Sigma_x) | omega with s integrated out: Metropolis-Hastings moves,
            # step by step
            if collapsed_moves:
                k = 1
                theta, sx, _ = moves.step(it, theta, sx, omega, gen)
                theta = np.ascontiguousarray(theta, dtype=float)
                sx = np.ascontiguousarray(sx, dtype=float)
            # the random inputs of steps 1-4, in the order the steps use them
            z_g, z_e = gen.standard_normal((2, k, nc, p))
            if noncentred is not None:
                nc_draws = noncentred.draws(k, nc, gen)
                scale_s = np.exp(noncentred.log_scale)
            else:
                nc_draws = (
                    np.empty((0, 0, 0, 0)), np.empty((0, 0, 0)),
                    np.empty((0, 0, 0, 0)), np.empty((0, 0, 0, 0)),
                )  # fmt: skip
            z_theta = gen.standard_normal((k, nc, d))
            z_b, chi2, u_sx = cov_prior.draws(n_rec, (k, nc), d, gen)
            if kind == "laplace":
                z_ig, u_ig = gen.standard_normal((k, nc, p)), gen.random((k, nc, p))
            else:
                z_ig = u_ig = np.empty((0, 0, 0))
            accepted = np.zeros(q)
            w_blk, mean_blk = np.empty((nc, k, d)), np.empty((nc, k, d))
            cov_blk, tr_blk = np.empty((nc, k, d, d)), np.empty((nc, k))
            # 1. s | w, Sigma_x, omega (CLT prior N(n vech C, n K(C)) times the noise);
            # 1b. (w, Sigma_x) | G, omega (non-centred moves, then s = s(w, Sigma_x, G));
            # 2. w | X'X, X'y (conjugate); 3. Sigma_x | X'X; 4. omega | e (Laplace noise
            # as a scale mixture of normals): compiled, step by step and chain by chain
            gibbs_block(
                theta, sx, omega, s_obs, rows, cols, pos, float(n_rec), sig2, lam, sweeps,
                cov_prior.code, cov_prior.var_max, cov_prior.tr_max, cov_prior.nu0, psi0,
                scale_s, lap_b, z_g, z_e, *nc_draws, z_theta, z_b, chi2, u_sx, z_ig, u_ig,
                accepted, w_blk, mean_blk, cov_blk, tr_blk,
            )  # fmt: skip
            if noncentred is not None:
                noncentred.adapt(it, k, accepted, nc)
            if collapsed_moves:
                moves.record(it, theta)
            if it >= burn:
                keep_means.append(mean_blk)
                keep_covs.append(cov_blk)
                keep_w.append(w_blk)
                keep_tr.append(tr_blk)
            it += k
        first = total // 4 - burn  # the kept steps: all but the first quarter of all steps
        series = np.concatenate(
            [
                np.concatenate(keep_w, axis=1)[:, first:],
                np.concatenate(keep_tr, axis=1)[:, first:, None],
            ],
            axis=2,
        )
        if not auto or total >= AUTO_MAX_ITERATIONS:
            break
        mixing = measure_mixing(series, names)
        if mixing.ok:
            break
        # continue the chains (the proposals stay fixed after the warm-up)
        total = min(_next_total(total, mixing), AUTO_MAX_ITERATIONS)
    diag_ = diagnose(series, names, what="noise-aware SSP linear-regression posterior")
    means = np.concatenate(keep_means, axis=1)[:, first:]
    covs = np.concatenate(keep_covs, axis=1)[:, first:].reshape(-1, d, d)
    return SSPNoiseAwarePosterior(
        means.reshape(-1, d),
        (covs + np.swapaxes(covs, 1, 2)) / 2,
        series[:, :, :d].reshape(-1, d),
        diag_,
    )


LOGISTIC_LIKELIHOODS = ("auto", "adaptive", "pass-glm")
"""The likelihoods of the logistic noise-aware posterior (module docstring)."""


def margin_slope(v: float) -> float:
    """c(v) = E[2 sigmoid'(m)], m ~ N(0, v): the average slope of 2 sigmoid - 1 at margins
    of variance v >= 0 (1/2 at v = 0, decreasing, about 2 / sqrt(2 pi v) as v grows).
    Adaptive quadrature of the product of 2 sigmoid' (width about 1 in m) and the normal
    density (width sqrt(v)), over whichever variable the narrower factor has width about
    1 in: z = m / sqrt(v) for v < 1, m itself otherwise (2 sigmoid'(m) < 1e-17 beyond
    |m| = 40); each half split at 0, where both peak."""
    from scipy import integrate

    if not v > 0.0:
        return 0.5
    sd = math.sqrt(v)

    def slope(m: float) -> float:
        p = special.expit(m)
        return 2.0 * p * (1.0 - p)

    if sd < 1.0:

        def integrand(z: float) -> float:
            return slope(sd * z) * math.exp(-0.5 * z * z)

        scale = 1.0
    else:

        def integrand(z: float) -> float:
            return slope(z) * math.exp(-0.5 * (z / sd) ** 2)

        scale = sd
    total = 0.0
    for lo, hi in ((-40.0, 0.0), (0.0, 40.0)):
        part, _ = integrate.quad(integrand, lo, hi, limit=200, epsabs=0.0, epsrel=1e-13)
        total += part
    return total / (scale * math.sqrt(2.0 * math.pi))


def logistic_ssp_noise_aware(
    rel: Release,
    *,
    likelihood: str = "auto",
    n: int | None = None,
    iterations: int = 50,
    tol: float = 1e-10,
) -> LogisticNoiseAwarePosterior:
    """p(w | noisy t1, T2) of an ``ssp`` logistic release: the delta-method posterior of
    the module docstring with ``likelihood`` ``"adaptive"`` (the slope at the data's
    margins), ``"pass-glm"`` (the polynomial's fixed slope) or ``"auto"`` (default:
    adaptive when the number of records is known, else pass-glm; the posterior's
    ``likelihood`` says which), its Cov(E w) term (and the adaptive slope) iterated to a
    fixed point from the naive posterior (at most ``iterations`` steps, stopping at
    relative change ``tol``). ``n``: the number of records, which the adaptive slope
    needs (default: the release's public n; add/remove neighbours keep it private)."""
    model: BayesianLogisticRegression = rel.model
    if likelihood not in LOGISTIC_LIKELIHOODS:
        raise ValueError(
            f"likelihood must be one of {', '.join(map(repr, LOGISTIC_LIKELIHOODS))}, "
            f"got {likelihood!r}"
        )
    its = check_int(iterations, "iterations", minimum=1)
    rec = SspLogisticRecord.of(rel)
    n_rec = rec.n if n is None else n
    if likelihood == "auto":
        likelihood = "pass-glm" if n_rec is None else "adaptive"
    adaptive = likelihood == "adaptive"
    if adaptive:
        if n_rec is None:
            raise ValueError(
                "n must be given: the release does not publish the number of records "
                "(add/remove neighbours keep it private), or use likelihood='pass-glm'"
            )
        n_rec = check_int(n_rec, "n", minimum=1)
    t2 = np.asarray(rel.released["xtx"], dtype=float)
    t1 = np.asarray(rel.released["t1"], dtype=float)
    d = t1.size
    _, a1, a2 = np.asarray(rec.coefficients, dtype=float)
    _, sd = _noise_sd(rec, d + 1)
    v2 = sd[:d, :d] ** 2  # variance of each noisy entry of T2
    v1 = sd[:d, d] ** 2  # ... and of t1
    lam = model.prior_precision
    t2p = psd_projection(t2)
    kappa = 1.0 if adaptive else -2.0 * a2 / (a1 * a1)
    slope = -2.0 * a2 / a1
    naive = rel.posterior
    mean, cov = naive.mean_, naive.cov
    done = 0
    for done in range(1, its + 1):  # noqa: B007  (the count is reported)
        if adaptive:
            v = (mean @ t2p @ mean + np.sum(t2p * cov)) / n_rec
            slope = margin_slope(max(float(v), 0.0))
        with np.errstate(over="ignore", invalid="ignore"):
            g = cov + np.outer(mean, mean)
            cov_ew = g * v2
            np.fill_diagonal(cov_ew, v2 @ np.diag(g))
            noise = np.diag(v1) + slope * slope * cov_ew
        if not np.all(np.isfinite(noise)):
            # the noise's variance is beyond the doubles (eps ~ 1e-70 with a fixed prior):
            # its limit, where the statistics carry no information, is the prior (the
            # least squares below raised after the charge)
            mean, cov = np.zeros(d), np.eye(d) / lam
            break
        # least squares, not solve: at huge eps the noise term vanishes and the projected
        # T2 of a few records is singular (solve raised after the charge, on some data
        # sets only); the minimum-norm solution is the limit of the regularised one
        kn = np.linalg.lstsq(kappa * t2p + noise, np.column_stack([t2p, t1]), rcond=None)[0]
        info = t2p @ kn[:, :d]
        prec = lam * np.eye(d) + slope * slope * (info + info.T) / 2
        new_cov = np.linalg.inv(prec)
        new_cov = (new_cov + new_cov.T) / 2
        new_mean = new_cov @ (slope * (t2p @ kn[:, d]))
        change = np.max(np.abs(new_mean - mean)) + np.max(np.abs(new_cov - cov))
        mean, cov = new_mean, new_cov
        if change <= tol * (1.0 + np.max(np.abs(cov))):
            break
    return LogisticNoiseAwarePosterior(
        mean_=mean, cov=cov, iterations=done, likelihood=likelihood, slope=float(slope)
    )


register_noise_aware("ssp", BayesianLinearRegression)(linear_ssp_noise_aware)
register_noise_aware("ssp", BayesianLogisticRegression)(logistic_ssp_noise_aware)
