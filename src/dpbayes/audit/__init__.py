"""Empirical privacy auditing: lower bounds on eps from outputs on neighbouring data.

``audit(mechanism, pairs, epsilon=..., delta=...)`` works on any callable
``(data, rng) -> output``; :mod:`dpbayes.audit.targets` builds such callables and the
neighbouring pairs for the release mechanisms of the built-in models and for checked
programs; :mod:`dpbayes.audit.exact` gives the exact eps of finite-output mechanisms.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dpbayes.audit.auditor import AuditResult, NeighbourPair, PairAudit, as_vector, audit
    from dpbayes.audit.bounds import (
        clopper_pearson_lower,
        clopper_pearson_upper,
        epsilon_lower_bound,
        exact_epsilon,
    )
    from dpbayes.audit.exact import expected_lower_bound, pair_exact_epsilon

__all__ = [
    "AuditResult",
    "NeighbourPair",
    "PairAudit",
    "as_vector",
    "audit",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "epsilon_lower_bound",
    "exact_epsilon",
    "expected_lower_bound",
    "pair_exact_epsilon",
]

# Imported on first use (PEP 562), so that ``dpbayes.audit.names`` (what the command line
# needs to build its parser) loads no numeric library.
_LAZY = {
    "AuditResult": "auditor",
    "NeighbourPair": "auditor",
    "PairAudit": "auditor",
    "as_vector": "auditor",
    "audit": "auditor",
    "clopper_pearson_lower": "bounds",
    "clopper_pearson_upper": "bounds",
    "epsilon_lower_bound": "bounds",
    "exact_epsilon": "bounds",
    "expected_lower_bound": "exact",
    "pair_exact_epsilon": "exact",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
