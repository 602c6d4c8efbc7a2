"""What the service answers queries about: the data, the cube's attributes, the budget."""

from __future__ import annotations

import hashlib
import hmac
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpbayes.answers import Bins, Cube
from dpbayes.answers.engine import NOISE_CHOICES
from dpbayes.data.datasets import BUNDLED_PRIVACY_UNIT
from dpbayes.privacy.composition import COMPOSITIONS
from dpbayes.privacy.validation import check_delta, check_epsilon, check_int

__all__ = ["DEFAULT_ATTRIBUTES", "EngineConfig", "counts_hmac", "digest_key"]

BUNDLED = "bundled:randhie"

# The bundled RAND HIE extract: nominal attributes and visits to an MD in fixed bins
# (domains written down here, never read from the data).
DEFAULT_ATTRIBUTES: dict[str, dict[str, Any]] = {
    "health": {"categories": ["excellent", "good", "fair", "poor"]},
    "idp": {"categories": [0, 1]},
    "year": {"categories": [1, 2, 3, 4, 5]},
    "mdvis": {"bins": [0, 1, 3, 6, 11, math.inf]},
}


@dataclass(frozen=True)
class EngineConfig:
    """The service's query engine: data source, attribute domains and total budget.

    ``data``: a CSV/Parquet path, or ``"bundled:randhie"``. ``attributes`` maps a column to
    ``{"categories": [...]}`` or ``{"bins": [e0, e1, ...]}``. ``epsilon``/``delta`` is the
    total budget used when the database is created (afterwards the stored budget rules).
    Every answer is drawn with secure noise: a service spends a real budget, so there is
    no seeded simulation mode (experiments use :class:`~dpbayes.answers.QueryEngine`).

    Privacy unit: ``user_column`` + ``max_rows_per_user=k`` keep at most k rows per user
    (in the engine) and every answer protects one user (sensitivity x k). On the bundled
    data the default is one person (``person``, k = 5: every row kept) unless
    ``record_level=True``; on other data, record level unless both are given. The unit is
    part of :meth:`spec`, so a restart with another unit on the same database is refused.

    ``composition``: how answers' spends add up within a cell (``"basic"``, ``"pld"`` or
    ``"rdp"``; see :mod:`dpbayes.privacy.composition`); parallel composition across
    disjoint cells holds under each. ``None``: the database's (``"basic"`` for a new one).
    Given, it is recorded in the database, also for an existing one: every answer's spend
    is kept, so the spent budget is recomputed under the new composition (a start that
    would put the spent budget above the total is refused).

    ``min_epsilon_fraction``: a fresh answer is charged at least this fraction of the total
    eps budget (default 1e-3; its noise is then smaller than asked for). Without a floor,
    answers at eps 1e-9 cost next to nothing, and thousands of them on one cell would make
    every plan on it slower than the time limit; with it, basic composition allows at most
    1/fraction answers per cell. 0 turns the floor off.

    ``noise``: the noise of fresh answers, ``"laplace"`` (paper 000), ``"gaussian"`` (at the
    budget's delta; needs delta > 0) or ``"auto"`` (per answer, the one whose charge raises
    the spent budget least under the composition: Gaussian answers pay off under ``"rdp"``
    once a cell has several answers). ``None`` (the default): Laplace, or Gaussian under
    ``"pld"``, which takes Gaussian answers only (a PLD budget check is a valid filter for
    them alone; there ``"auto"`` is Gaussian and ``"laplace"`` is refused at start). A policy
    of this server, not stored.
    """

    data: str = BUNDLED
    attributes: dict[str, dict[str, Any]] = field(default_factory=lambda: dict(DEFAULT_ATTRIBUTES))
    epsilon: float = 1.0
    delta: float = 0.0
    max_epsilon: float | None = None
    method: str = "auto"
    user_column: str | None = None
    max_rows_per_user: int | None = None
    record_level: bool = False
    composition: str | None = None
    noise: str | None = None
    min_epsilon_fraction: float = 1e-3

    def __post_init__(self) -> None:
        f = self.min_epsilon_fraction
        if isinstance(f, bool) or not isinstance(f, int | float) or not 0.0 <= f < 1.0:
            raise ValueError(f"min_epsilon_fraction must be in [0, 1), got {f!r}")
        if self.noise is not None and self.noise not in NOISE_CHOICES:
            raise ValueError(f"noise must be one of {list(NOISE_CHOICES)}, got {self.noise!r}")
        if self.noise == "gaussian" and self.delta == 0:
            raise ValueError(
                "noise='gaussian' needs a budget delta > 0 (--delta): a Gaussian answer is "
                "(eps, delta)-DP only for delta > 0; use 'laplace' or 'auto'"
            )
        check_epsilon(self.epsilon, "epsilon")
        check_delta(self.delta, "delta")
        if self.max_epsilon is not None:
            check_epsilon(self.max_epsilon, "max_epsilon")
        if self.composition is not None and self.composition not in COMPOSITIONS:
            raise ValueError(
                f"composition must be one of {list(COMPOSITIONS)}, got {self.composition!r}"
            )
        self._resolve_unit()
        if not isinstance(self.attributes, dict) or not self.attributes:
            raise ValueError("attributes must map at least one column to its domain")
        for name, dom in self.attributes.items():
            if not isinstance(dom, dict) or set(dom) not in ({"categories"}, {"bins"}):
                raise ValueError(
                    f"attributes[{name!r}] must be {{'categories': [...]}} or {{'bins': [...]}}"
                )
        if self.data != BUNDLED and not Path(self.data).is_file():
            raise ValueError(f"data: no such file {self.data!r}")

    def _resolve_unit(self) -> None:
        user, k = self.user_column, self.max_rows_per_user
        if self.record_level:
            if user is not None or k is not None:
                raise ValueError(
                    "record_level excludes user_column and max_rows_per_user: choose one "
                    "privacy unit"
                )
            return
        if k is not None:
            k = check_int(k, "max_rows_per_user", minimum=1)
        if user is not None and (not isinstance(user, str) or not user.strip()):
            raise ValueError(f"user_column must name a column, got {user!r}")
        if self.data == BUNDLED:
            default_user, default_k = BUNDLED_PRIVACY_UNIT["randhie"]
            if user is None or user == default_user:
                user, k = default_user, default_k if k is None else k
        if (user is None) != (k is None):
            raise ValueError(
                "user_column and max_rows_per_user must be given together (k is a public "
                "bound, never read from the data)"
            )
        object.__setattr__(self, "user_column", user)
        object.__setattr__(self, "max_rows_per_user", k)

    @property
    def privacy_unit(self) -> dict[str, Any] | None:
        """``{"user_column": ..., "max_rows_per_user": k}``, or ``None`` for record level."""
        if self.user_column is None:
            return None
        return {"user_column": self.user_column, "max_rows_per_user": self.max_rows_per_user}

    def spec(self) -> dict[str, Any]:
        """The cube definition stored in the database (JSON-friendly).

        A user-level cube adds ``privacy_unit``; a record-level spec has no such key, as
        the specs written before privacy units existed (which were all record level).
        """
        data = self.data if self.data == BUNDLED else str(Path(self.data).resolve())
        attrs = {
            k: {kk: [_json_num(v) for v in vv] for kk, vv in d.items()}
            for k, d in self.attributes.items()
        }
        out: dict[str, Any] = {"data": data, "attributes": attrs}
        if self.privacy_unit is not None:
            out["privacy_unit"] = self.privacy_unit
        return out

    def build_cube(self) -> Cube:
        """Count the data over the attributes' cells (non-private; stays in the server)."""
        attrs: dict[str, Any] = {}
        for name, dom in self.attributes.items():
            attrs[name] = Bins(dom["bins"]) if "bins" in dom else list(dom["categories"])
        data: Any = self.data
        if self.data == BUNDLED:
            from dpbayes.data import load_bundled

            data = load_bundled("randhie")
        return Cube.from_table(
            data, attrs, user_column=self.user_column, max_rows_per_user=self.max_rows_per_user
        )


