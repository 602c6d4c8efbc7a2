"""The one entry point for private posterior releases, and the registry behind it.

``release(model, data, *, mechanism, epsilon, delta=0, accountant=None, rng=None, ...)``
works in three steps, so that a failing call spends nothing and releases nothing:

1. check the arguments and compute the model's sufficient statistics from the data;
2. *plan*: the registered mechanism validates its options and states its
   :class:`~dpbayes.privacy.Guarantee` before any noise is drawn;
3. *run*: under ``accountant.charge(guarantee)`` (if an accountant is given), draw the
   noise and build the :class:`Release`.

A release mechanism registers a planner with :func:`register`::

    @register("laplace", BetaBernoulli)
    def plan_laplace(model, stats, *, epsilon, delta, neighbours, **options) -> Plan: ...

The modules that register the built-in mechanisms are listed once, in :data:`FAMILIES`,
and imported on the registry's first use (:func:`registered`), so importing
:mod:`dpbayes.release` costs nothing until a release is planned.
"""

from __future__ import annotations

import importlib
import json
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from dpbayes.privacy import Accountant, Guarantee, Neighbours
from dpbayes.privacy.guarantee import user_level
from dpbayes.privacy.noise import NoiseSource, noise_source
from dpbayes.privacy.validation import check_delta, check_epsilon

__all__ = [
    "FAMILIES",
    "Plan",
    "Release",
    "group_privacy_budget",
    "mechanisms_for",
    "plan",
    "register",
    "registered",
    "release",
]


