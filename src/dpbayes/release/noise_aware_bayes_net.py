"""Noise-aware posteriors of Bayesian-network releases (paper 004 Algorithm 1; issue 10).

Laplace on the family count tables (``mechanism="laplace"``, substitute neighbours, n
public) releases r_f = clip(c_f(N) + Lap(b), 0, n) for every cell f of every family table,
where N is the unknown joint contingency table of the n records and c(N) its family
margins. The posterior of the CPTs given the release is

    p(theta | r) = sum_N p(theta | N) P(N | r),   P(N | r) propto P(r | N) P(N),

with P(N) = n!/prod N_i! * prod_{v, pa} [Gamma(A_pa)/Gamma(A_pa + n_pa)]
prod_k Gamma(alpha + c_{v,pa,k}) / Gamma(alpha) (the Bayesian-Dirichlet marginal
likelihood of complete data) and P(r | N) a product of Laplace factors, with the point
masses of the truncation at 0 and n.

* **No edges: exact.** The variables are independent given theta and their CPTs have
  independent priors, so each table is an independent Dirichlet-categorical release
  with public n: an exact :class:`~dpbayes.models.mixtures.SeparableDirichletMixture` per
  node (the counts' convolution structure, no sampling).
* **Edges: MCMC.** The tables share the records, so they do not factorise. A Gibbs
  sampler on N moves t records between two joint cells i, j at a time, drawing t exactly
  from its full conditional over every feasible value (the multinomial coefficient,
  the Dirichlet-multinomial terms and the Laplace factors are all evaluated on the grid
  of t), several chains from over-dispersed starts, with R-hat/ESS on every family count
  and a RuntimeWarning when mixing is poor. Each kept N gives Dir(alpha + c(N)) per CPT
  row exactly, so the row posteriors are Rao-Blackwellised Dirichlet mixtures.

* **Fourier (Algorithm 2): MCMC.** The released coefficients c_a(N) + Lap(b), a != {},
  are linear in N (c_a = sum_cells N_cell (-1)^<a, cell>), so the same sampler applies
  with plain Laplace factors; the empty-set coefficient is n plus the public raise and
  carries no information; the rebuilt (clipped) tables are post-processing and unused.

``sampling`` and ``map`` raise one-line errors naming why (see :func:`_refuse`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special

from dpbayes.models.bayes_net import BayesNet
from dpbayes.models.bayes_net_posterior import BayesNetParameters
from dpbayes.models.mixtures import DirichletMixture, SeparableDirichletMixture
from dpbayes.privacy.noise import noise_source
from dpbayes.privacy.validation import check_int
from dpbayes.release.base import Release
from dpbayes.release.noise_aware import count_log_likelihood, count_posterior, register_noise_aware
from dpbayes.release.noise_aware_mcmc import Diagnostics, diagnose

__all__ = ["MAX_JOINT_CELLS", "BayesNetNoiseAwarePosterior", "bayes_net_noise_aware"]

MAX_JOINT_CELLS = 4096


class BayesNetNoiseAwarePosterior:
    """Posterior of every CPT row given a noisy-count release of a Bayesian network.

    ``node(name, parent_values)`` is the row's posterior (exact Separable mixture, or a
    Rao-Blackwellised Dirichlet mixture over the MCMC draws of the true counts);
    ``method`` says which; ``diagnostics`` is None for the exact case.
    """

    def __init__(
        self,
        model: BayesNet,
        method: str,
        *,
        exact: dict[str, SeparableDirichletMixture] | None = None,
        count_draws: dict[str, np.ndarray] | None = None,
        diagnostics: Diagnostics | None = None,
    ) -> None:
        self.model = model
        self.method = method
        self._exact = exact or {}
        self._draws = count_draws or {}
        self.diagnostics = diagnostics

    def _row_index(self, name: str, parent_values: Any) -> tuple[int, ...]:
        if name not in self.model.variables:
            raise ValueError(f"name must be a model variable, got {name!r}")
        ps = self.model.parents[name]
        if len(parent_values) != len(ps):
            raise ValueError(f"parent_values must give {len(ps)} value(s) for parents {ps}")
        return tuple(
            self.model.variables[p].index(v) for p, v in zip(ps, parent_values, strict=True)
        )

    def node(self, name: str, parent_values: Any = ()) -> Any:
        """The posterior of the CPT row of ``name`` given its parents' ``parent_values``."""
        idx = self._row_index(name, tuple(parent_values))
        if name in self._exact:
            return self._exact[name]
        table: Any = self._draws[name]
        rows = table[(slice(None), *idx)]  # (draws, k)
        w = np.full(rows.shape[0], 1.0 / rows.shape[0])
        return DirichletMixture(w, self.model.alpha + rows)

    def mean(self) -> BayesNetParameters:
        """Posterior-mean CPTs."""
        cpts = {}
        for v in self.model.nodes:
            if v in self._exact:
                cpts[v] = self._exact[v].mean()
            else:
                a = self.model.alpha + self._draws[v]
                cpts[v] = np.mean(a / a.sum(axis=-1, keepdims=True), axis=0)
        return BayesNetParameters(self.model, cpts)

    def intervals(self, level: float = 0.9) -> dict[str, np.ndarray]:
        """Central marginal credible intervals of every CPT entry: table shape + (2,)."""
        out = {}
        for v in self.model.nodes:
            shape = self.model.table_shape(v)
            res = np.empty((*shape, 2))
            for idx in np.ndindex(*shape[:-1]):
                vals = tuple(
                    self.model.variables[p][i]
                    for p, i in zip(self.model.parents[v], idx, strict=True)
                )
                res[idx] = self.node(v, vals).interval(level)
            out[v] = res
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": "bayes-net-noise-aware",
            "method": self.method,
            "mean": {k: v.tolist() for k, v in self.mean().cpts.items()},
            "interval90": {k: v.tolist() for k, v in self.intervals(0.9).items()},
            "diagnostics": None if self.diagnostics is None else self.diagnostics.to_dict(),
        }


