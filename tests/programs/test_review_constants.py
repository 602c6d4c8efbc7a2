"""Review fixes: constants, parameters and budgets the checker and the run must read alike."""

from __future__ import annotations

import numpy as np
import pytest

from dpbayes.programs import (
    bernoulli,
    beta,
    const,
    get_params,
    infer,
    lap_mech,
    learn,
    private_bools,
    program,
    ran,
)


class _TwoFaced:
    """numpy reads 0, float() reads 1e6."""

    def __array__(self, dtype=None, copy=None):
        return np.array(0.0)

    def __float__(self) -> float:
        return 1e6


def test_const_refuses_objects_that_read_as_two_numbers() -> None:
    with pytest.raises(TypeError, match="const value"):
        const(_TwoFaced())

    def build(db):
        a = get_params(infer(learn(db, ran(beta(1.0, 1.0)), bernoulli)))[0]
        return lap_mech(1.0, _TwoFaced() * a, sensitivity=1.0)

    with pytest.raises(TypeError, match="const value"):
        program("scaled", private_bools("db", 4), build)


def test_const_stores_plain_floats_and_read_only_float_arrays() -> None:
    assert type(const(np.int64(3)).args[0]) is float
    assert type(const(True).args[0]) is float
    v = const([1, np.float32(2.5)]).args[0]
    assert v == (1.0, 2.5) and all(type(x) is float for x in v)
    arr = const(np.arange(3)).args[0]
    assert arr.dtype == np.float64 and not arr.flags.writeable
    with pytest.raises(TypeError, match="const value"):
        const("1.0")
    with pytest.raises(TypeError, match="const value"):
        const(np.array(["a"]))
