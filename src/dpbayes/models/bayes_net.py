"""Discrete Bayesian networks with Dirichlet priors: exact, non-private posteriors.

Paper 004 (Zhang, Rubinstein & Dimitrakakis 2016), §2.1 and Example 1: a DAG over
categorical variables; the conditional distribution of every node given each
configuration of its parents is categorical with an independent Dirichlet(alpha) prior,
so the posterior is Dirichlet(alpha + counts) per (node, parent configuration) and the
"posterior updates" are the counts of each node's family (node plus parents) table.
:class:`NaiveBayes` is the special case with one class node as sole parent of every
feature. Nothing here draws random numbers; the private releases live in
``dpbayes.release.bayes_net.laplace``, ``.fourier`` and ``.sampling``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from dpbayes.models.bayes_net_counts import family_counts
from dpbayes.models.bayes_net_posterior import (
    BayesNetParameters,
    BayesNetPosterior,
    BayesNetStatistics,
)
from dpbayes.privacy.validation import check_category, check_positive

__all__ = [
    "BayesNet",
    "BayesNetParameters",
    "BayesNetPosterior",
    "BayesNetStatistics",
    "NaiveBayes",
]


def _check_categories(name: str, cats: Any) -> tuple[Any, ...]:
    if isinstance(cats, str | bytes) or not isinstance(cats, Iterable):
        raise TypeError(f"variables[{name!r}] must be a sequence of categories, got {cats!r}")
    out = tuple(check_category(c, f"a category of variables[{name!r}]") for c in cats)
    if len(out) < 2:
        raise ValueError(f"variables[{name!r}] must have at least 2 categories, got {len(out)}")
    if len(set(out)) != len(out):
        raise ValueError(f"variables[{name!r}] has repeated categories: {list(out)}")
    return out


class BayesNet:
    """A discrete Bayesian network with a Dirichlet(alpha, ..., alpha) prior on every CPT row.

    Parameters
    ----------
    variables:
        ``{name: categories}``: every variable and its public list of categories (>= 2).
        The categories are part of the model, never read from the data.
    edges:
        ``(parent, child)`` pairs; they must form a directed acyclic graph.
    alpha:
        Dirichlet concentration of every cell (> 0); 1 is the uniform prior of paper 004.
    """

    def __init__(
        self,
        variables: Mapping[str, Sequence[Any]],
        edges: Iterable[tuple[str, str]] = (),
        *,
        alpha: float = 1.0,
    ) -> None:
        if not isinstance(variables, Mapping) or not variables:
            raise TypeError("variables must be a non-empty mapping {name: categories}")
        for key in variables:
            if not isinstance(key, str) or not key:
                raise TypeError(f"variables must have non-empty string names, got {key!r}")
        self.variables: dict[str, tuple[Any, ...]] = {
            k: _check_categories(k, v) for k, v in variables.items()
        }
        pairs: list[tuple[str, str]] = []
        for e in edges:
            if not isinstance(e, Sequence) or isinstance(e, str) or len(e) != 2:
                raise TypeError(f"edges must be (parent, child) pairs, got {e!r}")
            a, b = e
            for v in (a, b):
                if v not in self.variables:
                    raise ValueError(f"edges refer to unknown variable {v!r}")
            if a == b:
                raise ValueError(f"edges must form a DAG: self-loop on {a!r}")
            if (a, b) not in pairs:
                pairs.append((a, b))
        self.edges: tuple[tuple[str, str], ...] = tuple(pairs)
        self.alpha = check_positive(alpha, "alpha")
        names = list(self.variables)
        self.parents: dict[str, tuple[str, ...]] = {
            v: tuple(p for p in names if (p, v) in pairs) for v in names
        }
        self.order: tuple[str, ...] = self._topological_order()

    def _topological_order(self) -> tuple[str, ...]:
        remaining = dict(self.parents)
        order: list[str] = []
        while remaining:
            ready = [v for v, ps in remaining.items() if all(p in order for p in ps)]
            if not ready:
                cycle = self._find_cycle(set(remaining))
                raise ValueError("edges must form a DAG: cycle " + " -> ".join(cycle))
            order.extend(ready)
            for v in ready:
                del remaining[v]
        return tuple(order)

    def _find_cycle(self, nodes: set[str]) -> list[str]:
        # every remaining node has a remaining parent: walk parents until a repeat
        path = [min(nodes)]
        while True:
            nxt = next(p for p in self.parents[path[-1]] if p in nodes)
            if nxt in path:
                cyc = [*path[path.index(nxt) :], nxt]
                return list(reversed(cyc))
            path.append(nxt)

    # --- structure ---------------------------------------------------------------
    @property
    def nodes(self) -> tuple[str, ...]:
        """Variable names in declaration order (the order of every table and vector)."""
        return tuple(self.variables)

    def cardinality(self, name: str) -> int:
        return len(self.variables[name])

    def family(self, node: str) -> tuple[str, ...]:
        """The node's family: its parents then the node (the axes of its count table)."""
        return (*self.parents[node], node)

    def table_shape(self, node: str) -> tuple[int, ...]:
        return tuple(self.cardinality(v) for v in self.family(node))

    @property
    def n_cells(self) -> int:
        """Total number of counts (posterior updates) over all family tables."""
        return int(sum(np.prod(self.table_shape(v)) for v in self.nodes))

    @property
    def is_binary(self) -> bool:
        return all(len(c) == 2 for c in self.variables.values())

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(variables={ {k: list(v) for k, v in self.variables.items()} }, "
            f"edges={list(self.edges)}, alpha={self.alpha})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BayesNet):
            return NotImplemented
        return (
            self.variables == other.variables
            and set(self.edges) == set(other.edges)
            and self.alpha == other.alpha
        )

    def __hash__(self) -> int:
        return hash((tuple(self.variables.items()), frozenset(self.edges), self.alpha))

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": "bayes-net",
            "variables": {k: list(v) for k, v in self.variables.items()},
            "edges": [list(e) for e in self.edges],
            "alpha": self.alpha,
        }

    # --- data ----------------------------------------------------------------------
    def encode(self, data: Any, columns: Sequence[str] | None = None) -> np.ndarray:
        """Category indices (n, len(columns)) of the named columns of a table.

        Raises ValueError for a missing column, a missing value or a category that is not
        declared in the model.
        """
        cols = list(self.nodes if columns is None else columns)
        frame = _as_frame(data)
        out = np.empty((len(frame), len(cols)), dtype=np.int64)
        for j, name in enumerate(cols):
            if name not in frame.columns:
                raise ValueError(f"data has no column {name!r} (model variable)")
            values = frame[name].to_numpy()
            idx = self._category_codes(name, values)
            if np.any(idx < 0):  # the value itself is data: the message does not quote it
                raise ValueError(
                    f"data column {name!r} has a value that is not a category; "
                    f"the model declares {list(self.variables[name])}"
                )
            out[:, j] = idx
        return out

    def _category_codes(self, name: str, values: np.ndarray) -> np.ndarray:
        """Index of each value in the declared categories (-1 if undeclared)."""
        import pandas as pd

        cats = self.variables[name]
        numeric = all(isinstance(c, int | float) and not isinstance(c, bool) for c in cats)
        if values.dtype.kind in "biuf" and numeric:
            v = values.astype(float)
            if np.isnan(v).any():
                raise ValueError(f"data column {name!r} contains missing values")
            c = np.asarray(cats, dtype=float)
            order = np.argsort(c)
            pos = np.clip(np.searchsorted(c[order], v), 0, c.size - 1)
            return np.where(c[order][pos] == v, order[pos], -1)
        if pd.isna(values).any():
            raise ValueError(f"data column {name!r} contains missing values")
        if values.dtype == bool:
            values = values.astype(np.int64)
        return np.asarray(pd.Index(list(cats)).get_indexer(values))

    def statistics(self, data: Any, column: str | None = None) -> BayesNetStatistics:
        """The family count tables of ``data`` (the posterior updates of paper 004).

        In-memory data (a pandas DataFrame, a mapping of columns) is counted by numpy in
        one pass; files, other frames, databases and contribution-bounded tables by the
        engine that holds them, with the same results (:mod:`.bayes_net_counts`).
        """
        if column is not None:
            raise ValueError("column must be None for a BayesNet (it reads every variable)")
        return family_counts(self, data)

    # --- posteriors ----------------------------------------------------------------
    def prior(self) -> BayesNetPosterior:
        return BayesNetPosterior(
            self, {v: np.full(self.table_shape(v), self.alpha) for v in self.nodes}
        )

    def posterior_from(self, stats: BayesNetStatistics) -> BayesNetPosterior:
        """Dirichlet(alpha + counts) on every CPT row; counts may be noisy reals >= 0."""
        if not isinstance(stats, BayesNetStatistics):
            raise TypeError(f"stats must be BayesNetStatistics, got {type(stats).__name__}")
        alphas = {}
        for v in self.nodes:
            c = np.asarray(stats.counts[v], dtype=float)
            if c.shape != self.table_shape(v):
                raise ValueError(f"stats.counts[{v!r}] must have shape {self.table_shape(v)}")
            if np.any(c < 0) or not np.all(np.isfinite(c)):
                raise ValueError(f"stats.counts[{v!r}] must be finite and >= 0")
            alphas[v] = self.alpha + c
        return BayesNetPosterior(self, alphas)

    def exact_posterior(self, data: Any) -> BayesNetPosterior:
        """The non-private posterior given ``data``."""
        return self.posterior_from(self.statistics(data))


