"""Neighbouring data at the numerical edges: input perturbation, the expmech block
sampler and SSP. A failure for one data set and not its neighbour is itself an output,
so public parameters whose arithmetic overflows or underflows are refused in the plan,
with a one-line error naming the argument and nothing spent, whatever the data."""

from __future__ import annotations

import math
import sys

import mpmath
import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

import dpbayes as dpb
from dpbayes.data import as_source
from dpbayes.models import BetaBernoulli, CountStatistics, NormalMean
from dpbayes.privacy import Neighbours
from dpbayes.privacy.mechanisms import analytic_gaussian_sigma
from dpbayes.privacy.noise import SecureNoise, SimulatedNoise
from dpbayes.release.base import plan as plan_release
from dpbayes.release.expmech.mechanism import plan_expmech_coin, select_candidate
from dpbayes.release.ssp import quadratic_l1_sensitivity

P_MIN = 1e-4


def refused_spending_nothing(call: object, match: str) -> str:
    """``call(accountant)`` raises a one-line ValueError matching ``match``; nothing spent."""
    acc = dpb.Accountant(epsilon=5.0, delta=1e-3, simulation=True)
    with pytest.raises(ValueError, match=match) as info:
        call(acc)  # type: ignore[operator]
    assert acc.spent == (0.0, 0.0)
    assert "\n" not in str(info.value)
    return str(info.value)


# -- 1. input perturbation, Normal mean -------------------------------------------------


def test_input_normal_bounds_whose_sum_overflows_refused_alike_for_both_neighbours() -> None:
    """3e303 * 59923 is below the largest double, 3e303 * 59924 above it: the sum of x1
    overflowed inside the plan (OverflowError) while x0 was released. Both are now refused
    by the public bounds, with the same message."""
    model = NormalMean(lower=-3e303, upper=3e303)
    n = 60_000
    x0 = np.zeros(n)
    x0[:59_923] = model.upper
    x1 = x0.copy()
    x1[59_923] = model.upper  # substitute one record: 0 -> upper
    messages = {
        refused_spending_nothing(
            lambda acc, x=x: dpb.release(
                model, x, mechanism="input", epsilon=1.0, delta=1e-6, accountant=acc, rng=0
            ),
            "lower and upper must be within",
        )
        for x in (x0, x1)
    }
    assert len(messages) == 1
    # the clamped sum itself never fails: beyond the doubles it is clamped to them
    assert model.statistics(x1).total == sys.float_info.max
    assert model.statistics(-x1).total == -sys.float_info.max


def test_input_normal_noise_beyond_max_sd_refused_and_edge_bounds_release() -> None:
    wide = NormalMean(lower=-1e150, upper=1e150)
    refused_spending_nothing(
        lambda acc: dpb.release(
            wide, [0.0], mechanism="input", epsilon=1e-60, delta=1e-60, accountant=acc, rng=0
        ),
        "epsilon = 1e-60 is too small",
    )
    # at the largest bounds both neighbours at the edge release a finite total
    n = 1000
    for k in (n - 1, n):
        x = np.r_[np.full(k, 1e150), np.zeros(n - k)]
        rel = dpb.release(wide, x, mechanism="input", epsilon=1.0, delta=1e-6, rng=1)
        assert math.isfinite(rel.released["total"])
        assert math.isfinite(rel.noise_aware_posterior().mean())


def test_analytic_gaussian_sigma_at_huge_sensitivities() -> None:
    """sigma = e^10 * sensitivity overflowed in the root bracket above ~8e303 (a bare
    OverflowError); now the bracket stays in the doubles and a sigma beyond them is a
    one-line ValueError naming the sensitivity."""
    for sens in (8.5e303, 1e305):
        sigma = analytic_gaussian_sigma(1.0, 1e-6, sens)
        assert sigma == pytest.approx(analytic_gaussian_sigma(1.0, 1e-6, 1.0) * sens, rel=1e-9)
        with mpmath.workdps(50):
            s, d = mpmath.mpf(sigma), mpmath.mpf(sens)
            a, b = d / (2 * s) - s / d, -d / (2 * s) - s / d
            assert mpmath.ncdf(a) - mpmath.e * mpmath.ncdf(b) <= 1e-6
    for eps, sens in ((1.0, 1e308), (1e-3, 1e305), (1e12, 1e304)):
        with pytest.raises(ValueError, match=r"sensitivity = \S+ is too large") as info:
            analytic_gaussian_sigma(eps, 1e-6, sens)
        assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match=r"sensitivity = \S+ is too small"):
        analytic_gaussian_sigma(1.0, 1e-6, 5e-324)


