"""Noise-aware Bayesian-network posteriors: exact (no edges), Gibbs vs brute force, refusals."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import special

from dpbayes.models.bayes_net import BayesNet
from dpbayes.release import release
from dpbayes.release.noise_aware import count_log_likelihood

DATA = pd.DataFrame({"A": [0, 1, 1, 0, 1, 1], "B": [0, 1, 1, 1, 0, 1]})


def _fourier_loglik(rel, model, joint, codes):
    names = list(model.nodes)
    out = 0.0
    for label, value in rel.released["coefficients"].items():
        if label == "{}":
            continue
        parity = codes[[names.index(u) for u in label.split(",")]].sum(axis=0) % 2
        coef = float(np.sum(joint * np.where(parity == 0, 1.0, -1.0)))
        out += -abs(value - coef) / float(rel.public["scale"])
    return out


def _brute_joint(rel, model):
    """Exact P(N | release) over every joint table N of the public n (enumeration)."""
    n = int(rel.public["n"])
    scale = float(rel.public["scale"])
    cards = [model.cardinality(v) for v in model.nodes]
    cells = int(np.prod(cards))
    codes = np.indices(cards).reshape(len(cards), -1)
    pos = {v: i for i, v in enumerate(model.nodes)}
    tables, logw = [], []
    for cut in itertools.combinations(range(n + cells - 1), cells - 1):  # stars and bars
        edges = (-1, *cut, n + cells - 1)
        joint = np.diff(edges) - 1
        lw = special.gammaln(n + 1.0) - float(np.sum(special.gammaln(joint + 1.0)))
        fams = {}
        for v in model.nodes:
            shape = model.table_shape(v)
            f = np.ravel_multi_index(tuple(codes[pos[u]] for u in model.family(v)), shape)
            c = np.bincount(f, weights=joint, minlength=int(np.prod(shape))).reshape(shape)
            fams[v] = c
            a = model.alpha
            rows = c.reshape(-1, shape[-1])
            lw += float(
                np.sum(
                    special.gammaln(a * shape[-1]) - special.gammaln(a * shape[-1] + rows.sum(1))
                )
                + np.sum(special.gammaln(a + rows) - special.gammaln(a))
            )
            if rel.mechanism == "fourier":
                continue
            r = np.asarray(rel.released["counts"][v], dtype=float).ravel()
            for rv, cv in zip(r, c.ravel(), strict=True):
                lw += float(count_log_likelihood(rv, np.array([cv]), "laplace", scale, float(n))[0])
        if rel.mechanism == "fourier":
            lw += _fourier_loglik(rel, model, joint, codes)
        tables.append(fams)
        logw.append(lw)
    w = np.exp(np.array(logw) - special.logsumexp(logw))
    return tables, w


def _exact_moments(tables, w, node, row, k, alpha):
    """Posterior mean and sd of theta[node][row][k] from the enumeration."""
    m1 = m2 = 0.0
    for t, wt in zip(tables, w, strict=True):
        c = t[node].reshape(-1, t[node].shape[-1])[row]
        a, s = alpha + c[k], alpha * c.size + c.sum()
        m1 += wt * a / s
        m2 += wt * a * (a + 1) / (s * (s + 1))
    return m1, math.sqrt(m2 - m1 * m1)


def test_network_without_edges_is_exact_against_enumeration():
    model = BayesNet({"A": [0, 1], "B": [0, 1, 2]})
    data = pd.DataFrame({"A": [0, 1, 1, 0, 1], "B": [0, 1, 2, 2, 2]})
    rel = release(model, data, mechanism="laplace", epsilon=1.0, rng=3)
    post = rel.noise_aware_posterior()
    assert post.method == "exact" and post.diagnostics is None
    tables, w = _brute_joint(rel, model)
    for node, k in (("A", 0), ("B", 2)):
        m1, _ = _exact_moments(tables, w, node, 0, k, model.alpha)
        assert post.node(node).mean()[k] == pytest.approx(m1, abs=1e-10)


@pytest.mark.parametrize("mechanism", ["laplace", "fourier"])
def test_gibbs_matches_enumeration_and_reports_diagnostics(mechanism):
    model = BayesNet({"A": [0, 1], "B": [0, 1]}, [("A", "B")])
    rel = release(model, DATA, mechanism=mechanism, epsilon=2.0, rng=5)
    post = rel.noise_aware_posterior(rng=7, iterations=3000)
    assert post.method == "mcmc"
    diag = post.diagnostics
    assert diag.chains == 4 and diag.max_rhat <= 1.01 and diag.min_ess >= 100
    assert set(diag.to_dict()) >= {"max_rhat", "min_ess", "rhat", "ess"}
    tables, w = _brute_joint(rel, model)
    for node, row, parents in (("A", 0, ()), ("B", 0, (0,)), ("B", 1, (1,))):
        m1, sd = _exact_moments(tables, w, node, row, 1, model.alpha)
        est = post.node(node, parents).mean()[1]
        # Rao-Blackwellised mean: MC error below the posterior sd over sqrt(ESS)
        assert abs(est - m1) <= 4.5 * sd / math.sqrt(diag.min_ess)


def test_chain_of_three_matches_enumeration():
    """A -> B -> C: relabelling a middle variable moves records between its child's rows."""
    model = BayesNet({"A": [0, 1], "B": [0, 1], "C": [0, 1]}, [("A", "B"), ("B", "C")])
    data = pd.DataFrame({"A": [0, 1, 1, 0, 1], "B": [0, 1, 1, 1, 0], "C": [1, 1, 0, 1, 0]})
    rel = release(model, data, mechanism="laplace", epsilon=1.0, rng=11)
    post = rel.noise_aware_posterior(rng=3)
    diag = post.diagnostics
    assert diag.max_rhat <= 1.01 and diag.min_ess >= 400
    tables, w = _brute_joint(rel, model)
    for node, row, parents in (("A", 0, ()), ("B", 1, (1,)), ("C", 0, (0,)), ("C", 1, (1,))):
        m1, sd = _exact_moments(tables, w, node, row, 1, model.alpha)
        est = post.node(node, parents).mean()[1]
        assert abs(est - m1) <= 4.5 * sd / math.sqrt(diag.min_ess)


