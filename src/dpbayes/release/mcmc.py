"""MCMC diagnostics for the noise-aware samplers: split R-hat, effective sample size, warning.

Rank-normalised split R-hat (Vehtari, Gelman, Simpson, Carpenter & Buerkner 2021, eq. 4-5
on the normal scores of the pooled ranks) and the multi-chain effective sample size of
Stan (Geyer's initial positive sequence on the chains' averaged autocorrelations, BDA3
§11.5). A sampler reports both for every monitored quantity and warns (RuntimeWarning)
when the worst R-hat exceeds ``RHAT_MAX`` or the worst ESS is below ``ESS_MIN``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special, stats

from dpbayes import display

__all__ = [
    "ESS_MIN",
    "RHAT_MAX",
    "Diagnostics",
    "diagnose",
    "diagnostics_rows",
    "ess",
    "inference_data",
    "measure_mixing",
    "split_rhat",
]

RHAT_MAX = 1.01
ESS_MIN = 400.0  # Vehtari et al. 2021: R-hat <= 1.01 and ESS >= 400 (100 per chain)


def _split(x: np.ndarray) -> np.ndarray:
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, x.shape[1] - half :]], axis=0)


def _rhat_plain(x: np.ndarray) -> float:
    n = x.shape[1]
    w = float(np.mean(np.var(x, axis=1, ddof=1)))
    b = n * float(np.var(np.mean(x, axis=1), ddof=1))
    if w <= 0.0:
        return 1.0 if b <= 0.0 else math.inf
    return math.sqrt(((n - 1) / n * w + b / n) / w)


def split_rhat(x: Any) -> float:
    """Rank-normalised split R-hat of draws ``x`` shape (chains, draws); max of bulk and tail."""
    arr = np.asarray(x, dtype=float)
    s = _split(arr)
    if np.ptp(s) == 0.0:
        return 1.0
    ranks = stats.rankdata(s, method="average").reshape(s.shape)  # ties: average ranks
    z = special.ndtri((ranks - 0.375) / (s.size + 0.25))
    folded = np.abs(s - np.median(s))
    ranks_f = stats.rankdata(folded, method="average").reshape(s.shape)
    zf = special.ndtri((ranks_f - 0.375) / (s.size + 0.25))
    return max(_rhat_plain(z), _rhat_plain(zf))


def ess(x: Any) -> float:
    """Multi-chain effective sample size of draws ``x`` shape (chains, draws)."""
    arr = np.asarray(x, dtype=float)
    m, n = arr.shape
    if np.ptp(arr) == 0.0:
        return float(m * n)
    centred = arr - arr.mean(axis=1, keepdims=True)
    f = np.fft.rfft(centred, 2 * n, axis=1)
    acov = np.fft.irfft(f * np.conj(f), axis=1)[:, :n] / n
    w = float(np.mean(acov[:, 0] * n / (n - 1)))
    var_plus = w * (n - 1) / n + (float(np.var(arr.mean(axis=1), ddof=1)) if m > 1 else 0.0)
    if var_plus <= 0.0:
        return float(m * n)
    rho = 1.0 - (w - np.mean(acov, axis=0)) / var_plus
    rho[0] = 1.0
    total = 0.0
    for k in range(0, n - 1, 2):
        pair = rho[k] + rho[k + 1]
        if pair <= 0.0:
            break
        total += pair
    tau = max(2.0 * total - 1.0, 1.0 / math.log10(m * n + 10.0))
    return float(m * n / tau)


@dataclass(frozen=True)
class Diagnostics:
    """R-hat and ESS per monitored quantity, and their worst values."""

    names: tuple[str, ...]
    rhat: np.ndarray
    ess: np.ndarray
    chains: int
    draws: int

    @property
    def max_rhat(self) -> float:
        return float(np.max(self.rhat))

    @property
    def min_ess(self) -> float:
        return float(np.min(self.ess))

    @property
    def ok(self) -> bool:
        return self.max_rhat <= RHAT_MAX and self.min_ess >= ESS_MIN

    def summary(self) -> Any:
        """R-hat and ESS per monitored quantity (a pandas DataFrame indexed by name)."""
        import pandas as pd

        return pd.DataFrame(
            {"rhat": self.rhat, "ess": self.ess}, index=pd.Index(self.names, name="quantity")
        )

    def _display(self) -> tuple[str, list[tuple[str, str]]]:
        return "Diagnostics", diagnostics_rows(self)

    def __repr__(self) -> str:
        return display.text(self)

    def _repr_html_(self) -> str:
        return display.html(self)

    def to_dict(self) -> dict[str, Any]:
        return {
            "chains": self.chains,
            "draws_per_chain": self.draws,
            "max_rhat": self.max_rhat,
            "min_ess": self.min_ess,
            "rhat": dict(zip(self.names, self.rhat.tolist(), strict=True)),
            "ess": dict(zip(self.names, self.ess.tolist(), strict=True)),
        }


def inference_data(
    posterior: dict[str, np.ndarray],
    diagnostics: Diagnostics,
    *,
    dims: dict[str, list[str]] | None = None,
    coords: dict[str, Any] | None = None,
    attrs: dict[str, Any] | None = None,
) -> Any:
    """ArviZ ``InferenceData`` of MCMC draws stored chain-major as (chains * draws, ...)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            import arviz
    except ImportError:
        raise ImportError(
            "to_inference_data needs ArviZ: pip install 'dpbayes[nonparametric]' (or arviz)"
        ) from None
    shaped = {
        k: np.asarray(v).reshape(diagnostics.chains, diagnostics.draws, *np.shape(v)[1:])
        for k, v in posterior.items()
    }
    info = {
        "max_rhat": diagnostics.max_rhat,
        "min_ess": diagnostics.min_ess,
        **(attrs or {}),
    }
    return arviz.from_dict(posterior=shaped, dims=dims or {}, coords=coords or {}, attrs=info)


