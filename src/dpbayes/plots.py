"""Figures of posteriors, shared by the CLI, the demo and the docs (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["plot_posteriors"]


def _grid(dists: list[Any]) -> np.ndarray:
    lo = min(float(d.ppf(1e-4)) for d in dists)
    hi = max(float(d.ppf(1 - 1e-4)) for d in dists)
    pad = 0.05 * (hi - lo or 1.0)
    return np.linspace(lo - pad, hi + pad, 600)


def plot_posteriors(
    curves: dict[str, Any], path: str | Path, *, title: str = "", level: float = 0.95
) -> Path:
    """Draw each labelled 1-d distribution (Beta, Normal) or Dirichlet (its marginals).

    The first curve's central credible interval at ``level`` is shaded.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    first = next(iter(curves.values()))
    if hasattr(first, "marginal"):  # Dirichlet: one panel per category
        m = len(first.alpha)
        fig, axes = plt.subplots(1, m, figsize=(3.2 * m, 3.0), squeeze=False)
        for i, ax in enumerate(axes[0]):
            margs = {k: d.marginal(i) for k, d in curves.items()}
            _panel(ax, margs, level)
            ax.set_title(f"category {i}", fontsize=9)
    else:
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        _panel(ax, curves, level)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def _panel(ax: Any, curves: dict[str, Any], level: float) -> None:
    x = _grid(list(curves.values()))
    for i, (label, d) in enumerate(curves.items()):
        y = d.pdf(x)
        line = ax.plot(x, y, label=label, lw=2 if i == 0 else 1.2, ls="-" if i == 0 else "--")
        if i == 0:
            lo, hi = d.interval(level)
            mask = (x >= lo) & (x <= hi)
            ax.fill_between(x[mask], y[mask], alpha=0.2, color=line[0].get_color())
    ax.set_ylabel("density")
    ax.legend(fontsize=8)
