"""Empirical privacy auditor: a lower bound on eps from outputs on neighbouring data sets.

For every pair (x, x') the mechanism is run ``samples`` times on x and on x'. The first
half of the outputs chooses, for each direction, the output event E with the largest
empirical privacy loss (:mod:`dpbayes.audit.events`); the pairs and events with the best
selection scores are then measured on the second, independent half. With one-sided
Clopper-Pearson bounds at level alpha' = (1 - confidence) / (2 T) for T measured events
(a union bound over the two probabilities of every event),

    eps_lb = max over measured (E, x, x') of ln((P_x(E)_lo - delta) / P_x'(E)_hi)

is, with probability at least ``confidence``, below the mechanism's true eps: if the
mechanism were (eps, delta)-DP then P_x(E) <= e^eps P_x'(E) + delta for every E. The
audit *fails* a mechanism when eps_lb exceeds the eps it claims, or when the exact eps
(below) exceeds it by more than the relative tolerance :data:`EXACT_TOLERANCE`. A pass is
not a proof of privacy: it only says that these samples found no violation.

When the mechanism has finitely many outputs and exposes their probabilities
(``output_log_distribution(data) -> (outputs, log-probabilities)``, or
``output_distribution(data) -> (outputs, probabilities)``, or ``log_distribution=`` /
``distribution=``), the result also states the *exact* eps over the pairs searched
(:mod:`dpbayes.audit.exact`, computed from log-probabilities, so that probabilities that
underflow do not make it infinite or understate it),
the pairs are ranked by the bound their distributions would give at this sample size
instead of by a sampling pilot, and the events are the likelihood-ratio sets of the exact
distributions, fixed before sampling so that all samples measure them (the bound stays
valid even if the stated distribution were wrong: any fixed event gives one). The
sampling bound is never above the exact eps (except with probability 1 - confidence), so
it can fail a mechanism only where the exact loss exceeds the claim; an exact eps above
the claim fails the mechanism even where the samples are too few to show it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from dpbayes.audit.bounds import clopper_pearson_lower, clopper_pearson_upper, epsilon_lower_bound
from dpbayes.audit.events import Event, best_events, features
from dpbayes.audit.exact import (
    Distribution,
    as_log_distribution,
    best_output_sets,
    expected_lower_bound,
    pair_exact_epsilon_log,
)
from dpbayes.privacy.noise import noise_source
from dpbayes.privacy.validation import (
    check_delta,
    check_epsilon,
    check_flag,
    check_int,
    check_probability,
)
from dpbayes.progress import Progress

__all__ = ["EXACT_TOLERANCE", "AuditResult", "NeighbourPair", "PairAudit", "as_vector", "audit"]

#: Relative numerical tolerance of the exact eps against the claim: an exact eps above
#: claim * (1 + EXACT_TOLERANCE) fails the audit. The exact eps is computed in floating
#: point (log-probabilities of about 1e-16 relative error, a bisection for delta > 0); a
#: mechanism exactly at its claim must not fail on rounding.
EXACT_TOLERANCE = 1e-9


def _exact_exceeds(exact: float | None, claimed: float) -> bool:
    """Whether an exact eps (None: unknown) exceeds the claimed eps beyond the tolerance."""
    return exact is not None and exact > claimed * (1.0 + EXACT_TOLERANCE)


@dataclass(frozen=True)
class NeighbourPair:
    """Two neighbouring data sets and a label saying how they differ."""

    x: Any
    x_prime: Any
    label: str = ""


@dataclass(frozen=True)
class PairAudit:
    """The measured bound of one (pair, direction, event)."""

    pair: str
    direction: str
    event: str
    count_x: int
    count_x_prime: int
    samples: int
    p_lower: float
    p_upper: float
    epsilon_lower_bound: float
    selection_score: float


@dataclass(frozen=True)
class AuditResult:
    """What an audit found. ``passed`` means no violation of the claim was detected."""

    mechanism: str
    claimed_epsilon: float
    claimed_delta: float
    epsilon_lower_bound: float
    confidence: float
    samples: int
    worst_pair: str
    event: str
    passed: bool
    pairs_searched: int
    time_s: float
    measured: list[PairAudit] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    exact_epsilon: float | None = None
    exact_worst_pair: str | None = None

    @property
    def exact_exceeds_claim(self) -> bool:
        """The exact eps over the pairs searched exceeds the claim (a violation)."""
        return _exact_exceeds(self.exact_epsilon, self.claimed_epsilon)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["measured"] = [asdict(p) for p in self.measured]
        if d["exact_epsilon"] is not None and not math.isfinite(d["exact_epsilon"]):
            d["exact_epsilon"] = "inf"  # JSON has no infinity
        d["exact_exceeds_claim"] = self.exact_exceeds_claim
        return d

    def describe(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return (
            f"{verdict}: {self.mechanism} claims eps={self.claimed_epsilon:.4g}"
            f"{f', delta={self.claimed_delta:.3g}' if self.claimed_delta else ''}; "
            f"empirical lower bound {self.epsilon_lower_bound:.4g} at {self.confidence:.0%} "
            f"confidence ({self.samples} samples per data set, worst pair {self.worst_pair}, "
            f"event {self.event})"
            + (
                ""
                if self.exact_epsilon is None
                else f"; exact eps over the pairs searched {self.exact_epsilon:.4g} "
                f"(pair {self.exact_worst_pair})"
                + (
                    f" exceeds the claim eps={self.claimed_epsilon:.4g}"
                    if self.exact_exceeds_claim
                    else ""
                )
            )
        )


def as_vector(output: Any) -> np.ndarray:
    """A mechanism's output as a flat float vector (numbers, arrays, Noisy, Release, dists)."""
    value = output
    for attr in ("value",):  # Noisy / program results
        if hasattr(value, attr) and not isinstance(value, np.ndarray):
            value = getattr(value, attr)
    if hasattr(value, "released") and isinstance(value.released, dict):  # Release
        parts = [np.ravel(np.asarray(v, dtype=float)) for v in value.released.values()]
        return np.concatenate(parts) if parts else np.zeros(0)
    if isinstance(getattr(value, "params", None), dict):  # a distribution
        parts = [np.ravel(np.asarray(v, dtype=float)) for v in value.params.values()]
        return np.concatenate(parts)
    if isinstance(value, tuple | list) and value and not np.isscalar(value[0]):
        return np.concatenate([as_vector(v) for v in value])
    try:
        return np.ravel(np.asarray(value, dtype=float))
    except (TypeError, ValueError):
        raise TypeError(
            f"cannot turn an output of type {type(output).__name__} into numbers; "
            "pass statistic=... to audit()"
        ) from None


