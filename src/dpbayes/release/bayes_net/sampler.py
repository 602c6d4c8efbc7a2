"""The noise-aware Bayesian-network sampler as ``init`` / ``step`` over small NamedTuples.

The chains run on the joint contingency table N (one count per joint cell). What the
compiled moves of :mod:`._kernels` read and never change is a :class:`Target`: the
joint table's layout, log tables over the counts, the release's observations and the
target's extra terms (:class:`Extra`, with the ``map`` normaliser's :class:`MapTerms`).
What they change is a :class:`State`: every chain's joint table and the family, row and
observed counts derived from it, the relabelling (and resizing) widths and the moves'
acceptance counters.

* :func:`target` builds the Target of a model, a largest n and the release's likelihood;
* :func:`init` the State of chains starting at given joint tables;
* :func:`step` runs sweeps (pair then relabelling moves, n fixed) and :func:`resize`
  n-changing moves (add/remove releases), each returning a new State (the old one is
  left as it was); the uniforms they need are drawn from the numpy Generator passed in;
* :func:`adapt` and :func:`adapt_resize` tune the widths in burn-in.

The drivers are :func:`.gibbs.gibbs_tables` (n fixed) and
:func:`.noise_aware_n.bayes_net_private_n` (n free).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import special

from dpbayes.models.bayes_net import BayesNet
from dpbayes.release.bayes_net._kernels import resize_moves, run_sweeps

__all__ = [
    "Extra",
    "MapTerms",
    "State",
    "Target",
    "adapt",
    "adapt_resize",
    "init",
    "joint_maps",
    "resize",
    "step",
    "target",
]


class MapTerms(NamedTuple):
    """The exponential mechanism's normaliser over each node's grid (``map`` releases;
    read by index in :mod:`._normaliser_kernels`)."""

    grid: np.ndarray  # (nodes, G, k) log grid points
    base: np.ndarray  # (nodes, G) w (alpha - 1) sum_k log g_k
    points: np.ndarray  # (nodes,) grid points of each node (0: no map term)
    table: np.ndarray  # lazily filled log Z tables (NaN = not yet computed; a memo)
    offset: np.ndarray  # (nodes,) each node's first entry in ``table``
    side: np.ndarray  # (nodes,) base of a node's table index (0: computed on use)
    w: float  # 1 / the selection temperature
    fam_off: np.ndarray  # (nodes + 1,) offsets of the family tables
    cards: np.ndarray  # (nodes,) cardinalities
    buf: np.ndarray  # (k,) work space


class Extra(NamedTuple):
    """The target's terms beyond noisy counts (see :func:`._kernels.run_sweeps`): the
    Bayesian-Dirichlet weight, linear coefficients per family cell, the binary rows'
    trimmed-mass tables (``sampling``) and the ``map`` normaliser."""

    bd_w: float  # weight of the Bayesian-Dirichlet terms
    lin: np.ndarray  # (F,) sum_f lin_f c_f
    sib: np.ndarray  # (F,) the other cell of each binary family cell's row
    ztab: np.ndarray  # (tables, n + 1, n + 1) log Z of a trimmed Beta row (or (1, 1, 1))
    ztix: np.ndarray  # (nodes,) table of each node (-1: none)
    zp: np.ndarray  # the trims of the tables
    zw: float  # weight of -log Z (the number of draws)
    mz: MapTerms


class Target(NamedTuple):
    """What the moves read and never change (beyond ``extra.mz``'s memo and work space)."""

    fam_idx: np.ndarray  # (nodes, cells) flat family cell of every joint cell
    row_idx: np.ndarray  # (nodes, cells) flat parent row of every joint cell
    fam_off: np.ndarray  # (nodes + 1,) offsets of the family tables in the flat counts
    cards: np.ndarray  # (nodes,) cardinalities
    strides: np.ndarray  # (nodes,) joint-index stride of every node (row-major)
    fam_ptr: np.ndarray  # (F + 1,) the joint cells of family cell f: fam_cells[ptr[f]:...]
    fam_cells: np.ndarray
    log_k: np.ndarray  # log x, x = 0..n_max
    log_alpha: np.ndarray  # log(alpha + x)
    log_big_a: np.ndarray  # (nodes, n_max + 1) log(A_v + x), A_v = alpha k_v
    lg_alpha: np.ndarray  # lgamma(alpha + x)
    lg_big_a: np.ndarray  # (nodes, n_max + 1) lgamma(A_v + x)
    lg_fact: np.ndarray  # lgamma(x + 1)
    obs_matrix: np.ndarray  # (O, cells) the released statistics are obs_matrix @ N + noise
    released: np.ndarray  # (O,) their released values
    inv_scale: float  # 1 / the Laplace scale
    alpha: float  # the model's Dirichlet parameter
    extra: Extra
    pair_moves: int  # pair moves per sweep
    relabel_moves: int  # relabelling moves per sweep
    slices: int  # most joint cells of one family cell (uniforms per relabelling move)


class State(NamedTuple):
    """The chains: their joint tables, the counts derived from them, the moves' widths
    and acceptance counters (the resizing fields are used only when n is free)."""

    counts: np.ndarray  # (m, cells) the joint table N of every chain
    famc: np.ndarray  # (m, F) family-cell counts
    rowc: np.ndarray  # (m, R) parent-row counts
    obsv: np.ndarray  # (m, O) obs_matrix @ N
    widths: np.ndarray  # (nodes,) most records a relabelling move changes
    tried: np.ndarray  # (m, nodes) relabelling moves tried since the last adaptation
    accepted: np.ndarray  # (m, nodes) ... and accepted
    resize_widths: np.ndarray  # (m,) most records a resizing move adds or removes
    resize_tried: np.ndarray  # (m,)
    resize_accepted: np.ndarray  # (m,)


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


def fam_layout(model: BayesNet) -> tuple[np.ndarray, np.ndarray]:
    """(offsets of the family tables in the flat family counts, cardinalities)."""
    cards = np.array([model.cardinality(v) for v in model.nodes], dtype=np.int64)
    sizes = [int(np.prod(model.table_shape(v))) for v in model.nodes]
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64), cards


