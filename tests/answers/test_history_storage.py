"""The history stores its answers' rows sparsely and shares them between copies.

It used to keep a dense row over all cells per answer (and a dense basis), and every copy
(the service takes one per fresh request and per reload) copied answers x cells numbers.
The inference must be the one the dense history gave: a dense reference (the same
Gram-Schmidt and Givens updates over every cell) and brute-force least squares agree
with it, and copies that branch (append each its own answers) stay independent.
"""

from __future__ import annotations

import threading
import tracemalloc

import numpy as np
import pytest
from scipy.linalg import qr_insert, solve_triangular

from dpbayes.answers import History, NotEstimable
from dpbayes.answers.credible import Posterior
from dpbayes.privacy.noise import noise_source


class DenseHistory:
    """The dense reference: the history's algorithm with every row and the basis stored
    over all cells (as it was before the storage became sparse)."""

    def __init__(self, n: int) -> None:
        self.n, self.rows, self.sd, self.y, self.scale = n, [], [], [], []
        self.Q = np.zeros((0, n))
        self.L: list[np.ndarray] = []
        self.R = np.zeros((0, 0))

    def add(self, h: np.ndarray, y: float, eps: float) -> None:
        s = float(np.max(np.abs(h)))
        sd = np.sqrt(2.0) * s / eps
        m = h / sd
        c = self.Q @ m
        resid = m - self.Q.T @ c
        c2 = self.Q @ resid
        c += c2
        resid -= self.Q.T @ c2
        rho = float(np.linalg.norm(resid))
        r = self.Q.shape[0]
        row = np.zeros(r + 1) if rho > 1e-9 * float(np.linalg.norm(m)) else np.zeros(r)
        row[:r] = c
        if row.size > r:
            self.Q = np.vstack([self.Q, resid / rho])
            row[r] = rho
        n = row.size
        old = np.zeros((n, n))
        old[:r, :r] = self.R
        self.R = qr_insert(np.eye(n), old, row, n, which="row", check_finite=False)[1][:n]
        self.L.append(row)
        self.rows.append(h)
        self.sd.append(sd)
        self.y.append(y)
        self.scale.append(s / eps)

    def blue(self, q: np.ndarray) -> tuple[float, float, np.ndarray, np.ndarray]:
        c = self.Q @ q
        if np.linalg.norm(q - self.Q.T @ c) / np.linalg.norm(q) > 1e-8:
            raise NotEstimable("not estimable")
        r = self.Q.shape[0]
        u = solve_triangular(self.R, c, trans="T", lower=False)
        g = solve_triangular(self.R, u, lower=False)
        L = np.array([np.pad(row, (0, r - row.size)) for row in self.L])
        w = L @ g
        w[np.abs(w) <= 1e-13 * np.abs(w).max()] = 0.0
        weights = w / np.array(self.sd)
        return (
            float(weights @ np.array(self.y)),
            float(u @ u),
            weights,
            np.abs(weights) * np.array(self.scale),
        )


def _queries(seed: int, n: int, k: int) -> list[np.ndarray]:
    """Single cells, small ranges, a few wide and signed/weighted queries, repeats."""
    gen = noise_source(seed).generator()
    out = []
    for i in range(k):
        q = np.zeros(n)
        kind = i % 5
        if kind == 0:
            q[gen.integers(0, n)] = 1.0
        elif kind in (1, 2):
            lo = int(gen.integers(0, n - 4))
            q[lo : lo + int(gen.integers(2, 5))] = 1.0
        elif kind == 3:
            cells = gen.choice(n, size=6, replace=False)
            q[cells] = gen.integers(-2, 3, size=6)
            if not q.any():
                q[cells[0]] = 1.0
        else:
            q[:] = out[int(gen.integers(0, len(out)))] if out else 1.0
        out.append(q)
    return out


def _targets(n: int, history: list[np.ndarray]) -> list[np.ndarray]:
    total = np.ones(n)
    pair = history[0] + history[2]
    outside = np.zeros(n)
    outside[n - 1] = 1.0
    return [total, pair, 3.0 * history[1], history[3], outside, history[-1]]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sparse_history_gives_the_dense_histories_answers_and_posteriors(seed: int) -> None:
    n, k = 30, 40
    gen = noise_source(100 + seed).generator()
    qs = _queries(seed, n, k)
    ys = gen.normal(50, 10, size=k)
    eps = gen.uniform(0.1, 1.0, size=k)
    sparse, dense = History(n), DenseHistory(n)
    for q, y, e in zip(qs, ys, eps, strict=True):
        sparse.add(q, float(y), float(e))
        dense.add(q, float(y), float(e))
    assert sparse.rank == dense.Q.shape[0]
    np.testing.assert_array_equal(sparse.coefficients, np.array(qs))
    compared = 0
    for t in _targets(n, qs):
        try:
            ref = dense.blue(t)
        except NotEstimable:
            assert not sparse.is_estimable(t)
            with pytest.raises(NotEstimable):
                sparse.blue(t)
            continue
        b = sparse.blue(t)
        compared += 1
        assert b.estimate == pytest.approx(ref[0], rel=1e-12, abs=1e-9)
        assert b.variance == pytest.approx(ref[1], rel=1e-12)
        np.testing.assert_allclose(b.weights, ref[2], rtol=1e-9, atol=1e-12)
        np.testing.assert_array_equal(b.weights == 0, ref[2] == 0)
        np.testing.assert_allclose(b.scales, ref[3], rtol=1e-9, atol=1e-12)
        # the posterior (the error distribution from those scales) and its interval
        post = sparse.posterior(t)
        ref_post = Posterior.from_blue(type(b)(ref[0], ref[1], ref[2], ref[3]), coefficients=t)
        lo, hi = post.interval(0.9)
        rlo, rhi = ref_post.interval(0.9)
        assert lo == pytest.approx(rlo, rel=1e-9) and hi == pytest.approx(rhi, rel=1e-9)
    assert compared >= 4


