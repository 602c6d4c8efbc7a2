"""Paper 001's experiments: recovering P from locally privatised data (Ayed et al. 2020).

Synthetic: X from a two-component mixture of truncated Normals on [-1, 1], released by
the Laplace mechanism with clipping r = 1 at eps in {0.5, 1, 2} for n in {100, 1000,
10000}. Wasserstein-1 distance to the true P of the posterior mean of P (projected on
[-r, r], the part the data identify) against three baselines run on the same Z's: the
empirical distribution of Z (clipped to [-r, r], which can only help it), the Laplace
deconvolution KDE and the grid NPMLE by EM. Also the coverage of the 95% pointwise
credible bands of the CDF and of the 95% interval of the mean.

Real: ln(coinsurance + 1) of the RAND Health Insurance Experiment (one row per person,
first study year), shifted by the public midpoint of its range [0, ln 101] and released
at eps in {1, 2}; the truth is the empirical distribution of the non-private column.
"""

from __future__ import annotations

import csv
import math
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from dpbayes.nonparametric import ConvergenceWarning, DPMixture, LocalLaplace
from dpbayes.nonparametric.baselines import (
    deconvolution_kde_laplace,
    density_to_cdf,
    empirical_cdf,
    npmle_grid,
    wasserstein1,
)
from dpbayes.privacy.noise import noise_source

NAME = "nonparametric"
DESCRIPTION = (
    "paper 001: DP-mixture posterior of P from local-DP data vs 3 baselines (W1, coverage)"
)

R = 1.0
WEIGHTS = (0.4, 0.6)
MEANS = (-0.5, 0.4)
SDS = (0.15, 0.2)
CHECK_POINTS = np.linspace(-0.8, 0.8, 9)
METHODS = ("dp_mixture", "empirical_z", "deconvolution_kde", "npmle_em")


def _components() -> list[Any]:
    return [
        stats.truncnorm((-R - m) / s, (R - m) / s, loc=m, scale=s)
        for m, s in zip(MEANS, SDS, strict=True)
    ]


def true_cdf(grid: np.ndarray) -> np.ndarray:
    """CDF of the synthetic truth (two truncated Normals on [-1, 1])."""
    return sum(w * c.cdf(grid) for w, c in zip(WEIGHTS, _components(), strict=True))  # type: ignore[no-any-return]


def true_pdf(grid: np.ndarray) -> np.ndarray:
    return sum(w * c.pdf(grid) for w, c in zip(WEIGHTS, _components(), strict=True))  # type: ignore[no-any-return]


def sample_truth(n: int, gen: np.random.Generator) -> np.ndarray:
    comps = _components()
    which = gen.random(n) < WEIGHTS[0]
    x = comps[1].rvs(size=n, random_state=gen)
    x[which] = comps[0].rvs(size=int(which.sum()), random_state=gen)
    return np.asarray(x, dtype=float)


def estimate_cdfs(
    z: np.ndarray, mech: LocalLaplace, grid: np.ndarray, fit_kw: dict[str, Any], gen: Any
) -> tuple[dict[str, np.ndarray], Any]:
    """CDF on ``grid`` (inside [-r, r]) of each estimator of the law of clip(X)."""
    r, b = mech.r, mech.scale
    fit = DPMixture(mechanism=mech).fit(z, rng=gen, **fit_kw)
    proj = fit.projected()
    wide = np.linspace(-r - 4 * b, r + 4 * b, 4001)
    kde = density_to_cdf(deconvolution_kde_laplace(z, b, wide), wide)
    support = np.linspace(-r, r, 201)
    w = npmle_grid(z, mech.loglik, support)
    cdfs = {
        "dp_mixture": proj.cdf(grid),
        "empirical_z": empirical_cdf(np.clip(z, -r, r), grid),
        "deconvolution_kde": np.interp(grid, wide, kde),
        "npmle_em": np.cumsum(w)[np.clip(np.searchsorted(support, grid, "right") - 1, 0, None)]
        * (grid >= support[0]),
    }
    for v in cdfs.values():
        v[-1] = 1.0  # mass beyond r is projected onto r
    return cdfs, proj


