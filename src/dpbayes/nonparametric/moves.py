"""Moves on P with the labels summed out: what makes the Gibbs sampler mix under heavy noise.

Why. The Gibbs sampler of paper 001 alternates labels | values and values | labels. When
the local noise is large against the spread of X (Laplace scale 2r/eps), an observation
barely prefers one cluster to another, so one sweep reshuffles labels almost at random
and the cluster sizes, hence the shape of P, move by O(1/sqrt(n)) per sweep: the chain
behaves like EM for the mixture weights, whose rate is the fraction of missing
information (close to 1 here). Functionals the data pin down (the mean) mix well,
the shape (the CDF at a point) does not, and the worse the larger n.

What. After each Gibbs sweep, P is made explicit and moved with the labels summed out:

1. P | labels, values: weights Dirichlet(n_1..n_K, alpha) on the cluster values and a
   stick-breaking draw of DP(alpha, P0) for the rest, continued until the remaining mass
   is below ``TAIL_MASS`` (it is lumped into the last atom); the atoms are put in a
   size-biased random order, in which the weights of a DP are GEM(alpha) distributed.
2. Slice-sampling moves (Neal 2003) that leave p(P | z), proportional to the DP prior
   times prod_i sum_k w_k Q(z_i | y_k), invariant:
   * the base's (mu, sigma) with every atom's prior quantile held fixed (the
     non-centred parametrisation; with the centred update of :mod:`base` this is the
     interweaving strategy of Yu & Meng 2011): it stretches or shifts all of P at once;
   * the location of each of the first atoms (prior N(mu, sigma^2) on the support);
   * transfers of weight between pairs of atoms (prior: the GEM density of the ordered
     weights, log p = (alpha - 1) log R_{T-1} - sum_{m < T-1} log R_m with R_m the mass
     after position m).
   Atoms and pairs are chosen by their positions, which these moves do not change.
   The base, atom and pair moves are compiled (:mod:`dpbayes.nonparametric.kernels_slice`:
   in Python, their overhead halved the sweeps per second at n <= 1,000); the alpha move,
   which may extend the sticks, stays here.
3. Labels | P: independent categorical draws (compiled; O(n log T) for Laplace).

The result is again a state of the collapsed sampler (the occupied atoms are the cluster
values). Every step leaves the joint posterior of (P, labels) invariant, up to the
stick-breaking remainder below ``TAIL_MASS`` (its effect on the likelihood of any
observation is below TAIL_MASS e^eps relative). All randomness comes from the chain's
Generator.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpbayes.nonparametric import kernels_moves as km
from dpbayes.nonparametric import kernels_slice as ks
from dpbayes.nonparametric.base import BasePrior, draw_base

__all__ = ["TAIL_MASS", "MixtureLikelihood", "laplace_exps", "marginal_block"]

TAIL_MASS = 1e-10
ATOM_WIDTH = 8.0  # slice width of an atom move, in noise scales over sqrt(n w_k + 1)
#: Atom and weight moves update m_i by differences, m_i + w (Q(z_i | y') - Q(z_i | y)),
#: only while the relative likelihoods span at most e^30: a term the moved atom dominated
#: is then at least e^-30 = 1e-13 of m_i, 1,000 times its rounding (1e-16 m_i). Beyond,
#: they recompute the m_i from all atoms.
EXACT_RANGE = 30.0


def laplace_exps(zs: np.ndarray, r: float, b: float) -> tuple[np.ndarray, np.ndarray]:
    """e^{u/b} and e^{-u/b} for u = clip(z, -r, r), per observation (Laplace mechanism)."""
    u = np.clip(zs, -r, r)
    return np.exp(u / b), np.exp(-u / b)


@dataclass(frozen=True)
class MixtureLikelihood:
    """The sorted data in the form the label-integrated likelihood needs (once per fit).

    ``u``/``cnt``: distinct values the likelihood depends on and their multiplicities
    (Laplace: clip(z), the values beyond +-r collapse to -r and r, with ``eu``/``emu`` =
    e^{+-u/b}; Gaussian: s = z / tau^2, with ``eu`` holding clip(z)).
    ``u_all`` (and ``eu_all``, ``emu_all``): per observation, in the sampler's sorted order.
    """

    kind: str
    u: np.ndarray
    cnt: np.ndarray
    eu: np.ndarray
    emu: np.ndarray
    u_all: np.ndarray
    eu_all: np.ndarray
    emu_all: np.ndarray
    scale: float
    r: float

    @functools.cached_property
    def log_range(self) -> float:
        """max_i of log(max_y Q(z_i | y) / min_y Q(z_i | y)) over atoms y in [-r, r]:
        eps = 2r/b for Laplace; max_i 2r |z_i| / tau^2 + r^2 / 2 tau^2 for the Gaussian
        (computed once: the moves ask at every evaluation)."""
        if self.kind == "laplace":
            return 2.0 * self.r / self.scale
        return (
            2.0 * self.r * float(np.max(np.abs(self.u), initial=0.0))
            + 0.5 * (self.r / self.scale) ** 2
        )

    @property
    def by_differences(self) -> bool:
        """Whether a move may update m_i by differences (see :data:`EXACT_RANGE`)."""
        return self.log_range <= EXACT_RANGE

    @classmethod
    def build(
        cls, mech: Any, zs: np.ndarray, exps: tuple[np.ndarray, np.ndarray] | None = None
    ) -> MixtureLikelihood:
        """``exps``: :func:`laplace_exps` of ``zs`` if already computed (Laplace)."""
        r = float(mech.r)
        if hasattr(mech, "scale"):  # LocalLaplace
            b = float(mech.scale)
            u_all = np.clip(zs, -r, r)
            vals, cnt = np.unique(u_all, return_counts=True)
            eu_all, emu_all = laplace_exps(zs, r, b) if exps is None else exps
            return cls(
                "laplace", vals, cnt.astype(float), np.exp(vals / b), np.exp(-vals / b),
                u_all, eu_all, emu_all, b, r,
            )  # fmt: skip
        tau = float(mech.sigma)
        sv = zs / tau**2
        uv = np.clip(zs, -r, r)
        one = np.ones(zs.shape[0])
        return cls("gauss", sv, one, uv, one, sv, uv, one, tau, r)

    @functools.cached_property
    def tied(self) -> np.ndarray:
        """The i with cnt_i != 1 (few: ties, and the values collapsed at +-r)."""
        return np.flatnonzero(self.cnt != 1.0)

    def sum_log(self, m: np.ndarray) -> float:
        """sum_i cnt_i log m_i."""
        return float(km.sum_log(m, self.cnt, self.tied))

    def mix(self, atoms: np.ndarray, w: np.ndarray) -> np.ndarray:
        """m_i for atoms (in any order, clipped to [-r, r] here) with weights w."""
        out, r, b = np.empty(self.u.shape[0]), self.r, self.scale
        if self.kind == "laplace":
            return km.laplace_mix_atoms(self.u, self.eu, self.emu, atoms, w, r, b, out)  # type: ignore[no-any-return]
        return km.gauss_mix_atoms(self.u, self.eu, atoms, w, b, r, out)  # type: ignore[no-any-return]

    def labels(self, y: np.ndarray, w: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
        """Per observation, an index into the (sorted) atoms y drawn given P."""
        out = np.empty(self.u_all.shape[0], dtype=np.int64)
        if self.kind == "laplace":
            return km.laplace_labels(  # type: ignore[no-any-return]
                self.u_all, self.eu_all, self.emu_all, y, w, self.scale, uniforms, out
            )
        return km.gauss_labels(  # type: ignore[no-any-return]
            self.u_all, self.eu_all, y, w, self.scale, uniforms, out
        )


def augment(
    counts: np.ndarray,
    phi: np.ndarray,
    alpha: float,
    mu: float,
    sigma: float,
    r: float | None,
    gen: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, float]:
    """A draw of P | labels, values: (atoms, weights) in a size-biased random order and the
    stick-breaking remainder (< TAIL_MASS, left out of the likelihood)."""
    g = gen.standard_gamma(np.append(counts.astype(float), alpha))
    w_occ = g[:-1] / g.sum()
    left = float(g[-1] / g.sum())
    sticks: list[np.ndarray] = []
    while left >= TAIL_MASS:
        # each stick lowers log(left) by 1 / alpha on average: drawn in one batch of about
        # half again as many as that takes (those after the last one needed are not used)
        size = 32 + math.ceil(1.5 * alpha * math.log(left / TAIL_MASS))
        v = 1.0 - gen.random(size) ** (1.0 / alpha)
        rest = left * np.cumprod(1.0 - v)
        take = min(int(np.searchsorted(-rest, -TAIL_MASS)) + 1, size)
        sticks.append(-np.diff(np.concatenate([[left], rest[:take]])))
        left = float(rest[take - 1])
    tail_w = np.concatenate(sticks) if sticks else np.zeros(0)
    tail = draw_base(np.array([mu]), np.array([sigma]), r, gen, tail_w.shape[0])[0]
    atoms = np.concatenate([phi, tail])
    weights = np.concatenate([w_occ, tail_w])
    keys = gen.standard_exponential(weights.shape[0]) / np.maximum(weights, 1e-300)
    order = np.argsort(keys)
    return atoms[order], weights[order], left


class _P:
    """P during the moves: atoms (size-biased order), weights, remainder, the cached m_i."""

    def __init__(
        self, lik: MixtureLikelihood, atoms: np.ndarray, w: np.ndarray, rem: float
    ) -> None:
        self.lik, self.atoms, self.w, self.rem = lik, atoms, w, rem
        self.refresh()

    def refresh(self) -> None:
        self.m = self.mix(self.atoms)
        self.ll = self.lik.sum_log(self.m)

    def mix(self, atoms: np.ndarray) -> np.ndarray:
        return self.lik.mix(atoms, self.w)


def _move_base(
    p: _P, mu: float, sigma: float, prior: BasePrior, r: float | None, gen: np.random.Generator
) -> tuple[float, float]:
    """Non-centred slice moves of (mu, log sigma): atoms keep their prior quantiles."""
    lik = p.lik
    mu, sigma, p.ll = ks.base_moves(
        lik.kind == "laplace", lik.u, lik.eu, lik.emu, lik.cnt, lik.tied, lik.r, lik.scale,
        p.atoms, p.w, p.m, p.ll, mu, sigma, prior.mu_mean, prior.mu_sd,
        math.log(prior.sigma_lo), math.log(prior.sigma_hi), -1.0 if r is None else float(r),
        gen.random(ks.uniforms_needed(2)), np.zeros(1, dtype=np.int64),
    )  # fmt: skip
    return mu, sigma


def _move_alpha(
    p: _P,
    alpha: float,
    prior: tuple[float, float],
    mu: float,
    sigma: float,
    r: float | None,
    gen: np.random.Generator,
) -> float:
    """Non-centred slice move of log alpha: the sticks keep their prior quantiles.

    In the size-biased order the sticks V_k = w_k / (mass from position k on) are i.i.d.
    Beta(1, alpha); with l_k = log(1 - U_k) = alpha log(1 - V_k) fixed, alpha' gives
    log(1 - V_k') = l_k / alpha'. Sticks (and atoms, from P0) beyond those instantiated
    are drawn from their prior when a larger alpha' leaves a remainder >= TAIL_MASS
    (:func:`dpbayes.nonparametric.kernels_slice.alpha_move`, compiled): drawn here ahead,
    about as many as alpha' = e^2 alpha needs, and more if the move asks for them.
    """
    tail = np.maximum(np.cumsum(p.w[::-1])[::-1] + p.rem, 1e-300)  # mass from position k on
    lq = alpha * np.log1p(-np.minimum(p.w / tail, 1.0 - 1e-16))
    t0 = lq.shape[0]
    shape, rate = prior
    lik = p.lik
    unif = gen.random(ks.uniforms_needed(1))
    # each new stick lowers sum l_k by 1 on average: alpha' = e^2 alpha (stepping out by
    # four widths) needs about -log TAIL_MASS e^2 alpha in all
    more = 32 + math.ceil(-math.log(TAIL_MASS) * math.exp(2.0) * alpha)
    # the kernel reads position k's atom uniform at pool_u[k]: the first t0 atoms exist
    sticks, pool_u, m = lq, np.zeros(t0), p.m.copy()
    while True:
        sticks = np.concatenate([sticks, np.log(gen.random(more))])
        pool_u = np.concatenate([pool_u, gen.random(more)])
        size = sticks.shape[0]
        atoms = np.concatenate([p.atoms, np.empty(size - t0)])
        w = np.empty(size)
        alpha_new, t, rem, ll = ks.alpha_move(
            lik.kind == "laplace", lik.u, lik.eu, lik.emu, lik.cnt, lik.tied, lik.r,
            lik.scale, atoms, sticks, t0, pool_u, w, m, p.ll, alpha, shape, rate, mu, sigma,
            -1.0 if r is None else float(r), math.log(TAIL_MASS), unif,
            np.zeros(1, dtype=np.int64),
        )  # fmt: skip
        if t >= 0:
            break
        more *= 4
    p.atoms, p.w, p.rem, p.m, p.ll = atoms[:t], w[:t], rem, m, ll
    return float(alpha_new)


def marginal_block(
    model: Any, state: Any, lik: MixtureLikelihood, gen: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float, float]:
    """Steps 1-3 of the module docstring; returns (labels, counts, values, alpha, mu, sigma)."""
    r = model._r
    mu, sigma, alpha = state.mu, state.sigma, state.alpha
    atoms, w, rem = augment(state.counts, state.phi, alpha, mu, sigma, r, gen)
    p = _P(lik, atoms, w, rem)
    if isinstance(model.base_prior, BasePrior):
        mu, sigma = _move_base(p, mu, sigma, model.base_prior, r, gen)
    if model.alpha_prior is not None:
        alpha = _move_alpha(p, alpha, model.alpha_prior, mu, sigma, r, gen)
    t = p.atoms.shape[0]
    lower, upper = (-r, r) if r is not None else (-math.inf, math.inf)
    p.ll = ks.atom_and_pair_moves(
        lik.kind == "laplace", lik.by_differences, lik.u, lik.eu, lik.emu, lik.cnt, lik.tied,
        lik.r, lik.scale, p.atoms, p.w, p.rem, p.m, p.ll, mu, sigma, lower, upper,
        model.atom_moves, model.pair_moves, ATOM_WIDTH,
        gen.random(ks.uniforms_needed(model.atom_moves + model.pair_moves, model.pair_moves)),
        np.zeros(1, dtype=np.int64),
    )  # fmt: skip
    y = np.clip(p.atoms, -lik.r, lik.r)
    o = np.argsort(y, kind="stable")
    uniforms = np.asarray(gen.random(lik.u_all.shape[0]))
    pick = o[lik.labels(np.ascontiguousarray(y[o]), np.ascontiguousarray(p.w[o]), uniforms)]
    counts_all = np.bincount(pick, minlength=t)
    occupied = np.flatnonzero(counts_all)
    relabel = np.full(t, -1, dtype=np.int64)
    relabel[occupied] = np.arange(occupied.shape[0])
    values = p.atoms[occupied].copy()
    return relabel[pick], counts_all[occupied].astype(np.int64), values, alpha, mu, sigma
