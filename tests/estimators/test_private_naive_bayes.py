"""PrivateNaiveBayes: scikit-learn interface, accuracy, errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import check_estimator

from dpbayes.estimators import PrivateNaiveBayes


def binary_data(n: int = 1500, d: int = 6, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    y = g.integers(0, 2, n)
    p = np.where(y[:, None] == 1, 0.75, 0.3)
    return (g.random((n, d)) < p).astype(int), y


def test_sklearn_check_estimator() -> None:
    """Every applicable scikit-learn check passes (array-API input is skipped by sklearn)."""
    est = PrivateNaiveBayes(epsilon=50.0, bin_edges=np.linspace(-3, 3, 7), random_state=0)
    # binned on edges, +-inf falls in the end bins (the bins cover the whole line; a refusal
    # would tell inf from 1e308): scikit-learn's check wants inf refused. NaN is refused
    # (test_infinities_fall_in_the_end_bins_and_nan_is_refused)
    expected = {"check_estimators_nan_inf": "+-inf is binned into the end bins"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(est, on_fail=None, on_skip=None, expected_failed_checks=expected)
    failed = [(r["check_name"], str(r["exception"])) for r in results if r["status"] == "failed"]
    assert not failed
    assert sum(r["status"] == "passed" for r in results) >= 50


def test_get_params_and_clone() -> None:
    est = PrivateNaiveBayes(epsilon=2.0, mechanism="fourier", categories=[0, 1])
    assert est.get_params()["epsilon"] == 2.0
    c = clone(est).set_params(epsilon=3.0)
    assert c.epsilon == 3.0 and est.epsilon == 2.0


@pytest.mark.parametrize("mechanism", ["laplace", "fourier", "sampling", "map"])
def test_private_accuracy_close_to_exact_at_large_epsilon(mechanism: str) -> None:
    x, y = binary_data()
    xt, yt = binary_data(2000, seed=1)
    exact = PrivateNaiveBayes(mechanism="none", categories=[0, 1]).fit(x, y).score(xt, yt)
    est = PrivateNaiveBayes(
        epsilon=200.0, mechanism=mechanism, categories=[0, 1], classes=[0, 1], random_state=0
    ).fit(x, y)
    # same Bayes rule up to noise: accuracies within 2 binomial standard errors + 1%
    assert est.score(xt, yt) >= exact - 2 * np.sqrt(0.25 / 2000) - 0.01
    assert est.guarantee_ is not None and est.guarantee_.epsilon <= 200.0
    proba = est.predict_proba(xt)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert est.guarantee_.simulation


def test_exact_model_is_bayes_rule() -> None:
    x, y = binary_data(300)
    est = PrivateNaiveBayes(mechanism="none", categories=[0, 1], alpha=1.0).fit(x, y)
    # hand computation for one record
    i = 0
    logp = []
    for c in (0, 1):
        m = y == c
        lp = np.log((m.sum() + 1) / (len(y) + 2))
        for j in range(x.shape[1]):
            lp += np.log(((x[m, j] == x[i, j]).sum() + 1) / (m.sum() + 2))
        logp.append(lp)
    p = np.exp(logp - np.max(logp))
    np.testing.assert_allclose(est.predict_proba(x[:1])[0], p / p.sum(), rtol=1e-10)
    assert est.guarantee_ is None


def test_string_classes_and_categories() -> None:
    x = np.array([["a", "u"], ["b", "v"], ["a", "v"], ["b", "u"]] * 10, dtype=object)
    y = np.array(["yes", "no", "yes", "no"] * 10)
    est = PrivateNaiveBayes(
        epsilon=5.0, categories=[["a", "b"], ["u", "v"]], classes=["no", "yes"], random_state=1
    ).fit(x, y)
    assert set(est.predict(x)) <= {"no", "yes"}
    assert not est.classes_from_data_


def test_errors() -> None:
    x, y = binary_data(100)
    est = PrivateNaiveBayes(epsilon=1.0, categories=[0, 1], classes=[0, 1], random_state=0).fit(
        x, y
    )
    bad = x[:3].copy()
    bad[0, 2] = 7
    with pytest.raises(ValueError, match="'x2' has a value that is not a category"):
        est.predict(bad)
    with pytest.raises(ValueError, match="categories or bin_edges"):
        PrivateNaiveBayes(epsilon=1.0).fit(x, y)
    for eps in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="epsilon"):
            PrivateNaiveBayes(epsilon=eps, categories=[0, 1]).fit(x, y)
    with pytest.raises(ValueError, match="mechanism must be one of"):
        PrivateNaiveBayes(mechanism="magic", categories=[0, 1]).fit(x, y)
    with pytest.raises(ValueError, match="binary variables"):
        PrivateNaiveBayes(mechanism="fourier", categories=[0, 1, 2]).fit(x, y)
    with pytest.raises(ValueError, match="not in classes"):
        PrivateNaiveBayes(categories=[0, 1], classes=[0, 5]).fit(x, y)
    with pytest.raises(ValueError, match="strictly increasing"):
        PrivateNaiveBayes(bin_edges=[1.0, 0.0]).fit(x.astype(float), y)
    with pytest.raises(ValueError, match="expecting 6 features"):
        est.predict(x[:, :3])


def test_bins_are_data_independent() -> None:
    """Binning uses only the given edges: the fitted model's categories do not see the data."""
    x, y = binary_data(200)
    xf = x + np.random.default_rng(0).normal(0, 0.1, x.shape)
    est = PrivateNaiveBayes(epsilon=2.0, bin_edges=[0.5], classes=[0, 1], random_state=0).fit(xf, y)
    assert est.model_.variables["x0"] == (0, 1)
    assert est.score(xf, y) > 0.7


