"""The history of noisy answers and the best linear unbiased estimator (BLUE) from it.

Paper 000 §3, eqs. 15-17: answers y_i = H_i x + Lap(S_i / eps_i) with Var(y_i) = 2 (S_i/eps_i)^2.
Beyond the paper, an answer may carry Gaussian noise instead, y_i = H_i x + N(0, sigma_i^2)
with Var(y_i) = sigma_i^2. For a target query q in the row space of H, the
generalised-least-squares estimate q x_hat = A y with A = q (H^T W H)^+ H^T W,
W = diag(1 / Var(y_i)), is the BLUE (Gauss-Markov needs only the variances, whatever the
noise family) and its variance is sum_i A_i^2 Var(y_i). Its error is
sum_{Laplace i} A_i Lap(S_i / eps_i) + sum_{Gaussian j} A_j N(0, sigma_j^2): a Laplace sum
plus one Normal N(0, sum_j A_j^2 sigma_j^2).

Computation (stable and incremental): the whitened rows m_i = H_i / sigma_i are factorised
as M = L Q, with Q an orthonormal basis of the row space (grown by Gram-Schmidt with
re-orthogonalisation), and the upper-triangular R with R^T R = L^T L (updated by Givens
rotations when a row is appended). For a target q with c = Q q (and q - Q^T c = 0, else
not estimable): variance = ||R^-T c||^2 and the weights on the whitened answers are
L R^-1 R^-T c. No matrix is inverted and no answer triggers a refit.

Block-diagonal: answers reading no common cell (nor linked through others that do) have
directions zero on each other's cells, so Q, L and R are block-diagonal over the connected
components of the cells-by-answers incidence (:class:`_Block`). Each block is factorised
on its own, over its own cells: an answer costs O(r_b C_b + r_b^2) in the rank r_b and
cells C_b of the block it joins (blocks it links are merged, the smaller appended to the
largest), and the history holds sum_b (r_b C_b + k_b r_b + r_b^2) numbers, not
r C + k r + r^2 (r, k, C: rank, answers and cells read in all). The arithmetic on a block
is the single factorisation's without its exact zeros.

Storage (:class:`_Store`): each answer's row sparsely, and Q only over the C cells some
answer reads (Q is zero on the others), never over all N cells of the cube; copies of a
history share it, append-only, so a copy (the service's snapshot) costs O(answers).
"""

from __future__ import annotations

import math
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from scipy.linalg import qr_insert, solve_triangular

from dpbayes.privacy.guarantee import Neighbours
from dpbayes.privacy.validation import (
    check_array,
    check_delta,
    check_epsilon,
    check_finite,
    check_int,
    check_positive,
)

if TYPE_CHECKING:
    from dpbayes.answers.credible import Posterior
    from dpbayes.answers.cube import Cube

__all__ = [
    "BLUE",
    "COEFFICIENT_RANGE",
    "NOISES",
    "History",
    "NotEstimable",
    "check_coefficients",
    "query_sensitivity",
]

# Relative tolerances of the span tests. A query "estimable" within them is estimated by
# its projection, with a bias (q - proj q)'x that the error distribution does not hold:
# at 1e-9 / 1e-8 a count of 1e9 made an answer from history miss +-0.02 every time (a
# review). Near the doubles' own rounding (about 1e-15 here) the bias is below 1e-12 of
# ||q|| ||x||.
_RANK_TOL = 1e-13
_ESTIMABLE_TOL = 1e-12
# The largest |coefficient| of a query must lie in this range: beyond it the answer, its
# error and their squares (variances) leave the range of double precision.
COEFFICIENT_RANGE = (1e-100, 1e100)
# The noise families an answer can carry.
NOISES = ("laplace", "gaussian")


class NotEstimable(ValueError):
    """The target query is not in the row space of the answered queries."""


