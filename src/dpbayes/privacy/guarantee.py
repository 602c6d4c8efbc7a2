"""What a private result promises: the :class:`Guarantee` carried by every release."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any

from dpbayes import display
from dpbayes.display import num
from dpbayes.privacy.validation import check_delta, check_finite, check_positive

__all__ = ["Guarantee", "Neighbours", "PrivacyLeakWarning", "compose_sequential", "user_level"]


class PrivacyLeakWarning(RuntimeWarning):
    """A result reveals something its (eps, delta) does not cover (e.g. labels read from
    the data); the guarantee's ``details["not_protected"]`` says what."""


class Neighbours(StrEnum):
    """The neighbouring relation a guarantee is stated for.

    ``SUBSTITUTE``: data sets of the same (public) size n that differ in one record
    (bounded DP). ``ADD_REMOVE``: one data set is the other plus one record (unbounded
    DP; n itself is private). A substitution is an addition and a removal, so an
    eps-DP guarantee under add/remove gives 2 eps under substitute.

    At user level (data bounded to k rows per user) the unit is one user and the only
    relation is ``ADD_REMOVE``: one data set is the other plus one user's <= k rows, and
    the number of kept rows n is private. Substituting a user is not offered: a user
    with 5 rows replaced by one with 3 changes n, and the releases that need a public n
    publish it, which would tell the two data sets apart with certainty.
    :meth:`for_unit` resolves the relation of a release.
    """

    SUBSTITUTE = "substitute"
    ADD_REMOVE = "add-remove"

    @classmethod
    def parse(cls, value: Any, name: str = "neighbours") -> Neighbours:
        if isinstance(value, Neighbours):
            return value
        if isinstance(value, str):
            key = value.strip().lower().replace("_", "-").replace("/", "-")
            for member in cls:
                if member.value == key:
                    return member
        allowed = ", ".join(repr(m.value) for m in cls)
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")

    @classmethod
    def for_unit(cls, value: Any, rows_per_user: int | None) -> Neighbours:
        """The relation of a release on record-level (``rows_per_user=None``) or user-level
        data. ``value=None``: substitute one record, or add/remove one user. An explicit
        ``"substitute"`` on user-level data is refused (one-line ``ValueError``)."""
        if rows_per_user is None:
            return cls.SUBSTITUTE if value is None else cls.parse(value)
        rel = cls.ADD_REMOVE if value is None else cls.parse(value)
        if rel is cls.SUBSTITUTE:
            raise ValueError(
                "neighbours='substitute' is not available on user-level data: replacing a "
                "user can change the number of kept rows n, which substitute releases "
                "publish; user-level releases are add/remove one user (<= "
                f"{int(rows_per_user)} rows) with n private (the default)"
            )
        return rel

    def public_n(self, n: int) -> int | None:
        """The number of records as a release may publish it: n under substitute (public by
        definition of the relation), None under add/remove (n is private)."""
        return int(n) if self is Neighbours.SUBSTITUTE else None

    @property
    def lipschitz_factor(self) -> float:
        """How far one neighbour moves an L-Lipschitz log-likelihood, in units of L: a
        substitution is a removal plus an addition (2), add/remove is one record (1)."""
        return 2.0 if self is Neighbours.SUBSTITUTE else 1.0


