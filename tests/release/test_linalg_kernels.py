"""The compiled samplers' small linear algebra against numpy's LAPACK and BLAS."""

from __future__ import annotations

import numpy as np
import pytest

from dpbayes.release.linalg_kernels import (
    chol_solve,
    chol_solve_columns,
    dot,
    logdet_chol,
    matmul,
    matvec,
    spd_cholesky,
)


@pytest.mark.parametrize("d", [1, 2, 5, 13])
def test_cholesky_solves_and_products_match_numpy(d: int) -> None:
    gen = np.random.default_rng(d)
    b = gen.normal(size=(d, d))
    a = b @ b.T + d * np.eye(d) * 10.0 ** gen.uniform(-6, 2)
    lo = spd_cholesky(a)
    np.testing.assert_allclose(lo, np.linalg.cholesky(a), rtol=1e-12, atol=1e-14)
    assert np.all(np.triu(lo, 1) == 0.0)
    assert logdet_chol(lo) == pytest.approx(np.linalg.slogdet(a)[1], rel=1e-12, abs=1e-12)
    x, m = gen.normal(size=d), gen.normal(size=(d, 3))
    np.testing.assert_allclose(a @ chol_solve(lo, x), x, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(a @ chol_solve_columns(lo, m), m, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(
        chol_solve_columns(lo, np.eye(d)), np.linalg.inv(a), rtol=1e-8, atol=1e-12
    )
    c = gen.normal(size=(d, 4))
    np.testing.assert_allclose(matmul(b, c), b @ c, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(matmul(b, b, True), b @ b.T, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(matvec(b, x), b @ x, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(matvec(b, x, True), b.T @ x, rtol=1e-12, atol=1e-13)
    assert dot(x, x) == pytest.approx(float(x @ x), rel=1e-14)


def test_a_matrix_that_is_not_positive_definite_is_refused() -> None:
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        spd_cholesky(np.array([[1.0, 2.0], [2.0, 1.0]]))
