"""The privacy budget: an explicit, atomic, persistent accountant.

Composition (paper 000, Thms 5.1-5.2):

* sequential: releases on the same data add up, eps = sum eps_i, delta = sum delta_i;
* parallel: releases on disjoint parts of the data cost the maximum, not the sum.

A spend may carry a ``scope``: the labels of the disjoint parts of the data it reads
(for example the cells of a count cube). A spend without a scope reads everything. The
budget consumed is therefore

    spent = sum(unscoped spends) + max over parts p of sum(scoped spends that read p),

which is the worst-case privacy loss of any one person, whose record lies in one part.
The caller is responsible for the labels naming disjoint parts of the data. A scoped
release must be add/remove (a substituted record can leave one part and enter another:
a removal from one and an addition to the other, which a substitute guarantee does not
cover); a scoped substitute guarantee is refused.

One budget, one privacy unit. The epsilons of a ledger add up only when every spend
protects the same unit: substitute one record, add/remove one record, or add/remove one
user (at any row bound k, each release calibrated to the whole user). Mixed, the total
holds under no relation (an add/remove eps costs up to 2 eps under substitute; a
substitute release publishes n; a record-level eps costs a user with k rows k eps), so the
first spend with a guarantee fixes the unit and a spend under another one is refused
(one-line ``ValueError``, nothing spent). A spend given as a bare epsilon carries no unit.

At user level (a person has up to k records, possibly in several parts) the maximum still
holds when each release is calibrated to the whole person (sensitivity k times one
record's) and is Laplace or Gaussian noise on a linear statistic of per-part counts. A
person with r_j records in part j (sum r_j <= k) moves release q by |H_q . r|, so its
loss is at most eps_q |H_q . r| / (k max |H_q|) under basic composition, and its Renyi
divergence of order a is a convex nondecreasing function of |H_q . r| (the log of a sum
of exponentials of it for Laplace; a mu^2 / 2 for Gaussian). Either total is a convex
function of r, largest at a vertex of {r >= 0, sum r <= k}: all k records in one part,
the case above. So basic and Renyi composition charge the worst person exactly.
Privacy-loss-distribution composition (``"pld"``, Gaussian releases only) holds by the
same argument (the composed mu^2 is convex in r as well).

``with accountant.charge(...)`` checks the budget and records the spend under a lock
(a thread lock, plus an ``flock`` on the ledger file so that several processes can share
one ledger). If the block raises, nothing is recorded. A charge nested inside another
charge's block (same accountant, same thread) counts the outer, still unrecorded spend
as already made. The ledger file is rewritten atomically (write, fsync, rename) and
carries a checksum: a damaged or accidentally edited file is an error, never a fresh full
budget. (The checksum is not a signature: whoever can write the file can forge it.)

The budget check allows a relative slack of 1e-9 (so that 10 x 0.1 fits in 1): the
recorded total never exceeds the budget by more than 1e-9 of it.

Real budget and simulation are kept apart. A release whose noise came from a seeded
generator (``Guarantee.simulation``) is reproducible by whoever guesses the seed, so it
protects nothing: a real accountant refuses it (one-line ``ValueError``) before anything
is drawn. Experiments and tests that want budget bookkeeping for seeded releases use an
explicit simulation accountant, ``Accountant(eps, simulation=True)``, which accepts only
simulation releases (a real release charged there would be missing from the real ledger)
and keeps no ledger file.

The accountant keeps running totals (the unscoped sum and one sum per part, with their
maximum), so a check or a spend costs O(parts it reads), not O(ledger). The sums are
exact: each is kept as a non-overlapping expansion (Shewchuk's, as ``math.fsum``) and
read rounded once, so they equal ``math.fsum`` of the spends bit for bit.

Tight composition. ``Accountant(eps, delta, composition="pld")`` (or ``"rdp"``) adds up
spends by the privacy-loss-distribution (or Rényi) composition of
:mod:`dpbayes.privacy.composition` instead of basic composition: ``spent`` is then the eps
the composition costs at the budget's delta (and that delta), and parallel composition
still holds across disjoint parts (the maximum over parts of the composition of the
unscoped spends and that part's). An accountant is a privacy filter (each spend may be
chosen after the earlier outputs), and a tight composition is a valid filter only for some
mechanisms: ``"pld"`` takes Gaussian-noise spends only, ``"rdp"`` pure eps-DP and Gaussian
ones; any other spend is refused before anything is drawn (one-line ``ValueError``,
nothing spent), and basic composition is reported only where the filter argument allows
(one spend, or pure spends only). The proofs are in :mod:`dpbayes.privacy.composition`.
The ledger file
records the composition, and every spend records what the composition needs (its
Gaussian noise ratio, when it has one), so reopening recomputes the same ``spent``.
Ledgers of version 1 (before composition was recorded) open as basic composition.
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import hashlib
import json
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from dpbayes import display
from dpbayes.display import num
from dpbayes.privacy.composition import COMPOSITIONS, event_of, filter_refusal
from dpbayes.privacy.guarantee import Guarantee, Neighbours
from dpbayes.privacy.spend import Spend, _TightTotals, _Totals
from dpbayes.privacy.validation import check_delta, check_epsilon

__all__ = ["Accountant", "BudgetExceeded", "LedgerError", "Spend"]

_FORMAT = "dpbayes-ledger"
_VERSION = 2
_READS = (1, 2)  # ledger versions this code opens (1: before composition was recorded)
_TOLERANCE = 1e-9  # relative slack so that 10 x 0.1 fits in a budget of 1


# ------------------------------------------------------------------ interrupts
# A step that must not be cut in two (the ledger's save with the spend it records; the
# CLI's renames that publish a file with its guarantee) runs with SIGINT and SIGTERM
# deferred: a signal that arrives meanwhile is caught and delivered again, as it would have
# been, when the step is over. CPython runs a signal's Python handler in the main thread
# right after the C call in progress (a rename that has just completed), so without this a
# KeyboardInterrupt could land between an operation and the note that it was done. The
# handlers are swapped rather than the signals masked (pthread_sigmask): a mask holds in
# one thread only, and a process-directed signal then goes to another thread (numpy's BLAS
# threads), whose C handler still has the main thread run the Python handler at once.
_INTERRUPTS = ("SIGINT", "SIGTERM")


class _Deferral:
    """SIGINT and SIGTERM caught, not acted on, until :meth:`deliver`."""

    def __init__(self) -> None:
        self.caught: list[int] = []
        self.previous: dict[int, Any] = {}
        for name in _INTERRUPTS:
            sig = getattr(signal, name, None)
            current = None if sig is None else signal.getsignal(sig)
            # a handler not set from Python (None) cannot be put back; an ignored signal
            # stays ignored
            if sig is not None and current is not None and current is not signal.SIG_IGN:
                self.previous[sig] = signal.signal(sig, self._catch)

    def _catch(self, signum: int, frame: Any) -> None:
        self.caught.append(signum)

    def deliver(self) -> None:
        """The handlers put back, then what was caught raised again under them (so
        KeyboardInterrupt from Python's and the CLI's handlers, an ended process under
        SIG_DFL)."""
        previous, self.previous = self.previous, {}
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        caught, self.caught = self.caught, []
        for sig in dict.fromkeys(caught):
            signal.raise_signal(sig)


_deferring: _Deferral | None = None  # the deferral in force (main thread only)
_holding: list[_Deferral] | None = None  # see interrupts_held


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Run the block with SIGINT and SIGTERM deferred to its end (then delivered: a
    KeyboardInterrupt raised there, with the block's work done or undone in full). Inside
    :func:`interrupts_held`, a block that completes keeps them deferred until the hold
    delivers them. Nested blocks defer to the outermost; outside the main thread (where no
    Python signal handler runs) this does nothing."""
    global _deferring
    if _deferring is not None or threading.current_thread() is not threading.main_thread():
        yield
        return
    deferral = _deferring = _Deferral()
    completed = False
    failed: BaseException | None = None
    try:
        yield
        completed = True
    except BaseException as exc:
        failed = exc
        raise
    finally:
        if completed and _holding is not None:
            _holding.append(deferral)
        else:
            _deferring = None
            try:
                deferral.deliver()
            except KeyboardInterrupt as interrupt:
                # the step failed and a deferred signal now replaces its exception: keep
                # it on the interrupt for the caller to report (the CLI prints it)
                interrupt.superseded = failed  # type: ignore[attr-defined]
                raise


