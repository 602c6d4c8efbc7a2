"""How spends add up: basic, privacy-loss-distribution (PLD) and Rényi (RDP) composition.

``compose(events, composition, target_delta)`` returns an (eps, delta) that the sequential
composition of ``events`` satisfies. Every method returns a valid upper bound on the true
privacy loss, and the tight methods return the smaller of their bound and basic composition
(both are valid, so their minimum is).

* ``"basic"``: eps and delta add (paper 000, Thm 5.1). Exact sums (``math.fsum``).
* ``"pld"``: the optimal composition of the events' privacy-loss distributions, computed by
  Google's ``dp-accounting`` with its pessimistic discretisation (every rounding moves
  privacy loss up, so the eps it reports is never below the true one). Each event is
  represented by a dominating pair of its stated guarantee:

  - an (eps, delta)-DP event of any mechanism by the pair of the (eps, delta) "privacy
    parameters" (``from_privacy_parameters``; Kairouz, Oh & Viswanath 2015 show that
    every (eps, delta)-DP mechanism is dominated by it, so composing these pairs is the
    optimal composition of the guarantees themselves). For pure eps-DP mechanisms
    (Laplace, geometric, randomized response, the exponential mechanism, posterior
    sampling) this is within 0.3% of composing the Laplace PLD (500 x eps 0.01: 0.938
    vs 0.936 at delta 1e-6);
  - a Gaussian mechanism by its own PLD, from the noise-to-sensitivity ratio sigma/Delta_2
    the guarantee records (``details["noise"]``, see :func:`gaussian_noise_record`). The
    record is used only while the guarantee still states what it was made for (same eps,
    delta, sensitivity, relation): a guarantee restated later (group privacy, composed)
    falls back to its (eps, delta) pair. A multivariate isotropic Gaussian with L2 shift
    at most Delta_2 has the PLD of the one-dimensional shift ||v||_2 <= Delta_2 (rotation
    invariance), which the 1-d Gaussian PLD at Delta_2 dominates.
* ``"rdp"``: Rényi composition: Gaussian events by their RDP curve a / (2 z^2), pure
  eps-DP events as (eps^2/2)-zCDP (Bun & Steinke 2016, Prop. 1.4), one rho in all,
  converted by the conversion of ``dp-accounting``'s RDP accountant (:func:`zcdp_epsilon`)
  at ``target_delta`` minus the deltas of the remaining (eps, delta) events, which are
  added by basic composition (their eps too).

**Adaptive choices (filters).** An accountant checks each spend against the budget when it
is made, after the earlier outputs were seen, so a user may choose the next mechanism and
its (eps, delta) from them: the accountant is a *privacy filter* (Rogers, Roth, Ullman &
Vadhan 2016), and a composition bound proven for a sequence fixed in advance need not hold
for it. The "natural" filter that stops when the optimal (PLD) composition of the path's
guarantees would exceed the budget is not valid in general: it is free only for families
of mechanisms whose compositions are totally ordered (Gaussians are; pure eps-DP
guarantees of different eps are not), see "Privacy filters are captured by residues"
(arXiv 2602.15815, 2026) and "f-DP filters: validity and approximate solutions" (arXiv
2602.06756, 2026). So an accountant (:func:`filter_refusal`) takes, per composition, only
the spends its filter is proven for, and refuses the others before anything is drawn:

* ``"basic"``: every spend (Rogers et al. 2016, the basic composition filter);
* ``"pld"``: Gaussian spends only (their noise record, ``gaussian_ratio``). The composition
  of Gaussians with Delta/sigma = mu_i is Gaussian with mu^2 = sum mu_i^2, and the filter
  sum mu_i^2 <= mu^2 is valid under fully adaptive choices (Smith & Thakurta 2022, Gaussian
  DP); the PLD of the path is that Gaussian's (up to the pessimistic discretisation), so
  the check "PLD eps at the budget's delta <= budget eps" is that filter;
* ``"rdp"``: pure eps-DP spends, as (eps^2/2)-zCDP, and Gaussian spends, as
  (mu^2/2)-zCDP. Every Renyi curve is then rho * a, the state is the one number sum rho_i,
  and the filter sum rho_i <= rho* is valid for every order a at once (Feldman & Zrnic
  2021; Whitehouse, Ramdas, Rogers & Wu 2023); see :func:`_reported` for the conversion.

:func:`compose` itself (a sequence fixed in advance, e.g. the parts of one release) keeps
every event: for it the optimal composition is valid whatever the mechanisms.

For the tight methods the reported delta is ``target_delta`` (the budget's delta): the
accountant asks "what eps does the composition cost at the budget's delta". Basic
composition's (eps, delta) is reported instead while it is within 0.1% of that eps and
within the budget's delta, and either there is one event (no choice was adaptive) or every
event is pure eps-DP. For a filter the second case needs an argument (the smaller of two
valid filters is not a filter in general): write f(L) = (1 - e^(eps* - L))_+, so that the
transcript's delta at eps* is E_P[f(L)], L its privacy loss. On paths stopped while basic
composition fits, L <= sum eps_i <= eps* pointwise (pure events), so f(L) = 0 there. On the
other paths sum rho_i <= rho*, and with M = exp((a - 1) L - a (a - 1) sum rho_i), a
nonnegative supermartingale (E M <= 1 at any stopping time), f(L) <= K_a e^((a-1)(L-eps*))
(K_a = (1 - 1/a)^(a - 1) / a; Canonne, Kamath & Steinke 2020, the conversion the RDP
accountant uses) gives E_P[f(L); those paths] <= K_a e^((a-1)(a rho* - eps*)) <= delta* for
the a that certifies rho*. Summed: delta*. With approximate (delta > 0) events basic
composition's paths would add their own delta, so it is not reported there. Two more cases
of the code: (i) the conversion from rho is the Canonne-Kamath-Steinke one above, at
dp-accounting's orders (:func:`zcdp_epsilon`), without the RDP accountant's shortcut to
eps = 0 where delta*^2 > 1 - e^(-a rho) (a KL bound, Bretagnolle-Huber): that region's
union with the pure-basic one is not argued, and it decided checks at delta* >= 0.01.
(ii) Where the tight eps is not finite (a Gaussian PLD too large to build, sigma/Delta_2
below ~0.125, or tail truncation at a tiny delta*) basic composition is reported whatever
the events: in practice only "pld" (Gaussian events; RDP overflows only at eps ~ 1e150)
reaches it, and there every path it accepts is in the Gaussian-DP region, since a
Gaussian path's (sum eps_i, sum delta_i) is a valid bound for its composition G(mu),
mu^2 = sum mu_i^2 (eps_G(mu, delta*) <= sum eps_i).
"""

