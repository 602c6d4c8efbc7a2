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
re-orthogonalisation, O(r N) per answer), and the upper-triangular R with R^T R = L^T L
(updated by Givens rotations when a row is appended, O(r^2) per answer). For a target q
with c = Q q (and q - Q^T c = 0, else not estimable): variance = ||R^-T c||^2 and the weights
on the whitened answers are L R^-1 R^-T c. No matrix is inverted and no answer triggers a
refit.
"""

from __future__ import annotations

import math
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


class History:
    """The answers released so far for queries over a cube of ``n_cells`` cells.

    Every answer is y_i = H_i x + Lap(S_i / eps_i) (``noise="laplace"``, paper 000) or
    y_i = H_i x + N(0, sigma_i^2) (``noise="gaussian"``), neighbouring data sets differing by
    the addition or removal of one record (Lemma 2.1). ``add`` costs O(r N + r^2) with r the
    rank of the history so far.
    """

    def __init__(self, n_cells: int, *, neighbours: Neighbours | str = Neighbours.ADD_REMOVE):
        self.n_cells = check_int(n_cells, "n_cells", minimum=1)
        self.neighbours = Neighbours.parse(neighbours)
        self.cube: Cube | None = None
        cap = 16
        self._k = 0
        self._r = 0
        self._H = np.zeros((cap, self.n_cells))
        self._y = np.zeros(cap)
        self._eps = np.zeros(cap)
        self._sens = np.zeros(cap)
        self._sd = np.zeros(cap)  # sd of each answer's noise
        self._gauss = np.zeros(cap, dtype=bool)  # whether it is Gaussian
        self._delta = np.zeros(cap)  # the delta of its guarantee (0 for Laplace)
        self._labels: list[str] = []
        self._Q = np.zeros((min(cap, self.n_cells), self.n_cells))
        self._R = np.zeros((min(cap, self.n_cells),) * 2)
        self._L = np.zeros((cap, min(cap, self.n_cells)))

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
        return self._H[: self._k].copy()

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
        cap = 2 * self._H.shape[0]
        for name in ("_H", "_L"):
            old = getattr(self, name)
            new = np.zeros((cap, old.shape[1]))
            new[: old.shape[0]] = old
            setattr(self, name, new)
        for name in ("_y", "_eps", "_sens", "_sd", "_gauss", "_delta"):
            old = getattr(self, name)
            new = np.zeros(cap, dtype=old.dtype)
            new[: old.size] = old
            setattr(self, name, new)

    def _grow_rank(self) -> None:
        cap = min(self.n_cells, 2 * self._Q.shape[0])
        q = np.zeros((cap, self.n_cells))
        q[: self._Q.shape[0]] = self._Q
        r = np.zeros((cap, cap))
        r[: self._R.shape[0], : self._R.shape[1]] = self._R
        lm = np.zeros((self._L.shape[0], cap))
        lm[:, : self._L.shape[1]] = self._L
        self._Q, self._R, self._L = q, r, lm

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
        m = h / sd
        # Gram-Schmidt against the current basis, twice ("twice is enough").
        r = self._r
        basis = self._Q[:r]
        c = basis @ m
        resid = m - basis.T @ c
        c2 = basis @ resid
        c += c2
        resid -= basis.T @ c2
        rho = float(np.linalg.norm(resid))
        new_dir = rho > _RANK_TOL * float(np.linalg.norm(m))
        if self._k == self._H.shape[0]:
            self._grow_rows()
        if new_dir and r == self._Q.shape[0]:
            self._grow_rank()
        row = np.zeros(r + 1 if new_dir else r)
        row[:r] = c
        if new_dir:
            self._Q[r] = resid / rho
            row[r] = rho
            self._r = r + 1
        self._L[self._k, : row.size] = row
        self._givens_append(row)
        k = self._k
        self._H[k], self._y[k], self._eps[k], self._sens[k] = h, y, eps, s
        self._sd[k], self._gauss[k], self._delta[k] = sd, gaussian, dlt
        self._labels.append(str(label))
        self._k = k + 1
        return k

    def copy(self) -> History:
        """An independent copy (a snapshot: later ``add`` calls on either leave the other)."""
        h = History.__new__(History)
        h.__dict__.update(self.__dict__)
        for name in ("_H", "_y", "_eps", "_sens", "_sd", "_gauss", "_delta", "_Q", "_R", "_L"):
            setattr(h, name, getattr(self, name).copy())
        h._labels = list(self._labels)
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

    def _givens_append(self, row: np.ndarray) -> None:
        """Fold ``row`` into R so that R^T R gains row^T row (QR row update by Givens
        rotations in LAPACK-backed ``scipy.linalg.qr_insert``; O(r^2), no refit)."""
        n = row.size
        _, r_new = qr_insert(np.eye(n), self._R[:n, :n], row, n, which="row", check_finite=False)
        self._R[:n, :n] = r_new[:n]

    # ------------------------------------------------------------------ inference
    def is_estimable(self, target: Any) -> bool:
        q = check_coefficients(target, self.n_cells, "target")
        return self._residual(q) <= _ESTIMABLE_TOL

    def _residual(self, q: np.ndarray) -> float:
        if self._r == 0:
            return 1.0
        basis = self._Q[: self._r]
        c = basis @ q
        resid = q - basis.T @ c
        return float(np.linalg.norm(resid) / np.linalg.norm(q))

    def blue(self, target: Any) -> BLUE:
        """The BLUE of ``target`` x (eqs. 15-17); ``NotEstimable`` if not in the row space."""
        q = check_coefficients(target, self.n_cells, "target")
        res = self._residual(q)
        if res > _ESTIMABLE_TOL:
            raise NotEstimable(
                "target is not estimable from the history: it is not in the row space of the "
                f"{self._k} answered queries (relative residual {res:.3g}); an answer to a "
                "query covering the missing cells is needed"
            )
        r = self._r
        c = self._Q[:r] @ q
        R = self._R[:r, :r]
        u = solve_triangular(R, c, trans="T", lower=False)
        variance = float(u @ u)
        g = solve_triangular(R, u, lower=False)
        k = self._k
        whitened = self._L[:k, :r] @ g  # weight x sd: each answer's share of the error
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