def no_map(model: BayesNet) -> MapTerms:
    """``mz`` with no node using the exponential mechanism's normaliser."""
    nodes = len(model.nodes)
    fam_off, cards = fam_layout(model)
    return MapTerms(
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


def no_extra(model: BayesNet) -> Extra:
    """The terms of noisy counts or coefficients: Bayesian-Dirichlet weight 1, no other."""
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


def target(
    model: BayesNet,
    n_max: int,
    obs_matrix: np.ndarray,
    released: np.ndarray,
    scale: float,
    extra: Extra,
) -> Target:
    """The Target on joint tables of at most ``n_max`` records: the model's layout, the
    release's likelihood (released values ``obs_matrix @ N + Lap(scale)``, no rows for
    none) and the ``extra`` terms."""
    alpha = model.alpha
    cells, fam, row = joint_maps(model)
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
    strides = np.array([int(np.prod(cards[i + 1 :])) for i in range(nodes)], dtype=np.int64)
    grid = np.arange(n_max + 1, dtype=float)
    with np.errstate(divide="ignore"):
        log_k = np.log(grid)
    big_a = alpha * cards.astype(float)
    return Target(
        fam_idx=fam_idx,
        row_idx=row_idx,
        fam_off=fam_off,
        cards=cards,
        strides=strides,
        fam_ptr=fam_ptr,
        fam_cells=fam_cells,
        log_k=log_k,
        log_alpha=np.log(alpha + grid),
        log_big_a=np.log(big_a[:, None] + grid[None, :]),
        lg_alpha=special.gammaln(alpha + grid),
        lg_big_a=special.gammaln(big_a[:, None] + grid[None, :]),
        lg_fact=special.gammaln(grid + 1.0),
        obs_matrix=np.ascontiguousarray(obs_matrix, dtype=float),
        released=np.ascontiguousarray(released, dtype=float),
        inv_scale=1.0 / scale,
        alpha=float(alpha),
        extra=extra,
        pair_moves=max(cells, 8),
        relabel_moves=max(int(fam_off[-1]) // 2, nodes),
        slices=int(np.max(np.diff(fam_ptr))),
    )


def init(tg: Target, counts: np.ndarray, widths: int, resize_widths: int = 1) -> State:
    """The State of chains at the joint tables ``counts`` (m, cells): their family, row
    and observed counts; every relabelling width ``widths``, resizing width
    ``resize_widths``; counters at 0."""
    counts = np.asarray(counts, dtype=np.int64)
    m = counts.shape[0]
    nodes = tg.fam_idx.shape[0]
    famc = np.zeros((m, int(tg.fam_off[-1])), dtype=np.int64)
    rowc = np.zeros((m, int(tg.row_idx.max()) + 1), dtype=np.int64)
    for c in range(m):
        for v in range(nodes):
            np.add.at(famc[c], tg.fam_idx[v], counts[c])
            np.add.at(rowc[c], tg.row_idx[v], counts[c])
    return State(
        counts=counts,
        famc=famc,
        rowc=rowc,
        obsv=counts.astype(float) @ tg.obs_matrix.T,
        widths=np.full(nodes, widths, dtype=np.int64),
        tried=np.zeros((m, nodes), dtype=np.int64),
        accepted=np.zeros((m, nodes), dtype=np.int64),
        resize_widths=np.full(m, resize_widths, dtype=np.int64),
        resize_tried=np.zeros(m, dtype=np.int64),
        resize_accepted=np.zeros(m, dtype=np.int64),
    )


def _copy(st: State) -> State:
    return State(*(np.array(a, copy=True) for a in st))


def step(tg: Target, st: State, gen: np.random.Generator, sweeps: int) -> tuple[State, np.ndarray]:
    """``sweeps`` sweeps of every chain (:func:`._kernels.run_sweeps`, n fixed): the new
    State and the family counts after every sweep, (m, sweeps, F). The uniforms come from
    ``gen``: the pair moves' (m, sweeps, moves, 3), then the relabelling moves'."""
    m = st.counts.shape[0]
    pair = gen.random((m, sweeps, tg.pair_moves, 3))
    relabel = gen.random((m, sweeps, tg.relabel_moves, 5 + tg.slices))
    new = _copy(st)
    out = np.empty((m, sweeps, st.famc.shape[1]), dtype=np.int64)
    run_sweeps(tg, new, pair, relabel, out)
    return new, out


def resize(
    tg: Target, st: State, gen: np.random.Generator, moves: int, log_prior_n: np.ndarray
) -> State:
    """``moves`` moves per chain that add or remove records (:func:`._kernels.resize_moves`,
    prior ``log_prior_n`` on n = 0..n_max): the new State."""
    new = _copy(st)
    resize_moves(tg, new, log_prior_n, gen.random((st.counts.shape[0], moves, 3)))
    return new


def _grow(rate: np.ndarray) -> np.ndarray:
    return np.where(rate > 0.45, 1.5, np.where(rate < 0.15, 1 / 1.5, 1.0))


def adapt(st: State, cap: int) -> State:
    """Burn-in: each node's relabelling width x 1.5 when more than 45% of its moves (over
    the chains) were accepted since the last adaptation, / 1.5 below 15%, kept in
    [1, cap]; the counters reset."""
    rate = st.accepted.sum(axis=0) / np.maximum(st.tried.sum(axis=0), 1)
    widths = np.clip(np.round(st.widths * _grow(rate)), 1, cap).astype(np.int64)
    return st._replace(
        widths=widths, tried=np.zeros_like(st.tried), accepted=np.zeros_like(st.accepted)
    )


def adapt_resize(st: State, cap: int) -> State:
    """Burn-in: each chain's resizing width tuned like :func:`adapt`'s, kept in [1, cap]."""
    rate = st.resize_accepted / np.maximum(st.resize_tried, 1)
    widths = np.clip(np.round(st.resize_widths * _grow(rate)), 1, cap).astype(np.int64)
    return st._replace(
        resize_widths=widths,
        resize_tried=np.zeros_like(st.resize_tried),
        resize_accepted=np.zeros_like(st.resize_accepted),
    )
