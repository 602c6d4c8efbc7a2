"""Statistical checks for the privacy tests, with bounds derived from the sample size.

Every check is a two-sided test at level ALPHA = 1e-6: a correct sampler fails a given
check with probability 1e-6. The seeded checks are reproducible; the secure-noise checks
cannot be seeded (OpenDP draws from the OS CSPRNG), so each CI run draws them afresh:
at this level the ~60 of them raise a false alarm in fewer than 1 run in 10,000, while a
wrong noise scale (variance off by a factor 1.5 or more at n = 1,500) still fails.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

ALPHA = 1e-6
Z = float(stats.norm.isf(ALPHA / 2))  # ~4.89


def check_mean_var(sample: np.ndarray, dist: Any, label: str = "") -> None:
    """Sample mean and variance within z-bounds of ``dist``'s (a frozen scipy distribution).

    Mean: |xbar - mu| <= Z sigma / sqrt(n). Variance: the sample variance has standard
    error sqrt((mu4 - sigma^4) / n), mu4 the 4th central moment = (kurtosis + 3) sigma^4.
    """
    x = np.asarray(sample, dtype=float).ravel()
    n = x.size
    mu, var, kurt = (float(v) for v in dist.stats(moments="mvk"))
    mean_bound = Z * np.sqrt(var / n)
    assert abs(x.mean() - mu) <= mean_bound, (
        f"{label}: mean {x.mean():.6g} vs {mu:.6g} (bound {mean_bound:.3g}, n={n})"
    )
    mu4 = (kurt + 3.0) * var**2
    var_bound = Z * np.sqrt((mu4 - var**2) / n)
    assert abs(x.var(ddof=1) - var) <= var_bound, (
        f"{label}: variance {x.var(ddof=1):.6g} vs {var:.6g} (bound {var_bound:.3g}, n={n})"
    )


def check_ks(sample: np.ndarray, dist: Any, label: str = "") -> None:
    """Kolmogorov-Smirnov test of a continuous sample against ``dist``."""
    res = stats.kstest(np.asarray(sample, dtype=float).ravel(), dist.cdf)
    assert res.pvalue > ALPHA, f"{label}: KS statistic {res.statistic:.4g}, p={res.pvalue:.3g}"


def check_chisquare(counts: np.ndarray, probs: np.ndarray, label: str = "") -> None:
    """Chi-square goodness of fit of category ``counts`` to ``probs``.

    Categories with expected count < 5 are pooled into one cell (the test's usual rule).
    """
    counts = np.asarray(counts, dtype=float)
    probs = np.asarray(probs, dtype=float)
    assert counts.shape == probs.shape
    n = counts.sum()
    probs = probs / probs.sum()
    expected = n * probs
    small = expected < 5
    if small.any():
        counts = np.append(counts[~small], counts[small].sum())
        expected = np.append(expected[~small], expected[small].sum())
        if expected[-1] == 0:
            assert counts[-1] == 0, f"{label}: {counts[-1]} draws in zero-probability cells"
            counts, expected = counts[:-1], expected[:-1]
    res = stats.chisquare(counts, expected)
    assert res.pvalue > ALPHA, f"{label}: chi-square {res.statistic:.4g}, p={res.pvalue:.3g}"


def check_discrete(sample: np.ndarray, dist: Any, label: str = "") -> None:
    """Chi-square test of an integer sample against a discrete scipy distribution.

    Cells: every integer between the 1e-4 and 1 - 1e-4 quantiles, plus the two tails.
    """
    x = np.asarray(sample).ravel().astype(np.int64)
    lo, hi = int(dist.ppf(1e-4)), int(dist.ppf(1 - 1e-4))
    support = np.arange(lo, hi + 1)
    inside = x[(x >= lo) & (x <= hi)] - lo
    body = np.bincount(inside, minlength=support.size)
    counts = np.array([(x < lo).sum(), *body, (x > hi).sum()])
    probs = np.array([dist.cdf(lo - 1), *dist.pmf(support), dist.sf(hi)])
    check_chisquare(counts, probs, label)


def check_proportion(successes: int, n: int, p: float, label: str = "") -> None:
    """A binomial proportion within the z-bound Z sqrt(p (1 - p) / n)."""
    bound = Z * np.sqrt(p * (1 - p) / n)
    assert abs(successes / n - p) <= bound, (
        f"{label}: rate {successes / n:.5g} vs {p:.5g} (bound {bound:.3g}, n={n})"
    )
