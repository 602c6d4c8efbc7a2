"""One posterior per group of a public grouping column, by parallel composition."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpbayes as dpb

COIN = dpb.models.BetaBernoulli(alpha=1, beta=1)


def frame() -> pd.DataFrame:
    g = np.random.default_rng(0)
    return pd.DataFrame(
        {"year": np.repeat([2019, 2020, 2021], [50, 80, 30]), "x": g.integers(0, 2, 160)}
    )


def test_one_posterior_per_group_and_one_charge_at_eps() -> None:
    df = frame()
    acc = dpb.Accountant(1.0, simulation=True)
    out = dpb.release(
        COIN,
        df,
        column="x",
        by="year",
        groups=[2019, 2020],
        mechanism="laplace",
        epsilon=0.5,
        rng=1,
        accountant=acc,
    )
    assert list(out) == [2019, 2020] and len(out) == 2
    assert out.guarantee.epsilon == 0.5 and acc.spent == (0.5, 0.0)  # parallel: max, not sum
    assert "parallel" in out.guarantee.mechanism
    for year, rel in out.items():
        assert rel.public["n"] == int((df.year == year).sum())
    table = out.summary()
    assert list(table.columns) == ["year", "mean", "lower", "upper", "naive mean"]
    assert (table["lower"] <= table["mean"]).all() and (table["mean"] <= table["upper"]).all()
    assert "2 groups" in repr(out) and out.to_dict()["format"] == "dpbayes-grouped-release"


def test_a_change_in_one_group_leaves_the_others_releases_unchanged() -> None:
    """Add/remove one record: only its group's data change (or none, if its group is not
    listed): with the same noise, every other group's release is identical."""
    df = frame()
    args = {"column": "x", "by": "year", "groups": [2019, 2020, 2021], "epsilon": 1.0}
    args |= {"mechanism": "geometric", "neighbours": "add-remove", "rng": 7}
    base = dpb.release(COIN, df, **args)
    extra = pd.concat([df, pd.DataFrame({"year": [2020], "x": [1]})], ignore_index=True)
    moved = dpb.release(COIN, extra, **args)
    assert moved[2019].released == base[2019].released
    assert moved[2021].released == base[2021].released
    unlisted = pd.concat([df, pd.DataFrame({"year": [1999], "x": [1]})], ignore_index=True)
    same = dpb.release(COIN, unlisted, **args)
    assert all(same[y].released == base[y].released for y in (2019, 2020, 2021))


def test_grouping_errors_are_one_line_and_spend_nothing() -> None:
    df = frame()
    acc = dpb.Accountant(1.0, simulation=True)
    common = {"column": "x", "mechanism": "laplace", "epsilon": 0.5, "rng": 1, "accountant": acc}
    with pytest.raises(ValueError, match="groups must list the public values of 'year'"):
        dpb.release(COIN, df, by="year", **common)
    with pytest.raises(ValueError, match="by must name a column"):
        dpb.release(COIN, df, by="month", groups=[1], **common)
    with pytest.raises(ValueError, match="groups needs by="):
        dpb.release(COIN, df, groups=[2019], **common)
    with pytest.raises(ValueError, match="distinct"):
        dpb.release(COIN, df, by="year", groups=[2019, 2019], **common)
    with pytest.raises(TypeError, match="DataFrame"):
        dpb.release(COIN, df.x.to_numpy(), by="year", groups=[2019], **common)
    with pytest.raises(dpb.privacy.BudgetExceeded):
        dpb.release(COIN, df, by="year", groups=[2019], **{**common, "epsilon": 2.0})
    assert acc.spent == (0.0, 0.0)


@pytest.mark.parametrize(
    ("model", "column", "mechanism", "delta"),
    [
        (COIN, "x", "laplace", 0.0),
        (COIN, "x", "gaussian", 1e-6),
        (dpb.models.NormalMean(lower=0.0, upper=1.0), "x", "laplace", 0.0),
        (dpb.models.BayesNet({"x": [0, 1]}), None, "sampling", 0.0),
    ],
)
def test_an_empty_listed_group_is_released_like_any_other(model, column, mechanism, delta):
    """Add/remove: a listed group with no rows is a neighbour of the same group with one
    row; it is released from zero statistics, never refused (a refusal before the noise
    would tell whether anyone is in the group)."""
    df = frame()
    args = {"by": "year", "groups": [2019, 1999], "mechanism": mechanism, "epsilon": 1.0}
    args |= {"delta": delta, "neighbours": "add-remove", "column": column}
    acc = dpb.Accountant(2.0, 1e-5, simulation=True)
    empty = dpb.release(model, df, rng=3, accountant=acc, **args)
    one = pd.concat([df, pd.DataFrame({"year": [1999], "x": [1]})], ignore_index=True)
    joined = dpb.release(model, one, rng=3, accountant=acc, **args)
    assert acc.spent == pytest.approx((2.0, 2 * delta))
    assert empty[2019].released == joined[2019].released  # the same noise, the same group
    assert empty[1999].mechanism == joined[1999].mechanism
    assert empty[1999].released != joined[1999].released  # the same noise, one more record
    assert empty.guarantee == joined.guarantee


def test_a_substitute_grouped_release_states_its_narrower_relation() -> None:
    """Parallel composition under substitution needs each record to keep its group (a
    record moved between groups changes two groups' public n): the guarantee says so, and
    a budget does not add it up with plain substitute releases."""
    from dpbayes.models import BetaBernoulli
    from dpbayes.privacy import Accountant

    df = pd.DataFrame({"y": [0, 1, 1, 0, 1, 1], "year": [1, 1, 2, 2, 2, 1]})
    acc = Accountant(5.0, simulation=True)
    g = dpb.release(BetaBernoulli(), df, column="y", by="year", groups=[1, 2],
                    mechanism="laplace", epsilon=1.0, accountant=acc, rng=1)  # fmt: skip
    assert "substitute one record within its 'year' group" in g.guarantee.describe()
    with pytest.raises(ValueError, match="do not add up"):
        dpb.release(BetaBernoulli(), df, column="y", mechanism="laplace", epsilon=1.0,
                    accountant=acc, rng=2)  # fmt: skip
    ar = dpb.release(BetaBernoulli(), df, column="y", by="year", groups=[1, 2],
                     mechanism="laplace", epsilon=1.0, neighbours="add-remove", rng=3)  # fmt: skip
    assert "within" not in ar.guarantee.describe()