def check_coefficients(coefficients: Any, n_cells: int, name: str = "coefficients") -> np.ndarray:
    """A query's coefficient vector: length n_cells, finite, not all zero, and its largest
    |coefficient| in :data:`COEFFICIENT_RANGE` (smaller ones beside it are fine)."""
    q = check_array(coefficients, name, ndim=1)
    if q.size != n_cells:
        raise ValueError(f"{name} must have length {n_cells} (the number of cells), got {q.size}")
    if not np.any(q):
        raise ValueError(f"{name} must have at least one non-zero coefficient (empty query)")
    top = float(np.max(np.abs(q)))
    lo, hi = COEFFICIENT_RANGE
    if not lo <= top <= hi:
        raise ValueError(
            f"{name}: the largest |coefficient| must be in [{lo:g}, {hi:g}], got {top:g} "
            "(scale the query; its answer scales with it)"
        )
    return q


def query_sensitivity(coefficients: np.ndarray) -> float:
    """Lemma 2.1 (add/remove one record): S = max_j |H_j|, one record changes one cell by 1."""
    return float(np.max(np.abs(coefficients)))


@dataclass(frozen=True)
class BLUE:
    """The BLUE of a target query from a history (paper 000, Thm 3.1, Cor. 3.1-3.2).

    ``weights`` A (one per answer, eq. 16), ``estimate`` = A y, ``variance`` = MSE (eq. 17),
    ``scales`` = |A_i| S_i / eps_i (the Laplace scales of the error, §4; 0 for Gaussian
    answers), ``gaussian_scales`` = |A_j| sigma_j (the sds of the Gaussian answers' terms;
    0 for Laplace answers; ``None``: no Gaussian answer).
    """

    estimate: float
    variance: float
    weights: np.ndarray
    scales: np.ndarray
    gaussian_scales: np.ndarray | None = None

    @property
    def gaussian_sd(self) -> float:
        """The sd of the Normal part of the error, sqrt(sum_j A_j^2 sigma_j^2)."""
        g = self.gaussian_scales
        return 0.0 if g is None else float(math.sqrt(float(g @ g)))


def _resized(a: np.ndarray, *shape: int) -> np.ndarray:
    """``a`` in a zero array of ``shape`` (at least a's shape)."""
    out = np.zeros(tuple(max(s, n) for s, n in zip(shape, a.shape, strict=True)), a.dtype)
    out[tuple(slice(0, n) for n in a.shape)] = a
    return out


class _View(NamedTuple):
    """A history's view of one block: the upper-triangular R of the block's whitened rows
    (never written in place: copies share it) and the prefix it reads of the block's
    answers, directions and cells."""

    R: np.ndarray
    k: int
    r: int
    nc: int

    @property
    def entries(self) -> int:  # Q (directions x cells), L (answers x directions), R
        return self.r * self.nc + self.k * self.r + self.r * self.r


class _Block:
    """One connected component of the cells-by-answers incidence (answers linked when
    they read a common cell): its cells (columns, in the order it met them), its answers
    (global indices), Q over its cells only and L over its directions only. The rest of
    the history is zero on them, so the factorisation is block-diagonal: each block has
    its own R and an answer touches only the blocks whose cells it reads. Append-only,
    like the store; a history's :class:`_View` says which prefix it reads."""

    __slots__ = ("L", "Q", "answers", "cells", "created")

    def __init__(self, created: int, r: int = 4, nc: int = 4, k: int = 4) -> None:
        self.Q = np.zeros((r, nc))
        self.L = np.zeros((k, r))
        self.cells = np.zeros(nc, dtype=np.intp)
        self.answers = np.zeros(k, dtype=np.intp)
        self.created = created  # the answer that opened it (-1: a fork's)

    def reserve(self, k: int, r: int, nc: int) -> None:
        """Room for k answers, r directions and nc cells (doubling)."""
        qr, qc = self.Q.shape
        if r > qr or nc > qc:
            self.Q = _resized(self.Q, max(r, 2 * qr) if r > qr else qr, max(nc, 2 * qc))
        lk, lr = self.L.shape
        if k > lk or r > lr:
            self.L = _resized(self.L, max(k, 2 * lk) if k > lk else lk, max(r, 2 * lr))
        if nc > self.cells.size:
            self.cells = _resized(self.cells, max(nc, 2 * self.cells.size))
        if k > self.answers.size:
            self.answers = _resized(self.answers, max(k, 2 * self.answers.size))


