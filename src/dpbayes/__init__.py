"""dpbayes: differentially private Bayesian inference.

import dpbayes as dpb
model = dpb.models.BetaBernoulli(alpha=1, beta=1)
rel = dpb.release(model, data, mechanism="laplace", epsilon=1.0)
rel.posterior, rel.guarantee

Importing dpbayes is cheap: the sub-packages (``dpb.models``, ``dpb.privacy``, ...) and
the names below are imported on first use (PEP 562), so numpy, scipy, pandas and DuckDB
load only when something needs them. ``dpb.release`` is the release function; the
``dpbayes.release`` sub-package it comes from stays importable by its full name
(``from dpbayes.release import Release, plan, expmech``). As before, ``import
dpbayes.release.base as b`` follows the attribute ``dpbayes.release`` (the function):
write ``from dpbayes.release import base``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Binds the function ``release`` over the attribute that importing the sub-package
# ``dpbayes.release`` sets: the sub-package is light (see its docstring) and is imported
# here, before anything else can import it and rebind the attribute to the module.
from dpbayes.release import release

if TYPE_CHECKING:
    from dpbayes import models, privacy
    from dpbayes.privacy import Accountant, BudgetExceeded, Guarantee, Neighbours
    from dpbayes.release import Release, mechanisms_for

#: ``dpbayes.__version__``: the installed distribution's version (one source: pyproject.toml),
#: read through importlib.metadata on first use.
__version__: str

__all__ = [
    "Accountant",
    "BudgetExceeded",
    "Guarantee",
    "Neighbours",
    "Release",
    "mechanisms_for",
    "models",
    "privacy",
    "release",
]

#: Names imported on first use, and the module that defines each.
_LAZY_NAMES = {
    "Accountant": "dpbayes.privacy",
    "BudgetExceeded": "dpbayes.privacy",
    "Guarantee": "dpbayes.privacy",
    "Neighbours": "dpbayes.privacy",
    "Release": "dpbayes.release.base",
    "mechanisms_for": "dpbayes.release.base",
}
#: Sub-packages reachable as attributes (``dpb.models.BetaBernoulli``) without an import.
_SUBPACKAGES = frozenset(
    {
        "answers",
        "audit",
        "data",
        "estimators",
        "experiments",
        "models",
        "nonparametric",
        "privacy",
        "programs",
        "progress",
        "service",
    }
)


def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dpbayes")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        value: Any = _installed_version()
    elif name in _LAZY_NAMES:
        value = getattr(importlib.import_module(_LAZY_NAMES[name]), name)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY_NAMES, *_SUBPACKAGES})