from __future__ import annotations

import functools
import math
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "COMPOSITIONS",
    "Event",
    "Running",
    "compose",
    "filter_refusal",
    "gaussian_noise_record",
]

COMPOSITIONS = ("basic", "pld", "rdp")
_GRID = 1e-4  # PLD value discretisation interval (pessimistic)
#: The largest PLD of one Gaussian event built (grid points; sigma/Delta_2 >= ~0.13, eps of
#: tens): beyond, the event's tight bound is not computed and basic composition is reported
_MAX_PLD_POINTS = 2_000_000
_MARGIN = 1e-6  # relative margin on the tight methods' eps (floating-point search)


@dataclass(frozen=True)
class Event:
    """One spend as composition sees it: its (eps, delta) and, for a Gaussian mechanism
    whose record is valid, sigma / Delta_2 (``gaussian_ratio``)."""

    epsilon: float
    delta: float
    gaussian_ratio: float | None = None


def gaussian_noise_record(
    sigma: float, sensitivity: float, epsilon: float, delta: float, neighbours: str
) -> dict[str, Any]:
    """What a Gaussian mechanism's guarantee records for tight accounting (in
    ``details["noise"]``): the family, sigma / Delta_2, and the claim it was made for."""
    return {
        "family": "gaussian",
        "ratio": float(sigma) / float(sensitivity),
        "epsilon": float(epsilon),
        "delta": float(delta),
        "sensitivity": float(sensitivity),
        "neighbours": str(neighbours),
    }


