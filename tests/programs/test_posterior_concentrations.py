"""Beta/Dirichlet posteriors whose counts took the concentration past the checked range.

A run projects every Beta/Dirichlet it builds onto a total of at most MAX_CONCENTRATION
(1e9), but a conjugate update adds its records afterwards: the Beta lemma enumerates at
most MAX_LEMMA_N = 1e7 records, while (b) a Dirichlet of 3 or more categories had no cap
on n (its Lemma 6.3 is in closed form) and (a) a candidate that is the posterior of m
public records was never counted (public data give a public posterior). At a total of
1e13 the run's Hellinger scores moved 2.2 (Dirichlet posterior of 10^13 private records)
and 20 (candidate of 10^13 public records) times their certified sensitivity. The checker
now refuses a Beta/Dirichlet posterior of more than MAX_LEMMA_N records in all (public
and private, along its chain of priors), so every Beta/Dirichlet a run handles has a
total concentration of at most MAX_CONCENTRATION + MAX_LEMMA_N (``PROOF.md`` §4); the
seeded scans below check the scores there against the neighbours' own distance.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpbayes.models import Beta, Dirichlet, hellinger_beta, hellinger_dirichlet
from dpbayes.programs import terms as T
from dpbayes.programs.certificate import NotPrivate
from dpbayes.programs.interpreter import divergence, make_distribution
from dpbayes.programs.lemmas import (
    MAX_LEMMA_N,
    beta_bernoulli_bounds,
    dirichlet_categorical_bounds,
    le_cam_tv,
)
from dpbayes.programs.program import program
from dpbayes.programs.terms import MAX_CONCENTRATION

#: the largest total concentration of a Beta/Dirichlet a run handles (prior + counts)
TOP = MAX_CONCENTRATION + MAX_LEMMA_N


def test_a_dirichlet_posterior_of_1e13_records_is_refused() -> None:
    """(b) Dirichlet(1e9/3, 1e9/3, 1e9/3) on n = 10^13 category records: certified with a
    Hellinger score sensitivity of 2.74e-5 (Lemma 6.3 does not depend on n), while the
    run's score to a constant candidate moved by 5.96e-5 (2.2 times) between the
    neighbours below (a record moved from category 0 to 2, the other counts equal)."""
    n = 10**13
    cand = Dirichlet(np.array([353469215.0, 26767049.0, 31946661.0]))

    def build(db: T.Term) -> T.Term:
        prior = T.ran(T.dirichlet(np.full(3, MAX_CONCENTRATION / 3)))
        post = T.infer(T.learn(db, prior, lambda r: T.categorical(r)))
        return T.exp_mech(1.0, lambda r: T.hellinger(post, r), [cand, Dirichlet(np.ones(3))])

    prog = program("many", T.private_categories("d", n, 3), build)
    # the posteriors the run builds (conjugate_update: the projected prior plus the counts)
    alpha = make_distribution("dirichlet", [np.full(3, MAX_CONCENTRATION / 3)]).alpha
    counts = np.array([8576065453590, 649132746224, 774801800185])  # n - 1 equal records
    assert counts.sum() == n - 1
    s0, s2 = (
        divergence("hellinger", Dirichlet(alpha + counts + np.eye(3)[i]), cand) for i in (0, 2)
    )
    certified = dirichlet_categorical_bounds(alpha, n)["hellinger"]
    assert abs(s0 - s2) > 2 * certified  # 5.96e-5 against 2.74e-5
    with pytest.raises(NotPrivate, match="exceeds 1010000000"):
        prog.check()


def test_a_candidate_posterior_of_too_many_public_records_is_refused() -> None:
    """(a) A candidate infer(learn(public data, prior)) was certified for any number m of
    public records (its concentration 1e9 + m): at m = 10^13 the run's H score moved 20
    times its certified sensitivity (4.5e-4 against 2.24e-5, computed below on the Beta
    the run builds). Now m + the records before it are at most MAX_LEMMA_N, whether the
    data are public or private; at MAX_LEMMA_N + 1 public records it is refused."""
    a0 = make_distribution("beta", [5e8, 5e8]).a
    m, kp, n, k = 10**13, 5000005676227, 10, 8
    big = Beta(a0 + kp, a0 + m - kp)  # the posterior of m public records, kp of them ones
    s1, s0 = (divergence("hellinger", Beta(a0 + j, a0 + n - j), big) for j in (k + 1, k))
    certified = beta_bernoulli_bounds(a0, a0, n)["hellinger"]
    assert abs(s1 - s0) > 10 * certified

    def build(public: np.ndarray):
        def body(db: T.Term) -> T.Term:
            prior = T.ran(T.beta(5e8, 5e8))
            post = T.infer(T.learn(db, prior, lambda r: T.bernoulli(r)))
            cand = T.infer(T.learn(T.const(public), prior, lambda r: T.bernoulli(r)))
            return T.exp_mech(1.0, lambda r: T.hellinger(post, r), [cand, Beta(2.0, 2.0)])

        return program("cand", T.private_bools("d", n), body)

    ones = np.zeros(MAX_LEMMA_N + 1)
    ones[: MAX_LEMMA_N // 2] = 1.0
    with pytest.raises(NotPrivate, match="1000000000 \\+ 10,000,001 records exceeds"):
        build(ones).check()
    assert build(ones[:MAX_LEMMA_N]).check().epsilon > 0  # at the cap: certified


def test_the_records_a_prior_observed_count_towards_the_cap() -> None:
    """A private learn whose prior is the posterior of Beta(5e8, 5e8) on MAX_LEMMA_N - 5
    public records, on 10 private ones: a total of 1e9 + 1e7 + 5, certified before (the
    lemma saw n = 10 on the public posterior as its prior); with 5 private records the
    total is MAX_CONCENTRATION + MAX_LEMMA_N exactly, and it is certified."""
    public = np.zeros(MAX_LEMMA_N - 5)

    def make(n: int):
        def body(db: T.Term) -> T.Term:
            seen = T.learn(T.const(public), T.ran(T.beta(5e8, 5e8)), lambda r: T.bernoulli(r))
            post = T.infer(T.learn(db, T.ran(T.infer(seen)), lambda r: T.bernoulli(r)))
            return T.exp_mech(1.0, lambda r: T.total_variation(post, r), [Beta(2.0, 2.0)])

        return program("chain", T.private_bools("d", n), body)

    with pytest.raises(NotPrivate, match=r"1009999995 \+ 10 records exceeds 1010000000"):
        make(10).check()
    assert make(5).check().epsilon > 0


def test_observed_public_data_count_in_a_chain_of_observes() -> None:
    """observe(observe(prior, public vector), private datum): the vector's records count."""
    public = np.zeros(MAX_LEMMA_N)

    def body(db: T.Term) -> T.Term:
        first = T.observe(T.ran(T.beta(5e8, 5e8)), lambda r: T.bernoulli(r), T.const(public))
        post = T.infer(T.learn(db, first, lambda r: T.bernoulli(r)))
        return T.exp_mech(1.0, lambda r: T.hellinger(post, r), [Beta(2.0, 2.0)])

    with pytest.raises(NotPrivate, match="1010000000 \\+ 1 records exceeds"):
        program("obs", T.private_bools("d", 1), body).check()