# -- 2. expmech, the block sampler ------------------------------------------------------


@pytest.mark.parametrize("k", [10, 4090])
def test_expmech_blocks_of_weight_zero_at_huge_epsilon(k: int) -> None:
    """eps = 1.5e308, n = 5000 (two blocks of 4096): every score of the far block divided
    by the scale is -inf. Its log-sum-exp was NaN, refused for k = 10 and not for 4090;
    it is now a block of weight 0. Every candidate but k has weight below e^-1e307, so
    the exact law is the point mass at k, for both data sets."""
    n, eps = 5000, 1.5e308
    plan = plan_expmech_coin(
        BetaBernoulli(alpha=1, beta=1),
        CountStatistics(counts=np.array([k, n - k]), n=n),
        epsilon=eps,
        delta=0.0,
        neighbours=Neighbours.SUBSTITUTE,
    )
    assert plan.log_distribution is not None
    outputs, logp = plan.log_distribution()
    assert np.exp(logp[k]) == 1.0 and np.all(np.exp(np.delete(logp, k)) == 0.0)
    assert tuple(outputs[k]) == (k, n - k)
    src = SimulatedNoise(np.random.default_rng(k))
    with np.errstate(over="ignore"):  # the seeded source's s / scale
        for _ in range(20):
            assert list(plan.run(src).released["counts"]) == [k, n - k]
    assert list(plan.run(SecureNoise()).released["counts"]) == [k, n - k]


def test_two_stage_selection_with_dead_blocks_has_the_exact_law() -> None:
    """Blocks of 3: a dead block ((s - top) / scale all -inf), the live block, a block of
    finite but negligible weight (-1e300), another dead block, a live singleton."""
    scale = 1e-300
    blocks = [
        [-1e10, -2e10, -3e10],
        [0.0, -1e-300, -2e-300],
        [-1.0, -1.0, -1.0],
        [-1e10, -1e10, -1e10],
        [-5e-301],
    ]
    scores = np.concatenate([np.array(b) for b in blocks])
    with np.errstate(over="ignore"):
        z = scores / scale
    probs = np.exp(z - special.logsumexp(z))
    assert np.all(probs[[0, 1, 2, 9, 10, 11]] == 0.0)
    for src, draws_n in ((SimulatedNoise(np.random.default_rng(5)), 3000), (SecureNoise(), 300)):
        with np.errstate(over="ignore"):
            draws = np.array(
                [select_candidate(src, scores, scale, block=3) for _ in range(draws_n)]
            )
        assert set(draws.tolist()) <= {3, 4, 5, 12}
        observed = np.bincount(draws, minlength=scores.size)[[3, 4, 5, 12]]
        assert stats.chisquare(observed, probs[[3, 4, 5, 12]] * draws_n).pvalue > P_MIN


# -- 3. SSP ------------------------------------------------------------------------------


def _linear(bound: float) -> dpb.models.BayesianLinearRegression:
    return dpb.models.BayesianLinearRegression(feature_bound=bound, label_bound=bound, clip="box")


