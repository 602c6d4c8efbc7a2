"""Every registered mechanism's release reads back through the library.

``Release.from_dict(json.loads(rel.to_json()))`` rebuilds the same record (model, mechanism,
released values, public facts, guarantee, naive posterior) for every (mechanism, model
type) in the registry: the conjugate models, Bayesian networks and naive Bayes, both
regressions. A mechanism registered without an example here fails the coverage check.
Every mechanism's ``public`` facts are its family's typed record, serialised in the order
written so far; malformed facts are refused naming the field, and files written before a
fact was recorded still read.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpbayes as dpb
from dpbayes.models import BayesNet, NaiveBayes
from dpbayes.release import Release, registered
from dpbayes.release.base import _REGISTRY, plan
from dpbayes.release.record import PublicRecord

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


def _releases() -> list[Release]:
    out = []
    for (mechanism, _), (model, data, args) in _examples().items():
        args = {k: v for k, v in args.items() if v is not None}
        out.append(plan(model, data, mechanism=mechanism, **args).run(dpb.privacy.noise_source(1)))
    return out


def test_every_registered_mechanism_has_its_familys_record() -> None:
    registered()  # the families loaded
    for (name, model_type), entry in _REGISTRY.items():
        family = entry.planner.__module__.rsplit(".", 1)[0]
        assert entry.record is not PublicRecord, (name, model_type)
        assert entry.record.__module__ == f"{family}.record", (name, model_type, family)


def test_the_record_is_what_public_serialises_in_its_order() -> None:
    for rel in _releases():
        rec = rel.record
        assert isinstance(rec, PublicRecord)
        assert list(rec.to_public().items()) == list(rel.public.items()), rel.mechanism
        back = Release.from_dict(json.loads(rel.to_json()))
        assert back.record == rec and type(back.record) is type(rec)


def _broken(rel: Release, edit: Any) -> dict[str, Any]:
    d = json.loads(rel.to_json())
    edit(d["public"])
    return d


def test_malformed_public_facts_are_refused_naming_the_field() -> None:
    for rel in _releases():
        required = [k for k in rel.public if k in ("neighbours", "draws", "noise", "trim")]
        for key in required[:1]:
            d = _broken(rel, lambda p, key=key: p.pop(key))
            with pytest.raises(ValueError, match=rf"release record: public '{key}' is missing"):
                Release.from_dict(d)
        d = _broken(rel, lambda p: p.update(nonsense=1))
        with pytest.raises(ValueError, match="release record: public 'nonsense' is not a fact"):
            Release.from_dict(d)
        if "neighbours" in rel.public:
            d = _broken(rel, lambda p: p.update(neighbours="sometimes"))
            with pytest.raises(ValueError, match="public 'neighbours' must be one of"):
                Release.from_dict(d)
        if rel.public.get("n") is not None:
            d = _broken(rel, lambda p: p.update(n=-3))
            with pytest.raises(ValueError, match="public 'n' must be >= "):
                Release.from_dict(d)
            d = _broken(rel, lambda p: p.update(n="many"))
            with pytest.raises(ValueError, match="public 'n' must be an integer"):
                Release.from_dict(d)


def test_files_written_before_a_fact_was_recorded_still_read() -> None:
    """Posterior-sampling and MAP releases once lacked n (and the MAP its temperature),
    the exponential mechanism its exponent's eps: the records read them as None and the
    noise-aware posteriors fall back to the recipient's n and the guarantee's details."""
    df = pd.DataFrame({"a": [0, 1, 1, 0, 1] * 4, "b": [1, 1, 0, 0, 1] * 4})
    bn = BayesNet({"a": [0, 1], "b": [0, 1]}, [("a", "b")])
    for mechanism, drop in (("sampling", ["n"]), ("map", ["n", "scale"])):
        rel = plan(bn, df, mechanism=mechanism, epsilon=2.0).run(dpb.privacy.noise_source(1))
        d = _broken(rel, lambda p, drop=drop: [p.pop(k) for k in drop])
        old = Release.from_dict(d)
        assert all(getattr(old.record, k) is None for k in drop)
        assert old.to_dict() == d
        with warnings.catch_warnings():  # 40 sweeps mix poorly: only the same draws matter
            warnings.simplefilter("ignore", RuntimeWarning)
            post = old.noise_aware_posterior(n=20, iterations=40, chains=2, rng=0).mean()
            new = rel.noise_aware_posterior(iterations=40, chains=2, rng=0).mean()
        for v in bn.nodes:
            np.testing.assert_array_equal(post.cpts[v], new.cpts[v])
    coin = dpb.models.BetaBernoulli(alpha=1.0, beta=1.0)
    rel = plan(coin, np.array([1, 0, 1] * 10), mechanism="expmech", epsilon=1.0).run(
        dpb.privacy.noise_source(1)
    )
    old = Release.from_dict(_broken(rel, lambda p: p.pop("exponent_epsilon")))
    assert old.record.exponent_epsilon is None  # type: ignore[attr-defined]
    assert old.noise_aware_posterior().mean() == rel.noise_aware_posterior().mean()