def _draw(
    mechanism: Callable[..., Any],
    data: Any,
    samples: int,
    gen: np.random.Generator,
    statistic: Callable[[Any], Any],
    batch: bool,
) -> np.ndarray:
    if batch:
        raw = mechanism(data, gen, samples)
        rows = [np.ravel(np.asarray(statistic(o), dtype=float)) for o in raw]
    else:
        rows = [
            np.ravel(np.asarray(statistic(mechanism(data, gen)), dtype=float))
            for _ in range(samples)
        ]
    width = {r.size for r in rows}
    if len(width) != 1 or 0 in width:
        raise ValueError("mechanism outputs must all map to vectors of one non-zero length")
    out = np.array(rows, dtype=float)
    if not np.all(np.isfinite(out)):
        raise ValueError("mechanism outputs must be finite numbers")
    return out


def _counting(mechanism: Callable[..., Any], bar: Progress) -> Callable[..., Any]:
    """``mechanism``, reporting every output it makes to the progress ``bar``."""

    def run(data: Any, gen: np.random.Generator, *size: int) -> Any:
        out = mechanism(data, gen, *size)
        bar.update(size[0] if size else 1)
        return out

    return run


def _pairs(pairs: Iterable[Any]) -> list[NeighbourPair]:
    out: list[NeighbourPair] = []
    for i, p in enumerate(pairs):
        if isinstance(p, NeighbourPair):
            out.append(p if p.label else NeighbourPair(p.x, p.x_prime, f"pair {i}"))
        elif isinstance(p, Sequence) and len(p) in (2, 3):
            out.append(NeighbourPair(p[0], p[1], str(p[2]) if len(p) == 3 else f"pair {i}"))
        else:
            raise TypeError("pairs must be NeighbourPair objects or (x, x_prime[, label]) tuples")
    if not out:
        raise ValueError("pairs must contain at least one pair of neighbouring data sets")
    return out


