"""Every registered mechanism's release reads back through the library.

``Release.from_dict(json.loads(rel.to_json()))`` rebuilds the same record (model, mechanism,
released values, public facts, guarantee, naive posterior) for every (mechanism, model
type) in the registry: the conjugate models, Bayesian networks and naive Bayes, both
regressions. A mechanism registered without an example here fails the coverage check.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

import dpbayes as dpb
from dpbayes.models import BayesNet, NaiveBayes
from dpbayes.release import Release, registered
from dpbayes.release.base import plan

from test_adversarial_privacy import CASES


def _examples() -> dict[tuple[str, type], tuple[Any, Any, dict[str, Any]]]:
    """(model, data, release arguments) per registered key: the adversarial cases' first
    data set where one exists, else a small example."""
    out: dict[tuple[str, type], tuple[Any, Any, dict[str, Any]]] = {}
    for c in CASES:
        args = {"epsilon": c.epsilon, "delta": c.delta, "neighbours": c.neighbours}
        out.setdefault(c.key, (c.model, c.x, {**args, "column": c.column, **c.options}))
    df = pd.DataFrame({"a": [0, 1, 1, 0, 1] * 4, "b": [1, 1, 0, 0, 1] * 4})
    bn = BayesNet({"a": [0, 1], "b": [0, 1]}, [("a", "b")])
    out.setdefault(("sampling", BayesNet), (bn, df, {"epsilon": 2.0}))
    nb = NaiveBayes("a", [0, 1], {"b": [0, 1]})
    out.setdefault(("sampling", NaiveBayes), (nb, df, {"epsilon": 2.0}))
    g = np.random.default_rng(0)
    x = np.clip(g.normal(0, 0.5, (60, 2)), -1, 1)
    y = np.clip(x @ np.array([0.5, -0.3]) + g.normal(0, 0.3, 60), -1, 1)
    lin = dpb.models.BayesianLinearRegression(
        prior_precision=1.0,
        noise_variance=0.09,
        feature_bound=1.0,
        label_bound=1.0,
        weight_bound=1.0,
    )
    out.setdefault(("sampling", type(lin)), (lin, (x, y), {"epsilon": 5.0}))
    out.setdefault(("ssp", type(lin)), (lin, (x, y), {"epsilon": 5.0}))
    logit = dpb.models.BayesianLogisticRegression(prior_precision=1.0, feature_bound=1.0)
    out.setdefault(("ssp", type(logit)), (logit, (x, (y > 0).astype(int)), {"epsilon": 5.0}))
    return out


def test_every_registered_mechanism_has_an_example() -> None:
    examples = _examples()
    missing = [f"{m} {t.__name__}" for (m, t) in registered() if not _covered(m, t, examples)]
    assert not missing, f"registered mechanisms without a read-back example: {missing}"


def _covered(m: str, t: type, examples: dict[tuple[str, type], Any]) -> bool:
    return any(m == em and issubclass(et, t) for (em, et) in examples)


def test_every_release_reads_back_through_the_library() -> None:
    for (mechanism, _), (model, data, args) in _examples().items():
        args = {k: v for k, v in args.items() if v is not None}
        rel = plan(model, data, mechanism=mechanism, **args).run(dpb.privacy.noise_source(1))
        record = json.loads(rel.to_json())
        back = Release.from_dict(record)
        assert back.mechanism == rel.mechanism and type(back.model) is type(rel.model)
        assert back.to_dict() == record, mechanism
        assert back.guarantee == rel.guarantee