def _write(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    with path.open("w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    return path


def synthetic(
    out: Path,
    gen: np.random.Generator,
    *,
    epsilons: Sequence[float],
    ns: Sequence[int],
    reps: int,
    fit_kw: dict[str, Any],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    grid = np.linspace(-R, R, 2001)
    truth = true_cdf(grid)
    truth_check = true_cdf(CHECK_POINTS)
    true_mean = float(sum(w * c.mean() for w, c in zip(WEIGHTS, _components(), strict=True)))
    rows, cov_rows = [], []
    example: dict[str, Any] = {}
    for eps in epsilons:
        mech = LocalLaplace(epsilon=eps, r=R)
        for n in ns:
            for rep in range(reps):
                x = sample_truth(n, gen)
                z = mech.privatize(x, rng=gen).values
                t0 = time.perf_counter()
                cdfs, proj = estimate_cdfs(z, mech, grid, fit_kw, gen)
                secs = time.perf_counter() - t0
                for method, cdf in cdfs.items():
                    rows.append(
                        {
                            "epsilon": eps,
                            "n": n,
                            "rep": rep,
                            "method": method,
                            "w1": wasserstein1(cdf, truth, grid),
                            "seconds": round(secs, 2),
                        }
                    )
                lo, hi = proj.cdf_band(CHECK_POINTS, 0.95)
                mlo, mhi = proj.interval("mean", 0.95)
                cov_rows.append(
                    {
                        "epsilon": eps,
                        "n": n,
                        "rep": rep,
                        "cdf_band_coverage": float(
                            np.mean((lo <= truth_check) & (truth_check <= hi))
                        ),
                        "cdf_band_mean_width": float(np.mean(hi - lo)),
                        "mean_covered": int(mlo <= true_mean <= mhi),
                        "mean_interval_width": mhi - mlo,
                    }
                )
                if rep == 0 and (eps, n) == (epsilons[-1], ns[-1]):
                    example = {"eps": eps, "n": n, "grid": grid, "cdfs": cdfs, "proj": proj}
    return rows, cov_rows, example


def real_example(
    gen: np.random.Generator,
    *,
    epsilons: Sequence[float],
    size: int | None,
    fit_kw: dict[str, Any],
) -> tuple[list[dict[str, Any]], dict[Any, Any]]:
    from dpbayes.data import load_bundled

    df = load_bundled("randhie")
    first = df.sort_values(["person", "year"]).groupby("person").first()
    x_raw = first["lncoins"].to_numpy(dtype=float)
    if size is not None:
        x_raw = x_raw[gen.permutation(x_raw.shape[0])[:size]]
    half = math.log(101.0) / 2.0  # public range of ln(coinsurance + 1): [0, ln 101]
    x = x_raw - half
    grid = np.linspace(-half, half, 2001)
    truth = empirical_cdf(x, grid)
    rows: list[dict[str, Any]] = []
    plots: dict[Any, Any] = {}
    for eps in epsilons:
        mech = LocalLaplace(epsilon=eps, r=half)
        z = mech.privatize(x, rng=gen).values
        cdfs, proj = estimate_cdfs(z, mech, grid, fit_kw, gen)
        for method, cdf in cdfs.items():
            rows.append(
                {
                    "epsilon": eps,
                    "n": x.shape[0],
                    "method": method,
                    "w1": wasserstein1(cdf, truth, grid),
                }
            )
        mlo, mhi = proj.interval("mean", 0.95)
        rows.append(
            {
                "epsilon": eps,
                "n": x.shape[0],
                "method": "dp_mixture_mean_interval",
                "w1": f"[{mlo + half:.3f}, {mhi + half:.3f}] true {np.mean(x_raw):.3f}",
            }
        )
        plots[eps] = (grid + half, truth, cdfs, proj.cdf_band(grid[::20], 0.95), grid[::20] + half)
    return rows, plots


def _plots(
    out: Path, rows: list[dict[str, Any]], example: dict[str, Any], real: dict[Any, Any]
) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    eps_list = sorted({r["epsilon"] for r in rows})
    fig, axes = plt.subplots(1, len(eps_list), figsize=(4.2 * len(eps_list), 3.6), squeeze=False)
    for ax, eps in zip(axes[0], eps_list, strict=True):
        for method in METHODS:
            sel = [r for r in rows if r["epsilon"] == eps and r["method"] == method]
            ns = sorted({r["n"] for r in sel})
            means = [np.mean([r["w1"] for r in sel if r["n"] == n]) for n in ns]
            ax.plot(ns, means, marker="o", label=method)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"eps = {eps:g}")
        ax.set_xlabel("n")
        ax.set_ylabel("W1 to the true P")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    p = out / "nonparametric_w1.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    paths.append(p)

    if example:
        grid, cdfs, proj = example["grid"], example["cdfs"], example["proj"]
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
        a1.plot(grid, true_cdf(grid), "k", lw=2, label="truth")
        for method in METHODS:
            a1.plot(grid, cdfs[method], lw=1, label=method)
        g = grid[::20]
        lo, hi = proj.cdf_band(g, 0.95)
        a1.fill_between(g, lo, hi, alpha=0.25, label="95% band (dp_mixture)")
        a1.set_title(f"CDF, eps = {example['eps']:g}, n = {example['n']}")
        a1.legend(fontsize=7)
        dgrid = np.linspace(-R, R, 201)
        dens = proj.density(dgrid)
        dlo, dhi = proj.density_band(dgrid, 0.95)
        a2.plot(dgrid, true_pdf(dgrid), "k", lw=2, label="truth")
        a2.plot(dgrid, dens, label="posterior mean (smoothed)")
        a2.fill_between(dgrid, dlo, dhi, alpha=0.25, label="95% band")
        a2.set_title("density of X (Normal-smoothed P)")
        a2.legend(fontsize=7)
        fig.tight_layout()
        p = out / "nonparametric_example.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)

    if real:
        fig, axes = plt.subplots(1, len(real), figsize=(5 * len(real), 3.8), squeeze=False)
        for ax, (eps, (grid, truth, cdfs, (lo, hi), gb)) in zip(axes[0], real.items(), strict=True):
            ax.step(grid, truth, "k", lw=2, where="post", label="true (non-private)")
            for method in METHODS:
                ax.plot(grid, cdfs[method], lw=1, label=method)
            ax.fill_between(gb, lo, hi, alpha=0.25, label="95% band")
            ax.set_title(f"RAND HIE ln(coins+1), eps = {eps:g}")
            ax.set_xlabel("ln(coinsurance + 1)")
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        p = out / "nonparametric_randhie.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    return paths


def run(out_dir: str | Path, *, small: bool = False, seed: int = 0) -> list[Path]:
    """Write the W1 table, the coverage table, the real example and their plots."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    gen = noise_source(seed).generator()
    epsilons: tuple[float, ...]
    ns: tuple[int, ...]
    real_eps: tuple[float, ...]
    if small:
        epsilons, ns, reps = (1.0, 2.0), (100, 400), 1
        fit_kw = {"draws": 200, "warmup": 100, "chains": 2, "progress": False}
        real_eps, real_size = (2.0,), 500
    else:
        epsilons, ns, reps = (0.5, 1.0, 2.0), (100, 1000, 10000), 5
        fit_kw = {"draws": 1000, "warmup": 500, "chains": 2, "progress": False}
        real_eps, real_size = (1.0, 2.0), None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        rows, cov_rows, example = synthetic(
            out, gen, epsilons=epsilons, ns=ns, reps=reps, fit_kw=fit_kw
        )
        real_rows, real_plots = real_example(gen, epsilons=real_eps, size=real_size, fit_kw=fit_kw)
    summary = []
    for eps in epsilons:
        for n in ns:
            entry: dict[str, Any] = {"epsilon": eps, "n": n}
            for method in METHODS:
                vals = [
                    r["w1"] for r in rows if (r["epsilon"], r["n"], r["method"]) == (eps, n, method)
                ]
                entry[method] = round(float(np.mean(vals)), 4)
            cov = [c for c in cov_rows if (c["epsilon"], c["n"]) == (eps, n)]
            entry["cdf_band_coverage"] = round(
                float(np.mean([c["cdf_band_coverage"] for c in cov])), 3
            )
            entry["mean_interval_coverage"] = round(
                float(np.mean([c["mean_covered"] for c in cov])), 3
            )
            entry["reps"] = reps
            summary.append(entry)
    paths = [
        _write(out / "nonparametric_w1_runs.csv", rows),
        _write(out / "nonparametric_coverage_runs.csv", cov_rows),
        _write(out / "nonparametric_w1_summary.csv", summary),
        _write(out / "nonparametric_randhie.csv", real_rows),
    ]
    paths += _plots(out, rows, example, real_plots)
    return paths
