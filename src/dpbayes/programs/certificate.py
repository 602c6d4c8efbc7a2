"""What the checker produces: derivation steps, relational bounds, certificates, rejections.

Data types of :mod:`dpbayes.programs.checker` (paper 002 §5): a :class:`Bound` is the
relational refinement of one sub-term (a sensitivity for values and symbolic
distributions, a divergence index for actual ones); a :class:`Certificate` is the
(eps, delta) the checker proved and its derivation; :class:`NotPrivate` is a rejection
naming the first offending :class:`Step`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from dpbayes.privacy import Guarantee, Neighbours

__all__ = ["Bound", "Certificate", "NotPrivate", "Step"]

INF = math.inf
_FDIV = ("hellinger", "tv", "kl")
_CAP = {"hellinger": 1.0, "tv": 1.0, "kl": INF}


@dataclass
class Step:
    """One rule application: ``[index] rule: term -> bound``; ``reason`` if it failed."""

    index: int
    rule: str
    term: str
    bound: str = ""
    note: str = ""
    reason: str = ""

    def line(self) -> str:
        s = f"[{self.index}] {self.rule}: {self.term}"
        if self.bound:
            s += f"  =>  {self.bound}"
        if self.note:
            s += f"   ({self.note})"
        return s


@dataclass(frozen=True)
class Bound:
    """The relational bound of one sub-term (missing metrics are unbounded).

    ``metrics``: sensitivities ``L1``/``L2`` of a value or of a distribution's parameter
    vector, the f-divergences ``hellinger``/``tv``/``kl`` between the two runs'
    distributions, and for an actual distribution its ``eps``/``delta`` index.
    ``coords``: the largest change of each coordinate (flattened, C order) of the value,
    or of the parameter vector of a (symbolic or actual) distribution. ``shape``: the
    shape of the value, or of one draw of an actual distribution (None: not known when
    checking). ``family``, ``param_shape``: the family and the shape of the parameter
    vector (what ``get_params`` returns) of a distribution, when known. ``levels``: every
    coordinate of the value is an integer in 0..levels-1 in every run (2: 0/1 values),
    when the checker can prove it. NaN anywhere is read as infinity (unbounded).

    ``equal`` (public) is structural only: the rules set it when the sub-term does not
    depend on the private input. A bound that computes to 0 is *not* equal: a computed 0
    may be an underflow, and a run's values may still differ (in the sign of a zero, say).
    """

    kind: str
    equal: bool = False
    metrics: Mapping[str, float] = field(default_factory=dict)
    coords: tuple[float, ...] | None = None
    blame: Step | None = None
    db: Mapping[str, Any] | None = None
    shape: tuple[int, ...] | None = None
    family: str | None = None
    param_shape: tuple[int, ...] | None = None
    levels: int | None = None

    def __post_init__(self) -> None:
        metrics = {k: _unbounded_if_nan(v) for k, v in self.metrics.items()}
        coords = None if self.coords is None else tuple(_unbounded_if_nan(c) for c in self.coords)
        object.__setattr__(self, "metrics", MappingProxyType(metrics))
        object.__setattr__(self, "coords", coords)
        object.__setattr__(self, "equal", bool(self.equal))

    def get(self, name: str) -> float:
        if self.equal:
            return 0.0
        return self.metrics.get(name, INF)

    @property
    def eps(self) -> float:
        return self.get("eps")

    @property
    def delta(self) -> float:
        return self.get("delta")

    def text(self) -> str:
        if self.kind == "db":
            assert self.db is not None
            b = self.db["bound"]
            return (
                f"private list of {self.db['n']} {self.db['record']} records; neighbours "
                f"differ in one record{'' if self.db['record'] != 'real' else f' by <= {b}'}"
            )
        if self.equal:
            return "equal in both runs (public)"
        names = ("eps", "delta", *_FDIV) if self.kind == "monad" else ("L1", "L2", *_FDIV)
        parts = [f"{k} <= {_fmt(self.metrics[k])}" for k in names if k in self.metrics]
        if self.kind == "monad" and math.isinf(self.metrics.get("eps", INF)):
            parts = ["no eps bound"] + [p for p in parts if p.split()[0] in _FDIV]
        if self.coords is not None and self.kind != "monad":
            parts.append("coords <= (" + ", ".join(_fmt(c) for c in self.coords) + ")")
        label = "divergence index" if self.kind == "monad" else "sensitivity"
        return f"{label}: " + (", ".join(parts) if parts else "unbounded")


def _unbounded_if_nan(x: float) -> float:
    """NaN (e.g. 0 * inf, inf - inf) is no bound at all: read it as infinity."""
    x = float(x)
    return INF if math.isnan(x) else abs(x)


def _fmt(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.6g}"


class NotPrivate(ValueError):
    """The checker rejects the program; ``step`` is the first offending step."""

    def __init__(self, message: str, step: Step | None, derivation: list[Step]) -> None:
        super().__init__(message)
        self.step = step
        self.derivation = derivation


@dataclass(frozen=True)
class Certificate:
    """What the checker proved: (epsilon, delta)-DP under ``neighbours``, and how."""

    program: str
    epsilon: float
    delta: float
    neighbours: str
    derivation: tuple[Step, ...]

    def describe(self) -> str:
        head = (
            f"certificate for {self.program}: "
            + (
                f"({self.epsilon:.6g}, {self.delta:.3g})-DP"
                if self.delta
                else f"{self.epsilon:.6g}-DP"
            )
            + f" w.r.t. {self.neighbours}"
        )
        return "\n".join([head, *(s.line() for s in self.derivation)])

    def guarantee(self, *, simulation: bool = False) -> Guarantee:
        """The certificate as a :class:`~dpbayes.privacy.Guarantee`.

        A certificate with eps = 0 (e.g. the output does not depend on the private data) is
        stated with ``mechanism="none"``, the form a guarantee of eps = 0 takes.
        """
        details = {"program": self.program, "derivation": [s.line() for s in self.derivation]}
        free = self.epsilon == 0
        return Guarantee(
            epsilon=self.epsilon,
            delta=self.delta,
            neighbours=Neighbours.SUBSTITUTE,
            mechanism="none" if free else f"program {self.program} (checked)",
            sensitivity=0.0,
            sensitivity_norm="program",
            private=True,
            simulation=simulation,
            details=details,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "program": self.program,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "neighbours": self.neighbours,
            "derivation": [s.line() for s in self.derivation],
        }
