"""The data owner's side of paper 001: release a column under local differential privacy.

Each person's value is released once, independently, through a known mechanism Q:
Laplace or Gaussian noise after clipping to [-r, r] for numbers, k-ary randomized
response for categories. The noise is drawn by :mod:`dpbayes.privacy` (OpenDP's
floating-point-safe samplers unless a seed is given for simulation) and the result
carries its :class:`~dpbayes.privacy.Guarantee`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dpbayes.privacy import Guarantee, RandomizedResponse

__all__ = ["MECHANISMS", "PrivatizedColumn", "mechanism_of", "privatize", "read_privatized"]

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


def mechanism_of(guarantee: Guarantee) -> Any:
    """The local mechanism (:class:`LocalLaplace` / :class:`LocalGaussian`) a numeric
    column's guarantee describes: the analyst's likelihood model Q.

    The mechanism is rebuilt from (epsilon, delta, r, calibration) and its own guarantee
    must equal the one given, so a guarantee edited by hand (a scale that does not follow
    from its eps and r) is refused rather than modelled with the wrong noise.
    """
    from dpbayes.nonparametric.mechanisms import LocalGaussian, LocalLaplace

    details = dict(guarantee.details)
    name = guarantee.mechanism
    if not isinstance(name, str) or not isinstance(guarantee.simulation, bool):
        raise ValueError("guarantee: its mechanism must be a name and simulation true or false")
    if name.startswith("randomized"):
        raise ValueError(
            "guarantee: randomized response releases categories; the DP mixture models real "
            "values (a column privatised by laplace or gaussian)"
        )
    if not details.get("local") or "r" not in details:
        raise ValueError(
            f"guarantee: not that of a locally privatised column ({guarantee.describe()}); "
            "expected the file `dpbayes privatize` writes beside its output"
        )
    try:
        if name == "laplace":
            mech: Any = LocalLaplace(epsilon=guarantee.epsilon, r=details["r"])
        elif name.startswith("gaussian (") and name.endswith(")"):
            mech = LocalGaussian(
                epsilon=guarantee.epsilon,
                delta=guarantee.delta,
                r=details["r"],
                calibration=name[len("gaussian (") : -1],
            )
        else:
            raise ValueError(f"mechanism {name!r} is not laplace or gaussian")
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"guarantee: {exc}") from None
    rebuilt = mech.guarantee(simulation=guarantee.simulation).to_dict()
    if json.loads(json.dumps(rebuilt)) != json.loads(json.dumps(guarantee.to_dict())):
        raise ValueError(
            f"guarantee: its noise does not follow from its epsilon, delta and r "
            f"({guarantee.describe()}): edited by hand?"
        )
    return mech


def read_privatized(
    path: str | Path, *, column: str | None = None, guarantee: str | Path | None = None
) -> PrivatizedColumn:
    """A column written by ``dpbayes privatize`` (CSV or Parquet) with its guarantee.

    ``column``: default the file's only column. ``guarantee``: the JSON file of the
    guarantee, default the one ``dpbayes privatize`` writes beside its output
    (``z.csv`` -> ``z.guarantee.json``). The mechanism is rebuilt from the guarantee
    (:func:`mechanism_of`); the values must be numbers, none missing.
    """
    import pandas as pd

    from dpbayes.data.readers import is_parquet_file

    src = Path(path)
    if src.is_dir():
        raise OSError(f"path {src}: is a folder, not a file of values")
    if not src.is_file():
        raise OSError(f"path {src}: no such file")
    side = src.with_suffix(".guarantee.json") if guarantee is None else Path(guarantee)
    if not side.is_file():
        raise OSError(
            f"guarantee {side}: no such file (the guarantee `dpbayes privatize` wrote beside "
            "the values is needed: it says which noise the values carry)"
        )
    try:
        data = json.loads(side.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"a JSON {type(data).__name__}, not an object")
        g = Guarantee.from_dict(data)
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise ValueError(f"guarantee {side}: not a guarantee file ({exc})") from None
    try:
        mech = mechanism_of(g)
    except ValueError as exc:  # named by its file, which the caller may not have given
        raise ValueError(f"guarantee {side}: {str(exc).removeprefix('guarantee: ')}") from None
    try:
        frame = pd.read_parquet(src) if is_parquet_file(src) else pd.read_csv(src)
    except (ValueError, OSError) as exc:  # pyarrow's ArrowInvalid / ArrowIOError included
        raise ValueError(f"path {src}: not a CSV or Parquet file of values ({exc})") from None
    if column is None:
        if frame.shape[1] != 1:
            raise ValueError(
                f"column: {src.name} has {frame.shape[1]} columns {list(frame.columns)}; "
                "name the privatised one"
            )
        column = str(frame.columns[0])
        if _is_number(column):
            raise ValueError(
                f"path {src}: its first line is a number, not a header naming the column "
                "(the file `dpbayes privatize` writes has one)"
            )
    elif column not in frame.columns:
        raise ValueError(f"column {column!r} is not in {src.name} (columns: {list(frame.columns)})")
    col = frame[column]
    if len(col) == 0:
        raise ValueError(f"path {src}: column {column!r} has no values")
    if not pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col):
        raise ValueError(f"column {column!r} of {src.name} is not numeric")
    values = col.to_numpy(dtype=float)
    if not np.all(np.isfinite(values)):
        raise ValueError(f"column {column!r} of {src.name} has missing or infinite values")
    return PrivatizedColumn(values=values, guarantee=g, mechanism=mech)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
