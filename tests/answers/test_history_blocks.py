"""The history factorises each connected component of its answers on its own.

Answers reading disjoint cells give a block-diagonal factorisation: each block (answers
linked by a common cell) keeps Q over its own cells, L over its own directions and its
own R, and an answer that reads cells of several blocks merges them (the smaller ones
appended to the largest). The inference must be the one the single dense factorisation
gave (the dense reference of test_history_storage.py), whatever the order of merges, and
copies that branch across merges (a shorter history read after a longer one merged its
blocks, an abandoned merge written over, a fork of merged blocks) stay independent.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from test_history_storage import DenseHistory

from dpbayes.answers import History, NotEstimable
from dpbayes.privacy.noise import noise_source


def _blocky(seed: int, n: int, k: int) -> list[np.ndarray]:
    """Single cells and short ranges in separate stretches of the cube, with now and then
    a query bridging two stretches (a merge), a weighted one and a repeat."""
    gen = noise_source(seed).generator()
    out: list[np.ndarray] = []
    for i in range(k):
        q = np.zeros(n)
        kind = i % 7
        if kind in (0, 1, 2):
            lo = int(gen.integers(0, n - 3))
            q[lo : lo + int(gen.integers(1, 4))] = 1.0
        elif kind == 3:
            a, b = gen.choice(n, size=2, replace=False)
            q[a], q[b] = 1.0, 1.0
        elif kind == 4:
            cells = gen.choice(n, size=3, replace=False)
            q[cells] = [2.0, -1.0, 0.5]
        elif kind == 5:
            q[int(gen.integers(0, n))] = 3.0
        else:
            q[:] = out[int(gen.integers(0, len(out)))]
        out.append(q)
    return out


def _targets(n: int, qs: list[np.ndarray]) -> list[np.ndarray]:
    gen = noise_source(99).generator()
    ts = [np.ones(n), qs[0] + qs[1], qs[3] - 2.0 * qs[5], qs[-1]]
    ts += [np.eye(n)[int(j)] for j in gen.choice(n, size=6, replace=False)]
    ts += [qs[int(a)] + qs[int(b)] for a, b in gen.integers(0, len(qs), size=(6, 2))]
    return ts


def _check(h: History, ref: DenseHistory, targets: list[np.ndarray], rel: float = 1e-12) -> int:
    """``h`` infers for each target what the dense reference does (within ``rel``)."""
    assert h.rank == ref.Q.shape[0]
    compared = 0
    for t in targets:
        try:
            est, var, w, sc = ref.blue(t)
        except NotEstimable:
            assert not h.is_estimable(t)
            with pytest.raises(NotEstimable):
                h.blue(t)
            continue
        b = h.blue(t)
        compared += 1
        assert b.estimate == pytest.approx(est, rel=rel, abs=1e-9)
        assert b.variance == pytest.approx(var, rel=rel)
        np.testing.assert_allclose(b.weights, w, rtol=1e3 * rel, atol=1e-12)
        np.testing.assert_array_equal(b.weights == 0, w == 0)
        np.testing.assert_allclose(b.scales, sc, rtol=1e3 * rel, atol=1e-12)
    return compared


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_blocks_give_the_dense_histories_answers(seed: int) -> None:
    n, k = 60, 70
    gen = noise_source(200 + seed).generator()
    qs = _blocky(seed, n, k)
    ys, eps = gen.normal(50, 10, size=k), gen.uniform(0.1, 1.0, size=k)
    h, ref = History(n), DenseHistory(n)
    compared = 0
    for i, (q, y, e) in enumerate(zip(qs, ys, eps, strict=True)):
        h.add(q, float(y), float(e))
        ref.add(q, float(y), float(e))
        if i % 10 == 9:  # along the way, as blocks form and merge
            compared += _check(h, ref, _targets(n, qs[: i + 1]))
    compared += _check(h, ref, _targets(n, qs))
    assert compared >= 20
    assert 1 < len(h._views) < h.rank  # several blocks, some of more than one answer


def test_block_entries_are_the_sum_over_blocks() -> None:
    n = 100_000
    h = History(n)
    q = np.zeros(n)
    for i in range(300):
        q[:] = 0.0
        q[i * 300 : i * 300 + 1 + i % 3] = 1.0
        h.add(q, 5.0, 0.5)
    # 300 blocks of one answer: 1 x cells (Q) + 1 (L) + 1 (R) each, not 300 x 600 + ...
    assert h.entries == 2 * 600 + 2 * 300
    both = np.zeros(n)
    both[[0, 300, 600]] = 1.0
    bound = h.entries_with(both)
    h.add(both, 7.0, 0.5)  # merges three blocks
    assert h.entries <= bound
    assert len(h._views) == 298
    # an answer's add and memory do not grow with the other blocks
    tracemalloc.start()
    try:
        q[:] = 0.0
        q[99_000] = 1.0
        h.copy().add(q, 1.0, 0.5)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * 8 * n  # the dense query row's own copies, nothing rank x cells


def _build(qs: list[np.ndarray], n: int) -> tuple[History, DenseHistory]:
    h, ref = History(n), DenseHistory(n)
    for i, q in enumerate(qs):
        h.add(q, 10.0 + i, 0.5)
        ref.add(q, 10.0 + i, 0.5)
    return h, ref


def test_copies_branching_across_merges_stay_independent() -> None:
    n = 40
    qs = _blocky(7, n, 60)
    bridge = np.zeros(n)
    bridge[[0, n // 2, n - 1]] = 1.0  # joins three stretches: merges
    targets = [*_targets(n, qs), bridge]
    base, base_ref = _build(qs[:30], n)
    a = base.copy()
    a.add(bridge, 40.0, 0.5)  # in place: merges blocks the base still reads unmerged
    for i, q in enumerate(qs[30:40]):
        a.add(q, 2.0 + i, 0.5)
    a_ref = _build([*qs[:30], bridge], n)[1]
    for i, q in enumerate(qs[30:40]):
        a_ref.add(q, 2.0 + i, 0.5)
    _check(base, base_ref, targets)  # the shorter history, read after the merge
    _check(a, a_ref, targets)
    b = base.copy()  # a holds more: b forks the base's prefix (its blocks unmerged)
    for i, q in enumerate(qs[40:]):
        b.add(q, 20.0 + i, 0.5)
    b_ref = _build(qs[:30], n)[1]
    for i, q in enumerate(qs[40:]):
        b_ref.add(q, 20.0 + i, 0.5)
    _check(b, b_ref, targets)
    _check(a, a_ref, targets)
    _check(base, base_ref, targets)
    # an abandoned merge is written over: the next copy appends where it was
    c, c_ref = _build(qs[:20], n)
    store = c._store
    dropped = c.copy()
    dropped.add(bridge, 1.0, 0.5)
    dropped.add(qs[50], 1.0, 0.5)
    del dropped
    kept = c.copy()
    for i, q in enumerate(qs[40:50]):
        kept.add(q, 3.0 + i, 0.5)
    assert kept._store is store
    kept_ref = _build(qs[:20], n)[1]
    for i, q in enumerate(qs[40:50]):
        kept_ref.add(q, 3.0 + i, 0.5)
    _check(kept, kept_ref, targets)
    _check(c, c_ref, targets)


@pytest.mark.parametrize("seed", range(6))
def test_random_branches_of_copies_match_their_dense_histories(seed: int) -> None:
    """Random trees of copies: each step extends a random live history (a fresh copy of
    it, or it in place), drops one now and then (an abandoned branch whose storage the
    next copy writes over), with merges from bridging answers; every live history gives
    the dense reference's inference for its own answers."""
    gen = noise_source(500 + seed).generator()
    n = 30
    pool = _blocky(seed, n, 80)
    live: list[tuple[History, list[tuple[np.ndarray, float, float]]]] = [(History(n), [])]
    for step in range(90):
        h, answers = live[int(gen.integers(0, len(live)))]
        if gen.random() < 0.5:
            h, answers = h.copy(), list(answers)
            live.append((h, answers))
        q = pool[int(gen.integers(0, len(pool)))].copy()
        if gen.random() < 0.15:  # a bridge between stretches of the cube
            q[gen.choice(n, size=2, replace=False)] = 1.0
        y, e = float(gen.normal(20, 5)), float(gen.uniform(0.2, 1.0))
        h.add(q, y, e)
        answers.append((q, y, e))
        if len(live) > 4 and gen.random() < 0.2:
            live.pop(int(gen.integers(1, len(live))))  # abandoned
        if step % 15 == 14:
            for hist, ans in live:
                ref = DenseHistory(n)
                for a, b, c in ans:
                    ref.add(a, b, c)
                qs = [a for a, _, _ in ans] or [np.ones(n)]
                _check(hist, ref, _targets(n, qs * 6))
