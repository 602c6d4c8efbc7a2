"""Histories that mix Laplace and Gaussian answers: the BLUE, its error, the stored record."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from dpbayes.answers import AnswerRecord, History, JsonlStore
from dpbayes.privacy.noise import noise_source

Z4 = stats.norm.isf(0.5e-4)


def mixed_history(seed: int, k: int = 20, n: int = 8):
    gen = noise_source(seed).generator()
    H = gen.integers(-2, 3, size=(k, n)).astype(float)
    H[~H.any(axis=1), 0] = 1.0
    eps = gen.uniform(0.05, 1.0, size=k)
    gauss = gen.random(k) < 0.5
    sigma = np.where(gauss, gen.uniform(0.5, 20.0, size=k), np.nan)
    y = gen.normal(0, 50, size=k)
    h = History(n)
    for i in range(k):
        if gauss[i]:
            h.add(H[i], y[i], eps[i], noise="gaussian", sigma=sigma[i], delta=1e-6)
        else:
            h.add(H[i], y[i], eps[i])
    S = np.abs(H).max(axis=1)
    var = np.where(gauss, sigma**2, 2.0 * (S / eps) ** 2)
    return h, H, y, var, gauss, sigma, S, eps


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_blue_of_a_mixed_history_is_generalised_least_squares(seed: int) -> None:
    h, H, y, var, gauss, sigma, S, eps = mixed_history(seed)
    np.testing.assert_allclose(h.variances, var, rtol=1e-12)
    assert h.noises == ["gaussian" if g else "laplace" for g in gauss]
    W = np.diag(1.0 / var)
    P = np.linalg.pinv(H.T @ W @ H, rcond=1e-12)
    gen = noise_source(50 + seed).generator()
    for _ in range(4):
        q = gen.normal(size=len(y)) @ H
        A = q @ P @ H.T @ W
        b = h.blue(q)
        assert b.estimate == pytest.approx(A @ y, rel=1e-9, abs=1e-9)
        assert b.variance == pytest.approx(q @ P @ q, rel=1e-9)
        np.testing.assert_allclose(b.weights, A, rtol=1e-7, atol=1e-10)
        # the error's terms: Laplace scales |A| S / eps, Gaussian sds |A| sigma
        np.testing.assert_allclose(b.scales, np.where(gauss, 0, np.abs(A) * S / eps), atol=1e-9)
        assert b.gaussian_scales is not None
        np.testing.assert_allclose(
            b.gaussian_scales, np.where(gauss, np.abs(A) * np.nan_to_num(sigma), 0), atol=1e-9
        )
        assert b.gaussian_sd == pytest.approx(math.sqrt(np.sum((A**2 * var)[gauss])), rel=1e-7)
        post = h.posterior(q)
        assert post.error.var == pytest.approx(b.variance, rel=1e-7)


def test_pure_laplace_history_is_unchanged() -> None:
    h = History(3)
    h.add([1, 1, 1], 10.0, 0.5)
    h.add([1, 0, 0], 3.0, 1.0)
    b = h.blue([0, 1, 1])
    assert b.gaussian_scales is None and b.gaussian_sd == 0.0
    assert h.posterior([0, 1, 1]).error.gaussian_sd == 0.0


def test_credible_intervals_of_a_mixed_history_cover_at_the_nominal_level() -> None:
    """Repeated noise (Laplace and Gaussian rows) on a fixed data set: the narrowest
    interval from the mixed error distribution covers q x with probability p."""
    x = np.array([120.0, 30.0, 4.0, 0.0, 57.0, 9.0])
    H = np.array(
        [
            [1, 1, 1, 1, 1, 1],
            [1, 1, 1, 0, 0, 0],
            [0, 0, 1, 1, 0, 0],
            [1, 0, 0, 0, 0, 0],
            [0, 1, 1, 0, 0, 0],
            [0, 0, 0, 1, 1, 1],
        ],
        float,
    )
    eps = np.array([0.5, 0.2, 0.1, 0.3, 0.05, 0.4])
    gauss = np.array([False, True, False, True, True, False])
    sigma = np.array([0.0, 4.0, 0.0, 9.0, 2.5, 0.0])
    S = np.abs(H).max(axis=1)
    h = History(x.size)
    for i in range(len(eps)):
        kw = {"noise": "gaussian", "sigma": sigma[i], "delta": 1e-5} if gauss[i] else {}
        h.add(H[i], float(H[i] @ x), float(eps[i]), **kw)
    q = np.array([1, 1, 1, 0, 0, 0], float)  # weights on rows 0, 1, 3, 4, 5
    post = h.posterior(q)
    # really mixed: Laplace scales and the Normal sd of comparable size
    assert post.error.gaussian_sd > post.error.scales.max() > 0.3 * post.error.gaussian_sd
    reps = 40_000
    gen = noise_source(42).generator()
    noise = np.where(
        gauss,
        gen.standard_normal((reps, len(eps))) * sigma,
        gen.laplace(0.0, 1.0, size=(reps, len(eps))) * (S / eps),
    )
    errors = noise @ post.weights
    for p in (0.8, 0.95):
        d = post.half_width(p)
        covered = np.mean(np.abs(errors) <= d)
        assert abs(covered - p) <= Z4 * math.sqrt(p * (1 - p) / reps)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"noise": "uniform"}, "noise must be one of"),
        ({"noise": "gaussian", "delta": 1e-6}, "sigma is required"),
        ({"noise": "gaussian", "sigma": 2.0}, "delta must be > 0"),
        ({"noise": "gaussian", "sigma": -1.0, "delta": 1e-6}, "sigma must be > 0"),
        ({"noise": "gaussian", "sigma": 1e200, "delta": 1e-6}, "sigma must be in"),
        ({"noise": "gaussian", "sigma": 1.0, "delta": 1.0}, "delta must be in"),
        ({"sigma": 2.0}, "sigma must be None"),
        ({"delta": 1e-6}, "delta must be 0"),
    ],
)
def test_bad_noise_arguments_are_refused(kwargs: dict, match: str) -> None:
    h = History(3)
    with pytest.raises(ValueError, match=match):
        h.add([1, 1, 0], 4.0, 0.5, **kwargs)
    assert len(h) == 0


def test_records_round_trip_and_old_records_read_as_laplace(tmp_path: Path) -> None:
    lap = AnswerRecord.from_dense(
        np.array([1.0, 0.0, 1.0]), noisy_answer=3.5, epsilon=0.5, sensitivity=1.0
    )
    gau = AnswerRecord.from_dense(
        np.array([0.0, 2.0, 0.0]),
        noisy_answer=7.0,
        epsilon=0.8,
        sensitivity=2.0,
        noise="gaussian",
        sigma=5.5,
        delta=1e-6,
    )
    d = lap.to_dict()
    assert "noise" not in d and "sigma" not in d and "delta" not in d  # as before
    assert AnswerRecord.from_dict(d) == lap
    assert AnswerRecord.from_dict(gau.to_dict()) == gau
    store = JsonlStore(tmp_path / "history.jsonl")
    store.append(lap)
    store.append(gau)
    assert store.load() == [lap, gau]
    old = {k: v for k, v in d.items()}  # a record written before Gaussian answers existed
    assert AnswerRecord.from_dict(json.loads(json.dumps(old))).noise == "laplace"
    with pytest.raises(ValueError, match="Gaussian answer record needs sigma"):
        AnswerRecord.from_dict({**gau.to_dict(), "sigma": None})
    with pytest.raises(ValueError, match="noise must be one of"):
        AnswerRecord.from_dict({**d, "noise": "laplacian"})
