"""PrivateNaiveBayes reads each record's class label and binned features from its own
value: one added record never changes how the other records are coded (add/remove
neighbours' count tables differ by at most the stated L1 sensitivity, and one record
never turns the other records' release into a refusal)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dpbayes.estimators import PrivateNaiveBayes


def _counts(X, y, **params) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The exact count tables of the fit (the statistic the releases add noise to):
    the posterior's Dirichlet parameters less the prior, as one vector."""
    est = PrivateNaiveBayes(mechanism="none", alpha=1.0, **params).fit(X, y)
    return np.concatenate([a.ravel() - 1.0 for a in est.posterior_.alphas.values()])


def _sensitivity(X, y, **params) -> float:  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = PrivateNaiveBayes(epsilon=1.0, neighbours="add-remove", random_state=0, **params).fit(
            X, y
        )
    assert est.guarantee_ is not None and est.guarantee_.sensitivity_norm == "L1"
    return float(est.guarantee_.sensitivity)


@pytest.mark.parametrize("classes", [[0, 1], [False, True]])
def test_a_boolean_label_is_its_class_whatever_the_other_labels_are(classes) -> None:  # type: ignore[no-untyped-def]
    """``True`` is the class 1 (Python equality, as for the features' categories). pandas'
    get_indexer typed the labels from all of them: among booleans ``True`` was no class
    of [0, 1] (refused), once one record held ``1`` it was (released)."""
    x = [[0], [1], [0], [1]]
    for y, extra in (([True, False, True, False], 1), ([1, 0, 1, 0], True)):
        params = {"classes": classes, "categories": [0, 1]}
        d = _counts(x, y, **params)
        d2 = _counts([*x, [0]], [*y, extra], **params)
        assert np.abs(d2 - d).sum() <= _sensitivity(x, y, **params)


def test_binned_features_of_a_list_are_read_value_by_value() -> None:
    """numpy made text of a list mixing numbers and strings and then parsed that text:
    ``np.float32(0.1)`` read as ``"0.1"`` moved to the bin below the edge 0.1f (50 records
    moved: L1 100 against 2), ``True`` read as ``"True"`` refused the fit."""
    edge = float(np.float32(0.1))
    params = {"classes": [0, 1], "bin_edges": [edge]}
    x = [[np.float32(0.1)]] * 50 + [[0.0]] * 50
    y = [0, 1] * 50
    d = _counts(x, y, **params)
    d2 = _counts([*x, ["5"]], [*y, 1], **params)
    sensitivity = _sensitivity(x, y, **params)
    assert sensitivity == 2.0
    assert np.abs(d2 - d).sum() <= sensitivity
    x = [[True], [1.0], [0.0]]
    d = _counts(x, [0, 1, 0], **params)
    d2 = _counts([*x, ["2"]], [0, 1, 0, 1], **params)
    assert np.abs(d2 - d).sum() <= sensitivity


def test_text_features_on_bins_follow_the_one_text_rule() -> None:
    """A text field on bins is the number it spells (``data.text_values``): true/false
    as 1/0, spaces ignored; text that spells no number is refused without quoting it."""
    est = PrivateNaiveBayes(mechanism="none", classes=[0, 1], bin_edges=[0.5])
    est.fit([[" TRUE "], ["-3"], [1], [False]], [0, 1, 1, 0])
    np.testing.assert_array_equal(
        est._encode([[" TRUE "], ["-3"], [1], [False]])["x0"], [1, 0, 1, 0]
    )
    with pytest.raises(ValueError, match="X must be numeric") as info:
        est.fit([["secret"], [1]], [0, 1])
    assert "secret" not in str(info.value)
