"""The error distribution's cost is bounded in the number of distinct scales, and the
rounding that bounds it is conservative (a review of the service: a history of ~2,000
cheap single-cell answers made every broad query's eps search cost seconds per step, one
term per answer, so broad queries timed out for good).

``method="auto"`` rounds more than ``MAX_SCALES`` distinct Laplace scales UP to a geometric
grid; a sum with larger symmetric unimodal terms is less peaked (Birnbaum 1948), so the
coverage computed is a lower bound on the true one and the half-width an upper bound.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpbayes.answers import History
from dpbayes.answers import error_distribution as ed
from dpbayes.answers.error_distribution import MAX_SCALES, LaplaceSum, round_up_scales
from dpbayes.answers.planning import plan_candidates
from dpbayes.answers.queries import Query


def _many_scales(k: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.sort(rng.uniform(0.05, 1.0, size=k) ** 3)


@pytest.mark.parametrize("k", [49, 300, 2000])
@pytest.mark.parametrize("limit", [1, 8, MAX_SCALES])
def test_rounding_is_up_onto_a_grid_of_at_most_the_limit(k: int, limit: int) -> None:
    r = _many_scales(k)
    r = r / r.max()
    up, rho = round_up_scales(r, limit)
    assert rho > 1.0 and np.unique(up).size <= limit
    assert up.size == r.size and np.all(np.diff(up) >= 0)
    # each scale rounded up (never down), by less than one grid step
    assert np.all(up >= r) and np.all(up <= r * rho * (1 + 1e-12))
    assert up.max() == 1.0  # the largest scale, 1, is a grid point


def test_few_scales_are_left_alone() -> None:
    r = np.geomspace(1e-3, 1.0, MAX_SCALES)
    up, rho = round_up_scales(r, MAX_SCALES)
    assert rho == 1.0 and np.array_equal(up, r)
    d = LaplaceSum(r)
    assert d.rounding_ratio == 1.0 and np.array_equal(d.scales, r)


def test_a_huge_range_of_scales_still_ends_with_few_distinct_ones() -> None:
    r = np.geomspace(1e-300, 1.0, 5000)
    up, rho = round_up_scales(r, 4)
    assert np.unique(up).size <= 4 and np.all(up >= r) and rho >= 2.0


@pytest.mark.parametrize("gaussian_sd", [0.0, 0.3])
@pytest.mark.parametrize("seed", [0, 1])
def test_rounded_distribution_is_conservative(gaussian_sd: float, seed: int) -> None:
    """Against the distribution of the scales as given (no rounding, the same accuracy):
    P(|E| <= d) computed after rounding, less its error, never exceeds the true one (to
    the true one's own error), and the half-width at a level is never smaller."""
    scales = _many_scales(400, seed)
    rounded = LaplaceSum(scales, gaussian_sd=gaussian_sd, accuracy=1e-7)
    true = LaplaceSum(scales, gaussian_sd=gaussian_sd, accuracy=1e-7, max_scales=None)
    assert rounded.rounding_ratio > 1.0 and true.rounding_ratio == 1.0
    assert np.unique(rounded.scales).size <= MAX_SCALES
    assert rounded.std >= true.std
    ds = np.linspace(0.0, 6.0, 121) * true.std
    lower = np.asarray(rounded.prob_within(ds)) - rounded.error
    upper = np.asarray(true.prob_within(ds)) + true.error
    assert np.all(lower <= upper)
    # and it is not much lower: the scales moved by at most 1 grid step (a few %)
    assert np.max(upper - lower) < 0.02
    for p in (0.5, 0.9, 0.99, 0.9999):
        assert rounded.half_width(p) >= true.half_width(p) * (1 - 1e-9)
        assert rounded.half_width(p) <= true.half_width(p) * rounded.rounding_ratio


def test_named_methods_never_round() -> None:
    scales = _many_scales(100)
    for method in ("exact", "pc"):
        d = LaplaceSum(scales, method=method)
        assert d.rounding_ratio == 1.0 and np.unique(d.scales).size == 100


def _poisoned(cells: int, per_cell: int) -> History:
    """The review's history: ``per_cell`` single-cell answers per cell at scattered eps
    near the minimum charge, and one total."""
    h = History(cells)
    rng = np.random.default_rng(1)
    for _ in range(per_cell):
        for j in range(cells):
            q = np.zeros(cells)
            q[j] = 1.0
            h.add(q, 0.0, 1e-3 * (1 + 2 * rng.random()), sensitivity=5.0)
    h.add(np.ones(cells), 20000.0, 0.1498, sensitivity=5.0)
    return h


def test_the_planners_work_is_bounded_in_distinct_scales(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every error distribution the eps search builds for a broad query over a history of
    600 single-cell answers (601 distinct scales in the query's BLUE) evaluates at most
    MAX_SCALES distinct scales, and the plan is valid for the true scales."""
    h = _poisoned(200, 3)
    idp1 = np.zeros((4, 2, 5, 5))
    idp1[:, 1] = 1.0
    q = Query(idp1.ravel(), "idp = 1")
    assert np.unique(h.blue(q.coefficients).scales).size > 600
    seen: list[int] = []
    orig_init = LaplaceSum.__init__

    def counting_init(self: LaplaceSum, *a: object, **kw: object) -> None:
        orig_init(self, *a, **kw)  # type: ignore[arg-type]
        seen.append(int(self._u.size))

    monkeypatch.setattr(LaplaceSum, "__init__", counting_init)
    plan = plan_candidates(
        h, q, 10000.0, 0.95, sensitivity=5.0, accuracy=1e-6, cap=1.0, min_epsilon=1e-3
    )[0]
    monkeypatch.undo()
    assert plan.status == "fresh" and seen
    assert max(seen) <= MAX_SCALES, max(seen)
    # the promise holds for the distribution of the true (unrounded) scales
    assert plan.error is not None
    blue = h.blue(q.coefficients)
    t = 5.0 * math.sqrt(2.0) / plan.epsilon  # the fresh answer's sd
    lam = 1.0 / (1.0 + (math.sqrt(blue.variance) / t) ** 2)
    true_scales = np.r_[lam * blue.scales, (1 - lam) * 5.0 / plan.epsilon]
    true = LaplaceSum(true_scales, accuracy=1e-6, max_scales=None, method="pc")
    assert true.prob_within(10000.0) - true.error >= 0.95 - 1e-6
    assert plan.error.prob_within(10000.0) - plan.error.error <= (
        true.prob_within(10000.0) + true.error
    )


def test_the_inversion_tail_bound_meets_the_accuracy_for_many_scales() -> None:
    """With many comparable scales phi falls fast and the inversion's cut-off T is below
    1 / b_max; its tail bound (which grows like 1 / (b_max T)^2 there) met the accuracy
    only after the fix, else ``auto`` fell back to a costly PC grid."""
    scales = _many_scales(2000) * 0 + np.linspace(0.5, 1.0, 2000)
    d = LaplaceSum(scales, accuracy=1e-6)
    assert d.method == "exact" and d.details["tail_bound"] <= 1e-6
    assert d.error <= d.accuracy
    assert ed.MAX_SCALES == MAX_SCALES
