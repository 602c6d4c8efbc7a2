"""Each checker rule on its own (paper 002 §5-6)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpbayes.models import Beta, BetaBernoulli, DirichletCategorical, NormalMean, hellinger
from dpbayes.programs import (
    NotPrivate,
    bernoulli,
    beta,
    bind,
    categorical,
    const,
    dirichlet,
    eq_score,
    exp_mech,
    gauss_mech,
    get_mean,
    get_params,
    infer,
    kl,
    lap_mech,
    learn,
    map_records,
    normal,
    observe,
    private_bools,
    private_categories,
    private_reals,
    program,
    ran,
    total_variation,
    unit,
)
from dpbayes.programs import hellinger as H
from dpbayes.programs.lemmas import LEMMA_6_1_HELLINGER, beta_bernoulli_bounds


def coin(n: int = 5):
    return private_bools("db", n)


def posterior(db, a: float = 1.0, b: float = 1.0):
    return infer(learn(db, ran(beta(a, b)), bernoulli))


def cert(build, db=None, **kw):
    return program("t", db if db is not None else coin(), build).check(**kw)


def rejected(build, db=None, **kw) -> NotPrivate:
    with pytest.raises(NotPrivate) as info:
        cert(build, db, **kw)
    return info.value


# ------------------------------------------------------------------ Const, UnitM
def test_unit_of_public_value_costs_nothing():
    c = cert(lambda db: unit(const(3.0)))
    assert (c.epsilon, c.delta) == (0.0, 0.0)


def test_unit_of_private_value_is_rejected_at_the_unit_step():
    err = rejected(lambda db: unit(posterior(db)))
    assert err.step is not None and err.step.rule == "UnitM"
    assert "without noise" in str(err)


def test_pure_private_result_is_rejected():
    err = rejected(lambda db: get_params(posterior(db)))
    assert "released without noise" in str(err)


# ------------------------------------------------------------------ arithmetic, params
def test_sensitivities_add_and_scale_through_arithmetic():
    # posterior parameters each move by <= 1: 2 a + b moves by <= 3
    c = cert(
        lambda db: lap_mech(1.0, 2 * get_params(posterior(db))[0] + get_params(posterior(db))[1])
    )
    assert c.epsilon == pytest.approx(3.0)


def test_neg_and_clip_are_1_lipschitz():
    from dpbayes.programs import clip

    c = cert(lambda db: lap_mech(1.0, clip(-get_params(posterior(db))[0], -3, 0)))
    assert c.epsilon == pytest.approx(1.0)


def test_product_of_two_private_values_is_unbounded():
    p = lambda db: get_params(posterior(db))  # noqa: E731
    err = rejected(lambda db: lap_mech(1.0, p(db)[0] * p(db)[1]))
    assert "public constant" in str(err)


def test_get_params_l1_sensitivity_is_2_for_the_beta_posterior():
    # paper 002 §6.2: one changed record moves one count up and one down
    c = cert(lambda db: lap_mech(1.0, get_params(posterior(db))))
    assert c.epsilon == pytest.approx(2.0)


def test_projection_uses_per_coordinate_bounds():
    c = cert(lambda db: lap_mech(1.0, get_params(posterior(db))[1]))
    assert c.epsilon == pytest.approx(1.0)


# ------------------------------------------------------------------ observe / learn
def test_learn_bound_is_the_largest_neighbouring_hellinger_distance():
    n = 7
    bounds = beta_bernoulli_bounds(1.0, 1.0, n)
    direct = max(
        hellinger(Beta(1 + k + 1, 1 + n - 1 - k), Beta(1 + k, 1 + n - k)) for k in range(n)
    )
    assert bounds["hellinger"] == pytest.approx(direct, rel=1e-10)
    assert bounds["hellinger"] <= LEMMA_6_1_HELLINGER


def test_lemma_6_1_constant_is_attained_by_one_observation_on_a_uniform_prior():
    # H(Beta(2,1), Beta(1,2)) = sqrt(1 - pi/4) (paper 002 Lemma 6.1)
    assert beta_bernoulli_bounds(1.0, 1.0, 1)["hellinger"] == pytest.approx(
        math.sqrt(1 - math.pi / 4), rel=1e-12
    )


def test_single_observe_of_a_differing_record_uses_the_lemma():
    cands = [Beta(2, 1), Beta(1, 2)]

    def build(db):
        return map_records(
            db,
            lambda y: exp_mech(
                1.0,
                lambda r: -H(infer(observe(ran(beta(1.0, 1.0)), bernoulli, y)), r),
                cands,
                sensitivity=LEMMA_6_1_HELLINGER,
            ),
        )

    c = cert(build)
    assert c.epsilon == pytest.approx(1.0)
    assert any(s.rule.startswith("Observe") for s in c.derivation)


def test_learn_bound_covers_every_neighbouring_pair_of_data_sets():
    n = 6
    rng = np.random.default_rng(3)
    bound = beta_bernoulli_bounds(2.0, 0.5, n)
    model = BetaBernoulli(alpha=2.0, beta=0.5)

    def post(x):  # the model's conjugate update, without the data layer
        return Beta(model.alpha + x.sum(), model.beta + n - x.sum())

    assert post(np.array([1, 0, 0, 1, 1, 0])) == model.posterior(np.array([1, 0, 0, 1, 1, 0]))
    for _ in range(30):
        x = rng.integers(0, 2, n)
        y = x.copy()
        y[rng.integers(n)] ^= 1
        d = hellinger(post(x), post(y))
        assert d <= bound["hellinger"] * (1 + 1e-12)


def test_dirichlet_learn_bound_covers_random_neighbours():
    from dpbayes.programs.lemmas import dirichlet_categorical_bounds

    alpha = np.array([0.5, 1.0, 2.0])
    n = 5
    bound = dirichlet_categorical_bounds(alpha, n)["hellinger"]
    model = DirichletCategorical(alpha=alpha)
    rng = np.random.default_rng(4)
    seen = 0.0
    for _ in range(40):
        x = rng.integers(0, 3, n)
        y = x.copy()
        y[rng.integers(n)] = rng.integers(0, 3)
        d = hellinger(model.posterior(x), model.posterior(y))
        seen = max(seen, d)
        assert d <= bound * (1 + 1e-12)
    assert seen > 0.5 * bound


def test_normal_learn_sensitivity_matches_the_model():
    n, v0, kv = 8, 2.0, 0.5
    db = private_reals("db", n, bound=1.0)

    def build(db):
        post = infer(learn(db, ran(normal(0.0, v0)), lambda r: normal(r, kv)))
        return lap_mech(1.0, get_mean(post), sensitivity=1.0)

    c = cert(build, db)
    model = NormalMean(lower=0.0, upper=1.0, prior_sd=math.sqrt(v0), noise_sd=math.sqrt(kv))
    assert c.epsilon == pytest.approx(model.posterior_mean_sensitivity(n), rel=1e-12)


def test_unbounded_records_make_the_mean_unbounded():
    db = private_reals("db", 4, bound=None)

    def build(db):
        post = infer(learn(db, ran(normal(0.0, 1.0)), lambda r: normal(r, 1.0)))
        return lap_mech(1.0, get_mean(post))

    err = rejected(build, db)
    assert "unbounded" in str(err)


def test_equal_observations_give_equal_posteriors():
    # learn on data already released (bound by mlet) is public: data processing
    c = cert(lambda db: bind(lap_mech(1.0, get_params(posterior(db))), lambda z: unit(z)))
    assert c.epsilon == pytest.approx(2.0)


def test_private_prior_is_rejected():
    def build(db):
        noisy_prior = beta(get_params(posterior(db))[0], 1.0)
        return unit(infer(learn(db, ran(noisy_prior), bernoulli)))

    err = rejected(build)
    assert err.step is not None


# ------------------------------------------------------------------ divergences
def test_hellinger_score_sensitivity_is_the_posterior_bound():
    n = 5
    rho = beta_bernoulli_bounds(1.0, 1.0, n)["hellinger"]
    cands = [Beta(1 + j, 1 + n - j) for j in range(n + 1)]
    c = cert(lambda db: exp_mech(2.0, lambda r: -H(posterior(db), r), cands, sensitivity=rho))
    assert c.epsilon == pytest.approx(2.0)


def test_total_variation_score_uses_le_cam_bound():
    n = 5
    tv = beta_bernoulli_bounds(1.0, 1.0, n)["tv"]
    cands = [Beta(1 + j, 1 + n - j) for j in range(n + 1)]
    c = cert(lambda db: exp_mech(1.0, lambda r: -total_variation(posterior(db), r), cands, tv))
    assert c.epsilon == pytest.approx(1.0)


def test_kl_score_is_rejected_as_unbounded():
    cands = [Beta(2, 2)]
    err = rejected(lambda db: exp_mech(1.0, lambda r: -kl(posterior(db), r), cands))
    assert "KL is not a metric" in str(err)


def test_normal_dist_with_public_variance_has_closed_form_hellinger():
    db = private_reals("db", 3, bound=1.0)

    def build(db):
        post = infer(learn(db, ran(normal(0.0, 1.0)), lambda r: normal(r, 1.0)))
        d = normal(get_mean(post), 0.25)
        return exp_mech(1.0, lambda r: -H(d, r), [const(0.0)], sensitivity=1.0)

    c = cert(build, db)
    delta = 1.0 / (1.0 + 3.0)
    assert c.epsilon == pytest.approx(math.sqrt(-math.expm1(-(delta**2) / (8 * 0.25))))


# ------------------------------------------------------------------ ran / infer
def test_sampling_from_the_posterior_is_not_certified():
    err = rejected(lambda db: ran(posterior(db)))
    assert err.step is not None and err.step.rule.startswith("Ran")
    assert "f-divergence" in str(err) or "no eps bound" in str(err)


def test_infer_moves_the_index_into_the_refinement():
    c = cert(
        lambda db: exp_mech(1.0, lambda r: -H(posterior(db), r), [Beta(1, 1)], sensitivity=1.0)
    )
    rho = beta_bernoulli_bounds(1.0, 1.0, 5)["hellinger"]
    infer_steps = [s for s in c.derivation if s.rule.startswith("Infer")]
    assert infer_steps and f"hellinger <= {rho:.6g}" in infer_steps[0].bound


# ------------------------------------------------------------------ mechanisms
def test_laplace_cost_scales_with_sensitivity_over_calibration():
    c = cert(lambda db: lap_mech(0.5, get_params(posterior(db))[0], sensitivity=4.0))
    assert c.epsilon == pytest.approx(0.5 / 4.0)


def test_gaussian_with_enough_noise_gives_eps_delta():
    c = cert(lambda db: gauss_mech(0.5, 1e-5, get_params(posterior(db)), sensitivity=math.sqrt(2)))
    assert (c.epsilon, c.delta) == (pytest.approx(0.5), pytest.approx(1e-5))


def test_gaussian_with_too_little_noise_is_rejected():
    err = rejected(lambda db: gauss_mech(0.5, 1e-5, get_params(posterior(db)), sensitivity=1.0))
    assert "noise too small" in str(err) and err.step.rule == "GaussMech"


def test_exponential_mechanism_cost_scales_with_score_sensitivity():
    c = cert(lambda db: exp_mech(1.0, lambda r: 3 * H(posterior(db), r), [Beta(1, 1)], 1.0))
    rho = beta_bernoulli_bounds(1.0, 1.0, 5)["hellinger"]
    assert c.epsilon == pytest.approx(3 * rho)


def test_map_records_costs_one_record_not_n():
    c = cert(
        lambda db: map_records(db, lambda y: exp_mech(0.7, lambda r: eq_score(y, r), [0, 1])),
        private_bools("db", 50),
    )
    assert c.epsilon == pytest.approx(0.7)


def test_map_records_over_categories():
    db = private_categories("db", 4, 3)
    c = cert(
        lambda db: map_records(db, lambda y: exp_mech(1.0, lambda r: eq_score(y, r), [0, 1, 2])), db
    )
    assert c.epsilon == pytest.approx(1.0)


# ------------------------------------------------------------------ BindM, budget
def test_bind_composes_sequentially():
    def build(db):
        p = get_params(posterior(db))
        return bind(
            lap_mech(0.3, p[0]),
            lambda a: bind(gauss_mech(0.2, 1e-6, p[1]), lambda b: unit(a + b)),
        )

    c = cert(build)
    assert c.epsilon == pytest.approx(0.5) and c.delta == pytest.approx(1e-6)


def test_budget_rejection_names_the_first_mechanism_over_budget():
    def build(db):
        p = get_params(posterior(db))
        return bind(lap_mech(0.6, p[0]), lambda a: bind(lap_mech(0.6, p[1]), lambda b: unit(a + b)))

    err = rejected(build, epsilon=1.0)
    assert err.step is not None and err.step.rule == "LapMech"
    second = [s for s in err.derivation if s.rule == "LapMech"][1]
    assert err.step is second


def test_certificate_within_budget_is_accepted():
    c = cert(lambda db: lap_mech(1.0, get_params(posterior(db))[0]), epsilon=1.0)
    assert c.epsilon == pytest.approx(1.0)
    assert "LapMech" in c.describe()


# ------------------------------------------------------------------ running
def test_rejected_program_does_not_run_without_allow_non_private():
    prog = program("exact", coin(3), lambda db: unit(posterior(db)))
    with pytest.raises(NotPrivate):
        prog.run([1, 0, 1], rng=0)
    out = prog.run([1, 0, 1], rng=0, allow_non_private=True)
    assert out.value == Beta(3.0, 2.0)
    assert out.guarantee.private is False
    with pytest.raises(TypeError, match="allow_non_private must be True or False"):
        prog.run([1, 0, 1], rng=0, allow_non_private="False")


def test_program_validates_its_data():
    prog = program("p", coin(3), lambda db: lap_mech(1.0, get_params(posterior(db))[0]))
    with pytest.raises(ValueError, match="3 records"):
        prog.run([1, 0], rng=0)
    with pytest.raises(ValueError, match="0/1"):
        prog.run([1, 0, 2], rng=0)


def test_dirichlet_inference_runs_exactly():
    db = private_categories("db", 4, 3)
    prog = program(
        "d", db, lambda db: unit(infer(learn(db, ran(dirichlet([1.0, 1.0, 1.0])), categorical)))
    )
    out = prog.run([0, 2, 2, 1], rng=0, allow_non_private=True)
    assert np.array_equal(out.value.alpha, [2.0, 2.0, 3.0])


def test_map_records_reading_other_private_data_composes_over_all_records():
    n = 6

    def build(db):
        a = get_params(posterior(db))[0]  # every record's mechanism also reads the posterior
        return map_records(db, lambda y: lap_mech(0.1, a))

    c = cert(build, private_bools("db", n))
    assert c.epsilon == pytest.approx(n * 0.1)


def test_category_records_move_by_up_to_k_minus_1_in_arithmetic():
    db = private_categories("db", 4, 5)
    c = cert(lambda db: map_records(db, lambda y: lap_mech(1.0, y)), db)
    assert c.epsilon == pytest.approx(4.0)


def test_dirichlet_parameters_have_l1_sensitivity_2():
    db = private_categories("db", 4, 3)

    def build(db):
        post = infer(learn(db, ran(dirichlet([1.0, 1.0, 1.0])), categorical))
        return lap_mech(1.0, get_params(post))

    assert cert(build, db).epsilon == pytest.approx(2.0)


@pytest.mark.parametrize(
    "make,err",
    [
        (lambda: lap_mech(-1.0, const(0.0)), ValueError),
        (lambda: lap_mech(1.0, const(0.0), sensitivity=0.0), ValueError),
        (lambda: gauss_mech(1.0, 0.0, const(0.0)), ValueError),
        (lambda: gauss_mech(1.0, 1e-3, const(0.0), calibration="x"), ValueError),
        (lambda: exp_mech(1.0, lambda r: r, []), ValueError),
        (lambda: bind(const(1.0), lambda x: unit(x)), TypeError),
        (lambda: ran(const(1.0)), TypeError),
        (lambda: private_bools("db", 0), ValueError),
        (lambda: learn(coin(), ran(beta(1, 1)), lambda r: 3), TypeError),
    ],
)
def test_constructors_validate(make, err):
    with pytest.raises(err):
        make()
