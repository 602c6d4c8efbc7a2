"""One private posterior per group of a public grouping column (parallel composition).

``release(model, df, column=..., by="year", groups=[2019, 2020], mechanism=..., epsilon=...)``
releases each listed group's posterior at (eps, delta) and states (eps, delta) for the
whole, by parallel composition over disjoint parts (McSherry 2009, Thm 4):

* **add/remove one record**: the added (removed) record lies in exactly one group (or in
  none, if its value of ``by`` is not listed, and then no release changes), so exactly
  one group's data change, by add/remove one record; that group's release is
  (eps, delta)-DP under add/remove and the others' are unchanged. The joint output is
  (eps, delta)-DP.
* **substitute one record within its group**: the grouping column is public, so
  neighbours keep each record's group: a substituted record changes one group's data by
  substitution, the others not; each group's release is (eps, delta)-DP under
  substitution. (Each group's size is then public, as substitution within it publishes
  its n.) This is a narrower relation than substituting any record (a record moved to
  another group changes two groups' public n), and the guarantee says so
  (``details["neighbouring_relation"]``); a budget does not add it up with releases
  under plain substitution (:class:`~dpbayes.privacy.Accountant`). Use add/remove for a
  guarantee without that condition.
* **user level** (data bounded to k rows per user) is refused: one user's rows may lie
  in several groups, so the parts are not disjoint in users.

The groups are public: they are given (``groups=``), never read from the data, which would
reveal which values occur. Rows whose value of ``by`` is not listed are left out of
every release. A listed group with no rows is released from zero statistics like any
other group (under add/remove it is a neighbour of the same group with one row, and a
refusal would tell whether anyone is in it); under substitution its size, 0, is public
and a mechanism that needs n >= 1 refuses it in the plan. The whole is planned before any
noise is drawn and charged once.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dpbayes.privacy import Accountant, Guarantee, Neighbours
from dpbayes.privacy.noise import noise_source
from dpbayes.release.base import Release, plan, source_name

__all__ = ["GroupedRelease", "release_grouped"]


@dataclass(frozen=True, repr=False)
class GroupedRelease(Mapping[Any, Release]):
    """The releases of every listed group (``grouped[group]``) and the whole's guarantee."""

    by: str
    releases: dict[Any, Release]
    guarantee: Guarantee

    def __getitem__(self, group: Any) -> Release:
        return self.releases[group]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.releases)

    def __len__(self) -> int:
        return len(self.releases)

    def summary(self, level: float = 0.95) -> Any:
        """One row per group: the noise-aware posterior's mean and central interval, the
        naive posterior's mean (a pandas DataFrame)."""
        import pandas as pd

        rows = []
        for group, rel in self.releases.items():
            post = rel.noise_aware_posterior()
            lo, hi = post.interval(level)
            rows.append(
                {
                    self.by: group,
                    "mean": float(post.mean()),
                    "lower": float(lo),
                    "upper": float(hi),
                    "naive mean": float(rel.posterior.mean()),
                }
            )
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "dpbayes-grouped-release",
            "by": self.by,
            "guarantee": self.guarantee.to_dict(),
            "groups": [{"group": g, "release": r.to_dict()} for g, r in self.releases.items()],
        }

    def __repr__(self) -> str:
        head = f"GroupedRelease by {self.by!r}, {len(self)} groups, {self.guarantee.describe()}"
        return "\n".join([head, *(f"  {g!r}: {r.mechanism}" for g, r in self.releases.items())])


def _groups(data: Any, by: Any, groups: Any) -> list[Any]:
    pd = __import__("pandas")
    if not isinstance(data, pd.DataFrame):
        raise TypeError(f"data must be a pandas DataFrame to group by, got {type(data).__name__}")
    if not isinstance(by, str) or by not in data.columns:
        raise ValueError(f"by must name a column of the data, got {by!r}")
    if groups is None:
        raise ValueError(
            f"groups must list the public values of {by!r} to release (reading them from "
            "the data would reveal which values occur)"
        )
    out = list(groups)
    if not out or len(set(out)) != len(out):
        raise ValueError(f"groups must list distinct values, got {out!r}")
    return out


