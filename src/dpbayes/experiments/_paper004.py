"""Shared pieces of paper 004's experiments: data sets with public bounds, the optional
diffprivlib baseline, splits and CSV writing."""

from __future__ import annotations

import csv
import importlib.util
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "RANDHIE_BOUNDS",
    "diffprivlib_status",
    "quiet",
    "split",
    "write_csv",
]

#: Public bounds of the RAND HIE columns, from the variables' definitions
#: (coinsurance 0..100 %, log payments, counts), not from the data.
RANDHIE_BOUNDS: dict[str, tuple[float, float]] = {
    "lncoins": (0.0, 4.62),
    "idp": (0.0, 1.0),
    "lpi": (0.0, 8.0),
    "fmde": (0.0, 9.0),
    "physlm": (0.0, 1.0),
    "disea": (0.0, 60.0),
    "hlthg": (0.0, 1.0),
    "hlthf": (0.0, 1.0),
    "hlthp": (0.0, 1.0),
    "mdvis": (0.0, 100.0),
}


def diffprivlib_status() -> tuple[bool, str]:
    """(True, "diffprivlib X") when it imports, else (False, the reason it does not)."""
    if importlib.util.find_spec("diffprivlib") is None:
        return False, "diffprivlib is not installed (see docs/bayes-net.md, bench extra)"
    try:
        with quiet():
            import diffprivlib  # noqa: F401
    except Exception as exc:  # e.g. it does not import with scikit-learn >= 1.6
        return False, f"diffprivlib does not import here ({type(exc).__name__}: {exc})"[:200]
    from importlib.metadata import version

    return True, f"diffprivlib {version('diffprivlib')}"


class quiet(warnings.catch_warnings):
    """Silence the baseline's warnings (diffprivlib warns on every call)."""

    def __enter__(self) -> Any:
        out = super().__enter__()
        warnings.simplefilter("ignore")
        return out


def split(n: int, test_fraction: float, gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    perm = gen.permutation(n)
    k = round(n * test_fraction)
    return perm[k:], perm[:k]


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    keys: list[str] = []
    for r in rows:
        keys.extend(k for k in r if k not in keys)
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    return path


def summarise(
    rows: Sequence[dict[str, Any]],
    keys: Sequence[str],
    value: str,
    extra: Callable[..., Any] | None = None,
) -> list[dict[str, Any]]:
    """Mean, standard deviation and count of ``value`` per combination of ``keys``."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r)
    out = []
    for key, grp in groups.items():
        vals = np.array([float(g[value]) for g in grp])
        entry = dict(zip(keys, key, strict=True))
        entry.update(
            {
                f"mean_{value}": float(np.mean(vals)),
                f"sd_{value}": float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0,
                "repeats": len(vals),
            }
        )
        if extra is not None:
            entry.update(extra(grp))
        out.append(entry)
    return out
