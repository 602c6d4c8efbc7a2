"""The known local mechanism Q(z | x) of paper 001, as a likelihood model that can also privatise.

Each class states the kernel Q of the Dirichlet-process mixture (its log-density
``loglik(z, x)``) and, for the built-in mechanisms, the exact conditional of a cluster
value given the Z's assigned to it (a mixture of truncated Normals; Appendix A of
Ayed, Battiston & Di Benedetto 2020). ``privatize`` delegates the release to
:mod:`dpbayes.privacy`, so the noise is floating-point-safe by default (``rng=None``)
and seeded only for simulation.

:class:`LocalLaplace` and :class:`LocalGaussian` describe a *local* mechanism (one
release per person, values clipped to [-r, r]) and its likelihood; each releases through
the central :class:`dpbayes.privacy.LaplaceMechanism` / :class:`~dpbayes.privacy.GaussianMechanism`
applied to one clipped value (sensitivity 2r).

The conditionals take ``tails``: True when the base measure N(mu, sigma^2) lives on the
real line (paper 001 as printed: two pieces beyond -r and r whose values the data do not
locate), False when it is restricted to [-r, r] (the law of clip(X), what the data
identify; :class:`~dpbayes.nonparametric.DPMixture`'s default).
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpbayes.data.exact import as_doubles
from dpbayes.nonparametric import kernels
from dpbayes.nonparametric.truncnorm import Intervals, log_diff_ndtr
from dpbayes.privacy import GaussianMechanism, Guarantee, LaplaceMechanism
from dpbayes.privacy.mechanisms import laplace_scale
from dpbayes.privacy.validation import check_array, check_delta, check_epsilon, check_positive

__all__ = ["R_RANGE", "CustomMechanism", "LocalGaussian", "LocalLaplace", "LocalMechanism"]

R_RANGE = (1e-150, 1e150)
"""Accepted clipping bounds r: the sampler squares and exponentiates multiples of r, which
overflow or underflow beyond this range (rescale the data: the model is scale-equivariant)."""


def _check_r(r: Any) -> float:
    r = check_positive(r, "r")
    lo, hi = R_RANGE
    if not lo <= r <= hi:
        raise ValueError(
            f"r = {r:.6g} is outside [{lo:g}, {hi:g}], the clipping bounds the sampler handles "
            "without overflow: rescale the data"
        )
    return r


def _clip(x: np.ndarray, r: float) -> np.ndarray:
    return np.clip(x, -r, r)


def _as_doubles(values: Any) -> Any:
    """``values`` as doubles, a number beyond the double range read as +-inf (then clipped
    to +-r like any value beyond r): numpy refuses the Python int 10**400 with
    ``OverflowError``, which stopped the whole column's release on one person's value."""
    try:
        return as_doubles(values)
    except (TypeError, ValueError):
        return values  # not numbers: check_array refuses them as before


def log_base_mass(mu: float, sigma: float, r: float) -> float:
    """log P(-r <= X <= r) under N(mu, sigma^2): the normaliser of the restricted base."""
    return float(log_diff_ndtr(np.array((-r - mu) / sigma), np.array((r - mu) / sigma)))


class _ClippedLocal(abc.ABC):
    """Shared release path of the built-in local mechanisms: clip to [-r, r], add noise.

    Subclasses give ``r`` and ``_privacy()`` (the central mechanism applied per value, with
    sensitivity 2r); the guarantee is that mechanism's, marked local.
    """

    r: float

    @abc.abstractmethod
    def _privacy(self) -> Any:
        """The central mechanism applied to each clipped value (sensitivity 2r)."""

    def guarantee(self, *, simulation: bool = False) -> Guarantee:
        return self._privacy().guarantee(  # type: ignore[no-any-return]
            simulation=simulation, local=True, r=self.r, clipping=[-self.r, self.r]
        )

    def privatize(self, values: Any, rng: Any = None) -> Any:
        """Clip each value (one per person) to [-r, r] and add the mechanism's noise.

        Infinities are clipped like any value beyond r (whether a column is released must
        not hang on one person's value); a NaN has no clipped value and is refused: drop
        or impute missing values first."""
        from dpbayes.nonparametric.privatize import PrivatizedColumn

        x = check_array(_as_doubles(values), "values", finite=False)
        if np.isnan(x).any():
            raise ValueError(
                "values contain NaN (missing values): drop or impute them before privatizing "
                "(infinities are clipped to [-r, r])"
            )
        noisy = self._privacy().release(_clip(x, self.r), rng=rng)
        return PrivatizedColumn(
            values=np.asarray(noisy.value, dtype=float),
            guarantee=self.guarantee(simulation=noisy.simulation),
            mechanism=self,
        )


@dataclass(frozen=True, kw_only=True)
class LocalLaplace(_ClippedLocal):
    """Local Laplace mechanism with clipping: Z = clip(X, -r, r) + Lap(2 r / epsilon).

    The likelihood of paper 001 (Proposition A). Privacy: one person's clipped value
    moves by at most 2r, so Laplace noise of scale 2r/eps makes each Z_i eps-DP (local
    DP); the column is eps-DP when one person's record is substituted.
    """

    epsilon: float
    r: float
    name: str = field(default="laplace", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "r", _check_r(self.r))
        self._privacy()  # refuses now an (epsilon, r) whose noise scale no float can hold

    @property
    def scale(self) -> float:
        """Laplace scale b = 2 r / epsilon, rounded up as the noise drawn is
        (:func:`~dpbayes.privacy.mechanisms.laplace_scale`; density e^{-|z - clip(x)|/b} / 2b)."""
        return laplace_scale(2.0 * self.r, self.epsilon)

    def params(self) -> dict[str, float]:
        return {"epsilon": self.epsilon, "r": self.r}

    def loglik(self, z: Any, x: Any) -> np.ndarray:
        """log Q(z | x), broadcasting z against x."""
        b = self.scale
        return -np.abs(np.asarray(z) - _clip(np.asarray(x, dtype=float), self.r)) / b - math.log(
            2.0 * b
        )

    def conditional(
        self,
        z_sorted: np.ndarray,
        order: np.ndarray,
        starts: np.ndarray,
        mu: float,
        sigma: float,
        *,
        tails: bool = True,
    ) -> Intervals:
        """Exact conditional of each cluster value given its Z's (Appendix A), all clusters.

        ``z_sorted`` is increasing; cluster k holds ``z_sorted[order[starts[k]:starts[k+1]]]``
        (increasing). Returns the truncated-Normal pieces with their log weights.
        """
        seg, lo, hi, mean, const = kernels.laplace_intervals(
            z_sorted, order, starts, self.scale, self.r, mu, sigma, tails
        )
        return Intervals(seg, lo, hi, mean, np.full(len(seg), sigma), const, len(starts) - 1)

    def log_marginal(self, z: Any, mu: float, sigma: float, *, tails: bool = True) -> np.ndarray:
        """Log prior predictive density: log of the integral of Q(z | x) P0(dx), P0 = N(mu,
        sigma^2) on the real line (``tails``) or restricted to [-r, r]."""
        zz = np.asarray(z, dtype=float)
        n = zz.shape[0]
        pieces = self.conditional(zz, np.arange(n), np.arange(n + 1), mu, sigma, tails=tails)
        lse = kernels.segment_logsumexp(pieces.log_mass(), pieces.seg, n)
        norm = 0.0 if tails else log_base_mass(mu, sigma, self.r)
        return lse - math.log(2.0 * self.scale) - norm  # type: ignore[no-any-return]

    def _privacy(self) -> LaplaceMechanism:
        return LaplaceMechanism(epsilon=self.epsilon, sensitivity=2.0 * self.r)


@dataclass(frozen=True, kw_only=True)
class LocalGaussian(_ClippedLocal):
    """Local Gaussian mechanism with clipping: Z = clip(X, -r, r) + N(0, sigma^2).

    sigma is the analytic (Balle & Wang 2018) or classic calibration for L2 sensitivity 2r.
    Privacy: one person's clipped value moves by at most 2r, and that sigma makes each
    Z_i (eps, delta)-DP; substituting one record changes one Z_i only.
    """

    epsilon: float
    delta: float
    r: float
    calibration: str = "analytic"
    name: str = field(default="gaussian", init=False)
    sigma: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "delta", check_delta(self.delta))
        object.__setattr__(self, "r", _check_r(self.r))
        object.__setattr__(self, "sigma", self._privacy().sigma)

    def params(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "r": self.r,
            "calibration": self.calibration,
        }

    def loglik(self, z: Any, x: Any) -> np.ndarray:
        d = np.asarray(z) - _clip(np.asarray(x, dtype=float), self.r)
        return -0.5 * (d / self.sigma) ** 2 - math.log(self.sigma * math.sqrt(2.0 * math.pi))

    def conditional(
        self,
        z_sorted: np.ndarray,
        order: np.ndarray,
        starts: np.ndarray,
        mu: float,
        sigma: float,
        *,
        tails: bool = True,
    ) -> Intervals:
        """Exact conditional: conjugate Normal update on [-r, r] plus the two clipped tails
        (left out when ``tails`` is false: the base restricted to [-r, r])."""
        k = len(starts) - 1
        counts = np.diff(starts).astype(float)
        lab = np.repeat(np.arange(k), np.diff(starts))
        zz = z_sorted[order]
        s1 = np.bincount(lab, weights=zz, minlength=k)
        s2 = np.bincount(lab, weights=zz * zz, minlength=k)
        t2 = self.sigma**2
        r = self.r

        def loglik_at(y: float) -> np.ndarray:
            return -(counts * y * y - 2.0 * y * s1 + s2) / (2.0 * t2)

        prec = 1.0 / sigma**2 + counts / t2
        post_mean = (mu / sigma**2 + s1 / t2) / prec
        post_sd = 1.0 / np.sqrt(prec)
        const_mid = (
            0.5 * prec * post_mean**2
            - mu**2 / (2 * sigma**2)
            - s2 / (2 * t2)
            - np.log(sigma * np.sqrt(prec))
        )
        seg = np.repeat(np.arange(k), 3)
        lo = np.tile([-np.inf, -r, r], k)
        hi = np.tile([-r, r, np.inf], k)
        mean = np.column_stack([np.full(k, mu), post_mean, np.full(k, mu)]).ravel()
        sd = np.column_stack([np.full(k, sigma), post_sd, np.full(k, sigma)]).ravel()
        const = np.column_stack([loglik_at(-r), const_mid, loglik_at(r)]).ravel()
        if not tails:
            mid = np.arange(k) * 3 + 1
            return Intervals(np.arange(k), lo[mid], hi[mid], mean[mid], sd[mid], const[mid], k)
        return Intervals(seg, lo, hi, mean, sd, const, k)

    def log_marginal(self, z: Any, mu: float, sigma: float, *, tails: bool = True) -> np.ndarray:
        """Log prior predictive density: log of the integral of Q(z | x) P0(dx), P0 = N(mu,
        sigma^2) on the real line (``tails``) or restricted to [-r, r]."""
        zz = np.asarray(z, dtype=float)
        n = zz.shape[0]
        pieces = self.conditional(zz, np.arange(n), np.arange(n + 1), mu, sigma, tails=tails)
        lse = kernels.segment_logsumexp(pieces.log_mass(), pieces.seg, n)
        norm = 0.0 if tails else log_base_mass(mu, sigma, self.r)
        return lse - math.log(self.sigma * math.sqrt(2.0 * math.pi)) - norm  # type: ignore[no-any-return]

    def _privacy(self) -> GaussianMechanism:
        return GaussianMechanism(
            epsilon=self.epsilon,
            delta=self.delta,
            sensitivity=2.0 * self.r,
            calibration=self.calibration,
        )


def _check_logpdf_values(values: np.ndarray) -> np.ndarray:
    """A log-density is finite or -inf (zero density): NaN and +inf are refused."""
    if not np.all(values < np.inf):  # false for NaN and +inf
        what = "NaN" if np.isnan(values).any() else "+inf"
        raise ValueError(
            f"logpdf returned {what}: a log-density must be finite or -inf (zero density)"
        )
    return values


@dataclass(frozen=True, kw_only=True)
class CustomMechanism:
    """Any known local mechanism, given as a vectorised log-density ``logpdf(z, x)``.

    ``logpdf`` must broadcast numpy arrays z and x and return log Q(z | x). Cluster
    values are then updated by a Metropolis step (paper 001, Section 3). The mechanism's
    privacy is the user's claim: pass its ``guarantee`` if the results should carry one.
    """

    logpdf: Callable[[np.ndarray, np.ndarray], np.ndarray]
    guarantee_: Guarantee | None = None
    name: str = "custom"

    def __post_init__(self) -> None:
        if not callable(self.logpdf):
            raise TypeError(f"logpdf must be callable, got {type(self.logpdf).__name__}")
        if self.guarantee_ is not None and not isinstance(self.guarantee_, Guarantee):
            raise TypeError("guarantee_ must be a dpbayes.privacy.Guarantee or None")
        probe = np.asarray(self.logpdf(np.zeros((2, 1)), np.zeros((1, 3))), dtype=float)
        if probe.shape != (2, 3):
            raise ValueError(
                f"logpdf must broadcast z of shape (2, 1) with x of shape (1, 3) to (2, 3), "
                f"got shape {probe.shape}"
            )
        _check_logpdf_values(probe)

    def params(self) -> dict[str, Any]:
        return {"logpdf": self.logpdf}

    def loglik(self, z: Any, x: Any) -> np.ndarray:
        out = np.asarray(
            self.logpdf(np.asarray(z, dtype=float), np.asarray(x, dtype=float)), dtype=float
        )
        return _check_logpdf_values(out)

    def conditional(self, *args: Any, **kwargs: Any) -> Intervals | None:
        return None  # no closed form: the sampler uses a Metropolis step

    def guarantee(self, *, simulation: bool = False) -> Guarantee | None:
        if self.guarantee_ is None:
            return None
        return self.guarantee_.with_simulation(simulation or self.guarantee_.simulation)

    def privatize(self, values: Any, rng: Any = None) -> Any:
        raise TypeError(
            "a CustomMechanism cannot privatize: release with dpbayes.nonparametric.privatize "
            "(laplace, gaussian or randomized-response)"
        )


LocalMechanism = LocalLaplace | LocalGaussian | CustomMechanism
