"""Figures of posteriors, shared by the CLI, the demo and the docs (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["check_figure_path", "plot_cdf_bands", "plot_posteriors"]


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
    # pgf needs a TeX installation at save time: not offered (it failed after the release)
    formats = {k: v for k, v in FigureCanvasBase.get_supported_filetypes().items() if k != "pgf"}
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


def plot_cdf_bands(
    fit: Any, grid: Any, path: str | Path, *, level: float = 0.95, calibration: Any = None
) -> Path:
    """A DP-mixture fit (paper 001): the posterior mean CDF of the true values with its
    pointwise and simultaneous credible bands at ``level`` (and the calibrated bands of
    ``calibration``, a :class:`~dpbayes.nonparametric.BandCalibration`, when given),
    beside the smoothed density with its pointwise band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g = np.asarray(grid, dtype=float)
    fine = np.linspace(g[0], g[-1], max(200, g.size))
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.0, 4.0))
    slo, shi = fit.cdf_band(g, level, kind="simultaneous")
    plo, phi = fit.cdf_band(g, level)
    # the bands are at the grid points (joined by lines); the mean CDF on a fine grid
    left.fill_between(g, slo, shi, color="C0", alpha=0.15, label=f"{level:.0%} simultaneous")
    left.fill_between(g, plo, phi, color="C0", alpha=0.3, label=f"{level:.0%} pointwise")
    if calibration is not None:
        for (lo, hi), style, kind in (
            (calibration.simultaneous, ":", "simultaneous"),
            (calibration.pointwise, "--", "pointwise"),
        ):
            label = f"calibrated {kind} ({calibration.refits} refits)"
            left.plot(g, lo, color="C3", ls=style, lw=1.0, label=label)
            left.plot(g, hi, color="C3", ls=style, lw=1.0)
    left.plot(fine, fit.cdf(fine), color="C0", lw=1.5, label="posterior mean")
    left.set_ylim(-0.02, 1.02)
    left.set_title("CDF of the true values", fontsize=10)
    left.legend(fontsize=7, loc="upper left")
    dlo, dhi = fit.density_band(fine, level)
    right.fill_between(fine, dlo, dhi, color="C1", alpha=0.3, label=f"{level:.0%} pointwise")
    right.plot(fine, fit.density(fine), color="C1", lw=1.5, label="posterior mean")
    right.set_title("density (smoothed)", fontsize=10)
    right.legend(fontsize=7)
    guarantee = fit.guarantee.describe() if fit.guarantee is not None else ""
    fig.suptitle(f"DP mixture, n = {fit.n}: {guarantee}", fontsize=9)
    fig.tight_layout()
    out = Path(path)
    # the format named explicitly, as in plot_posteriors: else "fig" is written as fig.png
    fig.savefig(out, format=out.suffix.lower().lstrip(".") or "png")
    plt.close(fig)
    return out
