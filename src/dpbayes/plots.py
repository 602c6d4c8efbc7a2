"""Figures of posteriors, shared by the CLI, the demo and the docs (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["check_figure_path", "plot_posteriors"]


def _grid(dists: list[Any]) -> np.ndarray:
    lo = min(float(d.ppf(1e-4)) for d in dists)
    hi = max(float(d.ppf(1 - 1e-4)) for d in dists)
    pad = 0.05 * (hi - lo or 1.0)
    return np.linspace(lo - pad, hi + pad, 600)


def check_figure_path(path: str | Path, name: str = "--out") -> None:
    """The figure format that ``path``'s suffix asks for can be written (PNG without a
    suffix); checked before any noise is drawn, so a typo never costs a release."""
    from matplotlib.backend_bases import FigureCanvasBase

    suffix = Path(path).suffix.lower().lstrip(".")
    formats = FigureCanvasBase.get_supported_filetypes()
    if suffix and suffix not in formats:
        raise ValueError(
            f"{name} {path}: no figure format {suffix!r}; use one of "
            f"{', '.join(sorted(formats))} (nothing was spent)"
        )


def plot_posteriors(
    curves: dict[str, Any],
    path: str | Path,
    *,
    title: str = "",
    level: float = 0.95,
    categories: Any = None,
    xlabel: str = "",
) -> Path:
    """Draw each labelled 1-d distribution (Beta, Normal) or Dirichlet (its marginals).

    The first curve's central credible interval at ``level`` is shaded (lead with the
    noise-aware posterior). Dirichlet-like curves (with ``marginal(i)``) get one panel per
    category, titled with ``categories`` (the model's names) when given. Long titles are
    wrapped, never clipped.
    """
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    first = next(iter(curves.values()))
    if hasattr(first, "marginal"):  # Dirichlet: one panel per category
        names = list(categories) if categories is not None else None
        m = len(names) if names is not None else len(first.alpha)
        fig, axes = plt.subplots(1, m, figsize=(max(3.2 * m, 6.4), 3.4), squeeze=False)
        for i, ax in enumerate(axes[0]):
            margs = {k: d.marginal(i) for k, d in curves.items()}
            _panel(ax, margs, level, legend=i == 0)
            label = names[i] if names is not None else f"category {i}"
            ax.set_title(f"P({label})", fontsize=9)
            if i:
                ax.set_ylabel("")
        width = 24 * m
    else:
        fig, ax = plt.subplots(figsize=(6.4, 3.8))
        _panel(ax, curves, level)
        if xlabel:
            ax.set_xlabel(xlabel)
        width = 80
    if title:
        fig.suptitle("\n".join(textwrap.wrap(title, width=max(width, 60))), fontsize=9)
    fig.tight_layout()
    out = Path(path)
    # the format named explicitly: without it matplotlib appends ".png" to a path with no
    # suffix and writes a file other than the one checked (which could be the ledger)
    fig.savefig(out, dpi=120, format=out.suffix.lower().lstrip(".") or "png")
    plt.close(fig)
    return out


def _panel(ax: Any, curves: dict[str, Any], level: float, *, legend: bool = True) -> None:
    x = _grid(list(curves.values()))
    for i, (label, d) in enumerate(curves.items()):
        y = d.pdf(x)
        line = ax.plot(x, y, label=label, lw=2 if i == 0 else 1.2, ls="-" if i == 0 else "--")
        if i == 0:
            lo, hi = d.interval(level)
            mask = (x >= lo) & (x <= hi)
            ax.fill_between(x[mask], y[mask], alpha=0.2, color=line[0].get_color())
    ax.set_ylabel("density")
    if legend:
        ax.legend(fontsize=7)
