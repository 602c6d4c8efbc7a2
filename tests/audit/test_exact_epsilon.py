"""Exact eps of finite-output mechanisms, and the local-sensitivity expmech violation."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy.special import gammaln, logsumexp

from dpbayes.audit import NeighbourPair, audit
from dpbayes.audit.exact import align, expected_lower_bound, pair_exact_epsilon
from dpbayes.audit.targets import builtin_model, model_pairs, release_mechanism
from dpbayes.privacy import RandomizedResponse


def _rr(eps):
    """Binary randomized response with its exact distribution."""
    rr = RandomizedResponse(epsilon=eps, k=2)
    keep = math.exp(eps) / (1 + math.exp(eps))

    def run(x, rng):
        return rr.release(np.asarray(x, dtype=np.int64), rng=rng).value

    def dist(x):
        p1 = keep if int(np.asarray(x).ravel()[0]) == 1 else 1 - keep
        return np.array([[0.0], [1.0]]), np.array([1 - p1, p1])

    run.output_distribution = dist
    return run


def test_exact_epsilon_of_randomized_response_is_its_eps():
    r = audit(_rr(0.8), [([0], [1])], epsilon=0.8, samples=2000, rng=1)
    assert r.exact_epsilon == pytest.approx(0.8) and r.exact_worst_pair == "pair 0"
    assert r.passed and r.epsilon_lower_bound <= r.exact_epsilon
    assert "exact eps" in r.describe()


def test_align_sums_over_the_union_of_outputs():
    p, q = align(
        (np.array([[0, 1], [1, 0]]), np.array([0.25, 0.75])),
        (np.array([[1, 0], [2, 0]]), np.array([0.5, 0.5])),
    )
    assert p.tolist() == [0.25, 0.75, 0.0] and q.tolist() == [0.0, 0.5, 0.5]
    assert math.isinf(
        pair_exact_epsilon((np.array([0, 1]), np.array([0.5, 0.5])), (np.array([1]), np.ones(1)))
    )
    with pytest.raises(ValueError, match="sum to 1"):
        align((np.array([0, 1]), np.array([0.5, 0.6])), (np.array([0]), np.ones(1)))


def test_expected_lower_bound_grows_with_samples_and_stays_below_exact():
    d0 = (np.array([0.0, 1.0]), np.array([0.73, 0.27]))
    d1 = (np.array([0.0, 1.0]), np.array([0.27, 0.73]))
    small, large = (expected_lower_bound(d0, d1, m) for m in (100, 100_000))
    assert 0 < small < large < pair_exact_epsilon(d0, d1)
    assert large == pytest.approx(math.log(0.73 / 0.27), abs=0.05)


def test_infinite_exact_epsilon_serialises():
    r = audit(
        lambda x, rng: float(x),
        [(0, 1)],
        epsilon=1.0,
        samples=100,
        rng=0,
        distribution=lambda x: (np.array([float(x)]), np.ones(1)),
    )
    assert math.isinf(r.exact_epsilon) and not r.passed
    assert json.loads(json.dumps(r.to_dict()))["exact_epsilon"] == "inf"


@pytest.mark.parametrize(
    "name,prior,n,sensitivity",
    [
        ("beta-bernoulli", None, 4, "local"),
        ("beta-bernoulli", [0.5, 2.0], 4, "global"),
        ("dirichlet-categorical", None, 3, "local"),
    ],
)
def test_expmech_distribution_matches_the_release_frequencies(name, prior, n, sensitivity):
    model = builtin_model(name, prior=prior)
    mech = release_mechanism(
        model, "expmech", epsilon=1.0, sensitivity=sensitivity, allow_non_private=True
    )
    x = model_pairs(model, n, max_pairs=1)[0].x
    outputs, probs = mech.output_distribution(x)
    size = 4000
    seen = np.array([r.released["counts"] for r in mech(x, np.random.default_rng(5), size)])
    freq = np.array([np.mean(np.all(seen == o, axis=1)) for o in outputs])
    assert freq.sum() == pytest.approx(1.0)  # every release is one of the outputs
    # 4.5 standard errors: a two-sided 1e-5 bound per output
    assert np.all(np.abs(freq - probs) <= 4.5 * np.sqrt(probs * (1 - probs) / size) + 1e-9)


def _independent_dirichlet_local_epsilon(alpha, n, eps, x, y):
    """Paper 003 §2.2 from scratch: H by multivariate beta functions, LS by brute force."""
    a = np.asarray(alpha, dtype=float)
    cands = np.array([c for c in itertools.product(range(n + 1), repeat=a.size) if sum(c) == n])

    def lmb(v):
        return np.sum(gammaln(v), axis=-1) - gammaln(np.sum(v, axis=-1))

    def h(c, r):
        p, q = a + c, a + r
        return np.sqrt(np.maximum(0.0, 1 - np.exp(lmb((p + q) / 2) - (lmb(p) + lmb(q)) / 2)))

    def logp(c):
        c = np.asarray(c)
        u = -h(c, cands)
        local = 0.0
        for i, j in itertools.permutations(range(a.size), 2):
            if c[i] >= 1:
                d = c.copy()
                d[i] -= 1
                d[j] += 1
                local = max(local, float(np.max(np.abs(u + h(d, cands)))))
        s = eps * u / (2 * local)
        return s - logsumexp(s)

    return float(np.max(np.abs(logp(x) - logp(y))))


def test_dirichlet_local_expmech_exact_epsilon_exceeds_the_claim():
    model = builtin_model("dirichlet-categorical", prior=[10.0])
    mech = release_mechanism(
        model, "expmech", epsilon=1.0, sensitivity="local", allow_non_private=True
    )
    cats = np.array(model.categories, dtype=object)
    x, y = np.repeat(cats, [30, 0, 0]), np.repeat(cats, [29, 1, 0])
    e = pair_exact_epsilon(mech.output_distribution(x), mech.output_distribution(y))
    ref = _independent_dirichlet_local_epsilon([10.0] * 3, 30, 1.0, [30, 0, 0], [29, 1, 0])
    assert e == pytest.approx(ref, rel=1e-6)
    assert e > 1.05  # the claim eps = 1 is violated (exact 1.07)
    glob = release_mechanism(model, "expmech", epsilon=1.0)
    assert pair_exact_epsilon(glob.output_distribution(x), glob.output_distribution(y)) <= 1.0


def test_local_sensitivity_expmech_fails_its_audit_through_the_cli(capsys):
    """The violation, found by sampling: Dir(30, 30, 30), n = 200, eps = 1 (exact 1.86)."""
    import argparse

    from dpbayes.cli import cmd_audit

    parser = argparse.ArgumentParser(prog="dpbayes")
    cmd_audit.register(parser.add_subparsers())
    args = parser.parse_args(
        [
            "audit",
            "--model", "dirichlet-categorical",
            "--prior", "30",
            "--n", "200",
            "--mechanism", "expmech",
            "--sensitivity", "local",
            "--epsilon", "1",
            "--allow-non-private",
            "--json",
            "--samples", "6000",
            "--max-pairs", "4",
        ]
    )  # fmt: skip
    assert args.handler(args) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["passed"] is False and d["claimed_epsilon"] == 1.0
    assert 1.0 < d["epsilon_lower_bound"] <= d["exact_epsilon"]
    assert d["exact_epsilon"] == pytest.approx(1.8635, abs=1e-3)
    # the corner pairs are worst, equally by symmetry (which one is listed follows ties)
    for pair in (d["worst_pair"], d["exact_worst_pair"]):
        x, y = (sorted(json.loads(v)) for v in pair.removeprefix("counts ").split(" vs "))
        assert x == [0, 0, 200] and y == [0, 1, 199], pair
    assert d["details"]["private"] is False


def test_exact_ranking_audits_the_most_detectable_pair():
    model = builtin_model("beta-bernoulli", prior=[0.001, 100.0])
    mech = release_mechanism(
        model, "expmech", epsilon=1.0, sensitivity="local", allow_non_private=True
    )
    pairs = model_pairs(model, 100, max_pairs=6)
    r = audit(mech, pairs, epsilon=1.0, samples=400, batch=True, rng=3)
    # exact 1.050 > 1 at k=1 vs k=2, but on outputs too rare for 400 samples to show
    assert r.exact_epsilon == pytest.approx(1.0501, abs=1e-3)
    assert r.exact_worst_pair == "k=1 vs k=2 (n=100)" and r.pairs_searched == len(pairs)
    power = {
        p.label: expected_lower_bound(
            mech.output_distribution(p.x),
            mech.output_distribution(p.x_prime),
            400,
            alpha=0.05 / 4,
        )
        for p in pairs
    }
    assert {m.pair for m in r.measured} == {max(power, key=power.get)}  # keep_pairs = 1
    # the samples do not show the violation, but the exact eps does: the verdict is FAIL
    assert r.epsilon_lower_bound < 1.0 and r.exact_exceeds_claim and not r.passed
    assert "exceeds the claim" in r.describe() and r.describe().startswith("FAIL:")
    assert all(m.samples == 400 for m in r.measured)  # fixed events: all samples measure


def test_builtin_model_prior_is_validated():
    assert builtin_model("beta-bernoulli", prior=[2, 3]).beta == 3.0
    assert list(builtin_model("dirichlet-categorical", prior=[1, 2, 3]).alpha) == [1, 2, 3]
    for name, prior in (
        ("beta-bernoulli", [1.0]),
        ("dirichlet-categorical", [1.0, 2.0]),
        ("beta-bernoulli", [0.0, 1.0]),
        ("normal-mean", [1.0]),
    ):
        with pytest.raises(ValueError, match="prior"):
            builtin_model(name, prior=prior)


def test_pair_label_is_kept_with_neighbour_pair_objects():
    r = audit(_rr(0.5), [NeighbourPair([0], [1], "zero vs one")], epsilon=0.5, samples=200, rng=2)
    assert r.exact_worst_pair == "zero vs one"


# ------------------------------------------------------- the exact eps decides the verdict


def test_an_exact_eps_above_the_claim_fails_the_audit_even_when_samples_miss_it():
    # randomized response at eps 1.2 claimed as eps 1: 20 samples cannot show the excess,
    # the exact output distribution does
    r = audit(_rr(1.2), [([0], [1])], epsilon=1.0, samples=20, rng=0)
    assert r.epsilon_lower_bound <= 1.0 and r.exact_epsilon == pytest.approx(1.2)
    assert r.exact_exceeds_claim and not r.passed
    assert r.describe().startswith("FAIL:")
    assert "exact eps over the pairs searched 1.2 (pair pair 0) exceeds the claim" in r.describe()
    assert json.loads(json.dumps(r.to_dict()))["exact_exceeds_claim"] is True


def test_the_exact_eps_is_compared_with_a_stated_tolerance():
    from dpbayes.audit.auditor import EXACT_TOLERANCE

    assert EXACT_TOLERANCE == 1e-9
    # the exact eps 0.8 at a claim below it only by rounding (1e-12 relative): a pass
    r = audit(_rr(0.8), [([0], [1])], epsilon=0.8 * (1 - 1e-12), samples=20, rng=0)
    assert r.passed and not r.exact_exceeds_claim and "exceeds" not in r.describe()
    # ... and by 1e-6 relative: a real excess, a fail
    r = audit(_rr(0.8), [([0], [1])], epsilon=0.8 * (1 - 1e-6), samples=20, rng=0)
    assert not r.passed and r.exact_exceeds_claim


# ------------------------------------------------------- the exact eps in log space


def test_exact_eps_does_not_underflow_for_a_large_epsilon():
    # global expmech at eps = 3000: probabilities of 1e-650 underflow to 0 in linear space,
    # which made the exact eps inf (and, with it, failed a private mechanism)
    from dpbayes.audit.targets import audit_release, exact_expmech_coin_epsilon
    from dpbayes.models import BetaBernoulli

    e, where = exact_expmech_coin_epsilon(BetaBernoulli(), 50, epsilon=3000.0, sensitivity="global")
    assert e == pytest.approx(1500.0, rel=1e-9) and where == "k=0 vs k=1 (n=50)"
    r = audit_release(
        BetaBernoulli(), "expmech", 50, epsilon=3000.0, samples=200, rng=0, sensitivity="global"
    )
    assert r.exact_epsilon == pytest.approx(1500.0, rel=1e-9) and r.passed
    assert r.details["exact_epsilon_all_pairs"] == pytest.approx(1500.0, rel=1e-9)


def test_exact_eps_is_not_understated_by_denormal_probabilities():
    # Beta(0.5, 0.5), n = 20, eps = 700, local: the linear-space loss was 389.5497 (a
    # ratio of denormals); the log-probabilities give the loss directly
    from dpbayes.audit.targets import expmech_log_distribution

    model = builtin_model("beta-bernoulli", prior=[0.5, 0.5])
    mech = release_mechanism(
        model, "expmech", epsilon=700.0, sensitivity="local", allow_non_private=True
    )
    pair = model_pairs(model, 20, max_pairs=None)[2]
    assert pair.label == "k=2 vs k=3 (n=20)"
    ox, lx = expmech_log_distribution(model, mech.plan_for(pair.x), pair.x, 700.0)
    oy, ly = expmech_log_distribution(model, mech.plan_for(pair.x_prime), pair.x_prime, 700.0)
    assert np.array_equal(ox, oy)
    reference = float(np.max(np.abs(lx - ly)))  # every output is possible under both
    assert reference == pytest.approx(389.552, abs=1e-3)
    r = audit(mech, [pair], epsilon=700.0, samples=100, batch=True, rng=0)
    assert r.exact_epsilon == pytest.approx(reference, rel=1e-12)


def test_log_distributions_rank_and_measure_without_underflow_or_warnings():
    import warnings

    from dpbayes.audit.exact import best_output_sets, exact_epsilon_log, pair_exact_epsilon_log

    outputs = np.array([[0.0], [1.0], [2.0], [3.0]])
    lx = np.array([0.0, -800.0, -900.0, -np.inf])  # output 3 impossible under both
    ly = np.array([0.0, -900.0, -800.0, -np.inf])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pair_exact_epsilon_log((outputs, lx), (outputs, ly)) == pytest.approx(100.0)
        assert exact_epsilon_log(lx, ly) == pytest.approx(100.0)
        # ranked by the log ratio: output 1 first for x over x', output 2 for x' over x
        sets = best_output_sets((outputs, lx), (outputs, ly), 1000, 0.01, log=True)
        assert [s.direction for s in sets] == ["x over x'", "x' over x"]
        r = audit(
            lambda x, rng: 0.0,
            [(0, 1)],
            epsilon=1.0,
            samples=100,
            rng=0,
            log_distribution=lambda x: (outputs, lx if x == 0 else ly),
        )
    assert r.exact_epsilon == pytest.approx(100.0) and not r.passed
    with pytest.raises(ValueError, match="not both"):
        audit(
            lambda x, rng: 0.0,
            [(0, 1)],
            epsilon=1.0,
            samples=100,
            distribution=lambda x: (outputs[:1], np.ones(1)),
            log_distribution=lambda x: (outputs[:1], np.zeros(1)),
        )


def test_outputs_impossible_under_both_data_sets_contribute_nothing_and_warn_nothing():
    import warnings

    def dist(x):
        keep = math.exp(0.8) / (1 + math.exp(0.8))
        p1 = keep if int(np.asarray(x).ravel()[0]) == 1 else 1 - keep
        return np.array([[0.0], [1.0], [2.0]]), np.array([1 - p1, p1, 0.0])

    rr = _rr(0.8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # was 'invalid value encountered in subtract'
        r = audit(rr, [([0], [1])], epsilon=0.8, samples=200, rng=1, distribution=dist)
    assert r.exact_epsilon == pytest.approx(0.8) and r.passed
