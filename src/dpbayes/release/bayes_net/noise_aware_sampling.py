"""The noise-aware targets of ``sampling`` (Lemma 2) and ``map`` (Algorithm 3) releases.

The released draws (or grid points) are observations of the true counts through the
trimmed posterior's density (or the exponential mechanism's probabilities); see the
docstring of :mod:`.noise_aware` for the derivation and :mod:`._normaliser_kernels` for
the normalisers these targets need.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from dpbayes.models.bayes_net import BayesNet
from dpbayes.privacy.noise import noise_source
from dpbayes.privacy.validation import check_int
from dpbayes.release.base import Release
from dpbayes.release.bayes_net._normaliser_kernels import trim_mass_table
from dpbayes.release.bayes_net.gibbs import (
    MAX_JOINT_CELLS,
    Observations,
    gibbs_tables,
    summarise,
)
from dpbayes.release.bayes_net.posterior import BayesNetNoiseAwarePosterior
from dpbayes.release.bayes_net.record import MapRecord, SamplingRecord
from dpbayes.release.bayes_net.sampler import (
    Extra,
    MapTerms,
    fam_layout,
    joint_maps,
    no_extra,
    no_map,
)

MAX_TABLE = 1 << 22  # entries of the tabulated binary log-normalisers (n <= 2047)
MAX_MAP_TABLE = 1 << 23  # entries of the lazily filled map log-normaliser tables (64 MB)


def sampling_posterior(
    rel: Release, *, iterations: int, chains: int, rng: Any, n: int | None
) -> BayesNetNoiseAwarePosterior:
    """p(theta | released draws) for a ``sampling`` release (module docstring)."""
    model: BayesNet = rel.model
    rec = SamplingRecord.of(rel)
    n_rec = rec.n if n is None else n
    if n_rec is None:
        raise ValueError(
            "n must be given: a sampling release does not write the number of records "
            "(public under substitute neighbours, private under add/remove)"
        )
    n_rec = check_int(n_rec, "n", minimum=0)
    its = check_int(iterations, "iterations", minimum=20)
    m = check_int(chains, "chains", minimum=2)
    draws = rel.released["draws"]
    d = len(draws)
    trims = {v: float(t) for v, t in rec.trims.items()}
    cells = joint_maps(model)[0]
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
    extra = Extra(
        bd_w=1.0 - d,
        lin=np.concatenate(lin_parts),
        sib=np.concatenate(sib_parts).astype(np.int64),
        ztab=ztab,
        ztix=ztix,
        zp=np.array(zps or [0.5]),
        zw=float(d),
        mz=no_map(model),
    )
    empty = Observations(np.zeros((0, cells)), np.zeros(0), 1.0)
    fam_tables = gibbs_tables(model, n_rec, empty, its, m, rng, extra)
    count_draws, diag = summarise(model, fam_tables, its)
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


def map_posterior(
    rel: Release, *, iterations: int, chains: int, rng: Any, n: int | None
) -> BayesNetNoiseAwarePosterior:
    """p(theta | released grid CPTs) for a ``map`` release (module docstring)."""
    from dpbayes.release.bayes_net.sampling import map_grid

    model: BayesNet = rel.model
    rec = MapRecord.of(rel)
    if n is not None and rec.n is not None and check_int(n, "n", minimum=1) != rec.n:
        raise ValueError(f"n must be the release's public n = {rec.n}, got {n}")
    n_rec = rec.n if n is None else n
    if n_rec is None:
        raise ValueError(
            "n must be given: this map release does not write the number of records "
            "(public under substitute neighbours, private under add/remove)"
        )
    n_rec = check_int(n_rec, "n", minimum=0)
    its = check_int(iterations, "iterations", minimum=20)
    m = check_int(chains, "chains", minimum=2)
    # releases written before the record held the temperature: the guarantee's details
    scale = rec.scale if rec.scale is not None else rel.guarantee.details.get("scale")
    if scale is None or not float(scale) > 0:
        raise ValueError("the map release must carry its selection temperature (public 'scale')")
    w = 1.0 / float(scale)
    trim, steps = float(rec.trim), rec.grid
    cells = joint_maps(model)[0]
    if cells > MAX_JOINT_CELLS:
        raise ValueError(
            f"the joint table has {cells} cells (> {MAX_JOINT_CELLS}): too large for the "
            "noise-aware MCMC over the true counts"
        )
    nodes = len(model.nodes)
    fam_off, cards = fam_layout(model)
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
    mz = MapTerms(
        grid=mgrid,
        base=mbase,
        points=m_g,
        table=np.full(max(offset, 1), np.nan),
        offset=moff,
        side=mside,
        w=w,
        fam_off=fam_off,
        cards=cards,
        buf=np.zeros(kmax, dtype=np.int64),
    )
    extra = no_extra(model)._replace(lin=np.concatenate(lin_parts), mz=mz)
    empty = Observations(np.zeros((0, cells)), np.zeros(0), 1.0)
    fam_tables = gibbs_tables(model, n_rec, empty, its, m, rng, extra)
    count_draws, diag = summarise(model, fam_tables, its)
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
