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
* **Edges: MCMC.** The tables share the records, so they do not factorise. A compiled
  sampler on N (:mod:`.noise_aware_bayes_net_jit`) moves t records between two joint
  cells i, j at a time, t from its exact full conditional over every feasible value
  (the multinomial coefficient, the Dirichlet-multinomial terms and the Laplace factors
  on the grid of t; three moves in four overrelaxed by reflecting the cdf), plus
  Metropolis-Hastings moves relabelling one variable in T random records (a whole CPT
  row at once); several chains from over-dispersed starts, with R-hat/ESS on every
  family count and a RuntimeWarning when mixing is poor. Each kept N gives Dir(alpha + c(N)) per CPT
  row exactly, so the row posteriors are Rao-Blackwellised Dirichlet mixtures.

* **Fourier (Algorithm 2): MCMC.** The released coefficients c_a(N) + Lap(b), a != {},
  are linear in N (c_a = sum_cells N_cell (-1)^<a, cell>), so the same sampler applies
  with plain Laplace factors; the empty-set coefficient is n plus the public raise and
  carries no information; the rebuilt (clipped) tables are post-processing and unused.

* **Posterior sampling (paper 004 §4, Lemma 2): MCMC.** The release is D draws
  theta~_d of every CPT row from Dir(alpha + c_row(N)) truncated to the trimmed region
  {theta_k >= p_v for every k}, independent given N, so

      P(theta~ | N) = prod_d prod_rows Dir(theta~_{d,row}; alpha + c_row) / Z_row(c_row),

  Z_row = the mass of Dir(alpha + c_row) in the trimmed region. Its lgamma terms are D
  copies of the inverse of the Bayesian-Dirichlet marginal's, so the target on N is the
  multinomial coefficient, (1 - D) times the Bayesian-Dirichlet terms, sum_f c_f
  sum_d log theta~_{d,f} and -D sum_rows log Z_row (for D = 1: the multinomial with
  the released CPTs' joint, reweighted by 1 / Z). The same sampler runs on it. The
  recipient's prior is the model's Dirichlet (the trimming is the mechanism's, not
  the recipient's); n is public under substitute neighbours but not written in the
  release, so it is the argument ``n``.

  *Z_row exact for binary nodes*: Z = I_{1-p}(a, b) - I_p(a, b), a = alpha + c_0,
  b = alpha + c_1, each regularised incomplete beta in log space by its continued
  fraction (relative error ~1e-14 even where Z underflows a double, which happens:
  a draw at the trimming bound is consistent with every N whose posterior lies beyond
  it), tabulated over the counts (n <= 2047) or computed per use.
  *Z_row taken as 1 for nodes with k >= 3* (the mass of a box in a Dirichlet has no
  practical exact form): the sampler ignores it and reports the check
  ``normaliser["log_z_sd"]``, the sd over the kept draws of N of D sum_rows log Z_row
  (Monte Carlo, 2000 Dirichlet draws a row); a RuntimeWarning when it exceeds 0.1,
  i.e. when the ignored factor is not constant over the posterior.

* **MAP (paper 004 Algorithm 3): MCMC, exact target.** The release picks, independently
  per CPT row, a point g~ of a data-independent grid on the trimmed simplex (rebuilt
  from the public ``trim`` and ``grid`` by :func:`dpbayes.release.sampling.map_grid`) by the
  exponential mechanism with utility sum_k (alpha + c_k - 1) log g_k at the public
  temperature ``scale`` (2L/eps, L/eps monotonic under add/remove), so with w = 1/scale

      P(g~ | N) = prod_rows exp(w sum_k (alpha + c_k - 1) log g~_k) / Z_row(c_row),
      Z_row(c) = sum_{g in grid} exp(w sum_k (alpha + c_k - 1) log g_k).

  The target on N is the multinomial coefficient, the Bayesian-Dirichlet terms,
  sum_f c_f w log g~_f and -sum_rows log Z_row(c_row); Z_row is the finite sum over the
  grid, an exact log-sum-exp (:func:`~.noise_aware_bayes_net_jit.grid_log_z`), stored in a
  lazily filled table over the row's counts (base n + 1, while all tables fit in
  ``MAX_MAP_TABLE`` entries: binary nodes to n ~ 2000, 3-valued to n ~ 200) or computed
  on use (slow: O(grid) per value of t). n is public under substitute neighbours and
  written in the release; under add/remove pass ``n``.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from scipy import special

from dpbayes import display
from dpbayes.models.bayes_net import BayesNet
from dpbayes.models.bayes_net_posterior import BayesNetParameters, bayes_net_rows, cpt_summary
from dpbayes.models.mixtures import DirichletMixture, SeparableDirichletMixture
from dpbayes.privacy.noise import noise_source
from dpbayes.privacy.validation import check_int
from dpbayes.progress import Progress
from dpbayes.release.base import Release
from dpbayes.release.noise_aware import count_posterior, register_noise_aware
from dpbayes.release.noise_aware_bayes_net_jit import run_sweeps, trim_mass_table
from dpbayes.release.noise_aware_mcmc import (
    Diagnostics,
    diagnose,
    diagnostics_rows,
    inference_data,
)

__all__ = [
    "DEFAULT_SWEEPS",
    "MAX_JOINT_CELLS",
    "BayesNetNoiseAwarePosterior",
    "bayes_net_noise_aware",
]

MAX_JOINT_CELLS = 4096
DEFAULT_SWEEPS = 4000
ADAPT = 50  # sweeps between adaptations of the relabelling widths (burn-in only)


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
        normaliser: dict[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.method = method
        self._exact = exact or {}
        self._draws = count_draws or {}
        self.diagnostics = diagnostics
        self.normaliser = normaliser

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

    def summary(self, level: float = 0.95) -> Any:
        """Every CPT entry's posterior mean, sd and central interval (a DataFrame)."""
        return cpt_summary(self.model, self.node, level)

    def to_inference_data(self) -> Any:
        """ArviZ ``InferenceData`` of the MCMC: per node, the draws of the true family
        counts (``counts_<node>``) and the CPT's conditional posterior mean given them
        (``cpt_<node>``, the Rao-Blackwellised estimate), dims (chain, draw, *table)."""
        if self.diagnostics is None:
            raise ValueError(
                "this posterior is exact (method 'exact'): it has no MCMC draws; "
                "use summary() or node(...)"
            )
        post: dict[str, np.ndarray] = {}
        dims: dict[str, list[str]] = {}
        for v in self.model.nodes:
            counts = self._draws[v]
            a = self.model.alpha + counts
            post[f"counts_{v}"] = counts
            post[f"cpt_{v}"] = a / a.sum(axis=-1, keepdims=True)
            dims[f"counts_{v}"] = dims[f"cpt_{v}"] = [*self.model.parents[v], v]
        return inference_data(
            post,
            self.diagnostics,
            dims=dims,
            coords={v: list(vals) for v, vals in self.model.variables.items()},
            attrs={"model": "noise-aware posterior of a Bayesian-network release"},
        )

    def _display(self) -> tuple[str, list[tuple[str, str]]]:
        rows = [*bayes_net_rows(self.model), ("method", self.method)]
        if self.diagnostics is not None:
            rows += diagnostics_rows(self.diagnostics)
        rows.append(("table", ".summary() for every CPT entry"))
        return "BayesNetNoiseAwarePosterior", rows

    def __repr__(self) -> str:
        return display.text(self)

    def _repr_html_(self) -> str:
        return display.html(self)

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": "bayes-net-noise-aware",
            "method": self.method,
            "mean": {k: v.tolist() for k, v in self.mean().cpts.items()},
            "interval90": {k: v.tolist() for k, v in self.intervals(0.9).items()},
            "diagnostics": None if self.diagnostics is None else self.diagnostics.to_dict(),
            "normaliser": self.normaliser,
        }


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
    rel: Release,
    *,
    iterations: int = DEFAULT_SWEEPS,
    chains: int = 4,
    rng: Any = None,
    n: int | None = None,
    n_prior: Any = None,
) -> BayesNetNoiseAwarePosterior:
    """The noise-aware posterior of a ``laplace``, ``fourier``, ``sampling`` or ``map``
    Bayesian-network release (module docstring).

    ``iterations`` sweeps per chain (half burn-in), each sweep max(cells, 8) pair moves
    over the joint cells; ``chains`` chains; ``rng`` seeds the MCMC (inference draws, not
    privacy noise). Unused for a ``laplace`` release of a network without edges. ``n``:
    the number of records (``sampling`` and ``map`` only; default the release's public n,
    which ``sampling`` does not write and ``map`` writes under substitute neighbours).
    ``n_prior``: the prior on n of a ``laplace`` or ``fourier`` release under add/remove
    (n private; :mod:`.noise_aware_bayes_net_n`; default flat).
    """
    model: BayesNet = rel.model
    pub = rel.public
    if rel.mechanism in ("laplace", "fourier") and pub.get("neighbours") == "add-remove":
        from dpbayes.release.noise_aware_bayes_net_n import bayes_net_private_n

        if n is not None:
            raise ValueError(
                "n is private in an add/remove release: give a prior on it (n_prior=...), "
                "not a value"
            )
        return bayes_net_private_n(  # type: ignore[no-any-return]
            rel, iterations=iterations, chains=chains, rng=rng, n_prior=n_prior
        )
    if n_prior is not None:
        raise ValueError(
            "n_prior applies only to laplace and fourier releases under add/remove (n private)"
        )
    if rel.mechanism == "sampling":
        return _sampling_posterior(rel, iterations=iterations, chains=chains, rng=rng, n=n)
    if rel.mechanism == "map":
        return _map_posterior(rel, iterations=iterations, chains=chains, rng=rng, n=n)
    if pub.get("n") is None or pub.get("neighbours") != "substitute":
        raise ValueError(
            "the noise-aware posterior of noisy Bayesian-network counts needs a public n "
            "or the add/remove relation, got neither"
        )
    if n is not None and check_int(n, "n", minimum=1) != int(pub["n"]):
        raise ValueError(f"n must be the release's public n = {pub['n']}, got {n}")
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
    fam_tables = _gibbs(model, n, obs, cells, fam, row, its, m, rng, _Extra.none(model))
    count_draws, diag = _summarise(model, fam_tables, its)
    return BayesNetNoiseAwarePosterior(model, "mcmc", count_draws=count_draws, diagnostics=diag)


