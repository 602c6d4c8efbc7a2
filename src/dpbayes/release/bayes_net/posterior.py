"""The noise-aware posterior of a Bayesian-network release: exact per node, or MCMC draws.

Built by :mod:`.noise_aware` (the target per mechanism) and :mod:`.noise_aware_sampling`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpbayes import display
from dpbayes.models.bayes_net import BayesNet
from dpbayes.models.bayes_net_posterior import BayesNetParameters, bayes_net_rows, cpt_summary
from dpbayes.models.mixtures import DirichletMixture, SeparableDirichletMixture
from dpbayes.release.mcmc import (
    Diagnostics,
    diagnostics_rows,
    inference_data,
)

__all__ = ["BayesNetNoiseAwarePosterior"]


class BayesNetNoiseAwarePosterior:
    """Posterior of every CPT row given a noisy-count release of a Bayesian network.

    ``node(name, parent_values)`` is the row's posterior (exact Separable mixture, or a
    Rao-Blackwellised Dirichlet mixture over the MCMC draws of the true counts);
    ``method`` says which; ``diagnostics`` is None for the exact case.
    """

    def __init__(
        self,
        model: BayesNet,
        method: str,
        *,
        exact: dict[str, SeparableDirichletMixture] | None = None,
        count_draws: dict[str, np.ndarray] | None = None,
        diagnostics: Diagnostics | None = None,
        normaliser: dict[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.method = method
        self._exact = exact or {}
        self._draws = count_draws or {}
        self.diagnostics = diagnostics
        self.normaliser = normaliser

    def _row_index(self, name: str, parent_values: Any) -> tuple[int, ...]:
        if name not in self.model.variables:
            raise ValueError(f"name must be a model variable, got {name!r}")
        ps = self.model.parents[name]
        if len(parent_values) != len(ps):
            raise ValueError(f"parent_values must give {len(ps)} value(s) for parents {ps}")
        return tuple(
            self.model.variables[p].index(v) for p, v in zip(ps, parent_values, strict=True)
        )

    def node(self, name: str, parent_values: Any = ()) -> Any:
        """The posterior of the CPT row of ``name`` given its parents' ``parent_values``."""
        idx = self._row_index(name, tuple(parent_values))
        if name in self._exact:
            return self._exact[name]
        table: Any = self._draws[name]
        rows = table[(slice(None), *idx)]  # (draws, k)
        w = np.full(rows.shape[0], 1.0 / rows.shape[0])
        return DirichletMixture(w, self.model.alpha + rows)

    def mean(self) -> BayesNetParameters:
        """Posterior-mean CPTs."""
        cpts = {}
        for v in self.model.nodes:
            if v in self._exact:
                cpts[v] = self._exact[v].mean()
            else:
                a = self.model.alpha + self._draws[v]
                cpts[v] = np.mean(a / a.sum(axis=-1, keepdims=True), axis=0)
        return BayesNetParameters(self.model, cpts)

    def intervals(self, level: float = 0.9) -> dict[str, np.ndarray]:
        """Central marginal credible intervals of every CPT entry: table shape + (2,)."""
        out = {}
        for v in self.model.nodes:
            shape = self.model.table_shape(v)
            res = np.empty((*shape, 2))
            for idx in np.ndindex(*shape[:-1]):
                vals = tuple(
                    self.model.variables[p][i]
                    for p, i in zip(self.model.parents[v], idx, strict=True)
                )
                res[idx] = self.node(v, vals).interval(level)
            out[v] = res
        return out

    def summary(self, level: float = 0.95) -> Any:
        """Every CPT entry's posterior mean, sd and central interval (a DataFrame)."""
        return cpt_summary(self.model, self.node, level)

    def to_inference_data(self) -> Any:
        """ArviZ ``InferenceData`` of the MCMC: per node, the draws of the true family
        counts (``counts_<node>``) and the CPT's conditional posterior mean given them
        (``cpt_<node>``, the Rao-Blackwellised estimate), dims (chain, draw, *table)."""
        if self.diagnostics is None:
            raise ValueError(
                "this posterior is exact (method 'exact'): it has no MCMC draws; "
                "use summary() or node(...)"
            )
        post: dict[str, np.ndarray] = {}
        dims: dict[str, list[str]] = {}
        for v in self.model.nodes:
            counts = self._draws[v]
            a = self.model.alpha + counts
            post[f"counts_{v}"] = counts
            post[f"cpt_{v}"] = a / a.sum(axis=-1, keepdims=True)
            dims[f"counts_{v}"] = dims[f"cpt_{v}"] = [*self.model.parents[v], v]
        return inference_data(
            post,
            self.diagnostics,
            dims=dims,
            coords={v: list(vals) for v, vals in self.model.variables.items()},
            attrs={"model": "noise-aware posterior of a Bayesian-network release"},
        )

    def _display(self) -> tuple[str, list[tuple[str, str]]]:
        rows = [*bayes_net_rows(self.model), ("method", self.method)]
        if self.diagnostics is not None:
            rows += diagnostics_rows(self.diagnostics)
        rows.append(("table", ".summary() for every CPT entry"))
        return "BayesNetNoiseAwarePosterior", rows

    def __repr__(self) -> str:
        return display.text(self)

    def _repr_html_(self) -> str:
        return display.html(self)

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": "bayes-net-noise-aware",
            "method": self.method,
            "mean": {k: v.tolist() for k, v in self.mean().cpts.items()},
            "interval90": {k: v.tolist() for k, v in self.intervals(0.9).items()},
            "diagnostics": None if self.diagnostics is None else self.diagnostics.to_dict(),
            "normaliser": self.normaliser,
        }