class NaiveBayes(BayesNet):
    """Naive Bayes: the class variable ``target`` is the sole parent of every feature.

    Paper 004 §5.1 (Bayesian naive Bayes with Beta/Dirichlet priors).
    """

    def __init__(
        self,
        target: str,
        classes: Sequence[Any],
        features: Mapping[str, Sequence[Any]],
        *,
        alpha: float = 1.0,
    ) -> None:
        if not isinstance(target, str):
            raise TypeError(f"target must be a string, got {target!r}")
        if not isinstance(features, Mapping) or not features:
            raise TypeError("features must be a non-empty mapping {name: categories}")
        if target in features:
            raise ValueError(f"target {target!r} must not also be a feature")
        variables = {target: classes, **features}
        super().__init__(variables, [(target, f) for f in features], alpha=alpha)
        self.target = target
        self.features = tuple(features)

    def __repr__(self) -> str:
        return (
            f"NaiveBayes(target={self.target!r}, classes={list(self.variables[self.target])}, "
            f"features={len(self.features)}, alpha={self.alpha})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "family": "naive-bayes", "target": self.target}


def _as_frame(data: Any) -> Any:
    """``data`` as a pandas DataFrame (a DataFrame or a mapping of columns)."""
    import pandas as pd

    if isinstance(data, pd.DataFrame):
        return data
    if isinstance(data, Mapping):
        return pd.DataFrame(dict(data))
    raise TypeError(
        f"data must be a pandas DataFrame, a mapping of columns or a table source, "
        f"got {type(data).__name__}"
    )
