"""The one rule for what a text field denotes (CSV files, text values without a schema),
used by the releases' categories and the query cubes' axes alike."""

from __future__ import annotations

from dpbayes.data.text_values import parse_number, text_value


def test_numbers() -> None:
    assert parse_number("01") == 1 and isinstance(parse_number("01"), int)
    assert parse_number(" 1.0 ") == 1.0 and parse_number("2.5e3") == 2500.0
    assert parse_number(".5") == 0.5 and parse_number("-0") == 0
    assert parse_number("12345678901234567891") == 12345678901234567891
    for junk in ("", "1,5", "0x1", "1_000", "true", "n/a", "1.0.0", "--1", "inf", "nan"):
        assert parse_number(junk) is None


def test_values() -> None:
    assert [text_value(t) for t in ["1", "-0", " 1.0", "1e0", ".5", "TRUE", "false"]] == [
        1, 0, 1.0, 1.0, 0.5, True, False,
    ]  # fmt: skip
    assert [text_value(t) for t in ["yes", "nan", "1,0", "0x1"]] == ["yes", "nan", "1,0", "0x1"]
    assert text_value(3) == 3 and text_value(None) is None
