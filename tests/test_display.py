"""Notebook and terminal display: compact ``__repr__``, ``_repr_html_`` and ``summary()``."""

from __future__ import annotations

import warnings
from html import unescape

import numpy as np
import pandas as pd
import pytest

import dpbayes as dpb
from dpbayes import display
from dpbayes.models import Beta, Dirichlet
from dpbayes.models.bayes_net import BayesNet

MAX_REPR = 600  # characters: a repr fits on a screen


def _check_display(obj, *must_contain):
    text, html = repr(obj), obj._repr_html_()
    assert "object at 0x" not in text and "array(" not in text, text
    assert len(text) <= MAX_REPR, text
    assert html.startswith("<table") and html.endswith("</table>")
    for s in must_contain:
        assert s in text and s in unescape(html), (s, text)
    return text, html


def test_number_helpers_shorten():
    assert display.num(3.0) == "3" and display.num(0.000123456) == "0.0001235"
    short = display.nums(range(55))
    assert short.startswith("[0, 1, 2, 3, 4") and "(49 more)" in short and short.endswith("54]")
    assert display.nums([1, 2]) == "[1, 2]"
    assert display.num(float("nan")) == "nan" and display.num(float("inf")) == "inf"


def test_html_escapes_text():
    class Thing:
        def _display(self):
            return "<b>", [("a<", "x & y")]

    out = display.html(Thing())
    assert "<b>" not in out and "&lt;b&gt;" in out and "x &amp; y" in out


def test_accountant_shows_budget_and_ledger_frame(tmp_path):
    acc = dpb.Accountant(epsilon=2.0, delta=1e-6, path=tmp_path / "ledger.json")
    text, html = _check_display(acc, "remaining eps 2 of 2")
    assert "ledger" in text
    acc.spend(0.5, label="first")
    acc.spend(0.25, 1e-7, label="second")
    text, html = _check_display(acc, "remaining eps 1.25 of 2", "2 spend(s)")
    assert "second (eps 0.25)" in html
    frame = acc.spends_frame()
    assert list(frame.columns) == ["epsilon", "delta", "label", "scope", "time"]
    assert frame["epsilon"].tolist() == [0.5, 0.25] and frame["label"].tolist() == [
        "first",
        "second",
    ]
    assert str(frame["time"].dt.tz) == "UTC"
    assert dpb.Accountant(1.0).spends_frame().empty


def test_guarantee_repr_is_its_description():
    g = dpb.Guarantee(
        epsilon=1.0, delta=0.0, neighbours="substitute", mechanism="laplace", sensitivity=2.0
    )
    _text, html = _check_display(g, g.describe())
    assert "L1" in html and "simulation" not in html


def test_coin_noise_aware_posterior_is_compact_with_a_tidy_summary():
    df = pd.DataFrame({"x": [1] * 300 + [0] * 700})
    model = dpb.models.BetaBernoulli(alpha=1, beta=1)
    rel = dpb.release(model, df, column="x", mechanism="laplace", epsilon=0.2, rng=0)
    post = rel.noise_aware_posterior()
    assert post.weights.size > 6  # old repr printed every component's weight
    _text, _ = _check_display(post, "Beta components", "95% interval")
    table = post.summary(0.9)
    assert list(table.columns) == ["mean", "sd", "lower", "upper"] and len(table) == 1
    lo, hi = post.interval(0.9)
    assert table.loc["value", "mean"] == pytest.approx(post.mean())
    assert table.loc["value", "sd"] == pytest.approx(post.std())
    assert (table.loc["value", "lower"], table.loc["value", "upper"]) == pytest.approx((lo, hi))


def test_private_n_posterior_names_its_prior_on_n():
    df = pd.DataFrame({"c": [0] * 200 + [1] * 300 + [2] * 500})
    model = dpb.models.DirichletCategorical(alpha=[1, 1, 1], categories=[0, 1, 2])
    rel = dpb.release(
        model, df, column="c", mechanism="laplace", epsilon=1.0, neighbours="add-remove", rng=1
    )
    post = rel.noise_aware_posterior(n_prior=(1000, 50))
    _check_display(post, "prior on n", "omitted mass", "95% intervals")
    table = post.summary()
    assert list(table.index) == ["0", "1", "2"]
    np.testing.assert_allclose(table["mean"], post.mean())
    np.testing.assert_allclose(table[["lower", "upper"]], post.interval(0.95))


def test_distributions_keep_their_repr_and_gain_html_and_summary():
    b = Beta(2.0, 5.0)
    assert repr(b) == "Beta(a=2.0, b=5.0)"
    assert "Beta(a=2, b=5)" in b._repr_html_()
    d = Dirichlet(np.arange(1.0, 11.0))
    assert "(4 more)" in d._repr_html_()
    table = d.summary()
    assert len(table) == 10
    np.testing.assert_allclose(table["sd"], d.std())


