"""Where the query engine keeps its history of noisy answers (a small storage interface).

:class:`HistoryStore` is what :class:`~dpbayes.answers.engine.QueryEngine` needs: ``load()``
the records, ``append(record)`` one more, durably, before the answer is returned. Two
implementations: :class:`MemoryStore` (tests, simulations) and :class:`JsonlStore` (one
JSON object per line, each with a checksum, flushed and fsynced on every append). The HTTP
service provides its own (a database) behind the same two methods.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from dpbayes.answers.blue import NOISES
from dpbayes.privacy.accountant import LedgerError

__all__ = ["AnswerRecord", "HistoryStore", "JsonlStore", "MemoryStore", "add_record"]


@dataclass(frozen=True)
class AnswerRecord:
    """One released noisy answer: y = H x + Lap(sensitivity / epsilon) (``noise="laplace"``)
    or y = H x + N(0, sigma^2) (``noise="gaussian"``, (epsilon, delta)-DP at that sigma).

    A Laplace record is written exactly as before Gaussian answers existed (no ``noise``,
    ``sigma`` or ``delta`` keys), and a record without them reads back as Laplace.
    """

    cells: tuple[int, ...]
    coefficients: tuple[float, ...]
    noisy_answer: float
    epsilon: float
    sensitivity: float
    n_cells: int
    label: str = ""
    guarantee: dict[str, Any] = field(default_factory=dict)
    time: float = 0.0
    noise: str = "laplace"
    delta: float = 0.0
    sigma: float | None = None  # the noise sd of a Gaussian answer

    def __post_init__(self) -> None:
        if self.noise not in NOISES:
            raise ValueError(f"noise must be one of {NOISES}, got {self.noise!r}")
        if self.noise == "gaussian":
            ok = (
                isinstance(self.sigma, float | int)
                and math.isfinite(self.sigma)
                and self.sigma > 0
                and 0 < self.delta < 1
            )
            if not ok:
                raise ValueError(
                    "a Gaussian answer record needs sigma > 0 and delta in (0, 1), got "
                    f"sigma={self.sigma!r}, delta={self.delta!r}"
                )
        elif self.sigma is not None or self.delta != 0:
            raise ValueError(
                f"a Laplace answer record has no sigma and delta 0, got sigma={self.sigma!r}, "
                f"delta={self.delta!r}"
            )

    @classmethod
    def from_dense(cls, coefficients: np.ndarray, **kw: Any) -> AnswerRecord:
        idx = np.flatnonzero(coefficients)
        return cls(
            cells=tuple(int(i) for i in idx),
            coefficients=tuple(float(coefficients[i]) for i in idx),
            n_cells=int(coefficients.size),
            **kw,
        )

    def dense(self) -> np.ndarray:
        q = np.zeros(self.n_cells)
        q[list(self.cells)] = self.coefficients
        return q

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cells"] = list(self.cells)
        d["coefficients"] = list(self.coefficients)
        if self.noise == "laplace":  # as before Gaussian answers existed
            for key in ("noise", "delta", "sigma"):
                del d[key]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AnswerRecord:
        return cls(
            cells=tuple(int(i) for i in d["cells"]),
            coefficients=tuple(float(c) for c in d["coefficients"]),
            noisy_answer=float(d["noisy_answer"]),
            epsilon=float(d["epsilon"]),
            sensitivity=float(d["sensitivity"]),
            n_cells=int(d["n_cells"]),
            label=str(d.get("label", "")),
            guarantee=dict(d.get("guarantee", {})),
            time=float(d.get("time", 0.0)),
            noise=str(d.get("noise", "laplace")),
            delta=float(d.get("delta", 0.0)),
            sigma=None if d.get("sigma") is None else float(d["sigma"]),
        )


def add_record(history: Any, rec: AnswerRecord) -> int:
    """Add a stored answer to a :class:`~dpbayes.answers.History` (its noise included)."""
    return int(
        history.add(
            rec.dense(),
            rec.noisy_answer,
            rec.epsilon,
            sensitivity=rec.sensitivity,
            label=rec.label,
            noise=rec.noise,
            sigma=rec.sigma,
            delta=rec.delta,
        )
    )


class HistoryStore(Protocol):
    """Durable storage of the answers released so far."""

    def load(self) -> list[AnswerRecord]:
        """Every record appended so far, in order."""
        ...

    def append(self, record: AnswerRecord) -> None:
        """Store one record durably (it must survive a crash once this returns)."""
        ...


class MemoryStore:
    """Records kept in memory (lost when the process ends)."""

    def __init__(self) -> None:
        self._records: list[AnswerRecord] = []

    def load(self) -> list[AnswerRecord]:
        return list(self._records)

    def append(self, record: AnswerRecord) -> None:
        self._records.append(record)


def _digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


class JsonlStore:
    """Records as JSON lines with a checksum each; appended with flush + fsync.

    A damaged line is an error (never silently dropped), except an unterminated last line,
    which is what a crash during ``append`` leaves: that answer was never returned (its
    spend, recorded before, stays counted), so it is ignored.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def load(self) -> list[AnswerRecord]:
        if not self.path.exists():
            return []
        raw = self.path.read_text()
        lines = raw.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        elif lines:
            lines.pop()  # unterminated last line: an interrupted append
        out = []
        for n, line in enumerate(lines, start=1):
            try:
                doc = json.loads(line)
                body = doc["record"]
                if doc["sha256"] != _digest(body):
                    raise ValueError("checksum mismatch")
                out.append(AnswerRecord.from_dict(body))
            except (ValueError, KeyError, TypeError) as exc:
                raise LedgerError(f"history file {self.path} line {n} is damaged ({exc})") from None
        return out

    def append(self, record: AnswerRecord) -> None:
        body = record.to_dict()
        line = json.dumps({"record": body, "sha256": _digest(body)}, separators=(",", ":"))
        with self._lock:
            self._drop_partial_tail()
            with open(self.path, "a") as fh:
                fh.write(line + "\n")
                fh.flush()
                os.fsync(fh.fileno())

    def _drop_partial_tail(self) -> None:
        """Cut an unterminated last line (an interrupted append) before appending."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with open(self.path, "rb+") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) == b"\n":
                return
            fh.seek(0)
            data = fh.read()
            fh.truncate(data.rfind(b"\n") + 1)
            fh.flush()
            os.fsync(fh.fileno())
