"""The service database holds no unkeyed digest of the counts (issue: its SHA-256 let any
reader confirm guesses of the exact counts), and older databases are migrated.

In process (QueryService) on a SQLite file and on a fresh PostgreSQL schema; one
``dpbayes serve`` subprocess for the one-line refusal of another admin key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from dpbayes.service import EngineConfig
from dpbayes.service import db as service_db
from dpbayes.service.config import counts_digest, digest_key
from dpbayes.service.state import QueryService

ADMIN = "test-admin-key-" + "z" * 20
KEY = digest_key(ADMIN)


def _counts_body(cfg: EngineConfig) -> bytes:
    cube = cfg.build_cube()
    return json.dumps([cube.shape, cube.cell_vector().tolist()]).encode()


def _all_values(url: str) -> list[str]:
    """Every value of every column of every table, as text."""
    eng = service_db.make_engine(url, writer=False)
    try:
        out: list[str] = []
        with eng.connect() as con:
            for name in sa.inspect(con).get_table_names():
                for row in con.execute(sa.text(f"SELECT * FROM {name}")):
                    out += [str(v) for v in row]
        return out
    finally:
        eng.dispose()


def _columns(url: str, table: str) -> set[str]:
    eng = service_db.make_engine(url, writer=False)
    try:
        with eng.connect() as con:
            return {c["name"] for c in sa.inspect(con).get_columns(table)}
    finally:
        eng.dispose()


def _sqlite_bytes(url: str) -> bytes:
    path = Path(url.split(":///", 1)[1])
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


def _old_0001_database(url: str, cfg: EngineConfig, sha: str) -> None:
    """A database as revision 0001 wrote it: the unkeyed SHA-256 of the counts stored."""
    engine = service_db.make_engine(url)
    service_db.migrate(engine, revision="0001")
    with engine.begin() as con:
        con.execute(
            sa.text("INSERT INTO cube (id, spec, counts_sha256, n_cells) VALUES (1, :s, :d, 200)"),
            {"s": json.dumps(cfg.spec(), sort_keys=True), "d": sha},
        )
        con.execute(
            service_db.budget.insert().values(id=1, total_epsilon=1.0, total_delta=0.0, version=0)
        )
    engine.dispose()


def test_a_new_database_stores_only_a_keyed_digest(db_url: str) -> None:
    cfg = EngineConfig()
    svc = QueryService(cfg, db_url, digest_key=KEY)
    try:
        svc.ask("ann", svc.make_query("idp = 1", None), half_width=50, confidence=0.9)
    finally:
        svc.close()
    body = _counts_body(cfg)
    sha = hashlib.sha256(body).hexdigest()
    assert "counts_sha256" not in _columns(db_url, "cube")
    values = _all_values(db_url)
    assert sha not in values and not any(sha in v for v in values)
    assert hmac.new(KEY, body, "sha256").hexdigest() in values
    if db_url.startswith("sqlite"):
        assert sha.encode() not in _sqlite_bytes(db_url)


def test_an_old_database_is_migrated_and_its_digest_erased(db_url: str) -> None:
    cfg = EngineConfig()
    sha = counts_digest(cfg.build_cube())
    _old_0001_database(db_url, cfg, sha)
    assert sha in _all_values(db_url)
    svc = QueryService(cfg, db_url, digest_key=KEY)  # upgrades to 0002 on the way
    svc.close()
    assert "counts_sha256" not in _columns(db_url, "cube")
    values = _all_values(db_url)
    assert not any(sha in v for v in values)
    assert hmac.new(KEY, _counts_body(cfg), "sha256").hexdigest() in values
    if db_url.startswith("sqlite"):  # freed pages zeroed, the log emptied
        assert sha.encode() not in _sqlite_bytes(db_url)
    QueryService(cfg, db_url, digest_key=KEY).close()  # and it opens again


def test_an_old_database_of_other_data_is_refused_unchanged(db_url: str) -> None:
    cfg = EngineConfig()
    other = hashlib.sha256(b"other counts").hexdigest()
    _old_0001_database(db_url, cfg, other)
    with pytest.raises(ValueError, match="the database holds a different cube"):
        QueryService(cfg, db_url, digest_key=KEY)
    eng = service_db.make_engine(db_url, writer=False)
    with eng.connect() as con:  # the upgrade was rolled back as a whole
        assert con.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() == "0001"
    eng.dispose()
    assert other in _all_values(db_url)


def test_another_admin_key_cannot_reopen_the_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'k.db'}"
    QueryService(EngineConfig(), url, digest_key=KEY).close()
    with pytest.raises(ValueError, match="keyed with another admin key"):
        QueryService(EngineConfig(), url, digest_key=digest_key("another-admin-key-" + "q" * 9))
    key_file = tmp_path / "other.key"
    key_file.write_text("another-admin-key-" + "q" * 9 + "\n")
    r = subprocess.run(
        [sys.executable, "-m", "dpbayes.cli", "serve", "--db", url,
         "--admin-key-file", str(key_file), "--port", "1"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "start with the admin key it was created with" in r.stderr
