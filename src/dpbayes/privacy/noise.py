"""Noise sources: the only place in dpbayes where random numbers are drawn.

Two sources share one interface:

* :class:`SecureNoise` (the default, ``rng=None``): OpenDP's samplers, which add noise
  without the floating-point weaknesses of textbook samplers (Mironov 2012): Laplace and
  Gaussian noise are added to the value inside OpenDP on a discretised grid, discrete
  Laplace is exact on the (64-bit) integers, the exponential mechanism is Gumbel
  noisy-max on exactly sampled noise, and randomized response flips exact Bernoulli coins.
  OpenDP's own errors are re-raised as ``ValueError`` with a readable message.
* :class:`SimulatedNoise` (``rng`` given): a seeded numpy Generator, fast and
  reproducible, for experiments and tests. Results made with it say ``simulation=True``
  and must not be published.

Both also give plain uniforms (:meth:`NoiseSource.uniform`) on the grid
(2m + 1) 2^-53, m uniform on 0..2^52 - 1: the secure source takes the 52 bits of m from
the operating system's CSPRNG (``secrets``), the simulation from its Generator. The exact
posterior samplers (``dpbayes.release.bayes_net.sampling``, ``.truncated_gaussian``) build every
draw from these uniforms by inverse CDFs and rejection.

Use :func:`noise_source` to get the right one from an ``rng`` argument.
"""

from __future__ import annotations

import random
import secrets
from functools import lru_cache
from types import SimpleNamespace
from typing import Any, Protocol

import numpy as np

from dpbayes.privacy.validation import (
    check_array,
    check_int,
    check_positive,
    check_probability,
    check_rng,
)

__all__ = [
    "NoiseSource",
    "SecureNoise",
    "SimulatedNoise",
    "as_noise_source",
    "noise_source",
    "prepare_secure_noise",
]


class NoiseSource(Protocol):
    """What a mechanism needs from a source of randomness."""

    simulation: bool

    def laplace(self, values: np.ndarray, scale: float) -> np.ndarray:
        """``values`` + i.i.d. Laplace(scale) noise (density e^{-|z|/scale} / 2 scale)."""
        ...

    def gaussian(self, values: np.ndarray, scale: float) -> np.ndarray:
        """``values`` + i.i.d. Normal(0, scale^2) noise."""
        ...

    def discrete_laplace(self, values: np.ndarray, scale: float) -> np.ndarray:
        """Integer ``values`` + i.i.d. discrete Laplace noise, P(z) ∝ e^{-|z|/scale}."""
        ...

    def gumbel_argmax(self, scores: np.ndarray, scale: float) -> int:
        """Index i drawn with probability proportional to exp(scores[i] / scale)."""
        ...

    def randomized_response(self, values: np.ndarray, k: int, keep: float) -> np.ndarray:
        """Each category index in ``values`` (0..k-1) kept with probability ``keep``,
        otherwise replaced by one of the other k-1 categories uniformly."""
        ...

    def uniform(self, size: int | tuple[int, ...]) -> np.ndarray:
        """I.i.d. uniforms on the grid (2m + 1) 2^-53, m = 0..2^52 - 1: in (0, 1), never
        0 or 1, and 1 - u is on the same grid (exactly), so either tail can be inverted."""
        ...

    def randbelow(self, bound: int) -> int:
        """An integer uniform on 0..bound - 1 exactly (``bound`` >= 1, any size)."""
        ...

    def generator(self) -> np.random.Generator:
        """A numpy Generator for draws that are not additive noise (MCMC, simulations).
        The secure source seeds it from the operating system's entropy."""
        ...


def _check_scale(scale: float) -> float:
    return check_positive(scale, "scale")


def _check_integers(values: Any) -> np.ndarray:
    v = np.asarray(values)
    if not np.issubdtype(v.dtype, np.integer):
        raise TypeError("values must be integers for discrete Laplace noise")
    return v.astype(np.int64)


def _check_rr(values: Any, k: Any, keep: Any) -> tuple[np.ndarray, int, float]:
    """Arguments of randomized response: categories 0..k-1, k >= 2, keep in [1/k, 1)."""
    k = check_int(k, "k", minimum=2)
    keep = check_probability(keep, "keep")
    if not (keep * k >= 1.0 and keep < 1.0):
        raise ValueError(f"keep must be in [1/k, 1) = [{1.0 / k:.6g}, 1), got {keep!r}")
    v = np.asarray(values)
    if not np.issubdtype(v.dtype, np.integer):
        raise TypeError(f"values must be integer category indices in 0..{k - 1}")
    if v.size and (v.min() < 0 or v.max() >= k):
        raise ValueError(f"values must be category indices in 0..{k - 1}")
    return v.astype(np.int64), k, keep


