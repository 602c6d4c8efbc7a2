"""Alembic environment: runs on the connection dpbayes.service.db.migrate passes in."""

from __future__ import annotations

from alembic import context

from dpbayes.service.db import METADATA

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only via dpbayes.service.db.migrate
    raise RuntimeError("run migrations through dpbayes.service.db.migrate(engine)")
context.configure(connection=connection, target_metadata=METADATA)
with context.begin_transaction():
    context.run_migrations()
