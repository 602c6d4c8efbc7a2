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
* **Otherwise: MCMC.** The sweeps of :mod:`.sampler` (pair moves and relabelling moves,
  which keep n; compiled in :mod:`._kernels`) alternate, every 5 sweeps, with Metropolis
  moves that add or remove up to W records in one joint cell
  (:func:`~.sampler.resize`, W tuned per chain in burn-in); n
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
from dpbayes.release.bayes_net.gibbs import ADAPT, MAX_JOINT_CELLS, summarise
from dpbayes.release.bayes_net.posterior import BayesNetNoiseAwarePosterior
from dpbayes.release.bayes_net.record import FourierRecord, LaplaceTablesRecord
from dpbayes.release.bayes_net.sampler import (
    adapt,
    adapt_resize,
    init,
    joint_maps,
    no_extra,
    resize,
    step,
    target,
)
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
    cells, fam, _ = joint_maps(model)
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
        model, n_hat, log_prior_n, matrix, values, scale, its, m, rng
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
    sweeps: int,
    m: int,
    rng: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """The sweeps of ``gibbs.gibbs_tables`` with n free: every ``CHUNK`` sweeps
    a batch of resizing moves (:func:`~.sampler.resize`); returns the family counts after
    every sweep (m, sweeps, F) and n after every sweep (m, sweeps)."""

    gen = noise_source(rng).generator()
    n_max = log_prior_n.size - 1
    tg = target(model, n_max, matrix, released, scale, no_extra(model))
    cells = tg.fam_idx.shape[1]
    spread = 3.0 * scale * math.sqrt(cells)
    starts = [
        int(np.clip(round(n_hat + spread * (2.0 * c / max(m - 1, 1) - 1.0)), 1, n_max))
        for c in range(m)
    ]
    tables = np.stack([gen.multinomial(n0, gen.dirichlet(np.ones(cells))) for n0 in starts])
    st = init(
        tg,
        tables,
        widths=max(1, round(math.sqrt(max(n_hat, 1.0)))),
        resize_widths=max(1, round(scale)),
    )
    out = np.empty((m, sweeps, st.famc.shape[1]), dtype=np.int64)
    n_out = np.empty((m, sweeps), dtype=np.int64)
    burn = sweeps // 2
    s0 = 0
    since = 0
    bar = Progress(m * sweeps, "noise-aware Bayes-net MCMC (n private)", unit="sweep")
    while s0 < sweeps:
        s1 = min(s0 + CHUNK, sweeps)
        st, out[:, s0:s1] = step(tg, st, gen, s1 - s0)
        n_out[:, s0:s1] = st.counts.sum(axis=1)[:, None]
        st = resize(tg, st, gen, (s1 - s0) * tg.pair_moves, log_prior_n)
        since += s1 - s0
        if s1 <= burn and since >= ADAPT:
            # burn-in only: tune the relabelling widths and the resize widths
            st = adapt_resize(adapt(st, max(int(n_hat), 1)), n_max)
            since = 0
        bar.update(m * (s1 - s0))
        s0 = s1
    bar.close()
    return out, n_out
