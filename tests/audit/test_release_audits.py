"""Every registered release mechanism and every §6 program, audited at a small sample size.

A pass means no violation was found with these samples (the bound holds at 95%
confidence); the full audit is ``dpbayes experiment audit``.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpbayes.audit import audit
from dpbayes.audit.targets import (
    MODEL_NAMES,
    audit_release,
    builtin_model,
    exact_expmech_coin_epsilon,
    model_pairs,
    release_configurations,
)
from dpbayes.models import BetaBernoulli, DirichletCategorical, NormalMean
from dpbayes.programs import examples as ex

N = 4
CONFIGS = [
    (name, cfg) for name in MODEL_NAMES for cfg in release_configurations(builtin_model(name), N)
]


def _id(item):
    name, cfg = item
    extra = cfg.get("sensitivity", "")
    return f"{name}-{cfg['mechanism']}{'-' + extra if extra else ''}"


@pytest.mark.parametrize("item", CONFIGS, ids=[_id(c) for c in CONFIGS])
def test_release_mechanism_audit(item):
    name, cfg = item
    model = builtin_model(name)
    r = audit_release(model, n=N, epsilon=1.0, samples=600, max_pairs=2, rng=21, **cfg)
    assert r.claimed_epsilon == 1.0
    if cfg.get("sensitivity") == "local":
        # not DP in general, but on these default models at n = 4 its true eps is below the
        # claim (see test_local_sensitivity_expmech_exact_epsilon; the violation is in
        # test_exact.py): no sound audit can fail it here
        assert r.details["private"] is False
        assert r.exact_epsilon is not None and r.exact_epsilon <= 1.0
    if r.exact_epsilon is not None:
        assert r.epsilon_lower_bound <= r.exact_epsilon
    assert r.passed, r.describe()


def test_every_registered_mechanism_is_configured():
    names = {(n, c["mechanism"]) for n, c in CONFIGS}
    assert ("beta-bernoulli", "laplace") in names and ("normal-mean", "laplace") in names
    assert ("beta-bernoulli", "expmech") in names and ("dirichlet-categorical", "expmech") in names


def test_local_sensitivity_expmech_exact_epsilon():
    # The exact selection probabilities of the release module's local-sensitivity
    # expmech: at n = 10, eps = 1 its true eps is 0.633 < 1 (the factor 2 in the exponent
    # absorbs the change of local sensitivity); with a Beta(0.001, 100) prior and n = 100
    # it exceeds the claim, by 5%.
    e10, _ = exact_expmech_coin_epsilon(BetaBernoulli(), 10, epsilon=1.0, sensitivity="local")
    assert e10 == pytest.approx(0.6328, abs=1e-3)
    e100, where = exact_expmech_coin_epsilon(
        BetaBernoulli(alpha=0.001, beta=100.0), 100, epsilon=1.0, sensitivity="local"
    )
    assert e100 > 1.0 and where == "k=1 vs k=2 (n=100)"
    g100, _ = exact_expmech_coin_epsilon(
        BetaBernoulli(alpha=0.001, beta=100.0), 100, epsilon=1.0, sensitivity="global"
    )
    assert g100 <= 1.0


def test_model_pairs_are_neighbours():
    for model in (BetaBernoulli(), DirichletCategorical(alpha=[1.0, 1.0, 1.0])):
        for p in model_pairs(model, 5):
            assert len(p.x) == len(p.x_prime) == 5
            assert (np.sort(p.x.astype(str)) != np.sort(p.x_prime.astype(str))).sum() >= 1
            sx, sy = model.statistics(p.x), model.statistics(p.x_prime)
            assert np.abs(sx.counts - sy.counts).sum() == 2
    nm = NormalMean(lower=0.0, upper=1.0)
    for p in model_pairs(nm, 5):
        assert np.count_nonzero(p.x != p.x_prime) == 1


EXAMPLE_ARGS = {
    "input-beta": {"n": 3},
    "input-normal": {"n": 3},
    "params-beta": {"n": 4},
    "params-normal": {"n": 4},
    "hellinger-beta": {"n": 4},
    "hellinger-dirichlet": {"n": 3},
}


@pytest.mark.parametrize("name", sorted(ex.EXAMPLES))
def test_paper_example_audit(name):
    e = ex.EXAMPLES[name](**EXAMPLE_ARGS[name])
    pairs = e.pairs()[:1] if name.startswith("input") else e.pairs()[:2]
    r = audit(
        e.program,
        pairs,
        epsilon=e.epsilon,
        delta=e.delta,
        samples=600,
        batch=True,
        rng=31,
        name=e.name,
    )
    assert r.passed, r.describe()
