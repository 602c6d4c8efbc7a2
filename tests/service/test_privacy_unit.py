"""The service's privacy unit: stored with the cube, a restart with another unit is refused.

In process (QueryService on a temporary SQLite file) plus one ``dpbayes serve`` subprocess
for the one-line refusal. No schema change: the unit lives in the cube's JSON ``spec``, and
a record-level spec is exactly what databases made before units existed hold.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from dpbayes.cli import main
from dpbayes.service import EngineConfig
from dpbayes.service import db as service_db
from dpbayes.service.config import BUNDLED, DEFAULT_ATTRIBUTES, counts_digest, digest_key
from dpbayes.service.state import QueryService

ADMIN = "test-admin-key-" + "y" * 20
KEY = digest_key(ADMIN)


def _old_revision_0001_database(url: str) -> None:
    """A database as the code before privacy units wrote it: schema 0001, record level."""
    engine = service_db.make_engine(url)
    service_db.migrate(engine, revision="0001")
    cfg = EngineConfig(record_level=True)
    attrs = {
        k: {kk: ["inf" if v == math.inf else v for v in vv] for kk, vv in d.items()}
        for k, d in DEFAULT_ATTRIBUTES.items()
    }
    old_spec = json.dumps({"data": BUNDLED, "attributes": attrs}, sort_keys=True)
    assert old_spec == json.dumps(cfg.spec(), sort_keys=True)  # record level adds no key
    cube = cfg.build_cube()
    with engine.begin() as con:
        version = con.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
        assert version == "0001"
        con.execute(  # revision 0001's cube table (an unkeyed digest of the counts)
            sa.text("INSERT INTO cube (id, spec, counts_sha256, n_cells) VALUES (1, :s, :d, :n)"),
            {"s": old_spec, "d": counts_digest(cube), "n": cube.n_cells},
        )
        con.execute(
            service_db.budget.insert().values(id=1, total_epsilon=1.0, total_delta=0.0, version=0)
        )
    engine.dispose()


def test_old_record_level_database_opens_only_as_record_level(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    _old_revision_0001_database(url)
    with pytest.raises(ValueError, match="protects one record, this start asks for one user") as e:
        QueryService(EngineConfig(), url, digest_key=KEY)  # the new default on the bundled data
    assert "restart with --record-level or use a new --db" in str(e.value)
    svc = QueryService(EngineConfig(record_level=True), url, digest_key=KEY)
    try:
        assert svc.schema()["privacy_unit"] == {
            "unit": "record",
            "neighbouring_relation": "add/remove one record",
        }
        q = svc.make_query("health = poor", None)
        reply = svc.ask("ann", q, half_width=25, confidence=0.95)
        # record level: S = 1
        assert reply.answer.epsilon == pytest.approx(math.log(20) / 25, rel=2e-3)
        assert "add/remove one record" in reply.answer.guarantee.describe()
    finally:
        svc.close()


def test_person_level_database_refuses_another_unit(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    svc = QueryService(EngineConfig(), url, digest_key=KEY)
    try:
        reply = svc.ask("ann", svc.make_query("idp = 1", None), half_width=50, confidence=0.9)
        assert reply.answer.epsilon == pytest.approx(5 * math.log(10) / 50, rel=2e-3)
        assert "add/remove one user (<= 5 rows)" in reply.answer.guarantee.describe()
    finally:
        svc.close()
    for other, words in [
        (EngineConfig(record_level=True), "asks for one record"),
        (EngineConfig(max_rows_per_user=2), "asks for one user ('person', <= 2 rows)"),
    ]:
        with pytest.raises(ValueError, match=r"protects one user \('person', <= 5 rows\)") as e:
            QueryService(other, url, digest_key=KEY)
        assert words in str(e.value)
        assert "restart with --user-column person --max-rows-per-user 5" in str(e.value)
    with sa.create_engine(url).connect() as con:  # nothing was written by the refusals
        assert con.execute(sa.select(sa.func.count()).select_from(service_db.answers)).scalar() == 1
    svc = QueryService(EngineConfig(user_column="person", max_rows_per_user=5), url, digest_key=KEY)
    assert svc.budget()["answers"] == 1  # the same unit, spelled out, continues the history
    svc.close()


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"record_level": True, "user_column": "person"}, "record_level excludes"),
        ({"max_rows_per_user": 0}, "max_rows_per_user must be >= 1"),
        ({"user_column": "year"}, "must be given together"),
        ({"user_column": " "}, "user_column must name a column"),
    ],
)
def test_engine_config_unit_errors(kw: dict, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        EngineConfig(**kw)


def test_own_data_is_record_level_unless_bounded(tmp_path: Path) -> None:
    csv = tmp_path / "people.csv"
    csv.write_text("pid,sex\n" + "".join(f"{i // 3},{'fm'[i % 2]}\n" for i in range(30)))
    attrs = {"sex": {"categories": ["f", "m"]}}
    assert EngineConfig(data=str(csv), attributes=attrs).privacy_unit is None
    cfg = EngineConfig(data=str(csv), attributes=attrs, user_column="pid", max_rows_per_user=2)
    assert cfg.spec()["privacy_unit"] == {"user_column": "pid", "max_rows_per_user": 2}
    assert int(cfg.build_cube().cell_vector().sum()) == 20  # 10 people x 2 of their 3 rows
    bad = EngineConfig(data=str(csv), attributes=attrs, user_column="nosuch", max_rows_per_user=2)
    with pytest.raises(ValueError, match="nosuch"):
        bad.build_cube()


def test_serve_cli_refuses_a_restart_with_another_unit_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'svc.db'}"
    QueryService(EngineConfig(), url, digest_key=KEY).close()  # the default: person level
    key = tmp_path / "admin.key"
    key.write_text(ADMIN + "\n")
    r = subprocess.run(
        [sys.executable, "-m", "dpbayes.cli", "serve", "--db", url, "--record-level",
         "--admin-key-file", str(key), "--port", "1"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "protects one user ('person', <= 5 rows), this start asks for one record" in r.stderr
    for args, words in [
        (["--record-level", "--user-column", "person"], "--record-level excludes --user-column"),
        (["--max-rows-per-user", "0"], "--max-rows-per-user must be >= 1"),
        (["--data", str(key), "--attributes", "a=1", "--user-column", "a"], "needs --max-rows"),
    ]:
        code = main(["serve", "--db", url, "--admin-key-file", str(key), *args])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and words in err, err
