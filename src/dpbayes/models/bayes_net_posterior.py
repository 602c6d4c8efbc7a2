"""Posteriors and point parameters of discrete Bayesian networks (exact, non-private).

The family count tables (:class:`BayesNetStatistics`), the product-of-Dirichlets
posterior (:class:`BayesNetPosterior`, paper 004 §2.1) and fixed CPTs
(:class:`BayesNetParameters`: a released posterior draw or MAP estimate), with the
predictive probabilities used for classification. The model classes are in
:mod:`dpbayes.models.bayes_net`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import special

from dpbayes import display
from dpbayes.models.distributions import Dirichlet
from dpbayes.privacy.validation import check_int

if TYPE_CHECKING:
    from dpbayes.models.bayes_net import BayesNet

__all__ = ["BayesNetParameters", "BayesNetPosterior", "BayesNetStatistics", "cpt_summary"]


def cpt_summary(model: BayesNet, node_posterior: Any, level: float) -> Any:
    """A tidy DataFrame of every CPT entry: node, parents (``"p1=v1, p2=v2"``), value,
    posterior mean, sd and the central interval of probability ``level``;
    ``node_posterior(name, parent_values)`` gives the row's posterior."""
    import pandas as pd

    records = []
    for v in model.nodes:
        ps = model.parents[v]
        for combo in np.ndindex(*[model.cardinality(p) for p in ps]):
            vals = tuple(model.variables[p][i] for p, i in zip(ps, combo, strict=True))
            post = node_posterior(v, vals)
            mean, sd, iv = post.mean(), post.std(), np.asarray(post.interval(level))
            given = ", ".join(f"{p}={x}" for p, x in zip(ps, vals, strict=True))
            for j, value in enumerate(model.variables[v]):
                records.append((v, given, value, mean[j], sd[j], iv[j, 0], iv[j, 1]))
    return pd.DataFrame.from_records(
        records, columns=["node", "given", "value", "mean", "sd", "lower", "upper"]
    )


def bayes_net_rows(model: BayesNet) -> list[tuple[str, str]]:
    """Display rows naming a network's nodes and edges."""
    edges = [f"{p}->{v}" for v in model.nodes for p in model.parents[v]]
    return [
        ("nodes", ", ".join(f"{v} ({model.cardinality(v)})" for v in model.nodes)),
        ("edges", ", ".join(edges) if edges else "none"),
        ("CPT rows", str(sum(int(np.prod(model.table_shape(v)[:-1])) for v in model.nodes))),
    ]


@dataclass(frozen=True, eq=False)
class BayesNetStatistics:
    """Family count tables ``counts[node]`` of n records.

    Each table has the parents' cardinalities then the node's as its shape.
    """

    counts: dict[str, np.ndarray]
    n: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", check_int(self.n, "n", minimum=0))
        object.__setattr__(self, "counts", {k: np.asarray(v) for k, v in self.counts.items()})

    def vector(self, model: BayesNet) -> np.ndarray:
        """All counts in one vector, node by node in the model's order (row-major tables)."""
        return np.concatenate(
            [np.asarray(self.counts[v], dtype=float).ravel() for v in model.nodes]
        )

    @classmethod
    def from_vector(cls, model: BayesNet, vec: np.ndarray, n: int) -> BayesNetStatistics:
        out, i = {}, 0
        for v in model.nodes:
            shape = model.table_shape(v)
            size = int(np.prod(shape))
            out[v] = np.asarray(vec[i : i + size], dtype=float).reshape(shape)
            i += size
        return cls(counts=out, n=n)

    def to_dict(self) -> dict[str, Any]:
        return {"counts": {k: v.tolist() for k, v in self.counts.items()}, "n": self.n}


