"""Gibbs sampler for the Dirichlet-process mixture of paper 001 (Ayed, Battiston, Di Benedetto).

Model: X_i ~ P, P ~ DP(alpha, N(mu, sigma^2)), Z_i | X_i ~ Q(. | X_i) with Q the known
local mechanism; optionally alpha ~ Gamma(shape, rate). One sweep is

1. labels: Neal (2000) algorithm 8 with m auxiliary values, on precomputed matrices of
   log Q(z_i | phi_k) (compiled loop, :func:`kernels.label_sweep`);
2. cluster values: the exact conditional (Appendix A mixture of truncated Normals for
   the Laplace mechanism with clipping; conjugate Normal for the Gaussian mechanism),
   or a random-walk Metropolis step for any other Q;
3. alpha (if it has a prior): Escobar & West (1995) auxiliary-variable update;
4. a draw of P itself: P | labels, values ~ DP(alpha + n, ...), i.e. Dirichlet(n_1..n_K,
   alpha) weights on the values and on a stick-breaking draw of DP(alpha, P0).

All randomness comes from the chain's numpy Generator obtained from
``dpbayes.privacy.noise.noise_source(rng).generator()``.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpbayes.nonparametric import kernels
from dpbayes.nonparametric.fit import DPMixtureFit
from dpbayes.nonparametric.mechanisms import (
    CustomMechanism,
    GaussianMechanism,
    LaplaceMechanism,
    LocalMechanism,
)
from dpbayes.nonparametric.privatize import PrivatizedColumn
from dpbayes.privacy.noise import noise_source
from dpbayes.privacy.validation import check_array, check_finite, check_int, check_positive

__all__ = ["ChainState", "DPMixture", "SortedData"]


@dataclass
class ChainState:
    """The state of one chain: labels of the (sorted) observations, cluster values, alpha."""

    labels: np.ndarray
    counts: np.ndarray
    phi: np.ndarray
    alpha: float
    step: float = 1.0
    accepted: float = 0.0


POOL = 16  # new-cluster draws per refill of the randomness pool of the Laplace sweep
_ZERO = np.zeros(1, dtype=np.int64)
_ZERO_ONE = np.array([0, 1], dtype=np.int64)


@dataclass(frozen=True)
class SortedData:
    """The privatised values sorted increasingly, and the weight of a new cluster per value.

    ``new_weight[i, 0]`` is the prior predictive of z_i (Neal's algorithm 2), on the
    scale of the mechanism's likelihood table (log if ``logscale``); None for a custom
    mechanism (algorithm 8 with auxiliary values).
    """

    z: np.ndarray
    new_weight: np.ndarray | None
    logscale: bool


def _same_mechanism(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a.params() == b.params()


@dataclass(frozen=True, kw_only=True)
class DPMixture:
    """Dirichlet-process mixture of the local mechanism's kernel: the prior of paper 001.

    Parameters
    ----------
    mechanism:
        The local mechanism Q that produced Z (:class:`LaplaceMechanism`,
        :class:`GaussianMechanism` or :class:`CustomMechanism`).
    alpha:
        DP concentration (> 0); the starting value when ``alpha_prior`` is given.
    base:
        (mu, sigma) of the Normal base measure P0; default (0, r) for clipped mechanisms.
    alpha_prior:
        None (alpha fixed) or (shape, rate) of a Gamma prior on alpha.
    m_aux:
        Number of auxiliary values in Neal's algorithm 8 (>= 1).
    stick_atoms:
        Atoms of the truncated stick-breaking draw of the DP(alpha, P0) part of P.
    """

    mechanism: LocalMechanism
    alpha: float = 1.0
    base: tuple[float, float] | None = None
    alpha_prior: tuple[float, float] | None = None
    m_aux: int = 3
    stick_atoms: int = 30
    mh_steps: int = 5
    _mu: float = field(init=False, repr=False)
    _sigma: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.mechanism, LaplaceMechanism | GaussianMechanism | CustomMechanism):
            raise TypeError(
                "mechanism must be a dpbayes.nonparametric LaplaceMechanism, GaussianMechanism "
                f"or CustomMechanism, got {type(self.mechanism).__name__}"
            )
        object.__setattr__(self, "alpha", check_positive(self.alpha, "alpha"))
        base = self.mechanism.default_base() if self.base is None else self.base
        if not isinstance(base, tuple | list) or len(base) != 2:
            raise TypeError(f"base must be a pair (mu, sigma), got {base!r}")
        object.__setattr__(self, "_mu", check_finite(base[0], "base[0] (mu)"))
        object.__setattr__(self, "_sigma", check_positive(base[1], "base[1] (sigma)"))
        if self.alpha_prior is not None:
            if not isinstance(self.alpha_prior, tuple | list) or len(self.alpha_prior) != 2:
                raise TypeError(
                    f"alpha_prior must be None or (shape, rate), got {self.alpha_prior!r}"
                )
            check_positive(self.alpha_prior[0], "alpha_prior[0] (shape)")
            check_positive(self.alpha_prior[1], "alpha_prior[1] (rate)")
        check_int(self.m_aux, "m_aux", minimum=1)
        check_int(self.stick_atoms, "stick_atoms", minimum=1)
        check_int(self.mh_steps, "mh_steps", minimum=1)

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
        if guarantee is None:
            guarantee = self.mechanism.guarantee()
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
        ``progress``: tqdm bar on stderr; None shows it for long runs on a terminal.
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
        if progress is None:
            progress = chains * sweeps * n > 3e7 and sys.stderr.isatty()
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=chains * sweeps, desc="DPMixture Gibbs", unit="sweep", leave=False)
        out_atoms: list[list[np.ndarray]] = []
        out_weights: list[list[np.ndarray]] = []
        out_k = np.zeros((chains, draws), dtype=np.int64)
        out_alpha = np.zeros((chains, draws))
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
                        kept_counts.append(state.counts)
                        kept_phi.append(state.phi)
                    if bar is not None and s % 10 == 9:
                        bar.update(10)
                atoms_c, weights_c = self.draw_p_many(kept_counts, kept_phi, out_alpha[c], gen_p)
                out_atoms.append(atoms_c)
                out_weights.append(weights_c)
        finally:
            if bar is not None:
                bar.close()
        seconds = time.perf_counter() - t0
        return DPMixtureFit.from_draws(
            out_atoms,
            out_weights,
            n_clusters=out_k,
            alpha=out_alpha,
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
        phi = self._mu + self._sigma * gen.standard_normal(k0)
        counts = np.bincount(labels, minlength=k0).astype(np.int64)
        state = ChainState(labels, counts, phi, self.alpha, step=self._sigma)
        return _compact(state)

    def sweep(
        self, state: ChainState, data: SortedData, gen: np.random.Generator, *, adapt: bool = False
    ) -> ChainState:
        """One Gibbs sweep (labels, cluster values, alpha) on :meth:`prepare`'d data."""
        state = self.update_labels(state, data, gen)
        state = self.update_values(state, data.z, gen, adapt=adapt)
        if self.alpha_prior is not None:
            state.alpha = self.update_alpha(state, data.z.shape[0], gen)
        return state

    def prepare(self, z: np.ndarray) -> SortedData:
        """Sort the data and precompute what every sweep reuses (prior predictive weights)."""
        zs = np.sort(np.asarray(z, dtype=float))
        mech = self.mechanism
        if isinstance(mech, LaplaceMechanism):
            rel = np.exp(mech.log_marginal(zs, self._mu, self._sigma) - mech.loglik(zs, zs))
            return SortedData(zs, np.ascontiguousarray(rel[:, None]), False)
        if isinstance(mech, GaussianMechanism):
            lm = mech.log_marginal(zs, self._mu, self._sigma)
            return SortedData(zs, np.ascontiguousarray(lm[:, None]), True)
        return SortedData(zs, None, True)

    def update_labels(
        self, state: ChainState, data: SortedData, gen: np.random.Generator
    ) -> ChainState:
        """Label update: Neal's algorithm 2 for the built-in mechanisms (closed-form prior
        predictive, new values from their one-observation conditional), algorithm 8 with
        ``m_aux`` auxiliary values for a custom Q. Compiled loop; new clusters filled here."""
        mech = self.mechanism
        if isinstance(mech, LaplaceMechanism):
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
        algorithm2 = data.new_weight is not None
        if data.new_weight is not None:
            aux = None
            lik_new = data.new_weight
            alpha_m = state.alpha
        else:
            m = self.m_aux
            aux = self._mu + self._sigma * gen.standard_normal((n, m))
            lik_new = np.ascontiguousarray(lik_fn(zs, aux))
            alpha_m = state.alpha / m
        uniforms = gen.random(n)
        labels = state.labels.copy()
        i0 = 0
        while True:
            i, j, slot = kernels.label_sweep(
                i0, lik, lik_new, labels, counts, alpha_m, uniforms, data.logscale, algorithm2
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
                    zs[i : i + 1], _ZERO, _ZERO_ONE, self._mu, self._sigma
                )
                assert one is not None
                phi[slot] = one.sample(gen.gumbel(size=one.seg.shape[0]), gen.random(1))[0]
            else:
                phi[slot] = aux[i, j]
            if i + 1 < n:
                lik[i + 1 :, slot] = lik_fn(zs[i + 1 :], phi[slot : slot + 1])[:, 0]
            i0 = i + 1
        return _compact(ChainState(labels, counts, phi, state.alpha, state.step, state.accepted))

    def _laplace_labels(
        self, state: ChainState, data: SortedData, gen: np.random.Generator, mech: LaplaceMechanism
    ) -> ChainState:
        """Algorithm 2 for the Laplace mechanism in one compiled loop (see kernels)."""
        assert data.new_weight is not None
        zs = data.z
        n, k = zs.shape[0], state.phi.shape[0]
        phi = np.zeros(k + n)
        phi[:k] = state.phi
        counts = np.zeros(k + n, dtype=np.int64)
        counts[:k] = state.counts
        labels = state.labels.copy()
        uniforms = gen.random(n)
        pool_g, pool_u, pos = gen.gumbel(size=(POOL, 4)), gen.random(POOL), 0
        new_w = data.new_weight[:, 0]
        i, top = 0, k
        while True:
            i, pos, top = kernels.laplace_label_sweep(
                i, zs, new_w, labels, counts, phi, top, state.alpha, uniforms,
                pool_g, pool_u, pos, mech.scale, mech.r, self._mu, self._sigma,
            )  # fmt: skip
            if i >= n:
                break
            pool_g, pool_u, pos = gen.gumbel(size=(POOL, 4)), gen.random(POOL), 0
        counts, phi = kernels.compact(labels, counts, phi, top)
        return ChainState(labels, counts, phi, state.alpha, state.step, state.accepted)

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
        pieces = self.mechanism.conditional(zs, order, starts, self._mu, self._sigma)
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
            return ll - 0.5 * ((phi - self._mu) / self._sigma) ** 2

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
        atoms, weights = self.draw_p_many([state.counts], [state.phi], np.array([state.alpha]), gen)
        return atoms[0], weights[0]

    def draw_p_many(
        self,
        counts: list[np.ndarray],
        phi: list[np.ndarray],
        alpha: np.ndarray,
        gen: np.random.Generator,
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Draws of P | labels, values for many saved states at once (vectorised).

        P | c, phi ~ DP(alpha + n, (alpha P0 + sum_k n_k delta_phi_k) / (alpha + n)), i.e.
        weights (W_1..W_K, W_0) ~ Dirichlet(n_1..n_K, alpha) on the values and on a draw
        of DP(alpha, P0), the latter by stick-breaking truncated at ``stick_atoms``
        (V_j = 1 - U_j^(1/alpha) ~ Beta(1, alpha); the last stick takes the remaining mass).
        Given the states these draws are independent of the chain, so they are made after it.
        """
        d, t = len(counts), self.stick_atoms
        sizes = np.array([c.shape[0] + 1 for c in counts])
        shape = np.concatenate(
            [np.append(c.astype(float), a) for c, a in zip(counts, alpha, strict=True)]
        )
        g = gen.standard_gamma(shape)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        w = g / np.repeat(np.add.reduceat(g, starts), sizes)
        v = 1.0 - gen.random((d, t)) ** (1.0 / alpha[:, None])
        v[:, -1] = 1.0
        stick = v * np.concatenate([np.ones((d, 1)), np.cumprod(1.0 - v[:, :-1], axis=1)], axis=1)
        atoms0 = self._mu + self._sigma * gen.standard_normal((d, t))
        atoms, weights = [], []
        for j in range(d):
            wj = w[starts[j] : starts[j] + sizes[j]]
            atoms.append(np.concatenate([phi[j], atoms0[j]]))
            weights.append(np.concatenate([wj[:-1], wj[-1] * stick[j]]))
        return atoms, weights


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
        state.step,
        state.accepted,
    )