def test_bayes_net_posteriors_show_structure_and_a_table_of_cpt_entries():
    data = pd.DataFrame({"A": [0, 1, 1, 0, 1, 1], "B": [0, 1, 1, 1, 0, 1]})
    model = BayesNet({"A": [0, 1], "B": [0, 1]}, [("A", "B")])
    exact = model.exact_posterior(data)
    _check_display(exact, "A->B", "CPT rows")
    table = exact.summary()
    # one row per CPT entry: A has 2, B has 2 rows of 2
    assert len(table) == 6 and set(table["node"]) == {"A", "B"}
    row = table[(table.node == "B") & (table.given == "A=1") & (table.value == 1)].iloc[0]
    assert row["mean"] == pytest.approx(exact.node("B", (1,)).mean()[1])
    rel = dpb.release(model, data, mechanism="laplace", epsilon=2.0, rng=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        post = rel.noise_aware_posterior(rng=7, iterations=400)
    _text, _ = _check_display(post, "method", "max R-hat", "mcmc")
    assert len(post.summary()) == 6
    diag = post.diagnostics.summary()
    assert list(diag.columns) == ["rhat", "ess"] and len(diag) == len(post.diagnostics.names)


def test_query_answers_display():
    from dpbayes.answers import History

    h = History(n_cells=4)
    h.add([1, 1, 0, 0], noisy_answer=52.3, epsilon=0.5)
    h.add([0, 1, 1, 0], noisy_answer=40.1, epsilon=0.5)
    post = h.posterior([1, 2, 1, 0])
    _check_display(post, "estimate")
    assert "95% interval" in post._repr_html_()


def test_engine_answer_display():
    from dpbayes.answers import Cube, QueryEngine

    df = pd.DataFrame({"a": [0, 1, 1, 0, 1] * 40})
    cube = Cube.from_table(df, {"a": [0, 1]})
    engine = QueryEngine(cube, accountant=dpb.Accountant(1.0, simulation=True), rng=0)
    ans = engine.ask("a = 1", half_width=30, confidence=0.9)
    text, html = _check_display(ans, "fresh")
    assert "guarantee" in html and "posterior" not in text


def test_nonparametric_fit_display():
    from dpbayes.nonparametric import ConvergenceWarning, DPMixture, LocalLaplace

    mech = LocalLaplace(epsilon=2.0, r=1.0)
    z = mech.privatize(np.linspace(-0.5, 0.5, 60), rng=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = DPMixture(mechanism=mech).fit(z, draws=40, warmup=10, chains=2, rng=2)
    _, html = _check_display(fit, "60")
    assert "2 chains x 40 draws" in html and "clusters" in html


def test_mcmc_posteriors_give_arviz_inference_data():
    arviz = pytest.importorskip("arviz")
    data = pd.DataFrame({"A": [0, 1, 1, 0, 1, 1], "B": [0, 1, 1, 1, 0, 1]})
    model = BayesNet({"A": [0, 1], "B": [0, 1]}, [("A", "B")])
    rel = dpb.release(model, data, mechanism="laplace", epsilon=2.0, rng=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        post = rel.noise_aware_posterior(rng=7, iterations=400)
    idata = post.to_inference_data()
    diag = post.diagnostics
    cpt = idata.posterior["cpt_B"]
    assert cpt.shape == (diag.chains, diag.draws, 2, 2) and cpt.dims[2:] == ("A", "B")
    # the draws' average is the posterior mean the object reports
    np.testing.assert_allclose(cpt.mean(("chain", "draw")).values, post.mean().cpts["B"])
    counts = idata.posterior["counts_A"].values
    assert np.all(counts >= 0) and np.all(counts.sum(axis=-1) == counts.sum(axis=-1)[0, 0])
    assert float(arviz.rhat(idata)["cpt_A"].max()) < 1.2
    exact = dpb.release(BayesNet({"A": [0, 1]}), data, mechanism="laplace", epsilon=1.0, rng=1)
    with pytest.raises(ValueError, match="exact"):
        exact.noise_aware_posterior().to_inference_data()


def test_regression_posterior_gives_arviz_inference_data():
    pytest.importorskip("arviz")
    from dpbayes.models import BayesianLinearRegression

    model = BayesianLinearRegression(
        noise_variance=0.25, feature_bound=1.0, label_bound=3.0, weight_bound=4.0
    )
    gen = np.random.default_rng(0)
    x = gen.normal(size=(60, 2)) / np.sqrt(2)
    y = x @ np.array([0.5, -0.3]) + 0.5 * gen.normal(size=60)
    rel = dpb.release(model, (x, y), mechanism="sampling", epsilon=5.0, rng=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        post = rel.noise_aware_posterior(rng=4, iterations=400)
    idata = post.to_inference_data()
    w = idata.posterior["w"]
    assert w.shape == (post.diagnostics.chains, post.diagnostics.draws, 2)
    np.testing.assert_allclose(idata.posterior["w_mean"].mean(("chain", "draw")), post.mean())
    _check_display(post, "max R-hat")
