"""A private Bayesian program: its private input, its body, checking and running it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpbayes.privacy import Guarantee, Neighbours
from dpbayes.privacy.noise import noise_source
from dpbayes.privacy.validation import check_array, check_flag, check_int
from dpbayes.programs.terms import Term

__all__ = ["Program", "ProgramResult", "program"]


@dataclass(frozen=True)
class ProgramResult:
    """One run of a program on data: the released value and its guarantee."""

    value: Any
    guarantee: Guarantee

    @property
    def simulation(self) -> bool:
        return self.guarantee.simulation


@dataclass(frozen=True, eq=False)
class Program:
    """A program over one private input ``db`` (a :func:`private_bools` ... term)."""

    name: str
    db: Term
    body: Term
    description: str = ""

    def neighbours(self) -> str:
        info = self.db.info
        rel = "one record substituted"
        if info["record"] == "real":
            rel = (
                "one record changed arbitrarily"
                if info["bound"] is None
                else f"one record changed by at most {info['bound']:g}"
            )
        return f"{info['name']}: {info['n']} {info['record']} records, {rel}"

    def check(self, *, epsilon: float | None = None, delta: float | None = None) -> Any:
        """The :class:`~dpbayes.programs.checker.Certificate` (raises NotPrivate)."""
        from dpbayes.programs.checker import check

        return check(self, epsilon=epsilon, delta=delta)

    def validate_data(self, data: Any) -> np.ndarray:
        """The data as an array of the declared length and record type."""
        info = self.db.info
        arr = np.asarray(data)
        if arr.ndim != 1 or arr.size != info["n"]:
            raise ValueError(f"data must be a list of {info['n']} records, got shape {arr.shape}")
        if info["record"] == "bool":
            vals = check_array(arr.astype(float) if arr.dtype == bool else arr, "data")
            if not np.all((vals == 0) | (vals == 1)):
                raise ValueError("data must contain booleans or 0/1 values")
            return vals.astype(np.int64)
        if info["record"] == "category":
            vals = check_array(arr, "data")
            if np.any(vals != np.round(vals)) or vals.min() < 0 or vals.max() >= info["k"]:
                raise ValueError(f"data must contain category indices in 0..{info['k'] - 1}")
            return vals.astype(np.int64)
        return check_array(arr, "data") + 0.0  # -0.0 is the record 0.0

    def certificate(self) -> Any:
        """The certificate without a budget, computed once and cached."""
        cache = self.__dict__.setdefault("_cache", {})
        if "certificate" not in cache:
            cache["certificate"] = self.check()
        return cache["certificate"]

    def run(self, data: Any, *, rng: Any = None, allow_non_private: bool = False) -> ProgramResult:
        """Check the program, then run it once on ``data``.

        ``rng=None`` draws mechanism noise from the secure samplers (publishable); a seed
        or Generator makes a seeded simulation (``simulation=True``). A program the checker
        rejects runs only with ``allow_non_private=True`` and its guarantee says
        ``private=False``.
        """
        return self.sample(data, 1, rng=rng, allow_non_private=allow_non_private)[0]

    def sample(
        self, data: Any, size: int, *, rng: Any = None, allow_non_private: bool = False
    ) -> list[ProgramResult]:
        """``size`` independent runs on the same data (shares the deterministic work).

        Each result carries the certificate of one run. ``size`` > 1 is for simulations
        only (a seed or Generator as ``rng``: experiments, the auditor), where no budget is
        spent: released together, ``size`` runs would cost ``size`` times the certificate,
        which no single result states. With ``rng=None`` (secure noise, publishable) it is
        refused before anything runs; call :meth:`run` once per release, and account for
        each release's guarantee.
        """
        from dpbayes.programs.checker import NotPrivate
        from dpbayes.programs.interpreter import Runtime

        size = check_int(size, "size", minimum=1)
        allow_non_private = check_flag(allow_non_private, "allow_non_private")
        values = self.validate_data(data)
        src = noise_source(rng)
        if size > 1 and not src.simulation:
            raise ValueError(
                f"sample(size={size}) with secure noise would release {size} runs, each "
                f"labelled with the guarantee of one run: pass a seed for a simulation, or "
                "call run() once per release (each run spends the certificate's budget)"
            )
        try:
            cert = self.certificate()
            guarantee = cert.guarantee(simulation=src.simulation)
        except NotPrivate as exc:
            if not allow_non_private:
                raise
            guarantee = Guarantee(
                epsilon=0.0,
                delta=0.0,
                neighbours=Neighbours.SUBSTITUTE,
                mechanism=f"program {self.name} (rejected: {exc})"[:200],
                sensitivity=0.0,
                sensitivity_norm="none",
                private=False,
                simulation=src.simulation,
            )
        gen = src.generator()
        mech_rng = gen if src.simulation else None
        rt = Runtime(values, gen, mech_rng, db_uid=self.db.uid)
        out = []
        for _ in range(size):
            value = rt.sample(self.body) if self.body.kind == "monad" else rt.value(self.body)
            out.append(ProgramResult(value=value, guarantee=guarantee))
        return out

    def __call__(self, data: Any, rng: Any, size: int | None = None) -> Any:
        """The program as a mechanism for the auditor: one value, or ``size`` values."""
        if size is None:
            return self.run(data, rng=rng).value
        return [r.value for r in self.sample(data, size, rng=rng)]


def program(name: str, db: Term, build: Callable[[Term], Term], description: str = "") -> Program:
    """Build a program: ``build(db)`` returns the body as a term over the private ``db``."""
    if not isinstance(db, Term) or db.op != "private":
        raise TypeError("db must be a private input, e.g. private_bools('db', n=10)")
    body = build(db)
    if not isinstance(body, Term):
        raise TypeError(f"build must return a program term, got {type(body).__name__}")
    if body.free:
        raise TypeError("the program uses a variable outside the binder that made it")
    return Program(name=name, db=db, body=body, description=description)