def event_of(
    epsilon: float, delta: float, sensitivity: float, neighbours: str, details: Mapping[str, Any]
) -> Event:
    """The composition event of a guarantee: its Gaussian ratio only while the record in
    ``details["noise"]`` states exactly this guarantee's claim (else its (eps, delta))."""
    rec = details.get("noise") if isinstance(details, Mapping) else None
    if (
        isinstance(rec, Mapping)
        and rec.get("family") == "gaussian"
        and rec.get("epsilon") == epsilon
        and rec.get("delta") == delta
        and rec.get("sensitivity") == sensitivity
        and rec.get("neighbours") == str(neighbours)
        and isinstance(rec.get("ratio"), float)
        and math.isfinite(rec["ratio"])
        and rec["ratio"] > 0
        and delta > 0
    ):
        return Event(epsilon, delta, rec["ratio"])
    return Event(epsilon, delta)


def filter_refusal(composition: str, event: Event) -> str | None:
    """Why an accountant composing by ``composition`` cannot take ``event`` (None: it can):
    the filter of each composition is proven for these events only (module doc)."""
    if composition == "pld" and event.gaussian_ratio is None:
        return (
            "composition 'pld' takes Gaussian-noise spends only (for them its budget check "
            "is the Gaussian-DP filter; for other mechanisms a PLD check is not a valid "
            "budget under adaptive choices); this spend is not Gaussian: use a ledger with "
            "composition 'rdp' or 'basic'"
        )
    if composition == "rdp" and event.gaussian_ratio is None and event.delta > 0:
        return (
            "composition 'rdp' takes pure eps-DP and Gaussian-noise spends only (as zCDP, "
            "a valid filter under adaptive choices); this spend is (eps, delta)-DP with "
            "delta > 0 and no Gaussian noise record: use a ledger with composition 'basic'"
        )
    return None


def _basic(events: list[Event]) -> tuple[float, float]:
    return math.fsum(e.epsilon for e in events), min(1.0, math.fsum(e.delta for e in events))


@functools.lru_cache(maxsize=256)
def _one_pld(ev: Event) -> Any:
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld

    if ev.gaussian_ratio is not None:
        r = ev.gaussian_ratio
        if 2 * (1 / (2 * r * r) + 8.5 / r) / _GRID > _MAX_PLD_POINTS:
            # its privacy loss spans about 1/(2 r^2) + 8.5/r either way: millions of grid
            # points (r = 0.025, eps ~ 1000: gigabytes); basic composition is reported
            raise OverflowError(f"a Gaussian PLD at sigma/Delta = {r:g} is too large")
        return pld.from_gaussian_mechanism(
            ev.gaussian_ratio, sensitivity=1.0, value_discretization_interval=_GRID
        )
    return pld.from_privacy_parameters(
        common.DifferentialPrivacyParameters(ev.epsilon, ev.delta),
        value_discretization_interval=_GRID,
    )


_Key = tuple[tuple[Event, int], ...]


def _pld_of(key: _Key) -> Any:
    """The composed PLD of the multiset ``key`` (``self_compose`` per distinct event)."""
    out = None
    for ev, count in key:
        one = _one_pld(ev)
        many = one.self_compose(count) if count > 1 else one
        out = many if out is None else out.compose(many)
    return out


def _pld_epsilon(key: _Key, target_delta: float) -> float:
    try:
        return float(_pld_of(key).get_epsilon_for_delta(target_delta))
    except (OverflowError, MemoryError):  # eps beyond ~709 (exp(eps)), a huge Gaussian PLD
        return math.inf  # no tight bound: basic composition is reported (_reported)


#: A running PLD that could not be built (an event the library cannot represent): the
#: tight eps is then infinite and basic composition is reported.
_NO_PLD = object()


