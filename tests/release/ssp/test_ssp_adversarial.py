"""SSP at the numerical edges: the exact privacy loss of worst-case neighbouring data sets.

For each case the two data sets' released entries are computed independently of the
mechanism (from the records), and the loss of the pair is computed in closed form from
the noise law the release states: Laplace, ||f(D) - f(D')||_1 / scale; Gaussian, the
exact delta at eps of N(0, sigma^2) noise for the pair's (weighted) L2 distance (Balle &
Wang 2018, Thm 8). The loss must not exceed the claim, and at the corner pair it equals
it (Laplace) or its delta is the stated delta (Gaussian, the analytic calibration).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

import dpbayes as dpb
from dpbayes.release.base import plan


def released(v: np.ndarray, *, weighted: bool, constant_last: bool) -> np.ndarray:
    """Sum over records of the released (optionally Frobenius-weighted) entries."""
    m = v.shape[1]
    rows, cols = np.triu_indices(m)
    if constant_last:
        keep = ~((rows == m - 1) & (cols == m - 1))
        rows, cols = rows[keep], cols[keep]
    s = v.T @ v
    w = np.where(rows == cols, 1.0, math.sqrt(2.0)) if weighted else 1.0
    return np.asarray(s[rows, cols] * w)


def gaussian_delta(eps: float, dist: float, sigma: float) -> float:
    a = dist / (2 * sigma) - eps * sigma / dist
    b = -dist / (2 * sigma) - eps * sigma / dist
    return float(special.ndtr(a) - math.exp(eps + special.log_ndtr(b)))


def pair(
    kind: str, n: int, neighbours: str, seed: int
) -> tuple[object, tuple, tuple, np.ndarray, np.ndarray]:
    """A data set of n records (half at the corners of the box), and its neighbour with
    the worst record (the corner b) replaced by 0 (substitute) or removed (add/remove)."""
    g = np.random.default_rng(seed)
    d = 2
    x = g.choice([-1.0, 0.0, 1.0], size=(n, d)) * np.where(g.random((n, 1)) < 0.5, 1.0, 0.3)
    x[0] = 1.0
    if kind == "linear":
        y = g.choice([-2.0, 2.0, 0.0], size=n)
        y[0] = 2.0
        model = dpb.models.BayesianLinearRegression(feature_bound=1.0, label_bound=2.0, clip="box")
        v = np.column_stack([x, y])
    else:
        y = g.integers(0, 2, n).astype(float)
        y[0] = 1.0
        model = dpb.models.BayesianLogisticRegression(feature_bound=1.0)
        v = np.column_stack([x * np.where(y > 0, 1.0, -1.0)[:, None], np.ones(n)])
    if neighbours == "substitute":
        x2, y2, v2 = x.copy(), y.copy(), v.copy()
        x2[0] = 0.0
        if kind == "linear":
            y2[0] = 0.0
            v2[0] = 0.0
        else:
            v2[0, :d] = 0.0
    else:
        x2, y2, v2 = x[1:], y[1:], v[1:]
    return model, (x, y), (x2, y2), v, v2


@pytest.mark.parametrize("kind", ["linear", "logistic"])
@pytest.mark.parametrize("neighbours", ["substitute", "add-remove"])
@pytest.mark.parametrize("eps", [0.01, 1.0, 100.0])
def test_laplace_loss_of_the_worst_pair_is_at_most_the_claim(
    kind: str, neighbours: str, eps: float
) -> None:
    model, data, _, v, v2 = pair(kind, 3000, neighbours, seed=int(eps * 100))
    const = kind == "logistic"
    g = plan(model, data, mechanism="ssp", epsilon=eps, neighbours=neighbours).guarantee
    assert g.epsilon == eps and g.delta == 0.0
    diff = released(v, weighted=False, constant_last=const) - released(
        v2, weighted=False, constant_last=const
    )
    loss = float(np.abs(diff).sum()) / g.details["scale"]
    assert loss <= eps * (1 + 1e-9)
    if kind == "linear":  # the corner pair attains the sensitivity
        assert loss == pytest.approx(eps, rel=1e-9)
    # the vectors above are the model's statistics (clipping included)
    exact = model.statistics(data)
    rebuilt = v.T @ v
    np.testing.assert_allclose(exact.xtx if kind == "linear" else exact.t2, rebuilt[:2, :2])


@pytest.mark.parametrize("kind", ["linear", "logistic"])
@pytest.mark.parametrize("neighbours", ["substitute", "add-remove"])
@pytest.mark.parametrize("eps, delta", [(0.01, 1e-10), (1.0, 1e-6), (100.0, 1e-3)])
def test_gaussian_delta_of_the_worst_pair_is_at_most_the_claim(
    kind: str, neighbours: str, eps: float, delta: float
) -> None:
    model, data, _, v, v2 = pair(kind, 2000, neighbours, seed=7)
    const = kind == "logistic"
    g = plan(
        model, data, mechanism="ssp", epsilon=eps, delta=delta, neighbours=neighbours
    ).guarantee
    assert (g.epsilon, g.delta) == (eps, delta)
    dist = float(
        np.linalg.norm(
            released(v, weighted=True, constant_last=const)
            - released(v2, weighted=True, constant_last=const)
        )
    )
    assert dist <= g.sensitivity * (1 + 1e-12)
    assert gaussian_delta(eps, dist, g.details["sigma"]) <= delta * (1 + 1e-9)
    if neighbours == "add-remove" and kind == "linear":  # corner vs nothing: attained
        assert dist == pytest.approx(g.sensitivity, rel=1e-12)
        assert gaussian_delta(eps, dist, g.details["sigma"]) == pytest.approx(delta, rel=1e-6)


def test_publics_do_not_tell_add_remove_neighbours_apart() -> None:
    """Under add/remove n is private: the release publishes n = None."""
    model, data, data2, _, _ = pair("linear", 500, "add-remove", seed=1)
    r1 = dpb.release(model, data, mechanism="ssp", epsilon=1.0, neighbours="add-remove", rng=0)
    r2 = dpb.release(model, data2, mechanism="ssp", epsilon=1.0, neighbours="add-remove", rng=0)
    assert r1.public == r2.public and r1.public["n"] is None
