"""Floating point and data-dependent failures: the defects of the programs review.

1. Bounds computed in floating point underflowed to 0 (the L2 norm of 1e-162 * a), and a
   computed 0 made a value public: the Gaussian mechanism was certified free and released
   the count exactly. Bounds are now rounded up, and only structure makes a value public.
2. IEEE special values (0 * inf = NaN, -0.0, an underflow to 0 in one run only) let
   private data through ``unit`` under a 0-DP certificate. Besides (1), a run now clamps
   its arithmetic to finite reals, maps NaN to 0 and -0.0 to +0.0.
3. Certified programs failed on some data sets and not on their neighbours (an overflow
   in an exp_mech score; a 0.5 * a datum of a Bernoulli likelihood).
4. ``Program.sample(size > 1)`` on the secure path released ``size`` runs, each labelled
   with the eps of one run.
"""

from __future__ import annotations

import itertools
import math
import sys
from fractions import Fraction

import numpy as np
import pytest

from dpbayes.programs import (
    NotPrivate,
    bernoulli,
    beta,
    categorical,
    clip,
    const,
    dirichlet,
    eq_score,
    exp_mech,
    gauss_mech,
    get_params,
    infer,
    lap_mech,
    learn,
    map_records,
    normal,
    observe,
    outward,
    private_bools,
    private_categories,
    private_reals,
    program,
    ran,
    unit,
)
from dpbayes.programs.certificate import Bound
from dpbayes.programs.lemmas import dirichlet_categorical_bounds, normal_mean_bounds
from dpbayes.programs.terms import mul

DBL_MAX = sys.float_info.max


def a(db):
    """1 + the number of ones: moves by 1 between neighbours."""
    return get_params(infer(learn(db, ran(beta(1.0, 1.0)), bernoulli)))[0]


def every_data_set(n):
    return [list(x) for x in itertools.product([0, 1], repeat=n)]


def rejected_at(prog, rule):
    with pytest.raises(NotPrivate) as info:
        prog.check()
    assert info.value.step is not None and info.value.step.rule.startswith(rule), str(info.value)
    assert "\n" not in str(info.value)
    return info.value


# ------------------------------------------------------------------ 1. underflowing norms
def _reals_normal_params(db):
    post = infer(learn(db, ran(normal(0.0, 1.0)), lambda r: normal(r, 1.0)))
    return get_params(post)  # the mean moves by 1e-170 / 4, the variance is public


TINY_VALUES = {
    # the value released, and its true L2 sensitivity (each below 1e-162: its square is 0)
    "mul": (lambda db: 1e-162 * a(db), 1e-162),
    "clip": (lambda db: clip(1e-162 * a(db), 0.0, 1.0), 1e-162),
    "proj": (
        lambda db: (1e-162 * get_params(infer(learn(db, ran(beta(1, 1)), bernoulli))))[1],
        1e-162,
    ),
    "dist": (lambda db: get_params(normal(1e-162 * a(db), 1.0)), 1e-162),
}


@pytest.mark.parametrize("name", sorted(TINY_VALUES))
def test_a_tiny_l2_sensitivity_does_not_underflow_to_a_free_gaussian(name):
    value, true_l2 = TINY_VALUES[name]
    # noise calibrated far below the true sensitivity: refused (was certified 0-DP)
    small = program(
        name,
        private_bools("db", 5),
        lambda db: gauss_mech(1.0, 1e-6, value(db), sensitivity=1e-170),
    )
    err = rejected_at(small, "GaussMech")
    assert "noise too small" in str(err)
    # noise calibrated to the true sensitivity: the full (eps, delta), not (0, 0)
    enough = program(
        name,
        private_bools("db", 5),
        lambda db: gauss_mech(1.0, 1e-6, value(db), sensitivity=true_l2),
    )
    cert = enough.check()
    assert (cert.epsilon, cert.delta) == (1.0, 1e-6)


def test_a_tiny_posterior_shift_keeps_its_l2_through_infer_and_get_params():
    # records move by 1e-170: the posterior mean by 2.5e-171, whose square underflows
    db = private_reals("db", 3, bound=1e-170)
    small = program(
        "infer", db, lambda db: gauss_mech(1.0, 1e-6, _reals_normal_params(db), sensitivity=1e-171)
    )
    rejected_at(small, "GaussMech")
    enough = program(
        "infer",
        db,
        lambda db: gauss_mech(1.0, 1e-6, _reals_normal_params(db), sensitivity=2.5e-171),
    )
    assert enough.check().epsilon == 1.0


def test_the_underflow_program_of_the_review_no_longer_releases_the_count():
    prog = program(
        "p2",
        private_bools("db", 5),
        lambda db: gauss_mech(1.0, 1e-6, 1e-162 * a(db), sensitivity=1e-170),
    )
    with pytest.raises(NotPrivate):
        prog.run([1, 0, 0, 0, 0], rng=0)