def audit(
    mechanism: Callable[..., Any],
    pairs: Iterable[Any],
    *,
    epsilon: float,
    delta: float = 0.0,
    samples: int = 20_000,
    confidence: float = 0.95,
    statistic: Callable[[Any], Any] | None = None,
    tests: int = 2,
    keep_pairs: int | None = None,
    batch: bool = False,
    rng: Any = None,
    name: str | None = None,
    distribution: Callable[[Any], Distribution] | None = None,
    log_distribution: Callable[[Any], Distribution] | None = None,
) -> AuditResult:
    """Audit ``mechanism`` against its claimed (epsilon, delta) on neighbouring ``pairs``.

    Parameters
    ----------
    mechanism:
        ``mechanism(data, rng) -> output`` (``rng`` a numpy Generator the mechanism must
        use for its noise, e.g. ``mech.release(value, rng=rng)``); with ``batch=True``,
        ``mechanism(data, rng, size)`` returning ``size`` outputs.
    pairs:
        Neighbouring data sets: :class:`NeighbourPair` or ``(x, x_prime[, label])``.
    epsilon, delta:
        The claimed guarantee.
    samples:
        Outputs drawn per data set and pair (half select the events, half measure them;
        with output distributions the events are fixed in advance and all measure).
    confidence:
        Probability that the reported lower bound is below the true eps.
    statistic:
        A callable mapping an output to numbers (default :func:`as_vector`).
    tests:
        How many of the best (pair, direction, event) candidates are measured; the
        confidence is split among them (Bonferroni).
    keep_pairs:
        With more pairs than this, the pairs are ranked and only the best ``keep_pairs``
        are audited with ``samples`` fresh outputs: by a pilot of ``max(500, samples // 5)``
        outputs per data set (default 2 pairs), or, with output distributions, by the
        bound their distributions would give (:func:`~dpbayes.audit.exact.expected_lower_bound`,
        default 1 pair). Either ranking is independent of the samples of the bound.
    batch:
        True or False: whether ``mechanism`` takes a ``size`` (see ``mechanism``).
    rng:
        Seed or Generator for the simulation (the audit is an experiment).
    distribution:
        ``distribution(data) -> (outputs, probabilities)``, the exact output distribution
        of a mechanism with finitely many outputs. Adds ``exact_epsilon``; an exact eps
        above the claim (beyond :data:`EXACT_TOLERANCE`) fails the audit.
    log_distribution:
        The same as ``(outputs, log-probabilities)`` (``-inf`` for impossible outputs):
        exact where probabilities underflow. Give at most one of the two; by default the
        mechanism's ``output_log_distribution`` attribute, else its
        ``output_distribution``, if any.
    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    samples = check_int(samples, "samples", minimum=20)
    conf = check_probability(confidence, "confidence", open_interval=True)
    tests = check_int(tests, "tests", minimum=1)
    batch = check_flag(batch, "batch")
    if not callable(mechanism):
        raise TypeError(f"mechanism must be callable, got {type(mechanism).__name__}")
    if statistic is not None and not callable(statistic):
        raise TypeError(f"statistic must be callable, got {type(statistic).__name__}")
    dist_fn = _log_distribution(mechanism, distribution, log_distribution)
    keep = check_int(
        keep_pairs if keep_pairs is not None else (1 if dist_fn else 2), "keep_pairs", minimum=1
    )
    stat = statistic or as_vector
    plist = _pairs(pairs)
    gen = noise_source(rng).generator()
    t0 = time.perf_counter()

    exact, exact_pair, dists = None, None, None
    search = max(500, samples // 5) if dist_fn is None and len(plist) > keep else 0
    total = 2 * (samples * min(keep, len(plist)) + search * len(plist))
    with Progress(total, "audit", unit="output") as bar:
        run = _counting(mechanism, bar)
        if dist_fn is not None:
            exact, exact_pair, dists = _exact(dist_fn, plist, dlt)
            alpha_sel = (1.0 - conf) / (2.0 * tests)
            power = [
                expected_lower_bound(dx, dy, samples, alpha=alpha_sel, delta=dlt, log=True)
                for dx, dy in dists
            ]
            order = sorted(range(len(plist)), key=lambda i: -power[i])[:keep]
            chosen = _exact_events(
                run, plist, order, dists, samples, gen, stat, batch, alpha_sel, dlt, tests
            )
        else:
            if search:
                finalists = _pilot(run, plist, keep, search, gen, stat, batch, dlt)
            else:
                finalists = plist
            chosen = _split_events(run, finalists, samples, gen, stat, batch, dlt, tests)
    alpha = (1.0 - conf) / (2.0 * len(chosen))
    measured: list[PairAudit] = []
    for score, label, direction, description, k_num, k_den, m in chosen:
        p_lo = clopper_pearson_lower(k_num, m, alpha)
        p_hi = clopper_pearson_upper(k_den, m, alpha)
        measured.append(
            PairAudit(
                pair=label,
                direction=direction,
                event=description,
                count_x=k_num if direction == "x over x'" else k_den,
                count_x_prime=k_den if direction == "x over x'" else k_num,
                samples=m,
                p_lower=p_lo,
                p_upper=p_hi,
                epsilon_lower_bound=epsilon_lower_bound(p_lo, p_hi, dlt),
                selection_score=score if math.isfinite(score) else -1.0,
            )
        )
    worst = max(measured, key=lambda r: r.epsilon_lower_bound)
    lb = worst.epsilon_lower_bound
    return AuditResult(
        mechanism=str(
            name
            or (lambda v: v if isinstance(v, str) else None)(getattr(mechanism, "name", None))
            or getattr(mechanism, "__name__", type(mechanism).__name__)
        ),
        claimed_epsilon=eps,
        claimed_delta=dlt,
        epsilon_lower_bound=lb,
        confidence=conf,
        samples=samples,
        worst_pair=worst.pair,
        event=worst.event,
        passed=bool(lb <= eps) and not _exact_exceeds(exact, eps),
        pairs_searched=len(plist),
        time_s=time.perf_counter() - t0,
        measured=measured,
        exact_epsilon=exact,
        exact_worst_pair=exact_pair,
    )


# (selection score, pair, direction, event, count in numerator, in denominator, samples)
Chosen = tuple[float, str, str, str, int, int, int]


def _log_distribution(
    mechanism: Any,
    distribution: Callable[[Any], Distribution] | None,
    log_distribution: Callable[[Any], Distribution] | None,
) -> Callable[[Any], Distribution] | None:
    """``data -> (outputs, log-probabilities)`` from whichever form is given, or None."""
    if distribution is not None and log_distribution is not None:
        raise ValueError("give distribution or log_distribution, not both")
    for fn, name, is_log in (
        (log_distribution, "log_distribution", True),
        (distribution, "distribution", False),
        (getattr(mechanism, "output_log_distribution", None), "output_log_distribution", True),
        (getattr(mechanism, "output_distribution", None), "output_distribution", False),
    ):
        if fn is None:
            continue
        if not callable(fn):
            raise TypeError(f"{name} must be callable, got {type(fn).__name__}")
        if is_log:
            return fn
        # a linear form that carries its log form (programs.exact.output_distribution):
        # read the logs, exact where the probabilities underflow
        log_form = getattr(fn, "output_log_distribution", None)
        if callable(log_form):
            return log_form
        linear = fn
        return lambda data: as_log_distribution(linear(data), "distribution")
    return None


def _exact(
    dist_fn: Callable[[Any], Distribution], plist: list[NeighbourPair], delta: float
) -> tuple[float, str, list[tuple[Distribution, Distribution]]]:
    """Exact eps over the pairs (max, and where) and each pair's two log-distributions."""
    best, where, dists = -1.0, "", []
    for pair in plist:
        dx, dy = dist_fn(pair.x), dist_fn(pair.x_prime)
        e = pair_exact_epsilon_log(dx, dy, delta)
        if e > best:
            best, where = e, pair.label
        dists.append((dx, dy))
    return best, where, dists


