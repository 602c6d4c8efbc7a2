"""Data sets shipped with dpbayes (person-level, sensitive in kind, public in fact).

``randhie``: the RAND Health Insurance Experiment records as distributed with
statsmodels (``statsmodels.datasets.randhie``; public domain): 20,190 rows, one per
person and study year (5,912 people), with derived columns ``health``, ``person`` and
``year``. A person contributes up to 5 rows, so a record-level guarantee on this data is
not a person-level one (bound contributions per ``person`` for that:
:data:`BUNDLED_PRIVACY_UNIT`, the default of ``dpbayes demo/release/query/serve``). See
``bundled/README.md`` for source and licence.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = [
    "BUNDLED",
    "BUNDLED_DESCRIPTION",
    "BUNDLED_PRIVACY_UNIT",
    "bundled_path",
    "bundled_table",
    "load_bundled",
]

_DIR = Path(__file__).resolve().parent / "bundled"

#: Bundled data sets: name -> file name inside ``dpbayes/data/bundled/``.
BUNDLED = {"randhie": "randhie.csv.gz"}

#: Person-level privacy unit of each bundled data set: (user column, rows per user). For
#: ``randhie`` a person has at most 5 rows, so k = 5 keeps every row and a guarantee
#: protects one person (all of their person-years) instead of one person-year.
BUNDLED_PRIVACY_UNIT: dict[str, tuple[str, int]] = {"randhie": ("person", 5)}

#: Meaning of each column of the bundled ``randhie`` data (from statsmodels' NOTE and
#: the RAND codebook ``randdesc.txt``; ``health`` is derived by dpbayes).
BUNDLED_DESCRIPTION: dict[str, str] = {
    "mdvis": "number of outpatient visits to an MD (face-to-face), integer >= 0",
    "lncoins": "ln(coinsurance + 1), 0 <= coinsurance <= 100",
    "idp": "1 if individual deductible plan, 0 otherwise",
    "lpi": "ln(max(1, annual participation incentive payment))",
    "fmde": "0 if idp = 1; ln(max(1, MDE / (0.01 coinsurance))) otherwise (MDE: maximum "
    "expenditure offer)",
    "physlm": "1 if the person has a physical limitation (baseline); 1,052 rows hold a "
    "fractional value in (0, 1) as distributed",
    "disea": "number of chronic diseases (baseline index; not always an integer)",
    "hlthg": "1 if self-rated health is good",
    "hlthf": "1 if self-rated health is fair",
    "hlthp": "1 if self-rated health is poor (omitted category: excellent)",
    "health": "DERIVED by dpbayes: self-rated health as one category, 'excellent' when "
    "hlthg = hlthf = hlthp = 0, else 'good', 'fair' or 'poor'",
    "person": "DERIVED by dpbayes: pseudonymous person number 1..5912 (renumbered from the "
    "RAND person id zper of statsmodels' randhie/src/randhie.csv); a person has 1 to 5 rows",
    "year": "study year 1..5 (from statsmodels' randhie/src/randhie.csv); (person, year) is unique",
}


def _check_name(name: Any) -> str:
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    if name not in BUNDLED:
        raise ValueError(f"name must be one of {sorted(BUNDLED)}, got {name!r}")
    return name


def bundled_path(name: str = "randhie") -> Path:
    """Path of a bundled data set's file (a gzipped CSV); pass it to ``as_source``."""
    path = _DIR / BUNDLED[_check_name(name)]
    if not path.is_file():
        raise ValueError(f"bundled data file {str(path)!r} is missing from the installation")
    return path


def load_bundled(name: str = "randhie") -> Any:
    """A bundled data set as a pandas DataFrame (``randhie``: 20,190 rows, 13 columns)."""
    import pandas as pd

    return pd.read_csv(bundled_path(name))


def bundled_table(name: str = "randhie", *, record_level: bool = False) -> Any:
    """A bundled data set at its person level, as ``dpbayes release/demo/query`` read it.

    A :class:`~dpbayes.data.Table` bounded to ``BUNDLED_PRIVACY_UNIT[name]`` (``randhie``:
    the ``person`` column, <= 5 rows, which keeps every row): releases from it protect one
    person (add/remove one user, n private). ``record_level=True`` is the explicit
    opt-out (the CLI's ``--record-level``): the plain DataFrame, whose releases protect
    one row (a person-year), not a person.
    """
    if not isinstance(record_level, bool):
        raise TypeError(f"record_level must be True or False, got {type(record_level).__name__}")
    df = load_bundled(name)
    if record_level:
        return df
    from dpbayes.data.table import Table

    user, k = BUNDLED_PRIVACY_UNIT[_check_name(name)]
    return Table(df, user_column=user, max_rows_per_user=k)
