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
re-orthogonalisation, O(r C) per answer, C the cells the answers read), and the
upper-triangular R with R^T R = L^T L (updated by Givens rotations when a row is appended,
O(r^2) per answer). For a target q with c = Q q (and q - Q^T c = 0, else not estimable):
variance = ||R^-T c||^2 and the weights on the whitened answers are L R^-1 R^-T c. No
matrix is inverted and no answer triggers a refit.

Storage (:class:`_Store`): each answer's row sparsely, and Q only over the C cells some
answer reads (Q is zero on the others), never over all N cells of the cube; copies of a
history share it, append-only, so a copy (the service's snapshot) costs O(answers).
"""

from __future__ import annotations

import math
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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

_RANK_TOL = 1e-9
_ESTIMABLE_TOL = 1e-8
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


class _Store:
    """The rows and the factorisation a :class:`History` and its copies share.

    Append-only: the answers' sparse rows, the basis Q (rows: directions; columns: only the
    cells some answer reads, in the order they were first read) and L. A history reads the
    prefix it knows (its own counts of answers, rank and columns); rows and columns past
    them belong to longer histories. A history appends in place when no live history
    sharing the store holds more than it does; else it forks (copies its prefix). So a
    copy (a snapshot) is O(answers), never O(answers x cells).
    """

    def __init__(self, n_cells: int) -> None:
        self.lock = threading.Lock()
        self.users: weakref.WeakSet[History] = weakref.WeakSet()
        self.k = self.r = self.nc = 0  # the answers, rank and columns written
        self.idx: list[np.ndarray] = []  # each answer's cells (sorted)
        self.val: list[np.ndarray] = []  # and its coefficients on them
        self.cells = np.zeros(16, dtype=np.intp)  # column -> cell
        self.col_of = np.full(n_cells, -1, dtype=np.intp)  # cell -> column (-1: none)
        self.Q = np.zeros((min(16, n_cells), 16))
        self.L = np.zeros((16, min(16, n_cells)))

    def fork(self, k: int, r: int, nc: int, n_cells: int) -> _Store:
        """A store of its own holding the prefix (k answers, rank r, nc columns)."""
        s = _Store.__new__(_Store)
        s.lock, s.users = threading.Lock(), weakref.WeakSet()
        s.k, s.r, s.nc = k, r, nc
        s.idx, s.val = self.idx[:k], self.val[:k]  # the arrays are never written
        s.cells = _resized(self.cells[:nc], max(16, 2 * nc))
        s.col_of = np.full(n_cells, -1, dtype=np.intp)
        s.col_of[s.cells[:nc]] = np.arange(nc)
        s.Q = _resized(self.Q[:r, :nc], min(n_cells, max(16, 2 * r)), max(16, 2 * nc))
        s.L = _resized(self.L[:k, :r], max(16, 2 * k), min(n_cells, max(16, 2 * r)))
        return s

    def truncate(self, k: int, r: int, nc: int) -> None:
        """Drop what lies past the prefix (no live history holds it)."""
        del self.idx[k:], self.val[k:]
        self.col_of[self.cells[nc : self.nc]] = -1
        self.k, self.r, self.nc = k, r, nc


def _resized(a: np.ndarray, *shape: int) -> np.ndarray:
    """``a`` in a zero array of ``shape`` (at least a's shape)."""
    out = np.zeros(tuple(max(s, n) for s, n in zip(shape, a.shape, strict=True)), a.dtype)
    out[tuple(slice(0, n) for n in a.shape)] = a
    return out


class History:
    """The answers released so far for queries over a cube of ``n_cells`` cells.

    Every answer is y_i = H_i x + Lap(S_i / eps_i) (``noise="laplace"``, paper 000) or
    y_i = H_i x + N(0, sigma_i^2) (``noise="gaussian"``), neighbouring data sets differing by
    the addition or removal of one record (Lemma 2.1). ``add`` costs O(r C + r^2) with r the
    rank of the history so far and C the number of cells its answers read.

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
        self._R = np.zeros((0, 0))  # r x r, never written in place (copies share it)

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
        non-zero coefficients + rank x cells read (Q) + answers x rank (L) + rank^2 (R)."""
        r = self._r
        return self._nnz + r * self._nc + self._k * r + r * r

    def entries_with(self, coefficients: Any) -> int:
        """An upper bound on :attr:`entries` once an answer to ``coefficients`` is added."""
        q = check_coefficients(coefficients, self.n_cells)
        idx = np.flatnonzero(q)
        col = self._store.col_of[idx]
        new = int(np.count_nonzero((col < 0) | (col >= self._nc)))
        nnz = self._nnz + idx.size
        k, r = self._k + 1, min(self._r + 1, self.n_cells)
        return nnz + r * (self._nc + new) + k * r + r * r

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
        new = s.fork(k, r, nc, self.n_cells)
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
        s_min = query_sensitivity(h)
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
        idx = np.flatnonzero(h)
        val = h[idx].copy()
        idx.setflags(write=False)  # shared by every copy: never written
        val.setflags(write=False)
        k, r = self._k, self._r
        with self._store.lock:
            st = self._own_store()
            # the row's cells as columns of Q (new cells get new columns)
            col = st.col_of[idx]
            fresh = idx[col < 0]
            nc = self._nc + fresh.size
            if nc > st.cells.size:
                st.cells = _resized(st.cells, max(nc, 2 * st.cells.size))
            if nc > st.Q.shape[1]:
                st.Q = _resized(st.Q, st.Q.shape[0], min(self.n_cells, max(nc, 2 * st.Q.shape[1])))
            st.cells[self._nc : nc] = fresh
            st.col_of[fresh] = np.arange(self._nc, nc)
            st.nc = nc
            m = np.zeros(nc)
            m[st.col_of[idx]] = val / sd
            # Gram-Schmidt against the current basis, twice ("twice is enough").
            basis = st.Q[:r, :nc]
            c = basis @ m
            resid = m - basis.T @ c
            c2 = basis @ resid
            c += c2
            resid -= basis.T @ c2
            rho = float(np.linalg.norm(resid))
            new_dir = rho > _RANK_TOL * float(np.linalg.norm(m))
            row = np.zeros(r + 1 if new_dir else r)
            row[:r] = c
            if new_dir:
                if r == st.Q.shape[0]:
                    st.Q = _resized(st.Q, min(self.n_cells, 2 * r), st.Q.shape[1])
                st.Q[r] = 0.0
                st.Q[r, :nc] = resid / rho
                row[r] = rho
                if r + 1 > st.L.shape[1]:
                    st.L = _resized(st.L, st.L.shape[0], min(self.n_cells, 2 * st.L.shape[1]))
            if k == st.L.shape[0]:
                st.L = _resized(st.L, 2 * k, st.L.shape[1])
            st.L[k] = 0.0
            st.L[k, : row.size] = row
            st.idx.append(idx)
            st.val.append(val)
            st.k, st.r = k + 1, row.size
            self._R = self._givens_append(row)
            self._r, self._nc, self._nnz = row.size, nc, self._nnz + idx.size
        if k == self._y.size:
            self._grow_rows()
        self._y[k], self._eps[k], self._sens[k] = y, eps, s
        self._sd[k], self._gauss[k], self._delta[k] = sd, gaussian, dlt
        self._labels.append(str(label))
        self._k = k + 1
        return k

    def copy(self) -> History:
        """An independent copy (a snapshot: later ``add`` calls on either leave the other).

        O(answers): the rows and the factorisation are shared, append-only (:class:`_Store`).
        """
        h = History.__new__(History)
        h.__dict__.update(self.__dict__)
        for name in ("_y", "_eps", "_sens", "_sd", "_gauss", "_delta"):
            setattr(h, name, getattr(self, name).copy())
        h._labels = list(self._labels)
        with self._store.lock:
            h._store = self._store  # (it may have forked since __dict__ was read)
            h._store.users.add(h)
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

    def _givens_append(self, row: np.ndarray) -> np.ndarray:
        """R with ``row`` folded in, so that R^T R gains row^T row (QR row update by Givens
        rotations in LAPACK-backed ``scipy.linalg.qr_insert``; O(r^2), no refit). A new
        array: the old R stays as the copies sharing it hold it."""
        n = row.size
        r = self._R.shape[0]
        old = self._R if r == n else _resized(self._R, n, n)
        _, r_new = qr_insert(np.eye(n), old, row, n, which="row", check_finite=False)
        return np.ascontiguousarray(r_new[:n])

    # ------------------------------------------------------------------ inference
    def is_estimable(self, target: Any) -> bool:
        q = check_coefficients(target, self.n_cells, "target")
        return self._residual(q) <= _ESTIMABLE_TOL

    def _project(self, q: np.ndarray) -> tuple[np.ndarray, float]:
        """(c = Q q, the relative norm of q - Q^T c). Q is zero outside the
        cells the answers read: q's part there is all residual."""
        s = self._store
        cells = s.cells[: self._nc]
        basis = s.Q[: self._r, : self._nc]
        qa = q[cells]
        c = basis @ qa
        resid = qa - basis.T @ c
        out = q.copy()
        out[cells] = 0.0
        res = math.hypot(float(np.linalg.norm(resid)), float(np.linalg.norm(out)))
        return c, res / float(np.linalg.norm(q))

    def _residual(self, q: np.ndarray) -> float:
        if self._r == 0:
            return 1.0
        return self._project(q)[1]

    def blue(self, target: Any) -> BLUE:
        """The BLUE of ``target`` x (eqs. 15-17); ``NotEstimable`` if not in the row space."""
        q = check_coefficients(target, self.n_cells, "target")
        c, res = (np.zeros(0), 1.0) if self._r == 0 else self._project(q)
        if res > _ESTIMABLE_TOL:
            raise NotEstimable(
                "target is not estimable from the history: it is not in the row space of the "
                f"{self._k} answered queries (relative residual {res:.3g}); an answer to a "
                "query covering the missing cells is needed"
            )
        r = self._r
        R = self._R
        u = solve_triangular(R, c, trans="T", lower=False)
        variance = float(u @ u)
        g = solve_triangular(R, u, lower=False)
        k = self._k
        whitened = self._store.L[:k, :r] @ g  # weight x sd: each answer's share of the error
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