def _summarise(
    model: BayesNet, fam_tables: np.ndarray, its: int
) -> tuple[dict[str, np.ndarray], Diagnostics]:
    """The kept half's family tables per node, and R-hat/ESS of every family count."""
    keep = fam_tables[:, its // 2 :]  # (chains, kept, sum of the family-table sizes)
    count_draws, names, series = {}, [], []
    offset = 0
    for v in model.nodes:
        size = int(np.prod(model.table_shape(v)))
        tab = keep[:, :, offset : offset + size].astype(float)
        offset += size
        for f in range(size):
            names.append(f"{v}[{f}]")
            series.append(tab[:, :, f])
        count_draws[v] = tab.reshape(-1, *model.table_shape(v))
    diag = diagnose(np.stack(series, axis=2), names, what="noise-aware Bayesian-network posterior")
    return count_draws, diag


class _Extra:
    """The target's terms beyond noisy counts (see ``run_sweeps``): BD weight, linear
    coefficients per family cell, the binary rows' log-normaliser tables (``sampling``)
    and the exponential mechanism's grids (``map``; ``mz`` of ``run_sweeps``)."""

    def __init__(
        self,
        bd_w: float,
        lin: np.ndarray,
        sib: np.ndarray,
        ztab: np.ndarray,
        ztix: np.ndarray,
        zp: np.ndarray,
        zw: float,
        mz: tuple[Any, ...],
    ) -> None:
        self.bd_w, self.lin, self.sib, self.zw = bd_w, lin, sib, zw
        self.ztab, self.ztix, self.zp = ztab, ztix, zp
        self.mz = mz

    @staticmethod
    def none(model: BayesNet) -> _Extra:
        f = sum(int(np.prod(model.table_shape(v))) for v in model.nodes)
        return _Extra(
            1.0,
            np.zeros(f),
            np.zeros(f, dtype=np.int64),
            np.zeros((1, 1, 1)),
            np.full(len(model.nodes), -1, dtype=np.int64),
            np.ones(1),
            0.0,
            _no_map(model),
        )


MAX_TABLE = 1 << 22  # entries of the tabulated binary log-normalisers (n <= 2047)
MAX_MAP_TABLE = 1 << 23  # entries of the lazily filled map log-normaliser tables (64 MB)


def _fam_layout(model: BayesNet) -> tuple[np.ndarray, np.ndarray]:
    cards = np.array([model.cardinality(v) for v in model.nodes], dtype=np.int64)
    sizes = [int(np.prod(model.table_shape(v))) for v in model.nodes]
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64), cards