def _build(qs: list[np.ndarray], n: int) -> History:
    h = History(n)
    for i, q in enumerate(qs):
        h.add(q, 10.0 + i, 0.5)
    return h


def _same(a: History, b: History, targets: list[np.ndarray]) -> None:
    assert (len(a), a.rank) == (len(b), b.rank)
    np.testing.assert_array_equal(a.coefficients, b.coefficients)
    np.testing.assert_array_equal(a.answers, b.answers)
    for t in targets:
        if not b.is_estimable(t):
            assert not a.is_estimable(t)
            continue
        x, y = a.blue(t), b.blue(t)
        assert x.estimate == pytest.approx(y.estimate, rel=1e-12)
        assert x.variance == pytest.approx(y.variance, rel=1e-12)
        np.testing.assert_allclose(x.weights, y.weights, rtol=1e-10, atol=1e-14)


def test_copies_that_branch_stay_independent() -> None:
    n = 25
    qs = _queries(3, n, 30)
    base_qs, one, two = qs[:20], qs[20:25], qs[25:]
    targets = _targets(n, qs) + [np.eye(n)[j] for j in range(0, n, 3)]
    base = _build(base_qs, n)
    before = [base.blue(t).estimate for t in targets if base.is_estimable(t)]
    a, b = base.copy(), base.copy()
    for i, q in enumerate(one):
        a.add(q, 10.0 + 20 + i, 0.5)  # in place: nobody holds more than a
    for i, q in enumerate(two):
        b.add(q, 10.0 + 20 + i, 0.5)  # a holds more: b copies its prefix
    a.set_noisy_answer(len(a) - 1, -7.0)  # set on a only
    ref_a = _build(base_qs + one, n)
    ref_a.set_noisy_answer(len(ref_a) - 1, -7.0)
    _same(a, ref_a, targets)
    _same(b, _build(base_qs + two, n), targets)
    _same(base, _build(base_qs, n), targets)
    assert before == [base.blue(t).estimate for t in targets if base.is_estimable(t)]
    # the base appends while a and b hold longer histories: a and b are unchanged
    c = base.copy()
    base.add(two[0], 30.0, 0.5)
    _same(base, _build([*base_qs, two[0]], n), targets)
    _same(a, ref_a, targets)
    _same(c, _build(base_qs, n), targets)


def test_an_abandoned_branch_is_written_over() -> None:
    """A fresh request's copy that is never committed leaves nothing behind: the next
    copy appends where it was (no copy of the prefix), with the same results."""
    n = 20
    qs = _queries(4, n, 16)
    targets = _targets(n, qs)
    base = _build(qs[:12], n)
    store = base._store
    dropped = base.copy()
    dropped.add(qs[12], 1.0, 0.5)
    dropped.add(qs[13], 2.0, 0.5)
    del dropped
    kept = base.copy()
    kept.add(qs[14], 22.0, 0.5)
    assert kept._store is store  # cut back and reused, not forked
    _same(kept, _build([*qs[:12], qs[14]], n), targets)
    _same(base, _build(qs[:12], n), targets)


def test_copies_branching_on_threads_stay_independent() -> None:
    n = 40
    qs = _queries(5, n, 60)
    targets = _targets(n, qs)
    base = _build(qs[:30], n)
    results: dict[int, History] = {}
    errors: list[BaseException] = []

    def branch(i: int) -> None:
        try:
            h = base.copy()
            for j in range(3):
                h.add(qs[30 + 3 * i + j], float(j), 0.5)
            results[i] = h
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=branch, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i, h in results.items():
        ref = History(n)
        for j, q in enumerate(qs[:30]):
            ref.add(q, 10.0 + j, 0.5)
        for j in range(3):
            ref.add(qs[30 + 3 * i + j], float(j), 0.5)
        _same(h, ref, targets)


def test_a_copy_costs_answers_not_answers_times_cells() -> None:
    n = 100_000
    h = History(n)
    q = np.zeros(n)
    for i in range(50):
        q[:] = 0.0
        q[i * 1000 : i * 1000 + 1 + i % 3] = 1.0
        h.add(q, 5.0, 0.5)
    tracemalloc.start()
    try:
        c = h.copy()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200_000, peak  # a dense history's copy: 2 x 64 x 100,000 x 8 bytes
    assert c.entries == h.entries < 20_000
    assert h.entries_with(np.ones(n)) >= n


def test_entries_bound_what_an_answer_adds() -> None:
    n = 50
    h = History(n)
    for q in _queries(6, n, 25):
        bound = h.entries_with(q)
        h.add(q, 1.0, 0.5)
        assert h.entries <= bound
