"""Gibbs sampler for the Dirichlet-process mixture of paper 001 (Ayed, Battiston, Di Benedetto).

Model: X_i ~ P, P ~ DP(alpha, P0), P0 = N(mu, sigma^2) (restricted to the clipping range
[-r, r] by default, see ``support``), Z_i | X_i ~ Q(. | X_i) with Q the known local
mechanism; by default alpha ~ Gamma(shape, rate) and (mu, sigma) have the hyperprior of
:class:`~dpbayes.nonparametric.base.BasePrior`. One sweep is

1. labels: Neal (2000) algorithm 2 with the closed-form prior predictive for the
   built-in mechanisms (compiled loop), algorithm 8 with m auxiliary values for a custom Q;
2. cluster values: the exact conditional (Appendix A mixture of truncated Normals for
   the Laplace mechanism with clipping; conjugate Normal for the Gaussian mechanism),
   or a random-walk Metropolis step for any other Q;
3. alpha (if it has a prior): Escobar & West (1995) auxiliary-variable update;
4. (mu, sigma) (if they have a prior): slice sampling given the distinct cluster values;
5. after the chain, a draw of P for each saved state: P | labels, values ~ DP(alpha + n,
   ...), i.e. Dirichlet(n_1..n_K, alpha) weights on the values and on a stick-breaking
   draw of DP(alpha, P0).

All randomness comes from the chain's numpy Generator obtained from
``dpbayes.privacy.noise.noise_source(rng).generator()``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from dpbayes.nonparametric import kernels
from dpbayes.nonparametric.base import BasePrior, draw_base, update_base
from dpbayes.nonparametric.fit import DPMixtureFit
from dpbayes.nonparametric.kernels_truncnorm import laplace_new_weights
from dpbayes.nonparametric.mechanisms import (
    R_RANGE,
    CustomMechanism,
    LocalGaussian,
    LocalLaplace,
    LocalMechanism,
)
from dpbayes.nonparametric.moves import MixtureLikelihood, laplace_exps, marginal_block
from dpbayes.nonparametric.privatize import PrivatizedColumn
from dpbayes.privacy.noise import noise_source
from dpbayes.privacy.validation import check_array, check_finite, check_int, check_positive
from dpbayes.progress import Progress

__all__ = [
    "ALPHA_MAX",
    "BASE_SIGMA_RANGE",
    "DEFAULT_ALPHA_PRIOR",
    "LAPLACE_MAX_EPSILON",
    "STICK_TAIL",
    "ChainState",
    "DPMixture",
    "SortedData",
    "stick_breaking",
]

DEFAULT_ALPHA_PRIOR = (2.0, 0.5)
"""Gamma(shape 2, rate 0.5) on the concentration: mean 4, sd 2.8."""

STICK_TAIL = 1e-12
"""Stick-breaking of the DP(alpha, P0) part of a draw of P stops below this remaining mass."""

ALPHA_MAX = 1000.0
"""Largest concentration accepted (fixed, or the starting value): each draw of P holds
about 28 alpha stick-breaking atoms, and the sweeps slow with it (alpha = 1e6 ran for
minutes on 100 values, 1e300 failed to allocate). A Gamma prior on alpha must have
mean + sd = (shape + sqrt(shape)) / rate <= ALPHA_MAX, shape >= 0.1 and rate <= 1e6
(beyond, draws of alpha underflow to 0 or, with a rate near 0, drift without bound)."""

ALPHA_PRIOR_MIN_SHAPE = 0.1
ALPHA_PRIOR_MAX_RATE = 1e6

BASE_SIGMA_RANGE = (1e-8, 1e8)
"""The base measure's sigma relative to the clipping bound r (absolute for a
:class:`CustomMechanism`: within :data:`~dpbayes.nonparametric.mechanisms.R_RANGE`);
sigma = 1e-300 divided by zero and 1e300 gave a NaN mean."""

LAPLACE_MAX_EPSILON = 1400.0
"""Largest epsilon of a :class:`LocalLaplace` the sampler accepts: it works with
e^{+-clip(z)/b} = up to e^{epsilon/2}, which overflows beyond epsilon ~ 1419.6."""


@dataclass
class ChainState:
    """The state of one chain: labels of the (sorted) observations, cluster values, alpha,
    and the base measure's (mu, sigma)."""

    labels: np.ndarray
    counts: np.ndarray
    phi: np.ndarray
    alpha: float
    mu: float = 0.0
    sigma: float = 1.0
    step: float = 1.0
    accepted: float = 0.0


