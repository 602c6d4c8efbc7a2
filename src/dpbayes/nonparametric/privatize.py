"""The data owner's side of paper 001: release a column under local differential privacy.

Each person's value is released once, independently, through a known mechanism Q:
Laplace or Gaussian noise after clipping to [-r, r] for numbers, k-ary randomized
response for categories. The noise is drawn by :mod:`dpbayes.privacy` (OpenDP's
floating-point-safe samplers unless a seed is given for simulation) and the result
carries its :class:`~dpbayes.privacy.Guarantee`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpbayes.privacy import Guarantee, RandomizedResponse

__all__ = ["MECHANISMS", "PrivatizedColumn", "privatize"]

MECHANISMS = ("laplace", "gaussian", "randomized-response")


@dataclass(frozen=True)
class PrivatizedColumn:
    """Locally privatised values, the guarantee they carry, and the mechanism that made them.

    ``mechanism`` is the likelihood model Q (a :mod:`dpbayes.nonparametric` mechanism)
    for numeric columns, or :class:`dpbayes.privacy.RandomizedResponse` for categories.
    """

    values: np.ndarray
    guarantee: Guarantee
    mechanism: Any
    categories: tuple[Any, ...] | None = None

    def __len__(self) -> int:
        return int(self.values.shape[0])

    @property
    def simulation(self) -> bool:
        return self.guarantee.simulation


def _categories(categories: Any) -> tuple[Any, ...]:
    if categories is None or isinstance(categories, str) or not isinstance(categories, Sequence):
        raise TypeError(
            "categories must be a list of the possible categories (public, not from data)"
        )
    cats = tuple(categories)
    if len(cats) < 2 or len(set(cats)) != len(cats):
        raise ValueError(f"categories must hold at least 2 distinct values, got {list(cats)!r}")
    return cats


def privatize(
    values: Any,
    *,
    mechanism: str = "laplace",
    epsilon: float,
    r: float | None = None,
    delta: float = 0.0,
    categories: Sequence[Any] | None = None,
    rng: Any = None,
) -> PrivatizedColumn:
    """Release each value under local DP: ``laplace`` / ``gaussian`` (clip to [-r, r]) or RR.

    Parameters
    ----------
    values:
        One value per person (numbers; category labels for randomized response).
    mechanism:
        ``"laplace"`` (Z = clip(X) + Lap(2r/eps)), ``"gaussian"`` (analytic sigma for L2
        sensitivity 2r, needs delta > 0) or ``"randomized-response"`` (needs the public
        ``categories``).
    epsilon, delta, r:
        The privacy parameters and the public clipping bound r > 0.
    rng:
        None for the floating-point-safe samplers (releases); an int or Generator for a
        seeded simulation (the guarantee then says ``simulation=True``).

    Privacy: every value is released once by an eps-LDP (or (eps, delta)-LDP) mechanism,
    so substituting one person's record changes one output and the column is eps-DP.
    """
    from dpbayes.nonparametric.mechanisms import LocalGaussian, LocalLaplace

    if mechanism == "randomized-response":
        cats = _categories(categories)
        index = {c: i for i, c in enumerate(cats)}
        raw = list(np.asarray(values, dtype=object).ravel())
        if any(v not in index for v in raw):  # the value itself is data: not quoted
            raise ValueError(f"values must be among categories {list(cats)!r}, found another")
        rr = RandomizedResponse(epsilon=epsilon, k=len(cats))
        noisy = rr.release(np.array([index[v] for v in raw], dtype=np.int64), rng=rng)
        out = np.array([cats[i] for i in np.asarray(noisy.value)], dtype=object)
        return PrivatizedColumn(out, noisy.guarantee, rr, cats)
    if r is None:
        raise ValueError(f"r (the clipping bound) must be given for the {mechanism} mechanism")
    # the mechanism (epsilon, delta, r) is checked before the values are read
    if mechanism == "laplace":
        if delta != 0:
            raise ValueError(f"delta must be 0 for the laplace mechanism, got {delta}")
        return LocalLaplace(epsilon=epsilon, r=r).privatize(values, rng=rng)  # type: ignore[no-any-return]
    if mechanism == "gaussian":
        return LocalGaussian(epsilon=epsilon, delta=delta, r=r).privatize(values, rng=rng)  # type: ignore[no-any-return]
    raise ValueError(f"mechanism must be one of {', '.join(MECHANISMS)}, got {mechanism!r}")
