"""Deliberately broken mechanisms, to show that the auditor catches privacy violations.

Not for use: each one claims a guarantee it does not have.

* :func:`half_scale_laplace`: Laplace noise of half the scale the claimed eps needs, so
  it is 2 eps-DP while claiming eps.
* :func:`local_sensitivity_expmech`: the exponential mechanism calibrated to the *local*
  sensitivity of its score at the data (Nissim, Raskhodnikova & Smith 2007 explain why
  this is not DP). The score is -|clip(posterior mean, lo, hi) - r| over a grid of
  candidates r for a Beta-Bernoulli posterior; where the clipped mean is flat the local
  sensitivity is 0 and the mechanism is deterministic, while a neighbour just inside the
  clipping range randomises: the privacy loss is unbounded. (The paper-003 Hellinger
  version with the factor 2 is nearly private on the coin; see docs/programs-and-audit.md.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dpbayes.privacy import ExponentialMechanism, LaplaceMechanism
from dpbayes.privacy.validation import check_epsilon, check_positive

__all__ = ["half_scale_laplace", "local_sensitivity_expmech"]

_FLOOR = 1e-12


def half_scale_laplace(epsilon: float, sensitivity: float = 1.0) -> Callable[[Any, Any], Any]:
    """``(value, rng) -> value + Lap(sensitivity / (2 eps))``: claims eps, is 2 eps-DP."""
    eps = check_epsilon(epsilon)
    mech = LaplaceMechanism(
        epsilon=2.0 * eps, sensitivity=check_positive(sensitivity, "sensitivity")
    )

    def run(value: Any, rng: Any) -> Any:
        return mech.release(np.atleast_1d(np.asarray(value, dtype=float)), rng=rng).value

    run.__name__ = "laplace with half the scale"
    return run


def local_sensitivity_expmech(
    epsilon: float,
    n: int,
    *,
    a: float = 1.0,
    b: float = 1.0,
    clip: tuple[float, float] = (0.4, 0.6),
    grid: int = 21,
) -> Callable[[Any, Any], Any]:
    """``(bools, rng) -> candidate``: expmech with local sensitivity (NOT private)."""
    eps = check_epsilon(epsilon)
    cands = np.linspace(0.0, 1.0, grid)
    lo, hi = clip

    def clipped_mean(k: int) -> float:
        return float(np.clip((a + k) / (a + b + n), lo, hi))

    def run(data: Any, rng: Any) -> Any:
        k = int(np.sum(data))
        c = clipped_mean(k)
        local = max(abs(c - clipped_mean(j)) for j in (k - 1, k + 1) if 0 <= j <= n)
        mech = ExponentialMechanism(epsilon=eps, sensitivity=max(local, _FLOOR))
        return float(cands[mech.release(-np.abs(c - cands), rng=rng).value])

    run.__name__ = "expmech with local sensitivity (clipped posterior mean)"
    return run