@contextlib.contextmanager
def interrupts_held() -> Iterator[Callable[[], None]]:
    """Within the block, an :func:`interrupts_deferred` step that completes (a charge saved
    to its ledger) keeps SIGINT and SIGTERM deferred until the yielded function is called
    (at the latest, at the end of the block): a caller that must show what it was charged
    for (``dpbayes release``) gets the release in hand first, then the interrupt."""
    global _holding
    if _holding is not None or threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    kept: list[_Deferral] = []
    _holding = kept

    def deliver() -> None:
        global _holding, _deferring
        if _holding is kept:
            _holding = None
        while kept:
            deferral = kept.pop()
            if _deferring is deferral:
                _deferring = None
            deferral.deliver()

    try:
        yield deliver
    finally:
        deliver()


def _ledger_path(path: str | os.PathLike) -> Path:
    """The ledger's own file: symlinks resolved, so that a save (which replaces the file)
    and the lock file act on the file every name of it reaches. Opened through a link, a
    save replaced the link itself with a new file and locked beside it: two processes then
    kept two ledgers, and spent 1.5 of a budget of 1 between them. A file with other hard
    links is refused for the same reason (a save would leave them on the old file)."""
    p = Path(path).resolve()
    if p.is_dir():  # a folder's link count is its subfolders, not other names of a file
        raise LedgerError(f"ledger file {path} is a folder")
    try:
        links = p.stat().st_nlink
    except OSError:
        return p  # not there yet (a new ledger), or an error reading it reports itself
    if links > 1:
        raise LedgerError(_hard_links(p, links))
    return p