def _no_map(model: BayesNet) -> tuple[Any, ...]:
    """``mz`` with no node using the exponential mechanism's normaliser."""
    nodes = len(model.nodes)
    fam_off, cards = _fam_layout(model)
    return (
        np.zeros((nodes, 1, 1)),
        np.zeros((nodes, 1)),
        np.zeros(nodes, dtype=np.int64),
        np.zeros(1),
        np.zeros(nodes, dtype=np.int64),
        np.zeros(nodes, dtype=np.int64),
        1.0,
        fam_off,
        cards,
        np.zeros(int(cards.max()), dtype=np.int64),
    )


def _sampling_posterior(
    rel: Release, *, iterations: int, chains: int, rng: Any, n: int | None
) -> BayesNetNoiseAwarePosterior:
    """p(theta | released draws) for a ``sampling`` release (module docstring)."""
    model: BayesNet = rel.model
    pub = rel.public
    n_rec = pub.get("n") if n is None else n
    if n_rec is None:
        raise ValueError(
            "n must be given: a sampling release does not write the number of records "
            "(public under substitute neighbours, private under add/remove)"
        )
    n_rec = check_int(n_rec, "n", minimum=1)
    its = check_int(iterations, "iterations", minimum=20)
    m = check_int(chains, "chains", minimum=2)
    draws = rel.released["draws"]
    d = len(draws)
    trims = {v: float(t) for v, t in pub["trims"].items()}
    cells, fam, row = _joint_maps(model)
    if cells > MAX_JOINT_CELLS:
        raise ValueError(
            f"the joint table has {cells} cells (> {MAX_JOINT_CELLS}): too large for the "
            "noise-aware MCMC over the true counts"
        )
    lin_parts, sib_parts = [], []
    offset = 0
    ztix = np.full(len(model.nodes), -1, dtype=np.int64)
    zps: list[float] = []
    for vi, v in enumerate(model.nodes):
        shape = model.table_shape(v)
        size = int(np.prod(shape))
        theta = np.stack([np.asarray(dr[v], dtype=float).reshape(shape) for dr in draws])
        if np.any(theta < trims[v] * (1 - 1e-9)):
            raise ValueError(f"released draws of {v!r} lie outside the trimmed region")
        lin_parts.append(np.log(theta).sum(axis=0).ravel())
        local = np.arange(size)
        if shape[-1] == 2:
            sib_parts.append(offset + (local ^ 1))
            if trims[v] not in zps:
                zps.append(trims[v])
            ztix[vi] = zps.index(trims[v])
        else:
            sib_parts.append(offset + local)
        offset += size
    size_t = n_rec + 1 if (n_rec + 1) ** 2 * max(len(zps), 1) <= MAX_TABLE else 1
    ztab = np.stack(
        [trim_mass_table(float(model.alpha), p, size_t - 1) for p in zps] or [np.zeros((1, 1))]
    )
    extra = _Extra(
        1.0 - d,
        np.concatenate(lin_parts),
        np.concatenate(sib_parts).astype(np.int64),
        ztab,
        ztix,
        np.array(zps or [0.5]),
        float(d),
        _no_map(model),
    )
    empty = _Observations(np.zeros((0, cells)), np.zeros(0), 1.0)
    fam_tables = _gibbs(model, n_rec, empty, cells, fam, row, its, m, rng, extra)
    count_draws, diag = _summarise(model, fam_tables, its)
    unit = [v for v in model.nodes if model.cardinality(v) > 2]
    check = _normaliser_check(model, count_draws, trims, unit, d, rng)
    normaliser = {
        "exact_nodes": [v for v in model.nodes if model.cardinality(v) == 2],
        "unit_nodes": unit,
        "log_z_sd": check,
    }
    return BayesNetNoiseAwarePosterior(
        model, "mcmc", count_draws=count_draws, diagnostics=diag, normaliser=normaliser
    )


