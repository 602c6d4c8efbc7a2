"""The MCMC over the true joint table N shared by every Bayesian-network target.

:func:`gibbs_tables` runs the compiled sweeps of :mod:`._kernels` (pair and relabelling moves,
exact for the target below) over ``chains`` chains with adaptive relabelling widths in
burn-in; the target is P(N) (Dirichlet-multinomial) times the release's likelihood:
noisy counts or Fourier coefficients (:class:`Observations`) and, for posterior sampling
and the MAP, the extra terms of :class:`Extra`. :func:`summarise` keeps the second half
and computes R-hat/ESS per family count.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special

from dpbayes.models.bayes_net import BayesNet
from dpbayes.privacy.noise import noise_source
from dpbayes.progress import Progress
from dpbayes.release.base import Release
from dpbayes.release.bayes_net._kernels import run_sweeps
from dpbayes.release.mcmc import (
    Diagnostics,
    diagnose,
)

MAX_JOINT_CELLS = 4096
DEFAULT_SWEEPS = 4000
ADAPT = 50  # sweeps between adaptations of the relabelling widths (burn-in only)


def joint_maps(model: BayesNet) -> tuple[int, list[np.ndarray], list[np.ndarray]]:
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


def summarise(
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


class Extra:
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
    def none(model: BayesNet) -> Extra:
        f = sum(int(np.prod(model.table_shape(v))) for v in model.nodes)
        return Extra(
            1.0,
            np.zeros(f),
            np.zeros(f, dtype=np.int64),
            np.zeros((1, 1, 1)),
            np.full(len(model.nodes), -1, dtype=np.int64),
            np.ones(1),
            0.0,
            no_map(model),
        )


def fam_layout(model: BayesNet) -> tuple[np.ndarray, np.ndarray]:
    cards = np.array([model.cardinality(v) for v in model.nodes], dtype=np.int64)
    sizes = [int(np.prod(model.table_shape(v))) for v in model.nodes]
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64), cards


def no_map(model: BayesNet) -> tuple[Any, ...]:
    """``mz`` with no node using the exponential mechanism's normaliser."""
    nodes = len(model.nodes)
    fam_off, cards = fam_layout(model)
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


def gibbs_tables(
    model: BayesNet,
    n: int,
    obs: Observations,
    cells: int,
    fam: list[np.ndarray],
    row: list[np.ndarray],
    sweeps: int,
    m: int,
    rng: Any,
    extra: Extra,
) -> np.ndarray:
    """MCMC on the joint table N (compiled; see :mod:`._kernels`);
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


class Observations:
    """Released values r_o = matrix[o] . N + Lap(scale), as -|r_o - matrix[o] . N| / scale.

    For counts truncated to [0, n] the released value is clipped to [0, n] first: a value
    at a bound has the Laplace tail's probability, log 1/2 - |bound - x| / scale for
    every feasible true count x, the interior density up to a constant.
    """

    def __init__(self, matrix: np.ndarray, released: np.ndarray, scale: float) -> None:
        self.matrix = np.ascontiguousarray(matrix, dtype=float)
        self.released = np.ascontiguousarray(released, dtype=float)
        self.scale = scale


def count_observations(
    model: BayesNet, rel: Release, fam: list[np.ndarray], n: int, scale: float
) -> Observations:
    """Algorithm 1: every family-table cell, truncated to [0, n]."""
    blocks, released = [], []
    for vi, v in enumerate(model.nodes):
        size = int(np.prod(model.table_shape(v)))
        blocks.append((fam[vi][None, :] == np.arange(size)[:, None]).astype(float))
        released.append(np.asarray(rel.released["counts"][v], dtype=float).ravel())
    r = np.clip(np.concatenate(released), 0.0, float(n))
    return Observations(np.concatenate(blocks), r, scale)


def fourier_observations(model: BayesNet, rel: Release, scale: float) -> Observations:
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
    return Observations(np.array(rows), np.array(released), scale)