class BayesNetParameters:
    """Point values of every CPT (``cpts[node]``: table shape, last axis sums to 1).

    A released posterior draw or MAP estimate; predicts like a fixed network.
    """

    def __init__(self, model: BayesNet, cpts: Mapping[str, Any]) -> None:
        self.model = model
        self.cpts = {}
        for v in model.nodes:
            t = np.asarray(cpts[v], dtype=float)
            if t.shape != model.table_shape(v):
                raise ValueError(f"cpts[{v!r}] must have shape {model.table_shape(v)}")
            if np.any(t < 0) or not np.allclose(t.sum(axis=-1), 1.0, atol=1e-9):
                raise ValueError(f"cpts[{v!r}] rows must be probability vectors")
            self.cpts[v] = t

    def log_likelihood(self, data: Any) -> np.ndarray:
        """log p(record | parameters) for every record of ``data`` (all variables observed)."""
        codes = self.model.encode(data)
        return self._log_joint(codes)

    def _log_joint(self, codes: np.ndarray) -> np.ndarray:
        pos = {v: i for i, v in enumerate(self.model.nodes)}
        out = np.zeros(codes.shape[0])
        with np.errstate(divide="ignore"):
            for v in self.model.nodes:
                idx = tuple(codes[:, pos[u]] for u in self.model.family(v))
                out += np.log(self.cpts[v][idx])
        return out

    def predict_proba(self, data: Any, target: str | None = None) -> np.ndarray:
        """p(target | every other variable) per record, shape (n, categories of target)."""
        tgt = _target(self.model, target)
        others = [v for v in self.model.nodes if v != tgt]
        codes_o = self.model.encode(data, others)
        n = codes_o.shape[0]
        k = self.model.cardinality(tgt)
        full = np.empty((n, len(self.model.nodes)), dtype=np.int64)
        pos = {v: i for i, v in enumerate(self.model.nodes)}
        for j, v in enumerate(others):
            full[:, pos[v]] = codes_o[:, j]
        logp = np.empty((n, k))
        for c in range(k):
            full[:, pos[tgt]] = c
            logp[:, c] = self._log_joint(full)
        finite = np.isfinite(logp).any(axis=1)
        logp[~finite] = 0.0  # every class impossible: fall back to uniform
        return np.exp(logp - special.logsumexp(logp, axis=1, keepdims=True))

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": "bayes-net-parameters",
            "cpts": {k: v.tolist() for k, v in self.cpts.items()},
        }


class BayesNetPosterior:
    """Product of ``Dirichlet(alphas[node][parent configuration])`` over every CPT row."""

    def __init__(self, model: BayesNet, alphas: Mapping[str, Any]) -> None:
        self.model = model
        self.alphas = {v: np.asarray(alphas[v], dtype=float) for v in model.nodes}
        for v, a in self.alphas.items():
            if a.shape != model.table_shape(v) or not np.all(a > 0) or not np.all(np.isfinite(a)):
                raise ValueError(
                    f"alphas[{v!r}] must be positive with shape {model.table_shape(v)}"
                )

    def node(self, name: str, parent_values: Sequence[Any] = ()) -> Dirichlet:
        """The Dirichlet posterior of ``name`` given the parent categories ``parent_values``."""
        ps = self.model.parents[name]
        if len(parent_values) != len(ps):
            raise ValueError(f"parent_values must give {len(ps)} value(s) for parents {ps}")
        idx = tuple(
            self.model.variables[p].index(val) for p, val in zip(ps, parent_values, strict=True)
        )
        return Dirichlet(self.alphas[name][idx])

    def mean(self) -> BayesNetParameters:
        """Posterior-mean CPTs; they also give the posterior predictive of one new record."""
        return BayesNetParameters(
            self.model, {v: a / a.sum(axis=-1, keepdims=True) for v, a in self.alphas.items()}
        )

    def mode(self) -> BayesNetParameters:
        """The MAP CPTs (alpha - 1 normalised; needs every alpha > 1)."""
        out = {}
        for v, a in self.alphas.items():
            if np.any(a <= 1):
                raise ValueError("the posterior mode is on the boundary: some alpha <= 1")
            out[v] = (a - 1) / (a - 1).sum(axis=-1, keepdims=True)
        return BayesNetParameters(self.model, out)

    def logpdf(self, params: BayesNetParameters | Mapping[str, Any]) -> float:
        """Log posterior density of the CPTs ``params`` (sum over independent rows)."""
        cpts = params.cpts if isinstance(params, BayesNetParameters) else params
        total = 0.0
        for v, a in self.alphas.items():
            t = np.asarray(cpts[v], dtype=float)
            lognorm = special.gammaln(a).sum(axis=-1) - special.gammaln(a.sum(axis=-1))
            total += float(np.sum(special.xlogy(a - 1, t).sum(axis=-1) - lognorm))
        return total

    def predict_proba(self, data: Any, target: str | None = None) -> np.ndarray:
        """Posterior predictive p(target | other variables) of each record of ``data``."""
        return self.mean().predict_proba(data, target)

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": "bayes-net-dirichlet",
            "alphas": {k: v.tolist() for k, v in self.alphas.items()},
        }

    def summary(self, level: float = 0.95) -> Any:
        """Every CPT entry's posterior mean, sd and central interval (:func:`cpt_summary`)."""
        return cpt_summary(self.model, self.node, level)

    def _display(self) -> tuple[str, list[tuple[str, str]]]:
        return "BayesNetPosterior (product of Dirichlets)", [
            *bayes_net_rows(self.model),
            ("table", ".summary() for every CPT entry"),
        ]

    def __repr__(self) -> str:
        return display.text(self)

    def _repr_html_(self) -> str:
        return display.html(self)


def _target(model: BayesNet, target: str | None) -> str:
    if target is None:
        default = getattr(model, "target", None)  # a NaiveBayes knows its class variable
        if isinstance(default, str):
            return default
        raise ValueError("target must be given for a BayesNet that is not a NaiveBayes")
    if target not in model.variables:
        raise ValueError(f"target must be a model variable, got {target!r}")
    return target