@dataclass(frozen=True)
class Guarantee:
    """The differential-privacy guarantee of one result.

    Attributes
    ----------
    epsilon, delta:
        The result is (epsilon, delta)-DP under ``neighbours``.
    neighbours:
        The neighbouring relation.
    mechanism:
        Human-readable name of the mechanism (e.g. ``"laplace"``).
    sensitivity:
        The sensitivity the noise was calibrated to, in ``sensitivity_norm``.
    sensitivity_norm:
        The metric of the sensitivity: ``"L1"``, ``"L2"``, ``"utility"`` (exponential
        mechanism), ``"lipschitz"`` (posterior sampling) or ``"none"``.
    private:
        ``False`` only for results of mechanisms that are not differentially private
        (e.g. the local-sensitivity exponential mechanism); no accountant accepts them.
    simulation:
        ``True`` when the noise came from a seeded numpy generator (experiments, tests)
        rather than the floating-point-safe samplers; such noise must not be published.
    details:
        Extra facts a reader needs to check the claim (scale, trim level, ...).
        ``details["not_protected"]``, when present, names what the result publishes
        outside the guarantee (:meth:`describe` prints it).
    """

    epsilon: float
    delta: float
    neighbours: Neighbours
    mechanism: str
    sensitivity: float
    sensitivity_norm: str = "L1"
    private: bool = True
    simulation: bool = False
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        eps = check_finite(self.epsilon, "epsilon")
        if eps < 0 or (self.private and eps == 0 and self.mechanism != "none"):
            raise ValueError(f"epsilon must be > 0 for a private guarantee, got {eps}")
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", check_delta(self.delta))
        object.__setattr__(self, "neighbours", Neighbours.parse(self.neighbours))
        object.__setattr__(
            self, "sensitivity", check_positive(self.sensitivity, "sensitivity", allow_zero=True)
        )
        object.__setattr__(self, "details", dict(self.details))

    def with_simulation(self, simulation: bool) -> Guarantee:
        return replace(self, simulation=bool(simulation))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["neighbours"] = self.neighbours.value
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Guarantee:
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"guarantee has unknown fields: {sorted(unknown)}")
        return cls(**dict(data))

    def describe(self) -> str:
        """One line, e.g. ``(1, 0)-DP, substitute one record, laplace, L1 sensitivity 2``."""
        eps = f"{self.epsilon:.6g}"
        head = f"({eps}, {self.delta:.3g})-DP" if self.delta > 0 else f"{eps}-DP"
        if not self.private:
            head = f"NOT differentially private (nominal eps {eps})"
        rel = (
            "substitute one record"
            if self.neighbours is Neighbours.SUBSTITUTE
            else "add/remove one record"
        )
        # user-level releases (rows bounded per user) name their relation in the details
        rel = str(self.details.get("neighbouring_relation", rel))
        sim = "; SIMULATION noise (seeded, not for publication)" if self.simulation else ""
        leak = self.details.get("not_protected")
        leak_text = f"; NOT protected: {leak}" if leak else ""
        return (
            f"{head}, {rel}, mechanism {self.mechanism}, "
            f"{self.sensitivity_norm} sensitivity {self.sensitivity:.6g}{sim}{leak_text}"
        )

    def _display(self) -> tuple[str, list[tuple[str, str]]]:
        rows = [
            ("epsilon", num(self.epsilon, 6)),
            ("delta", num(self.delta, 3)),
            ("neighbours", str(self.details.get("neighbouring_relation", self.neighbours.value))),
            ("mechanism", self.mechanism),
            ("sensitivity", f"{num(self.sensitivity, 6)} ({self.sensitivity_norm})"),
        ]
        if not self.private:
            rows.append(("private", "NO: not differentially private"))
        if self.simulation:
            rows.append(("simulation", "yes: seeded noise, not for publication"))
        if self.details.get("not_protected"):
            rows.append(("not protected", str(self.details["not_protected"])))
        return f"Guarantee({self.describe()})", rows

    def __repr__(self) -> str:
        return f"Guarantee({self.describe()})"

    def _repr_html_(self) -> str:
        return display.html(self)


def compose_sequential(
    guarantees: Iterable[Guarantee], mechanism: str = "composition"
) -> Guarantee:
    """Basic sequential composition: epsilons and deltas add (paper 000, Thm 5.1)."""
    gs = list(guarantees)
    if not gs:
        raise ValueError("guarantees must contain at least one guarantee")
    relations = {g.neighbours for g in gs}
    if len(relations) != 1:
        raise ValueError("guarantees must share one neighbouring relation to compose")
    return Guarantee(
        epsilon=sum(g.epsilon for g in gs),
        delta=min(1.0 - 1e-15, sum(g.delta for g in gs)),
        neighbours=gs[0].neighbours,
        mechanism=f"{mechanism} of {len(gs)} x {gs[0].mechanism}"
        if len({g.mechanism for g in gs}) == 1
        else f"{mechanism} of " + ", ".join(g.mechanism for g in gs),
        sensitivity=max(g.sensitivity for g in gs),
        sensitivity_norm=gs[0].sensitivity_norm,
        private=all(g.private for g in gs),
        simulation=any(g.simulation for g in gs),
        details={"parts": [g.to_dict() for g in gs]},
    )


def user_level(rows_per_user: int | None, neighbours: Neighbours) -> tuple[int, dict[str, Any]]:
    """(sensitivity factor, guarantee details) for data bounded to ``rows_per_user`` per user.

    Group privacy for a bounded group: when each user holds at most k rows, adding or
    removing one user adds or removes at most k records, so every L1/L2 add/remove
    sensitivity bound multiplies by k (triangle inequality) and the relation becomes
    "add/remove one user (<= k rows)", n private. ``neighbours`` must be add/remove at user
    level (:meth:`Neighbours.for_unit`).
    """
    if rows_per_user is None:
        return 1, {}
    k = int(rows_per_user)
    Neighbours.for_unit(neighbours, k)  # refuses substitute at user level
    return k, {
        "privacy_unit": "user",
        "rows_per_user": k,
        "neighbouring_relation": f"add/remove one user (<= {k} rows)",
    }
