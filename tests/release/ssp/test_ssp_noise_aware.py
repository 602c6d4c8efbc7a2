"""Noise-aware posteriors of SSP releases: coverage against the naive posterior in small
simulations, MCMC diagnostics and warnings, the mixture's quantiles."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

import dpbayes as dpb


def linear_model() -> dpb.models.BayesianLinearRegression:
    return dpb.models.BayesianLinearRegression(
        prior_precision=4.0, noise_variance=0.25, feature_bound=1.0, label_bound=2.0, clip="box"
    )


def covered(interval: np.ndarray, w: np.ndarray) -> int:
    return int(np.sum((interval[:, 0] <= w) & (w <= interval[:, 1])))


def test_linear_noise_aware_intervals_cover_where_the_naive_ones_do_not() -> None:
    """60 data sets (w from the prior N(0, I / 4), so that clipping y to [-2, 2] almost
    never happens and the exact posterior covers at 0.90; n = 200, eps = 0.5, Laplace):
    120 coefficient intervals at 90%. The noise-aware coverage must be within 0.90 +- 0.08
    (about three binomial sd at 120 intervals); the naive intervals cover at most 0.6
    (measured 0.11: they ignore noise of sd ~ 30 on X'X entries ~ 50)."""
    model = linear_model()
    g = np.random.default_rng(0)
    aware = naive = total = 0
    for i in range(60):
        w = g.normal(0, 0.5, 2)
        x = np.clip(g.normal(0, 0.5, (200, 2)), -1, 1)
        y = np.clip(x @ w + g.normal(0, 0.5, 200), -2, 2)
        rel = dpb.release(model, (x, y), mechanism="ssp", epsilon=0.5, rng=i)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            post = rel.noise_aware_posterior(rng=i, iterations=600, chains=2)
        aware += covered(post.interval(0.9), w)
        naive += covered(rel.posterior.interval(0.9), w)
        total += 2
    assert abs(aware / total - 0.90) <= 0.08
    assert naive / total <= 0.6


@pytest.mark.parametrize("delta", [0.0, 1e-5])
def test_logistic_noise_aware_intervals_cover_where_the_naive_ones_do_not(delta: float) -> None:
    """200 data sets, n = 500, eps = 0.3: 400 intervals at 90% (binomial sd 0.015)."""
    model = dpb.models.BayesianLogisticRegression(prior_precision=1.0, feature_bound=1.0)
    g = np.random.default_rng(1)
    aware = naive = total = 0
    for i in range(200):
        w = g.normal(0, 1, 2)
        x = np.clip(g.normal(0, 0.5, (500, 2)), -1, 1)
        y = (g.random(500) < 1 / (1 + np.exp(-x @ w))).astype(int)
        rel = dpb.release(model, (x, y), mechanism="ssp", epsilon=0.3, delta=delta, rng=i)
        aware += covered(rel.noise_aware_posterior().interval(0.9), w)
        naive += covered(rel.posterior.interval(0.9), w)
        total += 2
    assert abs(aware / total - 0.90) <= 0.05
    assert naive / total <= 0.75


def one_release(
    eps: float = 1.0, neighbours: str = "substitute", n: int = 300
) -> dpb.release.Release:
    g = np.random.default_rng(7)
    x = np.clip(g.normal(0, 0.5, (n, 3)), -1, 1)
    y = np.clip(x @ np.array([0.5, -0.3, 0.2]) + g.normal(0, 0.5, n), -2, 2)
    return dpb.release(
        linear_model(), (x, y), mechanism="ssp", epsilon=eps, neighbours=neighbours, rng=1
    )


def test_linear_posterior_shapes_diagnostics_and_mixture_quantiles() -> None:
    rel = one_release()
    post = rel.noise_aware_posterior(rng=3, iterations=1200)
    assert post.mean().shape == (3,) and post.interval(0.9).shape == (3, 2)
    assert post.cov().shape == (3, 3) and np.all(post.std() > 0)
    d = post.diagnostics
    assert d.chains == 4 and d.draws == 900 and len(d.names) == 4  # a quarter warm-up
    iv = post.interval(0.8)
    for i in range(3):
        assert post.cdf(iv[i, 0], i) == pytest.approx(0.1, abs=1e-8)
        assert post.cdf(iv[i, 1], i) == pytest.approx(0.9, abs=1e-8)
    # the noise-aware intervals are wider than the naive ones (the noise is accounted for)
    assert np.all(np.diff(iv, axis=1) > np.diff(rel.posterior.interval(0.8), axis=1))
    assert post.to_dict()["family"] == "ssp-noise-aware"
    assert "noise-aware posterior" in repr(rel)


def test_poor_mixing_warns_and_add_remove_needs_n() -> None:
    rel = one_release(eps=0.2)
    with pytest.warns(RuntimeWarning, match="mix poorly"):
        rel.noise_aware_posterior(rng=0, iterations=40)
    add = one_release(neighbours="add-remove")
    with pytest.raises(ValueError, match="n must be given"):
        add.noise_aware_posterior(rng=0, iterations=40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        post = add.noise_aware_posterior(n=300, rng=0, iterations=100)
    assert np.all(np.isfinite(post.mean()))
    with pytest.raises(ValueError, match="iterations"):
        rel.noise_aware_posterior(iterations=3)
    with pytest.raises(ValueError, match="iterations must be a positive integer or 'auto'"):
        rel.noise_aware_posterior(iterations="more")


def test_auto_iterations_continue_the_chains_until_they_mix() -> None:
    """iterations="auto" (the default): 1,000 steps, continued while R-hat > 1.01 or
    ESS < 400. On a d = 10 diabetes release (eps 1) where 1,000 steps leave
    R-hat above 1.01 or ESS below 400, the default continues the same chains (its first
    1,000 steps are those of iterations=1000) and ends without a warning; a fixed count
    is kept exactly."""
    from sklearn.datasets import load_diabetes

    x, y = load_diabetes(return_X_y=True)
    lo, hi = x.min(axis=0), x.max(axis=0)
    z = (x - (lo + hi) / 2) / ((hi - lo) / 2)
    model = dpb.models.BayesianLinearRegression(
        prior_precision=1.0, noise_variance=0.25, feature_bound=1.0, label_bound=1.0, clip="box"
    )
    rel = dpb.release(model, (z, (y - 185.5) / 160.5), mechanism="ssp", epsilon=1.0, rng=101)
    with pytest.warns(RuntimeWarning, match="mix poorly"):
        fixed = rel.noise_aware_posterior(rng=2, iterations=1000)
    assert fixed.diagnostics.draws == 750 and not fixed.diagnostics.ok
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        auto = rel.noise_aware_posterior(rng=2)
    assert auto.diagnostics.ok
    # the same chains continued: the default keeps the steps from a quarter of its total
    # on, and those before step 1,000 are the last ones iterations=1000 kept
    assert auto.diagnostics.draws % 75 == 0  # totals are multiples of 100
    start = auto.diagnostics.draws // 3  # total / 4
    assert auto.diagnostics.draws > 750 and 250 < start < 1000
    assert np.array_equal(
        auto.draws.reshape(4, -1, 10)[:, : 1000 - start],
        fixed.draws.reshape(4, -1, 10)[:, start - 250 :],
    )


@pytest.mark.parametrize("likelihood", ["adaptive", "pass-glm"])
def test_logistic_noise_aware_widens_with_the_noise_and_converges(likelihood: str) -> None:
    """Narrower as eps grows, converged before the cap; the PASS-GLM likelihood is the
    naive posterior's own, so with the noise added it is never narrower than that."""
    g = np.random.default_rng(2)
    x = np.clip(g.normal(0, 0.5, (400, 2)), -1, 1)
    y = (g.random(400) < 1 / (1 + np.exp(-x @ np.array([1.5, -1.0])))).astype(int)
    model = dpb.models.BayesianLogisticRegression(feature_bound=1.0)
    sds = []
    for eps in (0.1, 1.0, 100.0):
        rel = dpb.release(model, (x, y), mechanism="ssp", epsilon=eps, rng=0)
        post = rel.noise_aware_posterior(likelihood=likelihood)
        assert post.iterations < 50 and post.likelihood == likelihood
        if likelihood == "pass-glm":
            assert np.all(post.std() >= rel.posterior.std() - 1e-12)
        sds.append(float(np.mean(post.std())))
    assert sds[0] > sds[1] > sds[2]
    assert math.isfinite(sds[0])


def test_margin_slope_is_the_average_slope_of_the_link() -> None:
    """c(v) = E[2 sigmoid'(m)], m ~ N(0, v): 1/2 at v = 0, the integral in 30 digits
    (mpmath) to 1e-13 from v = 1e-8 to 1e8, decreasing, and 2 / sqrt(2 pi v) (1 - O(1/v))
    for large v (the integral of 2 sigmoid' is 2)."""
    import mpmath as mp

    from dpbayes.release.ssp.noise_aware import margin_slope

    assert margin_slope(0.0) == 0.5
    mp.mp.dps = 30
    vs = [1e-8, 0.01, 0.3, 1.0, 4.0, 25.0, 1e4, 1e8]
    for v in vs:
        sd = mp.sqrt(v)

        def f(z: mp.mpf, sd: mp.mpf = sd) -> mp.mpf:
            e = mp.exp(-sd * abs(z))
            return 2 * e / (1 + e) ** 2 * mp.npdf(z)

        cuts = [-mp.inf, -1, -1 / sd, 0, 1 / sd, 1, mp.inf]
        assert margin_slope(v) == pytest.approx(float(mp.quad(f, sorted(set(cuts)))), rel=1e-13)
    got = [margin_slope(v) for v in vs]
    assert all(a > b for a, b in itertools.pairwise(got))
    for v in (1e4, 1e8, 1e12):
        assert margin_slope(v) == pytest.approx(2 / math.sqrt(2 * math.pi * v), rel=1e-3)


def test_adaptive_logistic_likelihood_corrects_the_polynomial_slope() -> None:
    """Exact statistics (eps 1e6, noise negligible), 300 data sets of the coverage study
    (n = 500, w ~ N(0, I), x ~ N(0, I / 4) clipped): the PASS-GLM likelihood's 90%
    intervals under-cover (its slope is the polynomial's over [-R, R]); the adaptive
    likelihood's cover at 0.90 (600 intervals, sd about 0.013)."""
    from dpbayes.experiments.glm import coverage_models, simulated_data

    model, n = coverage_models()["logistic"]
    g = np.random.default_rng(3)
    hits = {"adaptive": 0.0, "pass-glm": 0.0}
    for i in range(300):
        w, x, y = simulated_data("logistic", n, g)
        rel = dpb.release(model, (x, y), mechanism="ssp", epsilon=1e6, rng=i)
        for key in hits:
            hits[key] += covered(rel.noise_aware_posterior(likelihood=key).interval(0.9), w)
    assert abs(hits["adaptive"] / 600 - 0.90) <= 0.035
    assert hits["pass-glm"] / 600 < hits["adaptive"] / 600 - 0.02


def test_adaptive_logistic_likelihood_needs_n_under_add_remove() -> None:
    """Under add/remove n is private: the default ("auto") falls back to the PASS-GLM
    likelihood and says so; "adaptive" asks for n by name."""
    g = np.random.default_rng(4)
    x = np.clip(g.normal(0, 0.5, (300, 2)), -1, 1)
    y = (g.random(300) < 0.5).astype(int)
    model = dpb.models.BayesianLogisticRegression(feature_bound=1.0)
    rel = dpb.release(model, (x, y), mechanism="ssp", epsilon=1.0, neighbours="add-remove", rng=0)
    assert rel.noise_aware_posterior().likelihood == "pass-glm"
    with pytest.raises(ValueError, match=r"^n must be given"):
        rel.noise_aware_posterior(likelihood="adaptive")
    with pytest.raises(ValueError, match="likelihood"):
        rel.noise_aware_posterior(likelihood="exact")
    assert rel.noise_aware_posterior(n=300).likelihood == "adaptive"
    sub = dpb.release(model, (x, y), mechanism="ssp", epsilon=1.0, rng=0)
    assert sub.noise_aware_posterior().likelihood == "adaptive"


def test_statistics_step_draws_the_exact_gaussian_conditional() -> None:
    """Step 1 of the linear Gibbs sampler (Matheron's rule with an Isserlis prior draw)
    against the conditional written out: precision K^-1 + Omega^-1, mean
    cov (K^-1 n vech C + Omega^-1 s~). 40000 draws, d = 2 (p = 6 statistics)."""
    from dpbayes.release.ssp.kernels import statistics_stack

    m, n = 3, 50
    a = np.array([[1.0, 0.3, 0.5], [0.2, 0.8, -0.4], [0.1, 0.0, 0.7]])
    c = a @ a.T
    rows, cols = np.triu_indices(m)
    p = rows.size
    k = n * (
        c[rows[:, None], rows[None, :]] * c[cols[:, None], cols[None, :]]
        + c[rows[:, None], cols[None, :]] * c[cols[:, None], rows[None, :]]
    )
    omega = np.linspace(5.0, 200.0, p)
    s_obs = n * c[rows, cols] + np.linspace(-20.0, 20.0, p)
    cov = np.linalg.inv(np.linalg.inv(k) + np.diag(1 / omega))
    mean = cov @ (np.linalg.solve(k, n * c[rows, cols]) + s_obs / omega)
    draws = 40_000
    gen = np.random.default_rng(3)
    s = statistics_stack(
        np.ascontiguousarray(np.broadcast_to(c, (draws, m, m))),
        float(n),
        s_obs,
        rows,
        cols,
        np.ascontiguousarray(np.broadcast_to(omega, (draws, p))),
        gen.standard_normal((draws, p)),
        gen.standard_normal((draws, p)),
    )
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(s.mean(axis=0) - mean) / sd < 5 / math.sqrt(draws))
    emp = np.cov(s.T)
    assert np.all(np.abs(emp - cov) / np.outer(sd, sd) < 0.04)


@pytest.mark.parametrize("kind", ["bounded", "inverse-wishart"])
def test_feature_covariance_step_leaves_its_conditional_invariant(kind: str) -> None:
    """Step 3 of the linear Gibbs sampler at d = 1, where the conditional is closed form:
    X'X = a ~ Wishart(n, Sigma) gives the likelihood Sigma^(-n/2) exp(-a / (2 Sigma)); under
    the IW(nu0, psi0) prior the conditional is InvGamma((nu0 + n) / 2, (psi0 + a) / 2), under
    the bounded prior (flat on [0, B^2]) InvGamma(n / 2 - 1, a / 2) truncated to Sigma <= B^2.
    4000 chains x 40 steps from a start inside the bounds; Kolmogorov-Smirnov at the end."""
    from scipy import stats

    from dpbayes.release.ssp.noise_aware import FeatureCovariancePrior

    n, a, b2 = 12, 9.0, 1.5
    prior = FeatureCovariancePrior(kind, 3.0, np.array([[b2 / 3]]), b2, math.inf)
    chains = 4000
    gen = np.random.default_rng(11)
    sx = np.full((chains, 1, 1), 0.5)
    amat = np.full((chains, 1, 1), a)
    for _ in range(40):
        sx = prior.step(amat, n, sx, gen)
    draws = sx[:, 0, 0]
    if kind == "bounded":
        law = stats.invgamma(n / 2 - 1, scale=a / 2)
        assert draws.max() <= b2
        cdf = lambda t: law.cdf(np.minimum(t, b2)) / law.cdf(b2)  # noqa: E731
        assert law.cdf(b2) < 0.9  # the truncation matters for this test
    else:
        cdf = stats.invgamma((3.0 + n) / 2, scale=(b2 / 3 + a) / 2).cdf
    assert stats.kstest(draws, cdf).pvalue > 1e-3


def test_bounded_feature_prior_density_and_bounds() -> None:
    """The bounded prior's log ratio to the IW prior equals log prod_j Sigma_jj^(-(d-1)/2)
    minus the IW log density (differences between two covariances, so constants cancel);
    it is -inf outside the variance and trace bounds, and the step never leaves them."""
    from scipy import stats

    from dpbayes.release.ssp.noise_aware import FeatureCovariancePrior

    d, nu0 = 3, 5.0
    psi0 = np.eye(d) / 3
    prior = FeatureCovariancePrior("bounded", nu0, psi0, 1.0, 1.2)
    s1 = np.array([[0.3, 0.1, 0.0], [0.1, 0.4, -0.05], [0.0, -0.05, 0.2]])
    s2 = np.array([[0.5, -0.2, 0.1], [-0.2, 0.3, 0.0], [0.1, 0.0, 0.35]])

    def direct(s: np.ndarray) -> float:
        bounded = -0.5 * (d - 1) * np.log(np.diag(s)).sum()
        return float(bounded - stats.invwishart(df=nu0, scale=psi0).logpdf(s))

    got = prior.log_ratio(np.stack([s1, s2]))
    assert got[0] - got[1] == pytest.approx(direct(s1) - direct(s2), rel=1e-10)
    wide = np.diag([1.1, 0.05, 0.05])  # a variance above B^2 = 1
    big_trace = np.diag([0.5, 0.5, 0.4])  # trace 1.4 > 1.2
    assert np.all(np.isneginf(prior.log_ratio(np.stack([wide, big_trace]))))
    gen = np.random.default_rng(5)
    sx = np.broadcast_to(0.2 * np.eye(d), (200, d, d)).copy()
    amat = np.broadcast_to(np.diag([60.0, 40.0, 30.0]), (200, d, d))  # pulls Sigma beyond
    for _ in range(20):
        sx = prior.step(amat, 40, sx, gen)
        diag = np.diagonal(sx, axis1=1, axis2=2)
        assert np.all(diag <= 1.0) and np.all(diag.sum(axis=1) <= 1.2 + 1e-12)


def test_feature_prior_and_moves_are_validated_and_the_plain_gibbs_sampler_runs() -> None:
    rel = one_release()
    with pytest.raises(ValueError, match="feature_prior"):
        rel.noise_aware_posterior(feature_prior="wishart")
    with pytest.raises(TypeError, match="collapsed_moves"):
        rel.noise_aware_posterior(collapsed_moves="no")
    with pytest.raises(TypeError, match="noncentred_moves"):
        rel.noise_aware_posterior(noncentred_moves=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        plain = rel.noise_aware_posterior(
            rng=1,
            iterations=2000,
            feature_prior="inverse-wishart",
            collapsed_moves=False,
            noncentred_moves=False,
        )
        full = rel.noise_aware_posterior(rng=1, iterations=2000)
    # two samplers of posteriors that differ only in the prior of Sigma_x: close means
    assert np.all(np.abs(plain.mean() - full.mean()) < 0.5 * full.std())


def test_collapsed_likelihood_is_the_gaussian_of_the_release() -> None:
    """Step 0's target: log N(s~; n vech C, n K(C) + diag omega) with K from Isserlis'
    theorem, against scipy's multivariate normal (up to its constant -p/2 log 2 pi)."""
    from scipy import stats

    from dpbayes.release.ssp.noise_aware import (
        _collapsed_loglik,
        _joint_covariance,
        _Observed,
    )

    sx = np.array([[[0.3, 0.05], [0.05, 0.2]], [[0.5, -0.1], [-0.1, 0.4]]])
    w = np.array([[0.4, -0.7], [1.0, 0.2]])
    c = _joint_covariance(sx, w, 0.25)
    assert np.allclose(c[0, :2, 2], sx[0] @ w[0])
    assert c[1, 2, 2] == pytest.approx(w[1] @ sx[1] @ w[1] + 0.25)
    n, rows, cols = 150, *np.triu_indices(3)
    p = rows.size
    omega = np.stack([np.linspace(3.0, 40.0, p), np.full(p, 9.0)])
    s_obs = np.linspace(-10.0, 60.0, p)
    obs = _Observed(n, s_obs, rows, cols)
    got, k_all, chol = _collapsed_loglik(c, obs, omega)
    for i in range(2):
        pairs = list(zip(rows, cols, strict=True))
        ci = c[i]
        k = np.array(
            [[ci[a, e] * ci[b, f] + ci[a, f] * ci[b, e] for e, f in pairs] for a, b in pairs]
        )
        law = stats.multivariate_normal(n * c[i][rows, cols], n * k + np.diag(omega[i]))
        assert got[i] == pytest.approx(law.logpdf(s_obs) + 0.5 * p * math.log(2 * math.pi))
        assert np.allclose(k_all[i], n * k)
        assert np.allclose(chol[i] @ chol[i].T, n * k + np.diag(omega[i]))


def test_linear_posterior_is_the_prior_when_the_noise_swamps_the_statistics() -> None:
    """At eps = 0.02 (noise sd ~ 1000 on statistics of ~ 50) the data say nothing about w,
    so its posterior is its prior N(0, I / 4): sd 0.5. The Gibbs steps alone mix slowly
    here (w and the statistics nearly determine each other; without steps 0 and 1b these
    seeds give R-hat 1.20-1.32 and sds 0.45-0.50, with step 0 alone 1.03-1.04); step 1b
    (the default) does not condition on the statistics and gives R-hat 1.002-1.005
    (1.008-1.009 with one sweep of its moves per step)."""
    model = linear_model()
    g = np.random.default_rng(0)
    x = np.clip(g.normal(0, 0.5, (200, 2)), -1, 1)
    y = np.clip(x @ np.array([0.3, -0.4]) + g.normal(0, 0.5, 200), -2, 2)
    sds, rhat = [], []
    for s in range(3):
        rel = dpb.release(model, (x, y), mechanism="ssp", epsilon=0.02, rng=s)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            post = rel.noise_aware_posterior(rng=s)
        sds.append(post.std())
        rhat.append(max(post.diagnostics.rhat))
    assert float(np.mean(sds)) == pytest.approx(0.5, abs=0.04)
    assert max(rhat) < 1.02


def _noncentred_fixture(d: int, kind: str, nc: int):  # type: ignore[no-untyped-def]
    from dpbayes.release.ssp.noise_aware import (
        FeatureCovariancePrior,
        _NoncentredMoves,
        _Observed,
        _Setting,
    )

    m = d + 1
    rows, cols = np.triu_indices(m)
    p = rows.size
    s_obs = np.linspace(5.0, 20.0, p)
    prior = FeatureCovariancePrior(kind, d + 2.0, np.eye(d) / 3.0, 1.0, float(d))
    setting = _Setting(d, 4.0, 0.25, _Observed(50, s_obs, rows, cols), prior, 0)
    moves = _NoncentredMoves(setting, 0.3)
    gen = np.random.default_rng(7)
    g = gen.standard_normal((m, m))
    g = np.broadcast_to((g + g.T) / 2, (nc, m, m)).copy()
    omega = np.broadcast_to(np.linspace(9.0, 30.0, p), (nc, p)).copy()
    return moves, g, omega, s_obs, gen


def _run_kernel(moves, theta, sx, g, omega, gen, scales):  # type: ignore[no-untyped-def]
    from dpbayes.release.ssp.kernels import noncentred_moves

    nc, d = theta.shape
    q = scales.size
    out = np.empty_like(omega)
    prior = moves.cov_prior
    noncentred_moves(
        theta, sx, g, omega, moves.obs.s_obs, moves.obs.pos, float(moves.obs.n), moves.sig,
        moves.lam, 0 if prior.kind == "bounded" else 1, prior.var_max, prior.tr_max,
        prior.nu0, prior.psi0, scales, gen.standard_normal((nc, d)), gen.random(nc),
        gen.standard_normal((nc, q)), gen.random((nc, q)), np.zeros(q), out.copy(), out,
    )  # fmt: skip
    return out


def test_noncentred_statistics_are_n_c_plus_sqrt_n_l_g_l() -> None:
    """Step 1b keeps G and returns s = vech(n C + sqrt(n) L G L') at the new (w, Sigma_x),
    L = chol(C); the standardisation of s at the old state gives back that G."""
    from dpbayes.release.ssp.noise_aware import _joint_covariance

    d, nc = 3, 5
    moves, g, omega, _, gen = _noncentred_fixture(d, "bounded", nc)
    theta = gen.normal(0, 0.5, (nc, d))
    a = gen.normal(0, 0.3, (nc, d, d))
    sx = a @ np.swapaxes(a, 1, 2) / d + 0.1 * np.eye(d)
    c = _joint_covariance(sx, theta, 0.25)
    rows, cols, n = moves.obs.rows, moves.obs.cols, moves.obs.n

    def stats_of(c_: np.ndarray) -> np.ndarray:
        lc = np.linalg.cholesky(c_)
        return (n * c_ + math.sqrt(n) * lc @ g @ np.swapaxes(lc, 1, 2))[:, rows, cols]

    from dpbayes.release.ssp.kernels import standardise

    stats0 = stats_of(c)
    for i in range(nc):
        got = np.empty((d + 1, d + 1))
        standardise(c[i], stats0[i], rows, cols, float(n), np.linalg.cholesky(c[i]), got)
        assert np.allclose(got, g[i], atol=1e-10)
    for _ in range(5):  # several sweeps, so accepted and rejected moves of every kind
        out = _run_kernel(moves, theta, sx, g, omega, gen, np.full(moves.log_scale.size, 0.3))
        assert np.allclose(out, stats_of(_joint_covariance(sx, theta, 0.25)), rtol=1e-10)


@pytest.mark.parametrize("kind", ["bounded", "inverse-wishart"])
def test_noncentred_moves_draw_their_target_at_d1(kind: str) -> None:
    """At d = 1 the target of step 1b, p(w) p(Sigma) N(s~; s(w, Sigma, G), diag omega)
    for fixed G, is a density on a plane: 3,000 independent chains after 60 sweeps
    against its marginals on a grid (Kolmogorov-Smirnov on w and on Sigma)."""
    from scipy import stats

    moves, g, omega, s_obs, gen = _noncentred_fixture(1, kind, 3000)
    n, sig, lam = moves.obs.n, moves.sig, moves.lam
    theta = np.zeros((3000, 1))
    sx = np.full((3000, 1, 1), 0.3)
    for _ in range(60):
        _run_kernel(moves, theta, sx, g, omega, gen, np.array([0.15, 0.3]))
    ws = np.linspace(-3.0, 3.0, 1201)
    vs = np.linspace(1e-4, 1.0 if kind == "bounded" else 6.0, 1500)
    w_, v_ = np.meshgrid(ws, vs, indexing="ij")
    g11, g12, g22 = g[0, 0, 0], g[0, 0, 1], g[0, 1, 1]
    rn, sv = math.sqrt(n), np.sqrt(v_)
    sxx = n * v_ + rn * v_ * g11
    sxy = sxx * w_ + rn * sig * sv * g12
    syy = w_ * w_ * sxx + 2 * rn * sig * w_ * sv * g12 + n * sig**2 + rn * sig**2 * g22
    om = omega[0]
    logt = -0.5 * lam * w_**2 - 0.5 * (
        (s_obs[0] - sxx) ** 2 / om[0]
        + (s_obs[1] - sxy) ** 2 / om[1]
        + (s_obs[2] - syy) ** 2 / om[2]
    )
    if kind == "inverse-wishart":
        logt += -0.5 * (moves.cov_prior.nu0 + 2) * np.log(v_) - 0.5 / (3.0 * v_)
    dens = np.exp(logt - logt.max())
    for draws, grid, marg in ((theta[:, 0], ws, dens.sum(1)), (sx[:, 0, 0], vs, dens.sum(0))):
        cdf = np.cumsum(marg) / marg.sum()
        assert stats.kstest(draws, lambda t, gr=grid, cd=cdf: np.interp(t, gr, cd)).pvalue > 1e-3


def test_compiled_prior_density_is_the_feature_prior() -> None:
    """The kernel's log p(Sigma_x) differs from FeatureCovariancePrior.log_density by a
    constant, for both priors, and is -inf where the bounded prior is."""
    from dpbayes.release.ssp.kernels import _log_prior_sigma
    from dpbayes.release.ssp.noise_aware import FeatureCovariancePrior

    gen = np.random.default_rng(3)
    d = 4
    a = gen.normal(0, 0.3, (8, d, d))
    sx = a @ np.swapaxes(a, 1, 2) + 0.05 * np.eye(d)
    sx[0] *= 4.0  # outside the bounds
    for kind, code in (("bounded", 0), ("inverse-wishart", 1)):
        prior = FeatureCovariancePrior(kind, d + 2.0, np.diag([0.2, 0.3, 0.4, 0.5]), 1.0, 2.5)
        ref = prior.log_density(sx)
        got = np.array(
            [
                _log_prior_sigma(s, np.linalg.cholesky(s), code, 1.0, 2.5, prior.nu0, prior.psi0)
                for s in sx
            ]
        )
        finite = np.isfinite(ref)
        assert np.array_equal(finite, np.isfinite(got)) and 3 <= finite.sum() < 8 + (code == 1)
        assert np.allclose(got[finite] - ref[finite], got[finite][0] - ref[finite][0])


def test_compiled_weights_step_and_psd_projection_are_the_closed_forms() -> None:
    """Steps 2 and the projection inside the compiled Gibbs step: psd_into clips the
    eigenvalues of the symmetric part at 0; weights_draw returns the conjugate mean
    P^-1 X'y / sig2, P^-1 (P = lam I + X'X / sig2) and the draw mean + L^-T z, L L' = P."""
    from dpbayes.release.ssp.kernels import psd_into, weights_draw

    g = np.random.default_rng(11)
    d = 4
    raw = g.normal(0, 1, (d, d))
    a = np.empty((d, d))
    psd_into(raw, a)
    vals, vecs = np.linalg.eigh((raw + raw.T) / 2)
    assert np.any(vals < 0)  # the projection has something to do
    assert np.allclose(a, (vecs * np.maximum(vals, 0)) @ vecs.T, atol=1e-12)
    sxy, z = g.normal(0, 2, d), g.normal(0, 1, d)
    w, mean, cov = np.empty(d), np.empty(d), np.empty((d, d))
    weights_draw(a, sxy, 3.0, 0.25, z, w, mean, cov)
    prec = 3.0 * np.eye(d) + a / 0.25
    assert np.allclose(cov, np.linalg.inv(prec), atol=1e-12)
    assert np.allclose(mean, np.linalg.solve(prec, sxy / 0.25), atol=1e-12)
    assert np.allclose(w, mean + np.linalg.solve(np.linalg.cholesky(prec).T, z), atol=1e-12)


def test_inverse_gaussian_step_is_numpys_wald_without_its_cancellation() -> None:
    """Step 4's compiled inverse-Gaussian draw takes numpy's ``Generator.wald`` algorithm
    (one normal, then one uniform): from the same stream it returns numpy's draw where
    numpy's formula does not cancel, and the 50-digit value of the same formula where
    it does (mean * z^2 far above the shape: tiny noise residuals); a KS test against
    scipy's law at a moderate setting."""
    import mpmath
    from scipy import stats

    from dpbayes.release.ssp.kernels import _inverse_gaussian

    for seed in range(200):
        mean, shape = 10 ** (seed % 7 - 3.0), 10 ** (seed % 5 - 2.0)
        want = np.random.default_rng(seed).wald(mean, shape)
        gen = np.random.default_rng(seed)
        z = gen.standard_normal()
        got = _inverse_gaussian(mean, shape, z, gen.random())
        assert got == pytest.approx(want, rel=1e-8)
    mpmath.mp.dps = 50
    for mean, shape, z in [(1e10, 1e-4, 1.3), (1e6, 1e-6, -0.7), (3e12, 2.0, 2.1)]:
        m, s, zz = mpmath.mpf(mean), mpmath.mpf(shape), mpmath.mpf(z)
        y = m * zz * zz
        x = m + m / (2 * s) * (y - mpmath.sqrt(4 * s * y + y * y))
        assert _inverse_gaussian(mean, shape, z, 0.0) == pytest.approx(float(x), rel=1e-13)
        assert _inverse_gaussian(mean, shape, z, 1.0) == pytest.approx(float(m * m / x), rel=1e-13)
    gen = np.random.default_rng(3)
    draws = [_inverse_gaussian(2.0, 0.5, gen.standard_normal(), gen.random()) for _ in range(4000)]
    assert stats.kstest(draws, stats.invgauss(2.0 / 0.5, scale=0.5).cdf).pvalue > 1e-3


def test_a_compiled_block_of_steps_is_those_steps_one_by_one() -> None:
    """``gibbs_block`` runs k Gibbs steps of every chain in one call; with the same random
    inputs it ends in the same state (w, Sigma_x, omega), writes the same per-step
    records and counts the same acceptances as k calls of one step each (Laplace noise,
    so step 4 runs; two non-centred sweeps)."""
    from dpbayes.release.ssp.kernels import gibbs_block

    d, nc, k, sweeps, n = 2, 3, 5, 2, 60.0
    m = d + 1
    rows, cols = np.triu_indices(m)
    p, q = rows.size, d * (d + 1) // 2 + d
    pos = np.zeros((m, m), dtype=np.int64)
    pos[rows, cols] = pos[cols, rows] = np.arange(p)
    gen = np.random.default_rng(4)
    s_obs = n * np.array([0.3, 0.05, 0.1, 0.25, -0.05, 0.4]) + gen.normal(0, 2.0, p)
    lap_b = np.full(p, 2.0)
    psi0 = np.eye(d) / 3
    draws = (
        gen.standard_normal((k, nc, p)), gen.standard_normal((k, nc, p)),
        gen.standard_normal((k, sweeps, nc, d)), gen.random((k, sweeps, nc)),
        gen.standard_normal((k, sweeps, nc, q)), gen.random((k, sweeps, nc, q)),
        gen.standard_normal((k, nc, d)), gen.standard_normal((k, nc, d, d)),
        gen.chisquare(n + d + 2 - np.arange(d), size=(k, nc, d)), gen.random((k, nc)),
        gen.standard_normal((k, nc, p)), gen.random((k, nc, p)),
    )  # fmt: skip

    def start() -> list[np.ndarray]:
        return [np.full((nc, d), 0.2), np.broadcast_to(0.3 * np.eye(d), (nc, d, d)).copy(),
                np.full((nc, p), 8.0)]  # fmt: skip

    def outputs(steps: int) -> list[np.ndarray]:
        return [np.zeros(q), np.empty((nc, steps, d)), np.empty((nc, steps, d)),
                np.empty((nc, steps, d, d)), np.empty((nc, steps))]  # fmt: skip

    def run(state: list[np.ndarray], rnd: tuple[np.ndarray, ...], out: list[np.ndarray]) -> None:
        gibbs_block(
            *state, s_obs, rows, cols, pos, n, 0.25, 1.0, sweeps, 0, 1.0, 2.0, d + 2.0, psi0,
            np.full(q, 0.05), lap_b, *rnd, *out,
        )  # fmt: skip

    block_state, block_out = start(), outputs(k)
    run(block_state, draws, block_out)
    one_state, acc = start(), np.zeros(q)
    for t in range(k):
        out = outputs(1)
        run(one_state, tuple(x[t : t + 1] for x in draws), out)
        acc += out[0]
        for got, want in zip(out[1:], block_out[1:], strict=True):
            assert np.array_equal(got[:, 0], want[:, t])
    for got, want in zip(one_state, block_state, strict=True):
        assert np.array_equal(got, want)
    assert np.array_equal(acc, block_out[0]) and acc.sum() > 0
    assert not np.array_equal(block_state[2], start()[2])  # step 4 moved omega


def test_inverse_wishart_step_draws_its_conditional_at_d3() -> None:
    """Step 3 under the IW prior at d = 3 with correlated features: the conditional is
    IW(nu, Psi), nu = nu0 + n, Psi = psi0 + X'X, so for any fixed v,
    v' X^-1 v / (v' Psi^-1 v) ~ chi-square(nu). 4000 chains, one step, three directions
    (KS). A factor of Psi^-1 in the wrong orientation (L^-1 L^-T for L L' = Psi) fails."""
    from scipy import stats

    from dpbayes.release.ssp.noise_aware import FeatureCovariancePrior

    d, n, nu0 = 3, 12, 5.0
    psi0 = np.array([[0.5, 0.2, 0.0], [0.2, 0.4, 0.1], [0.0, 0.1, 0.3]])
    a = np.array([[9.0, 6.0, -2.0], [6.0, 8.0, -3.0], [-2.0, -3.0, 4.0]])
    prior = FeatureCovariancePrior("inverse-wishart", nu0, psi0, 1.0, math.inf)
    chains = 4000
    gen = np.random.default_rng(21)
    sx = prior.step(
        np.broadcast_to(a, (chains, d, d)), n, np.broadcast_to(np.eye(d), (chains, d, d)), gen
    )
    assert np.array_equal(sx, np.swapaxes(sx, 1, 2))
    psi_inv = np.linalg.inv(psi0 + a)
    x_inv = np.linalg.inv(sx)
    for v in (np.array([1.0, 0, 0]), np.array([0, 0, 1.0]), np.array([1.0, -1.0, 2.0])):
        ratio = np.einsum("i,bij,j->b", v, x_inv, v) / (v @ psi_inv @ v)
        assert stats.kstest(ratio, stats.chi2(nu0 + n).cdf).pvalue > 1e-3, v