def _map_posterior(
    rel: Release, *, iterations: int, chains: int, rng: Any, n: int | None
) -> BayesNetNoiseAwarePosterior:
    """p(theta | released grid CPTs) for a ``map`` release (module docstring)."""
    from dpbayes.release.sampling import map_grid

    model: BayesNet = rel.model
    pub = rel.public
    if n is not None and pub.get("n") is not None and check_int(n, "n", minimum=1) != pub["n"]:
        raise ValueError(f"n must be the release's public n = {pub['n']}, got {n}")
    n_rec = pub.get("n") if n is None else n
    if n_rec is None:
        raise ValueError(
            "n must be given: this map release does not write the number of records "
            "(public under substitute neighbours, private under add/remove)"
        )
    n_rec = check_int(n_rec, "n", minimum=1)
    its = check_int(iterations, "iterations", minimum=20)
    m = check_int(chains, "chains", minimum=2)
    scale = pub.get("scale", rel.guarantee.details.get("scale"))
    if scale is None or not float(scale) > 0:
        raise ValueError("the map release must carry its selection temperature (public 'scale')")
    w = 1.0 / float(scale)
    trim, steps = float(pub["trim"]), int(pub["grid"])
    cells, fam, row = _joint_maps(model)
    if cells > MAX_JOINT_CELLS:
        raise ValueError(
            f"the joint table has {cells} cells (> {MAX_JOINT_CELLS}): too large for the "
            "noise-aware MCMC over the true counts"
        )
    nodes = len(model.nodes)
    fam_off, cards = _fam_layout(model)
    kmax = int(cards.max())
    grids = {k: map_grid(k, trim, steps) for k in {int(k) for k in cards}}
    gmax = max(len(g) for g in grids.values())
    mgrid = np.zeros((nodes, gmax, kmax))
    mbase = np.zeros((nodes, gmax))
    m_g = np.zeros(nodes, dtype=np.int64)
    moff = np.zeros(nodes, dtype=np.int64)
    mside = np.zeros(nodes, dtype=np.int64)
    lin_parts, tabulated, offset = [], [], 0
    alpha = float(model.alpha)
    for vi, v in enumerate(model.nodes):
        k = int(cards[vi])
        g = grids[k]
        logg = np.log(g)
        mgrid[vi, : len(g), :k] = logg
        mbase[vi, : len(g)] = w * (alpha - 1.0) * logg.sum(axis=1)
        m_g[vi] = len(g)
        cpt = np.asarray(rel.released["cpts"][v], dtype=float).reshape(-1, k)
        gap = np.min(np.abs(cpt[:, None, :] - g[None, :, :]).max(axis=2), axis=1)
        if np.any(gap > 1e-9):
            raise ValueError(f"released CPT rows of {v!r} are not points of the map grid")
        lin_parts.append(w * np.log(cpt).ravel())
        entries = (n_rec + 1) ** k
        if offset + entries <= MAX_MAP_TABLE:
            moff[vi], mside[vi] = offset, n_rec + 1
            offset += entries
            tabulated.append(v)
    extra = _Extra.none(model)
    extra.lin = np.concatenate(lin_parts)
    extra.mz = (
        mgrid,
        mbase,
        m_g,
        np.full(max(offset, 1), np.nan),
        moff,
        mside,
        w,
        fam_off,
        cards,
        np.zeros(kmax, dtype=np.int64),
    )
    empty = _Observations(np.zeros((0, cells)), np.zeros(0), 1.0)
    fam_tables = _gibbs(model, n_rec, empty, cells, fam, row, its, m, rng, extra)
    count_draws, diag = _summarise(model, fam_tables, its)
    normaliser = {
        "kind": "exponential-mechanism grid (exact log-sum-exp)",
        "scale": float(scale),
        "grid_points": {v: int(m_g[i]) for i, v in enumerate(model.nodes)},
        "tabulated_nodes": tabulated,
    }
    return BayesNetNoiseAwarePosterior(
        model, "mcmc", count_draws=count_draws, diagnostics=diag, normaliser=normaliser
    )


