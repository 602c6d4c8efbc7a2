"""The MCMC over the true joint table N shared by every Bayesian-network target.

:func:`gibbs_tables` drives the sampler of :mod:`.sampler` (``init`` / ``step`` over
NamedTuple states; pair and relabelling moves compiled in :mod:`._kernels`, exact for the
target below) over ``chains`` chains with adaptive relabelling widths in burn-in; the
target is P(N) (Dirichlet-multinomial) times the release's likelihood: noisy counts or
Fourier coefficients (:class:`Observations`) and, for posterior sampling and the MAP,
the extra terms of :class:`~.sampler.Extra`. :func:`summarise` keeps the second half and
computes R-hat/ESS per family count.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpbayes.models.bayes_net import BayesNet
from dpbayes.privacy.noise import noise_source
from dpbayes.progress import Progress
from dpbayes.release.base import Release
from dpbayes.release.bayes_net.sampler import Extra, adapt, init, step, target
from dpbayes.release.mcmc import (
    Diagnostics,
    diagnose,
)

MAX_JOINT_CELLS = 4096
DEFAULT_SWEEPS = 4000
ADAPT = 50  # sweeps between adaptations of the relabelling widths (burn-in only)


def summarise(
    model: BayesNet, fam_tables: np.ndarray, its: int
) -> tuple[dict[str, np.ndarray], Diagnostics]:
    """The kept half's family tables per node, and R-hat/ESS of every family count."""
    keep = fam_tables[:, its // 2 :]  # (chains, kept, sum of the family-table sizes)
    count_draws, names, series = {}, [], []
    offset = 0
    for v in model.nodes:
        size = int(np.prod(model.table_shape(v)))
        tab = keep[:, :, offset : offset + size].astype(float)
        offset += size
        for f in range(size):
            names.append(f"{v}[{f}]")
            series.append(tab[:, :, f])
        count_draws[v] = tab.reshape(-1, *model.table_shape(v))
    diag = diagnose(np.stack(series, axis=2), names, what="noise-aware Bayesian-network posterior")
    return count_draws, diag


def gibbs_tables(
    model: BayesNet, n: int, obs: Observations, sweeps: int, m: int, rng: Any, extra: Extra
) -> np.ndarray:
    """MCMC on the joint table N (:mod:`.sampler`, compiled in :mod:`._kernels`);
    returns the family counts after every sweep, shape (m, sweeps, sum of the
    family-table sizes), flat in ``model.nodes`` order.

    A sweep: max(cells, 8) pair moves (exact conditional of the records moved between two
    random cells; three in four overrelaxed), then max(F / 2, nodes) relabelling moves
    (F family cells in all). The relabelling widths adapt during the burn-in half only.
    """
    gen = noise_source(rng).generator()
    tg = target(model, n, obs.matrix, obs.released, obs.scale, extra)
    cells = tg.fam_idx.shape[1]
    # over-dispersed starts: N ~ Multinomial(n, Dirichlet(1))
    starts = np.stack([gen.multinomial(n, gen.dirichlet(np.ones(cells))) for _ in range(m)])
    st = init(tg, starts, widths=max(1, round(math.sqrt(n))))
    out = np.empty((m, sweeps, st.famc.shape[1]), dtype=np.int64)
    burn = sweeps // 2
    chunk = max(1, 2_000_000 // (m * (3 * tg.pair_moves + (5 + tg.slices) * tg.relabel_moves)))
    s0 = 0
    bar = Progress(m * sweeps, "noise-aware Bayes-net MCMC", unit="sweep")
    while s0 < sweeps:
        # burn-in: chunks of ADAPT sweeps, then the relabelling widths are tuned; the kept
        # half runs with fixed widths (a fixed, valid MH kernel)
        s1 = min(s0 + min(chunk, ADAPT), burn) if s0 < burn else min(s0 + chunk, sweeps)
        st, out[:, s0:s1] = step(tg, st, gen, s1 - s0)
        if s1 <= burn:
            st = adapt(st, n)
        bar.update(m * (s1 - s0))
        s0 = s1
    bar.close()
    return out


class Observations:
    """Released values r_o = matrix[o] . N + Lap(scale), as -|r_o - matrix[o] . N| / scale.

    For counts truncated to [0, n] the released value is clipped to [0, n] first: a value
    at a bound has the Laplace tail's probability, log 1/2 - |bound - x| / scale for
    every feasible true count x, the interior density up to a constant.
    """

    def __init__(self, matrix: np.ndarray, released: np.ndarray, scale: float) -> None:
        self.matrix = np.ascontiguousarray(matrix, dtype=float)
        self.released = np.ascontiguousarray(released, dtype=float)
        self.scale = scale


def count_observations(
    model: BayesNet, rel: Release, fam: list[np.ndarray], n: int, scale: float
) -> Observations:
    """Algorithm 1: every family-table cell, truncated to [0, n]."""
    blocks, released = [], []
    for vi, v in enumerate(model.nodes):
        size = int(np.prod(model.table_shape(v)))
        blocks.append((fam[vi][None, :] == np.arange(size)[:, None]).astype(float))
        released.append(np.asarray(rel.released["counts"][v], dtype=float).ravel())
    r = np.clip(np.concatenate(released), 0.0, float(n))
    return Observations(np.concatenate(blocks), r, scale)


def fourier_observations(model: BayesNet, rel: Release, scale: float) -> Observations:
    """Algorithm 2: the noised Fourier coefficients c_a = sum_cells N (-1)^<a, cell>."""
    names = list(model.nodes)
    cards = [model.cardinality(v) for v in names]
    codes = np.indices(cards).reshape(len(cards), -1)
    rows, released = [], []
    for label, value in rel.released["coefficients"].items():
        if label == "{}":
            continue  # the empty set is n (public) plus the public raise: no information
        mask = [names.index(u) for u in label.split(",")]
        parity = codes[mask].sum(axis=0) % 2
        rows.append(np.where(parity == 0, 1.0, -1.0))
        released.append(float(value))
    return Observations(np.array(rows), np.array(released), scale)
