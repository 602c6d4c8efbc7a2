"""Reproductions of the papers' figures, one module per experiment.

Each module defines ``NAME`` (the name used by ``dpbayes experiment NAME``), a one-line
``DESCRIPTION``, and ``run(out_dir, *, small=False, seed=0) -> list[Path]``, which writes
CSV and PNG files into ``out_dir`` and returns their paths. ``small=True`` is the
reduced version the test suite runs.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

__all__ = ["available", "get", "run"]


def _modules() -> dict[str, ModuleType]:
    found: dict[str, ModuleType] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        name = getattr(mod, "NAME", None)
        if isinstance(name, str) and callable(getattr(mod, "run", None)):
            found[name] = mod
    return found


def available() -> dict[str, str]:
    """Experiment names and their one-line descriptions."""
    return {name: getattr(m, "DESCRIPTION", "") for name, m in sorted(_modules().items())}


def get(name: str) -> Callable[..., list[Path]]:
    mods = _modules()
    if name not in mods:
        raise ValueError(f"experiment must be one of {sorted(mods)}, got {name!r}")
    return mods[name].run  # type: ignore[no-any-return]


def run(name: str, out_dir: str | Path, *, small: bool = False, seed: int = 0) -> list[Path]:
    experiment = get(name)  # an unknown name before any folder is made
    out = Path(out_dir)
    for folder in (out, *out.parents):
        if folder.exists() and not folder.is_dir():
            raise NotADirectoryError(f"the output folder {out}: {folder} is a file")
    out.mkdir(parents=True, exist_ok=True)
    return experiment(out, small=small, seed=seed)
