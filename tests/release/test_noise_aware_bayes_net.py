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
from dpbayes.release.bayes_net._normaliser_kernels import grid_log_z, log_trim_mass
from dpbayes.release.bayes_net.sampling import map_grid
from dpbayes.release.counts.noise_aware import count_log_likelihood

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
@pytest.mark.slow
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
    with pytest.raises(ValueError, match="n is private"):  # a prior on n, not a value
        rel.noise_aware_posterior(n=len(DATA))
    r = release(model, DATA, mechanism="map", epsilon=1.0, rng=5)  # no longer refused
    assert r.public["n"] == len(DATA) and r.public["scale"] == r.guarantee.details["scale"]
    r = release(model, DATA, mechanism="map", epsilon=1.0, rng=5, neighbours="add-remove")
    assert r.public["n"] is None
    with pytest.raises(ValueError, match="n must be given"):
        r.noise_aware_posterior()
    r = release(model, DATA, mechanism="sampling", epsilon=1.0, rng=5)
    assert r.public["n"] == len(DATA)  # public under substitute neighbours
    r = release(model, DATA, mechanism="sampling", epsilon=1.0, rng=5, neighbours="add-remove")
    assert r.public["n"] is None  # private under add/remove: the recipient must state it
    with pytest.raises(ValueError, match="n must be given"):
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
    bounds = np.asarray(got["interval"]["bounds"]["B"])
    assert bounds.shape == (3, 2)
    want = rel.noise_aware_posterior().node("B").marginal(2).interval(0.9)
    assert np.allclose(bounds[2], want, atol=1e-9)
    assert main(["posterior", "--release", str(path)]) == 0
    assert "noise-aware posterior (exact)" in capsys.readouterr().out


# ---- posterior sampling (paper 004 §4): the released draw's trimmed-Dirichlet likelihood


def _brute_sampling(rel, model, n):
    """Exact P(N | released draws) over every joint table N: BD marginal times, per draw
    and CPT row, Dir(theta~; alpha + c) / Z(alpha + c) (Z by scipy's betainc)."""
    cards = [model.cardinality(v) for v in model.nodes]
    cells = int(np.prod(cards))
    codes = np.indices(cards).reshape(len(cards), -1)
    pos = {v: i for i, v in enumerate(model.nodes)}
    trims, draws, a = rel.public["trims"], rel.released["draws"], model.alpha
    tables, logw = [], []
    for cut in itertools.combinations(range(n + cells - 1), cells - 1):
        joint = np.diff((-1, *cut, n + cells - 1)) - 1
        lw = special.gammaln(n + 1.0) - float(np.sum(special.gammaln(joint + 1.0)))
        fams = {}
        for v in model.nodes:
            shape = model.table_shape(v)
            f = np.ravel_multi_index(tuple(codes[pos[u]] for u in model.family(v)), shape)
            c = np.bincount(f, weights=joint, minlength=int(np.prod(shape))).reshape(shape)
            fams[v] = c
            rows = c.reshape(-1, shape[-1])
            k = shape[-1]
            lw += float(
                np.sum(special.gammaln(a * k) - special.gammaln(a * k + rows.sum(1)))
                + np.sum(special.gammaln(a + rows) - special.gammaln(a))
            )
            p = trims[v]
            for dr in draws:
                for r, t in zip(rows, np.asarray(dr[v]).reshape(-1, k), strict=True):
                    al = a + r
                    lw += float(special.gammaln(al.sum()) - np.sum(special.gammaln(al)))
                    lw += float(np.sum((al - 1) * np.log(t)))
                    z = special.betainc(al[0], al[1], 1 - p) - special.betainc(al[0], al[1], p)
                    lw -= math.log(z)
        tables.append(fams)
        logw.append(lw)
    return tables, np.exp(np.array(logw) - special.logsumexp(logw))