def test_works_without_scikit_learn() -> None:
    """With scikit-learn unavailable the estimators fall back to dpbayes' own base classes."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['sklearn'] = None\n"
        "import numpy as np\n"
        "from dpbayes.estimators import PrivateNaiveBayes, PrivateBayesianLinearRegression\n"
        "x = np.array([[0, 1], [1, 1], [0, 0], [1, 0]] * 20); y = np.array([0, 1, 0, 1] * 20)\n"
        "m = PrivateNaiveBayes(epsilon=5.0, categories=[0, 1], random_state=0).fit(x, y)\n"
        "assert m.score(x, y) > 0.5 and m.get_params()['epsilon'] == 5.0\n"
        "assert m.set_params(epsilon=2.0).epsilon == 2.0\n"
        "r = PrivateBayesianLinearRegression(feature_bounds=(0, 1), label_bounds=(0, 1),\n"
        "                                    random_state=0).fit(x, y)\n"
        "assert np.isfinite(r.score(x, y))\n"
        "try:\n"
        "    PrivateNaiveBayes().predict(x)\n"
        "except ValueError as e:\n"
        "    assert 'not fitted' in str(e)\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_classes_read_from_data_warn_and_say_so_in_the_guarantee() -> None:
    """Issue 14, defect 6: a label held by one record is published in classes_, so reading
    the labels from y warns (PrivacyLeakWarning) and the guarantee states it."""
    from dpbayes.privacy import PrivacyLeakWarning

    x, y = binary_data(300)
    y = y.copy()
    y[0] = 7  # one record holds a rare label
    with pytest.warns(PrivacyLeakWarning, match="classes were not given"):
        est = PrivateNaiveBayes(epsilon=1.0, categories=[0, 1], random_state=0).fit(x, y)
    assert 7 in est.classes_.tolist() and est.classes_from_data_
    g = est.guarantee_
    assert g.details["classes_from_data"] is True
    assert "class labels" in g.details["not_protected"]
    assert "NOT protected: the set of class labels" in g.describe()
    assert est.release_.guarantee == g
    with warnings.catch_warnings():
        # public classes: no warning about them, nothing unprotected (the seed's own
        # warning, that this fit is a simulation, is another matter)
        warnings.filterwarnings("error", message="classes were not given")
        ok = PrivateNaiveBayes(
            epsilon=1.0, categories=[0, 1], classes=[0, 1, 7], random_state=0
        ).fit(x, y)
    assert "not_protected" not in ok.guarantee_.details
    assert "NOT protected" not in ok.guarantee_.describe()


def test_empty_data_are_fitted_under_add_remove_and_refused_under_substitution():
    """Under add/remove the empty data set neighbours every one-record data set, so the
    estimators release it like any other (a refusal would tell that the data are empty);
    under substitution n is public and scikit-learn's refusal stands. A label outside the
    public classes is refused without quoting it (it is data)."""
    from dpbayes.estimators import (
        PrivateBayesianLinearRegression,
        PrivateBayesianLogisticRegression,
    )

    estimators = [
        PrivateNaiveBayes(mechanism=m, classes=[0, 1], bin_edges=[[-1.0, 0.0, 1.0]] * 2)
        for m in ("laplace", "sampling", "map")
    ]
    estimators.append(PrivateBayesianLogisticRegression(feature_bounds=(-1, 1), classes=[0, 1]))
    estimators += [
        PrivateBayesianLinearRegression(mechanism=m, feature_bounds=(-1, 1), label_bounds=(-1, 1))
        for m in ("ssp", "sampling")
    ]
    empty, point = np.zeros((0, 2)), np.array([[0.2, 0.3]])
    for est in estimators:
        est.set_params(epsilon=1.0, random_state=0, neighbours="add-remove")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            assert est.fit(empty, np.zeros(0)).predict(point).shape == (1,)
        with pytest.raises(ValueError, match="0 sample"):
            clone(est).set_params(neighbours="substitute").fit(empty, np.zeros(0))
    for est in estimators[:4]:  # the classifiers
        with pytest.raises(ValueError, match="a label that is not in classes") as info:
            clone(est).fit(np.zeros((3, 2)), np.array([0, 1, 42]))
        assert "42" not in str(info.value)


def test_mixed_type_categories_and_classes_accept_each_declared_value() -> None:
    """Lists mixing numbers and strings keep their Python objects: a record's value is
    accepted exactly when it is declared, whatever the other records hold (numpy made
    text of [[0], [1], ["unknown"]], and "0" was refused against the declared 0)."""
    for x in ([[0], [1], [1]], [[0], [1], ["unknown"]], [["unknown"], [1], [0]]):
        for y in ([0, 1, 1], [0, 1, "a"], ["a", "a", 1]):
            est = PrivateNaiveBayes(
                epsilon=1.0, classes=[0, 1, "a"], categories=[0, 1, "unknown"], random_state=0
            ).fit(x, y)
            assert est.classes_.tolist() == [0, 1, "a"]
            assert est.predict([[0], ["unknown"], [1]]).shape == (3,)
    for x in ([[0], [1], ["1"]], [["0"], ["unknown"], [1]]):  # "1", "0" are not declared
        with pytest.raises(ValueError, match="'x0' has a value that is not a category"):
            PrivateNaiveBayes(
                epsilon=1.0, classes=[0, 1], categories=[0, 1, "unknown"], random_state=0
            ).fit(x, [0, 1, 1])
    with pytest.raises(ValueError, match="not in classes"):
        PrivateNaiveBayes(epsilon=1.0, classes=[0, 1, "a"], categories=[0, 1], random_state=0).fit(
            [[0], [1], [1]], [0, "1", "a"]
        )


def test_infinities_fall_in_the_end_bins_and_nan_is_refused() -> None:
    """The bins on edges cover the whole line: -inf and +inf fall in the end bins like
    -1e308 and 1e308 (refusing them told the two apart); NaN lies in no bin."""
    edges = [-1.0, 0.0, 1.0]
    est = PrivateNaiveBayes(epsilon=1.0, classes=[0, 1], bin_edges=edges, random_state=0)
    big = np.array([[-1e308], [1e308], [0.5]])
    inf = np.array([[-np.inf], [np.inf], [0.5]])
    assert est.fit(inf, [0, 1, 1]).guarantee_ is not None
    np.testing.assert_array_equal(est._encode(inf)["x0"], est._encode(big)["x0"])
    np.testing.assert_array_equal(est._encode(inf)["x0"], [0, 3, 2])
    assert est.predict_proba(inf).shape == (3, 2)
    with pytest.raises(ValueError, match="NaN"):
        clone(est).fit(np.array([[0.5], [np.nan], [0.5]]), [0, 1, 1])
    with pytest.raises(ValueError, match="NaN"):
        est.predict(np.array([[np.nan]]))


@pytest.mark.parametrize(
    ("params", "error", "message"),
    [
        ({"classes": [0, 0, 1]}, ValueError, "classes has repeated labels"),
        ({"classes": 1}, TypeError, "classes must be a flat sequence"),
        ({"classes": "ab"}, TypeError, "classes must be a flat sequence"),
        ({"categories": 1}, TypeError, "categories must be one list"),
        ({"categories": None, "bin_edges": 0.5}, TypeError, "bin_edges must be one list"),
        ({"categories": None, "bin_edges": [0.5, np.nan]}, ValueError, r"bin_edges\[0\] .*NaN"),
        ({"categories": None, "bin_edges": ["a"]}, TypeError, r"bin_edges\[0\] must be numbers"),
        ({"categories": None, "bin_edges": [0.5, np.inf, np.inf]}, ValueError, "increasing"),
        ({"mechanism": "sampling", "epsilon": 5000.0}, ValueError, "epsilon = 5000 is too large"),
        ({"mechanism": "sampling", "epsilon": 1e-300}, ValueError, "epsilon = 1e-300 is too small"),
    ],
)
def test_bad_arguments_are_refused_in_one_line_naming_them(
    params: dict[str, object], error: type[Exception], message: str
) -> None:
    x, y = binary_data(50, d=2)
    kwargs: dict[str, object] = {"epsilon": 1.0, "classes": [0, 1], "categories": [0, 1]}
    kwargs.update(params)
    with pytest.raises(error, match=message) as info:
        PrivateNaiveBayes(random_state=0, **kwargs).fit(x.astype(float), y)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)
