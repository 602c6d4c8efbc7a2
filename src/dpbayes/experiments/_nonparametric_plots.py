"""Figures of the paper-001 experiment (:mod:`dpbayes.experiments.nonparametric`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["draw_all"]

_LABELS = {
    "dp_mixture": "DP mixture (posterior mean)",
    "dp_mixture_median": "DP mixture (pointwise median)",
    "npmle": "NPMLE",
    "npmle_em": "EM for the NPMLE, 1,000 steps",
    "deconvolution_kde": "deconvolution KDE",
    "empirical_z": "empirical clip(Z)",
}


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _w1(out: Path, rows: list[dict[str, Any]], methods: Sequence[str]) -> Path:
    plt = _plt()
    cells = sorted({(r["mechanism"], r["epsilon"]) for r in rows})
    fig, axes = plt.subplots(1, len(cells), figsize=(3.6 * len(cells), 3.5), squeeze=False)
    for ax, (kind, eps) in zip(axes[0], cells, strict=True):
        for method in methods:
            sel = [
                r
                for r in rows
                if (r["mechanism"], r["epsilon"], r["method"]) == (kind, eps, method)
            ]
            ns = sorted({r["n"] for r in sel})
            q = np.array(
                [np.quantile([r["w1"] for r in sel if r["n"] == n], [0.25, 0.5, 0.75]) for n in ns]
            )
            ax.errorbar(ns, q[:, 1], yerr=[q[:, 1] - q[:, 0], q[:, 2] - q[:, 1]], marker="o",
                        ms=3, capsize=2, label=_LABELS.get(method, method))  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{kind}, eps = {eps:g}", fontsize=9)
        ax.set_xlabel("n")
    axes[0][0].set_ylabel("W1 to the true P (median, IQR)")
    axes[0][0].legend(fontsize=6)
    fig.tight_layout()
    p = out / "nonparametric_w1.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return p


def _coverage(out: Path, summary: list[dict[str, Any]], sbc_summary: list[dict[str, Any]]) -> Path:
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, key, title in (
        (axes[0], "pointwise_coverage", "95% pointwise bands"),
        (axes[1], "simultaneous_coverage", "95% simultaneous bands"),
    ):
        labels = [f"{s['mechanism'][:3]} {s['epsilon']:g}/{s['n']}" for s in summary]
        ax.plot(
            range(len(summary)), [s[key] for s in summary], "o", label="fixed truth (frequentist)"
        )
        x0 = len(summary)
        for i, s in enumerate(sbc_summary):
            ax.plot(x0 + i, s[key], "s", color="C3", label="SBC (prior truths)" if i == 0 else None)
            labels.append(f"SBC {s['mechanism'][:3]} {s['epsilon']:g}/{s['n']}")
        ax.axhspan(0.92, 0.98, color="0.85", zorder=0, label="0.95 +- 0.03")
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=70, fontsize=6)
        ax.set_ylim(min(0.5, ax.get_ylim()[0]), 1.01)
        ax.set_title(title, fontsize=9)
    axes[0].set_ylabel("coverage (mechanism eps/n)")
    axes[0].legend(fontsize=6)
    fig.tight_layout()
    p = out / "nonparametric_coverage.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return p


def _sbc_ranks(out: Path, sbc_rows: list[dict[str, Any]]) -> Path:
    plt = _plt()
    cells = sorted({(r["mechanism"], r["epsilon"], r["n"]) for r in sbc_rows})
    fig, axes = plt.subplots(1, len(cells), figsize=(4 * len(cells), 3), squeeze=False)
    for ax, cell in zip(axes[0], cells, strict=True):
        sel = [r for r in sbc_rows if (r["mechanism"], r["epsilon"], r["n"]) == cell]
        thin = sel[0]["thin"]
        ranks = np.array([r["rank"] for r in sel])
        ax.hist(ranks, bins=np.linspace(-0.5, thin + 0.5, 11), color="C0", alpha=0.8)
        expect = ranks.size / 10
        ax.axhline(expect, color="k", lw=1)
        # +-2 standard errors of a bin count from the spread over replicates: the ranks of
        # one replicate's check points are dependent, so sqrt(expect) would be too narrow
        reps = sorted({r["rep"] for r in sel})
        frac = np.array(
            [
                np.bincount(
                    np.array([r["rank"] for r in sel if r["rep"] == k]) * 10 // (thin + 1),
                    minlength=10,
                )
                for k in reps
            ]
        )
        se = float(np.mean(frac.std(axis=0, ddof=1))) * np.sqrt(len(reps)) if len(reps) > 1 else 0.0
        ax.axhspan(expect - 2 * se, expect + 2 * se, color="0.85", zorder=0)
        ax.set_title(f"SBC ranks of F(t), {cell[0]} eps={cell[1]:g} n={cell[2]}", fontsize=8)
        ax.set_xlabel(f"rank among {thin} posterior draws (all t; band: +-2 SE over replicates)")
        ax.set_ylabel("replications per rank bin")
    fig.tight_layout()
    p = out / "nonparametric_sbc_ranks.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return p


def _example(
    out: Path, example: dict[str, Any], true_cdf: Callable[..., Any], true_pdf: Callable[..., Any],
    methods: Sequence[str],
) -> Path:  # fmt: skip
    plt = _plt()
    grid, cdfs, fit = example["grid"], example["cdfs"], example["fit"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
    g = grid[::20]
    slo, shi = fit.cdf_band(g, 0.95, kind="simultaneous")
    lo, hi = fit.cdf_band(g, 0.95)
    a1.fill_between(g, slo, shi, color="C0", alpha=0.15, label="95% simultaneous band")
    a1.fill_between(g, lo, hi, color="C0", alpha=0.3, label="95% pointwise band")
    a1.plot(grid, true_cdf(grid), "k", lw=2, label="truth")
    for method in methods:
        a1.plot(grid, cdfs[method], lw=1, label=_LABELS.get(method, method))
    a1.set_title(f"CDF, eps = {example['eps']:g}, n = {example['n']}", fontsize=9)
    a1.set_ylabel("P(X <= t)")
    a1.set_xlabel("t")
    a1.legend(fontsize=6)
    dgrid = np.linspace(-1, 1, 201)
    dlo, dhi = fit.density_band(dgrid, 0.95)
    a2.plot(dgrid, true_pdf(dgrid), "k", lw=2, label="truth")
    a2.plot(dgrid, fit.density(dgrid), label="posterior mean (smoothed)")
    a2.fill_between(dgrid, dlo, dhi, alpha=0.25, label="95% pointwise band")
    a2.set_title("density of X (Normal-smoothed P)", fontsize=9)
    a2.set_ylabel("density")
    a2.set_xlabel("x")
    a2.legend(fontsize=7)
    fig.tight_layout()
    p = out / "nonparametric_example.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return p


def _mixing(out: Path, traces: dict[str, Any]) -> Path:
    plt = _plt()
    fig, axes = plt.subplots(
        len(traces), 1, figsize=(10, 2.4 * len(traces)), sharex=True, squeeze=False
    )
    for ax, (label, tr) in zip(axes[:, 0], traces.items(), strict=True):
        for j, t in enumerate(tr["pts"]):
            ax.plot(tr["cdf"][:, j], lw=0.6, label=f"F({t:g})")
        ax.set_ylim(0, 1)
        ax.set_title(label, fontsize=9)
        ax.set_ylabel("draw of F(t)")
    axes[0, 0].legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("saved draw (one chain)")
    fig.tight_layout()
    p = out / "nonparametric_mixing.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return p


def _real(out: Path, real: dict[Any, Any], methods: Sequence[str]) -> Path:
    plt = _plt()
    fig, axes = plt.subplots(1, len(real), figsize=(4.4 * len(real), 3.6), squeeze=False)
    for ax, ((_, eps), d) in zip(axes[0], real.items(), strict=True):
        ax.fill_between(
            d["band_grid"], *d["sband"], color="C0", alpha=0.15, label="95% simultaneous"
        )
        ax.fill_between(d["band_grid"], *d["band"], color="C0", alpha=0.3, label="95% pointwise")
        ax.step(
            d["grid"], d["truth"], "k", lw=2, where="post", label="true (curator only, not private)"
        )
        for method in methods:
            ax.plot(d["grid"], d["cdfs"][method], lw=1, label=_LABELS.get(method, method))
        ax.set_title(f"{d['label']}, eps = {eps:g}", fontsize=8)
        ax.set_xlabel("t")
    axes[0][0].set_ylabel("P(X <= t)")
    axes[0][0].legend(fontsize=6)
    fig.tight_layout()
    p = out / "nonparametric_real.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return p


def draw_all(
    out: Path,
    *,
    rows: list[dict[str, Any]],
    summary: list[dict[str, Any]],
    sbc_rows: list[dict[str, Any]],
    sbc_summary: list[dict[str, Any]],
    example: dict[str, Any],
    traces: dict[str, Any],
    real: dict[Any, Any],
    true_cdf: Callable[..., Any],
    true_pdf: Callable[..., Any],
    methods: Sequence[str],
) -> list[Path]:
    """All figures; returns their paths."""
    paths = [_w1(out, rows, methods), _coverage(out, summary, sbc_summary)]
    if sbc_rows:
        paths.append(_sbc_ranks(out, sbc_rows))
    if example:
        paths.append(_example(out, example, true_cdf, true_pdf, methods))
    paths.append(_mixing(out, traces))
    if real:
        paths.append(_real(out, real, methods))
    return paths