def _refuse(rel: Release) -> Any:
    why = {
        "sampling": "the release is a posterior draw whose likelihood needs the trimmed "
        "posterior's normaliser for every possible data set",
        "map": "the exponential mechanism's likelihood needs its normaliser over every "
        "candidate for every possible data set",
    }[rel.mechanism]
    raise ValueError(f"no noise-aware posterior for mechanism {rel.mechanism!r}: {why}")


def _joint_maps(model: BayesNet) -> tuple[int, list[np.ndarray], list[np.ndarray]]:
    """Joint cells (row-major over model.nodes); per node the family cell and row of each."""
    cards = [model.cardinality(v) for v in model.nodes]
    cells = int(np.prod(cards))
    codes = np.indices(cards).reshape(len(cards), -1)
    pos = {v: i for i, v in enumerate(model.nodes)}
    fam, row = [], []
    for v in model.nodes:
        f = np.ravel_multi_index(
            tuple(codes[pos[u]] for u in model.family(v)), model.table_shape(v)
        )
        fam.append(f)
        row.append(f // model.cardinality(v))
    return cells, fam, row


def bayes_net_noise_aware(
    rel: Release, *, iterations: int = 4000, chains: int = 4, rng: Any = None
) -> BayesNetNoiseAwarePosterior:
    """The noise-aware posterior of a ``laplace`` Bayesian-network release (module docstring).

    ``iterations`` pair moves per chain (half burn-in), ``chains`` chains; ``rng`` seeds
    the MCMC (inference draws, not privacy noise). Unused when the network has no edges.
    """
    model: BayesNet = rel.model
    pub = rel.public
    if pub.get("n") is None or pub.get("neighbours") != "substitute":
        raise ValueError(
            "the noise-aware posterior of noisy Bayesian-network counts needs a public n "
            "(neighbours='substitute'); under add/remove n is private"
        )
    n = int(pub["n"])
    scale = float(pub["scale"])
    upper = float(n)
    if not model.edges and rel.mechanism == "laplace":
        released = {v: np.asarray(rel.released["counts"][v], dtype=float) for v in model.nodes}
        exact = {
            v: count_posterior(
                np.full(model.cardinality(v), model.alpha),
                n,
                released[v],
                model.cardinality(v),
                "laplace",
                scale,
                upper,
            )
            for v in model.nodes
        }
        return BayesNetNoiseAwarePosterior(model, "exact", exact=exact)
    its = check_int(iterations, "iterations", minimum=20)
    m = check_int(chains, "chains", minimum=2)
    cells, fam, row = _joint_maps(model)
    if cells > MAX_JOINT_CELLS:
        raise ValueError(
            f"the joint table has {cells} cells (> {MAX_JOINT_CELLS}): too large for the "
            "noise-aware MCMC over the true counts"
        )
    if rel.mechanism == "fourier":
        obs = _fourier_observations(model, rel, scale)
    else:
        obs = _count_observations(model, rel, fam, n, scale)
    draws = _gibbs(model, n, obs, cells, fam, row, its, m, rng)
    keep = draws[:, its // 2 :]  # (chains, kept, cells)
    count_draws, names, series = {}, [], []
    for vi, v in enumerate(model.nodes):
        size = int(np.prod(model.table_shape(v)))
        tab = np.zeros((*keep.shape[:2], size))
        for f in range(size):
            tab[:, :, f] = keep[:, :, fam[vi] == f].sum(axis=2)
        for f in range(size):
            names.append(f"{v}[{f}]")
            series.append(tab[:, :, f])
        count_draws[v] = tab.reshape(-1, *model.table_shape(v))
    diag = diagnose(np.stack(series, axis=2), names, what="noise-aware Bayesian-network posterior")
    return BayesNetNoiseAwarePosterior(model, "mcmc", count_draws=count_draws, diagnostics=diag)


def _gibbs(
    model: BayesNet,
    n: int,
    obs: _Observations,
    cells: int,
    fam: list[np.ndarray],
    row: list[np.ndarray],
    iterations: int,
    m: int,
    rng: Any,
) -> np.ndarray:
    """Pairwise exact-conditional Gibbs on the joint table N; returns (m, iterations, cells).

    Each step picks two cells i != j and draws the number t of records moved from i to j
    from its full conditional over every feasible t (all chains at once, t on one grid).
    """
    gen = noise_source(rng).generator()
    alpha = model.alpha
    big_a = [alpha * model.cardinality(v) for v in model.nodes]
    # over-dispersed starts: N ~ Multinomial(n, Dirichlet(1))
    state = np.stack([gen.multinomial(n, gen.dirichlet(np.ones(cells))) for _ in range(m)])
    state = state.astype(float)
    t = np.arange(-n, n + 1, dtype=float)[None, :]
    out = np.empty((m, iterations, cells))
    rows_m = np.arange(m)
    # indicator matrices: joint cell -> family cell, joint cell -> parent configuration
    fam_ind = [(f[:, None] == np.arange(int(f.max()) + 1)[None, :]).astype(float) for f in fam]
    row_ind = [(r[:, None] == np.arange(int(r.max()) + 1)[None, :]).astype(float) for r in row]
    for it in range(iterations):
        i, j = (int(v) for v in gen.choice(cells, size=2, replace=False))
        ni, nj = state[:, i : i + 1], state[:, j : j + 1]
        ok = (t <= ni) & (-t <= nj)
        lp = -special.gammaln(np.maximum(ni - t, 0.0) + 1.0) - special.gammaln(
            np.maximum(nj + t, 0.0) + 1.0
        )
        for vi in range(len(model.nodes)):  # the Dirichlet-multinomial prior terms
            fi, fj = int(fam[vi][i]), int(fam[vi][j])
            if fi == fj:
                continue
            fc = state @ fam_ind[vi][:, [fi, fj]]  # (m, 2): the two family counts
            ci = np.maximum(fc[:, :1] - t, 0.0)
            cj = np.maximum(fc[:, 1:] + t, 0.0)
            lp += special.gammaln(alpha + ci) + special.gammaln(alpha + cj)
            ri, rj = int(row[vi][i]), int(row[vi][j])
            if ri != rj:
                rc = state @ row_ind[vi][:, [ri, rj]]
                ti = np.maximum(rc[:, :1] - t, 0.0)
                tj = np.maximum(rc[:, 1:] + t, 0.0)
                lp -= special.gammaln(big_a[vi] + ti) + special.gammaln(big_a[vi] + tj)
        diff = obs.matrix[:, j] - obs.matrix[:, i]
        for o in np.flatnonzero(diff):  # the released values that move with t
            value = (state @ obs.matrix[o])[:, None] + diff[o] * t
            lp += obs.log_likelihood(int(o), value)
        lp = np.where(ok, lp, -np.inf)
        p = np.exp(lp - lp.max(axis=1, keepdims=True))
        cum = np.cumsum(p, axis=1)
        u = gen.random(m)[:, None] * cum[:, -1:]
        k = np.minimum((cum < u).sum(axis=1), cum.shape[1] - 1)
        move = t[0, k]
        state[rows_m, i] -= move
        state[rows_m, j] += move
        out[:, it] = state
    return out


class _Observations:
    """Released values r_o = matrix[o] . N + Lap(scale), truncated to [0, upper] or not."""

    def __init__(
        self, matrix: np.ndarray, released: np.ndarray, scale: float, upper: float | None
    ) -> None:
        self.matrix, self.released, self.scale, self.upper = matrix, released, scale, upper

    def log_likelihood(self, o: int, value: np.ndarray) -> np.ndarray:
        r = float(self.released[o])
        if self.upper is None:  # plain Laplace (Fourier coefficients)
            return np.asarray(-np.abs(r - value) / self.scale)
        v = np.maximum(value, 0.0)
        return count_log_likelihood(r, v, "laplace", self.scale, self.upper)


def _count_observations(
    model: BayesNet, rel: Release, fam: list[np.ndarray], n: int, scale: float
) -> _Observations:
    """Algorithm 1: every family-table cell, truncated to [0, n]."""
    blocks, released = [], []
    for vi, v in enumerate(model.nodes):
        size = int(np.prod(model.table_shape(v)))
        blocks.append((fam[vi][None, :] == np.arange(size)[:, None]).astype(float))
        released.append(np.asarray(rel.released["counts"][v], dtype=float).ravel())
    return _Observations(np.concatenate(blocks), np.concatenate(released), scale, float(n))


def _fourier_observations(model: BayesNet, rel: Release, scale: float) -> _Observations:
    """Algorithm 2: the noised Fourier coefficients c_a = sum_cells N (-1)^<a, cell>."""
    names = list(model.nodes)
    cards = [model.cardinality(v) for v in names]
    codes = np.indices(cards).reshape(len(cards), -1)
    rows, released = [], []
    for label, value in rel.released["coefficients"].items():
        if label == "{}":
            continue  # the empty set is n (public) plus the public raise: no information
        mask = [names.index(u) for u in label.split(",")]
        parity = codes[mask].sum(axis=0) % 2
        rows.append(np.where(parity == 0, 1.0, -1.0))
        released.append(float(value))
    return _Observations(np.array(rows), np.array(released), scale, None)


register_noise_aware("laplace", BayesNet)(bayes_net_noise_aware)
register_noise_aware("fourier", BayesNet)(bayes_net_noise_aware)
for _mech in ("sampling", "map"):
    register_noise_aware(_mech, BayesNet)(_refuse)
