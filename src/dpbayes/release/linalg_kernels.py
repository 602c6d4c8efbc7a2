"""Small dense linear algebra for the compiled samplers (numba): triangular solves, the
Cholesky factor, solves and inverses of symmetric positive definite matrices through it.

Plain loops rather than ``np.linalg`` inside numba: the matrices are small (d up to a
few dozen), the loops run as fast, and they compile in a fraction of a second where
numba's LAPACK bindings of ``solve`` and ``inv`` take 3-9 s each on first use.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = [
    "backward",
    "chol_from",
    "chol_into",
    "chol_solve",
    "chol_solve_columns",
    "forward",
    "logdet_chol",
    "spd_cholesky",
]


@njit(cache=True)
def forward(lo, rhs, out):  # type: ignore[no-untyped-def]
    """out = L^-1 rhs for a lower-triangular L (out may be rhs)."""
    for u in range(rhs.size):
        r = rhs[u]
        for v in range(u):
            r -= lo[u, v] * out[v]
        out[u] = r / lo[u, u]


@njit(cache=True)
def backward(lo, rhs, out):  # type: ignore[no-untyped-def]
    """out = L^-T rhs for a lower-triangular L (out may be rhs)."""
    for u in range(rhs.size - 1, -1, -1):
        r = rhs[u]
        for v in range(u + 1, rhs.size):
            r -= lo[v, u] * out[v]
        out[u] = r / lo[u, u]


@njit(cache=True)
def chol_from(a, out, r0):  # type: ignore[no-untyped-def]
    """Rows r0.. of the lower Cholesky factor of a into out, given its rows < r0 in out
    (they depend on a's leading r0 x r0 block only); False if a is not positive definite.
    Column by column, each entry's sum in the order k = 0, 1, ..; four rows of a column at
    once (independent sums, so the same rounding as one row at a time)."""
    d = a.shape[0]
    for j in range(d):
        if j >= r0:
            s = a[j, j]
            for k in range(j):
                s -= out[j, k] * out[j, k]
            if not s > 0.0:
                return False
            out[j, j] = math.sqrt(s)
            for i in range(j):
                out[i, j] = 0.0
        dj = out[j, j]
        i = max(j + 1, r0)
        while i + 3 < d:
            s0 = a[i, j]
            s1 = a[i + 1, j]
            s2 = a[i + 2, j]
            s3 = a[i + 3, j]
            for k in range(j):
                ojk = out[j, k]
                s0 -= out[i, k] * ojk
                s1 -= out[i + 1, k] * ojk
                s2 -= out[i + 2, k] * ojk
                s3 -= out[i + 3, k] * ojk
            out[i, j] = s0 / dj
            out[i + 1, j] = s1 / dj
            out[i + 2, j] = s2 / dj
            out[i + 3, j] = s3 / dj
            i += 4
        while i < d:
            s = a[i, j]
            for k in range(j):
                s -= out[i, k] * out[j, k]
            out[i, j] = s / dj
            i += 1
    return True


@njit(cache=True)
def chol_into(a, out):  # type: ignore[no-untyped-def]
    """Lower Cholesky factor of a into out; False if a is not positive definite."""
    return chol_from(a, out, 0)


@njit(cache=True)
def spd_cholesky(a):  # type: ignore[no-untyped-def]
    """The lower Cholesky factor of a symmetric positive definite a (LinAlgError if not)."""
    out = np.empty_like(a)
    if not chol_into(a, out):
        raise np.linalg.LinAlgError("matrix is not positive definite")
    return out


@njit(cache=True)
def logdet_chol(lo):  # type: ignore[no-untyped-def]
    """log det(L L') from the lower factor L."""
    out = 0.0
    for i in range(lo.shape[0]):
        out += 2.0 * math.log(lo[i, i])
    return out


@njit(cache=True)
def chol_solve(lo, rhs):  # type: ignore[no-untyped-def]
    """x = (L L')^-1 rhs for a vector rhs: a forward and a backward solve."""
    out = np.empty(rhs.size)
    forward(lo, rhs, out)
    backward(lo, out, out)
    return out


@njit(cache=True)
def chol_solve_columns(lo, rhs):  # type: ignore[no-untyped-def]
    """X = (L L')^-1 rhs for a matrix rhs, column by column (rhs = I: the inverse)."""
    d, k = rhs.shape
    out = np.empty((d, k))
    col = np.empty(d)
    for c in range(k):
        for i in range(d):
            col[i] = rhs[i, c]
        forward(lo, col, col)
        backward(lo, col, col)
        for i in range(d):
            out[i, c] = col[i]
    return out


@njit(cache=True)
def matmul(a, b, transpose_b=False):  # type: ignore[no-untyped-def]
    """a @ b (a @ b.T with ``transpose_b``) for 2-d arrays, as loops: numba's BLAS binding
    of ``@`` compiles for about a second per combination of layouts."""
    m, k = a.shape
    n = b.shape[0] if transpose_b else b.shape[1]
    out = np.zeros((m, n))
    for i in range(m):
        for j in range(n):
            s = 0.0
            for u in range(k):
                s += a[i, u] * (b[j, u] if transpose_b else b[u, j])
            out[i, j] = s
    return out


@njit(cache=True)
def matvec(a, x, transpose_a=False):  # type: ignore[no-untyped-def]
    """a @ x (a.T @ x with ``transpose_a``) for a 2-d a and a vector x, as loops."""
    m = a.shape[1] if transpose_a else a.shape[0]
    k = x.size
    out = np.zeros(m)
    for i in range(m):
        s = 0.0
        for u in range(k):
            s += (a[u, i] if transpose_a else a[i, u]) * x[u]
        out[i] = s
    return out


@njit(cache=True)
def dot(x, y):  # type: ignore[no-untyped-def]
    """x . y for two vectors."""
    s = 0.0
    for i in range(x.size):
        s += x[i] * y[i]
    return s
