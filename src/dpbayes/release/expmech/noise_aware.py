"""Noise-aware posterior of an exponential-mechanism release (paper 002 §6.3; paper 003).

The release publishes the chosen candidate r* (its counts). For every possible true data
set x of the public size n (the counts k = 0..n of a coin; every count vector of a die)
the mechanism chose r* with probability exactly

    P(r* | x) = exp(u(x, r*) / T(x)) / sum_r exp(u(x, r) / T(x)),  T(x) = 2 S(x) / e,

u = -D(posterior(x), r) (the release's divergence), S the release's sensitivity: the
public global one, or for ``local`` / ``smooth`` the data-dependent LS(x) / S_beta(x),
recomputed for every x from public facts (prior, n, beta); e the exponent's eps (eps, or
eps/2 for smooth: the release's ``exponent_epsilon``). Then
P(x | r*) is proportional to P(r* | x) P(x) with P(x) the Beta- / Dirichlet-multinomial
prior predictive, and the posterior is the mixture of posterior(x) with these weights:
exact, O(n^2) for the coin, O(|X| |R|) for the die (refused above ``MAX_PAIRS``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special

from dpbayes.models import BetaBernoulli, DirichletCategorical
from dpbayes.models.mixtures import BetaMixture, DirichletMixture
from dpbayes.release.base import Release, register_noise_aware
from dpbayes.release.expmech.candidates import (
    coin_local_sensitivity,
    coin_neighbour_distances,
    compositions,
    dirichlet_local_sensitivity,
    dirichlet_scores,
    dirichlet_smooth_sensitivity,
    lattice_counts,
    total_variation_beta_same_total,
)
from dpbayes.release.expmech.record import ExpmechCoinRecord, ExpmechDirichletRecord

__all__ = ["MAX_PAIRS", "expmech_coin_posterior", "expmech_dirichlet_posterior"]

MAX_PAIRS = 20_000_000


def _smooth(local: np.ndarray, beta: float) -> np.ndarray:
    """S_beta(k) = max_j LS(j) e^{-beta |j - k|} for all k: two passes of a decayed max, O(n)."""
    decay = np.exp(-beta)
    fwd, bwd = local.copy(), local.copy()
    for i in range(1, local.size):
        fwd[i] = max(fwd[i], fwd[i - 1] * decay)
    for i in range(local.size - 2, -1, -1):
        bwd[i] = max(bwd[i], bwd[i + 1] * decay)
    return np.maximum(fwd, bwd)


def _noise_epsilon(rel: Release) -> float:
    """The e of the selection exp(e u / (2 S)) the release ran at (``exponent_epsilon``;
    releases made before it was recorded ran at their (per-record) eps)."""
    rec = rel.record
    if (
        isinstance(rec, ExpmechCoinRecord | ExpmechDirichletRecord)
        and rec.exponent_epsilon is not None
    ):
        return float(rec.exponent_epsilon)
    details = rel.guarantee.details
    if "exponent_epsilon" in details:
        return float(details["exponent_epsilon"])
    return float(details.get("per_record_epsilon", rel.guarantee.epsilon))


def _stated(value: float | None, name: str) -> float:
    """A fact the release's sensitivity kind needs (a ValueError if it is missing)."""
    if value is None:
        raise ValueError(f"the release must carry the public {name!r} of its sensitivity kind")
    return float(value)


def _temperature(rel: Release, sens: float) -> float:
    return 2.0 * sens / _noise_epsilon(rel)


def _log_select(scores: np.ndarray, chosen: int, temp: float) -> float:
    s = scores / temp
    return float(s[chosen] - special.logsumexp(s))