def describe_unit(unit: dict[str, Any] | None) -> str:
    """``"one record"`` or ``"one user ('person', <= 5 rows)"`` for a stored ``privacy_unit``."""
    if unit is None:
        return "one record"
    return f"one user ({unit['user_column']!r}, <= {unit['max_rows_per_user']} rows)"


def _json_num(v: Any) -> Any:
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def _counts_body(cube: Cube) -> bytes:
    return json.dumps([cube.shape, cube.cell_vector().tolist()]).encode()


def counts_digest(cube: Cube) -> str:
    """The unkeyed SHA-256 of the counts that databases before revision 0002 stored.

    Anyone who reads it can confirm a guess of the exact counts, so it is no longer stored:
    the migration to 0002 only checks an old database's digest against the data once and
    replaces it by :func:`counts_hmac`.
    """
    return hashlib.sha256(_counts_body(cube)).hexdigest()


def digest_key(admin_key: str) -> bytes:
    """The key of the cube's digest, derived from the admin key (never stored anywhere).

    HMAC-SHA256(admin key, label): whoever reads the database but lacks the admin key
    cannot test guesses of the counts against the stored digest.
    """
    if not isinstance(admin_key, str) or len(admin_key) < 16:
        raise ValueError("admin_key must be a string of at least 16 characters")
    return hmac.new(admin_key.encode(), b"dpbayes service: cube digest v1", "sha256").digest()


def counts_hmac(cube: Cube, key: bytes) -> tuple[str, str]:
    """(HMAC-SHA256 of the counts under ``key``, the key's id): a restart on other data is
    refused (the history would lie). The id (an HMAC of a constant) tells a changed key
    from changed data, and says nothing about the counts."""
    if not isinstance(key, bytes) or len(key) < 16:
        raise TypeError("the digest key must be bytes of length >= 16")
    mac = hmac.new(key, _counts_body(cube), "sha256").hexdigest()
    key_id = hmac.new(key, b"key id", "sha256").hexdigest()[:16]
    return mac, key_id
