"""Typed public records: the facts a release publishes beside its values, one class per family.

The forward half of a mechanism (its planner) writes a record; ``Release.public`` is its
serialised form (:meth:`PublicRecord.to_public`, the ``"public"`` object of a release
file, unchanged from version 1 of the format); the inverse half (the noise-aware
posterior) reads it back typed: ``rel.record`` (the class registered with the mechanism,
``register(..., record=...)``) or ``CountsRecord.of(rel)``.

A record is a frozen, keyword-only dataclass that subclasses :class:`PublicRecord`
directly (records are flat: the JSON order is the order the class declares its fields,
then the inherited ones). Every field is one of:

* a *fact* (a plain annotation): written always; a file without it is refused;
* :func:`optional`: written only when not None (user-level facts, a smooth-sensitivity
  beta); absent when read means None;
* :func:`added_later`: written always, but files written before it existed lack it;
  absent when read means the default.

Values are checked against the annotations (``int``, ``float``, ``str``, ``bool``, an
enum such as :class:`~dpbayes.privacy.Neighbours`, ``Literal[...]``, ``X | None``,
``tuple[...]``, ``Mapping[str, X]``) when a record is made, so a malformed release file
gives one ``ValueError`` naming the field; JSON lists become tuples, strings enum
members, and integral floats in integer fields integers (and back in :meth:`to_public`).
"""

from __future__ import annotations

import functools
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from enum import Enum
from typing import Any, Literal, TypeVar

__all__ = ["PublicRecord", "added_later", "at_least", "optional"]

R = TypeVar("R", bound="PublicRecord")
_OMIT = "dpbayes.record.omit_none"  # field metadata: not written when None


def optional(minimum: float | None = None) -> Any:
    """A fact written only when not None; absent when read means None."""
    return field(default=None, metadata={_OMIT: True, "minimum": minimum})


def added_later(default: Any = None, minimum: float | None = None) -> Any:
    """A fact written always that older release files lack: absent when read is ``default``."""
    return field(default=default, metadata={"minimum": minimum})


def at_least(minimum: float) -> Any:
    """A fact (written always, required) that must be >= ``minimum``."""
    return field(metadata={"minimum": minimum})


@dataclass(frozen=True, kw_only=True)
class PublicRecord:
    """The public facts of one release (base of every family's record).

    The facts below are shared: ``n`` and ``sensitivity`` are declared again, in their
    place, by the records that publish them; the user-level facts come last, written by
    the planners that scale to k rows per user and by group privacy.
    """

    n: int | None = optional(minimum=0)
    """Number of records when public (substitute neighbours); None when private."""
    sensitivity: float | None = optional(minimum=0)
    """The sensitivity the noise is calibrated to, when the release states one."""
    privacy_unit: Literal["user"] | None = optional()
    """``"user"`` for user-level data (add/remove one user); absent for one record."""
    rows_per_user: int | None = optional(minimum=1)
    """k, the bound on each user's rows (user-level data only)."""
    neighbouring_relation: str | None = optional()
    """The relation in words, e.g. ``"add/remove one user (<= 5 rows)"`` (user level)."""
    per_record_epsilon: float | None = optional(minimum=0)
    """The eps each record got under group privacy (mechanisms without native user level)."""

    def __post_init__(self) -> None:
        hints = _hints(type(self))
        for f in fields(self):
            value = _check(getattr(self, f.name), hints[f.name], f.name)
            lo = f.metadata.get("minimum")
            if lo is not None and _number(value) and not value >= lo:
                raise ValueError(f"public {f.name!r} must be >= {lo:g}, got {value!r}")
            object.__setattr__(self, f.name, value)

    def to_public(self) -> dict[str, Any]:
        """The JSON object ``Release.public``: the declared order, None optionals left out."""
        out: dict[str, Any] = {}
        for f in _ordered(type(self)):
            value = getattr(self, f.name)
            if value is None and f.metadata.get(_OMIT):
                continue
            out[f.name] = _plain(value)
        return out

    @classmethod
    def from_public(cls: type[R], d: Mapping[str, Any]) -> R:
        """The record of a ``public`` object; ``ValueError`` naming the first bad field."""
        if not isinstance(d, Mapping):
            raise ValueError(f"public must be an object, got {type(d).__name__}")
        known = {f.name: f for f in fields(cls)}
        unknown = [k for k in d if k not in known]
        if unknown:
            raise ValueError(
                f"public {unknown[0]!r} is not a fact of a {cls.__name__} "
                f"(known: {', '.join(known)})"
            )
        missing = [f.name for f in known.values() if _required(f) and f.name not in d]
        if missing:
            raise ValueError(f"public {missing[0]!r} is missing ({cls.__name__})")
        return cls(**d)

    @classmethod
    def read(cls, d: Mapping[str, Any]) -> PublicRecord:
        """The record of ``d`` for a release registered with this class (a family whose
        one registry entry writes two shapes overrides this to pick the shape)."""
        return cls.from_public(d)

    @classmethod
    def of(cls: type[R], rel: Any) -> R:
        """``rel.record``, checked to be a ``cls`` (for the inverse halves' typing)."""
        rec = rel.record
        if not isinstance(rec, cls):
            raise TypeError(
                f"the {rel.mechanism!r} release's record is a {type(rec).__name__}, "
                f"not a {cls.__name__}"
            )
        return rec