@dataclass(frozen=True, repr=False)
class Release:
    """A private posterior: what may be published, and its guarantee.

    Attributes
    ----------
    model:
        The model (its prior is public).
    mechanism:
        The registered mechanism name (``"laplace"``, ``"expmech"``, ...).
    posterior:
        The posterior computed from the released values, taking them as exact (the
        "naive" posterior of the papers).
    guarantee:
        What the release promises (eps, delta, neighbours, mechanism, sensitivity).
    released:
        The released values themselves, JSON-serialisable (e.g. noisy counts).
    public:
        Public facts used by the mechanism (n, bounds, sensitivity kind, ...).
    """

    model: Any
    mechanism: str
    posterior: Any
    guarantee: Guarantee
    released: dict[str, Any]
    public: dict[str, Any] = field(default_factory=dict)

    @property
    def simulation(self) -> bool:
        return self.guarantee.simulation

    @property
    def private(self) -> bool:
        return self.guarantee.private

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable record of everything a recipient may see."""
        return {
            "format": "dpbayes-release",
            "version": 1,
            "model": self.model.to_dict(),
            "mechanism": self.mechanism,
            "released": self.released,
            "public": self.public,
            "posterior": None if self.posterior is None else self.posterior.to_dict(),
            "guarantee": self.guarantee.to_dict(),
        }

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    def noise_aware_posterior(self, **options: Any) -> Any:
        """The posterior given the released values and the known noise, not the data.

        See :mod:`dpbayes.release.noise_aware` (uses released, public, guarantee, model);
        ``options`` (e.g. ``iterations``, ``chains``, ``rng``) go to the MCMC paths. The
        default (no options) is computed once and kept: the displays lead with it.
        """
        from dpbayes.release.noise_aware import noise_aware_posterior

        if options:
            return noise_aware_posterior(self, **options)
        cached = self.__dict__.get("_noise_aware")
        if cached is None:
            cached = noise_aware_posterior(self)
            object.__setattr__(self, "_noise_aware", cached)  # a cache, not a field
        return cached

    def __repr__(self) -> str:
        """Noise-aware posterior and its interval first; the naive one labelled as such."""
        from dpbayes.release.display import release_repr

        return release_repr(self)

    def _repr_html_(self) -> str:
        """A compact table for notebooks, in the order of :meth:`__repr__`."""
        from dpbayes.release.display import release_html

        return release_html(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Release:
        """Rebuild a release from :meth:`to_dict` output, refusing inconsistent records.

        Any model (conjugate, Bayesian network, regression); a record no mechanism could
        have produced (counts outside [0, n], an unknown version, a guarantee of another
        mechanism) raises a one-line ``ValueError`` (see ``release/reader.py``).
        """
        from dpbayes.release.reader import release_from_dict

        return release_from_dict(d)


@dataclass(frozen=True)
class Plan:
    """A release whose guarantee is known and whose noise is not yet drawn.

    ``log_distribution``, for mechanisms with finitely many outputs whose law is known in
    closed form (the exponential mechanism), returns ``(outputs, log_probabilities)``:
    outputs as the rows the auditor sees (the released values), for exact privacy audits.
    It is computed from the private data and is never published.
    """

    guarantee: Guarantee
    run: Callable[[NoiseSource], Release]
    log_distribution: Callable[[], tuple[Any, Any]] | None = None


Planner = Callable[..., Plan]
_REGISTRY: dict[tuple[str, type], Planner] = {}

#: The modules whose import registers the built-in mechanisms (one per family), imported
#: on the registry's first use.
FAMILIES = (
    "dpbayes.release.parameters",
    "dpbayes.release.expmech",
    "dpbayes.release.input",
    "dpbayes.release.bayes_net",
    "dpbayes.release.fourier",
    "dpbayes.release.sampling",
    "dpbayes.release.linear_regression",
    "dpbayes.release.ssp",
)
_FAMILIES_LOADED = threading.Event()


def registered() -> dict[tuple[str, type], Planner]:
    """Every registered planner, ``{(mechanism, model type): planner}``, families loaded."""
    if not _FAMILIES_LOADED.is_set():
        for module in FAMILIES:  # each registers its planners when imported
            importlib.import_module(module)
        _FAMILIES_LOADED.set()
    return dict(_REGISTRY)


def register(mechanism: str, model_type: type) -> Callable[[Planner], Planner]:
    """Register a planner for ``mechanism`` on models of ``model_type``."""

    def deco(fn: Planner) -> Planner:
        key = (mechanism, model_type)
        if key in _REGISTRY and _REGISTRY[key] is not fn:
            raise RuntimeError(f"mechanism {mechanism!r} already registered for {model_type}")
        _REGISTRY[key] = fn
        return fn

    return deco


def mechanisms_for(model: Any) -> list[str]:
    """Names of the release mechanisms available for ``model``."""
    return sorted({m for (m, t) in registered() if isinstance(model, t)})


def _planner(model: Any, mechanism: Any) -> Planner:
    if not isinstance(mechanism, str):
        raise TypeError(f"mechanism must be a string, got {type(mechanism).__name__}")
    for (name, model_type), fn in registered().items():
        if name == mechanism and isinstance(model, model_type):
            return fn
    available = mechanisms_for(model)
    if not available:
        raise TypeError(f"model must be a dpbayes model, got {type(model).__name__}")
    raise ValueError(
        f"mechanism must be one of {available} for {type(model).__name__}, got {mechanism!r}"
    )


def plan(
    model: Any,
    data: Any,
    *,
    mechanism: str,
    epsilon: float,
    delta: float = 0.0,
    neighbours: Neighbours | str | None = None,
    column: str | None = None,
    allow_non_private: bool = False,
    **options: Any,
) -> Plan:
    """Steps 1 and 2 of :func:`release`: the :class:`Plan` of a release, no noise drawn.

    Checks the arguments, computes the sufficient statistics of ``data`` and asks the
    registered mechanism for its guarantee. ``plan(...).run(noise_source(rng))`` draws one
    release without charging any budget (for audits and simulations; publish through
    :func:`release`, which charges the accountant). Arguments as in :func:`release`.

    On data bounded to k rows per user (``data.rows_per_user_bound``) the relation is
    add/remove one user (<= k rows), n private (:meth:`Neighbours.for_unit`; an explicit
    ``neighbours="substitute"`` is refused). A planner with native user-level support
    (``planner.user_level``) scales its add/remove sensitivity by k. Any other planner
    falls back to group privacy: it is planned under add/remove one record at the
    per-record budget (eps/k, delta/(k e^{(k-1) eps/k})) of :func:`group_privacy_budget`,
    and the release states the user-level (eps, delta); planners that need a public n
    refuse add/remove, hence user-level data, with a one-line error.
    Privacy (group privacy, Dwork & Roth 2014, Thm 2.2 and its (eps, delta) form): adding
    or removing one user adds or removes at most k rows, a chain of <= k add/remove
    neighbours; an (e, d)-DP mechanism is (k e, k e^{(k-1) e} d)-DP across such a chain,
    which is (eps, delta) at the budget above.
    A mechanism whose model needs the rows themselves (not the engine's statistics) cannot
    read bounded data and is refused with a one-line ValueError before anything is drawn.
    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    if neighbours is not None:
        Neighbours.parse(neighbours)
    planner = _planner(model, mechanism)
    bound = getattr(data, "rows_per_user_bound", None)
    if "rows_per_user" in options:
        raise ValueError(
            "rows_per_user comes from the data: bound contributions with "
            "dpbayes.data.as_source(..., user_column=..., max_rows_per_user=k)"
        )
    k = None if bound is None else int(bound)
    rel = Neighbours.for_unit(neighbours, k)
    native = bool(getattr(planner, "user_level", False))
    if k is not None and native:
        options["rows_per_user"] = k
    group_k = None if k is None or native else k  # the group-privacy fallback's k
    try:
        stats = model.statistics(data, column=column)
    except TypeError as exc:
        if k is None:
            raise
        raise ValueError(
            f"mechanism {mechanism!r} for {type(model).__name__} cannot read "
            f"contribution-bounded (user-level) data: {exc}"
        ) from None
    per_eps, per_delta = (eps, dlt) if group_k is None else group_privacy_budget(eps, dlt, group_k)
    out = planner(
        model,
        stats,
        epsilon=per_eps,
        delta=per_delta,
        neighbours=rel,
        allow_non_private=bool(allow_non_private),
        **options,
    )
    if group_k is not None:
        out = _group_privacy_plan(out, group_k, eps, dlt, per_eps, per_delta, rel)
    if not out.guarantee.private and not allow_non_private:
        raise ValueError(
            f"mechanism {mechanism!r} with these options is not differentially private; "
            "pass allow_non_private=True to run it as an experiment"
        )
    return out


def source_name(data: Any) -> str:
    """A name for the ledger: a file's or table's name (a URL without its credentials),
    else the kind of object the data came in."""
    import os
    import re

    if isinstance(data, str | os.PathLike):
        return re.sub(r"//[^/@]*@", "//", os.fspath(data))[:200]
    name = getattr(data, "name", None)
    if isinstance(name, str) and name:
        return re.sub(r"//[^/@]*@", "//", name)[:200]
    return type(data).__name__


def group_privacy_budget(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """The per-record (eps/k, delta / (k e^{(k-1) eps/k})) that gives (eps, delta) for k rows.

    Group privacy (Dwork & Roth 2014, Thm 2.2; the (eps, delta) form by induction over a
    chain of k neighbours): an (e, d)-DP mechanism is (k e, k e^{(k-1) e} d)-DP for groups
    of k records, so e = eps/k and d = delta / (k e^{(k-1) eps/k}) give (eps, delta).
    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    # e^{-(k-1) eps/k} underflows to 0 for huge eps instead of overflowing
    return eps / k, dlt * math.exp(-(k - 1) * eps / k) / k


def _group_privacy_plan(
    out: Plan,
    k: int,
    eps: float,
    dlt: float,
    per_eps: float,
    per_delta: float,
    neighbours: Neighbours,
) -> Plan:
    """``out`` planned at the per-record budget, restated as a user-level (eps, delta)."""
    _, user = user_level(k, neighbours)

    def lift(g: Guarantee) -> Guarantee:
        if g.epsilon <= per_eps and g.delta <= per_delta:
            ueps, udelta = eps, (dlt if g.delta > 0 else 0.0)
        else:  # the planner states more than it was given: compose from what it states
            ueps = k * g.epsilon
            udelta = 0.0
            if g.delta > 0:  # k e^{(k-1) e} d, in log space (no overflow at huge e)
                log_d = math.log(k) + (k - 1) * g.epsilon + math.log(g.delta)
                udelta = min(math.exp(min(log_d, 0.0)), 1.0 - 1e-15)
        facts = f"group privacy, k = {k}, per-record eps = {g.epsilon:.6g}"
        if g.delta > 0:
            facts += f", per-record delta = {g.delta:.6g}"
        details = {
            **g.details,
            **user,
            "group_privacy": facts,
            "per_record_epsilon": g.epsilon,
            "per_record_delta": g.delta,
        }
        return replace(
            g,
            epsilon=ueps,
            delta=udelta,
            mechanism=f"{g.mechanism} at per-record eps {g.epsilon:.6g} (group privacy, k = {k})",
            details=details,
        )

    def run(src: NoiseSource) -> Release:
        rel = out.run(src)
        public = {**rel.public, **user, "per_record_epsilon": rel.guarantee.epsilon}
        return replace(rel, guarantee=lift(rel.guarantee), public=public)

    return Plan(guarantee=lift(out.guarantee), run=run, log_distribution=out.log_distribution)


def release(
    model: Any,
    data: Any,
    *,
    mechanism: str,
    epsilon: float,
    delta: float = 0.0,
    accountant: Accountant | None = None,
    rng: Any = None,
    neighbours: Neighbours | str | None = None,
    column: str | None = None,
    allow_non_private: bool = False,
    **options: Any,
) -> Release:
    """The body of :func:`dpbayes.release.release` (documented there)."""
    check_epsilon(epsilon)
    check_delta(delta)
    if neighbours is not None:
        Neighbours.parse(neighbours)
    _planner(model, mechanism)
    if accountant is not None and not isinstance(accountant, Accountant):
        raise TypeError(f"accountant must be a dpbayes Accountant, got {type(accountant).__name__}")
    if allow_non_private and accountant is not None:
        raise ValueError(
            "allow_non_private releases are experiments and cannot be charged to an accountant"
        )
    src = noise_source(rng)
    planned = plan(
        model,
        data,
        mechanism=mechanism,
        epsilon=epsilon,
        delta=delta,
        neighbours=neighbours,
        column=column,
        allow_non_private=allow_non_private,
        **options,
    )
    if accountant is None:
        out = planned.run(src)
    else:
        # the charged guarantee says whether the noise is seeded: a real budget refuses a
        # simulation release here, before any noise is drawn
        cost = planned.guarantee.with_simulation(src.simulation)
        with accountant.charge(
            cost, label=f"{mechanism} {type(model).__name__}", source=source_name(data)
        ):
            out = planned.run(src)
    if src.simulation and not out.guarantee.simulation:
        raise AssertionError("a simulated release must say simulation=True")
    return out