def _rdp_epsilon(groups: Counter[Event], target_delta: float) -> float:
    """RDP composition at ``target_delta``: the pure and Gaussian events as one zCDP
    rho (their Renyi curves are rho_i * a), the other (eps, delta) events by basic
    composition (their deltas taken from the target first)."""
    rho: list[float] = []
    rest_eps: list[float] = []
    rest_delta: list[float] = []
    for ev, count in groups.items():
        if ev.gaussian_ratio is not None or ev.delta == 0:
            # RDP a / (2 z^2) (Gaussian), eps^2 / 2-zCDP (pure: Bun & Steinke 2016, Prop.
            # 1.4); a ratio below ~1e-162 or an eps above ~1e154 has no finite rho
            rho.append(_rho_of(ev) * count)
        else:
            rest_eps.append(ev.epsilon * count)
            rest_delta.append(ev.delta * count)
    left = target_delta - math.fsum(rest_delta)
    if left <= 0:
        return math.inf
    return zcdp_epsilon(math.fsum(rho), left) + math.fsum(rest_eps)


def _rho_of(ev: Event) -> float:
    try:
        if ev.gaussian_ratio is not None:
            return 1.0 / (2.0 * ev.gaussian_ratio**2)
        return ev.epsilon**2 / 2.0
    except (OverflowError, ZeroDivisionError):
        return math.inf


def zcdp_epsilon(rho: float, delta: float) -> float:
    """eps at ``delta`` of a Renyi curve rho * a: min over dp-accounting's orders a > 1.01
    of a rho + log(1 - 1/a) - log(delta a) / (a - 1) (Canonne, Kamath & Steinke 2020,
    Prop. 12: the conversion of dp-accounting's RdpAccountant), and never below 0.

    The accountant's shortcut to eps = 0 where delta^2 > 1 - e^(-D_a) (a KL bound) is
    left out: it is valid for a sequence fixed in advance, but its union with the filter
    regions of the module doc is not argued (it decided checks at budgets with delta of
    0.01 and above). Elsewhere the value is the accountant's (tested)."""
    from dp_accounting.rdp.rdp_privacy_accountant import DEFAULT_RDP_ORDERS

    if not math.isfinite(rho):
        return math.inf
    best = math.inf
    log_delta = math.log(delta)
    for a in DEFAULT_RDP_ORDERS:
        if a > 1.01:
            best = min(best, a * rho + math.log1p(-1 / a) - (log_delta + math.log(a)) / (a - 1))
    return max(0.0, best)


@functools.lru_cache(maxsize=4096)
def _tight_epsilon(
    key: tuple[tuple[Event, int], ...], composition: str, target_delta: float
) -> float:
    """The tight method's eps for the multiset ``key`` of events (cached: an accountant
    asks again for the same spends, and parallel parts often hold the same ones)."""
    if composition == "pld":
        eps = _pld_epsilon(key, target_delta)
    elif target_delta <= 0:
        eps = math.inf  # RDP converts only at delta > 0
    else:
        eps = _rdp_epsilon(Counter(dict(key)), target_delta)
    return _with_margin(eps)


def multiset_key(events: Iterable[Event]) -> _Key:
    """The events as a multiset in a canonical order (what the caches are keyed by)."""
    return tuple(sorted(Counter(events).items(), key=repr))


def compose(
    events: Iterable[Event],
    composition: str = "basic",
    target_delta: float = 0.0,
    *,
    adaptive: bool = False,
) -> tuple[float, float]:
    """(eps, delta) of the sequential composition of ``events`` (see the module doc): of
    a sequence fixed in advance, or with ``adaptive=True`` what an accountant (a privacy
    filter) reports for them (:class:`Running` gives the same)."""
    evs = list(events)
    basic = _basic(evs)
    if composition == "basic" or not evs:
        return basic
    if composition not in COMPOSITIONS:
        raise ValueError(f"composition must be one of {list(COMPOSITIONS)}, got {composition!r}")
    if adaptive and any(filter_refusal(composition, ev) for ev in evs):
        return basic
    eps = _tight_epsilon(multiset_key(evs), composition, target_delta)
    return _reported(basic, eps, target_delta, not adaptive or _basic_allowed(evs))


