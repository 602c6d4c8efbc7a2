"""Read a release back from its JSON record (``Release.to_dict`` / ``dpbayes release --json``).

The recipient's side: everything needed for a noise-aware posterior is in the record
(model and prior, mechanism, released values, public facts, guarantee); the data never are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dpbayes.models import distribution_from_dict, model_from_dict
from dpbayes.models.mixtures import mixture_from_dict
from dpbayes.privacy import Guarantee
from dpbayes.release.base import Release

__all__ = ["read_release", "release_from_dict"]

_FIELDS = ("model", "mechanism", "released", "guarantee")


def release_from_dict(d: dict[str, Any]) -> Release:
    """Rebuild a :class:`Release` from ``Release.to_dict()`` output."""
    if not isinstance(d, dict):
        raise TypeError(f"d must be a dict (a release record), got {type(d).__name__}")
    if d.get("format") != "dpbayes-release":
        raise ValueError(f"d['format'] must be 'dpbayes-release', got {d.get('format')!r}")
    missing = [k for k in _FIELDS if k not in d]
    if missing:
        raise ValueError(f"the release record lacks field(s): {', '.join(missing)}")
    model = model_from_dict(d["model"])
    posterior: Any = None
    if d.get("posterior") is not None:
        fam = d["posterior"].get("family") if isinstance(d["posterior"], dict) else None
        try:
            posterior = distribution_from_dict(d["posterior"])
        except ValueError:
            posterior = mixture_from_dict(d["posterior"]) if fam else None
    return Release(
        model=model,
        mechanism=str(d["mechanism"]),
        posterior=posterior,
        guarantee=Guarantee.from_dict(d["guarantee"]),
        released=dict(d["released"]),
        public=dict(d.get("public") or {}),
    )


def read_release(path: str | Path) -> Release:
    """Read a release JSON file (one object as written by ``dpbayes release --json``)."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not a JSON release record ({exc.msg})") from None
    return release_from_dict(record)