def _hard_links(path: Path, links: int) -> str:
    return (
        f"ledger file {path} has {links - 1} other hard link(s): a save replaces the file "
        "and would leave them on the old one (two ledgers); keep one name (a symlink is fine)"
    )


_SEP = "\x1f"  # between the parts of a unit key; a column name is JSON-quoted in it


def _user_key(column: Any) -> str:
    """A user-level unit: ``user`` + the JSON-quoted column, or ``user`` + ``?`` when the
    guarantee names none (its own unit: it matches only column-less new spends)."""
    return f"user{_SEP}{'?' if column is None else json.dumps(str(column))}"


def _unit_key(cost: Guarantee) -> str:
    """The privacy unit a guarantee protects, from its structured fields (never from the
    relation's free text): ``substitute``, ``add-remove`` (one record), a user identified
    by its user column, or ``substitute`` within the groups of a grouped release."""
    details = cost.details
    if details.get("privacy_unit") == "user":
        return _user_key(details.get("user_column"))
    if cost.neighbours is Neighbours.SUBSTITUTE and details.get("parallel_composition"):
        return f"substitute{_SEP}within{_SEP}{json.dumps(str(details['parallel_composition']))}"
    return str(cost.neighbours.value)


def _legacy_key(unit: str) -> str:
    """The unit key of a spend recorded before keys were, from its relation's text. Only a
    user-level spend that named no column is the wildcard ``user`` (it goes with one user
    column); an unrecognised text matches only itself."""
    text = unit.strip()
    if not text:
        return ""
    named = re.fullmatch(r"add/remove one user .* identified by (?P<col>'.*'|\".*\")", text)
    if named is not None:
        with contextlib.suppress(ValueError, SyntaxError):
            return _user_key(ast.literal_eval(named.group("col")))
        return text
    if text.startswith("add/remove one user"):
        return "user"
    grouped = re.fullmatch(r"substitute one record within its (?P<by>.*) group", text)
    if grouped is not None:  # the grouping column as repr wrote it (a string, a tuple...)
        with contextlib.suppress(ValueError, SyntaxError):
            by = ast.literal_eval(grouped.group("by"))
            return f"substitute{_SEP}within{_SEP}{json.dumps(str(by))}"
        return text
    if text.lower() == "substitute":
        return "substitute"
    if text.lower() in ("add-remove", "add/remove one record"):
        return "add-remove"
    return text


def _normal_key(key: str) -> str:
    """A key as this version writes it (the first keyed version wrote the column raw)."""
    parts = key.split(_SEP)
    named = (parts[0] == "user" and len(parts) == 2 and parts[1] != "?") or (
        parts[0] == "substitute" and len(parts) == 3
    )
    if named:
        try:
            json.loads(parts[-1])
        except ValueError:
            return _SEP.join([*parts[:-1], json.dumps(parts[-1])])
    return key


def _key_of(spend: Spend) -> str:
    return _normal_key(spend.unit_key) if spend.unit_key else _legacy_key(spend.unit)


def _compatible(a: str, b: str) -> bool:
    """Whether spends of units a and b add up to one guarantee. A user-level spend of a
    ledger from before, whose column was not recorded (``user``), goes with any one user
    column."""
    if a == b or not a or not b:
        return True
    named = "user" + _SEP
    return (a == "user" and b.startswith(named)) or (b == "user" and a.startswith(named))


def _unit_text(key: str) -> str:
    parts = _normal_key(key).split(_SEP)
    if parts[0] == "user":
        if len(parts) == 1:
            return "one user (add/remove, user level; its column not recorded)"
        if parts[1] == "?":
            return "one user (add/remove, user level; no user column named)"
        return f"one user identified by {json.loads(parts[1])!r} (add/remove, user level)"
    if parts[0] == "substitute" and len(parts) == 3:
        return f"substitute one record within its {json.loads(parts[2])!r} group"
    return {
        "substitute": "substitute-one-record neighbours",
        "add-remove": "add/remove-one-record neighbours",
    }.get(key, key)