def test_outward_operations_never_round_below_the_exact_value():
    assert outward.mul(1e-162, 1e-170) == math.nextafter(0.0, 1.0)
    assert outward.hypot([1e-170]) == 1e-170
    assert outward.hypot([1e-170, 1e-170]) >= 1e-170 * math.sqrt(2)
    assert outward.hypot([1e200, 1e200]) == pytest.approx(math.sqrt(2) * 1e200)
    assert outward.add(1.0, 1.0) == 2.0 and outward.hypot([1.0]) == 1.0  # exact stays exact
    for xs in ([0.1, 0.2], [0.1, 0.7, 1e-17], [1e-300] * 7):
        assert Fraction(outward.add(*xs)) >= sum(Fraction(x) for x in xs)
        h = outward.hypot(xs)
        assert Fraction(h) ** 2 >= sum(Fraction(x) ** 2 for x in xs)
        assert Fraction(math.nextafter(h, 0.0)) ** 2 < sum(Fraction(x) ** 2 for x in xs)
    assert outward.mul(0.0, math.inf) == math.inf and outward.mul(math.nan, 1.0) == math.inf


@pytest.mark.parametrize("scale", [1e-170, 1.0, 1e300])
def test_outward_operations_on_many_distinct_values_are_upper_bounds(scale):
    # beyond EXACT_LIMIT distinct values the vectorised path is used: still never below
    rng = np.random.default_rng(1)
    x, y = rng.random(outward.EXACT_LIMIT + 10) * scale, rng.random(outward.EXACT_LIMIT + 10)
    assert Fraction(outward.add(*x)) >= sum(Fraction(v) for v in x)
    assert Fraction(outward.hypot(x)) ** 2 >= sum(Fraction(v) ** 2 for v in x)
    prods = outward.vec_mul(x, y)
    sums = outward.vec_add(x, y)
    for u, v, p, q in zip(x, y, prods, sums, strict=True):
        assert Fraction(p) >= Fraction(u) * Fraction(v) and Fraction(q) >= Fraction(u) + Fraction(v)


def test_a_gaussian_sensitivity_below_the_true_one_by_rounding_is_charged_its_eps():
    # np.sqrt(1000) is a double just below sqrt(1000), the exact L2 of 1000 copies of a(db)
    def build(db):
        return gauss_mech(1.0, 1e-5, mul(const(np.ones(1000)), a(db)), sensitivity=np.sqrt(1000))

    cert = program("root", private_bools("db", 4), build).check()
    assert cert.epsilon >= 1.0 and cert.delta == 1e-5


def test_a_laplace_cost_is_rounded_up_from_the_samplers_scale():
    # Delta = 1, noise scale b = fl(0.1 / 0.3): the loss Delta / b, exactly, is above
    # the nearest double of 0.3 * 1 / 0.1
    prog = program("lap", private_bools("db", 4), lambda db: lap_mech(0.3, a(db), sensitivity=0.1))
    scale = prog.body.info["mechanism"].scale
    assert Fraction(prog.check().epsilon) >= 1 / Fraction(scale)


def test_the_dirichlet_lemma_keeps_its_accuracy_for_large_priors():
    # H^2 = 1 - g(x)^2 with log g(x) = -1/(8x) + 1/(192 x^3) + O(x^-5) (exact to 1e-20 at 1e6)
    x = 1e6
    log_g = -1.0 / (8 * x) + 1.0 / (192 * x**3)
    true_h = math.sqrt(-math.expm1(2 * log_g))
    bound = dirichlet_categorical_bounds(np.full(3, x), 10)["hellinger"]
    assert true_h <= bound <= true_h * (1 + 1e-9)


def test_the_normal_lemma_total_variation_does_not_cancel_for_a_small_shift():
    out = normal_mean_bounds(1.0, 1.0, 3, 1e-9)  # the mean moves by 2.5e-10
    true_tv = math.erf(2.5e-10 / (2 * math.sqrt(2 * 0.25)))
    assert true_tv <= out["tv"] <= true_tv * (1 + 1e-9)


# ------------------------------------------------------------------ 2. IEEE special values
UNIT_LEAKS = {
    "nan": lambda db: unit(eq_score(0.0 * (1e308 * a(db)), 0.0)),
    "signed-zero": lambda db: unit(0.0 * (a(db) - 3.0)),
    "underflow": lambda db: unit(2e-164 * (1e-160 * a(db))),
}


@pytest.mark.parametrize("name", sorted(UNIT_LEAKS))
def test_a_value_computed_from_private_data_is_not_public_whatever_its_bound(name):
    rejected_at(program(name, private_bools("db", 5), UNIT_LEAKS[name]), "UnitM")


def test_a_bound_that_computes_to_zero_is_not_equal():
    assert not Bound("value", metrics={"L1": 0.0, "L2": 0.0}, coords=(0.0,), shape=()).equal
    assert not Bound("monad", metrics={"eps": 0.0, "delta": 0.0}).equal


MECHANISMS = {
    "laplace": lambda v: lap_mech(1.0, v),
    "gauss": lambda v: gauss_mech(1.0, 1e-6, v),
    "exp": lambda v: exp_mech(1.0, lambda r: eq_score(r, v), [0.0, 1.0]),
}


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_a_mechanism_is_free_only_on_a_structurally_public_input(name):
    mech = MECHANISMS[name]
    cert = program("zero", private_bools("db", 4), lambda db: mech(0.0 * a(db))).check()
    assert cert.epsilon > 0  # 0 * a(db): its bound is 0, but it reads the private input
    public = program("public", private_bools("db", 4), lambda db: mech(0.0 * 3.0)).check()
    assert (public.epsilon, public.delta) == (0.0, 0.0)


