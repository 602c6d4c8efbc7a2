"""The floor of bench_service.py: a minimal FastAPI + SQLite endpoint, one fsync'd INSERT
per request under a process-wide lock.

    python benchmarks/service_floor.py --port 8001 --db floor.db

``POST /api/query`` takes the service's query body (validated as strictly), checks that a
bearer key is present, inserts the body into a table in a transaction of its own,
committed with ``synchronous=FULL`` in WAL mode (one fsync), under a ``threading.Lock``
(as the service serialises its commits), and answers a small JSON object; uvicorn, one
process, a synchronous handler (run on the thread pool), as the service. ``GET /api/rows``
counts the rows (the benchmark checks one per request).
"""

from __future__ import annotations

import argparse
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class FloorBody(BaseModel):
    """The floor's request body: the service's query fields, validated as strictly."""

    model_config = ConfigDict(extra="forbid", strict=True)
    where: str = Field(max_length=2000)
    half_width: float = Field(gt=0, le=1e9)
    confidence: float = Field(ge=0.5, le=0.999999)


def serve_floor(port: int, db_path: Path) -> None:
    """The floor: a minimal FastAPI + SQLite endpoint, one fsync'd INSERT per request."""
    import uvicorn
    from fastapi import FastAPI, Header, HTTPException

    con = sqlite3.connect(db_path, check_same_thread=False, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute(
        "CREATE TABLE IF NOT EXISTS log (id INTEGER PRIMARY KEY AUTOINCREMENT, "
        "analyst TEXT NOT NULL, body TEXT NOT NULL, created REAL NOT NULL)"
    )
    lock = threading.Lock()
    app = FastAPI()

    @app.post("/api/query")
    def query(body: FloorBody, authorization: str | None = Header(None)) -> dict[str, Any]:
        if not authorization or not authorization.startswith("Bearer "):
            raise HTTPException(401, "missing key")
        with lock:
            con.execute("BEGIN IMMEDIATE")
            cur = con.execute(
                "INSERT INTO log (analyst, body, created) VALUES (?, ?, ?)",
                (authorization[7:20], body.model_dump_json(), time.time()),
            )
            con.execute("COMMIT")
        return {"status": "logged", "id": cur.lastrowid, "query": body.where}

    @app.get("/api/rows")
    def rows() -> dict[str, int]:
        with lock:
            return {"rows": int(con.execute("SELECT count(*) FROM log").fetchone()[0])}

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--db", type=Path, required=True, help="SQLite file (created)")
    a = ap.parse_args()
    serve_floor(a.port, a.db)


if __name__ == "__main__":
    main()
