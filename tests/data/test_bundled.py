"""The bundled RAND Health Insurance Experiment data."""

from __future__ import annotations

import numpy as np
import pytest

from dpbayes.data import BUNDLED_DESCRIPTION, Table, as_source, bundled_path, load_bundled

ORIGINAL = ["mdvis", "lncoins", "idp", "lpi", "fmde", "physlm", "disea", "hlthg", "hlthf", "hlthp"]


@pytest.fixture(scope="module")
def randhie():
    return load_bundled()


def test_shape_and_columns(randhie):
    assert randhie.shape == (20_190, 13)
    assert list(randhie.columns) == [*ORIGINAL, "health", "person", "year"]
    assert set(BUNDLED_DESCRIPTION) == set(randhie.columns)
    assert not randhie.isna().any().any()


def test_binary_columns_are_binary(randhie):
    for col in ("idp", "hlthg", "hlthf", "hlthp"):
        assert set(np.unique(randhie[col])) == {0, 1}, col
    assert (randhie[["hlthg", "hlthf", "hlthp"]].sum(axis=1) <= 1).all()
    assert (randhie["mdvis"] >= 0).all() and (randhie["mdvis"] % 1 == 0).all()
    physlm = randhie["physlm"]
    assert ((physlm >= 0) & (physlm <= 1)).all()
    assert int(((physlm > 0) & (physlm < 1)).sum()) == 1_052  # as distributed


def test_derived_health(randhie):
    h = randhie["health"]
    assert set(h) == {"excellent", "good", "fair", "poor"}
    none = (randhie[["hlthg", "hlthf", "hlthp"]] == 0).all(axis=1)
    assert ((h == "excellent") == none).all()
    assert ((h == "good") == (randhie["hlthg"] == 1)).all()
    assert ((h == "fair") == (randhie["hlthf"] == 1)).all()
    assert ((h == "poor") == (randhie["hlthp"] == 1)).all()


def test_person_year_structure(randhie):
    per_person = randhie.groupby("person").size()
    assert len(per_person) == 5_912 and per_person.min() == 1 and per_person.max() == 5
    assert not randhie.duplicated(["person", "year"]).any()
    assert set(randhie["year"]) == {1, 2, 3, 4, 5}


def test_file_and_frame_sources_agree(randhie):
    path = bundled_path()
    assert path.name == "randhie.csv.gz" and path.stat().st_size < 1_000_000
    table = Table(path)
    assert table.columns == list(randhie.columns) and table.n() == 20_190
    for col in ("lncoins", "disea"):
        a, b = table.column(col), as_source(randhie[col].to_numpy())
        assert a.name == f"column '{col}' of randhie.csv.gz"
        assert a.clamped_sum(0, 10) == b.clamped_sum(0, 10)
        assert a.clamped_sum_of_squares(0, 10) == b.clamped_sum_of_squares(0, 10)
        assert a.value_counts() == b.value_counts()
    assert table.column("idp").value_counts() == {0: 14_941, 1: 5_249}
    assert table.value_counts_joint(["health"]) == {
        ("excellent",): 11_019,
        ("fair",): 1_560,
        ("good",): 7_309,
        ("poor",): 302,
    }


def test_unknown_name():
    with pytest.raises(ValueError, match="must be one of \\['randhie'\\]"):
        load_bundled("iris")
    with pytest.raises(TypeError, match="name must be a string"):
        bundled_path(3)  # type: ignore[arg-type]