def test_default_call_mixes_without_warning_at_n_1000():
    """smoker -> health, n = 1000, eps = 1: the default sweeps reach R-hat <= 1.01 and
    ESS >= 400 (no RuntimeWarning), and the posterior mean is near the true CPT."""
    import warnings

    model = BayesNet({"smoker": [0, 1], "health": [0, 1, 2, 3]}, [("smoker", "health")])
    gen = np.random.default_rng(123)
    n = 1000
    smoker = (gen.random(n) < 0.3).astype(int)
    probs = np.array([[0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4]])
    health = np.array([gen.choice(4, p=probs[s]) for s in smoker])
    data = pd.DataFrame({"smoker": smoker, "health": health})
    rel = release(model, data, mechanism="laplace", epsilon=1.0, rng=7)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        post = rel.noise_aware_posterior(rng=1)
    diag = post.diagnostics
    assert diag.max_rhat <= 1.01 and diag.min_ess >= 400
    # the true CPT within 4.5 posterior sds (n = 1000: the posterior is concentrated)
    for s in (0, 1):
        node = post.node("health", (s,))
        mean, var = node.mean(), node.var()
        assert np.all(np.abs(mean - probs[s]) <= 4.5 * np.sqrt(var))


def test_short_chain_warns():
    model = BayesNet({"A": [0, 1], "B": [0, 1]}, [("A", "B")])
    rel = release(model, DATA, mechanism="laplace", epsilon=0.5, rng=5)
    with pytest.warns(RuntimeWarning, match="mix poorly"):
        post = rel.noise_aware_posterior(rng=1, iterations=20)
    assert not post.diagnostics.ok


def test_refusals_name_why():
    model = BayesNet({"A": [0, 1], "B": [0, 1]}, [("A", "B")])
    rel = release(model, DATA, mechanism="laplace", epsilon=1.0, rng=5, neighbours="add-remove")
    with pytest.raises(ValueError, match="public n"):
        rel.noise_aware_posterior()
    for mech in ("sampling", "map"):
        r = release(model, DATA, mechanism=mech, epsilon=1.0, rng=5)
        with pytest.raises(ValueError, match="normaliser"):
            r.noise_aware_posterior()


def test_small_calibration_run_covers_nominally():
    """theta from the prior, data, a Laplace release, the Gibbs posterior: 90% coverage of
    theta_A and theta_{B | A} (pooled; tolerance from the number of releases)."""
    import warnings

    model = BayesNet({"A": [0, 1], "B": [0, 1]}, [("A", "B")])
    gen = np.random.default_rng(2024)
    reps, n, hits, trials = 30, 12, 0, 0
    for rep in range(reps):
        ta, tb = gen.beta(1, 1), gen.beta(1, 1, size=2)
        a = (gen.random(n) < ta).astype(int)
        b = (gen.random(n) < tb[a]).astype(int)
        rel = release(
            model, pd.DataFrame({"A": a, "B": b}), mechanism="laplace", epsilon=1.0, rng=rep
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # short chains on purpose
            post = rel.noise_aware_posterior(rng=rep, iterations=400, chains=2)
        for node, parents, truth in (("A", (), ta), ("B", (0,), tb[0]), ("B", (1,), tb[1])):
            lo, hi = post.node(node, parents).marginal(1).interval(0.9)
            hits += lo <= truth <= hi
            trials += 1
    # three correlated indicators per release: binomial error on the releases, not trials
    assert abs(hits / trials - 0.9) <= 3.891 * math.sqrt(0.09 / reps)


def test_cli_posterior_reads_a_bayes_net_release(tmp_path, capsys):
    import json

    from dpbayes.cli import main

    model = BayesNet({"A": [0, 1], "B": [0, 1, 2]})
    data = pd.DataFrame({"A": [0, 1, 1, 0, 1], "B": [0, 1, 2, 2, 2]})
    rel = release(model, data, mechanism="laplace", epsilon=1.0, rng=3)
    path = tmp_path / "bn.json"
    path.write_text(rel.to_json())
    assert main(["posterior", "--release", str(path), "--level", "0.9", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["noise_aware_posterior"]
    assert got["method"] == "exact"
    bounds = np.asarray(got["credible_interval"]["bounds"]["B"])
    assert bounds.shape == (3, 2)
    want = rel.noise_aware_posterior().node("B").marginal(2).interval(0.9)
    assert np.allclose(bounds[2], want, atol=1e-9)
    assert main(["posterior", "--release", str(path)]) == 0
    assert "noise-aware posterior (exact)" in capsys.readouterr().out
