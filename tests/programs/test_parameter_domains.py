"""Distribution parameters outside their domain on some data sets only (PROOF.md §4, §9).

A certified program could build a distribution whose parameter, computed from private
data (or from a released value bound by ``bind``, whose law depends on the data), left the
family's domain on some data sets only: ``beta(a - 5, 1)``, ``bernoulli(p)`` with p
outside [0, 1], a Normal variance <= 0, a categorical p off the simplex. The run raised on
those data sets and not on their neighbours, so whether a run failed leaked the data. A
run now projects every parameter onto its closed domain (``interpreter.make_distribution``)
and never fails on a parameter value; the projection is 1-Lipschitz, so the certificate
is unchanged.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from dpbayes.programs import (
    bernoulli,
    beta,
    categorical,
    dirichlet,
    exp_mech,
    get_params,
    hellinger,
    infer,
    lap_mech,
    learn,
    normal,
    observe,
    private_bools,
    program,
    ran,
    unit,
)
from dpbayes.programs.terms import bind

TINY = sys.float_info.min  # the smallest positive normal double: interpreter.TINY
N = 5
# neighbours: a = 1 + the number of ones is 5 (a - 5 = 0, not a Beta parameter) and 6
LOW, HIGH = [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]
ALL_ZERO = [0] * N  # a - 5 = -4


def a(db):
    """1 + the number of ones: moves by 1 between neighbours."""
    return get_params(infer(learn(db, ran(beta(1.0, 1.0)), bernoulli)))[0]


def certified(build):
    prog = program("domains", private_bools("db", N), build)
    cert = prog.check()
    assert 0 < cert.epsilon < float("inf")
    return prog


def runs_on(prog, data, seeds):
    return [prog.run(data, rng=s).value for s in seeds]


# ------------------------------------------------------------------ private parameters
def test_a_beta_with_a_private_parameter_below_its_domain_runs_on_every_data_set():
    # get_params(beta(a - 5, 1)) released with Laplace noise: a - 5 moves by 1, certified
    prog = certified(lambda db: lap_mech(1.0, get_params(beta(a(db) - 5.0, 1.0)), 1.0))
    for data in (ALL_ZERO, LOW, HIGH):  # a - 5 = -4, 0, 1: the run raised on the first two
        out = prog.run(data, rng=0).value
        assert np.shape(out) == (2,) and np.all(np.isfinite(out))
    exact = program(
        "exact", private_bools("db", N), lambda db: unit(get_params(beta(a(db) - 5.0, 1.0)))
    )
    for data, want in ((ALL_ZERO, TINY), (LOW, TINY), (HIGH, 1.0)):  # the projected a - 5
        assert exact.run(data, rng=0, allow_non_private=True).value[0] == want


def test_a_divergence_score_of_a_private_beta_runs_on_every_data_set():
    # the score H(beta(a - 5, 1), beta(r, 1)) has sensitivity H(P, P') <= 1: certified
    def build(db):
        score = lambda r: hellinger(beta(a(db) - 5.0, 1.0), beta(r, 1.0))  # noqa: E731
        return exp_mech(1.0, score, [1.0, 2.0], sensitivity=1.0)

    prog = certified(build)
    for data in (ALL_ZERO, LOW, HIGH):
        assert all(v in (1.0, 2.0) for v in runs_on(prog, data, range(5)))


# --------------------------------------- parameters from a released (bound) value
# x = a / 10 + Laplace noise is public once released, but its law depends on the data:
# the run failed for the x outside the domain, with a probability that depends on a.
SEEDS = range(60)


def _released(db):
    return lap_mech(1.0, 0.1 * a(db), sensitivity=0.1)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda x: ran(bernoulli(x)), id="bernoulli p"),
        pytest.param(lambda x: ran(beta(x, 1.0)), id="beta a"),
        pytest.param(lambda x: ran(normal(0.0, x)), id="normal variance"),
        pytest.param(lambda x: ran(dirichlet(x * np.ones(2))), id="dirichlet alpha"),
        pytest.param(
            lambda x: ran(categorical(x * np.array([1.0, -1.0]) + np.array([0.0, 1.0]))),
            id="categorical p",
        ),
    ],
)
def test_a_parameter_from_a_released_value_never_fails_a_run(make):
    prog = certified(lambda db: bind(_released(db), make))
    for data in (ALL_ZERO, LOW, HIGH):
        for v in runs_on(prog, data, SEEDS):
            assert np.all(np.isfinite(v))


def test_a_normal_posterior_with_a_released_likelihood_variance_never_fails_a_run():
    def build(db):
        return bind(
            _released(db), lambda x: observe(ran(normal(0.0, 1.0)), lambda r: normal(r, x), 1.0)
        )

    prog = certified(build)
    for data in (ALL_ZERO, HIGH):
        assert all(np.isfinite(v) for v in runs_on(prog, data, SEEDS))


# ------------------------------------------------------------------ the projections
def test_the_projections_fix_the_domain_and_map_everything_else_into_it():
    from dpbayes.programs.interpreter import TINY as RUN_TINY
    from dpbayes.programs.interpreter import make_distribution, project_simplex

    assert RUN_TINY == TINY

    from dpbayes.programs.terms import MAX_CONCENTRATION

    assert make_distribution("beta", [-4.0, 1.0]).a == TINY
    # a Beta's two parameters sum to at most MAX_CONCENTRATION (PROOF.md §4)
    assert make_distribution("beta", [2.0, float("inf")]).b == MAX_CONCENTRATION / 2
    assert make_distribution("bernoulli", [1.5]).p == 1.0
    assert make_distribution("bernoulli", [-0.5]).p == 0.0
    assert make_distribution("bernoulli", [float("nan")]).p == 0.0
    assert make_distribution("normal", [0.0, -1.0]).sd == TINY**0.5
    assert make_distribution("normal", [0.0, 4.0]).sd == 2.0
    assert list(make_distribution("dirichlet", [[-1.0, 3.0]]).alpha) == [TINY, 3.0]
    np.testing.assert_allclose(project_simplex([0.2, 0.3, 0.5]), [0.2, 0.3, 0.5])
    np.testing.assert_allclose(project_simplex([-3.0, 7.0, 0.5]), [0.0, 0.75, 0.25])
    np.testing.assert_allclose(project_simplex([0.0, 0.0]), [0.5, 0.5])
    # 1-Lipschitz in L2 (random pairs)
    rng = np.random.default_rng(1)
    for _ in range(200):
        u, v = rng.normal(size=4) * 3, rng.normal(size=4) * 3
        d = np.linalg.norm(project_simplex(u) - project_simplex(v))
        assert d <= np.linalg.norm(u - v) + 1e-12


def test_a_categorical_draw_is_numpys_choice_from_the_same_stream():
    from dpbayes.programs.interpreter import Categorical

    for seed in range(50):
        p = np.random.default_rng(seed).dirichlet(np.ones(4))
        want = np.random.default_rng(seed + 1).choice(4, p=p)
        assert Categorical(p).rvs(np.random.default_rng(seed + 1)) == want


def test_the_tv_of_two_category_dirichlets_does_not_fail_on_a_tiny_alpha():
    # the models' marginal formed sum(alpha) - alpha_0 = 0 for alpha_1 below an ulp
    from dpbayes.programs import total_variation

    def build(db):
        alpha = a(db) * np.array([1e20, 0.0]) + np.array([0.0, 1e-5])
        score = lambda r: total_variation(dirichlet(alpha), dirichlet(r * np.ones(2)))  # noqa: E731
        return exp_mech(1.0, score, [1.0, 2.0], sensitivity=1.0)

    prog = certified(build)
    for data in (ALL_ZERO, HIGH):
        assert all(v in (1.0, 2.0) for v in runs_on(prog, data, range(3)))
