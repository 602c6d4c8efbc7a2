"""Beta/Dirichlet parameters a program computes when it runs, at huge concentrations.

Constants with parameters summing above ``MAX_CONCENTRATION`` were refused when built, but
a parameter computed by the run (``beta(mul(1e20, p), ...)``, public or from the data) was
projected onto [TINY, DBL_MAX] only: a public candidate Beta of concentration 1e20, built
by the program, made a run's TV score move by 1 between neighbours certified at 0.007
(exact eps 4.2 under a certificate of 0.07). A run now projects each of the m parameters
onto [TINY, MAX_CONCENTRATION / m] (``PROOF.md`` §4), and MAX_CONCENTRATION is 1e9: at a
total of 1e11 the scores already moved 73 times their certified sensitivity.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dpbayes.models import Beta, Dirichlet
from dpbayes.programs import terms as T
from dpbayes.programs.exact import exact_epsilon
from dpbayes.programs.interpreter import Runtime, divergence, make_distribution
from dpbayes.programs.lemmas import beta_bernoulli_bounds
from dpbayes.programs.program import program
from dpbayes.programs.terms import MAX_CONCENTRATION


def _scores(prog, data: np.ndarray) -> np.ndarray:
    rt = Runtime(prog.validate_data(data), None, None, prog.db.uid)
    t = prog.body
    return rt.exp_scores(t, [rt.candidate(c) for c in t.args[2]])


def _tv_bound(cert) -> float:
    step = next(s for s in cert.derivation if s.rule.startswith("Divergence tv"))
    return float(step.bound.split("L1 <= ")[1].split(",")[0])


def test_a_candidate_built_at_concentration_1e20_keeps_the_certificate() -> None:
    """The attack: n = 100, prior Beta(1e4, 1e4), candidate Beta(1e20 p, 1e20 (1 - p))
    computed by the program. Before: scores 1.0 and 0.0 on the neighbours with 20 and 19
    ones (certified sensitivity 0.00705), exact eps 4.23 against a certificate of 0.0705."""
    n, k, p, c = 100, 19, 0.6859047235501419, 1e20

    def build(db: T.Term) -> T.Term:
        post = T.infer(T.learn(db, T.ran(T.beta(1e4, 1e4)), lambda r: T.bernoulli(r)))
        big = T.beta(T.mul(c, p), T.mul(c, 1.0 - p))
        return T.exp_mech(10.0, lambda r: T.total_variation(post, r), [big, Beta(2.0, 2.0)])

    prog = program("attack", T.private_bools("d", n), build)
    cert = prog.check()
    bound = _tv_bound(cert)
    x = np.array([1] * (k + 1) + [0] * (n - k - 1), dtype=bool)
    y = np.array([1] * k + [0] * (n - k), dtype=bool)
    moved = np.max(np.abs(_scores(prog, x) - _scores(prog, y)))
    assert moved <= bound, (moved, bound)
    assert exact_epsilon(prog, [(x, y)]) <= cert.epsilon


def test_a_computed_prior_beyond_the_cap_is_projected_alike_when_checked_and_run() -> None:
    """A public prior computed as Beta(5e13, 5e13) (a total of 1e14, the former cap; far
    below 2^53) and a candidate near it: before, the score moved by 0.09 between the
    neighbours with 28 and 29 ones, certified at 1e-7. Now every neighbouring pair's
    scores move within the certified TV bound, which the checker derives from the
    projected prior the run uses."""
    n = 50

    def build(db: T.Term) -> T.Term:
        prior = T.beta(T.add(5e13, 0.0), T.add(5e13, 0.0))
        post = T.infer(T.learn(db, T.ran(prior), lambda r: T.bernoulli(r)))
        near = T.beta(T.add(50000004123474.72, 0.0), T.add(49999995876525.28, 0.0))
        return T.exp_mech(1.0, lambda r: T.total_variation(post, r), [near, Beta(2.0, 2.0)])

    prog = program("prior", T.private_bools("d", n), build)
    bound = _tv_bound(prog.check())
    scores = [_scores(prog, np.array([1] * j + [0] * (n - j), dtype=bool)) for j in range(n + 1)]
    for s0, s1 in itertools.pairwise(scores):
        assert np.max(np.abs(s1 - s0)) <= bound, (np.max(np.abs(s1 - s0)), bound)


def test_run_built_concentrations_are_projected_onto_the_reliable_domain() -> None:
    """The data-built beta(1 + 1e20 x, 1e20) and Dirichlets: each parameter onto
    [TINY, MAX_CONCENTRATION / m] (1-Lipschitz per coordinate), the sum within the cap;
    a parameter already inside is left as it is."""
    b = make_distribution("beta", [1.0 + 1e20 * 0.3, 1e20])
    assert (b.a, b.b) == (MAX_CONCENTRATION / 2, MAX_CONCENTRATION / 2)
    assert make_distribution("beta", [3.0, 4e8]).b == 4e8
    d = make_distribution("dirichlet", [np.array([1e300, 2.0, 1e12, 5.0])])
    assert list(d.alpha) == [MAX_CONCENTRATION / 4, 2.0, MAX_CONCENTRATION / 4, 5.0]
    assert d.alpha.sum() <= MAX_CONCENTRATION
    # its TV to a moderate Beta is the true one (~1), not 0
    for a, bb in ((3.0, 2.0), (119.4, 0.034)):
        assert divergence("tv", Beta(a, bb), b) > 0.999


def test_constants_beyond_the_lower_cap_are_refused() -> None:
    """Beta(1e12, 1e12) was accepted (total below the former 1e14); with it as the prior,
    a TV score moved 320 times its certified sensitivity between neighbours."""
    for big in (Beta(1e12, 1e12), Beta(6e8, 5e8), Dirichlet(np.array([4e8, 4e8, 4e8]))):
        with pytest.raises(ValueError, match="must sum to at most"):
            T.const(big)
    T.const(Beta(0.6 * MAX_CONCENTRATION, 0.4 * MAX_CONCENTRATION))


@pytest.mark.parametrize("a0", [5e6, 5e8])
def test_scores_move_within_the_lemma_bound_up_to_the_cap(a0: float) -> None:
    """Random candidates near and far from the posteriors of a prior Beta(a0, a0) at the
    cap's scale: |score(k + 1) - score(k)| <= the lemma's TV (resp. H) bound, for TV and H
    (at a total of 1e11 they moved 73 and 20 times it)."""
    rng = np.random.default_rng(7)
    n = 10
    one = beta_bernoulli_bounds(a0, a0, n)
    sd = 1.0 / np.sqrt(8.0 * a0)
    for _ in range(60):
        k = int(rng.integers(0, n))
        c = min(2 * a0 * 10 ** rng.uniform(-1, 1), 0.999 * MAX_CONCENTRATION)
        p = 0.5 + 3 * sd * rng.normal()
        cand = Beta(c * p, c * (1 - p))
        for name in ("tv", "hellinger"):
            s1 = divergence(name, Beta(a0 + k + 1, a0 + n - 1 - k), cand)
            s0 = divergence(name, Beta(a0 + k, a0 + n - k), cand)
            assert abs(s1 - s0) <= one[name], (name, k, c, p)