POOL = 16  # new-cluster draws per refill of the randomness pool of the Laplace sweep
_ZERO = np.zeros(1, dtype=np.int64)
_ZERO_ONE = np.array([0, 1], dtype=np.int64)


@dataclass(frozen=True)
class SortedData:
    """The privatised values sorted increasingly, and a cache of the weight of a new
    cluster per value (the prior predictive, which depends on the base's (mu, sigma))."""

    z: np.ndarray
    lik: MixtureLikelihood | None = None
    cache: dict[str, Any] = field(default_factory=dict, compare=False)
    #: Laplace mechanism: e^{+-clip(z)/b} per value, shared by the sweep and ``lik``
    laplace_exp: tuple[np.ndarray, np.ndarray] | None = None


def _same_mechanism(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a.params() == b.params()


def _pair(value: Any, name: str) -> tuple[float, float]:
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise TypeError(f"{name} must be a pair, got {value!r}")
    return float(value[0]), float(value[1])


@dataclass(frozen=True, kw_only=True)
class DPMixture:
    """Dirichlet-process mixture of the local mechanism's kernel: the prior of paper 001.

    Parameters
    ----------
    mechanism:
        The local mechanism Q that produced Z (:class:`LocalLaplace`,
        :class:`LocalGaussian` or :class:`CustomMechanism`).
    alpha:
        DP concentration (> 0); the starting value when ``alpha_prior`` is given.
    alpha_prior:
        (shape, rate) of a Gamma prior on alpha (default (2, 0.5): mean 4), or None to
        keep alpha fixed.
    base:
        (mu, sigma) of the Normal base measure P0: fixed, or the starting values when
        ``base_prior`` is given. Default (0, r/2) for clipped mechanisms; required for a
        :class:`CustomMechanism`.
    base_prior:
        Hyperprior on (mu, sigma): a :class:`BasePrior`, ``"auto"`` (the default:
        :meth:`BasePrior.for_range` of the clipping bound r; no hyperprior for a custom
        mechanism) or None (P0 fixed at ``base``).
    support:
        ``"clipped"`` (default for clipped mechanisms): P is a law on [-r, r], P0 is
        N(mu, sigma^2) restricted to [-r, r]; the data identify the law of clip(X)
        and nothing else. ``"real"``: P0 on the real line, as in the paper (the atoms
        beyond +-r then follow the prior; compare with :meth:`DPMixtureFit.projected`).
    m_aux:
        Number of auxiliary values in Neal's algorithm 8 (custom mechanisms, >= 1).
    stick_atoms:
        Atoms of the stick-breaking draw of the DP(alpha, P0) part of each draw of P:
        None (default) continues until the remaining mass is below ``STICK_TAIL``
        (1e-12; about 28 alpha atoms), an integer truncates there (the last atom takes
        the rest).
    mh_steps:
        Metropolis steps per sweep for the cluster values of a custom mechanism.
    marginal_moves:
        After each Gibbs sweep, move P with the labels summed out (built-in mechanisms;
        see :mod:`dpbayes.nonparametric.moves`). False gives the paper's Gibbs sampler.
    atom_moves, pair_moves:
        Per sweep, the number of atom locations and of pairwise weight transfers moved
        in that block.
    """

    mechanism: LocalMechanism
    alpha: float = 1.0
    alpha_prior: tuple[float, float] | None = DEFAULT_ALPHA_PRIOR
    base: tuple[float, float] | None = None
    base_prior: BasePrior | Literal["auto"] | None = "auto"
    support: Literal["clipped", "real"] | None = None
    m_aux: int = 3
    stick_atoms: int | None = None
    mh_steps: int = 5
    marginal_moves: bool = True
    atom_moves: int = 10
    pair_moves: int = 10
    collapsed_labels: bool = True
    _mu: float = field(init=False, repr=False)
    _sigma: float = field(init=False, repr=False)
    _r: float | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        mech = self.mechanism
        if not isinstance(mech, LocalLaplace | LocalGaussian | CustomMechanism):
            raise TypeError(
                "mechanism must be a dpbayes.nonparametric LocalLaplace, LocalGaussian "
                f"or CustomMechanism, got {type(mech).__name__}"
            )
        if isinstance(mech, LocalLaplace) and mech.epsilon > LAPLACE_MAX_EPSILON:
            raise ValueError(
                f"epsilon = {mech.epsilon:.6g} of the LocalLaplace mechanism is above "
                f"{LAPLACE_MAX_EPSILON:g}, the largest the sampler handles (e^(epsilon/2) "
                "overflows)"
            )
        clipped = not isinstance(mech, CustomMechanism)
        r_mech = None if isinstance(mech, CustomMechanism) else mech.r
        support = self.support if self.support is not None else "clipped" if clipped else "real"
        if support not in ("clipped", "real"):
            raise ValueError(f"support must be 'clipped' or 'real', got {support!r}")
        if support == "clipped" and not clipped:
            raise ValueError("support='clipped' needs a mechanism with a clipping bound r")
        object.__setattr__(self, "support", support)
        object.__setattr__(self, "_r", r_mech if support == "clipped" else None)
        object.__setattr__(self, "alpha", check_positive(self.alpha, "alpha"))
        if self.alpha > ALPHA_MAX:
            raise ValueError(
                f"alpha = {self.alpha:.6g} is above {ALPHA_MAX:g}: each draw of P would hold "
                f"about {28 * self.alpha:.3g} atoms"
            )
        if self.base is None and not clipped:
            raise ValueError("base=(mu, sigma) must be given for a CustomMechanism")
        if r_mech is not None and self.base is None:
            base = (0.0, 0.5 * r_mech)
        else:
            base = _pair(self.base, "base")
        object.__setattr__(self, "_mu", check_finite(base[0], "base[0] (mu)"))
        object.__setattr__(self, "_sigma", check_positive(base[1], "base[1] (sigma)"))
        unit = 1.0 if r_mech is None else r_mech
        lo, hi = R_RANGE if r_mech is None else BASE_SIGMA_RANGE
        if not lo * unit <= self._sigma <= hi * unit:
            where = f"[{lo:g}, {hi:g}]" if r_mech is None else f"[{lo:g} r, {hi:g} r]"
            raise ValueError(
                f"base[1] (sigma) = {self._sigma:.6g} is outside {where}, the range the "
                "sampler handles without overflow"
            )
        prior = self.base_prior
        if isinstance(prior, str):
            if prior != "auto":
                raise ValueError(f"base_prior must be a BasePrior, 'auto' or None, got {prior!r}")
            prior = None if r_mech is None else BasePrior.for_range(r_mech)
        elif prior is not None and not isinstance(prior, BasePrior):
            raise TypeError(f"base_prior must be a BasePrior, 'auto' or None, got {prior!r}")
        object.__setattr__(self, "base_prior", prior)
        if self.alpha_prior is not None:
            shape, rate = _pair(self.alpha_prior, "alpha_prior (shape, rate)")
            check_positive(shape, "alpha_prior[0] (shape)")
            check_positive(rate, "alpha_prior[1] (rate)")
            if shape < ALPHA_PRIOR_MIN_SHAPE:
                raise ValueError(
                    f"alpha_prior[0] (shape) = {shape:.6g} is below {ALPHA_PRIOR_MIN_SHAPE:g}: "
                    "draws of alpha would underflow to 0"
                )
            if rate > ALPHA_PRIOR_MAX_RATE:
                raise ValueError(
                    f"alpha_prior[1] (rate) = {rate:.6g} is above {ALPHA_PRIOR_MAX_RATE:g}: "
                    "draws of alpha would underflow to 0"
                )
            if (shape + math.sqrt(shape)) / rate > ALPHA_MAX:
                raise ValueError(
                    f"alpha_prior = ({shape:.6g}, {rate:.6g}) puts alpha above {ALPHA_MAX:g} "
                    "(prior mean + sd = (shape + sqrt(shape)) / rate): raise the rate"
                )
        check_int(self.m_aux, "m_aux", minimum=1)
        if self.stick_atoms is not None:
            check_int(self.stick_atoms, "stick_atoms", minimum=1)
        check_int(self.mh_steps, "mh_steps", minimum=1)
        check_int(self.atom_moves, "atom_moves", minimum=0)
        check_int(self.pair_moves, "pair_moves", minimum=0)
        if not isinstance(self.marginal_moves, bool):
            raise TypeError(f"marginal_moves must be a bool, got {self.marginal_moves!r}")

    @property
    def tails(self) -> bool:
        """Whether P0 has mass beyond the clipping range (``support == "real"``)."""
        return self._r is None

    # ------------------------------------------------------------------ fitting
    def _check_data(self, z: Any) -> tuple[np.ndarray, Any]:
        guarantee = None
        if isinstance(z, PrivatizedColumn):
            if not _same_mechanism(z.mechanism, self.mechanism):
                raise ValueError(
                    f"mechanism {self.mechanism!r} does not match the mechanism that "
                    f"privatised z ({z.mechanism!r})"
                )
            guarantee = z.guarantee
            z = z.values
        values = check_array(z, "z")
        # A plain array carries no guarantee: it may be raw data or a seeded simulation,
        # so the fit states that its input's privacy is not known (guarantee None).
        return values, guarantee

    def fit(
        self,
        z: Any,
        *,
        draws: int = 2000,
        warmup: int | None = None,
        chains: int = 4,
        thin: int = 1,
        rng: Any = None,
        progress: bool | None = None,
        diagnostics: bool = True,
    ) -> DPMixtureFit:
        """Run ``chains`` Gibbs chains on the privatised values ``z``; return the posterior of P.

        ``z``: 1-d array of privatised values or a :class:`PrivatizedColumn` (its
        mechanism must equal this model's). ``warmup`` defaults to ``draws // 2``.
        ``rng``: None (sampler seeded from the OS) or an int / Generator (reproducible).
        ``progress``: a bar on stderr (:class:`dpbayes.progress.Progress`); None shows it
        on a terminal once the run has taken a second (``dpbayes.progress.set_progress``).
        With ``diagnostics`` (default) R-hat and ESS of the functionals are computed
        and a :class:`ConvergenceWarning` is issued when they look bad.
        """
        values, guarantee = self._check_data(z)
        draws = check_int(draws, "draws", minimum=1)
        warmup = draws // 2 if warmup is None else check_int(warmup, "warmup", minimum=0)
        chains = check_int(chains, "chains", minimum=1)
        thin = check_int(thin, "thin", minimum=1)
        if progress is not None and not isinstance(progress, bool):
            raise TypeError(f"progress must be None or a bool, got {progress!r}")
        parent = noise_source(rng).generator()
        gens = parent.spawn(2 * chains)  # per chain: the Gibbs sweeps, the draws of P
        data = self.prepare(values)
        n = data.z.shape[0]
        sweeps = warmup + draws * thin
        bar = Progress(chains * sweeps, "DPMixture Gibbs", unit="sweep", show=progress)
        out_atoms: list[list[np.ndarray]] = []
        out_weights: list[list[np.ndarray]] = []
        out_k = np.zeros((chains, draws), dtype=np.int64)
        out_alpha = np.zeros((chains, draws))
        out_base = np.zeros((2, chains, draws))
        t0 = time.perf_counter()
        try:
            for c in range(chains):
                gen, gen_p = gens[2 * c], gens[2 * c + 1]
                state = self.initial_state(data.z, gen)
                kept_counts: list[np.ndarray] = []
                kept_phi: list[np.ndarray] = []
                for s in range(sweeps):
                    state = self.sweep(state, data, gen, adapt=s < warmup)
                    if s >= warmup and (s - warmup) % thin == thin - 1:
                        d = len(kept_counts)
                        out_k[c, d] = state.phi.shape[0]
                        out_alpha[c, d] = state.alpha
                        out_base[:, c, d] = state.mu, state.sigma
                        kept_counts.append(state.counts)
                        kept_phi.append(state.phi)
                    if s % 10 == 9:
                        bar.update(10)
                atoms_c, weights_c = self.draw_p_many(
                    kept_counts, kept_phi, out_alpha[c], out_base[:, c], gen_p
                )
                out_atoms.append(atoms_c)
                out_weights.append(weights_c)
        finally:
            bar.close()
        seconds = time.perf_counter() - t0
        return DPMixtureFit.from_draws(
            out_atoms,
            out_weights,
            n_clusters=out_k,
            alpha=out_alpha,
            base=out_base,
            model=self,
            n=n,
            guarantee=guarantee,
            seconds=seconds,
            sweeps=chains * sweeps,
            diagnostics=diagnostics,
        )

    # ------------------------------------------------------------------ one chain
    def initial_state(self, zs: np.ndarray, gen: np.random.Generator) -> ChainState:
        """Random start (over-dispersed across chains): 1..10 clusters, values from P0."""
        n = zs.shape[0]
        k0 = int(gen.integers(1, min(10, n) + 1))
        labels = np.asarray(gen.integers(0, k0, size=n), dtype=np.int64)
        phi = draw_base(np.array([self._mu]), np.array([self._sigma]), self._r, gen, k0)[0]
        counts = np.bincount(labels, minlength=k0).astype(np.int64)
        state = ChainState(labels, counts, phi, self.alpha, self._mu, self._sigma, self._sigma)
        return _compact(state)

    def sweep(
        self, state: ChainState, data: SortedData, gen: np.random.Generator, *, adapt: bool = False
    ) -> ChainState:
        """One Gibbs sweep (labels, cluster values, alpha, base) on :meth:`prepare`'d data."""
        if data.lik is None or self.collapsed_labels:
            state = self.update_labels(state, data, gen)
        state = self.update_values(state, data.z, gen, adapt=adapt)
        if self.alpha_prior is not None:
            state.alpha = self.update_alpha(state, data.z.shape[0], gen)
        if isinstance(self.base_prior, BasePrior):
            state.mu, state.sigma = update_base(
                state.phi, state.mu, state.sigma, self.base_prior, self._r, gen
            )
        if data.lik is not None:
            labels, counts, phi, alpha, mu, sigma = marginal_block(self, state, data.lik, gen)
            state.labels, state.counts, state.phi = labels, counts, phi
            state.alpha, state.mu, state.sigma = alpha, mu, sigma
        return state

    def prepare(self, z: np.ndarray) -> SortedData:
        """Sort the data once per fit (and precompute the label-integrated likelihood)."""
        zs = np.sort(np.asarray(z, dtype=float))
        mech = self.mechanism
        use = self.marginal_moves and isinstance(mech, LocalLaplace | LocalGaussian)
        exps = laplace_exps(zs, mech.r, mech.scale) if isinstance(mech, LocalLaplace) else None
        lik = MixtureLikelihood.build(mech, zs, exps) if use else None
        return SortedData(zs, lik, laplace_exp=exps)

    def new_cluster_weights(self, data: SortedData, mu: float, sigma: float) -> np.ndarray:
        """Prior predictive of each z_i under P0 = N(mu, sigma^2) (Neal's algorithm 2).

        Laplace: relative to max Q(z_i | .) (the compiled sweep's scale); Gaussian: its log.
        Cached for the last (mu, sigma).
        """
        key = (mu, sigma)
        if data.cache.get("key") == key:
            return data.cache["w"]  # type: ignore[no-any-return]
        mech = self.mechanism
        if isinstance(mech, LocalLaplace):
            w = laplace_new_weights(
                data.z, mech.scale, mech.r, mu, sigma, self.tails, np.empty(data.z.shape[0])
            )
        else:
            assert isinstance(mech, LocalGaussian)
            w = np.ascontiguousarray(mech.log_marginal(data.z, mu, sigma, tails=self.tails))
        data.cache["key"], data.cache["w"] = key, w
        return w

    def update_labels(
        self, state: ChainState, data: SortedData, gen: np.random.Generator
    ) -> ChainState:
        """Label update: Neal's algorithm 2 for the built-in mechanisms (closed-form prior
        predictive, new values from their one-observation conditional), algorithm 8 with
        ``m_aux`` auxiliary values for a custom Q. Compiled loop; new clusters filled here."""
        mech = self.mechanism
        if isinstance(mech, LocalLaplace):
            return self._laplace_labels(state, data, gen, mech)
        zs = data.z
        n = zs.shape[0]
        lik_fn = self._loglik_table
        k = state.phi.shape[0]
        kcap = k + max(k, 8)
        phi = np.concatenate([state.phi, np.zeros(kcap - k)])
        counts = np.concatenate([state.counts, np.zeros(kcap - k, dtype=np.int64)])
        lik = np.zeros((n, kcap))
        lik[:, :k] = lik_fn(zs, state.phi)
        algorithm2 = isinstance(mech, LocalGaussian)
        if algorithm2:
            aux = None
            lik_new = self.new_cluster_weights(data, state.mu, state.sigma)[:, None]
            alpha_m = state.alpha
        else:
            m = self.m_aux
            aux = state.mu + state.sigma * gen.standard_normal((n, m))
            lik_new = np.ascontiguousarray(lik_fn(zs, aux))
            alpha_m = state.alpha / m
        uniforms = gen.random(n)
        labels = state.labels.copy()
        i0 = 0
        while True:
            i, j, slot = kernels.label_sweep(
                i0, lik, lik_new, labels, counts, alpha_m, uniforms, True, algorithm2
            )
            if i >= n:
                break
            if slot < 0:  # no free slot: double the capacity
                kcap = lik.shape[1]
                lik = np.ascontiguousarray(np.hstack([lik, np.zeros((n, kcap))]))
                counts = np.concatenate([counts, np.zeros(kcap, dtype=np.int64)])
                phi = np.concatenate([phi, np.zeros(kcap)])
                slot = kcap
                labels[i] = slot
                counts[slot] = 1
            if aux is None:  # algorithm 2: the new value given z_i alone
                one = self.mechanism.conditional(
                    zs[i : i + 1], _ZERO, _ZERO_ONE, state.mu, state.sigma, tails=self.tails
                )
                assert one is not None
                phi[slot] = one.sample(gen.gumbel(size=one.seg.shape[0]), gen.random(1))[0]
            else:
                phi[slot] = aux[i, j]
            if i + 1 < n:
                lik[i + 1 :, slot] = lik_fn(zs[i + 1 :], phi[slot : slot + 1])[:, 0]
            i0 = i + 1
        state.labels, state.counts, state.phi = labels, counts, phi
        return _compact(state)

    def _laplace_labels(
        self, state: ChainState, data: SortedData, gen: np.random.Generator, mech: LocalLaplace
    ) -> ChainState:
        """Algorithm 2 for the Laplace mechanism in one compiled loop (see kernels)."""
        zs = data.z
        n, k = zs.shape[0], state.phi.shape[0]
        phi = np.zeros(k + n)
        phi[:k] = state.phi
        counts = np.zeros(k + n, dtype=np.int64)
        counts[:k] = state.counts
        labels = state.labels.copy()
        new_w = self.new_cluster_weights(data, state.mu, state.sigma)
        uniforms = gen.random(n)
        pool_g, pool_u, pos = gen.gumbel(size=(POOL, 4)), gen.random(POOL), 0
        order = np.zeros(k + n, dtype=np.int64)  # the scan order: largest clusters first
        order[:k] = np.argsort(-state.counts, kind="stable")
        assert data.laplace_exp is not None
        eu, emu = data.laplace_exp
        i, top = 0, k
        while True:
            i, pos, top = kernels.laplace_label_sweep(
                i, zs, new_w, labels, counts, phi, top, state.alpha, uniforms,
                pool_g, pool_u, pos, mech.scale, mech.r, state.mu, state.sigma, self.tails,
                order, eu, emu,
            )  # fmt: skip
            if i >= n:
                break
            pool_g, pool_u, pos = gen.gumbel(size=(POOL, 4)), gen.random(POOL), 0
        counts, phi = kernels.compact(labels, counts, phi, top)
        state.labels, state.counts, state.phi = labels, counts, phi
        return state

    def _loglik_table(self, z: np.ndarray, x: np.ndarray) -> np.ndarray:
        """log Q(z_i | x_k) as (n, K) for 1-d x, or elementwise for x of shape (n, m)."""
        xx = x[None, :] if x.ndim == 1 else x
        return np.asarray(self.mechanism.loglik(z[:, None], xx), dtype=float)

    def update_values(
        self, state: ChainState, zs: np.ndarray, gen: np.random.Generator, *, adapt: bool = False
    ) -> ChainState:
        """Cluster values from their exact conditional, or by Metropolis for a custom Q."""
        k = state.phi.shape[0]
        order, starts = kernels.group_by_label(state.labels, k)
        pieces = self.mechanism.conditional(
            zs, order, starts, state.mu, state.sigma, tails=self.tails
        )
        if pieces is not None:
            state.phi = pieces.sample(gen.gumbel(size=pieces.seg.shape[0]), gen.random(k))
            return state
        return self._metropolis(state, zs, gen, adapt=adapt)

    def _metropolis(
        self, state: ChainState, zs: np.ndarray, gen: np.random.Generator, *, adapt: bool
    ) -> ChainState:
        """Random-walk Metropolis on every cluster value at once (proposal sd step/sqrt(n_k))."""
        k = state.phi.shape[0]
        lab = state.labels
        sd = state.step / np.sqrt(state.counts)

        def target(phi: np.ndarray) -> np.ndarray:
            ll = np.bincount(lab, weights=self.mechanism.loglik(zs, phi[lab]), minlength=k)
            return ll - 0.5 * ((phi - state.mu) / state.sigma) ** 2

        cur = target(state.phi)
        rate = 0.0
        for _ in range(self.mh_steps):
            prop = state.phi + sd * gen.standard_normal(k)
            new = target(prop)
            with np.errstate(invalid="ignore"):
                accept = np.log(gen.random(k)) < new - cur
            state.phi = np.where(accept, prop, state.phi)
            cur = np.where(accept, new, cur)
            rate += float(np.mean(accept)) / self.mh_steps
        state.accepted = rate
        if adapt:  # Robbins-Monro towards the 0.44 acceptance rate of one-dimensional RWM
            state.step *= math.exp(rate - 0.44)
        return state

    def update_alpha(self, state: ChainState, n: int, gen: np.random.Generator) -> float:
        """Escobar & West (1995): alpha | K, n with the auxiliary eta ~ Beta(alpha + 1, n)."""
        assert self.alpha_prior is not None
        shape, rate = float(self.alpha_prior[0]), float(self.alpha_prior[1])
        k = state.phi.shape[0]
        eta = gen.beta(state.alpha + 1.0, n)
        r = rate - math.log(eta)
        odds = (shape + k - 1.0) / (n * r)
        a = shape + k if gen.random() < odds / (1.0 + odds) else shape + k - 1.0
        return float(gen.gamma(a, 1.0 / r))

    def draw_p(self, state: ChainState, gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """One draw of P given the state (see :meth:`draw_p_many`): atoms and weights."""
        atoms, weights = self.draw_p_many(
            [state.counts],
            [state.phi],
            np.array([state.alpha]),
            np.array([[state.mu], [state.sigma]]),
            gen,
        )
        return atoms[0], weights[0]

    def draw_p_many(
        self,
        counts: list[np.ndarray],
        phi: list[np.ndarray],
        alpha: np.ndarray,
        base: np.ndarray,
        gen: np.random.Generator,
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Draws of P | labels, values for many saved states at once (vectorised).

        P | c, phi ~ DP(alpha + n, (alpha P0 + sum_k n_k delta_phi_k) / (alpha + n)), i.e.
        weights (W_1..W_K, W_0) ~ Dirichlet(n_1..n_K, alpha) on the values and on a draw
        of DP(alpha, P0), the latter by stick-breaking (:func:`stick_breaking`: until the
        remaining mass is below ``STICK_TAIL``, or ``stick_atoms`` sticks if given).
        ``base`` is (2, draws): the (mu, sigma) of P0 at each saved state. Given the
        states these draws are independent of the chain, so they are made after it.
        """
        d = len(counts)
        sizes = np.array([c.shape[0] + 1 for c in counts])
        shape = np.concatenate(
            [np.append(c.astype(float), a) for c, a in zip(counts, alpha, strict=True)]
        )
        g = gen.standard_gamma(shape)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        w = g / np.repeat(np.add.reduceat(g, starts), sizes)
        stick, lengths = stick_breaking(alpha, gen, self.stick_atoms)
        atoms0 = draw_base(base[0], base[1], self._r, gen, stick.shape[1])
        atoms, weights = [], []
        for j in range(d):
            wj = w[starts[j] : starts[j] + sizes[j]]
            t = lengths[j]
            atoms.append(np.concatenate([phi[j], atoms0[j, :t]]))
            weights.append(np.concatenate([wj[:-1], wj[-1] * stick[j, :t]]))
        return atoms, weights


def stick_breaking(
    alpha: np.ndarray, gen: np.random.Generator, sticks: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Stick-breaking weights of DP(alpha_j, P0), one row per alpha_j: ((len(alpha), T), lengths).

    V_i = 1 - U_i^(1/alpha) ~ Beta(1, alpha), w_i = V_i prod_{l<i} (1 - V_l). With ``sticks``
    None, row j keeps its sticks up to the first after which the remaining mass is below
    ``STICK_TAIL`` (about 28 alpha sticks; ``lengths[j]`` of them, zeros after); otherwise
    exactly ``sticks``. The remaining mass goes to the row's last stick, so rows sum to 1.
    A small fixed truncation is not the DP: at alpha = 10, 30 sticks leave 6% of the mass on
    the last atom on average, which widens the posterior draws of F(t), and no mass at all
    below a t with P0(t) = 0.05 in 21% of the draws, where the DP always has some.
    """
    a = np.asarray(alpha, dtype=float)[:, None]
    left = np.ones(a.shape[0])
    blocks, rests = [], []
    while True:
        size = 32 if sticks is None else sticks
        v = 1.0 - gen.random((a.shape[0], size)) ** (1.0 / a)
        rest = left[:, None] * np.cumprod(1.0 - v, axis=1)
        blocks.append(v * np.concatenate([left[:, None], rest[:, :-1]], axis=1))
        rests.append(rest)
        left = rest[:, -1]
        if sticks is not None or np.all(left < STICK_TAIL):
            break
    w = np.concatenate(blocks, axis=1)
    if sticks is None:  # cut each row after its first remainder below STICK_TAIL
        lengths = np.argmax(np.concatenate(rests, axis=1) < STICK_TAIL, axis=1) + 1
    else:
        lengths = np.full(a.shape[0], sticks)
    rows = np.arange(a.shape[0])
    w[rows, lengths - 1] += 1.0 - np.cumsum(w, axis=1)[rows, lengths - 1]
    w[np.arange(w.shape[1])[None, :] >= lengths[:, None]] = 0.0
    return w, lengths


def _compact(state: ChainState) -> ChainState:
    """Drop empty clusters and relabel 0..K-1 in slot order."""
    active = state.counts > 0
    if active.all():
        return state
    new_index = np.cumsum(active) - 1
    return ChainState(
        new_index[state.labels].astype(np.int64),
        state.counts[active].copy(),
        state.phi[active].copy(),
        state.alpha,
        state.mu,
        state.sigma,
        state.step,
        state.accepted,
    )