UNIFORM_BITS = 52


def _check_size(size: Any) -> tuple[int, ...]:
    shape = (size,) if isinstance(size, int | np.integer) else tuple(size)
    return tuple(check_int(s, "size", minimum=0) for s in shape)


def _check_bound(bound: Any) -> int:
    if isinstance(bound, bool) or not isinstance(bound, int | np.integer) or bound < 1:
        raise ValueError(f"bound must be an integer >= 1, got {bound!r}")
    return int(bound)


def _grid_uniform(bits: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """(2m + 1) 2^-53 for 52-bit integers m: exact doubles (2m + 1 < 2^53)."""
    return ((2 * bits + 1).astype(np.float64) * 2.0**-53).reshape(shape)


def _opendp() -> Any:
    """OpenDP's modules, imported on first use (not ``opendp.prelude``, which also imports
    scikit-learn when it is installed: ~1-4 s)."""
    import opendp.domains as domains
    import opendp.measurements as measurements
    import opendp.measures as measures
    import opendp.metrics as metrics
    import opendp.mod as mod

    mod.enable_features("contrib")
    return SimpleNamespace(
        m=measurements,
        atom_domain=domains.atom_domain,
        vector_domain=domains.vector_domain,
        l1_distance=metrics.l1_distance,
        l2_distance=metrics.l2_distance,
        linf_distance=metrics.linf_distance,
        zero_concentrated_divergence=measures.zero_concentrated_divergence,
        OpenDPException=mod.OpenDPException,
    )


def prepare_secure_noise() -> None:
    """Load the secure samplers' library now (a server calls this at start, so that its
    first answers do not all wait for the import). Draws nothing."""
    _opendp()


def _opendp_call(what: str, fn: Any, *args: Any) -> Any:
    """Call into OpenDP; its exceptions become one-line ``ValueError``s."""
    from opendp.mod import OpenDPException

    try:
        return fn(*args)
    except OpenDPException as exc:
        variant = getattr(exc, "variant", "") or "error"
        message = (getattr(exc, "message", "") or str(exc)).splitlines()
        first = message[0] if message else ""
        raise ValueError(f"OpenDP {what} failed ({variant}): {first}") from None
    except OverflowError as exc:
        raise ValueError(f"OpenDP {what} failed: {exc}") from None


def _opendp_measurement(kind: str, scale: float) -> Any:
    return _opendp_call(f"{kind} construction", _opendp_measurement_cached, kind, scale)


@lru_cache(maxsize=256)
def _opendp_measurement_cached(kind: str, scale: float) -> Any:
    dp = _opendp()
    if kind == "laplace":
        space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float)
        return dp.m.make_laplace(*space, scale=scale)
    if kind == "gaussian":
        space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float)
        return dp.m.make_gaussian(*space, scale=scale)
    if kind == "discrete_laplace":
        # i64, not T=int (which OpenDP maps to i32: values beyond 2^31 were refused and
        # large noise saturated at +-2^31).
        space = dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64")
        return dp.m.make_laplace(*space, scale=scale)
    if kind == "gumbel_argmax":
        # The zCDP output measure selects Gumbel noise: argmax(u + Gumbel(scale)) has
        # exactly the exponential-mechanism law exp(u/scale) / sum. (max_divergence would
        # select exponential noise, i.e. permute-and-flip, a different law; see
        # tests/privacy/test_noise_secure.py.) Only the sampler is used, not OpenDP's map.
        space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float)
        return dp.m.make_noisy_max(*space, dp.zero_concentrated_divergence(), scale=scale)
    raise ValueError(f"unknown OpenDP measurement kind {kind!r}")


def _opendp_rr(k: int, keep: float) -> Any:
    return _opendp_call("randomized response construction", _opendp_rr_cached, k, keep)


@lru_cache(maxsize=256)
def _opendp_rr_cached(k: int, keep: float) -> Any:
    dp = _opendp()
    return dp.m.make_randomized_response(list(range(k)), keep)