def test_ssp_laplace_scale_that_underflows_is_refused_in_the_plan() -> None:
    """Bounds 1e-60, eps = 1e300: the Laplace scale 4e-540 rounds to 0; the plan accepted
    it and the run refused ("scale must be > 0"). Now the plan refuses, naming epsilon;
    a subnormal noise sd is refused too."""
    x, y = np.zeros((5, 2)), np.zeros(5)
    with pytest.raises(ValueError, match=r"epsilon = 1e\+300 is too large") as info:
        plan_release(_linear(1e-60), (x, y), mechanism="ssp", epsilon=1e300, noise="laplace")
    assert "\n" not in str(info.value)
    refused_spending_nothing(
        lambda acc: dpb.release(
            _linear(1e-60),
            (x, y),
            mechanism="ssp",
            epsilon=1e300,
            noise="laplace",
            accountant=acc,
            rng=0,
        ),
        "epsilon",
    )
    sens = quadratic_l1_sensitivity(np.full(3, 1e-60))
    eps = sens / 1e-312  # a scale of ~1e-312: subnormal
    # refused by the Laplace mechanism itself (any family), before the SSP's own check
    # (the joint release; the two blocks' mechanism has sensitivity 1, and the SSP's own
    # check on the entries' noise refuses it)
    with pytest.raises(ValueError, match=r"is too large for this sensitivity.*smallest normal"):
        plan_release(
            _linear(1e-60), (x, y), mechanism="ssp", epsilon=eps, noise="laplace",
            first_order_share=None,
        )  # fmt: skip
    with pytest.raises(ValueError, match=r"is too large for these bounds.*smallest normal"):
        plan_release(_linear(1e-60), (x, y), mechanism="ssp", epsilon=eps, noise="laplace")


def test_ssp_gaussian_at_epsilon_beyond_the_calibration_is_a_one_line_error() -> None:
    x, y = np.zeros((5, 2)), np.zeros(5)
    for eps in (1.7e308, 1e20):
        msg = refused_spending_nothing(
            lambda acc, e=eps: dpb.release(
                _linear(1.0),
                (x, y),
                mechanism="ssp",
                epsilon=e,
                delta=1e-6,
                noise="gaussian",
                accountant=acc,
                rng=0,
            ),
            "epsilon must be at most 1e",
        )
        assert f"{eps:g}" in msg
    # the largest eps still calibrates, and the release runs
    rel = dpb.release(
        _linear(1.0), (x, y), mechanism="ssp", epsilon=1e12, delta=1e-6, noise="gaussian", rng=0
    )
    assert np.all(np.isfinite(rel.released["xtx"]))


@pytest.mark.parametrize("source", ["memory", "parquet"])
def test_a_sum_beyond_the_doubles_releases_for_both_neighbours(tmp_path, source: str) -> None:
    """Normal mean (counts family) with public bounds [0, 1e306], add/remove: 179 records
    at the bound sum to 1.8e308, 180 beyond the doubles. The exact sum raised for the
    second only (in memory and in the engine's SQL alike), an error that told the two
    apart; the sum of data now saturates, so both release."""
    import pandas as pd

    model = NormalMean(lower=0.0, upper=1e306, prior_mean=0.0, prior_sd=1.0, noise_sd=1.0)
    out = []
    for k in (179, 180):
        data: object = np.full(k, 1e306)
        column = None
        if source == "parquet":
            path = tmp_path / f"x{k}.parquet"
            pd.DataFrame({"x": data}).to_parquet(path)
            data, column = str(path), "x"
        planned = plan_release(
            model, data, column=column, mechanism="laplace", epsilon=1.0,
            neighbours="add-remove",
        )  # fmt: skip
        out.append(planned.run(SimulatedNoise(np.random.default_rng(0))).released)
    assert all(math.isfinite(r["centred_sum"]) for r in out)


def test_the_geometric_mechanism_refuses_scales_its_integers_cannot_carry() -> None:
    """At eps 1e-300 the seeded sampler's two geometric draws both saturated at the int64
    maximum and cancelled: the simulated release was the exact count (a review). Scales
    above 2^52 are refused in the plan, for every data set alike; 2^52 itself releases."""
    from dpbayes.privacy.mechanisms import MAX_GEOMETRIC_SCALE

    model = BetaBernoulli(alpha=1.0, beta=1.0)
    data = np.r_[np.ones(3, int), np.zeros(7, int)]
    with pytest.raises(ValueError, match="too small for the geometric mechanism"):
        plan_release(model, data, mechanism="geometric", epsilon=1e-300)
    eps = 1.0 / MAX_GEOMETRIC_SCALE  # the substitute count sensitivity is 1 per coordinate
    planned = plan_release(model, data, mechanism="geometric", epsilon=eps)
    draws = [
        planned.run(SimulatedNoise(np.random.default_rng(s))).released["counts"][0]
        for s in range(20)
    ]
    assert len(set(draws)) > 1  # noise, not the exact count