def diagnostics_rows(d: Diagnostics) -> list[tuple[str, str]]:
    """Display rows of MCMC diagnostics: chains x draws, worst R-hat and ESS, verdict."""
    verdict = "ok" if d.ok else f"POOR MIXING (want R-hat <= {RHAT_MAX}, ESS >= {ESS_MIN:.0f})"
    return [
        ("MCMC", f"{d.chains} chains x {d.draws} draws, {len(d.names)} monitored quantities"),
        ("max R-hat", f"{d.max_rhat:.4f}"),
        ("min ESS", f"{d.min_ess:.0f}"),
        ("mixing", verdict),
    ]


def measure_mixing(draws: np.ndarray, names: list[str]) -> Diagnostics:
    """Split R-hat and ESS of ``draws`` shape (chains, draws, quantities), no warning."""
    arr = np.asarray(draws, dtype=float)
    rh = np.array([split_rhat(arr[:, :, q]) for q in range(arr.shape[2])])
    es = np.array([ess(arr[:, :, q]) for q in range(arr.shape[2])])
    return Diagnostics(tuple(names), rh, es, int(arr.shape[0]), int(arr.shape[1]))


def diagnose(draws: np.ndarray, names: list[str], *, what: str) -> Diagnostics:
    """Diagnostics of ``draws`` shape (chains, draws, quantities); warns when mixing is poor."""
    out = measure_mixing(draws, names)
    if not out.ok:
        high = out.max_rhat > RHAT_MAX
        worst = names[int(np.argmax(out.rhat) if high else np.argmin(out.ess))]
        warnings.warn(
            f"{what}: the chains mix poorly ("
            + (
                f"max R-hat {out.max_rhat:.3f} > {RHAT_MAX}"
                if out.max_rhat > RHAT_MAX
                else f"min ESS {out.min_ess:.0f} < {ESS_MIN:.0f}"
            )
            + f", worst at {worst}); run more iterations (iterations=...)",
            RuntimeWarning,
            stacklevel=3,
        )
    return out