def _normaliser_check(
    model: BayesNet,
    count_draws: dict[str, np.ndarray],
    trims: dict[str, float],
    unit: list[str],
    d: int,
    rng: Any,
) -> float:
    """sd over (up to 40) kept draws of N of D sum_rows log Z_row for the nodes whose
    Z_row the sampler took as 1 (Monte Carlo Z, 2000 Dirichlet draws a row); warns > 0.1."""
    if not unit:
        return 0.0
    gen = noise_source(rng).generator()
    total = next(iter(count_draws.values())).shape[0]
    picks = np.unique(np.linspace(0, total - 1, min(40, total)).astype(int))
    sums = np.zeros(picks.size)
    for v in unit:
        rows = count_draws[v][picks].reshape(picks.size, -1, model.cardinality(v))
        for i in range(picks.size):
            for r in rows[i]:
                inside = np.mean(np.all(gen.dirichlet(model.alpha + r, 2000) >= trims[v], 1))
                sums[i] += d * (math.log(inside) if inside > 0 else -math.inf)
    sd = float(np.std(sums)) if np.all(np.isfinite(sums)) else math.inf
    if sd > 0.1:
        warnings.warn(
            f"the trimmed-region normaliser of node(s) {unit} (k >= 3, taken as 1) varies "
            f"over the posterior (sd of log Z = {sd:.3g} > 0.1): the noise-aware posterior "
            "ignores it and may be biased",
            RuntimeWarning,
            stacklevel=3,
        )
    return sd


