"""Noise-aware posteriors of Bayesian-network releases whose n is private (add/remove).

Under add/remove neighbours (one record, or at user level one user with <= k rows) the
``laplace`` release (Algorithm 1) noises every family-table cell, truncates to [0, inf)
and publishes no n; the ``fourier`` release (Algorithm 2) noises the empty-set
coefficient too (n plus its public raise). The recipient needs a prior pi on the number
of records n (:func:`~dpbayes.release.counts.private_n.n_prior`; default flat, the
improper uniform on n >= 0). The target on the joint table N is then

    P(N | r) propto pi(n) n!/prod_i N_i! prod_{v, pa} Gamma(A_pa)/Gamma(A_pa + n_pa)
                    prod_k Gamma(alpha + c_{v,pa,k})/Gamma(alpha) * prod_o Laplace factors,

the substitute target of :mod:`.noise_aware` with n = sum_i N_i free.

* **No edges, laplace: exact.** Given n the tables are independent Dirichlet-multinomials,
  so node v's posterior is the private-n mixture of :mod:`dpbayes.release.counts.private_n` with
  the factor of n multiplied by every other node's evidence at n, Gamma(n + 1)/
  Gamma(n + A_u) times the convolution of u's count windows (exact, no sampling).
* **Otherwise: MCMC.** The compiled sweeps of :mod:`._kernels` (pair
  moves and relabelling moves, which keep n) alternate, every 5 sweeps, with Metropolis
  moves that add or remove up to W records in one joint cell
  (:func:`~._kernels.resize_moves`, W tuned per chain in burn-in); n
  is capped at n_max = the tables' mean sum + 60 noise scales x sqrt(cells) + 100 (the
  prior's mass beyond is below e^-60). Same chains, R-hat/ESS and warnings as there.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special

from dpbayes.models.bayes_net import BayesNet
from dpbayes.privacy.noise import noise_source
from dpbayes.privacy.validation import check_int
from dpbayes.progress import Progress
from dpbayes.release.base import Release
from dpbayes.release.bayes_net._kernels import resize_moves, run_sweeps
from dpbayes.release.bayes_net.gibbs import (
    ADAPT,
    MAX_JOINT_CELLS,
    Extra,
    joint_maps,
    summarise,
)
from dpbayes.release.bayes_net.posterior import BayesNetNoiseAwarePosterior
from dpbayes.release.bayes_net.record import FourierRecord, LaplaceTablesRecord
from dpbayes.release.counts.private_n import NPrior
from dpbayes.release.counts.private_n import n_prior as make_prior

__all__ = ["bayes_net_private_n"]

CHUNK = 5  # sweeps between batches of moves that change n


def bayes_net_private_n(
    rel: Release, *, iterations: int, chains: int, rng: Any, n_prior: Any = None
) -> Any:
    """The noise-aware posterior of an add/remove ``laplace`` or ``fourier`` release of a
    Bayesian network (module docstring); returns a ``BayesNetNoiseAwarePosterior`` with
    ``n_prior`` (the prior on n used) and, for MCMC, the draws of n in ``n_draws``."""
    if rel.mechanism not in ("laplace", "fourier"):
        raise ValueError(  # pragma: no cover - the caller routes only these
            f"mechanism must be 'laplace' or 'fourier', got {rel.mechanism!r}"
        )
    model: BayesNet = rel.model
    prior = make_prior(n_prior)
    rec = (LaplaceTablesRecord if rel.mechanism == "laplace" else FourierRecord).of(rel)
    scale = float(rec.scale)
    if not model.edges and rel.mechanism == "laplace":
        post = BayesNetNoiseAwarePosterior(model, "exact", exact=_exact_nodes(rel, scale, prior))
        post.n_prior = prior  # type: ignore[attr-defined]
        return post
    its = check_int(iterations, "iterations", minimum=20)
    m = check_int(chains, "chains", minimum=2)
    cells, fam, row = joint_maps(model)
    if cells > MAX_JOINT_CELLS:
        raise ValueError(
            f"the joint table has {cells} cells (> {MAX_JOINT_CELLS}): too large for the "
            "noise-aware MCMC over the true counts"
        )
    if rel.mechanism == "fourier":
        matrix, values, n_hat = fourier_observations(model, rel, FourierRecord.of(rel))
    else:
        matrix, values, n_hat = count_observations(model, rel, fam)
    n_max = math.ceil(max(n_hat, 0.0) + 60.0 * scale * math.sqrt(cells) + 100.0)
    log_prior_n = prior.log_pmf(np.arange(n_max + 1, dtype=float))
    if not np.any(np.isfinite(log_prior_n)):
        raise ValueError("the prior on n gives probability 0 to every n up to n_max")
    fam_tables, n_draws = _gibbs_free_n(
        model, n_hat, log_prior_n, matrix, values, scale, cells, fam, row, its, m, rng
    )
    count_draws, diag = summarise(model, fam_tables, its)
    post = BayesNetNoiseAwarePosterior(model, "mcmc", count_draws=count_draws, diagnostics=diag)
    post.n_prior = prior  # type: ignore[attr-defined]
    post.n_draws = n_draws[:, its // 2 :].ravel()  # type: ignore[attr-defined]
    return post


def _exact_nodes(rel: Release, scale: float, prior: NPrior) -> dict[str, Any]:
    """Node-by-node exact posteriors without edges (module docstring)."""
    from dpbayes.release.counts._private_n_kernels import convolve
    from dpbayes.release.counts.noise_aware import count_log_likelihood
    from dpbayes.release.counts.private_n import (
        count_window,
        private_n_counts,
    )

    model: BayesNet = rel.model
    evidence: dict[str, tuple[int, np.ndarray, float]] = {}
    released = {v: np.asarray(rel.released["counts"][v], dtype=float).ravel() for v in model.nodes}

    def lik(r: float) -> Any:
        return lambda x: count_log_likelihood(r, x, "laplace", scale, None)

    for v in model.nodes:
        start, conv = 0, np.ones(1)
        for r in released[v]:
            x0, w, _ = count_window(float(model.alpha), lik(float(r)), float(r), scale)
            start += x0
            conv = convolve(conv, w)
            conv /= np.max(conv)
        evidence[v] = (start, conv, float(model.alpha) * model.cardinality(v))

    def other_nodes(v: str) -> Any:
        def extra(n: np.ndarray) -> np.ndarray:
            out = np.zeros(np.shape(n))
            for u, (start, conv, big_a) in evidence.items():
                if u == v:
                    continue
                idx = np.asarray(n, dtype=np.int64) - start
                ok = (idx >= 0) & (idx < conv.size)
                with np.errstate(divide="ignore"):
                    ev = np.where(ok, np.log(conv[np.clip(idx, 0, conv.size - 1)]), -np.inf)
                out = out + ev + special.gammaln(n + 1.0) - special.gammaln(n + big_a)
            return out

        return extra

    out = {}
    for v in model.nodes:
        k = model.cardinality(v)
        r = released[v]
        out[v] = private_n_counts(
            np.full(k, float(model.alpha)),
            [lik(float(x)) for x in r],
            [float(x) for x in r],
            scale,
            prior,
            extra_log_g=other_nodes(v),
            dirichlet=True,
        )
    return out


def count_observations(
    model: BayesNet, rel: Release, fam: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, float]:
    """Every family-table cell, truncated to [0, inf); and an estimate of n (the mean of
    the tables' sums) for the chains' starts."""
    blocks, released, sums = [], [], []
    for vi, v in enumerate(model.nodes):
        size = int(np.prod(model.table_shape(v)))
        blocks.append((fam[vi][None, :] == np.arange(size)[:, None]).astype(float))
        r = np.asarray(rel.released["counts"][v], dtype=float).ravel()
        released.append(r)
        sums.append(float(r.sum()))
    values = np.maximum(np.concatenate(released), 0.0)
    return np.concatenate(blocks), values, float(np.mean(sums))


def fourier_observations(
    model: BayesNet, rel: Release, rec: FourierRecord
) -> tuple[np.ndarray, np.ndarray, float]:
    """The noised coefficients c_a = sum_cells N (-1)^<a, cell>, the empty set included
    (n + noise; its public raise subtracted)."""
    names = list(model.nodes)
    cards = [model.cardinality(v) for v in names]
    codes = np.indices(cards).reshape(len(cards), -1)
    rows, released = [], []
    raise_by = float(rec.empty_set_raise)
    n_hat = 0.0
    for label, value in rel.released["coefficients"].items():
        if label == "{}":
            rows.append(np.ones(codes.shape[1]))
            released.append(float(value) - raise_by)
            n_hat = float(value) - raise_by
            continue
        mask = [names.index(u) for u in label.split(",")]
        parity = codes[mask].sum(axis=0) % 2
        rows.append(np.where(parity == 0, 1.0, -1.0))
        released.append(float(value))
    return np.array(rows), np.array(released), n_hat


def _gibbs_free_n(
    model: BayesNet,
    n_hat: float,
    log_prior_n: np.ndarray,
    matrix: np.ndarray,
    released: np.ndarray,
    scale: float,
    cells: int,
    fam: list[np.ndarray],
    row: list[np.ndarray],
    sweeps: int,
    m: int,
    rng: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """The sweeps of ``gibbs.gibbs_tables`` with n free: every ``CHUNK`` sweeps
    a batch of ``resize_moves``; returns the family counts after every sweep (m, sweeps,
    F) and n after every sweep (m, sweeps)."""

    gen = noise_source(rng).generator()
    alpha = model.alpha
    n_max = log_prior_n.size - 1
    spread = 3.0 * scale * math.sqrt(cells)
    starts = [
        int(np.clip(round(n_hat + spread * (2.0 * c / max(m - 1, 1) - 1.0)), 1, n_max))
        for c in range(m)
    ]
    state = np.stack([gen.multinomial(n0, gen.dirichlet(np.ones(cells))) for n0 in starts])
    state = state.astype(np.int64)
    nodes = len(model.nodes)
    cards = np.array([model.cardinality(v) for v in model.nodes], dtype=np.int64)
    sizes = [int(np.prod(model.table_shape(v))) for v in model.nodes]
    rsizes = [s // int(k) for s, k in zip(sizes, cards, strict=True)]
    fam_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    roff = np.concatenate([[0], np.cumsum(rsizes)[:-1]]).astype(np.int64)
    fam_idx = np.stack([f + o for f, o in zip(fam, fam_off[:-1], strict=True)]).astype(np.int64)
    row_idx = np.stack([r + o for r, o in zip(row, roff, strict=True)]).astype(np.int64)
    flat = fam_idx.ravel()
    order = np.argsort(flat, kind="stable")
    fam_cells = np.ascontiguousarray(order % cells, dtype=np.int64)
    fam_ptr = np.searchsorted(flat[order], np.arange(int(fam_off[-1]) + 1)).astype(np.int64)
    slices = int(np.max(np.diff(fam_ptr)))
    strides = np.array([int(np.prod(cards[i + 1 :])) for i in range(nodes)], dtype=np.int64)
    famc = np.zeros((m, int(fam_off[-1])), dtype=np.int64)
    rowc = np.zeros((m, int(sum(rsizes))), dtype=np.int64)
    for c in range(m):
        for v in range(nodes):
            np.add.at(famc[c], fam_idx[v], state[c])
            np.add.at(rowc[c], row_idx[v], state[c])
    matrix = np.ascontiguousarray(matrix, dtype=float)
    released = np.ascontiguousarray(released, dtype=float)
    obsv = state.astype(float) @ matrix.T
    grid = np.arange(n_max + 1, dtype=float)
    with np.errstate(divide="ignore"):
        log_k = np.log(grid)
    log_alpha = np.log(alpha + grid)
    big_a = alpha * cards.astype(float)
    log_big_a = np.log(big_a[:, None] + grid[None, :])
    lg_alpha = special.gammaln(alpha + grid)
    lg_big_a = special.gammaln(big_a[:, None] + grid[None, :])
    lg_fact = special.gammaln(grid + 1.0)
    pair_moves = max(cells, 8)
    relabel = max(int(fam_off[-1]) // 2, nodes)
    widths = np.full(nodes, max(1, round(math.sqrt(max(n_hat, 1.0)))), dtype=np.int64)
    resize_w = np.full(m, max(1, round(scale)), dtype=np.int64)
    tried = np.zeros((m, nodes), dtype=np.int64)
    accepted = np.zeros((m, nodes), dtype=np.int64)
    r_tried = np.zeros(m, dtype=np.int64)
    r_acc = np.zeros(m, dtype=np.int64)
    out = np.empty((m, sweeps, famc.shape[1]), dtype=np.int64)
    n_out = np.empty((m, sweeps), dtype=np.int64)
    extra = Extra.none(model)
    burn = sweeps // 2
    inv_scale = 1.0 / scale
    s0 = 0
    since = 0
    bar = Progress(m * sweeps, "noise-aware Bayes-net MCMC (n private)", unit="sweep")
    while s0 < sweeps:
        s1 = min(s0 + CHUNK, sweeps)
        run_sweeps(
            state,
            famc,
            rowc,
            obsv,
            fam_idx,
            row_idx,
            log_k,
            log_alpha,
            log_big_a,
            lg_alpha,
            lg_big_a,
            lg_fact,
            fam_off,
            cards,
            strides,
            fam_ptr,
            fam_cells,
            matrix,
            released,
            inv_scale,
            widths,
            gen.random((m, s1 - s0, pair_moves, 3)),
            gen.random((m, s1 - s0, relabel, 5 + slices)),
            tried,
            accepted,
            extra.bd_w,
            extra.lin,
            extra.sib,
            extra.ztab,
            extra.ztix,
            extra.zp,
            extra.zw,
            float(alpha),
            extra.mz,
            out[:, s0:s1],
        )
        n_out[:, s0:s1] = state.sum(axis=1)[:, None]
        resize_moves(
            state,
            famc,
            rowc,
            obsv,
            fam_idx,
            row_idx,
            lg_alpha,
            lg_big_a,
            lg_fact,
            log_prior_n,
            matrix,
            released,
            inv_scale,
            resize_w,
            gen.random((m, (s1 - s0) * pair_moves, 3)),
            r_tried,
            r_acc,
        )
        since += s1 - s0
        if s1 <= burn and since >= ADAPT:
            # burn-in only: tune the relabelling widths and the resize widths
            rate = accepted.sum(axis=0) / np.maximum(tried.sum(axis=0), 1)
            grow = np.where(rate > 0.45, 1.5, np.where(rate < 0.15, 1 / 1.5, 1.0))
            widths = np.clip(np.round(widths * grow), 1, max(int(n_hat), 1)).astype(np.int64)
            r_rate = r_acc / np.maximum(r_tried, 1)
            r_grow = np.where(r_rate > 0.45, 1.5, np.where(r_rate < 0.15, 1 / 1.5, 1.0))
            resize_w = np.clip(np.round(resize_w * r_grow), 1, n_max).astype(np.int64)
            tried[:] = 0
            accepted[:] = 0
            r_tried[:] = 0
            r_acc[:] = 0
            since = 0
        bar.update(m * (s1 - s0))
        s0 = s1
    bar.close()
    return out, n_out
