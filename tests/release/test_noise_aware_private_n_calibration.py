"""Calibration of the private-n noise-aware posterior at user level on the bundled data.

theta0 is the bundled share of ``hlthp``; each run redraws the column as Bernoulli(theta0)
per row (the model's sampling law, the person structure and n = 20,190 kept), releases
it as the CLI does (one person = up to 5 rows, add/remove one user, n private, seeded
noise) and checks whether the central 90% interval covers theta0. The noise-aware
interval must cover at 0.90 within 3.5 binomial standard errors, sqrt(0.09 / R); at
eps = 0.05 the naive posterior (noisy counts taken as exact) must under-cover.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpbayes as dpb
from dpbayes.data import Table, load_bundled
from dpbayes.models import BetaBernoulli

RUNS = 200
LEVEL = 0.9


def _coverage(eps: float, runs: int, seed: int) -> tuple[float, float]:
    df = load_bundled("randhie")[["person", "hlthp"]].copy()
    theta0 = float(df["hlthp"].mean())
    gen = np.random.default_rng(seed)
    aware = naive = 0
    for run in range(runs):
        data = df.copy()
        data["hlthp"] = (gen.random(len(df)) < theta0).astype(int)
        rel = dpb.release(
            BetaBernoulli(),
            Table(data, user_column="person", max_rows_per_user=5),
            column="hlthp",
            mechanism="laplace",
            epsilon=eps,
            rng=seed + run,
        )
        assert rel.public["n"] is None and rel.guarantee.details["rows_per_user"] == 5
        lo, hi = rel.noise_aware_posterior().interval(LEVEL)
        aware += lo <= theta0 <= hi
        lo, hi = rel.posterior.interval(LEVEL)
        naive += lo <= theta0 <= hi
    return aware / runs, naive / runs


@pytest.mark.slow
@pytest.mark.parametrize("eps", [0.05, 1.0])
def test_user_level_noise_aware_interval_is_calibrated(eps):
    aware, naive = _coverage(eps, RUNS, seed=11)
    tol = 3.5 * math.sqrt(LEVEL * (1 - LEVEL) / RUNS)
    assert abs(aware - LEVEL) < tol, (aware, naive)
    if eps == 0.05:
        assert naive < LEVEL - tol, (aware, naive)  # the naive interval under-covers
