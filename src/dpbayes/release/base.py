"""The one entry point for private posterior releases, and the registry behind it.

``release(model, data, *, mechanism, epsilon, delta=0, accountant=None, rng=None, ...)``
works in three steps, so that a failing call spends nothing and releases nothing:

1. check the arguments and compute the model's sufficient statistics from the data;
2. *plan*: the registered mechanism validates its options and states its
   :class:`~dpbayes.privacy.Guarantee` before any noise is drawn;
3. *run*: under ``accountant.charge(guarantee)`` (if an accountant is given), draw the
   noise and build the :class:`Release`.

A release mechanism registers a planner with :func:`register`, naming the options it
accepts (any other is refused here, once) and whether it scales to k rows per user::

    @register("expmech", BetaBernoulli, record=ExpmechCoinRecord,
              options=("sensitivity", "divergence"))
    def plan_expmech(model, stats, *, epsilon, delta, neighbours, sensitivity="global",
                     divergence="hellinger", **_) -> Plan: ...

and its noise-aware posterior (the inverse, for the recipient) with
:func:`register_noise_aware`. Each family is one package (``counts/``, ``expmech/``,
``input/``, ``bayes_net/``, ``regression/``) holding its planners, its noise-aware
posteriors, its compiled kernels and its proof; the packages are listed once, in
:data:`FAMILIES`, and imported on the registry's first use (:func:`registered`), so
importing :mod:`dpbayes.release` costs nothing until a release is planned. This module
imports nothing from the families (it is the leaf they all import).
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from dpbayes.privacy import Accountant, Guarantee, Neighbours, compose_sequential
from dpbayes.privacy.guarantee import user_level
from dpbayes.privacy.noise import NoiseSource, noise_source
from dpbayes.privacy.validation import check_delta, check_epsilon, check_flag
from dpbayes.release.record import PublicRecord

__all__ = [
    "FAMILIES",
    "Mechanism",
    "Plan",
    "Release",
    "group_privacy",
    "group_privacy_budget",
    "mechanisms_for",
    "noise_aware_mechanisms",
    "noise_aware_posterior",
    "plan",
    "register",
    "register_noise_aware",
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
        Public facts used by the mechanism (n, bounds, sensitivity kind, ...): the
        serialised form of :attr:`record`, the mechanism's typed record.
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

    @property
    def record(self) -> PublicRecord:
        """:attr:`public` as the mechanism's typed record (registered with its planner;
        :mod:`dpbayes.release.record`), read once; ``ValueError`` if it is malformed."""
        cached = self.__dict__.get("_record")
        if cached is None:
            cached = _entry(self.model, self.mechanism).record.read(self.public)
            object.__setattr__(self, "_record", cached)  # a cache, not a field
        return cached

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

        See :mod:`dpbayes.release.counts.noise_aware` (uses released, public, guarantee, model);
        ``options`` (e.g. ``iterations``, ``chains``, ``rng``) go to the MCMC paths. The
        default (no options) is computed once and kept: the displays lead with it.
        """
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

    def privacy(self, d_in: int = 1) -> tuple[float, float]:
        """The privacy map: (eps, delta) between data sets ``d_in`` neighbours apart under
        the plan's relation (records or users). The stated guarantee at d_in = 1; beyond,
        group privacy (:func:`group_privacy`). :func:`plan` uses it to state the user-level
        guarantee of mechanisms without native user-level support."""
        if isinstance(d_in, bool) or not isinstance(d_in, int) or d_in < 1:
            raise ValueError(f"d_in must be an integer >= 1, got {d_in!r}")
        return group_privacy(self.guarantee.epsilon, self.guarantee.delta, d_in)


Planner = Callable[..., Plan]


@dataclass(frozen=True)
class Mechanism:
    """A registered release mechanism for one model type, and what its planner accepts.

    ``options``: the keyword options the planner takes beyond the privacy parameters (any
    other is refused once, by :func:`plan`, before the data are read). ``user_level``: the
    planner scales its add/remove sensitivity by k rows per user itself (it receives
    ``rows_per_user=k``); otherwise user-level data run at the group-privacy budget.
    ``record``: the typed record of the facts its releases publish (``Release.record``).
    ``precheck(model, *, epsilon, delta, neighbours, allow_non_private, **options)``:
    raises on a model,
    privacy parameters or options the planner would refuse (public facts), before
    :func:`plan` reads the data: a refusal must not wait for statistics whose computation
    could fail on one record.
    """

    name: str
    model_type: type
    planner: Planner
    record: type[PublicRecord]
    options: frozenset[str] = frozenset()
    user_level: bool = False
    precheck: Callable[..., object] | None = None


_REGISTRY: dict[tuple[str, type], Mechanism] = {}

#: The packages whose import registers the built-in mechanisms and their noise-aware
#: posteriors (one per family), imported on the registry's first use.
FAMILIES = (
    "dpbayes.release.counts",
    "dpbayes.release.expmech",
    "dpbayes.release.input",
    "dpbayes.release.bayes_net",
    "dpbayes.release.regression",
    "dpbayes.release.ssp",
)
_FAMILIES_LOADED = threading.Event()