# ------------------------------------------------------------------------- helpers


def _required(f: Field[Any]) -> bool:
    return f.default is MISSING and f.default_factory is MISSING


_HINTS: dict[type, dict[str, Any]] = {}
_ORDER: dict[type, tuple[Field[Any], ...]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _ordered(cls: type) -> tuple[Field[Any], ...]:
    """The fields in the order the class body declares them, then the inherited ones."""
    if cls not in _ORDER:
        own = list(vars(cls).get("__annotations__", {}))
        by_name = {f.name: f for f in fields(cls)}
        _ORDER[cls] = tuple(by_name[k] for k in own if k in by_name) + tuple(
            f for f in by_name.values() if f.name not in own
        )
    return _ORDER[cls]


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, Enum):
        return value.value
    return value


def _describe(tp: Any) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is type(None):
        return "null"
    if tp in (int, float, str, bool):
        return {int: "an integer", float: "a finite number", str: "a string", bool: "a boolean"}[tp]
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if isinstance(tp, type) and issubclass(tp, Enum):
        return "one of " + ", ".join(repr(m.value) for m in tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_describe(args[0])}"
        return f"a list of {len(args)} ({', '.join(_describe(a) for a in args)})"
    if origin in (Mapping, dict):
        return f"an object of {_describe(args[1])}"
    return str(tp)


def _check(value: Any, tp: Any, name: str) -> Any:
    """``value`` as type ``tp`` (JSON lists as tuples, integral floats as integers), or
    ``ValueError`` naming the field and what it must be."""
    ok, out = _convert(value, tp)
    if not ok:
        raise ValueError(f"public {name!r} must be {_describe(tp)}, got {value!r}")
    return out


@functools.lru_cache(maxsize=512)
def _shape(tp: Any) -> tuple[Any, tuple[Any, ...]]:
    """(origin, args) of a field's type, looked up once per type (every record checks
    every field at construction)."""
    return typing.get_origin(tp), typing.get_args(tp)


def _convert(value: Any, tp: Any) -> tuple[bool, Any]:
    origin, args = _shape(tp)
    if tp is Any:
        return True, value
    if tp is type(None):
        return value is None, value
    if tp is bool:
        return isinstance(value, bool), value
    if tp is int:
        if isinstance(value, float) and value.is_integer():
            return True, int(value)
        return isinstance(value, int) and not isinstance(value, bool), value
    if tp is float:
        return _number(value) and math.isfinite(value), value
    if tp is str:
        return isinstance(value, str), value
    if origin is Literal:
        return value in args and isinstance(value, str | int), value
    if isinstance(tp, type) and issubclass(tp, Enum):
        try:
            return True, tp(value)
        except ValueError:
            return False, value
    if origin in (typing.Union, types.UnionType):
        for a in args:
            ok, out = _convert(value, a)
            if ok:
                return True, out
        return False, value
    if origin is tuple:
        if not isinstance(value, list | tuple):
            return False, value
        items = args[:1] * len(value) if len(args) == 2 and args[1] is Ellipsis else args
        if len(items) != len(value):
            return False, value
        conv = [_convert(v, a) for v, a in zip(value, items, strict=True)]
        return all(ok for ok, _ in conv), tuple(v for _, v in conv)
    if origin in (Mapping, dict):
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            return False, value
        conv_m = {k: _convert(v, args[1]) for k, v in value.items()}
        return all(ok for ok, _ in conv_m.values()), {k: v for k, (_, v) in conv_m.items()}
    raise TypeError(f"unsupported record field type {tp!r}")  # pragma: no cover
