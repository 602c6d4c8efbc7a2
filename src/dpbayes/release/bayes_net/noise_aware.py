"""Noise-aware posteriors of Bayesian-network releases (paper 004 Algorithm 1; issue 10).

Laplace on the family count tables (``mechanism="laplace"``, substitute neighbours, n
public) releases r_f = clip(c_f(N) + Lap(b), 0, n) for every cell f of every family table,
where N is the unknown joint contingency table of the n records and c(N) its family
margins. The posterior of the CPTs given the release is

    p(theta | r) = sum_N p(theta | N) P(N | r),   P(N | r) propto P(r | N) P(N),

with P(N) = n!/prod N_i! * prod_{v, pa} [Gamma(A_pa)/Gamma(A_pa + n_pa)]
prod_k Gamma(alpha + c_{v,pa,k}) / Gamma(alpha) (the Bayesian-Dirichlet marginal
likelihood of complete data) and P(r | N) a product of Laplace factors, with the point
masses of the truncation at 0 and n.

* **No edges: exact.** The variables are independent given theta and their CPTs have
  independent priors, so each table is an independent Dirichlet-categorical release
  with public n: an exact :class:`~dpbayes.models.mixtures.SeparableDirichletMixture` per
  node (the counts' convolution structure, no sampling).
* **Edges: MCMC.** The tables share the records, so they do not factorise. A compiled
  sampler on N (:mod:`._kernels`) moves t records between two joint
  cells i, j at a time, t from its exact full conditional over every feasible value
  (the multinomial coefficient, the Dirichlet-multinomial terms and the Laplace factors
  on the grid of t; three moves in four overrelaxed by reflecting the cdf), plus
  Metropolis-Hastings moves relabelling one variable in T random records (a whole CPT
  row at once); several chains from over-dispersed starts, with R-hat/ESS on every
  family count and a RuntimeWarning when mixing is poor. Each kept N gives Dir(alpha + c(N)) per CPT
  row exactly, so the row posteriors are Rao-Blackwellised Dirichlet mixtures. The
  sampler is :mod:`.sampler`'s ``init`` / ``step`` over NamedTuple states.

* **Fourier (Algorithm 2): MCMC.** The released coefficients c_a(N) + Lap(b), a != {},
  are linear in N (c_a = sum_cells N_cell (-1)^<a, cell>), so the same sampler applies
  with plain Laplace factors; the empty-set coefficient is n plus the public raise and
  carries no information; the rebuilt (clipped) tables are post-processing and unused.

* **Posterior sampling (paper 004 §4, Lemma 2): MCMC.** The release is D draws
  theta~_d of every CPT row from Dir(alpha + c_row(N)) truncated to the trimmed region
  {theta_k >= p_v for every k}, independent given N, so

      P(theta~ | N) = prod_d prod_rows Dir(theta~_{d,row}; alpha + c_row) / Z_row(c_row),

  Z_row = the mass of Dir(alpha + c_row) in the trimmed region. Its lgamma terms are D
  copies of the inverse of the Bayesian-Dirichlet marginal's, so the target on N is the
  multinomial coefficient, (1 - D) times the Bayesian-Dirichlet terms, sum_f c_f
  sum_d log theta~_{d,f} and -D sum_rows log Z_row (for D = 1: the multinomial with
  the released CPTs' joint, reweighted by 1 / Z). The same sampler runs on it. The
  recipient's prior is the model's Dirichlet (the trimming is the mechanism's, not
  the recipient's); n is public under substitute neighbours but not written in the
  release, so it is the argument ``n``.

  *Z_row exact for binary nodes*: Z = I_{1-p}(a, b) - I_p(a, b), a = alpha + c_0,
  b = alpha + c_1, each regularised incomplete beta in log space by its continued
  fraction (relative error ~1e-14 even where Z underflows a double, which happens:
  a draw at the trimming bound is consistent with every N whose posterior lies beyond
  it), tabulated over the counts (n <= 2047) or computed per use.
  *Z_row taken as 1 for nodes with k >= 3* (the mass of a box in a Dirichlet has no
  practical exact form): the sampler ignores it and reports the check
  ``normaliser["log_z_sd"]``, the sd over the kept draws of N of D sum_rows log Z_row
  (Monte Carlo, 2000 Dirichlet draws a row); a RuntimeWarning when it exceeds 0.1,
  i.e. when the ignored factor is not constant over the posterior.

* **MAP (paper 004 Algorithm 3): MCMC, exact target.** The release picks, independently
  per CPT row, a point g~ of a data-independent grid on the trimmed simplex (rebuilt
  from the public ``trim`` and ``grid`` by :func:`.sampling.map_grid`) by the
  exponential mechanism with utility sum_k (alpha + c_k - 1) log g_k at the public
  temperature ``scale`` (2L/eps, L/eps monotonic under add/remove), so with w = 1/scale

      P(g~ | N) = prod_rows exp(w sum_k (alpha + c_k - 1) log g~_k) / Z_row(c_row),
      Z_row(c) = sum_{g in grid} exp(w sum_k (alpha + c_k - 1) log g_k).

  The target on N is the multinomial coefficient, the Bayesian-Dirichlet terms,
  sum_f c_f w log g~_f and -sum_rows log Z_row(c_row); Z_row is the finite sum over the
  grid, an exact log-sum-exp (:func:`~._normaliser_kernels.grid_log_z`), stored in a
  lazily filled table over the row's counts (base n + 1, while all tables fit in
  ``MAX_MAP_TABLE`` entries: binary nodes to n ~ 2000, 3-valued to n ~ 200) or computed
  on use (slow: O(grid) per value of t). n is public under substitute neighbours and
  written in the release; under add/remove pass ``n``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpbayes.models.bayes_net import BayesNet
from dpbayes.privacy import Neighbours
from dpbayes.privacy.validation import check_int
from dpbayes.release.base import Release, register_noise_aware
from dpbayes.release.bayes_net.gibbs import (
    DEFAULT_SWEEPS,
    MAX_JOINT_CELLS,
    count_observations,
    fourier_observations,
    gibbs_tables,
    summarise,
)
from dpbayes.release.bayes_net.noise_aware_n import bayes_net_private_n
from dpbayes.release.bayes_net.noise_aware_sampling import map_posterior, sampling_posterior
from dpbayes.release.bayes_net.posterior import BayesNetNoiseAwarePosterior
from dpbayes.release.bayes_net.record import FourierRecord, LaplaceTablesRecord
from dpbayes.release.bayes_net.sampler import joint_maps, no_extra
from dpbayes.release.counts.noise_aware import count_posterior

__all__ = [
    "DEFAULT_SWEEPS",
    "MAX_JOINT_CELLS",
    "BayesNetNoiseAwarePosterior",
    "bayes_net_noise_aware",
]


def bayes_net_noise_aware(
    rel: Release,
    *,
    iterations: int = DEFAULT_SWEEPS,
    chains: int = 4,
    rng: Any = None,
    n: int | None = None,
    n_prior: Any = None,
) -> BayesNetNoiseAwarePosterior:
    """The noise-aware posterior of a ``laplace``, ``fourier``, ``sampling`` or ``map``
    Bayesian-network release (module docstring).

    ``iterations`` sweeps per chain (half burn-in), each sweep max(cells, 8) pair moves
    over the joint cells; ``chains`` chains; ``rng`` seeds the MCMC (inference draws, not
    privacy noise). Unused for a ``laplace`` release of a network without edges. ``n``:
    the number of records (``sampling`` and ``map`` only; default the release's public n,
    which ``sampling`` does not write and ``map`` writes under substitute neighbours).
    ``n_prior``: the prior on n of a ``laplace`` or ``fourier`` release under add/remove
    (n private; :mod:`.noise_aware_n`; default flat).
    """
    model: BayesNet = rel.model
    if rel.mechanism == "sampling" or rel.mechanism == "map":
        _no_n_prior(n_prior)
        post = sampling_posterior if rel.mechanism == "sampling" else map_posterior
        return post(rel, iterations=iterations, chains=chains, rng=rng, n=n)
    rec = (LaplaceTablesRecord if rel.mechanism == "laplace" else FourierRecord).of(rel)
    if rec.neighbours is Neighbours.ADD_REMOVE:
        if n is not None:
            raise ValueError(
                "n is private in an add/remove release: give a prior on it (n_prior=...), "
                "not a value"
            )
        return bayes_net_private_n(  # type: ignore[no-any-return]
            rel, iterations=iterations, chains=chains, rng=rng, n_prior=n_prior
        )
    _no_n_prior(n_prior)
    if rec.n is None:
        raise ValueError(
            "the noise-aware posterior of noisy Bayesian-network counts needs a public n "
            "or the add/remove relation, got neither"
        )
    if n is not None and check_int(n, "n", minimum=1) != rec.n:
        raise ValueError(f"n must be the release's public n = {rec.n}, got {n}")
    n = rec.n
    scale = float(rec.scale)
    upper = float(n)
    if not model.edges and rel.mechanism == "laplace":
        released = {v: np.asarray(rel.released["counts"][v], dtype=float) for v in model.nodes}
        exact = {
            v: count_posterior(
                np.full(model.cardinality(v), model.alpha),
                n,
                released[v],
                model.cardinality(v),
                "laplace",
                scale,
                upper,
            )
            for v in model.nodes
        }
        return BayesNetNoiseAwarePosterior(model, "exact", exact=exact)
    its = check_int(iterations, "iterations", minimum=20)
    m = check_int(chains, "chains", minimum=2)
    cells, fam, _ = joint_maps(model)
    if cells > MAX_JOINT_CELLS:
        raise ValueError(
            f"the joint table has {cells} cells (> {MAX_JOINT_CELLS}): too large for the "
            "noise-aware MCMC over the true counts"
        )
    if rel.mechanism == "fourier":
        obs = fourier_observations(model, rel, scale)
    else:
        obs = count_observations(model, rel, fam, n, scale)
    fam_tables = gibbs_tables(model, n, obs, its, m, rng, no_extra(model))
    count_draws, diag = summarise(model, fam_tables, its)
    return BayesNetNoiseAwarePosterior(model, "mcmc", count_draws=count_draws, diagnostics=diag)


def _no_n_prior(n_prior: Any) -> None:
    if n_prior is not None:
        raise ValueError(
            "n_prior applies only to laplace and fourier releases under add/remove (n private)"
        )


register_noise_aware("laplace", BayesNet)(bayes_net_noise_aware)
register_noise_aware("fourier", BayesNet)(bayes_net_noise_aware)
register_noise_aware("sampling", BayesNet)(bayes_net_noise_aware)
register_noise_aware("map", BayesNet)(bayes_net_noise_aware)