def _check_scope(cost: Guarantee, scope: Iterable[str] | None) -> tuple[str, str]:
    """(the relation's text, the unit key) of ``cost``; ValueError for a scoped substitute
    guarantee."""
    unit = str(cost.details.get("neighbouring_relation") or cost.neighbours.value)
    if cost.details.get("user_column") is not None:
        unit += f" identified by {str(cost.details['user_column'])!r}"
    if scope is not None and cost.neighbours is Neighbours.SUBSTITUTE:
        raise ValueError(
            "scope (parallel composition over disjoint parts) needs add/remove neighbours: "
            "a substituted record can leave one part and enter another, which a substitute "
            "guarantee does not cover; release with neighbours='add-remove' or charge "
            "without scope"
        )
    return unit, _unit_key(cost)


class BudgetExceeded(ValueError):
    """A spend would exceed the budget; nothing was spent."""


class LedgerError(ValueError):
    """A ledger file is missing, unreadable or damaged."""


def _checksum(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class Accountant:
    """A total (epsilon, delta) budget that releases spend from.

    Parameters
    ----------
    epsilon, delta:
        The total budget; epsilon > 0, delta in [0, 1).
    path:
        Optional ledger file. If given, the ledger is written there after every spend;
        use :meth:`open` to continue from an existing ledger.
    simulation:
        ``False`` (default): a real budget, which refuses seeded simulation releases.
        ``True``: a simulation accountant for experiments and tests, which accepts only
        simulation releases (``Guarantee.simulation``) and keeps no ledger file.
    """

    def __init__(
        self,
        epsilon: float,
        delta: float = 0.0,
        *,
        path: str | os.PathLike | None = None,
        simulation: bool = False,
        composition: str = "basic",
    ):
        total = (check_epsilon(epsilon), check_delta(delta))
        if composition not in COMPOSITIONS:
            raise ValueError(
                f"composition must be one of {list(COMPOSITIONS)}, got {composition!r}"
            )
        if composition == "rdp" and total[1] == 0:
            raise ValueError(
                "composition='rdp' needs a budget delta > 0 (Rényi bounds convert to "
                "(eps, delta) only at delta > 0); use 'basic' for a pure eps budget"
            )
        if composition == "pld" and total[1] == 0:
            raise ValueError(
                "composition='pld' takes Gaussian-noise spends only, which need a budget "
                "delta > 0; use 'basic' for a pure eps budget"
            )
        if not isinstance(simulation, bool):
            raise TypeError(f"simulation must be True or False, got {type(simulation).__name__}")
        if simulation and path is not None:
            raise ValueError(
                "path must be None for a simulation accountant: simulation spends are "
                "experiments, not a budget ledger"
            )
        self._init_state(
            total, [], _ledger_path(path) if path is not None else None, simulation, composition
        )
        if self._path is not None:
            with self._file_lock():
                # Checked under the lock, so two processes cannot both create the ledger.
                if self._path.exists():
                    raise LedgerError(
                        f"ledger file {self._path} already exists; "
                        "use Accountant.open to continue it"
                    )
                with interrupts_deferred():  # created, or not, in full
                    self._save(created=True)

    def _init_state(
        self,
        total: tuple[float, float],
        spends: list[Spend],
        path: Path | None,
        simulation: bool = False,
        composition: str = "basic",
    ) -> None:
        self._simulation = simulation
        self._composition = composition
        self._total = total
        self._spends = spends
        self._totals = self._new_totals(spends)
        self._path = path
        self._lock = threading.RLock()
        # Spends whose charge block is running (outermost first); guarded by _lock, and
        # only ever non-empty in the thread that holds _lock.
        self._pending: list[Spend] = []

    # ----------------------------------------------------------------- persistence
    @classmethod
    def open(cls, path: str | os.PathLike) -> Accountant:
        """Continue the ledger saved at ``path``; a missing or damaged file is an error."""
        p = _ledger_path(path)
        acc = cls.__new__(cls)
        total, spends, composition = cls._read(p)
        acc._init_state(total, spends, p, composition=composition)
        return acc

    @staticmethod
    def _read(path: Path) -> tuple[tuple[float, float], list[Spend], str]:
        """The ledger's state. Every read (open, each charge under the lock) checks that
        the file has no other hard link (:func:`_ledger_path`): one made after the ledger
        was opened would otherwise keep the old file under another name at the next save."""
        try:
            with open(path, "rb") as fh:
                links = os.fstat(fh.fileno()).st_nlink
                raw = fh.read().decode("utf-8")
        except FileNotFoundError:
            raise LedgerError(f"ledger file {path} does not exist") from None
        except OSError as exc:
            raise LedgerError(f"ledger file {path} cannot be read: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise LedgerError(
                f"ledger file {path} is damaged (not UTF-8 text); "
                "refusing to treat it as a fresh budget"
            ) from None
        if links > 1:
            raise LedgerError(_hard_links(path, links))
        try:
            doc = json.loads(raw)
            keys = ["format", "version", "total", "spends"]
            if doc.get("version") != 1:
                keys.append("composition")
            body = {k: doc[k] for k in keys}
            if doc["format"] != _FORMAT or doc["version"] not in _READS:
                raise ValueError("unknown format")
            composition = body.get("composition", "basic")
            if composition not in COMPOSITIONS:
                raise ValueError(f"unknown composition {composition!r}")
            if doc["checksum"] != _checksum(body):
                raise ValueError("checksum mismatch")
            total = (
                check_epsilon(body["total"]["epsilon"]),
                check_delta(body["total"]["delta"]),
            )
            if not isinstance(body["spends"], list):
                raise TypeError("spends is not a list")
            spends = [Spend.from_dict(s) for s in body["spends"]]
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            raise LedgerError(
                f"ledger file {path} is damaged ({exc}); refusing to treat it as a fresh budget"
            ) from None
        return total, spends, composition

    def _save(self, created: bool = False) -> None:
        assert self._path is not None
        body = {
            "format": _FORMAT,
            "version": _VERSION,
            "total": {"epsilon": self._total[0], "delta": self._total[1]},
            "composition": self._composition,
            "spends": [s.to_dict() for s in self._spends],
        }
        doc = {**body, "checksum": _checksum(body)}
        tmp = self._path.with_name(self._path.name + ".tmp")
        try:
            with open(tmp, "w") as fh:
                json.dump(doc, fh, indent=1)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self._path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            outcome = "the ledger was not created" if created else "nothing was spent"
            raise LedgerError(
                f"ledger {self._path} could not be written ({exc.strerror or exc}); {outcome}"
            ) from exc
        # the ledger is written (renamed into place); making the rename durable is best
        # effort: a failure here must not drop a spend that is already on disk
        with contextlib.suppress(OSError):
            dir_fd = os.open(self._path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        if self._path is None:
            yield
            return
        lock_path = self._path.with_name(self._path.name + ".lock")
        with open(lock_path, "a") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    # ----------------------------------------------------------------- state
    @property
    def path(self) -> Path | None:
        return self._path

    @property
    def simulation(self) -> bool:
        """Whether this is a simulation accountant (accepts only seeded releases)."""
        return self._simulation

    @property
    def total(self) -> tuple[float, float]:
        return self._total

    @property
    def composition(self) -> str:
        """How spends add up: ``"basic"``, ``"pld"`` or ``"rdp"``."""
        return self._composition

    def _new_totals(self, spends: list[Spend]) -> _Totals | _TightTotals:
        if self._composition == "basic":
            return _Totals(spends)
        return _TightTotals(self._composition, self._total[1], spends)

    def _composed(self, extra: list[Spend] = []) -> tuple[float, float]:  # noqa: B006
        """Budget consumed by the recorded spends plus ``extra`` (read only)."""
        return self._totals.composed(extra)

    def _sync(self) -> None:
        """Read a ledger accountant's file again (call under ``self._lock``).

        Other processes (scikit-learn's workers, another CLI run) may have spent from the
        same ledger: what this accountant reports is the file's, not the state it had at
        its own last charge. The file is replaced whole by an atomic rename, so an
        unlocked read sees one complete version. Inside a charge (spends pending) the
        state in memory is the one under the file lock, and is kept.
        """
        if self._path is None or self._pending:
            return
        total, spends, composition = self._read(self._path)
        if spends != self._spends or total != self._total or composition != self._composition:
            self._total, self._spends, self._composition = total, spends, composition
            self._totals = self._new_totals(spends)

    @property
    def spends(self) -> tuple[Spend, ...]:
        with self._lock:
            self._sync()
            return tuple(self._spends)

    @property
    def spent(self) -> tuple[float, float]:
        with self._lock:
            self._sync()
            return self._composed()

    @property
    def remaining(self) -> tuple[float, float]:
        with self._lock:
            eps, dlt = self.spent
            return max(0.0, self._total[0] - eps), max(0.0, self._total[1] - dlt)

    def check_unit(self, cost: Guarantee, scope: Iterable[str] | None = None) -> None:
        """ValueError (the reason) if :meth:`charge` would refuse ``cost`` for its privacy
        unit or for a scope its relation does not allow, before any budget check: what a
        dry run or a quote asks besides whether the epsilon fits."""
        unit, key = _check_scope(cost, scope)
        ev = event_of(
            cost.epsilon, cost.delta, cost.sensitivity, cost.neighbours.value, cost.details
        )
        spend = Spend(
            cost.epsilon, cost.delta, unit=unit, unit_key=key, gaussian_ratio=ev.gaussian_ratio
        )
        self._check_filter(spend)
        with self._lock:
            self._sync()
            self._check_unit(spend)

    def _check_filter(self, spend: Spend) -> None:
        """Refuse a new spend this accountant's composition is not a valid filter for
        (:func:`~dpbayes.privacy.composition.filter_refusal`): a budget check by PLD or
        Rényi composition holds under adaptive choices only for the spends it is proven
        for. Spends read back from a ledger are counted, never refused."""
        why = filter_refusal(self._composition, spend.event)
        if why is not None:
            raise ValueError(f"{why} (nothing was spent)")

    def _check_unit(self, spend: Spend) -> None:
        """Refuse a spend whose privacy unit differs from the recorded ones'.

        Their epsilons do not add up under either relation: an add/remove eps costs up to
        2 eps under substitute, a substitute release publishes n (unbounded loss under
        add/remove), and a record-level eps costs a user with k rows k eps. Spends by a
        bare epsilon carry no unit and are the caller's to match.
        """
        new = _key_of(spend)
        if not new:
            return
        for old in [*self._spends, *self._pending]:
            have = _key_of(old)
            if not _compatible(have, new):
                raise ValueError(
                    f"this budget's spends protect {_unit_text(have)} and this "
                    f"release protects {_unit_text(new)}: their epsilons do not add "
                    "up to one guarantee; charge it to a separate budget (nothing was "
                    "spent)"
                )

    def _fits(self, extra: list[Spend]) -> bool:
        """Whether the recorded spends plus ``extra`` fit the total."""
        eps, dlt = self._composed(extra)
        return eps <= self._total[0] * (1 + _TOLERANCE) and dlt <= self._total[1] * (1 + _TOLERANCE)

    def can_spend(
        self,
        cost: Guarantee | float,
        delta: float = 0.0,
        *,
        scope: Iterable[str] | None = None,
    ) -> bool:
        """Whether a spend would fit now (advisory; :meth:`charge` checks again). ``cost``
        as for :meth:`charge`: a Guarantee is priced by its noise record under ``"pld"``
        and ``"rdp"`` (a bare epsilon carries none, so those ledgers refuse it)."""
        spend = self._priced(cost, delta, scope)
        if filter_refusal(self._composition, spend.event) is not None:
            return False  # charge refuses it
        with self._lock:
            self._sync()
            try:
                self._check_unit(spend)
            except ValueError:
                return False
            return self._fits([*self._pending, spend])

    def _priced(self, cost: Guarantee | float, delta: float, scope: Iterable[str] | None) -> Spend:
        """The spend ``cost`` would be (unrecorded), its Gaussian record included."""
        if isinstance(cost, Guarantee):
            unit, key = _check_scope(cost, scope)
            ev = event_of(
                cost.epsilon, cost.delta, cost.sensitivity, cost.neighbours.value, cost.details
            )
            return self._make_spend(
                cost.epsilon,
                cost.delta,
                "",
                scope,
                unit=unit,
                unit_key=key,
                gaussian_ratio=ev.gaussian_ratio,
            )
        return self._make_spend(cost, delta, "", scope)

    def spent_after(
        self,
        cost: Guarantee | float,
        delta: float = 0.0,
        *,
        scope: Iterable[str] | None = None,
    ) -> tuple[float, float]:
        """The (eps, delta) :attr:`spent` would be after one more spend (read only: nothing
        is recorded, and the total is not checked): the price of a release under this
        accountant's composition is this minus ``spent``.

        ``cost`` as for :meth:`charge`: an epsilon (with ``delta``), or a Guarantee, whose
        Gaussian noise record tight composition uses (so a Laplace and a Gaussian release
        can be priced against each other).
        """
        spend = self._priced(cost, delta, scope)
        self._check_filter(spend)  # priced as charged: a spend charge refuses is refused
        with self._lock:
            self._sync()
            self._check_unit(spend)
            return self._composed([*self._pending, spend])

    @staticmethod
    def _make_spend(
        epsilon: float,
        delta: float,
        label: str,
        scope: Iterable[str] | None,
        *,
        unit: str = "",
        unit_key: str = "",
        source: str = "",
        gaussian_ratio: float | None = None,
    ) -> Spend:
        sc = None if scope is None else tuple(str(s) for s in scope)
        if sc is not None and not sc:
            raise ValueError("scope must name at least one part of the data, or be None")
        if not isinstance(source, str):
            raise TypeError(f"source must be a string (a name), got {type(source).__name__}")
        return Spend(
            check_epsilon(epsilon),
            check_delta(delta),
            str(label),
            sc,
            time.time(),
            unit=unit,
            source=source,
            gaussian_ratio=gaussian_ratio,
            unit_key=unit_key,
        )

    # ----------------------------------------------------------------- spending
    @contextlib.contextmanager
    def charge(
        self,
        cost: Guarantee | float,
        delta: float = 0.0,
        *,
        label: str = "",
        scope: Iterable[str] | None = None,
        source: str = "",
    ) -> Iterator[Spend]:
        """Check the budget, run the block, and record the spend if the block succeeds.

        ``cost`` is a :class:`Guarantee` or an epsilon (with ``delta``). Raises
        :class:`BudgetExceeded` before the block runs if the spend does not fit, and
        ``ValueError`` for a guarantee that is not differentially private or whose
        ``simulation`` flag differs from this accountant's (a real budget refuses seeded
        simulation releases; a simulation accountant refuses real ones). The check, the
        block and the record happen under one lock, so concurrent releases cannot
        overspend.
        """
        if isinstance(cost, Guarantee):
            if not cost.private:
                raise ValueError(
                    f"cost is not differentially private ({cost.mechanism}); "
                    "no accountant accepts it as a release"
                )
            if cost.simulation and not self._simulation:
                raise ValueError(
                    "cost is a seeded simulation release (simulation=True, reproducible "
                    "noise): a real budget refuses it; release with rng=None, or charge "
                    "an Accountant(..., simulation=True) in experiments"
                )
            if self._simulation and not cost.simulation:
                raise ValueError(
                    "cost is a real release (secure noise) but this is a simulation "
                    "accountant, which accepts only seeded simulation releases; charge "
                    "a real Accountant"
                )
            ev = event_of(
                cost.epsilon, cost.delta, cost.sensitivity, cost.neighbours.value, cost.details
            )
            unit, key = _check_scope(cost, scope)
            spend = self._make_spend(
                cost.epsilon,
                cost.delta,
                label or cost.mechanism,
                scope,
                unit=unit,
                unit_key=key,
                source=source,
                gaussian_ratio=ev.gaussian_ratio,
            )
        else:
            spend = self._make_spend(cost, delta, label, scope, source=source)
        self._check_filter(spend)
        with self._charging(spend):
            yield spend

    @contextlib.contextmanager
    def _charging(self, spend: Spend) -> Iterator[None]:
        """:meth:`charge`'s check, block and record, for a made ``spend``."""
        with self._lock:
            nested = bool(self._pending)
            # A nested charge already holds the file lock (flock is per open file, so
            # taking it again would deadlock) and must not re-read the file.
            with contextlib.nullcontext() if nested else self._file_lock():
                if not nested:
                    self._sync()
                self._check_unit(spend)
                if not self._fits([*self._pending, spend]):
                    eps_used, dlt_used = self._composed(self._pending)
                    eps_left = max(0.0, self._total[0] - eps_used)
                    dlt_left = max(0.0, self._total[1] - dlt_used)
                    raise BudgetExceeded(
                        f"budget exceeded: spending (eps={spend.epsilon:.6g}, "
                        f"delta={spend.delta:.3g}) but only (eps={eps_left:.6g}, "
                        f"delta={dlt_left:.3g}) remains of ({self._total[0]:.6g}, "
                        f"{self._total[1]:.3g}); nothing was spent"
                    )
                self._pending.append(spend)
                try:
                    yield
                finally:
                    self._pending.pop()
                # the spend recorded in memory and on disk together: SIGINT or SIGTERM
                # during the save waits for its end, so that a save that completed is a
                # charge (the file holds it) and one that did not is none
                with interrupts_deferred():
                    self._spends.append(spend)
                    if self._path is not None:
                        try:
                            self._save()
                        except BaseException:
                            self._spends.pop()
                            raise
                    self._totals.add(spend)

    def spend(
        self,
        cost: Guarantee | float,
        delta: float = 0.0,
        *,
        label: str = "",
        scope: Iterable[str] | None = None,
        source: str = "",
    ) -> Spend:
        """Record a spend made elsewhere (same checks as :meth:`charge`)."""
        with self.charge(cost, delta, label=label, scope=scope, source=source) as s:
            pass
        return s

    def restore(self, spend: Spend) -> None:
        """Record a spend read back from a ledger kept elsewhere (the service's database
        rows), as it was recorded there (its Gaussian ratio included); checked against the
        budget like a charge (:class:`BudgetExceeded` if it does not fit)."""
        if not isinstance(spend, Spend):
            raise TypeError(f"spend must be a Spend, got {type(spend).__name__}")
        spend = Spend.from_dict(spend.to_dict())  # checked as a ledger's spends are (eps > 0)
        with self._charging(spend):
            pass

    def summary(self) -> dict[str, Any]:
        with self._lock:
            eps, dlt = self.spent
            reps, rdlt = self.remaining
            return self._summary(eps, dlt, reps, rdlt)

    def _summary(self, eps: float, dlt: float, reps: float, rdlt: float) -> dict[str, Any]:
        return {
            "total": {"epsilon": self._total[0], "delta": self._total[1]},
            "spent": {"epsilon": eps, "delta": dlt},
            "remaining": {"epsilon": reps, "delta": rdlt},
            "spends": len(self._spends),
            "path": str(self._path) if self._path else None,
            "simulation": self._simulation,
            "composition": self._composition,
        }

    def spends_frame(self) -> Any:
        """The ledger as a pandas DataFrame, one row per spend (epsilon, delta, label,
        scope, time as a UTC timestamp)."""
        import pandas as pd

        rows = [
            {
                "epsilon": s.epsilon,
                "delta": s.delta,
                "label": s.label,
                "scope": ", ".join(s.scope) if s.scope is not None else None,
                "time": pd.Timestamp(s.time, unit="s", tz="UTC") if s.time else pd.NaT,
            }
            for s in self.spends
        ]
        return pd.DataFrame(rows, columns=["epsilon", "delta", "label", "scope", "time"])

    def _display(self) -> tuple[str, list[tuple[str, str]]]:
        (te, td), (se, sd), (re_, rd) = self.total, self.spent, self.remaining

        def pair(e: float, d: float) -> str:
            return f"eps {num(e, 6)}" + (f", delta {num(d, 3)}" if td > 0 else "")

        rows = [
            ("composition", self._composition),
            ("total", pair(te, td)),
            ("spent", pair(se, sd) + f" in {len(self._spends)} spend(s)"),
            ("remaining", pair(re_, rd)),
        ]
        if self._path is not None:
            rows.append(("ledger", str(self._path)))
        last = self._spends[-3:]
        if last:
            rows.append(
                (
                    "last spends",
                    "; ".join(f"{s.label or '-'} (eps {num(s.epsilon, 4)})" for s in last),
                )
            )
        if self._simulation:
            rows.append(("simulation", "yes: takes only seeded (simulation) releases"))
        return f"Accountant(remaining eps {num(re_, 6)} of {num(te, 6)})", rows

    # -- copies ---------------------------------------------------------------------
    # An accountant is one budget: a copy that could be charged apart from it would spend
    # the same budget twice. scikit-learn's clone deep-copies an estimator's parameters
    # (GridSearchCV, cross_val_score), so copy and deepcopy return the accountant itself
    # and every clone charges the one budget. Another process gets it by pickling: a
    # ledger's accountant re-reads its file under the file lock at every charge, so its
    # copies there share the budget through the file; one without a ledger is refused
    # (its spends there would never come back).
    def __copy__(self) -> Accountant:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Accountant:
        return self

    def __getstate__(self) -> dict[str, Any]:
        if self._path is None:
            raise TypeError(
                "an Accountant without a ledger cannot be sent to another process (its "
                "spends there would not come back here); give it a ledger, "
                "Accountant(..., path=...), or run in one process (n_jobs=1)"
            )
        return {"path": str(self._path)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        path = _ledger_path(state["path"])  # the copy is the ledger, read again
        total, spends, composition = self._read(path)
        self._init_state(total, spends, path, False, composition)

    def __repr__(self) -> str:
        (te, td), (re_, rd) = self.total, self.remaining
        extra = f", delta {num(rd, 3)} of {num(td, 3)}" if td > 0 else ""
        where = f", ledger {self._path}" if self._path is not None else ""
        sim = ", simulation" if self._simulation else ""
        return (
            f"Accountant(remaining eps {num(re_, 6)} of {num(te, 6)}{extra}, "
            f"{len(self._spends)} spend(s){where}{sim})"
        )

    def _repr_html_(self) -> str:
        return display.html(self)
