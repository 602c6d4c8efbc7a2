"""What a text field denotes, from the field alone: the one rule for CSV files and text
values in columns whose types are not part of a schema.

A CSV file has no column types; an engine would guess one per column from all the
records, so one record (a letter in a column of numbers) would change how every other
record is read, and a release's counts would move by more than one record's worth. Such
a column is read as text and each field parsed by itself, by :func:`text_value`, for the
releases' categories (``models``) and the query cubes' axes (``answers``) alike.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["parse_number", "text_value"]

#: A field that spells a number: optional sign, digits with an optional fraction, an
#: optional exponent (``1``, ``-2``, ``01``, ``1.0``, ``.5``, ``1e3``); no ``inf``/``nan``,
#: ``1_000``, ``0x1`` or ``1,5``.
_NUMBER_TEXT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER_TEXT = re.compile(r"[+-]?\d+")


def parse_number(text: str) -> int | float | None:
    """The number ``text`` spells (surrounding spaces ignored): an int (exact, any size)
    without a fraction or exponent, else a float; None if it spells no number."""
    field = text.strip()
    if _INTEGER_TEXT.fullmatch(field):
        return int(field)
    if _NUMBER_TEXT.fullmatch(field):
        return float(field)
    return None


def text_value(text: Any) -> Any:
    """The value a text field denotes for labels that are not text: the number it spells
    (:func:`parse_number`), ``True``/``False`` for ``true``/``false`` in any letter case
    (surrounding spaces ignored), else the text itself (equal to no number or boolean).
    Compared by Python equality, ``1``, ``1.0`` and ``true`` are all the label 1 (or True),
    as they are in a typed column. A value that is not text is returned as it is."""
    if not isinstance(text, str):
        return text
    number = parse_number(text)
    if number is not None:
        return number
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    return text
