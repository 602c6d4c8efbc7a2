"""The prior on the true number of rows N of a release whose n is private.

Add/remove and user-level count releases publish no n; their noise-aware posteriors
(:mod:`.private_n`, :mod:`.normal_n`, the Bayesian networks' ``noise_aware_n``) put a
prior on N: flat by default (improper uniform on N >= 0), ``(mean, sd)`` for a
discretised Normal, or any object with ``logpmf``/``pmf`` over the integers.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats

from dpbayes.privacy.validation import check_positive

__all__ = ["NPrior", "n_prior", "private_n_rows"]


class NPrior:
    """A prior on the true total number of rows N >= 0 (see :func:`n_prior`)."""

    def __init__(
        self,
        kind: str,
        log_pmf: Any,
        description: dict[str, Any],
        log_sup: float | None = None,
    ) -> None:
        """``log_sup``: an upper bound on ``log_pmf`` over every N >= 0 where one is known
        (0 for the flat and Normal priors and for a scipy.stats distribution's pmf), else
        None."""
        self.kind = kind
        self._log_pmf = log_pmf
        self.description = description
        self.log_sup = log_sup

    def log_pmf(self, n: np.ndarray) -> np.ndarray:
        """log pi(N) up to a constant, for integer N >= 0 (an array)."""
        return np.asarray(self._log_pmf(np.asarray(n, dtype=float)), dtype=float)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.description)

    def __repr__(self) -> str:
        return f"NPrior({self.description})"


def private_n_rows(n_prior: NPrior | None, omitted_mass: float) -> list[tuple[str, str]]:
    """Display rows of a posterior whose n is private: its prior on n and omitted share."""
    rows = (
        []
        if n_prior is None
        else [("prior on n", ", ".join(f"{k} {v}" for k, v in n_prior.description.items()))]
    )
    return [*rows, ("omitted mass", f"<= {omitted_mass:.2g}")]


def n_prior(spec: Any = None) -> NPrior:
    """The prior on the total N from ``spec``: None or ``"flat"`` (improper uniform on
    N >= 0, the default), ``(mean, sd)`` (a Normal on N >= 0, discretised), an object
    with ``logpmf`` or ``pmf`` (e.g. a frozen scipy.stats discrete distribution), or an
    :class:`NPrior`."""
    if isinstance(spec, NPrior):
        return spec
    if spec is None or (isinstance(spec, str) and spec == "flat"):
        return NPrior(
            "flat",
            lambda n: np.zeros(np.shape(n)),
            {"kind": "flat", "text": "flat (improper uniform) prior on n >= 0"},
            log_sup=0.0,
        )
    if isinstance(spec, str):
        raise ValueError(f"n_prior must be 'flat', (mean, sd) or a pmf, got {spec!r}")
    if isinstance(spec, (tuple, list)):
        if len(spec) != 2:
            raise ValueError(f"n_prior as (mean, sd) needs two numbers, got {spec!r}")
        mean = float(spec[0])
        if not math.isfinite(mean):
            raise ValueError(f"n_prior mean must be finite, got {spec[0]!r}")
        sd = check_positive(spec[1], "n_prior sd")
        return NPrior(
            "normal",
            lambda n: -0.5 * ((n - mean) / sd) ** 2,
            {
                "kind": "normal",
                "mean": mean,
                "sd": sd,
                "text": f"Normal(mean {mean:g}, sd {sd:g}) prior on n >= 0 (discretised)",
            },
            log_sup=0.0,
        )
    logpmf = getattr(spec, "logpmf", None)
    pmf = getattr(spec, "pmf", None)
    if logpmf is None and pmf is None:
        raise TypeError(
            "n_prior must be None, 'flat', (mean, sd) or an object with logpmf or pmf, "
            f"got {type(spec).__name__}"
        )
    name = getattr(getattr(spec, "dist", None), "name", type(spec).__name__)
    args = [float(v) for v in getattr(spec, "args", ())]

    def log_pmf(n: np.ndarray) -> np.ndarray:
        if logpmf is not None:
            out = np.asarray(logpmf(n), dtype=float)
        else:
            with np.errstate(divide="ignore"):
                out = np.log(np.asarray(pmf(n), dtype=np.float64))  # type: ignore[misc]
        if out.shape != np.shape(n) or np.any(np.isnan(out)) or np.any(out == np.inf):
            raise ValueError("n_prior's logpmf/pmf must give a finite or -inf value per n")
        return out

    # a scipy.stats discrete distribution's pmf is at most 1; another object's is unknown
    proper = isinstance(spec, stats.distributions.rv_frozen) and isinstance(
        getattr(spec, "dist", None), stats.rv_discrete
    )
    return NPrior(
        "pmf",
        log_pmf,
        {"kind": "pmf", "distribution": str(name), "args": args, "text": f"{name}{tuple(args)}"},
        log_sup=0.0 if proper else None,
    )