def test_a_prior_built_from_a_released_value_is_bounded_by_its_projection() -> None:
    """A public posterior whose prior is built from a released value x (not closed):
    its total is bounded by the projection's 2 fl(MAX_CONCENTRATION / 2) = 1e9, plus the
    public records; refused from MAX_LEMMA_N + 1 records on (certified before)."""

    def make(size: int):
        public = np.ones(size)

        def body(db: T.Term) -> T.Term:
            noisy = T.lap_mech(
                1.0,
                T.get_params(
                    T.infer(T.learn(db, T.ran(T.beta(1.0, 1.0)), lambda r: T.bernoulli(r)))
                )[0],
            )
            return T.bind(
                noisy,
                lambda x: T.ran(
                    T.infer(
                        T.learn(T.const(public), T.ran(T.beta(x, 1.0)), lambda r: T.bernoulli(r))
                    )
                ),
            )

        return program("released", T.private_bools("d", 3), body)

    with pytest.raises(NotPrivate, match="1000000000 \\+ 10,000,001 records exceeds"):
        make(MAX_LEMMA_N + 1).check()
    assert make(MAX_LEMMA_N).check().epsilon > 0


# ----------------------------------------------------------------- (c) scans near the cap


def _near(rng: np.random.Generator, mean: np.ndarray, total: float) -> np.ndarray:
    """A candidate's parameters: a mean a few posterior sds from ``mean``, a given total."""
    q = np.abs(mean + rng.normal(size=mean.size) * rng.uniform(0, 4) * np.sqrt(mean / total))
    return np.maximum(q / q.sum() * rng.uniform(0.01, 1.0) * TOP, 1e-3)