class _Store:
    """The rows and the factorisation a :class:`History` and its copies share.

    Append-only: the answers' sparse rows, the cells some answer reads (global columns, in
    the order they were first read) and the blocks (:class:`_Block`), one per connected
    component of the answers. A column records the block it joined first and its place
    there; when blocks merge (an answer reads cells of several), the smaller ones are
    appended to the largest and record where (``parent``, ``offset``), so a cell's block
    is found by following at most log2(answers) links, up to the first block the reading
    history holds (its views). A history reads the prefix it knows (its own counts of
    answers, rank and columns, and its views of the blocks); rows and columns past them
    belong to longer histories. A history appends in place when no live history sharing
    the store holds more than it does; else it forks (copies its prefix). So a copy (a
    snapshot) is O(answers), never O(answers x cells).
    """

    def __init__(self, n_cells: int) -> None:
        self.lock = threading.Lock()
        self.users: weakref.WeakSet[History] = weakref.WeakSet()
        self.k = self.r = self.nc = 0  # the answers, rank and columns written
        self.idx: list[np.ndarray] = []  # each answer's cells (sorted)
        self.val: list[np.ndarray] = []  # and its coefficients on them
        self.cells = np.zeros(16, dtype=np.intp)  # column -> cell
        self.col_of = np.full(n_cells, -1, dtype=np.intp)  # cell -> column (-1: none)
        self.col_block = np.zeros(16, dtype=np.intp)  # column -> the block it joined first
        self.col_pos = np.zeros(16, dtype=np.intp)  # and its place in that block
        self.blocks: list[_Block] = []
        self.parent = np.zeros(16, dtype=np.intp)  # block -> the block it was merged into
        self.offset = np.zeros(16, dtype=np.intp)  # and where its cells went there

    def new_block(self, created: int) -> int:
        b = len(self.blocks)
        self.blocks.append(_Block(created))
        if b == self.parent.size:
            self.parent = _resized(self.parent, 2 * b)
            self.offset = _resized(self.offset, 2 * b)
        return b

    def add_columns(self, nc: int, fresh: np.ndarray, block: int, pos: int) -> None:
        """Columns nc, nc + 1, ... for the ``fresh`` cells, at ``pos``... of ``block``."""
        end = nc + fresh.size
        if end > self.cells.size:
            cap = max(end, 2 * self.cells.size)
            self.cells = _resized(self.cells, cap)
            self.col_block = _resized(self.col_block, cap)
            self.col_pos = _resized(self.col_pos, cap)
        self.cells[nc:end] = fresh
        self.col_of[fresh] = np.arange(nc, end)
        self.col_block[nc:end] = block
        self.col_pos[nc:end] = np.arange(pos, pos + fresh.size)
        self.nc = end

    def locate(self, cols: np.ndarray, views: dict[int, _View]) -> tuple[np.ndarray, np.ndarray]:
        """The blocks (held in ``views``) the columns ``cols`` lie in and their places there."""
        b = self.col_block[cols]
        p = self.col_pos[cols]
        if cols.size == 0:
            return b, p
        live = np.zeros(len(self.blocks), dtype=bool)
        live[np.fromiter(views, dtype=np.intp, count=len(views))] = True
        dead = ~live[b]
        while dead.any():  # merged away before this history's prefix: follow the links
            p[dead] += self.offset[b[dead]]
            b[dead] = self.parent[b[dead]]
            dead = ~live[b]
        return b, p

    def fork(
        self, k: int, r: int, nc: int, n_cells: int, views: dict[int, _View]
    ) -> tuple[_Store, dict[int, _View]]:
        """A store of its own holding the prefix (k answers, rank r, nc columns, the blocks
        as ``views`` holds them) and the views of it (its blocks renumbered)."""
        s = _Store.__new__(_Store)
        s.lock, s.users = threading.Lock(), weakref.WeakSet()
        s.k, s.r, s.nc = k, r, nc
        s.idx, s.val = self.idx[:k], self.val[:k]  # the arrays are never written
        s.cells = _resized(self.cells[:nc], max(16, 2 * nc))
        s.col_of = np.full(n_cells, -1, dtype=np.intp)
        s.col_of[s.cells[:nc]] = np.arange(nc)
        s.col_block = np.zeros(s.cells.size, dtype=np.intp)
        s.col_pos = np.zeros(s.cells.size, dtype=np.intp)
        n = len(views)
        s.blocks = []
        s.parent = np.zeros(max(16, 2 * n), dtype=np.intp)
        s.offset = np.zeros(max(16, 2 * n), dtype=np.intp)
        out: dict[int, _View] = {}
        for new, (old, v) in enumerate(sorted(views.items())):
            src = self.blocks[old]
            blk = _Block(-1, max(4, 2 * v.r), max(4, 2 * v.nc), max(4, 2 * v.k))
            blk.Q[: v.r, : v.nc] = src.Q[: v.r, : v.nc]
            blk.L[: v.k, : v.r] = src.L[: v.k, : v.r]
            blk.cells[: v.nc] = src.cells[: v.nc]
            blk.answers[: v.k] = src.answers[: v.k]
            cols = s.col_of[blk.cells[: v.nc]]
            s.col_block[cols] = new
            s.col_pos[cols] = np.arange(v.nc)
            s.blocks.append(blk)
            out[new] = v
        return s, out

    def truncate(self, k: int, r: int, nc: int) -> None:
        """Drop what lies past the prefix (no live history holds it). The blocks' storage
        past the prefix is written over; the links of blocks merged past it are never
        followed (a history holding the prefix holds those blocks)."""
        del self.idx[k:], self.val[k:]
        self.col_of[self.cells[nc : self.nc]] = -1
        while self.blocks and self.blocks[-1].created >= k:
            self.blocks.pop()
        self.k, self.r, self.nc = k, r, nc


