"""Faults found by an attacker's review of the sufficient-statistics regressions, one test
each (dpbayes/release/ssp/PROOF.md)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpbayes.models.linear_regression import BayesianLinearRegression
from dpbayes.models.logistic_regression import BayesianLogisticRegression
from dpbayes.release.base import plan


def _linear(**kw):
    return BayesianLinearRegression(feature_bound=1.0, label_bound=1.0, clip="box", **kw)


@pytest.mark.parametrize("where", ["x", "y"])
@pytest.mark.parametrize("sign", [1, -1])
def test_an_integer_beyond_the_doubles_is_clipped_like_inf(where, sign):
    # PROOF §7: +-inf is not refused, the box clips it. The Python int 10**400 (one
    # record's value) raised OverflowError for the whole data set instead: a refusal
    # that hangs on one record, outside the guarantee.
    huge, inf = sign * 10**400, sign * np.inf
    x = [[0.5], [huge if where == "x" else 0.25]]
    y = [0.1, huge if where == "y" else 0.3]
    xi = [[0.5], [inf if where == "x" else 0.25]]
    yi = [0.1, inf if where == "y" else 0.3]
    model = _linear()
    got, want = model.statistics((x, y)), model.statistics((xi, yi))
    assert got.exact == want.exact
    np.testing.assert_array_equal(got.xtx, want.xtx)
    p = plan(model, (x, y), mechanism="ssp", epsilon=1.0)
    assert p.guarantee.epsilon == 1.0


def test_an_integer_beyond_the_doubles_in_a_frame_and_in_logistic_regression():
    frame = pd.DataFrame({"a": [0.5, -(10**400)], "y": [0.1, 0.2]})
    model = _linear(features=["a"], target="y")
    ref = pd.DataFrame({"a": [0.5, -np.inf], "y": [0.1, 0.2]})
    assert model.statistics(frame).exact == model.statistics(ref).exact
    logit = BayesianLogisticRegression(feature_bound=1.0)
    got = logit.statistics(([[10**400, 0.5], [0.1, 0.2]], [1, 0]))
    want = logit.statistics(([[np.inf, 0.5], [0.1, 0.2]], [1, 0]))
    assert got.exact == want.exact


def _fit_outcome(**kw):
    import warnings

    from dpbayes.estimators import PrivateBayesianLinearRegression

    x, y = kw.pop("X"), kw.pop("y")
    est = PrivateBayesianLinearRegression(mechanism="ssp", norm_bound=None, random_state=0, **kw)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
    except ValueError as exc:
        return str(exc).split(":")[0]
    return "released"


@pytest.mark.parametrize("which", ["feature", "label"])
def test_the_design_map_cannot_turn_one_record_into_a_refusal(which):
    # Public bounds two subnormals apart: (hi - lo) / 2 rounds to 0, so a record at lo
    # mapped to -inf (clipped to -1) but a record at hi to 0 / 0 = NaN, refused as a
    # "missing value": whether the fit was released told whether a record lay at hi.
    tight = (5e-324, 1e-323)
    lo_rec, hi_rec = [[tight[0]], [tight[0]]], [[tight[0]], [tight[1]]]
    if which == "feature":
        kw = {"feature_bounds": tight, "label_bounds": (0.0, 1.0), "y": [0.2, 0.5]}
        a, b = _fit_outcome(X=lo_rec, **kw), _fit_outcome(X=hi_rec, **kw)
    else:
        kw = {"feature_bounds": (0.0, 1.0), "label_bounds": tight, "X": [[0.2], [0.5]]}
        a = _fit_outcome(y=[tight[0], tight[0]], **kw)
        b = _fit_outcome(y=[tight[0], tight[1]], **kw)
    assert a == b  # the same outcome for both neighbours: the bounds' refusal
    assert a != "released"
