"""Output events for the auditor: candidate sets of outputs and their selection.

A one-dimensional statistic of the output is discretised (its distinct values when there
are few, otherwise quantile bins of the pooled selection sample). Candidate events are
the threshold sets {bin >= j}, {bin < j} and the prefixes of the bins sorted by their
empirical likelihood ratio (the Neyman-Pearson optimal sets for the empirical
distributions). The event kept is the one with the largest eps lower bound on the
*selection* half; it is then measured on the independent other half.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = ["Event", "best_events", "features"]

MAX_DISCRETE = 128


@dataclass(frozen=True)
class Event:
    """A set of outputs: those whose ``statistic`` falls into the bins flagged in ``mask``."""

    statistic: int
    edges: np.ndarray | None
    values: np.ndarray | None
    mask: np.ndarray
    description: str

    def bins(self, column: np.ndarray) -> np.ndarray:
        if self.values is not None:
            idx = np.searchsorted(self.values, column)
            idx = np.clip(idx, 0, self.values.size - 1)
            hit = self.values[idx] == column
            return np.where(hit, idx, -1)
        assert self.edges is not None
        return np.searchsorted(self.edges, column, side="right")

    def contains(self, column: np.ndarray) -> np.ndarray:
        b = self.bins(column)
        inside = np.zeros(b.shape, dtype=bool)
        ok = b >= 0
        inside[ok] = self.mask[b[ok]]
        return inside


_PRIMES = np.array([2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53], dtype=float)


def features(outputs: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """The one-dimensional statistics audited.

    Every coordinate; for d > 1 also their sum and a *joint* code of the whole output
    (its projection on sqrt(primes), one-to-one on the finite output sets of the discrete
    mechanisms, so that events can be any set of whole outputs).
    """
    d = outputs.shape[1]
    cols = [(f"output[{j}]", outputs[:, j]) for j in range(d)]
    if d > 1:
        cols.append(("sum(output)", outputs.sum(axis=1)))
        w = np.sqrt(np.resize(_PRIMES, d))
        cols.append(("output (joint)", outputs @ w))
    return cols


def _cp_lower(k: np.ndarray, m: int, alpha: float) -> np.ndarray:
    out = np.zeros(k.shape)
    pos = k > 0
    out[pos] = stats.beta.ppf(alpha, k[pos], m - k[pos] + 1)
    return out


def _cp_upper(k: np.ndarray, m: int, alpha: float) -> np.ndarray:
    out = np.ones(k.shape)
    low = k < m
    out[low] = stats.beta.ppf(1.0 - alpha, k[low] + 1, m - k[low])
    return out


def _score(ka: np.ndarray, kb: np.ndarray, m: int, delta: float, alpha: float) -> np.ndarray:
    lo = _cp_lower(ka.astype(float), m, alpha) - delta
    hi = _cp_upper(kb.astype(float), m, alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(lo > 0, np.log(np.maximum(lo, 1e-300) / hi), -np.inf)
    return s


def _discretise(u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
    pooled = np.concatenate([u, v])
    values = np.unique(pooled)
    if values.size <= MAX_DISCRETE:
        return None, values
    nbins = int(min(64, max(8, pooled.size // 200)))
    edges = np.unique(np.quantile(pooled, np.linspace(0, 1, nbins + 1)[1:-1]))
    return edges, None


def best_events(
    u: np.ndarray, v: np.ndarray, statistic: int, name: str, delta: float, alpha: float = 0.05
) -> list[tuple[float, Event]]:
    """For each direction (u over v, v over u) the event with the best selection score.

    Returns ``[(score_uv, event_uv), (score_vu, event_vu)]``; the score is the eps lower
    bound on the selection half at one-sided level ``alpha`` (a heuristic for choosing).
    """
    if v.size != u.size:
        raise ValueError("u and v must have the same number of samples")
    edges, values = _discretise(u, v)
    out = _best_on(u, v, statistic, name, delta, alpha, edges, values)
    if edges is not None:
        # values drawn more than once are atoms, not continuous noise (a count released
        # without noise now and then): quantile bins merged 1000 (on x) with 1001 (on x')
        # and the auditor passed a mechanism whose eps is infinite. The atoms are also
        # audited as single outputs, the better event per direction kept (chosen on the
        # selection half like every event)
        pooled, counts = np.unique(np.concatenate([u, v]), return_counts=True)
        repeated = np.flatnonzero(counts >= 2)
        if repeated.size:
            top = repeated[np.argsort(-counts[repeated], kind="stable")[:MAX_DISCRETE]]
            atoms = _best_on(u, v, statistic, name, delta, alpha, None, np.sort(pooled[top]))
            if len(atoms) == len(out):
                out = [max(a, b, key=lambda t: t[0]) for a, b in zip(out, atoms, strict=True)]
    return out


def _best_on(
    u: np.ndarray,
    v: np.ndarray,
    statistic: int,
    name: str,
    delta: float,
    alpha: float,
    edges: np.ndarray | None,
    values: np.ndarray | None,
) -> list[tuple[float, Event]]:
    """:func:`best_events` on one discretisation (bins ``edges`` or single ``values``)."""
    m = int(u.size)
    probe = Event(statistic, edges, values, np.zeros(1, dtype=bool), "")
    nb = values.size if values is not None else (edges.size + 1)  # type: ignore[union-attr]
    bu = probe.bins(u)
    bv = probe.bins(v)
    cu = np.bincount(bu[bu >= 0], minlength=nb)
    cv = np.bincount(bv[bv >= 0], minlength=nb)
    out: list[tuple[float, Event]] = []
    for ca, cb, label in ((cu, cv, "x over x'"), (cv, cu, "x' over x")):
        masks: list[np.ndarray] = []
        descs: list[str] = []
        order = np.argsort(-(ca + 0.5) / (cb + 0.5), kind="stable")
        for j in range(1, nb):
            pref = np.zeros(nb, dtype=bool)
            pref[order[:j]] = True
            masks.append(pref)
            descs.append("likelihood-ratio set")
            up = np.zeros(nb, dtype=bool)
            up[j:] = True
            masks.append(up)
            masks.append(~up)
            descs += ["upper", "lower"]
        if not masks:
            continue
        mat = np.array(masks)
        ka = mat @ ca
        kb = mat @ cb
        scores = _score(ka, kb, m, delta, alpha)
        i = int(np.argmax(scores))
        mask = mat[i]
        desc = _describe(name, descs[i], mask, edges, values)
        out.append((float(scores[i]), Event(statistic, edges, values, mask, f"{desc} ({label})")))
    return out


def _describe(
    name: str, kind: str, mask: np.ndarray, edges: np.ndarray | None, values: np.ndarray | None
) -> str:
    if values is not None:
        chosen = values[mask]
        shown = ", ".join(f"{x:.6g}" for x in chosen[:8]) + (" ..." if chosen.size > 8 else "")
        return f"{name} in {{{shown}}}"
    assert edges is not None
    if kind in ("upper", "lower"):
        j = int(np.argmax(mask)) if kind == "upper" else int(np.argmin(mask))
        return f"{name} {'>=' if kind == 'upper' else '<'} {edges[j - 1]:.6g}"
    return f"{name} in {int(mask.sum())} of {mask.size} quantile bins"