@pytest.mark.parametrize(("epsilon", "draws"), [(1.0, 1), (20.0, 1), (20.0, 3)])
def test_sampling_release_matches_enumeration(epsilon, draws):
    """A -> B binary, n = 6: the Gibbs posterior means of the CPT entries against the exact
    sum over every joint table (eps = 1: trim 0.44, Z far from 1; D = 3 draws)."""
    model = BayesNet({"A": [0, 1], "B": [0, 1]}, [("A", "B")])
    rel = release(model, DATA, mechanism="sampling", epsilon=epsilon, rng=5, draws=draws)
    post = rel.noise_aware_posterior(rng=7, n=6, iterations=3000)
    diag = post.diagnostics
    assert diag.max_rhat <= 1.01 and diag.min_ess >= 400
    assert post.normaliser["exact_nodes"] == ["A", "B"] and post.normaliser["log_z_sd"] == 0.0
    tables, w = _brute_sampling(rel, model, 6)
    for node, row, parents in (("A", 0, ()), ("B", 0, (0,)), ("B", 1, (1,))):
        m1, sd = _exact_moments(tables, w, node, row, 1, model.alpha)
        est = post.node(node, parents).mean()[1]
        assert abs(est - m1) <= 4.5 * sd / math.sqrt(diag.min_ess)


def test_sampling_chain_of_three_matches_enumeration():
    """A -> B -> C, n = 5, D = 2 draws: relabelling B moves records between C's rows, whose
    normalisers then change too."""
    model = BayesNet({"A": [0, 1], "B": [0, 1], "C": [0, 1]}, [("A", "B"), ("B", "C")])
    data = pd.DataFrame({"A": [0, 1, 1, 0, 1], "B": [0, 1, 1, 1, 0], "C": [1, 1, 0, 1, 0]})
    rel = release(model, data, mechanism="sampling", epsilon=6.0, rng=11, draws=2)
    post = rel.noise_aware_posterior(rng=3, n=5)
    diag = post.diagnostics
    assert diag.max_rhat <= 1.01 and diag.min_ess >= 400
    tables, w = _brute_sampling(rel, model, 5)
    for node, row, parents in (("A", 0, ()), ("B", 1, (1,)), ("C", 0, (0,)), ("C", 1, (1,))):
        m1, sd = _exact_moments(tables, w, node, row, 1, model.alpha)
        est = post.node(node, parents).mean()[1]
        assert abs(est - m1) <= 4.5 * sd / math.sqrt(diag.min_ess)


def test_trim_mass_is_exact_where_it_underflows():
    """log Z = log(I_{1-p}(a, b) - I_p(a, b)): scipy where it is representable; Beta(1, b)
    in closed form, log((1-p)^b - p^b), down to Z ~ e^-577 (n = 1000 at trim 0.438)."""
    for a, b, p in [(1.0, 1.0, 0.4), (3.0, 5.0, 0.1), (500.0, 501.0, 0.45), (2.0, 9.0, 0.3)]:
        want = math.log(special.betainc(a, b, 1 - p) - special.betainc(a, b, p))
        assert log_trim_mass(a, b, p) == pytest.approx(want, rel=1e-12, abs=1e-13)
    for b, p in [(1001.0, 0.438), (300.0, 0.2), (50.0, 0.45)]:
        want = b * math.log1p(-p) + math.log1p(-((p / (1 - p)) ** b))
        assert log_trim_mass(1.0, b, p) == pytest.approx(want, rel=1e-12)
        assert log_trim_mass(b, 1.0, p) == pytest.approx(want, rel=1e-12)


def test_sampling_default_call_mixes_without_warning_at_n_1000():
    """A -> B, n = 1000, eps = 1 and 10: the default sweeps reach R-hat <= 1.01 and
    ESS >= 400 with no RuntimeWarning."""
    import warnings

    model = BayesNet({"A": [0, 1], "B": [0, 1]}, [("A", "B")])
    gen = np.random.default_rng(1)
    n = 1000
    a = (gen.random(n) < 0.3).astype(int)
    b = (gen.random(n) < np.where(a == 1, 0.8, 0.4)).astype(int)
    for eps in (1.0, 10.0):
        rel = release(
            model, pd.DataFrame({"A": a, "B": b}), mechanism="sampling", epsilon=eps, rng=3
        )
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            post = rel.noise_aware_posterior(rng=1, n=n)
        assert post.diagnostics.max_rhat <= 1.01 and post.diagnostics.min_ess >= 400