def _run(build, data):
    return (
        program("run", private_bools("db", len(data)), build)
        .run(data, rng=0, allow_non_private=True)
        .value
    )


def test_a_runs_arithmetic_is_finite_and_has_no_negative_zero():
    # the run agrees with real arithmetic: 0 * x is 0 (never -0.0 or NaN), overflow clamps
    for data in every_data_set(3):
        assert math.copysign(1.0, _run(lambda db: unit(0.0 * (a(db) - 3.0)), data)) == 1.0
        assert _run(lambda db: unit(eq_score(0.0 * (1e308 * a(db)), 0.0)), data) == 1.0
        assert _run(lambda db: unit(1e308 * a(db)), data) in (1e308, DBL_MAX)
        assert _run(lambda db: unit(-1e308 * a(db)), data) in (-1e308, -DBL_MAX)
        assert math.copysign(1.0, _run(lambda db: unit(-(0.0 * a(db))), data)) == 1.0


# ------------------------------------------------------------------ 3. data-dependent failures
def test_an_overflowing_score_runs_on_every_data_set():
    def build(db):
        return exp_mech(1.0, lambda r: 6e291 * a(db) + DBL_MAX, [0, 1], sensitivity=6e291)

    prog = program("overflow", private_bools("db", 3), build)
    assert prog.check().epsilon == pytest.approx(1.0)
    for data in every_data_set(3):
        assert prog.run(data, rng=0).value in (0, 1)  # raised on [1, 0, 0] (inf score)


def test_an_exp_mech_whose_temperature_overflows_is_refused_when_built():
    db = private_bools("db", 3)
    with pytest.raises(ValueError, match="temperature"):
        exp_mech(1.0, lambda r: 1e308 * a(db), [0, 1], sensitivity=1e308)


def test_a_non_binary_private_datum_of_a_bernoulli_is_refused_when_checked():
    def build(db):
        post = infer(observe(ran(beta(1.0, 1.0)), bernoulli, 0.5 * a(db)))
        return lap_mech(1.0, get_params(post), sensitivity=2.0)

    err = rejected_at(program("half", private_bools("db", 3), build), "Observe")
    assert "0/1" in str(err) and "integer" in str(err)


def test_a_private_datum_beyond_the_categories_is_refused_when_checked():
    def build(db):  # values 0 or 2: not a category of a 2-category Dirichlet
        datum = 2.0 * eq_score(a(db), 2.0)
        post = infer(observe(ran(dirichlet(np.ones(2))), categorical, datum))
        return lap_mech(1.0, get_params(post), sensitivity=2.0)

    rejected_at(program("cats", private_bools("db", 3), build), "Observe")


def test_records_beyond_the_categories_of_the_prior_are_refused():
    db = private_categories("db", 3, 4)
    prog = program(
        "k",
        db,
        lambda db: lap_mech(
            1.0, get_params(infer(learn(db, ran(dirichlet(np.ones(3))), categorical))), 2.0
        ),
    )
    # (a regression test: the check moved from the lemma to the domain check of the datum)
    err = rejected_at(prog, "Learn")
    assert "a run would fail on some data sets" in str(err)


def test_provably_binary_private_data_are_observed_and_run_on_every_data_set():
    def score_datum(db):  # an eq_score, copied twice with 0/1 weights
        datum = mul(const(np.array([1.0, 0.0])), eq_score(a(db), 2.0))
        post = infer(observe(ran(beta(1.0, 1.0)), bernoulli, datum))
        return lap_mech(1.0, get_params(post), sensitivity=2.0)

    def record_datum(db):  # each record of map_records is a 0/1 datum
        def one(y):
            post = infer(observe(ran(beta(1.0, 1.0)), bernoulli, y))
            return lap_mech(1.0, get_params(post)[0], sensitivity=1.0)

        return map_records(db, one)

    for build in (score_datum, record_datum):
        prog = program("ok", private_bools("db", 3), build)
        assert prog.check().epsilon == pytest.approx(1.0)
        for data in every_data_set(3):
            prog.run(data, rng=0)


# ------------------------------------------------------------------ 4. batches of runs
def test_a_batch_of_secure_runs_is_refused_and_a_simulated_batch_runs():
    prog = program("batch", private_bools("db", 4), lambda db: lap_mech(1.0, a(db)))
    with pytest.raises(ValueError, match="size=5"):
        prog.sample([1, 0, 1, 1], 5)  # rng=None: secure noise, each labelled eps = 1
    out = prog.sample([1, 0, 1, 1], 5, rng=0)
    assert len(out) == 5 and all(r.simulation for r in out)
    one = prog.run([1, 0, 1, 1])  # one secure release, with the certificate of one run
    assert not one.simulation and one.guarantee.epsilon == pytest.approx(1.0)