def _as_column_value(dtype: Any, group: Any, by: str) -> Any:
    """``group`` as the value of the column's dtype it equals exactly (a public
    function of the listed value and the column's schema, never of the rows).

    pandas' ``==`` converts a listed value to the column's type before comparing --
    ``"2020-01-01"`` and ``"2020-01-01 00:00"`` both equal midnight in a datetime column,
    the ints 2**53 and 2**53 + 1 both equal 2.0**53 in a float column -- so values that
    are distinct in Python could select the same row. Converting first, exactly (a value
    that no element of the dtype equals is refused), makes "distinct" mean distinct in the
    column, where equality is exact: a row then equals at most one listed value.
    """
    import math
    import numbers

    import numpy as np
    import pandas as pd

    bad = ValueError(
        f"group {group!r} is not a value of column {by!r} (dtype {dtype}): list each group "
        "as a value of the column's type"
    )
    if isinstance(group, float | np.floating) and np.isnan(group):
        raise bad  # NaN is missing and equals nothing
    kind = getattr(dtype, "kind", None)
    if isinstance(dtype, pd.DatetimeTZDtype) or kind == "M":
        try:
            stamp = pd.Timestamp(group)
        except (TypeError, ValueError):
            raise bad from None
        tz = getattr(dtype, "tz", None)
        if stamp is pd.NaT or (stamp.tz is None) != (tz is None):
            raise bad  # a naive time against an aware column (or back) has no one instant
        return stamp if tz is None else stamp.tz_convert(tz)
    if kind == "m":
        try:
            delta = pd.Timedelta(group)
        except (TypeError, ValueError):
            raise bad from None
        if delta is pd.NaT:
            raise bad
        return delta
    if kind in ("b", "i", "u", "f"):
        if isinstance(group, str | bytes) or not isinstance(group, numbers.Real):
            raise bad
        if kind == "b":
            if group not in (0, 1):
                raise bad
            return bool(group)
        numpy_dtype = getattr(dtype, "numpy_dtype", dtype)  # of a nullable pandas dtype
        if kind in ("i", "u"):
            info = np.iinfo(numpy_dtype)
            if not (math.isfinite(group) and group == math.trunc(group)):
                raise bad
            whole: int = math.trunc(group)  # type: ignore[assignment]
            if not info.min <= whole <= info.max:
                raise bad
            return whole
        try:
            as_float = float(np.array(group, dtype=numpy_dtype)[()])
        except (OverflowError, TypeError, ValueError):
            raise bad from None
        if as_float != group:  # Python compares a float with an int or Fraction exactly
            raise bad  # rounds to a float that another listed value may also round to
        return as_float
    return group  # object, string, category: compared as the Python values they are


def _equals(value: Any, group: Any) -> bool:
    """Whether one row's ``value`` (a Python object) equals ``group``: ``==`` giving a
    boolean True, never an error (a value it cannot be compared with is in no group); a
    missing value (None, NaN, pandas NA/NaT) equals nothing, as in pandas' ``==``."""
    import numpy as np

    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return False
    try:
        same = value == group
    except Exception:
        return False
    return same is True or (isinstance(same, np.bool_) and bool(same))


# Types whose ``==`` with each other gives a bool and never fails: on them pandas' ``==``
# is :func:`_equals` value by value (and runs in compiled code).
_PLAIN_TYPES = frozenset({str, int, float, bool, type(None)})


def _equal_rows(column: Any, group: Any) -> Any:
    """The rows of ``column`` equal to ``group`` (a boolean array), each by its own value.

    A column of Python objects is compared value by value (:func:`_equals`): pandas'
    ``==`` raised on a value that does not compare to a boolean (a numpy array), so one
    record in no listed group refused the release of every group (its neighbour without
    it was released), where such a row is to be left out like any unlisted value. When
    the group and every value are of plain types pandas' ``==`` gives the same answers.
    """
    import numpy as np

    if column.dtype != object:
        return (column == group).to_numpy(dtype=bool, na_value=False)
    values = column.tolist()
    if type(group) in _PLAIN_TYPES and all(type(v) in _PLAIN_TYPES for v in values):
        return (column == group).to_numpy(dtype=bool, na_value=False)
    return np.fromiter((_equals(v, group) for v in values), dtype=bool, count=len(values))


