"""Empirical privacy auditing: lower bounds on eps from outputs on neighbouring data.

``audit(mechanism, pairs, epsilon=..., delta=...)`` works on any callable
``(data, rng) -> output``; :mod:`dpbayes.audit.targets` builds such callables and the
neighbouring pairs for the release mechanisms of the built-in models and for checked
programs; :mod:`dpbayes.audit.exact` gives the exact eps of finite-output mechanisms.
"""

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
