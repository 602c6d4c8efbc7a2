"""Compact text and notebook (HTML) display of dpbayes objects.

A displayable class defines ``_display(self) -> (title, rows)``: a title such as
``"Beta(a=3, b=5)"`` and a few ``(label, value)`` rows (numbers already formatted, at most
one short line each). :func:`text` and :func:`html` turn that into ``__repr__`` and
``_repr_html_``, so every object prints the same way in a terminal and in Jupyter, and
nothing prints a long array. This module imports nothing from dpbayes (any folder may use
it) and no numeric library.
"""

from __future__ import annotations

import html as _html
import math
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

Rows = Sequence[tuple[str, str]]


class Displayable(Protocol):
    def _display(self) -> tuple[str, Rows]: ...


def num(x: Any, digits: int = 4) -> str:
    """A number in at most ``digits`` significant digits (``1.23e+04`` style when large)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isfinite(v) and v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.{digits}g}"


def nums(xs: Iterable[Any], digits: int = 4, limit: int = 6) -> str:
    """A short list of numbers, ``[1, 2, 3, ..., 9]`` (first and last) when longer than limit."""
    vals = [num(x, digits) for x in xs]
    if len(vals) > limit:
        head = limit - 1
        vals = [*vals[:head], f"... ({len(vals) - limit} more)", vals[-1]]
    return "[" + ", ".join(vals) + "]"


def interval(lo: Any, hi: Any, digits: int = 4) -> str:
    return f"[{num(lo, digits)}, {num(hi, digits)}]"


def text(obj: Displayable) -> str:
    """``title`` followed by the rows, one per line, indented (a one-liner with no rows)."""
    title, rows = obj._display()
    if not rows:
        return title
    width = max(len(k) for k, _ in rows)
    body = "\n".join(f"  {k.ljust(width)}  {v}" for k, v in rows)
    return f"{title}\n{body}"


def html(obj: Displayable) -> str:
    """A small two-column HTML table with the title as its caption (Jupyter's ``_repr_html_``)."""
    title, rows = obj._display()
    esc = _html.escape
    body = "".join(
        f"<tr><th style='text-align:left;padding-right:1em'>{esc(k)}</th>"
        f"<td style='text-align:left'>{esc(v)}</td></tr>"
        for k, v in rows
    )
    return (
        "<table class='dpbayes'>"
        f"<caption style='text-align:left;font-weight:bold'>{esc(title)}</caption>"
        f"{body}</table>"
    )


class PosteriorDisplay:
    """Display and ``summary()`` for distribution-like objects with ``mean()``, ``std()`` and
    ``interval(level)`` (a scalar or one value per component).

    Subclasses may override ``_display_title`` and ``_display_extra`` (more rows, e.g. the
    number of mixture components or MCMC diagnostics) and ``_component_names``.
    """

    def _display_title(self) -> str:
        return type(self).__name__

    def _display_extra(self) -> list[tuple[str, str]]:
        return []

    def _component_names(self, m: int) -> list[str]:
        return [str(i) for i in range(m)]

    def summary(self, level: float = 0.95) -> Any:
        """A tidy pandas DataFrame: one row per component (one row for a scalar posterior),
        columns ``mean``, ``sd``, ``lower``, ``upper`` (the central credible interval of
        probability ``level``)."""
        import numpy as np
        import pandas as pd

        obj: Any = self
        mean = np.atleast_1d(np.asarray(obj.mean(), dtype=float))
        sd = np.atleast_1d(np.asarray(obj.std(), dtype=float))
        iv = np.asarray(obj.interval(level), dtype=float).reshape(-1, 2)
        index = ["value"] if mean.size == 1 else self._component_names(mean.size)
        return pd.DataFrame(
            {"mean": mean, "sd": sd, "lower": iv[:, 0], "upper": iv[:, 1]},
            index=pd.Index(index, name="component"),
        )

    def _display(self) -> tuple[str, Rows]:
        import numpy as np

        obj: Any = self
        rows: list[tuple[str, str]] = []
        try:
            mean = np.asarray(obj.mean(), dtype=float)
            sd = np.asarray(obj.std(), dtype=float)
            iv = np.asarray(obj.interval(0.95), dtype=float).reshape(-1, 2)
        except Exception as exc:  # display must never raise
            rows.append(("summary", f"unavailable ({type(exc).__name__})"))
        else:
            if mean.ndim == 0:
                rows += [
                    ("mean", num(mean)),
                    ("sd", num(sd)),
                    ("95% interval", interval(iv[0, 0], iv[0, 1])),
                ]
            else:
                rows += [
                    ("mean", nums(mean)),
                    ("sd", nums(sd)),
                    ("95% intervals", nums_intervals(iv)),
                ]
        return self._display_title(), [*rows, *self._display_extra()]

    def __repr__(self) -> str:
        return text(self)

    def _repr_html_(self) -> str:
        return html(self)


def nums_intervals(iv: Any, limit: int = 4) -> str:
    """Per-component intervals ``[lo, hi]``, shortened like :func:`nums`."""
    parts = [interval(lo, hi) for lo, hi in iv]
    if len(parts) > limit:
        parts = [*parts[: limit - 1], f"... ({len(parts) - limit} more)", parts[-1]]
    return ", ".join(parts)