def _group_masks(data: Any, by: str, groups: list[Any]) -> dict[Any, Any]:
    """Each listed group's rows (boolean masks), disjoint by construction.

    The listed values are converted to the column's dtype (:func:`_as_column_value`)
    and refused if two are then equal -- a decision on the list and the schema only.
    Each row is then compared with the converted values by exact equality in the column's
    type, which is an equivalence there, so a row equal to two listed values would make
    them equal, and they are not. As a second line for columns of Python objects, whose
    ``==`` need not be an equivalence, a row is given to the first listed group it
    equals and to no later one: a row lies in at most one group, whatever its value.
    """
    import numpy as np

    column = data[by]
    values = [_as_column_value(column.dtype, g, by) for g in groups]
    for i, a in enumerate(values):
        for b in values[i + 1 :]:
            try:
                same = bool(a == b)
            except (TypeError, ValueError):
                same = False
            if same:
                raise ValueError(
                    f"groups must list distinct values of column {by!r}, got {groups!r} "
                    f"({a!r} twice, as a value of dtype {column.dtype})"
                )
    taken = np.zeros(len(column), dtype=bool)
    masks: dict[Any, Any] = {}
    for g, v in zip(groups, values, strict=True):
        mask = _equal_rows(column, v) & ~taken
        taken |= mask
        masks[g] = mask
    return masks


def release_grouped(
    model: Any,
    data: Any,
    *,
    by: str,
    groups: Any,
    mechanism: str,
    epsilon: float,
    delta: float = 0.0,
    accountant: Accountant | None = None,
    rng: Any = None,
    neighbours: Neighbours | str | None = None,
    column: str | None = None,
    allow_non_private: bool = False,
    **options: Any,
) -> GroupedRelease:
    """The body of ``dpbayes.release(..., by=..., groups=...)`` (module docstring)."""
    values = _groups(data, by, groups)
    if getattr(data, "rows_per_user_bound", None) is not None:
        raise ValueError("by= is for record-level data: one user's rows may lie in several groups")
    if allow_non_private and accountant is not None:
        raise ValueError(
            "allow_non_private releases are experiments and cannot be charged to an accountant"
        )
    masks = _group_masks(data, by, values)
    src = noise_source(rng)
    plans = {
        g: plan(
            model,
            data[masks[g]],
            mechanism=mechanism,
            epsilon=epsilon,
            delta=delta,
            neighbours=neighbours,
            column=column,
            allow_non_private=allow_non_private,
            **options,
        )
        for g in values
    }
    parts = list(plans.values())
    first = parts[0].guarantee
    whole = Guarantee(
        epsilon=max(p.guarantee.epsilon for p in parts),
        delta=max(p.guarantee.delta for p in parts),
        neighbours=first.neighbours,
        mechanism=f"{first.mechanism} per group of {by!r} ({len(parts)} groups, parallel)",
        sensitivity=max(p.guarantee.sensitivity for p in parts),
        sensitivity_norm=first.sensitivity_norm,
        private=all(p.guarantee.private for p in parts),
        simulation=src.simulation,
        details={
            "parallel_composition": by,
            "groups": len(parts),
            "public_groups": True,
            # under substitution the parallel argument needs each record's group to be
            # kept (a record moved between groups changes two groups' public n): stated
            **(
                {"neighbouring_relation": f"substitute one record within its {by!r} group"}
                if first.neighbours is Neighbours.SUBSTITUTE
                else {}
            ),
        },
    )

    def run() -> dict[Any, Release]:
        return {g: p.run(src) for g, p in plans.items()}

    if accountant is None:
        releases = run()
    else:
        with accountant.charge(
            whole, label=f"{mechanism} {type(model).__name__} by {by}", source=source_name(data)
        ):
            releases = run()
    return GroupedRelease(by=by, releases=releases, guarantee=whole)
