"""Convergence diagnostics of the functionals of P over several chains (R-hat, ESS).

Rank-normalised split R-hat and bulk/tail effective sample sizes of Vehtari, Gelman,
Simpson, Carpenter & Buerkner (2021), the definitions ArviZ uses (``az.rhat``,
``az.ess``; the tests check equality), computed here in numpy so that a fit does not
pay ArviZ's import. Applied to (chain, draw) arrays of functionals of the sampled P
(mean, sd, quantiles, number of clusters), which label switching does not affect.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy import stats

__all__ = [
    "ESS_MIN_PER_CHAIN",
    "RHAT_MAX",
    "ConvergenceWarning",
    "check_convergence",
    "diagnose",
    "ess_bulk",
    "ess_tail",
    "rhat",
]

RHAT_MAX = 1.01
ESS_MIN_PER_CHAIN = 100


class ConvergenceWarning(UserWarning):
    """The chains of a DPMixture fit have not converged or mix poorly."""


def _arviz() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz

    return arviz


def _split(x: np.ndarray) -> np.ndarray:
    half = x.shape[1] // 2
    return np.vstack([x[:, :half], x[:, x.shape[1] - half :]])


def _z_scale(x: np.ndarray) -> np.ndarray:
    ranks = stats.rankdata(x, method="average").reshape(x.shape)
    return np.asarray(stats.norm.ppf((ranks - 0.375) / (x.size + 0.25)))


def _rhat_basic(x: np.ndarray) -> float:
    n = x.shape[1]
    between = n * np.var(np.mean(x, axis=1), ddof=1)
    within = np.mean(np.var(x, axis=1, ddof=1))
    return float(np.sqrt((between / within + n - 1) / n))


def rhat(draws: np.ndarray) -> float:
    """Rank-normalised split R-hat (max of bulk and folded), Vehtari et al. 2021 eq. (4)."""
    x = np.asarray(draws, dtype=float)
    bulk = _rhat_basic(_z_scale(_split(x)))
    tail = _rhat_basic(_z_scale(_split(np.abs(x - np.median(x)))))
    return max(bulk, tail)


def _autocov(x: np.ndarray) -> np.ndarray:
    n = x.shape[1]
    size = 2 ** int(np.ceil(np.log2(2 * n)))
    c = x - x.mean(axis=1, keepdims=True)
    f = np.fft.rfft(c, size, axis=1)
    return np.fft.irfft(f * np.conj(f), size, axis=1)[:, :n] / n


def _ess_basic(x: np.ndarray) -> float:
    """ESS with Geyer's initial positive and monotone sequences (Stan / ArviZ)."""
    m, n = x.shape
    acov = _autocov(x)
    mean_var = np.mean(acov[:, 0]) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if m > 1:
        var_plus += np.var(np.mean(x, axis=1), ddof=1)
    rho = np.zeros(n)
    even, odd = 1.0, 1.0 - (mean_var - np.mean(acov[:, 1])) / var_plus
    rho[0], rho[1] = even, odd
    t = 1
    while t < n - 3 and even + odd > 0.0:
        even = 1.0 - (mean_var - np.mean(acov[:, t + 1])) / var_plus
        odd = 1.0 - (mean_var - np.mean(acov[:, t + 2])) / var_plus
        if even + odd >= 0:
            rho[t + 1], rho[t + 2] = even, odd
        t += 2
    max_t = t - 2
    if even > 0:
        rho[max_t + 1] = even
    t = 1
    while t <= max_t - 2:
        if rho[t + 1] + rho[t + 2] > rho[t - 1] + rho[t]:
            rho[t + 1] = rho[t + 2] = (rho[t - 1] + rho[t]) / 2.0
        t += 2
    total = m * n
    tau = -1.0 + 2.0 * np.sum(rho[: max_t + 1]) + np.sum(rho[max_t + 1 : max_t + 2])
    return float(total / max(tau, 1.0 / np.log10(total)))


def ess_bulk(draws: np.ndarray) -> float:
    """Bulk ESS: ESS of the rank-normalised split chains."""
    return _ess_basic(_z_scale(_split(np.asarray(draws, dtype=float))))


def ess_tail(draws: np.ndarray) -> float:
    """Tail ESS: the smaller ESS of the indicators of the 5% and 95% quantiles."""
    x = np.asarray(draws, dtype=float)
    lo, hi = np.quantile(x, [0.05, 0.95])
    return min(
        _ess_basic(_split((x <= lo).astype(float))), _ess_basic(_split((x <= hi).astype(float)))
    )


def diagnose(functionals: Mapping[str, np.ndarray]) -> Any:
    """R-hat, bulk and tail ESS for each (chain, draw) array: a pandas DataFrame."""
    import pandas as pd

    rows = []
    for name, draws in functionals.items():
        arr = np.asarray(draws, dtype=float)
        if arr.ndim != 2:
            raise ValueError(f"functional {name!r} must be a (chain, draw) array, got {arr.shape}")
        if np.ptp(arr) == 0 or arr.shape[1] < 4:  # constant or too short: nothing to say
            rows.append(
                {"functional": name, "rhat": np.nan, "ess_bulk": np.nan, "ess_tail": np.nan}
            )
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            rows.append(
                {
                    "functional": name,
                    "rhat": rhat(arr),
                    "ess_bulk": ess_bulk(arr),
                    "ess_tail": ess_tail(arr),
                }
            )
    return pd.DataFrame(rows).set_index("functional")


def check_convergence(table: Any, chains: int, *, stacklevel: int = 3) -> list[str]:
    """Warn (ConvergenceWarning) when R-hat > 1.01 or bulk ESS < 100 per chain; return problems."""
    problems = []
    for name, row in table.iterrows():
        if np.isfinite(row["rhat"]) and row["rhat"] > RHAT_MAX:
            problems.append(f"R-hat of {name} is {row['rhat']:.3f} > {RHAT_MAX}")
        if np.isfinite(row["ess_bulk"]) and row["ess_bulk"] < ESS_MIN_PER_CHAIN * chains:
            problems.append(
                f"bulk ESS of {name} is {row['ess_bulk']:.0f} < {ESS_MIN_PER_CHAIN * chains}"
            )
    if problems:
        warnings.warn(
            "DPMixture chains may not have converged: "
            + "; ".join(problems)
            + " (run longer chains: more draws/warmup)",
            ConvergenceWarning,
            stacklevel=stacklevel,
        )
    return problems