def _load_families() -> None:
    if not _FAMILIES_LOADED.is_set():
        for module in FAMILIES:  # each registers its planners when imported
            importlib.import_module(module)
        _FAMILIES_LOADED.set()


def registered() -> dict[tuple[str, type], Planner]:
    """Every registered planner, ``{(mechanism, model type): planner}``, families loaded."""
    _load_families()
    return {key: m.planner for key, m in _REGISTRY.items()}


def register(
    mechanism: str,
    model_type: type,
    *,
    record: type[PublicRecord],
    options: tuple[str, ...] | frozenset[str] = (),
    user_level: bool = False,
    precheck: Callable[..., object] | None = None,
) -> Callable[[Planner], Planner]:
    """Register a planner for ``mechanism`` on models of ``model_type``.

    ``record`` is the typed record its releases publish (the family's ``record.py``);
    ``options`` names the keyword options the planner accepts (:func:`plan` refuses any
    other); ``user_level=True`` if it takes ``rows_per_user=k`` and scales its sensitivity
    (see :class:`Mechanism`); ``precheck(model, *, epsilon, delta, neighbours,
    allow_non_private, **options)`` refuses public facts the planner would refuse before
    the data are read.
    """

    def deco(fn: Planner) -> Planner:
        key = (mechanism, model_type)
        if key in _REGISTRY and _REGISTRY[key].planner is not fn:
            raise RuntimeError(f"mechanism {mechanism!r} already registered for {model_type}")
        opts = frozenset(options)
        _REGISTRY[key] = Mechanism(mechanism, model_type, fn, record, opts, user_level, precheck)
        return fn

    return deco


def mechanisms_for(model: Any) -> list[str]:
    """Names of the release mechanisms available for ``model``."""
    return sorted({m for (m, t) in registered() if isinstance(model, t)})


def _entry(model: Any, mechanism: Any) -> Mechanism:
    if not isinstance(mechanism, str):
        raise TypeError(f"mechanism must be a string, got {type(mechanism).__name__}")
    _load_families()
    for (name, model_type), entry in _REGISTRY.items():
        if name == mechanism and isinstance(model, model_type):
            return entry
    available = mechanisms_for(model)
    if not available:
        raise TypeError(f"model must be a dpbayes model, got {type(model).__name__}")
    raise ValueError(
        f"mechanism must be one of {available} for {type(model).__name__}, got {mechanism!r}"
    )


def _check_options(entry: Mechanism, options: dict[str, Any]) -> None:
    if "rows_per_user" in options:
        raise ValueError(
            "rows_per_user comes from the data: bound contributions with "
            "dpbayes.data.as_source(..., user_column=..., max_rows_per_user=k)"
        )
    unknown = sorted(set(options) - entry.options)
    if unknown:
        allowed = ", ".join(sorted(entry.options)) if entry.options else "none"
        raise ValueError(
            f"unknown option(s) for mechanism {entry.name!r}: {', '.join(unknown)} "
            f"(allowed: {allowed})"
        )


def as_rng(src: NoiseSource) -> Any:
    """The ``rng`` argument that makes a privacy mechanism draw from ``src``."""
    return src.generator() if src.simulation else None


def posterior_sampling_guarantee(
    *,
    per_draw: float,
    lipschitz: float,
    draws: int,
    neighbours: Neighbours,
    mechanism: str,
    details: dict[str, Any],
    simulation: bool,
) -> Guarantee:
    """eps-DP of ``draws`` posterior draws, each ``per_draw``-DP (Lemma 2), composed."""
    one = Guarantee(
        epsilon=per_draw,
        delta=0.0,
        neighbours=neighbours,
        mechanism=mechanism,
        sensitivity=lipschitz,
        sensitivity_norm="lipschitz",
        simulation=simulation,
        details=details,
    )
    return one if draws == 1 else compose_sequential([one] * draws, mechanism="posterior sampling")


# ------------------------------------------------------------- noise-aware posteriors

NoiseAware = Callable[[Release], Any]
_NOISE_AWARE: dict[tuple[str, type], NoiseAware] = {}


def register_noise_aware(mechanism: str, model_type: type) -> Callable[[NoiseAware], NoiseAware]:
    """Register ``fn(rel, **options) -> distribution``, the noise-aware posterior of a
    mechanism's releases of ``model_type`` (beside its planner, in the family's folder)."""

    def deco(fn: NoiseAware) -> NoiseAware:
        key = (mechanism, model_type)
        if key in _NOISE_AWARE and _NOISE_AWARE[key] is not fn:
            raise RuntimeError(f"noise-aware posterior for {key} already registered")
        _NOISE_AWARE[key] = fn
        return fn

    return deco


