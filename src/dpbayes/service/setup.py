"""The service's first rows: the cube (its definition and keyed digest of the counts,
checked on every start) and the budget (its total and composition)."""

from __future__ import annotations

import hmac
import json
from typing import Any

import sqlalchemy as sa

from dpbayes.answers import Cube
from dpbayes.service import db
from dpbayes.service.config import EngineConfig, counts_digest, describe_unit

__all__ = ["init_rows", "rekey"]


def _unit_flags(unit: dict[str, Any] | None) -> str:
    if unit is None:
        return "--record-level"
    return f"--user-column {unit['user_column']} --max-rows-per-user {unit['max_rows_per_user']}"


def rekey(cube: Cube, mac: str, key_id: str) -> Any:
    """The check revision 0002 runs on an old database's unkeyed digest of the counts,
    returning the keyed one (``mac``, ``key_id``)."""

    def check(old_sha256: str) -> tuple[str, str]:
        if not hmac.compare_digest(old_sha256, counts_digest(cube)):
            raise ValueError(
                "the database holds a different cube (data or attributes changed); its "
                "history would not match: use a new --db or the original data"
            )
        return mac, key_id

    return check


def init_rows(
    con: sa.Connection, config: EngineConfig, cube: Cube, mac: str, key_id: str
) -> str | None:
    """Create or check the cube and budget rows; the composition replaced, if the
    configuration asks for another one than the database's."""
    spec = json.dumps(config.spec(), sort_keys=True)
    row = con.execute(sa.select(db.cube)).first()
    if row is None:
        con.execute(
            db.cube.insert().values(
                id=1,
                spec=spec,
                n_cells=cube.n_cells,
                counts_hmac=mac,
                hmac_key_id=key_id,
            )
        )
    elif (old := json.loads(row.spec).get("privacy_unit")) != config.privacy_unit:
        raise ValueError(
            f"the database's cube protects {describe_unit(old)}, this start asks for "
            f"{describe_unit(config.privacy_unit)}: its history was released for the "
            f"other unit; restart with {_unit_flags(old)} or use a new --db"
        )
    elif row.hmac_key_id != key_id:
        raise ValueError(
            "the database's cube digest is keyed with another admin key: start with the "
            "admin key it was created with (--admin-key-file)"
        )
    elif row.spec != spec or not hmac.compare_digest(row.counts_hmac, mac):
        raise ValueError(
            "the database holds a different cube (data or attributes changed); its "
            "history would not match: use a new --db or the original data"
        )
    wanted = config.composition
    b = con.execute(sa.select(db.budget)).first()
    if b is None:
        con.execute(
            db.budget.insert().values(
                id=1,
                total_epsilon=config.epsilon,
                total_delta=config.delta,
                version=0,
                composition=wanted or "basic",
            )
        )
        return None
    if wanted is None or wanted == b.composition:
        return None
    # Every answer's spend is in its row: the spent budget is recomputed under the new
    # composition by _load (a bound on the same releases either way).
    con.execute(
        db.budget.update()
        .where(db.budget.c.id == 1)
        .values(composition=wanted, version=db.budget.c.version + 1)
    )
    return str(b.composition)