class SecureNoise:
    """OpenDP's floating-point-safe samplers (the release path)."""

    simulation = False

    def laplace(self, values: np.ndarray, scale: float) -> np.ndarray:
        v = check_array(values, "values", ndim=None)
        meas = _opendp_measurement("laplace", _check_scale(scale))
        out = _opendp_call("Laplace noise", meas, v.ravel().tolist())
        return np.asarray(out, dtype=float).reshape(v.shape)

    def gaussian(self, values: np.ndarray, scale: float) -> np.ndarray:
        v = check_array(values, "values", ndim=None)
        meas = _opendp_measurement("gaussian", _check_scale(scale))
        out = _opendp_call("Gaussian noise", meas, v.ravel().tolist())
        return np.asarray(out, dtype=float).reshape(v.shape)

    def discrete_laplace(self, values: np.ndarray, scale: float) -> np.ndarray:
        """As the protocol; sums beyond the int64 range saturate at its ends."""
        v = _check_integers(values)
        meas = _opendp_measurement("discrete_laplace", _check_scale(scale))
        out = _opendp_call("discrete Laplace noise", meas, v.ravel().tolist())
        return np.asarray(out, dtype=np.int64).reshape(v.shape)

    def gumbel_argmax(self, scores: np.ndarray, scale: float) -> int:
        s = check_array(scores, "scores")
        meas = _opendp_measurement("gumbel_argmax", _check_scale(scale))
        return int(_opendp_call("noisy max", meas, s.tolist()))

    def randomized_response(self, values: np.ndarray, k: int, keep: float) -> np.ndarray:
        v, k, keep = _check_rr(values, k, keep)
        meas = _opendp_rr(k, keep)
        flat = v.ravel().tolist()
        out = _opendp_call("randomized response", lambda xs: [meas(x) for x in xs], flat)
        return np.asarray(out, dtype=np.int64).reshape(v.shape)

    def randbelow(self, bound: int) -> int:
        return secrets.randbelow(_check_bound(bound))

    def uniform(self, size: int | tuple[int, ...]) -> np.ndarray:
        shape = _check_size(size)
        count = int(np.prod(shape, dtype=np.int64))
        words = np.frombuffer(secrets.token_bytes(8 * count), dtype=np.uint64)
        return _grid_uniform(words >> np.uint64(64 - UNIFORM_BITS), shape)

    def generator(self) -> np.random.Generator:
        return np.random.default_rng(secrets.randbits(128))


class SimulatedNoise:
    """A seeded numpy Generator: fast, reproducible, for experiments and tests only."""

    simulation = True

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._integers: random.Random | None = None

    def laplace(self, values: np.ndarray, scale: float) -> np.ndarray:
        v = check_array(values, "values", ndim=None)
        return v + self.rng.laplace(0.0, _check_scale(scale), size=v.shape)

    def gaussian(self, values: np.ndarray, scale: float) -> np.ndarray:
        v = check_array(values, "values", ndim=None)
        return v + self.rng.normal(0.0, _check_scale(scale), size=v.shape)

    def discrete_laplace(self, values: np.ndarray, scale: float) -> np.ndarray:
        v = _check_integers(values)
        # Difference of two i.i.d. geometric variables on {0, 1, ...} with
        # success probability 1 - e^{-1/scale} is discrete Laplace(scale).
        p = -np.expm1(-1.0 / _check_scale(scale))
        g1 = self.rng.geometric(p, size=v.shape) - 1
        g2 = self.rng.geometric(p, size=v.shape) - 1
        return (v + g1 - g2).astype(np.int64)

    def gumbel_argmax(self, scores: np.ndarray, scale: float) -> int:
        s = check_array(scores, "scores")
        return int(np.argmax(s / _check_scale(scale) + self.rng.gumbel(size=s.shape)))

    def randomized_response(self, values: np.ndarray, k: int, keep: float) -> np.ndarray:
        v, k, keep = _check_rr(values, k, keep)
        flip = self.rng.random(v.shape) >= keep
        # Uniform over the other k-1 categories: shift by 1..k-1 modulo k.
        shift = self.rng.integers(1, k, size=v.shape)
        return np.where(flip, (v + shift) % k, v).astype(np.int64)

    def randbelow(self, bound: int) -> int:
        # a Python Random seeded once from the generator (on the first call): the exact
        # samplers draw many small integers, at about 0.3 us each where a numpy call per
        # integer took 6 us; ``randrange`` is exactly uniform for any bound
        if self._integers is None:
            self._integers = random.Random(int(self.rng.integers(0, 2**63)))
        return self._integers.randrange(_check_bound(bound))

    def uniform(self, size: int | tuple[int, ...]) -> np.ndarray:
        shape = _check_size(size)
        bits = self.rng.integers(0, 1 << UNIFORM_BITS, size=shape, dtype=np.uint64)
        return _grid_uniform(bits, shape)

    def generator(self) -> np.random.Generator:
        return self.rng


def noise_source(rng: Any = None) -> NoiseSource:
    """The secure source for ``rng=None``; a seeded simulation for an int or Generator."""
    gen = check_rng(rng)
    return SecureNoise() if gen is None else SimulatedNoise(gen)


def as_noise_source(value: Any) -> NoiseSource:
    """``value`` itself if it is a noise source, else :func:`noise_source` of it (None,
    an int seed or a numpy Generator)."""
    if isinstance(value, SecureNoise | SimulatedNoise):
        return value
    return noise_source(value)
