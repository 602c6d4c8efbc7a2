"""API keys: analysts' keys (stored as salted SHA-256 digests) and the admin key check.

An analyst's key is ``dpb_<key id>_<secret>``; the database keeps the key id, a random
salt and SHA-256(salt:secret), never the secret. The admin key is never stored: the app
keeps its SHA-256 in memory and compares in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

import sqlalchemy as sa

from dpbayes.service import db

__all__ = ["AnalystKeys", "check_admin"]

_KEY_PREFIX = "dpb"


def _digest(salt: str, secret: str) -> str:
    return hashlib.sha256(f"{salt}:{secret}".encode()).hexdigest()


class AnalystKeys:
    """The analysts' keys in the ``analysts`` table (``writer``/``reader`` engines)."""

    def __init__(self, writer: sa.Engine, reader: sa.Engine) -> None:
        self._writer, self._reader = writer, reader
        self._cache: dict[str, tuple[str, str, str]] = {}

    def add(self, name: str, conflict: type[ValueError] = ValueError) -> str:
        """Create an analyst; returns the API key (shown once, stored as a salted hash).
        A name in use raises ``conflict``."""
        if not isinstance(name, str) or not name.strip() or len(name) > 100:
            raise ValueError("name must be a non-empty string of at most 100 characters")
        key_id, salt = secrets.token_hex(8), secrets.token_hex(16)
        secret = secrets.token_urlsafe(32)
        with self._writer.begin() as con:
            if con.execute(sa.select(db.analysts).where(db.analysts.c.name == name)).first():
                raise conflict(f"an analyst named {name!r} exists already")
            con.execute(
                db.analysts.insert().values(
                    name=name,
                    key_id=key_id,
                    salt=salt,
                    key_sha256=_digest(salt, secret),
                    created=time.time(),
                )
            )
        return f"{_KEY_PREFIX}_{key_id}_{secret}"

    def name(self, key: str | None) -> str | None:
        """The analyst's name for a valid API key, else None (constant-time comparison)."""
        if not key or not key.startswith(_KEY_PREFIX + "_") or len(key) > 200:
            return None
        key_id, _, secret = key[len(_KEY_PREFIX) + 1 :].partition("_")
        entry = self._cache.get(key_id)
        if entry is None:
            with self._reader.connect() as con:
                r = con.execute(
                    sa.select(db.analysts).where(db.analysts.c.key_id == key_id)
                ).first()
            if r is None:
                return None
            entry = (r.name, r.salt, r.key_sha256)
            self._cache[key_id] = entry
        name, salt, digest = entry
        return name if hmac.compare_digest(_digest(salt, secret), digest) else None


def check_admin(given: str | None, expected_sha256: str) -> bool:
    if not given:
        return False
    return hmac.compare_digest(hashlib.sha256(given.encode()).hexdigest(), expected_sha256)