def noise_aware_mechanisms(model: Any) -> list[str]:
    """Mechanisms whose releases of ``model`` have a noise-aware posterior."""
    _load_families()
    return sorted({m for (m, t) in _NOISE_AWARE if isinstance(model, t)})


def noise_aware_posterior(rel: Release, **options: Any) -> Any:
    """The posterior of the model's parameter given the release (not the data).

    Uses only ``rel.released``, ``rel.record``, ``rel.guarantee`` and ``rel.model``.
    ``options`` go to the samplers that take them (``iterations``, ``chains``, ``rng`` of
    the MCMC paths: Bayesian networks with edges, linear regression); the exact paths take
    none. Each family registers its own (:func:`register_noise_aware`).
    """
    if not isinstance(rel, Release):
        raise TypeError(f"rel must be a dpbayes Release, got {type(rel).__name__}")
    _load_families()
    for (name, model_type), fn in _NOISE_AWARE.items():
        if name == rel.mechanism and isinstance(rel.model, model_type):
            params = list(inspect.signature(fn).parameters.values())[1:]  # after the release
            takes_any = any(p.kind is p.VAR_KEYWORD for p in params)
            unknown = sorted(set(options) - {p.name for p in params})
            if unknown and not takes_any:
                raise ValueError(
                    f"options {unknown} are not accepted by the noise-aware "
                    f"posterior of {rel.mechanism!r} on {type(rel.model).__name__}"
                )
            return fn(rel, **options)
    raise ValueError(
        f"no noise-aware posterior for mechanism {rel.mechanism!r} on "
        f"{type(rel.model).__name__}; available: {noise_aware_mechanisms(rel.model)}"
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
    (``register(..., user_level=True)``) scales its add/remove sensitivity by k. Any other planner
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
    allow_non_private = check_flag(allow_non_private, "allow_non_private")
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    if neighbours is not None:
        Neighbours.parse(neighbours)
    entry = _entry(model, mechanism)
    _check_options(entry, options)
    planner = entry.planner
    bound = getattr(data, "rows_per_user_bound", None)
    k = None if bound is None else int(bound)
    rel = Neighbours.for_unit(neighbours, k)
    native = entry.user_level
    if k is not None and native:
        options["rows_per_user"] = k
    group_k = None if k is None or native else k  # the group-privacy fallback's k
    per_eps, per_delta = (eps, dlt) if group_k is None else group_privacy_budget(eps, dlt, group_k)
    if entry.precheck is not None:
        entry.precheck(
            model,
            epsilon=per_eps,
            delta=per_delta,
            neighbours=rel,
            allow_non_private=allow_non_private,
            **options,
        )
    try:
        stats = model.statistics(data, column=column)
    except TypeError as exc:
        if k is None:
            raise
        raise ValueError(
            f"mechanism {mechanism!r} for {type(model).__name__} cannot read "
            f"contribution-bounded (user-level) data: {exc}"
        ) from None
    out = planner(
        model,
        stats,
        epsilon=per_eps,
        delta=per_delta,
        neighbours=rel,
        allow_non_private=allow_non_private,
        **options,
    )
    if group_k is not None:
        out = _group_privacy_plan(out, group_k, eps, dlt, per_eps, per_delta, rel)
    user_column = getattr(data, "user_column", None)
    if k is not None and isinstance(user_column, str):
        out = _name_the_user(out, user_column)
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


def group_privacy(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """(k e, k e^{(k-1) e} d): an (e, d)-DP mechanism between data sets k neighbours apart.

    Group privacy (Dwork & Roth 2014, Thm 2.2; the (e, d) form by induction over the chain
    of k neighbours); delta in log space (no overflow at huge e), capped below 1.
    """
    if delta <= 0:
        return k * epsilon, 0.0
    log_d = math.log(k) + (k - 1) * epsilon + math.log(delta)
    return k * epsilon, min(math.exp(min(log_d, 0.0)), 1.0 - 1e-15)


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


def _name_the_user(out: Plan, column: str) -> Plan:
    """``out`` with the column that identifies a user in its guarantees' details: a budget
    adds up user-level releases only for one such column (a person and a household are
    different units; :class:`~dpbayes.privacy.Accountant`)."""

    def named(g: Guarantee) -> Guarantee:
        return replace(g, details={**g.details, "user_column": column})

    def run(src: NoiseSource) -> Release:
        rel = out.run(src)
        return replace(rel, guarantee=named(rel.guarantee))

    return replace(out, guarantee=named(out.guarantee), run=run)


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
        else:  # the planner states more than it was given: the map of what it states
            ueps, udelta = group_privacy(g.epsilon, g.delta, k)
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
        record = replace(rel.record, **user, per_record_epsilon=rel.guarantee.epsilon)
        return replace(rel, guarantee=lift(rel.guarantee), public=record.to_public())

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
    allow_non_private = check_flag(allow_non_private, "allow_non_private")
    check_epsilon(epsilon)
    check_delta(delta)
    if neighbours is not None:
        Neighbours.parse(neighbours)
    _check_options(_entry(model, mechanism), options)
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