def test_sampling_small_calibration_run_covers_nominally():
    """theta from the prior, n = 30 records, one trimmed posterior draw (eps = 2), the
    noise-aware posterior: 90% coverage of theta_A, theta_{B | A} (pooled, binomial
    tolerance on the releases)."""
    import warnings

    model = BayesNet({"A": [0, 1], "B": [0, 1]}, [("A", "B")])
    gen = np.random.default_rng(77)
    reps, n, hits, trials = 40, 30, 0, 0
    for rep in range(reps):
        ta, tb = gen.beta(1, 1), gen.beta(1, 1, size=2)
        a = (gen.random(n) < ta).astype(int)
        b = (gen.random(n) < tb[a]).astype(int)
        rel = release(
            model, pd.DataFrame({"A": a, "B": b}), mechanism="sampling", epsilon=2.0, rng=rep
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # short chains on purpose
            post = rel.noise_aware_posterior(rng=rep, n=n, iterations=400, chains=2)
        for node, parents, truth in (("A", (), ta), ("B", (0,), tb[0]), ("B", (1,), tb[1])):
            lo, hi = post.node(node, parents).marginal(1).interval(0.9)
            hits += lo <= truth <= hi
            trials += 1
    assert abs(hits / trials - 0.9) <= 3.891 * math.sqrt(0.09 / reps)


def test_sampling_with_three_categories_reports_the_normaliser_check():
    """k = 3: Z_row is taken as 1; a loose trim (eps = 50) keeps log Z constant (no
    warning), a tight one (eps = 1) makes it vary and warns."""
    import warnings

    model = BayesNet({"A": [0, 1], "B": [0, 1, 2]}, [("A", "B")])
    data = pd.DataFrame({"A": [0, 1, 1, 0, 1, 1] * 5, "B": [0, 1, 2, 1, 0, 2] * 5})
    rel = release(model, data, mechanism="sampling", epsilon=50.0, rng=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        post = rel.noise_aware_posterior(rng=1, n=30, iterations=1000)
    assert post.normaliser["unit_nodes"] == ["B"] and post.normaliser["log_z_sd"] <= 0.1
    rel = release(model, data, mechanism="sampling", epsilon=1.0, rng=2)
    with pytest.warns(RuntimeWarning, match="normaliser"):
        rel.noise_aware_posterior(rng=1, n=30, iterations=1000)


def test_cli_posterior_reads_a_sampling_release(tmp_path, capsys):
    import json

    from dpbayes.cli import main

    model = BayesNet({"A": [0, 1], "B": [0, 1]}, [("A", "B")])
    rel = release(model, DATA, mechanism="sampling", epsilon=1.0, rng=3)
    path = tmp_path / "bn.json"
    path.write_text(rel.to_json())
    assert main(["posterior", "--release", str(path), "--json"]) == 0  # n is public
    got = json.loads(capsys.readouterr().out)["noise_aware_posterior"]
    assert got["method"] == "mcmc" and got["normaliser"]["exact_nodes"] == ["A", "B"]
    assert np.asarray(got["interval"]["bounds"]["B"]).shape == (2, 2, 2)
    # under add/remove n is private: the recipient must state it
    rel = release(model, DATA, mechanism="sampling", epsilon=1.0, rng=3, neighbours="add-remove")
    path.write_text(rel.to_json())
    assert main(["posterior", "--release", str(path)]) == 2
    assert "n must be given" in capsys.readouterr().err
    assert main(["posterior", "--release", str(path), "--n", str(len(DATA)), "--json"]) == 0


# ---- MAP (paper 004 Algorithm 3): per CPT row, the exponential mechanism over a grid


def _brute_map(rel, model, n):
    """Exact P(N | released grid CPTs) over every joint table N: BD marginal times, per CPT
    row, the exponential mechanism's probability of the released grid point (the scale
    from the guarantee, scores log g . (alpha + c - 1) as in plan_map, scipy logsumexp)."""
    cards = [model.cardinality(v) for v in model.nodes]
    cells = int(np.prod(cards))
    codes = np.indices(cards).reshape(len(cards), -1)
    pos = {v: i for i, v in enumerate(model.nodes)}
    a, scale = model.alpha, rel.guarantee.details["scale"]
    grids = {k: map_grid(k, rel.public["trim"], rel.public["grid"]) for k in set(cards)}
    picked = {}
    for v in model.nodes:
        k = model.cardinality(v)
        rows = np.asarray(rel.released["cpts"][v]).reshape(-1, k)
        picked[v] = [int(np.argmin(np.abs(grids[k] - r).max(axis=1))) for r in rows]
    tables, logw = [], []
    for cut in itertools.combinations(range(n + cells - 1), cells - 1):
        joint = np.diff((-1, *cut, n + cells - 1)) - 1
        lw = special.gammaln(n + 1.0) - float(np.sum(special.gammaln(joint + 1.0)))
        fams = {}
        for v in model.nodes:
            shape = model.table_shape(v)
            f = np.ravel_multi_index(tuple(codes[pos[u]] for u in model.family(v)), shape)
            c = np.bincount(f, weights=joint, minlength=int(np.prod(shape))).reshape(shape)
            fams[v] = c
            k = shape[-1]
            rows = c.reshape(-1, k)
            lw += float(
                np.sum(special.gammaln(a * k) - special.gammaln(a * k + rows.sum(1)))
                + np.sum(special.gammaln(a + rows) - special.gammaln(a))
            )
            logg = np.log(grids[k])
            for r, g in zip(rows, picked[v], strict=True):
                scores = logg @ (a + r - 1.0) / scale
                lw += float(scores[g] - special.logsumexp(scores))
        tables.append(fams)
        logw.append(lw)
    return tables, np.exp(np.array(logw) - special.logsumexp(logw))


def test_grid_log_z_is_the_log_sum_exp():
    gen = np.random.default_rng(0)
    for k in (2, 3):
        logg = np.log(map_grid(k, 0.01, 100))
        base = gen.normal(size=len(logg))
        counts = gen.integers(0, 500, size=k)
        want = special.logsumexp(base + 0.7 * (logg @ counts))
        assert grid_log_z(logg, base, 0.7, counts) == pytest.approx(want, rel=1e-13)


@pytest.mark.parametrize(
    ("variables", "data", "epsilon"),
    [
        ({"A": [0, 1], "B": [0, 1]}, DATA, 2.0),
        ({"A": [0, 1], "B": [0, 1]}, DATA, 60.0),
        (
            {"A": [0, 1, 2], "B": [0, 1]},
            pd.DataFrame({"A": [0, 2, 1, 2, 2], "B": [0, 1, 1, 1, 0]}),
            40.0,
        ),
        (
            {"A": [0, 1], "B": [0, 1, 2]},
            pd.DataFrame({"A": [0, 1, 1, 0, 1], "B": [0, 2, 2, 1, 2]}),
            40.0,
        ),
    ],
)
def test_map_release_matches_enumeration(variables, data, epsilon):
    """A -> B with n = 5-6 (binary; a 3-valued parent; a 3-valued child): the Gibbs
    posterior means of every CPT entry against the exact sum over every joint table given
    the released grid points (eps = 60: the selection weights are sharp)."""
    model = BayesNet(variables, [("A", "B")])
    n = len(data)
    rel = release(model, data, mechanism="map", epsilon=epsilon, rng=5)
    post = rel.noise_aware_posterior(rng=7, iterations=3000)
    diag = post.diagnostics
    assert diag.max_rhat <= 1.01 and diag.min_ess >= 400
    assert post.normaliser["tabulated_nodes"] == ["A", "B"]
    tables, w = _brute_map(rel, model, n)
    for node in model.nodes:
        shape = model.table_shape(node)
        for row, parents in enumerate(itertools.product(*(range(s) for s in shape[:-1]))):
            vals = tuple(
                model.variables[p][i] for p, i in zip(model.parents[node], parents, strict=True)
            )
            for k in range(shape[-1]):
                m1, sd = _exact_moments(tables, w, node, row, k, model.alpha)
                est = post.node(node, vals).mean()[k]
                assert abs(est - m1) <= 4.5 * sd / math.sqrt(diag.min_ess)


@pytest.mark.filterwarnings("ignore:.*mix poorly:RuntimeWarning")  # short chains on purpose
def test_map_untabulated_normaliser_matches_tabulated(monkeypatch):
    """With the lazily filled tables switched off, log Z is computed on use: the same chain."""
    from dpbayes.release.bayes_net import noise_aware_sampling as nab

    model = BayesNet({"A": [0, 1], "B": [0, 1, 2]}, [("A", "B")])
    data = pd.DataFrame({"A": [0, 1, 1, 0, 1], "B": [0, 2, 2, 1, 2]})
    rel = release(model, data, mechanism="map", epsilon=40.0, rng=5)
    a = rel.noise_aware_posterior(rng=7, iterations=200, chains=2)
    monkeypatch.setattr(nab, "MAX_MAP_TABLE", 0)
    b = rel.noise_aware_posterior(rng=7, iterations=200, chains=2)
    assert b.normaliser["tabulated_nodes"] == []
    for v in model.nodes:
        assert np.allclose(a.mean().cpts[v], b.mean().cpts[v], rtol=0, atol=1e-12)


def test_map_default_call_mixes_without_warning():
    """A -> B, n = 200 and 1000, eps = 1 and 10: the default sweeps reach R-hat <= 1.01
    and ESS >= 400 with no RuntimeWarning."""
    import warnings

    model = BayesNet({"A": [0, 1], "B": [0, 1]}, [("A", "B")])
    gen = np.random.default_rng(1)
    for n, eps in ((200, 10.0), (1000, 1.0)):
        a = (gen.random(n) < 0.3).astype(int)
        b = (gen.random(n) < np.where(a == 1, 0.8, 0.4)).astype(int)
        rel = release(model, pd.DataFrame({"A": a, "B": b}), mechanism="map", epsilon=eps, rng=3)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            post = rel.noise_aware_posterior(rng=1)
        assert post.diagnostics.max_rhat <= 1.01 and post.diagnostics.min_ess >= 400


def test_map_small_calibration_run_covers_nominally():
    """theta from the prior, n = 30 records, a MAP release (eps = 20), the noise-aware
    posterior: 90% coverage of theta_A, theta_{B | A} (pooled, binomial tolerance on the
    releases)."""
    import warnings

    model = BayesNet({"A": [0, 1], "B": [0, 1]}, [("A", "B")])
    gen = np.random.default_rng(99)
    reps, n, hits, trials = 40, 30, 0, 0
    for rep in range(reps):
        ta, tb = gen.beta(1, 1), gen.beta(1, 1, size=2)
        a = (gen.random(n) < ta).astype(int)
        b = (gen.random(n) < tb[a]).astype(int)
        rel = release(model, pd.DataFrame({"A": a, "B": b}), mechanism="map", epsilon=20.0, rng=rep)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # short chains on purpose
            post = rel.noise_aware_posterior(rng=rep, iterations=400, chains=2)
        for node, parents, truth in (("A", (), ta), ("B", (0,), tb[0]), ("B", (1,), tb[1])):
            lo, hi = post.node(node, parents).marginal(1).interval(0.9)
            hits += lo <= truth <= hi
            trials += 1
    assert abs(hits / trials - 0.9) <= 3.891 * math.sqrt(0.09 / reps)


def test_cli_posterior_reads_a_map_release(tmp_path, capsys):
    import json

    from dpbayes.cli import main

    model = BayesNet({"A": [0, 1], "B": [0, 1]}, [("A", "B")])
    rel = release(model, DATA, mechanism="map", epsilon=5.0, rng=3)
    path = tmp_path / "bn.json"
    path.write_text(rel.to_json())
    assert main(["posterior", "--release", str(path), "--json"]) == 0  # n, scale public
    got = json.loads(capsys.readouterr().out)["noise_aware_posterior"]
    assert got["method"] == "mcmc" and got["normaliser"]["tabulated_nodes"] == ["A", "B"]
    assert np.asarray(got["interval"]["bounds"]["B"]).shape == (2, 2, 2)
    assert np.allclose(np.asarray(got["mean"]["B"]).sum(axis=-1), 1.0)
    assert main(["posterior", "--release", str(path)]) == 0
    assert "noise-aware posterior (mcmc)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "alpha, n, mechanism",
    [(1e-8, 1, "laplace"), (1e-300, 50, "laplace"), (1.0, 0, "sampling"), (1.0, 0, "map")],
)
def test_noise_aware_intervals_after_the_charge_at_the_edges(alpha, n, mechanism) -> None:
    """A review: after the charge, the noise-aware intervals failed: "f(a) and f(b) must
    have different signs" at alpha 1e-8 (a quantile's bracket at rounding level), "b must
    contain only positive numbers" at 1e-300 (a Beta marginal's b by subtraction), and
    "n must be >= 1" for sampling and map on an empty table (laplace and fourier ran)."""
    import warnings

    import pandas as pd

    from dpbayes.models.bayes_net import BayesNet
    from dpbayes.release import release

    m = BayesNet({"a": [0, 1], "b": [0, 1]}, edges=[("a", "b")], alpha=alpha)
    df = pd.DataFrame({"a": [1] * n, "b": [1] * n})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = release(m, df, mechanism=mechanism, epsilon=1.0, neighbours="substitute", rng=3)
        intervals = r.noise_aware_posterior(rng=1).intervals(0.9)
    assert len(intervals) > 0
