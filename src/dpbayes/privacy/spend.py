"""One entry of a privacy ledger, and the exact sums of basic composition.

:class:`Spend` is what an :class:`~dpbayes.privacy.Accountant` records per charge (eps,
delta, mechanism, unit, source, the Gaussian noise ratio tight composition needs, and the
disjoint part it touched, if any). :class:`_Totals` keeps the basic (sequential plus
parallel over disjoint parts) sums exactly (``math.fsum`` of the partial sums), so 10 x
0.1 is 1.0 and a long ledger does not drift.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from dpbayes.privacy.composition import Event, Running
from dpbayes.privacy.validation import check_delta, check_epsilon

__all__ = ["Spend"]


@dataclass(frozen=True)
class Spend:
    """One recorded spend."""

    epsilon: float
    delta: float
    label: str = ""
    scope: tuple[str, ...] | None = None
    time: float = 0.0
    unit: str = ""  # the privacy unit / neighbouring relation of the guarantee
    source: str = ""  # the data source's name, when the caller gives it
    gaussian_ratio: float | None = None  # sigma / Delta_2 of a Gaussian mechanism
    unit_key: str = ""  # the privacy unit compared across spends (accountant._unit_key)

    @property
    def event(self) -> Event:
        return Event(self.epsilon, self.delta, self.gaussian_ratio)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["scope"] = list(self.scope) if self.scope is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Spend:
        scope = d.get("scope")
        return cls(
            epsilon=check_epsilon(d["epsilon"], "epsilon"),
            delta=check_delta(d["delta"], "delta"),
            label=str(d.get("label", "")),
            scope=tuple(str(s) for s in scope) if scope is not None else None,
            time=float(d.get("time", 0.0)),
            unit=str(d.get("unit", "")),
            source=str(d.get("source", "")),
            gaussian_ratio=_ratio(d.get("gaussian_ratio")),
            unit_key=str(d.get("unit_key", "")),
        )


def _ratio(x: Any) -> float | None:
    if x is None:
        return None
    if isinstance(x, bool) or not isinstance(x, int | float) or not (math.isfinite(x) and x > 0):
        raise ValueError(f"gaussian_ratio must be a positive finite number, got {x!r}")
    return float(x)


def _grow(partials: list[float], x: float) -> None:
    """Add x to the non-overlapping expansion ``partials`` exactly (Shewchuk 1997)."""
    i = 0
    for y in partials:
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo:
            partials[i] = lo
            i += 1
        x = hi
    partials[i:] = [x]


class _Totals:
    """Running totals of the spends: sum(unscoped) and, per part, sum(scoped spends reading
    it), each exact; ``composed`` is sum(unscoped) + max over parts (Thms 5.1-5.2)."""

    def __init__(self, spends: Iterable[Spend] = ()) -> None:
        self.glob: tuple[list[float], list[float]] = ([], [])
        self.parts: dict[str, tuple[list[float], list[float]]] = {}
        self.top = [0.0, 0.0]  # max over parts of the rounded part sums (spends are >= 0)
        for s in spends:
            self.add(s)

    def add(self, s: Spend) -> None:
        if s.scope is None:
            _grow(self.glob[0], s.epsilon)
            _grow(self.glob[1], s.delta)
            return
        for p in set(s.scope):
            sums = self.parts.setdefault(p, ([], []))
            for i, x in enumerate((s.epsilon, s.delta)):
                _grow(sums[i], x)
                self.top[i] = max(self.top[i], math.fsum(sums[i]))

    def composed(self, extra: Iterable[Spend] = ()) -> tuple[float, float]:
        """Budget consumed by the spends so far plus ``extra``, O(parts ``extra`` reads)."""
        glob = [list(self.glob[0]), list(self.glob[1])]
        touched: dict[str, list[list[float]]] = {}
        for s in extra:
            if s.scope is None:
                _grow(glob[0], s.epsilon)
                _grow(glob[1], s.delta)
                continue
            for p in set(s.scope):
                if p not in touched:
                    old = self.parts.get(p, ([], []))
                    touched[p] = [list(old[0]), list(old[1])]
                _grow(touched[p][0], s.epsilon)
                _grow(touched[p][1], s.delta)
        out = []
        for i in (0, 1):
            top = max([self.top[i], *(math.fsum(v[i]) for v in touched.values())])
            out.append(math.fsum(glob[i]) + top)
        return out[0], out[1]


class _TightTotals:
    """What a tight composition (``"pld"``, ``"rdp"``) has consumed, kept per part: a
    :class:`~dpbayes.privacy.composition.Running` composition of the unscoped spends and,
    per part, of the unscoped spends followed by that part's (parallel composition across
    disjoint parts; sequential, by ``composition``, within one). Parts that hold the same
    spends share one Running. A spend costs one composition step per part it reads, and
    ``composed`` is the maximum over parts (the unscoped composition if there are none):
    a recount from the ledger, in its order, gives the same value."""

    def __init__(self, composition: str, target_delta: float, spends: Iterable[Spend] = ()):
        self.glob = Running(composition, target_delta)
        self.parts: dict[str, Running] = {}
        self._order: list[Spend] = []  # every spend, to rebuild the parts on an unscoped one
        for s in spends:
            self.add(s)

    def _grown(self, base: dict[str, Running], spends: list[Spend]) -> dict[str, Running]:
        """``base`` with the scoped ``spends`` added (parts holding the same spends share)."""
        parts = dict(base)
        for s in spends:
            if s.scope is None:
                continue
            shared: dict[int, Running] = {}
            for p in set(s.scope):
                old = parts.get(p, self.glob)
                nxt = shared.get(id(old))
                if nxt is None:
                    nxt = shared[id(old)] = old.plus(s.event)
                parts[p] = nxt
        return parts

    def add(self, s: Spend) -> None:
        self._order.append(s)
        if s.scope is not None:
            self.parts = self._grown(self.parts, [s])
            return
        # An unscoped spend reads every part: recompose each part after it (rare).
        self.glob = self.glob.plus(s.event)
        self.parts = self._grown({}, self._order)

    def composed(self, extra: Iterable[Spend] = ()) -> tuple[float, float]:
        """Budget consumed by the spends so far plus ``extra``: O(parts) plus one
        composition step per part ``extra`` reads (all of them if ``extra`` has unscoped
        spends)."""
        extra = list(extra)
        if any(s.scope is None for s in extra):
            saved = (self.glob, self.parts, list(self._order))
            try:
                for s in extra:
                    self.add(s)
                return self.composed()
            finally:
                self.glob, self.parts, self._order = saved
        parts = self._grown(self.parts, extra)
        if not parts:
            return self.glob.value
        values = [r.value for r in {id(r): r for r in parts.values()}.values()]
        return max(v[0] for v in values), max(v[1] for v in values)
