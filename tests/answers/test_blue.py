"""The BLUE from a history of noisy answers (paper 000 §3, eqs. 15-17)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpbayes.answers import History, NotEstimable
from dpbayes.privacy.noise import noise_source


def brute_force(H: np.ndarray, y: np.ndarray, eps: np.ndarray, q: np.ndarray):
    """Weighted least squares the textbook way: A = q (H^T W H)^+ H^T W."""
    S = np.abs(H).max(axis=1)
    W = np.diag(1.0 / (2.0 * (S / eps) ** 2))
    P = np.linalg.pinv(H.T @ W @ H, rcond=1e-12)
    A = q @ P @ H.T @ W
    return A @ y, q @ P @ q, A


def random_history(seed: int, k: int, n: int, rank_deficient: bool = True):
    gen = noise_source(seed).generator()
    H = gen.integers(-2, 3, size=(k, n)).astype(float)
    if rank_deficient:
        H[:, -1] = 0.0  # the last cell is never asked
        H[3] = 2.0 * H[1]  # a repeated (scaled) query
    H[~H.any(axis=1), 0] = 1.0
    eps = gen.uniform(0.05, 1.0, size=k)
    y = gen.normal(0, 50, size=k)
    return H, y, eps


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_blue_matches_brute_force_weighted_least_squares(seed: int) -> None:
    H, y, eps = random_history(seed, k=25, n=10)
    h = History(n_cells=10)
    for i in range(len(y)):
        h.add(H[i], y[i], eps[i])
    assert h.rank == np.linalg.matrix_rank(H)
    gen = noise_source(100 + seed).generator()
    for _ in range(5):
        q = gen.normal(size=len(y)) @ H  # any combination of asked queries is estimable
        est, var, A = brute_force(H, y, eps, q)
        b = h.blue(q)
        assert b.estimate == pytest.approx(est, rel=1e-9, abs=1e-9)
        assert b.variance == pytest.approx(var, rel=1e-9)
        np.testing.assert_allclose(b.weights, A, rtol=1e-7, atol=1e-10)
        # unbiased: A H = q (Cor. 3.1); MSE = sum A_i^2 Var(y_i) (eq. 17)
        np.testing.assert_allclose(b.weights @ H, q, atol=1e-9 * np.abs(q).max())
        assert b.variance == pytest.approx(float(b.weights**2 @ h.variances), rel=1e-9)
        np.testing.assert_allclose(b.scales, np.abs(A) * np.abs(H).max(1) / eps, rtol=1e-7)


def test_paper_style_example_full_rank() -> None:
    # 4 cells, history: total, two marginals, one cell; target: cell 0.
    H = np.array([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 1, 0], [0, 0, 0, 1], [0, 1, 0, 0]], float)
    x = np.array([10.0, 20.0, 5.0, 7.0])
    h = History(4)
    for row in H:
        h.add(row, float(row @ x), 0.5)
    b = h.blue([1, 0, 0, 0])
    assert b.estimate == pytest.approx(10.0)  # noise-free answers are consistent
    _est, var, _ = brute_force(H, H @ x, np.full(5, 0.5), np.array([1.0, 0, 0, 0]))
    assert b.variance == pytest.approx(var)


def test_not_estimable_says_so() -> None:
    h = History(3)
    h.add([1, 1, 0], 5.0, 1.0)
    assert not h.is_estimable([1, 0, 0])
    with pytest.raises(NotEstimable, match="not estimable"):
        h.blue([1, 0, 0])
    with pytest.raises(ValueError, match="row space"):
        h.blue([0, 0, 1])
    assert h.is_estimable([2, 2, 0])


def test_order_of_answers_does_not_matter() -> None:
    H, y, eps = random_history(7, k=15, n=8)
    q = H[0] + H[5] - H[9]
    a, b = History(8), History(8)
    for i in range(15):
        a.add(H[i], y[i], eps[i])
    for i in reversed(range(15)):
        b.add(H[i], y[i], eps[i])
    assert a.blue(q).estimate == pytest.approx(b.blue(q).estimate, rel=1e-9)
    assert a.blue(q).variance == pytest.approx(b.blue(q).variance, rel=1e-9)


def test_large_history_grows_storage_incrementally() -> None:
    gen = noise_source(1).generator()
    n = 40
    h = History(n)
    for _ in range(300):
        lo, hi = sorted(gen.integers(0, n, size=2))
        c = np.zeros(n)
        c[lo : hi + 1] = 1.0
        h.add(c, float(gen.normal(100, 10)), float(gen.uniform(0.1, 1)))
    assert len(h) == 300 and h.rank <= n
    H, y, eps = h.coefficients, h.answers, h.epsilons
    q = np.zeros(n)
    q[5:20] = 1.0
    if h.is_estimable(q):
        est, var, _ = brute_force(H, y, eps, q)
        assert h.blue(q).estimate == pytest.approx(est, rel=1e-8)
        assert h.blue(q).variance == pytest.approx(var, rel=1e-8)


@pytest.mark.parametrize(
    ("coef", "kw", "exc"),
    [
        ([1, 0], {}, ValueError),  # wrong length
        ([0, 0, 0], {}, ValueError),  # empty query
        ([1, float("nan"), 0], {}, ValueError),
        ([1, 0, 0], {"sensitivity": 0.5}, ValueError),  # below Lemma 2.1
        ("abc", {}, TypeError),
    ],
)
def test_bad_answers_are_refused_and_leave_history_unchanged(coef, kw, exc) -> None:
    h = History(3)
    h.add([1, 1, 1], 10.0, 1.0)
    with pytest.raises(exc):
        h.add(coef, 1.0, 1.0, **kw)
    assert len(h) == 1 and h.rank == 1
    with pytest.raises(ValueError):
        h.add([1, 0, 0], 1.0, -1.0)
    with pytest.raises(ValueError):
        h.add([1, 0, 0], float("inf"), 1.0)
    assert len(h) == 1


def test_explicit_larger_sensitivity_is_used() -> None:
    h = History(2)
    h.add([1, 0], 3.0, 1.0, sensitivity=2.0)
    assert h.sensitivities[0] == 2.0
    assert h.blue([1, 0]).variance == pytest.approx(2 * 2.0**2)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    k=st.integers(1, 12),
    n=st.integers(1, 6),
)
def test_property_unbiased_weights_and_positive_variance(seed: int, k: int, n: int) -> None:
    gen = noise_source(seed).generator()
    H = gen.integers(-3, 4, size=(k, n)).astype(float)
    H[~H.any(axis=1), 0] = 1.0
    h = History(n)
    for row in H:
        h.add(row, float(gen.normal()), float(gen.uniform(0.1, 2)))
    q = gen.integers(-2, 3, size=k).astype(float) @ H
    if not np.any(q):
        return
    b = h.blue(q)
    assert b.variance > 0
    np.testing.assert_allclose(b.weights @ H, q, atol=1e-8 * max(1.0, np.abs(q).max()))
