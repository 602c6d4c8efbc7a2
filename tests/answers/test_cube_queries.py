"""The count cube and linear queries as predicates (paper 000 §2.4)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpbayes.answers import Bins, Cube, Query


@pytest.fixture
def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "age": [25, 31, 35, 49, 50, 64, 70, 33, 31, 200, None],
            "smoker": ["yes", "no", "yes", "yes", "no", "no", "yes", "no", "yes", "no", "no"],
            "region": [1, 2, 1, 1, 2, 2, 1, 3, 3, 1, 2],
        }
    )


@pytest.fixture
def cube(frame: pd.DataFrame) -> Cube:
    return Cube.from_table(
        frame,
        {"age": Bins([0, 30, 50, 65, 120]), "smoker": ["yes", "no"], "region": [1, 2, 3]},
    )


def test_counts_match_pandas(frame: pd.DataFrame, cube: Cube) -> None:
    assert cube.shape == (4, 2, 3) and cube.n_cells == 24
    # age 200 is outside the bins and the NULL age is in no cell.
    assert cube.counts.sum() == 9
    binned = pd.cut(frame.age, [0, 30, 50, 65, 120], right=False, labels=False)
    for (a, s, r), n in (
        frame.assign(a=binned).dropna().groupby(["a", "smoker", "region"]).size().items()
    ):
        assert cube.counts[int(a), ["yes", "no"].index(s), r - 1] == n
    assert len(cube.cell_labels()) == 24
    assert cube.cell_labels()[0] == "age=[0, 30)|smoker=yes|region=1"


def test_predicates(cube: Cube) -> None:
    q = cube.query("age in [30, 50) and smoker = yes")
    assert cube.true_answer(q) == 3  # 35, 49, 31
    assert q.sensitivity == 1.0
    assert cube.true_answer(cube.query("age >= 50")) == 3
    assert cube.true_answer(cube.query("smoker != yes and region in {2, 3}")) == 4
    assert cube.true_answer(cube.query("region not in {1}")) == 5
    assert cube.true_answer(cube.query("region <= 1")) == 4
    assert cube.true_answer(cube.query("age = '[50, 65)'")) == 2
    assert cube.true_answer(cube.query("")) == 9
    assert cube.true_answer(cube.query("smoker = 'no' and age < 65")) == 4


def test_weighted_sum_like_the_tax_example(cube: Cube) -> None:
    # paper 000 §2.4.2: weight groups by the amount each pays.
    tax = cube.query(weights={"age": {"[30, 50)": 2.0, "[50, 65)": 4.0}})
    assert cube.true_answer(tax) == 2 * 5 + 4 * 2
    assert tax.sensitivity == 4.0  # Lemma 2.1
    combo = 2 * cube.query("smoker = yes") - cube.query("region = 1")
    assert isinstance(combo, Query)
    assert cube.true_answer(combo) == 2 * 5 - 4
    assert combo.sensitivity == 2.0
    fn = cube.query(weights={"region": lambda r: float(r)})
    assert cube.true_answer(fn) == 1 * 4 + 2 * 3 + 3 * 2


@pytest.mark.parametrize(
    ("where", "match"),
    [
        ("income = 3", "unknown attribute"),
        ("age < 40", "cuts the bin"),
        ("smoker = maybe", "not in the domain"),
        ("smoker = yes or region = 1", "'or' is not supported"),
        ("age in [30, 50", "unclosed"),
        ("smoker yes", "expected an operator"),
        ("smoker = yes and", "dangling"),
        ("smoker < yes", "categorical"),
        ("age in [50, 30)", "lower > upper"),
        ("region = \u0661", "ASCII digits"),  # float() reads an Arabic-Indic one as 1
    ],
)
def test_bad_predicates_are_refused(cube: Cube, where: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cube.query(where)


def test_bad_cubes_and_weights(frame: pd.DataFrame, cube: Cube) -> None:
    with pytest.raises(ValueError, match="not found"):
        Cube.from_table(frame, {"height": [1, 2]})
    with pytest.raises(ValueError, match="strictly increasing"):
        Bins([0, 10, 5])
    with pytest.raises(TypeError):
        Cube.from_table(frame, {"smoker": "yes"})
    with pytest.raises(ValueError, match="duplicate"):
        Cube.from_table(frame, {"smoker": ["yes", "yes"]})
    with pytest.raises(ValueError, match="unknown values"):
        cube.query(weights={"smoker": {"maybe": 1.0}})
    with pytest.raises(ValueError, match="unknown attribute"):
        cube.query(weights={"height": {"1": 1.0}})
    with pytest.raises(ValueError, match="selects no cell"):
        cube.query(weights={"smoker": {"yes": 0.0}})
    with pytest.raises(ValueError, match="shape"):
        Cube.from_counts({"a": [1, 2]}, [1, 2, 3])
    with pytest.raises(ValueError, match="non-negative"):
        Cube.from_counts({"a": [1, 2]}, [1, -2])


def test_bundled_randhie_cube() -> None:
    from dpbayes.data import load_bundled

    df = load_bundled("randhie")
    cube = Cube.from_table(
        df, {"health": ["excellent", "good", "fair", "poor"], "mdvis": Bins([0, 1, 4, math.inf])}
    )
    assert cube.counts.sum() == len(df)
    assert cube.true_answer(cube.query("health = poor")) == int((df.health == "poor").sum())
    assert cube.true_answer(cube.query("mdvis >= 4")) == int((df.mdvis >= 4).sum())
    assert np.all(cube.cell_vector() >= 0)
