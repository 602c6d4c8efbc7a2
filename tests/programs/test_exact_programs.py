"""Exact output distributions of finite programs (dpbayes.programs.exact)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpbayes.models import Beta
from dpbayes.programs import (
    bernoulli,
    beta,
    bind,
    const,
    eq_score,
    exp_mech,
    get_params,
    infer,
    lap_mech,
    learn,
    map_records,
    private_bools,
    program,
    ran,
    unit,
)
from dpbayes.programs import examples as ex
from dpbayes.programs.exact import exact_epsilon, output_distribution, output_probabilities


def test_randomised_response_on_one_record_loses_half_its_eps():
    # expMech(eps) with score 1 if equal over {0, 1}: keep w.p. e^{eps/2} / (1 + e^{eps/2})
    e = ex.input_perturbation_beta(n=1, epsilon=1.0)
    out = dict((v, p) for v, p in output_probabilities(e.program, [1]))
    keep = math.exp(0.5) / (1 + math.exp(0.5))
    assert out[Beta(2.0, 1.0)] == pytest.approx(keep, rel=1e-12)
    assert out[Beta(1.0, 2.0)] == pytest.approx(1 - keep, rel=1e-12)
    loss = exact_epsilon(e.program, [(p[0], p[1]) for p in e.pairs()])
    assert loss == pytest.approx(0.5, rel=1e-12)
    assert loss <= e.program.check().epsilon


def test_probabilities_of_a_composed_program_sum_to_one_and_multiply():
    def build(db):
        coin = ran(bernoulli(0.25))
        rr = map_records(db, lambda y: exp_mech(2.0, lambda r: eq_score(y, r), [0, 1]))
        return bind(coin, lambda c: bind(rr, lambda z: unit(c + z)))

    prog = program("c", private_bools("db", 2), build)
    out = output_probabilities(prog, [1, 0])
    assert sum(p for _, p in out) == pytest.approx(1.0, rel=1e-12)
    keep = math.exp(1.0) / (1 + math.exp(1.0))
    probs = {tuple(np.asarray(v).tolist()): p for v, p in out}
    assert probs[(2.0, 1.0)] == pytest.approx(0.25 * keep * keep, rel=1e-12)
    assert probs[(0.0, 1.0)] == pytest.approx(0.75 * (1 - keep) ** 2, rel=1e-12)


def test_a_discarded_draw_is_not_enumerated_and_a_public_program_loses_nothing():
    def build(db):
        post = ran(infer(learn(db, ran(beta(1, 1)), bernoulli)))
        return bind(post, lambda x: unit(const(1.0)))

    prog = program("d", private_bools("db", 2), build)
    assert exact_epsilon(prog, [([0, 0], [1, 0])]) == 0.0


def test_the_auditor_reports_the_exact_eps_of_a_program():
    from dpbayes.audit import audit

    e = ex.input_perturbation_beta(n=3, epsilon=1.0)
    pairs = [(x, y) for x, y, _ in e.pairs()]
    r = audit(
        e.program,
        pairs,
        epsilon=1.0,
        samples=500,
        rng=0,
        distribution=output_distribution(e.program),
    )
    assert r.exact_epsilon == pytest.approx(exact_epsilon(e.program, pairs), rel=1e-9)
    assert r.exact_epsilon <= 1.0 and r.passed


def test_continuous_outputs_are_refused():
    prog = program(
        "l",
        private_bools("db", 2),
        lambda db: lap_mech(1.0, get_params(infer(learn(db, ran(beta(1, 1)), bernoulli)))[0]),
    )
    with pytest.raises(TypeError, match="finite"):
        output_probabilities(prog, [0, 1])


def test_exact_eps_is_finite_where_probabilities_underflow():
    """At eps = 2000 some exp_mech probabilities underflow to 0 in linear space: the exact
    eps was inf and the auditor failed a correct program. In log space it is ~1000."""
    import warnings

    from dpbayes.audit import audit

    e = ex.output_hellinger_beta(n=5, epsilon=2000.0)
    pairs = [(x, y) for x, y, _ in e.pairs()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eps = exact_epsilon(e.program, pairs)
        assert math.isfinite(eps) and eps <= 2000.0
        r = audit(
            e.program,
            e.pairs(),
            epsilon=e.epsilon,
            samples=200,
            batch=True,
            rng=0,
            distribution=output_distribution(e.program),
        )
    assert r.passed and r.exact_epsilon == pytest.approx(eps, rel=1e-9)