def _exact_events(
    mechanism: Callable[..., Any],
    plist: list[NeighbourPair],
    order: list[int],
    dists: list[tuple[Distribution, Distribution]],
    samples: int,
    gen: np.random.Generator,
    stat: Callable[[Any], Any],
    batch: bool,
    alpha: float,
    dlt: float,
    tests: int,
) -> list[Chosen]:
    """Events fixed from the exact distributions, counted on all ``samples`` outputs."""
    out: list[Chosen] = []
    for i in order:
        pair = plist[i]
        ox = _draw(mechanism, pair.x, samples, gen, stat, batch)
        oy = _draw(mechanism, pair.x_prime, samples, gen, stat, batch)
        for ev in best_output_sets(dists[i][0], dists[i][1], samples, alpha, dlt, log=True):
            in_x, in_y = int(ev.contains(ox).sum()), int(ev.contains(oy).sum())
            num, den = (in_x, in_y) if ev.direction == "x over x'" else (in_y, in_x)
            out.append(
                (ev.expected_bound, pair.label, ev.direction, ev.description, num, den, samples)
            )
    out.sort(key=lambda c: -c[0])
    return out[:tests]


def _split_events(
    mechanism: Callable[..., Any],
    finalists: list[NeighbourPair],
    samples: int,
    gen: np.random.Generator,
    stat: Callable[[Any], Any],
    batch: bool,
    dlt: float,
    tests: int,
) -> list[Chosen]:
    """Events chosen on the first half of the outputs, counted on the second half."""
    half = samples // 2
    candidates: list[tuple[float, str, str, Event, np.ndarray, np.ndarray]] = []
    for pair in finalists:
        ox = _draw(mechanism, pair.x, samples, gen, stat, batch)
        oy = _draw(mechanism, pair.x_prime, samples, gen, stat, batch)
        if ox.shape[1] != oy.shape[1]:
            raise ValueError("outputs on x and x_prime must have the same length")
        sel_x, sel_y = features(ox[:half]), features(oy[:half])
        mea_x, mea_y = features(ox[half : 2 * half]), features(oy[half : 2 * half])
        for j, (fname, u) in enumerate(sel_x):
            for score, ev in best_events(u, sel_y[j][1], j, fname, dlt):
                swap = ev.description.endswith("(x' over x)")
                num, den = (mea_y[j][1], mea_x[j][1]) if swap else (mea_x[j][1], mea_y[j][1])
                direction = "x' over x" if swap else "x over x'"
                candidates.append((score, pair.label, direction, ev, num, den))

    candidates.sort(key=lambda c: -c[0] if math.isfinite(c[0]) else math.inf)
    # keep the best `tests` candidates that are different events (the coordinates of an
    # output can define the same set twice, e.g. counts [j, n - j])
    chosen: list[Chosen] = []
    seen: set[tuple[str, str, bytes, bytes]] = set()
    for score, label, direction, ev, num, den in candidates:
        in_num, in_den = ev.contains(num), ev.contains(den)
        key = (label, direction, np.packbits(in_num).tobytes(), np.packbits(in_den).tobytes())
        if key in seen:
            continue
        seen.add(key)
        chosen.append(
            (score, label, direction, ev.description, int(in_num.sum()), int(in_den.sum()), half)
        )
        if len(chosen) == tests:
            break
    return chosen


def _pilot(
    mechanism: Callable[..., Any],
    plist: list[NeighbourPair],
    keep: int,
    search: int,
    gen: np.random.Generator,
    stat: Callable[[Any], Any],
    batch: bool,
    dlt: float,
) -> list[NeighbourPair]:
    """The ``keep`` pairs with the largest empirical loss on ``search`` outputs each."""
    ranked = []
    for i, pair in enumerate(plist):
        ox = _draw(mechanism, pair.x, search, gen, stat, batch)
        oy = _draw(mechanism, pair.x_prime, search, gen, stat, batch)
        best = max(
            (
                sc
                for (_, u), (_, v) in zip(features(ox), features(oy), strict=True)
                for sc, _ in best_events(u, v, 0, "", dlt)
            ),
            default=-math.inf,
        )
        ranked.append((best, i))
    ranked.sort(key=lambda t: -t[0] if math.isfinite(t[0]) else math.inf)
    return [plist[i] for _, i in ranked[:keep]]
