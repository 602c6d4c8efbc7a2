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


def test_prior_parameters_that_reached_2_to_53_are_projected() -> None:
    """Beta(2^62, 1): a count of one moved the posterior's a by 0 or 1024 (rounding), far
    beyond the certified sensitivity of 1. A run (and the checker, which evaluates the
    prior by the run's code) now projects a Beta's parameters onto [TINY,
    MAX_CONCENTRATION / 2] (PROOF.md §4), where counts are exact: the posterior's a moves
    by exactly the count. (The checker's refusal at 2^53, `_check_counts_exact`, stays as a
    second line of defence; no prior reaches it.)"""
    from dpbayes.programs import categorical, dirichlet, private_categories
    from dpbayes.programs.interpreter import Runtime
    from dpbayes.programs.terms import MAX_CONCENTRATION

    def build(db, prior):
        return lap_mech(1.0, get_params(infer(learn(db, ran(prior), bernoulli)))[0], 1.0)

    for a in (2.0**62, 2.0**53 - 600):
        prog = program("big", private_bools("db", 600), lambda db, a=a: build(db, beta(a, 1.0)))
        assert prog.check().epsilon == 1.0
        post_a = prog.body.args[0]  # the posterior's a, the Laplace input
        got = []
        for k in (0, 1):
            data = np.array([True] * k + [False] * (600 - k))
            got.append(Runtime(data, None, None, prog.db.uid).value(post_a))
        assert got == [MAX_CONCENTRATION / 2, MAX_CONCENTRATION / 2 + 1]

    def build_dir(db):
        post = infer(learn(db, ran(dirichlet(np.array([1.0, 2.0**60, 1.0]))), categorical))
        return lap_mech(1.0, get_params(post)[0], 1.0)

    assert program("dir", private_categories("db", 5, 3), build_dir).check().epsilon == 1.0


def test_a_delta_budget_alone_is_tested() -> None:
    from dpbayes.programs import NotPrivate
    from dpbayes.programs import examples as ex

    p = ex.input_perturbation_normal().program  # spends (0.5, 1e-3)
    with pytest.raises(NotPrivate, match="more than the budget"):
        p.check(delta=1e-9)
    c = p.check(delta=1e-3)
    assert (c.epsilon, c.delta) == (0.5, 1e-3)


@pytest.mark.parametrize(
    ("family", "name"), [("normal", "mean"), ("beta", "a"), ("bernoulli", "p")]
)
def test_a_one_element_vector_is_refused_for_a_scalar_parameter(family: str, name: str) -> None:
    """normal(const([0.0]), 1) was certified, then every run died on float(tuple)."""
    from dpbayes.programs import bernoulli as bern
    from dpbayes.programs import normal

    make = {
        "normal": lambda: normal(const([0.0]), 1.0),
        "beta": lambda: beta(const([2.0]), 1.0),
        "bernoulli": lambda: bern(const(np.array([0.5]))),
    }[family]
    p = program(family, private_bools("db", 2), lambda db: ran(make()))
    with pytest.raises(TypeError, match=f"{family} parameter {name} .*must be a scalar"):
        p.check()


def test_a_huge_n_is_refused_by_the_beta_lemma_naming_n() -> None:
    """n = 10^11 asked numpy for 745 GiB (MemoryError naming no argument)."""
    from dpbayes.programs import examples as ex

    with pytest.raises(ValueError, match="n must be at most 10,000,000"):
        ex.output_parameters_beta(n=10**11).program.check()
    with pytest.raises(ValueError, match="n must be at most"):
        ex.output_hellinger_dirichlet(n=10**11, alpha=(1.0, 1.0))