def _prior_mean(rng: np.random.Generator, m: int) -> np.ndarray:
    """Balanced, skewed or with a coordinate near 0 (log-uniform down to 1e-9)."""
    w = rng.dirichlet(np.ones(m))
    if rng.random() < 0.4:
        w[int(rng.integers(m))] = 10 ** rng.uniform(-9, -2)
    return w / w.sum()


def test_beta_scores_move_within_the_neighbours_distance_up_to_the_top() -> None:
    """Seeded triples: neighbouring Beta posteriors of total T in [1e8, TOP] (a prior at
    up to MAX_CONCENTRATION plus up to MAX_LEMMA_N counts) and a candidate near them, of
    total up to TOP too (a candidate may be a posterior), parameters down to 1e-3.
    |H(P1, C) - H(P0, C)| is compared with H(P1, P0) itself, not the lemma's maximum over
    the counts (tighter), and the TV's change with Le Cam's bound from it. Worst ratios
    seen: 0.998 (H; the triangle inequality is nearly tight), 0.80 (TV); at a total of
    1e11 the scores moved 20 and 73 times the lemma's bound (test_run_built_concentrations)."""
    rng = np.random.default_rng(20261207)
    worst = {"hellinger": 0.0, "tv": 0.0}
    for _ in range(150):
        total = 10 ** rng.uniform(8, math.log10(TOP))
        p = _prior_mean(rng, 2)
        a, b = total * p[0], total * p[1]  # the posterior of the other records
        if min(a, b) < 1.0:
            a, b = max(a, 1.0), max(b, 1.0)
        b0 = Beta(a, b + 1.0)  # the changed record a 0 ...
        b1 = Beta(a + 1.0, b)  # ... or a 1
        c = _near(rng, np.array([a, b]) / (a + b), a + b)
        cand = Beta(float(c[0]), float(c[1]))
        h = float(hellinger_beta(a + 1.0, b, a, b + 1.0))
        for name, bound in (("hellinger", h), ("tv", le_cam_tv(h))):
            moved = abs(divergence(name, b1, cand) - divergence(name, b0, cand))
            worst[name] = max(worst[name], moved / bound)
            assert moved <= bound, (name, a, b, c, moved, bound)
    print("Beta worst ratios", worst)


@pytest.mark.parametrize("m", [3, 5])
def test_dirichlet_scores_move_within_the_neighbours_distance_up_to_the_top(m: int) -> None:
    """The same for Dirichlets of 3 and 5 categories: neighbours Dir(beta + e_i) and
    Dir(beta + e_j) with sum(beta) in [1e8, TOP], H against their own distance, and (3
    categories: the models' TV) the TV against Le Cam's bound. Worst ratios seen: 0.93
    (H, m = 3), 0.89 (H, m = 5), 0.74 (TV, m = 3)."""
    rng = np.random.default_rng(1000 + m)
    worst = {"hellinger": 0.0, "tv": 0.0} if m == 3 else {"hellinger": 0.0}
    for trial in range(60 if m == 3 else 100):
        total = 10 ** rng.uniform(8, math.log10(TOP))
        beta = np.maximum(_prior_mean(rng, m) * total, 1.0)
        i, j = (int(x) for x in rng.choice(m, 2, replace=False))
        p_i, p_j = Dirichlet(beta + np.eye(m)[i]), Dirichlet(beta + np.eye(m)[j])
        cand = Dirichlet(_near(rng, beta / beta.sum(), beta.sum()))
        h = float(hellinger_dirichlet(p_i.alpha, p_j.alpha))
        names = [("hellinger", h)]
        if m == 3 and trial < 20:  # the models' 3-category TV integrates: slow
            names.append(("tv", le_cam_tv(h)))
        for name, bound in names:
            moved = abs(divergence(name, p_i, cand) - divergence(name, p_j, cand))
            worst[name] = max(worst[name], moved / bound)
            assert moved <= bound, (name, beta, i, j, cand.alpha, moved, bound)
    print(f"Dirichlet m={m} worst ratios", worst)