def test_a_noise_scale_whose_draws_overflow_is_refused_in_the_plan() -> None:
    """Counts with add/remove at eps 1e-308: a finite scale of 1e308, and about one
    Laplace draw in five overflowed to inf, failing the run after the noise. Scales above
    MAX_NOISE_SCALE are refused in the plan; just below it every run releases."""
    from dpbayes.privacy.mechanisms import MAX_NOISE_SCALE

    model = BetaBernoulli(alpha=1.0, beta=1.0)
    data = np.r_[np.ones(3, int), np.zeros(7, int)]
    with pytest.raises(ValueError, match=r"noise scale .* exceeds"):
        plan_release(model, data, mechanism="laplace", epsilon=1e-308, neighbours="add-remove")
    planned = plan_release(
        model, data, mechanism="laplace", epsilon=2.0 / MAX_NOISE_SCALE, neighbours="add-remove"
    )
    for s in range(50):
        planned.run(SimulatedNoise(np.random.default_rng(s)))


@pytest.mark.parametrize(
    ("lower", "width", "prior_mean", "n"),
    [
        (1e15, 0.25, 1e15, 100),
        (-1e12, 1.0, 0.0, 1000),
        (0.0, 100.0, 50.0, 1000),
        (-3.0, 6.0, 1e6, 7),
    ],
)
def test_normal_mean_sensitivity_covers_the_rounding_of_the_computed_mean(
    lower: float, width: float, prior_mean: float, n: int
) -> None:
    """The posterior mean is computed in doubles. With bounds 1e15 and 1e15 + 0.25 one
    rounding step of the mean (0.125) was 50 times the stated sensitivity (0.0025), and the
    secure release was deterministic on each neighbour. The plan's sensitivity now bounds
    the change of the computed mean over every substitution of a record between the bounds
    (k records at U against k + 1), and equals the exact one up to 1e-8 with bounds of
    ordinary magnitude."""
    upper = lower + width
    model = NormalMean(lower=lower, upper=upper, prior_mean=prior_mean, prior_sd=1.0, noise_sd=1.0)
    stated = plan_release(
        model, np.full(n, lower), mechanism="laplace", epsilon=1.0
    ).guarantee.sensitivity
    means = [
        model.posterior_from(model.statistics(np.array([upper] * k + [lower] * (n - k)))).mean()
        for k in range(n + 1)
    ]
    assert np.max(np.abs(np.diff(means))) <= stated
    exact = model.posterior_mean_sensitivity(n)
    if max(abs(lower), abs(upper)) <= 1e3 * width:
        assert stated == pytest.approx(exact, rel=1e-8)


def test_input_perturbation_refuses_bounds_whose_sum_rounds_beyond_the_sensitivity() -> None:
    """n = 10,000 values in [1e15, 1e15 + 0.25]: the correctly rounded clamped sums of two
    neighbours were 1e19 and 1e19 + 2048 against a sensitivity of 0.25 and a noise sd of 93
    (told apart with certainty). Refused in the plan, from public values, naming the bounds;
    bounds of ordinary magnitude release as before."""
    lo = 1e15
    model = NormalMean(lower=lo, upper=lo + 0.25, prior_mean=lo, prior_sd=1.0, noise_sd=1.0)
    with pytest.raises(ValueError, match="lower and upper are too far from 0"):
        plan_release(model, np.full(10_000, lo), mechanism="input", epsilon=1.0, delta=1e-5)
    ok = NormalMean(lower=-1.0, upper=1.0, prior_mean=0.0, prior_sd=1.0, noise_sd=1.0)
    plan_release(ok, np.zeros(10_000), mechanism="input", epsilon=1.0, delta=1e-5)