def _basic_allowed(evs: list[Event]) -> bool:
    """Whether a filter may report basic composition for ``evs`` (module doc): one event
    (no choice was adaptive), or pure events only (basic composition bounds the loss)."""
    return len(evs) == 1 or all(ev.delta == 0 for ev in evs)


def _with_margin(eps: float) -> float:
    # The library's eps search stops within a floating-point tolerance of the root (for
    # pure events it is exact to about 2e-10 relative, from either side): a margin keeps
    # the reported eps above the true one.
    return eps * (1 + _MARGIN) + _MARGIN * 1e-3


def _reported(
    basic: tuple[float, float], eps: float, target_delta: float, basic_allowed: bool = True
) -> tuple[float, float]:
    """What a tight method reports: its eps at ``target_delta``, or basic composition's
    (eps, delta) while that is as good (within 0.1%), leaves the budget's delta unspent and
    is ``basic_allowed`` (always for a fixed sequence; for a filter, see the module doc)."""
    if basic_allowed and basic[1] <= target_delta and basic[0] <= eps * (1 + 1e-3):
        return basic
    if not math.isfinite(eps):
        return basic
    return eps, target_delta


class Running:
    """A composition kept open: the multiset of events composed so far, and for
    ``"pld"`` their composed PLD, so that one more event costs one convolution (the
    accountant keeps one per disjoint part, and a part grows by one spend at a time).

    ``plus(event)`` returns a new Running (this one is unchanged; the last few are
    cached, as "would it fit" and "charge" ask for the same one). ``value`` is what an
    accountant (a filter) reports for the multiset: the tight eps as :func:`compose`
    computes it (the same events composed one by one instead of by groups, on the same
    grid with the same pessimistic rounding; a recount from a ledger adds them in the same
    order and gets the same value), with basic composition only where the filter argument
    of the module doc allows it, and basic composition throughout for a multiset holding an
    event the composition cannot filter (:func:`filter_refusal`; only old ledgers hold one).
    """

    def __init__(
        self, composition: str, target_delta: float, key: _Key = (), pld: Any = None
    ) -> None:
        if composition not in COMPOSITIONS:
            raise ValueError(
                f"composition must be one of {list(COMPOSITIONS)}, got {composition!r}"
            )
        self.composition = composition
        self.target_delta = target_delta
        self.key = key
        self._pld = pld
        self._next: dict[Event, Running] = {}
        self._lock = threading.Lock()
        self._value: tuple[float, float] | None = None

    def plus(self, event: Event) -> Running:
        with self._lock:
            hit = self._next.get(event)
        if hit is not None:
            return hit
        counts = Counter(dict(self.key))
        counts[event] += 1
        key = tuple(sorted(counts.items(), key=repr))
        pld = None
        if self.composition == "pld":
            try:
                one = _one_pld(event)
            except (OverflowError, MemoryError):
                one = _NO_PLD
            if one is _NO_PLD or self._pld is _NO_PLD:
                pld = _NO_PLD
            else:
                pld = one if self._pld is None else self._pld.compose(one)
        out = Running(self.composition, self.target_delta, key, pld)
        with self._lock:
            if len(self._next) >= 4:
                self._next.pop(next(iter(self._next)))
            self._next[event] = out
        return out

    @property
    def value(self) -> tuple[float, float]:
        if self._value is None:
            self._value = self._compute()
        return self._value

    def _compute(self) -> tuple[float, float]:
        evs = [ev for ev, count in self.key for _ in range(count)]
        basic = _basic(evs)
        if self.composition == "basic" or not evs:
            return basic
        if any(filter_refusal(self.composition, ev) for ev in evs):
            # a ledger written before the filters were restricted (module doc) holding a
            # spend its composition cannot filter: basic composition, valid for any spends
            return basic
        if self.composition == "pld" and self._pld is _NO_PLD:
            eps = math.inf
        elif self.composition == "pld":
            eps = _with_margin(float(self._pld.get_epsilon_for_delta(self.target_delta)))
        else:
            eps = _tight_epsilon(self.key, self.composition, self.target_delta)
        return _reported(basic, eps, self.target_delta, _basic_allowed(evs))