class History:
    """The answers released so far for queries over a cube of ``n_cells`` cells.

    Every answer is y_i = H_i x + Lap(S_i / eps_i) (``noise="laplace"``, paper 000) or
    y_i = H_i x + N(0, sigma_i^2) (``noise="gaussian"``), neighbouring data sets differing by
    the addition or removal of one record (Lemma 2.1). ``add`` costs O(r C + r^2) with r the
    rank and C the cells read of the connected component of the answers it joins (one
    block of the factorisation, see :class:`_Block`), besides reading its dense row.

    Storage is sparse: each answer's row as its non-zero cells, and the basis Q only over
    the cells some answer reads (:class:`_Store`); ``copy`` shares them (O(answers)).
    """

    def __init__(self, n_cells: int, *, neighbours: Neighbours | str = Neighbours.ADD_REMOVE):
        self.n_cells = check_int(n_cells, "n_cells", minimum=1)
        self.neighbours = Neighbours.parse(neighbours)
        self.cube: Cube | None = None
        cap = 16
        self._k = 0
        self._r = 0
        self._nc = 0  # the columns (cells read by some answer) of the store it uses
        self._nnz = 0  # the non-zero coefficients of its answers
        self._store = _Store(self.n_cells)
        self._store.users.add(self)
        self._y = np.zeros(cap)
        self._eps = np.zeros(cap)
        self._sens = np.zeros(cap)
        self._sd = np.zeros(cap)  # sd of each answer's noise
        self._gauss = np.zeros(cap, dtype=bool)  # whether it is Gaussian
        self._delta = np.zeros(cap)  # the delta of its guarantee (0 for Laplace)
        self._labels: list[str] = []
        # block -> this history's view of it; never written in place (copies share it)
        self._views: dict[int, _View] = {}
        self._fact = 0  # the numbers its blocks' factorisations store (sum of their entries)

    @classmethod
    def from_cube(cls, cube: Cube) -> History:
        h = cls(cube.n_cells)
        h.cube = cube
        return h

    # ------------------------------------------------------------------ state
    def __len__(self) -> int:
        return self._k

    @property
    def rank(self) -> int:
        return self._r

    @property
    def coefficients(self) -> np.ndarray:
        """The answers' coefficient rows as a dense (answers x cells) array (built on
        each call: the history stores them sparsely, see :meth:`rows`)."""
        out = np.zeros((self._k, self.n_cells))
        for i, (idx, val) in enumerate(self.rows()):
            out[i, idx] = val
        return out

    @property
    def _H(self) -> np.ndarray:  # the dense rows, as the history once stored them
        return self.coefficients

    def rows(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each answer's row sparsely: (its non-zero cells, ascending; its coefficients)."""
        s = self._store
        return list(zip(s.idx[: self._k], s.val[: self._k], strict=True))

    @property
    def entries(self) -> int:
        """The numbers the history stores for its answers' rows and its factorisation:
        non-zero coefficients + for each block (connected component of the answers, see
        :class:`_Block`) its rank x its cells (Q) + its answers x its rank (L) + its rank^2
        (R). At most nnz + rank x cells read + answers x rank + rank^2 (one block)."""
        return self._nnz + self._fact

    def _touched(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """For the cells ``idx``: which are read by this history's answers, and for those,
        their blocks and places there; and the distinct blocks."""
        s = self._store
        col = s.col_of[idx]
        known = (col >= 0) & (col < self._nc)
        b, p = s.locate(col[known], self._views)
        return known, b, p, np.unique(b)

    def entries_with(self, coefficients: Any) -> int:
        """An upper bound on :attr:`entries` once an answer to ``coefficients`` is added."""
        q = check_coefficients(coefficients, self.n_cells)
        idx = np.flatnonzero(q)
        known, _, _, touched = self._touched(idx)
        views = [self._views[int(b)] for b in touched]
        k = 1 + sum(v.k for v in views)
        r = 1 + sum(v.r for v in views)
        nc = int(np.count_nonzero(~known)) + sum(v.nc for v in views)
        old = sum(v.entries for v in views)
        return self._nnz + idx.size + self._fact - old + r * nc + k * r + r * r

    @property
    def answers(self) -> np.ndarray:
        return self._y[: self._k].copy()

    @property
    def epsilons(self) -> np.ndarray:
        return self._eps[: self._k].copy()

    @property
    def sensitivities(self) -> np.ndarray:
        return self._sens[: self._k].copy()

    @property
    def labels(self) -> list[str]:
        return list(self._labels)

    @property
    def noises(self) -> list[str]:
        """The noise family of each answer, ``"laplace"`` or ``"gaussian"``."""
        return [NOISES[int(g)] for g in self._gauss[: self._k]]

    @property
    def sigmas(self) -> np.ndarray:
        """The noise sd of each answer: sqrt(2) S_i / eps_i (Laplace) or sigma_i (Gaussian)."""
        return self._sd[: self._k].copy()

    @property
    def deltas(self) -> np.ndarray:
        """The delta of each answer's guarantee (0 for Laplace answers)."""
        return self._delta[: self._k].copy()

    @property
    def variances(self) -> np.ndarray:
        """Var(y_i) = 2 (S_i / eps_i)^2 for Laplace answers, sigma_i^2 for Gaussian ones."""
        k = self._k
        lap = 2.0 * (self._sens[:k] / self._eps[:k]) ** 2
        return np.where(self._gauss[:k], self._sd[:k] ** 2, lap)

    # ------------------------------------------------------------------ growth
    def _grow_rows(self) -> None:
        cap = 2 * self._y.size
        for name in ("_y", "_eps", "_sens", "_sd", "_gauss", "_delta"):
            setattr(self, name, _resized(getattr(self, name), cap))

    def _own_store(self) -> _Store:
        """The store, at this history's prefix, for appending (called with its lock held):
        this one, cut back to the prefix if no live history sharing it holds more, else a
        copy of the prefix of this history's own."""
        s = self._store
        k, r, nc = self._k, self._r, self._nc
        if (s.k, s.r, s.nc) == (k, r, nc):
            return s
        longer = any(u is not self and (u._k > k or u._r > r or u._nc > nc) for u in list(s.users))
        if not longer:
            s.truncate(k, r, nc)
            return s
        new, self._views = s.fork(k, r, nc, self.n_cells, self._views)
        s.users.discard(self)
        new.users.add(self)
        self._store = new
        return new

    def add(
        self,
        coefficients: Any,
        noisy_answer: float,
        epsilon: float,
        *,
        sensitivity: float | None = None,
        label: str = "",
        noise: str = "laplace",
        sigma: float | None = None,
        delta: float = 0.0,
    ) -> int:
        """Record an answer released elsewhere; returns its index.

        ``sensitivity`` defaults to Lemma 2.1 (max_j |H_j|); a larger value (a more
        conservative mechanism) is accepted, a smaller one is refused. ``noise``:
        ``"laplace"`` (y = H x + Lap(S / eps), the default) or ``"gaussian"``
        (y = H x + N(0, sigma^2), then ``sigma`` is required and ``epsilon``, ``delta`` > 0
        are the (eps, delta) its guarantee states; only sigma enters the inference).
        """
        h = check_coefficients(coefficients, self.n_cells)
        y = check_finite(noisy_answer, "noisy_answer")
        eps = check_epsilon(epsilon)
        idx = np.flatnonzero(h)
        val = h[idx].copy()
        s_min = float(np.max(np.abs(val)))  # query_sensitivity(h), from its non-zeros
        s = s_min if sensitivity is None else check_positive(sensitivity, "sensitivity")
        if s < s_min * (1 - 1e-12):
            raise ValueError(
                f"sensitivity must be >= {s_min:g} (Lemma 2.1, max |coefficient|), got {s:g}"
            )
        if noise not in NOISES:
            raise ValueError(f"noise must be one of {NOISES}, got {noise!r}")
        gaussian = noise == "gaussian"
        dlt = check_delta(delta)
        if gaussian:
            if sigma is None:
                raise ValueError("sigma is required for noise='gaussian' (the noise sd)")
            sd = check_positive(sigma, "sigma")
            if not 1e-150 <= sd <= 1e150:
                raise ValueError(
                    f"sigma must be in [1e-150, 1e150] (its square is a variance), got {sd:g}"
                )
            if dlt == 0:
                raise ValueError("delta must be > 0 for noise='gaussian' (its guarantee's delta)")
        else:
            if sigma is not None:
                raise ValueError("sigma must be None for noise='laplace' (its sd is sqrt 2 S/eps)")
            if dlt != 0:
                raise ValueError(f"delta must be 0 for noise='laplace', got {dlt}")
            sd = math.sqrt(2.0) * s / eps
        idx.setflags(write=False)  # shared by every copy: never written
        val.setflags(write=False)
        k = self._k
        if k == self._y.size:
            self._grow_rows()
        # this history's own rows (copies have their own arrays); counted at _k below
        self._y[k], self._eps[k], self._sens[k] = y, eps, s
        self._sd[k], self._gauss[k], self._delta[k] = sd, gaussian, dlt
        with self._store.lock:
            st = self._own_store()
            views = dict(self._views)
            known, b, p, touched = self._touched(idx)
            fresh = idx[~known]
            # the block it joins: the largest it touches (the others are appended to it),
            # or a new one
            if touched.size == 0:
                bid, parts = st.new_block(k), []
                base = _View(np.zeros((0, 0)), 0, 0, 0)
            else:
                parts = [(int(t), views.pop(int(t))) for t in touched]
                bid, base = max(parts, key=lambda t: (t[1].k + t[1].nc, -t[0]))
                parts = [t for t in parts if t[0] != bid]
            blk = st.blocks[bid]
            kb, rb, nb = base.k, base.r, base.nc
            blk.reserve(
                kb + sum(v.k for _, v in parts) + 1,
                rb + sum(v.r for _, v in parts) + 1,
                nb + sum(v.nc for _, v in parts) + fresh.size,
            )
            pos = np.zeros(idx.size, dtype=np.intp)  # the row's cells' places in blk
            at = np.flatnonzero(known)
            mine = b == bid
            pos[at[mine]] = p[mine]
            Rs = [base.R]
            for o, v in parts:  # merged into blk: its cells, directions and answers
                src = st.blocks[o]
                st.parent[o], st.offset[o] = bid, nb
                blk.cells[nb : nb + v.nc] = src.cells[: v.nc]
                blk.Q[rb : rb + v.r] = 0.0
                blk.Q[rb : rb + v.r, nb : nb + v.nc] = src.Q[: v.r, : v.nc]
                blk.L[kb : kb + v.k] = 0.0
                blk.L[kb : kb + v.k, rb : rb + v.r] = src.L[: v.k, : v.r]
                blk.answers[kb : kb + v.k] = src.answers[: v.k]
                here = b == o
                pos[at[here]] = p[here] + nb
                Rs.append(v.R)
                kb, rb, nb = kb + v.k, rb + v.r, nb + v.nc
            # the row's new cells: new columns of the store and of blk
            pos[~known] = np.arange(nb, nb + fresh.size)
            blk.cells[nb : nb + fresh.size] = fresh
            st.add_columns(self._nc, fresh, bid, nb)
            nb += fresh.size
            m = np.zeros(nb)
            m[pos] = val / sd
            # Gram-Schmidt against the block's basis, twice ("twice is enough"); the
            # other blocks' directions are zero on its cells
            basis = blk.Q[:rb, :nb]
            c = basis @ m
            resid = m - basis.T @ c
            c2 = basis @ resid
            c += c2
            resid -= basis.T @ c2
            rho = float(np.linalg.norm(resid))
            new_dir = rho > _RANK_TOL * float(np.linalg.norm(m))
            row = np.zeros(rb + 1 if new_dir else rb)
            row[:rb] = c
            if new_dir:
                blk.Q[rb] = 0.0
                blk.Q[rb, :nb] = resid / rho
                row[rb] = rho
            blk.L[kb] = 0.0
            blk.L[kb, : row.size] = row
            blk.answers[kb] = k
            st.idx.append(idx)
            st.val.append(val)
            r_total = self._r + (1 if new_dir else 0)
            st.k, st.r = k + 1, r_total
            view = _View(_givens_append(Rs, row), kb + 1, row.size, nb)
            views[bid] = view
            self._fact += view.entries - base.entries - sum(v.entries for _, v in parts)
            self._views = views
            self._r, self._nc, self._nnz = r_total, st.nc, self._nnz + idx.size
            self._labels.append(str(label))
            # under the store's lock: another copy's add reads _k to tell whether this
            # history holds the store's last row; set after the lock, a copy of the same
            # snapshot could find it shorter, cut the store back and write over its row
            self._k = k + 1
        return k

    def copy(self) -> History:
        """An independent copy (a snapshot: later ``add`` calls on either leave the other).

        O(answers): the rows and the factorisation are shared, append-only (:class:`_Store`).
        """
        h = History.__new__(History)
        while True:  # read under the lock of the store this history is on (an add may fork)
            store = self._store
            with store.lock:
                if self._store is not store:
                    continue
                h.__dict__.update(self.__dict__)
                for name in ("_y", "_eps", "_sens", "_sd", "_gauss", "_delta"):
                    setattr(h, name, getattr(self, name).copy())
                h._labels = list(self._labels)
                store.users.add(h)
                return h

    def set_noisy_answer(self, index: int, noisy_answer: float) -> None:
        """Set the noisy answer of row ``index``.

        The factorisation depends only on the coefficients, eps and sensitivities, never on
        the answers, so a row can be added before its noise is drawn (with a placeholder)
        and its answer filled in afterwards.
        """
        i = check_int(index, "index", minimum=0)
        if i >= self._k:
            raise ValueError(f"index must be < {self._k} (the number of answers), got {i}")
        self._y[i] = check_finite(noisy_answer, "noisy_answer")

    # ------------------------------------------------------------------ inference
    def is_estimable(self, target: Any) -> bool:
        q = check_coefficients(target, self.n_cells, "target")
        return self._residual(q) <= _ESTIMABLE_TOL

    def _project(self, q: np.ndarray) -> tuple[list[tuple[int, np.ndarray]], float]:
        """For each block ``q`` reads, (the block, c = its Q q), and the relative norm of
        q - Q^T c. Q is zero outside the cells the answers read: q's part there is all
        residual; each block's Q is zero outside its cells."""
        s = self._store
        cells = s.cells[: self._nc]
        qa = q[cells]
        out = q.copy()
        out[cells] = 0.0
        cols = np.flatnonzero(qa)
        vals = qa[cols]
        b, p = s.locate(cols, self._views)
        touched = np.unique(b)
        res2 = 0.0
        parts = []
        for t in touched:
            bid = int(t)
            v = self._views[bid]
            qa = np.zeros(v.nc)
            here = b == bid
            qa[p[here]] = vals[here]
            basis = s.blocks[bid].Q[: v.r, : v.nc]
            c = basis @ qa
            resid = qa - basis.T @ c
            res2 += float(resid @ resid)
            parts.append((bid, c))
        res = math.hypot(math.sqrt(res2), float(np.linalg.norm(out)))
        return parts, res / float(np.linalg.norm(q))

    def _residual(self, q: np.ndarray) -> float:
        if self._r == 0:
            return 1.0
        return self._project(q)[1]

    def blue(self, target: Any) -> BLUE:
        """The BLUE of ``target`` x (eqs. 15-17); ``NotEstimable`` if not in the row space."""
        q = check_coefficients(target, self.n_cells, "target")
        parts, res = ([], 1.0) if self._r == 0 else self._project(q)
        if res > _ESTIMABLE_TOL:
            raise NotEstimable(
                "target is not estimable from the history: it is not in the row space of the "
                f"{self._k} answered queries (relative residual {res:.3g}); an answer to a "
                "query covering the missing cells is needed"
            )
        k = self._k
        # each block on its own: the history's R, L are block-diagonal (zero across blocks)
        whitened = np.zeros(k)  # weight x sd: each answer's share of the error
        variance = 0.0
        for bid, c in parts:
            v = self._views[bid]
            blk = self._store.blocks[bid]
            u = solve_triangular(v.R, c, trans="T", lower=False)
            variance += float(u @ u)
            g = solve_triangular(v.R, u, lower=False)
            whitened[blk.answers[: v.k]] = blk.L[: v.k, : v.r] @ g
        # Round-off leaves ~1e-16 relative weights on answers that do not inform the target.
        # Compared in whitened units: weights in answer units differ by the answers' scales
        # (1e-100 coefficients against counts), and a rounding-level weight on a tiny-scale
        # answer would zero every weight that carries the target.
        whitened[np.abs(whitened) <= 1e-13 * np.abs(whitened).max()] = 0.0
        weights = whitened / self._sd[:k]
        estimate = float(weights @ self._y[:k])
        gauss = self._gauss[:k]
        scales = np.where(gauss, 0.0, np.abs(weights) * self._sens[:k] / self._eps[:k])
        g_scales = np.where(gauss, np.abs(weights) * self._sd[:k], 0.0) if gauss.any() else None
        return BLUE(estimate, variance, weights, scales, g_scales)

    def posterior(
        self,
        target: Any,
        *,
        method: str = "auto",
        accuracy: float = 1e-6,
        support: str = "real",
        rng: Any = None,
    ) -> Posterior:
        """The posterior of the target's true answer (uninformative prior, paper 000 §4).

        ``support="nonnegative-integers"`` adds the knowledge that the answer is a count
        (requires non-negative integer coefficients).
        """
        from dpbayes.answers.credible import Posterior

        b = self.blue(target)
        q = check_coefficients(target, self.n_cells, "target")
        return Posterior.from_blue(
            b, method=method, accuracy=accuracy, support=support, rng=rng, coefficients=q
        )

    def __repr__(self) -> str:
        return f"History(n_cells={self.n_cells}, answers={self._k}, rank={self._r})"


def _givens_append(Rs: list[np.ndarray], row: np.ndarray) -> np.ndarray:
    """The R of the blocks ``Rs`` (block-diagonal, in order) with ``row`` folded in, so that
    R^T R gains row^T row (QR row update by Givens rotations in LAPACK-backed
    ``scipy.linalg.qr_insert``; O(r^2) in the block's rank r, no refit). A new array: the
    old ones stay as the copies sharing them hold them."""
    n = row.size
    if len(Rs) == 1 and Rs[0].shape[0] == n:
        old = Rs[0]
    else:
        old = np.zeros((n, n))
        at = 0
        for R in Rs:
            m = R.shape[0]
            old[at : at + m, at : at + m] = R
            at += m
    _, r_new = qr_insert(np.eye(n), old, row, n, which="row", check_finite=False)
    return np.ascontiguousarray(r_new[:n])