def expmech_coin_posterior(rel: Release, a: float, b: float) -> BetaMixture:
    """Exact posterior of theta given the chosen candidate Beta(a + j*, b + n - j*)."""
    rec = ExpmechCoinRecord.of(rel)
    n = rec.n
    kind, div = rec.sensitivity_kind, rec.divergence
    chosen = int(rel.released["counts"][0])
    k = np.arange(n + 1, dtype=float)
    local = coin_local_sensitivity(coin_neighbour_distances(a, b, n, div))
    if kind == "global":
        sens = np.full(n + 1, _stated(rec.sensitivity, "sensitivity"))
    elif kind == "local":
        sens = local
    else:
        sens = _smooth(local, _stated(rec.smooth_beta, "smooth_beta"))
    if np.any(sens <= 0):
        raise ValueError(f"the {kind} sensitivity is 0 somewhere: the release is degenerate")
    temp = 2.0 * sens / _noise_epsilon(rel)
    if div == "hellinger":
        # log BC(k, j) = lnB(a + (k+j)/2, b + n - (k+j)/2) - [lnB_k + lnB_j] / 2: O(n)
        # special functions, then O(n^2) arithmetic
        s2 = np.arange(2 * n + 1, dtype=float) / 2.0
        big = special.betaln(a + s2, b + (n - s2))
        own = special.betaln(a + k, b + (n - k))
    log_lik = np.empty(n + 1)
    rows = max(1, 2_000_000 // (n + 1))  # bounded temporaries
    for lo in range(0, n + 1, rows):
        kk = k[lo : lo + rows, None]
        if div == "tv":
            dist = total_variation_beta_same_total(a + kk, b + (n - kk), a + k, b + (n - k))
        else:
            idx = np.arange(lo, min(lo + rows, n + 1))[:, None] + np.arange(n + 1)[None, :]
            log_bc = np.minimum(big[idx] - (own[lo : lo + rows, None] + own[None, :]) / 2, 0.0)
            dist = np.sqrt(-np.expm1(log_bc))
        u = -dist / temp[lo : lo + rows, None]
        log_lik[lo : lo + rows] = u[:, chosen] - special.logsumexp(u, axis=1)
    # Beta-binomial prior predictive, up to a constant
    log_prior = (
        special.gammaln(a + k)
        - special.gammaln(k + 1)
        + special.gammaln(b + n - k)
        - special.gammaln(n - k + 1)
    )
    return BetaMixture.from_log_weights(log_prior + log_lik, a + k, b + n - k)


def expmech_dirichlet_posterior(rel: Release) -> DirichletMixture:
    """Exact posterior of theta given the chosen Dirichlet candidate (m >= 3)."""
    model = rel.model
    alpha = np.asarray(model.alpha, dtype=float)
    rec = ExpmechDirichletRecord.of(rel)
    n, m = rec.n, alpha.size
    kind = rec.sensitivity_kind
    truth = compositions(n, m)
    lattice = rec.lattice
    cands = truth if lattice is None else lattice_counts(n, m, lattice)
    if truth.shape[0] * cands.shape[0] > MAX_PAIRS:
        raise ValueError(
            f"the exact expmech noise-aware posterior needs {truth.shape[0]} x "
            f"{cands.shape[0]} score pairs (> {MAX_PAIRS}); use a smaller n or lattice"
        )
    chosen_vec = np.asarray(rel.released["counts"], dtype=np.int64)
    hit = np.flatnonzero(np.all(cands == chosen_vec[None, :], axis=1))
    if hit.size != 1:
        raise ValueError("rel.released['counts'] is not one of the mechanism's candidates")
    chosen = int(hit[0])
    log_lik = np.empty(truth.shape[0])
    for i, c in enumerate(truth):
        if kind == "global":
            sens = _stated(rec.sensitivity, "sensitivity")
        elif kind == "local":
            sens = dirichlet_local_sensitivity(alpha, c)
        else:
            sens = dirichlet_smooth_sensitivity(alpha, c, _stated(rec.smooth_beta, "smooth_beta"))
        log_lik[i] = _log_select(
            dirichlet_scores(alpha, c, cands), chosen, _temperature(rel, float(sens))
        )
    tc = truth.astype(float)
    log_prior = np.sum(special.gammaln(alpha + tc) - special.gammaln(tc + 1.0), axis=1)
    lw = log_prior + log_lik
    w = np.exp(lw - lw.max())
    return DirichletMixture(w / w.sum(), alpha + tc)


@register_noise_aware("expmech", BetaBernoulli)
def _coin(rel: Release) -> Any:
    return expmech_coin_posterior(rel, float(rel.model.alpha), float(rel.model.beta))


@register_noise_aware("expmech", DirichletCategorical)
def _die(rel: Release) -> Any:
    alpha = np.asarray(rel.model.alpha, dtype=float)
    if alpha.size == 2:
        mix = expmech_coin_posterior(rel, float(alpha[0]), float(alpha[1]))
        return DirichletMixture(mix.weights, np.column_stack([mix.a, mix.b]))
    return expmech_dirichlet_posterior(rel)