def _handed_to_the_noise(planned: object, half: float) -> np.ndarray:
    """The (count, centred sum / w) a release handed to its noise, up to the rounding of
    adding one fixed seeded draw (the same draw for both neighbours, so differences of
    these values are differences of the mechanism's input, to ~1e-12)."""
    rel = planned.run(SimulatedNoise(np.random.default_rng(0)))  # type: ignore[attr-defined]
    return np.array([rel.released["count"], rel.released["centred_sum"] / half])


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
@pytest.mark.parametrize(
    ("lower", "width"), [(1e15, 0.25), (-1e12, 1.0), (0.0, 100.0), (1e300, 1e285)]
)
def test_normal_mean_add_remove_value_moves_within_the_stated_sensitivity(
    mechanism: str, lower: float, width: float
) -> None:
    """Add/remove (n private): the count and the centred sum in units of w. Computed as
    (S - c n) / w in doubles it cancelled when |c| >> w: one record at L added at n = 288
    moved it by 257 in L1 against a stated 2. The value handed to the noise now moves
    within the stated sensitivity (L1 for Laplace, L2 for Gaussian) for every neighbour
    pair tried: records at L, at U and between, at n up to 5,000."""
    upper = lower + width
    model = NormalMean(lower=lower, upper=upper, prior_mean=lower, prior_sd=1.0, noise_sd=1.0)
    delta = 1e-6 if mechanism == "gaussian" else 0.0
    rng = np.random.default_rng(5)
    norm = 1 if mechanism == "laplace" else 2
    worst = 0.0
    for n in (1, 2, 288, 1001, 5000):
        base = rng.choice([lower, upper, lower + width / 3], size=n)
        for extra in (lower, upper, lower + width / 7):
            vals = []
            for data in (base, np.r_[base, extra]):
                planned = plan_release(
                    model,
                    data,
                    mechanism=mechanism,
                    epsilon=1.0,
                    delta=delta,
                    neighbours=Neighbours.ADD_REMOVE,
                )
                vals.append(_handed_to_the_noise(planned, 0.5 * (upper - lower)))
            moved = float(np.linalg.norm(vals[1] - vals[0], ord=norm))
            assert moved <= planned.guarantee.sensitivity, (n, extra, moved)
            worst = max(worst, moved)
    assert worst >= 1.0  # the pairs do move the value: the bound is tested, not idle


def test_normal_mean_user_level_value_moves_within_the_stated_sensitivity() -> None:
    """One user of k = 3 rows at the bounds far from 0 against their width."""
    lower, upper = 1e15, 1e15 + 0.25
    model = NormalMean(lower=lower, upper=upper, prior_mean=lower, prior_sd=1.0, noise_sd=1.0)
    for users in (97, 400, 1501):
        data = pd.DataFrame({"user": np.repeat(np.arange(users), 3), "x": lower})
        data.loc[data.index % 5 == 0, "x"] = upper
        vals = []
        for d in (data, data[data["user"] != 0]):
            src = as_source(d, column="x", user_column="user", max_rows_per_user=3)
            planned = plan_release(model, src, mechanism="laplace", epsilon=1.0)
            vals.append(_handed_to_the_noise(planned, 0.125))
        moved = float(np.abs(vals[1] - vals[0]).sum())
        assert 3.0 <= moved <= planned.guarantee.sensitivity, (users, moved)


@pytest.mark.parametrize("eps", [1e-7, 1e-9])
def test_private_n_posterior_refuses_a_huge_window_before_making_it(eps: float) -> None:
    """Add/remove coin: the window of true counts grows as 1/eps; at eps 1e-7 its arrays
    took 14 GB (and at 1e-9 asked for 447 GiB) before the pairs were counted and refused.
    Refused from the released value and the public scale, before any array is made."""
    import resource

    model = BetaBernoulli(alpha=1.0, beta=1.0)
    x = np.r_[np.ones(50), np.zeros(50)].astype(bool)
    rel = dpb.release(model, x, mechanism="laplace", epsilon=eps, neighbours="add-remove", rng=1)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ValueError, match="too many for the exact sum"):
        rel.noise_aware_posterior()
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 200_000  # under 200 MB


def test_normal_mean_private_n_posterior_refuses_a_sum_too_long_to_compute() -> None:
    """Add/remove Normal mean: the sum over N ran for 100 s at eps 1e-4 (its time grows as
    1/eps), after the release was charged; it is refused when it exceeds 1e8 terms."""
    model = NormalMean(prior_mean=0, prior_sd=10, noise_sd=1, lower=-5, upper=5)
    rel = dpb.release(
        model, np.zeros(100), mechanism="laplace", epsilon=1e-4, neighbours="add-remove", rng=1
    )
    with pytest.raises(ValueError, match="too large for the exact sum over the number"):
        rel.noise_aware_posterior()
