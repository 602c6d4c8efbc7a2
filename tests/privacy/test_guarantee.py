"""Guarantee: description, serialisation round trip, sequential composition."""

from __future__ import annotations

import json
import math

import pytest

from dpbayes.privacy import (
    ExponentialMechanism,
    GaussianMechanism,
    Guarantee,
    LaplaceMechanism,
    Neighbours,
    compose_sequential,
)


def _g(**kw):
    base = {
        "epsilon": 1.0,
        "delta": 0.0,
        "neighbours": "substitute",
        "mechanism": "laplace",
        "sensitivity": 2.0,
    }
    return Guarantee(**{**base, **kw})


def test_describe():
    assert _g().describe() == ("1-DP, substitute one record, mechanism laplace, L1 sensitivity 2")
    text = _g(delta=1e-5, neighbours=Neighbours.ADD_REMOVE, simulation=True).describe()
    assert text.startswith("(1, 1e-05)-DP, add/remove one record")
    assert "SIMULATION" in text
    text = _g(private=False, mechanism="local-sensitivity exponential").describe()
    assert text.startswith("NOT differentially private")


@pytest.mark.parametrize(
    "guarantee",
    [
        _g(),
        _g(delta=1e-7, neighbours="add-remove", simulation=True, details={"scale": 2.0}),
        LaplaceMechanism(epsilon=0.3, sensitivity=1.5).guarantee(column="age"),
        GaussianMechanism(epsilon=1, delta=1e-5, sensitivity=1).guarantee(),
        ExponentialMechanism(epsilon=1, sensitivity=1, monotonic=True).guarantee(),
        _g(private=False, epsilon=0.0, mechanism="none", sensitivity=0.0),
    ],
)
def test_to_dict_from_dict_round_trip(guarantee):
    d = guarantee.to_dict()
    assert d["neighbours"] in ("substitute", "add-remove")
    again = Guarantee.from_dict(json.loads(json.dumps(d)))
    assert again == guarantee
    assert again.neighbours is guarantee.neighbours


def test_from_dict_refuses_unknown_fields_and_bad_values():
    d = _g().to_dict()
    with pytest.raises(ValueError, match="unknown fields"):
        Guarantee.from_dict({**d, "epsilon_bonus": 1})
    with pytest.raises(ValueError, match="epsilon"):
        Guarantee.from_dict({**d, "epsilon": -1})
    with pytest.raises(ValueError, match="delta"):
        Guarantee.from_dict({**d, "delta": 1.0})
    with pytest.raises(ValueError, match="neighbours"):
        Guarantee.from_dict({**d, "neighbours": "siblings"})
    with pytest.raises(ValueError, match="sensitivity"):
        Guarantee.from_dict({**d, "sensitivity": -1.0})
    with pytest.raises(ValueError, match="epsilon"):
        _g(epsilon=0.0)  # a private guarantee of eps 0 is not a mechanism
    with pytest.raises(TypeError, match="epsilon"):
        _g(epsilon="1")


def test_neighbours_parse():
    assert Neighbours.parse("add_remove") is Neighbours.ADD_REMOVE
    assert Neighbours.parse(" Add/Remove ") is Neighbours.ADD_REMOVE
    assert Neighbours.parse("SUBSTITUTE") is Neighbours.SUBSTITUTE
    with pytest.raises(ValueError, match="neighbours"):
        Neighbours.parse(3)


def test_compose_sequential():
    parts = [_g(epsilon=0.5), _g(epsilon=0.25, delta=1e-6), _g(epsilon=0.25, delta=1e-6)]
    total = compose_sequential(parts)
    assert total.epsilon == pytest.approx(1.0)
    assert total.delta == pytest.approx(2e-6)
    assert total.neighbours is Neighbours.SUBSTITUTE
    assert total.mechanism == "composition of 3 x laplace"
    assert total.private and not total.simulation
    assert len(total.details["parts"]) == 3
    assert Guarantee.from_dict(total.to_dict()) == total
    mixed = compose_sequential([_g(), _g(mechanism="gaussian", simulation=True)])
    assert mixed.simulation is True
    assert "laplace" in mixed.mechanism and "gaussian" in mixed.mechanism
    assert compose_sequential([_g(), _g(private=False)]).private is False
    capped = compose_sequential([_g(delta=0.6), _g(delta=0.6)])
    assert capped.delta < 1.0 and math.isfinite(capped.delta)


def test_compose_sequential_refuses_empty_and_mixed_relations():
    with pytest.raises(ValueError, match="guarantees"):
        compose_sequential([])
    with pytest.raises(ValueError, match="neighbouring"):
        compose_sequential([_g(), _g(neighbours="add-remove")])


def test_with_simulation():
    g = _g()
    assert g.with_simulation(True).simulation is True
    assert g.simulation is False