def _gibbs(
    model: BayesNet,
    n: int,
    obs: _Observations,
    cells: int,
    fam: list[np.ndarray],
    row: list[np.ndarray],
    sweeps: int,
    m: int,
    rng: Any,
    extra: _Extra,
) -> np.ndarray:
    """MCMC on the joint table N (compiled; see :mod:`.noise_aware_bayes_net_jit`);
    returns the family counts after every sweep, shape (m, sweeps, sum of the
    family-table sizes), flat in ``model.nodes`` order.

    A sweep: max(cells, 8) pair moves (exact conditional of the records moved between two
    random cells; three in four overrelaxed), then max(F / 2, nodes) relabelling moves
    (F family cells in all). The relabelling widths adapt during the burn-in half only.
    """
    gen = noise_source(rng).generator()
    alpha = model.alpha
    # over-dispersed starts: N ~ Multinomial(n, Dirichlet(1))
    state = np.stack([gen.multinomial(n, gen.dirichlet(np.ones(cells))) for _ in range(m)])
    state = state.astype(np.int64)
    nodes = len(model.nodes)
    cards = np.array([model.cardinality(v) for v in model.nodes], dtype=np.int64)
    sizes = [int(np.prod(model.table_shape(v))) for v in model.nodes]
    rsizes = [s // int(k) for s, k in zip(sizes, cards, strict=True)]
    fam_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    roff = np.concatenate([[0], np.cumsum(rsizes)[:-1]]).astype(np.int64)
    fam_idx = np.stack([f + o for f, o in zip(fam, fam_off[:-1], strict=True)]).astype(np.int64)
    row_idx = np.stack([r + o for r, o in zip(row, roff, strict=True)]).astype(np.int64)
    # joint cells of every family cell (CSR), and the joint-index stride of every node
    flat = fam_idx.ravel()
    order = np.argsort(flat, kind="stable")
    fam_cells = np.ascontiguousarray(order % cells, dtype=np.int64)
    fam_ptr = np.searchsorted(flat[order], np.arange(int(fam_off[-1]) + 1)).astype(np.int64)
    slices = int(np.max(np.diff(fam_ptr)))
    strides = np.array(
        [int(np.prod(cards[i + 1 :])) for i in range(nodes)], dtype=np.int64
    )  # row-major over model.nodes
    famc = np.zeros((m, int(fam_off[-1])), dtype=np.int64)
    rowc = np.zeros((m, int(sum(rsizes))), dtype=np.int64)
    for c in range(m):
        for v in range(nodes):
            np.add.at(famc[c], fam_idx[v], state[c])
            np.add.at(rowc[c], row_idx[v], state[c])
    obsv = state.astype(float) @ obs.matrix.T
    grid = np.arange(n + 1, dtype=float)
    with np.errstate(divide="ignore"):
        log_k = np.log(grid)
    log_alpha = np.log(alpha + grid)
    big_a = alpha * cards.astype(float)
    log_big_a = np.log(big_a[:, None] + grid[None, :])
    pair_moves = max(cells, 8)
    relabel = max(int(fam_off[-1]) // 2, nodes)
    widths = np.full(nodes, max(1, round(math.sqrt(n))), dtype=np.int64)
    tried = np.zeros((m, nodes), dtype=np.int64)
    accepted = np.zeros((m, nodes), dtype=np.int64)
    out = np.empty((m, sweeps, famc.shape[1]), dtype=np.int64)
    burn = sweeps // 2
    chunk = max(1, 2_000_000 // (m * (3 * pair_moves + (5 + slices) * relabel)))
    s0 = 0
    bar = Progress(m * sweeps, "noise-aware Bayes-net MCMC", unit="sweep")
    while s0 < sweeps:
        # burn-in: chunks of ADAPT sweeps, then the relabelling widths are tuned; the kept
        # half runs with fixed widths (a fixed, valid MH kernel)
        s1 = min(s0 + min(chunk, ADAPT), burn) if s0 < burn else min(s0 + chunk, sweeps)
        run_sweeps(
            state,
            famc,
            rowc,
            obsv,
            fam_idx,
            row_idx,
            log_k,
            log_alpha,
            log_big_a,
            special.gammaln(alpha + grid),
            special.gammaln(big_a[:, None] + grid[None, :]),
            special.gammaln(grid + 1.0),
            fam_off,
            cards,
            strides,
            fam_ptr,
            fam_cells,
            obs.matrix,
            obs.released,
            1.0 / obs.scale,
            widths,
            gen.random((m, s1 - s0, pair_moves, 3)),
            gen.random((m, s1 - s0, relabel, 5 + slices)),
            tried,
            accepted,
            extra.bd_w,
            extra.lin,
            extra.sib,
            extra.ztab,
            extra.ztix,
            extra.zp,
            extra.zw,
            float(alpha),
            extra.mz,
            out[:, s0:s1],
        )
        if s1 <= burn:
            rate = accepted.sum(axis=0) / np.maximum(tried.sum(axis=0), 1)
            grow = np.where(rate > 0.45, 1.5, np.where(rate < 0.15, 1 / 1.5, 1.0))
            widths = np.clip(np.round(widths * grow), 1, n).astype(np.int64)
            tried[:] = 0
            accepted[:] = 0
        bar.update(m * (s1 - s0))
        s0 = s1
    bar.close()

    return out


class _Observations:
    """Released values r_o = matrix[o] . N + Lap(scale), as -|r_o - matrix[o] . N| / scale.

    For counts truncated to [0, n] the released value is clipped to [0, n] first: a value
    at a bound has the Laplace tail's probability, log 1/2 - |bound - x| / scale for
    every feasible true count x, the interior density up to a constant.
    """

    def __init__(self, matrix: np.ndarray, released: np.ndarray, scale: float) -> None:
        self.matrix = np.ascontiguousarray(matrix, dtype=float)
        self.released = np.ascontiguousarray(released, dtype=float)
        self.scale = scale


def _count_observations(
    model: BayesNet, rel: Release, fam: list[np.ndarray], n: int, scale: float
) -> _Observations:
    """Algorithm 1: every family-table cell, truncated to [0, n]."""
    blocks, released = [], []
    for vi, v in enumerate(model.nodes):
        size = int(np.prod(model.table_shape(v)))
        blocks.append((fam[vi][None, :] == np.arange(size)[:, None]).astype(float))
        released.append(np.asarray(rel.released["counts"][v], dtype=float).ravel())
    r = np.clip(np.concatenate(released), 0.0, float(n))
    return _Observations(np.concatenate(blocks), r, scale)


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
    return _Observations(np.array(rows), np.array(released), scale)


register_noise_aware("laplace", BayesNet)(bayes_net_noise_aware)
register_noise_aware("fourier", BayesNet)(bayes_net_noise_aware)
register_noise_aware("sampling", BayesNet)(bayes_net_noise_aware)
register_noise_aware("map", BayesNet)(bayes_net_noise_aware)
