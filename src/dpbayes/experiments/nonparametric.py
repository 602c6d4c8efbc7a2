"""Paper 001's experiments: recovering P from locally privatised data (Ayed et al. 2020).

1. Synthetic, fixed truth: X from a two-component mixture of truncated Normals on [-1, 1],
   released with clipping r = 1 by the Laplace mechanism (eps 0.5, 1, 2; n in {1000, 3000,
   10000}) and the Gaussian mechanism (eps 1, 2, delta 1e-5; n in {1000, 3000}), 10 runs
   each. Wasserstein-1 distance to the true P of the DP-mixture posterior (its mean and
   its pointwise median CDF, the Bayes estimate under W1 loss) and of three baselines on
   the same Z's: the NPMLE on a grid by EM, the deconvolution KDE, the empirical
   distribution of clip(Z). Frequentist coverage of the 95% pointwise and simultaneous
   CDF bands at this fixed truth.
2. Simulation-based calibration: truths drawn from the prior predictive
   (:mod:`dpbayes.nonparametric.calibration`), coverage of the same bands and rank
   histograms: the check that the posterior is computed right.
3. Mixing at n = 10,000: traces and ESS of the paper's Gibbs sampler against the sampler
   with the label-integrated moves.
4. Real data: ln(coinsurance + 1) of the RAND Health Insurance Experiment (one row per
   person) and the body-mass index of scikit-learn's diabetes data (442 patients; public
   range [15, 45]), each released by the Laplace mechanism; the truth is the empirical
   distribution of the non-private column.
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

from dpbayes.experiments import _nonparametric_plots as plots
from dpbayes.nonparametric import ConvergenceWarning, DPMixture, LocalGaussian, LocalLaplace
from dpbayes.nonparametric.baselines import (
    deconvolution_kde_gaussian,
    deconvolution_kde_laplace,
    density_to_cdf,
    empirical_cdf,
    npmle_grid,
    wasserstein1,
)
from dpbayes.nonparametric.calibration import rank_uniformity, sbc_replicate
from dpbayes.nonparametric.diagnostics import ess_bulk
from dpbayes.privacy.noise import noise_source

NAME = "nonparametric"
DESCRIPTION = (
    "paper 001: DP-mixture posterior of P from local-DP data vs the NPMLE and the "
    "deconvolution KDE (W1, band coverage, SBC, mixing)"
)

R = 1.0
WEIGHTS = (0.4, 0.6)
MEANS = (-0.5, 0.4)
SDS = (0.15, 0.2)
DELTA = 1e-5  # of the Gaussian mechanism
CHECK = np.linspace(-0.9, 0.9, 19)  # where the bands are checked
METHODS = (
    "dp_mixture",
    "dp_mixture_median",
    "npmle",
    "npmle_em",
    "deconvolution_kde",
    "empirical_z",
)
#: EM for the NPMLE stopped after this many steps from equal weights: a smoothed estimate
#: (the NPMLE itself is discrete), kept as a baseline beside the NPMLE (``"npmle_em"``).
EM_STEPS = 1000


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


def mechanism(kind: str, eps: float, r: float = R) -> LocalLaplace | LocalGaussian:
    if kind == "laplace":
        return LocalLaplace(epsilon=eps, r=r)
    return LocalGaussian(epsilon=eps, delta=DELTA, r=r)


def _step_cdf(support: np.ndarray, w: np.ndarray, grid: np.ndarray) -> np.ndarray:
    idx = np.searchsorted(support, grid, side="right") - 1
    return np.where(idx >= 0, np.cumsum(w)[np.clip(idx, 0, None)], 0.0)  # type: ignore[no-any-return]


def estimate_cdfs(
    z: np.ndarray, mech: Any, grid: np.ndarray, fit_kw: dict[str, Any], gen: Any
) -> tuple[dict[str, np.ndarray], Any]:
    """CDF on ``grid`` (inside [-r, r]) of each estimator of the law of clip(X)."""
    r = mech.r
    fit = DPMixture(mechanism=mech).fit(z, rng=gen, **fit_kw)
    noise = mech.scale if isinstance(mech, LocalLaplace) else mech.sigma
    wide = np.linspace(-r - 4 * noise, r + 4 * noise, 4001)
    if isinstance(mech, LocalLaplace):
        dens = deconvolution_kde_laplace(z, mech.scale, wide)
    else:
        dens = deconvolution_kde_gaussian(z, mech.sigma, wide)
    support = np.linspace(-r, r, 201)
    cdfs = {
        "dp_mixture": fit.cdf(grid),
        "dp_mixture_median": fit.cdf_median(grid),
        "npmle": _step_cdf(support, npmle_grid(z, mech.loglik, support), grid),
        "npmle_em": _step_cdf(
            support, npmle_grid(z, mech.loglik, support, method="em", max_iter=EM_STEPS), grid
        ),
        "deconvolution_kde": np.interp(grid, wide, density_to_cdf(dens, wide)),
        "empirical_z": empirical_cdf(np.clip(z, -r, r), grid),
    }
    for v in cdfs.values():
        v[-1] = 1.0  # mass beyond r is projected onto r
    return cdfs, fit


def band_check(fit: Any, truth: np.ndarray, level: float = 0.95) -> dict[str, float]:
    """Pointwise and simultaneous ``level`` bands of F at CHECK against the true CDF there."""
    lo, hi = fit.cdf_band(CHECK, level)
    slo, shi = fit.cdf_band(CHECK, level, kind="simultaneous")
    cd = fit.cdf_draws(CHECK)
    ess = [ess_bulk(cd[..., j]) / cd[..., j].size for j in range(CHECK.size)]
    post_sd = cd.reshape(-1, CHECK.size).std(axis=0)
    err = cd.reshape(-1, CHECK.size).mean(axis=0) - truth
    return {
        "pointwise_coverage": float(np.mean((lo <= truth) & (truth <= hi))),
        "simultaneous_covered": int(np.all((slo <= truth) & (truth <= shi))),
        "pointwise_width": float(np.mean(hi - lo)),
        "simultaneous_width": float(np.mean(shi - slo)),
        "ess_cdf_min_per_draw": float(np.nanmin(ess)),
        "ess_mean_per_draw": float(ess_bulk(fit.mean_draws()) / fit.mean_draws().size),
        # error of the posterior mean of F against the posterior sd of F, over CHECK: about 1
        # for a posterior whose spread matches its error at this truth, below 1 if wider
        "error_over_sd_rms": float(np.sqrt(np.mean((err / np.maximum(post_sd, 1e-12)) ** 2))),
        "posterior_sd_mean": float(np.mean(post_sd)),
    }


def _write(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    with path.open("w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    return path


def synthetic(
    kind: str,
    gen: np.random.Generator,
    *,
    epsilons: Sequence[float],
    ns: Sequence[int],
    reps: int,
    fit_kw: dict[str, Any],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """W1 of every method and the band checks, per (eps, n, replicate)."""
    grid = np.linspace(-R, R, 2001)
    truth = true_cdf(grid)
    truth_check = true_cdf(CHECK)
    rows, cov_rows = [], []
    example: dict[str, Any] = {}
    for eps in epsilons:
        mech = mechanism(kind, eps)
        for n in ns:
            for rep in range(reps):
                z = mech.privatize(sample_truth(n, gen), rng=gen).values
                t0 = time.perf_counter()
                cdfs, fit = estimate_cdfs(z, mech, grid, fit_kw, gen)
                secs = time.perf_counter() - t0
                key = {"mechanism": kind, "epsilon": eps, "n": n, "rep": rep}
                for method, cdf in cdfs.items():
                    w1 = wasserstein1(cdf, truth, grid)
                    rows.append({**key, "method": method, "w1": w1, "seconds": round(secs, 2)})
                check = band_check(fit, truth_check)
                cov_rows.append({**key, **check, "sweeps_per_s": round(fit.sweeps_per_second)})
                if rep == 0 and (eps, n) == (epsilons[-1], ns[-1]):
                    example = {"eps": eps, "n": n, "grid": grid, "cdfs": cdfs, "fit": fit}
    return rows, cov_rows, example


def sbc(
    kind: str, eps: float, n: int, reps: int, fit_kw: dict[str, Any], seed: int
) -> list[dict[str, Any]]:
    """Simulation-based calibration: one row per replicate and check point."""
    model = DPMixture(mechanism=mechanism(kind, eps))
    out = []
    for rep in range(reps):
        res = sbc_replicate(
            model, n, CHECK, 1_000_003 * seed + 7919 * round(100 * eps) + rep, fit_kw=fit_kw
        )
        for j, t in enumerate(CHECK):
            out.append(
                {
                    "mechanism": kind,
                    "epsilon": eps,
                    "n": n,
                    "rep": rep,
                    "t": round(float(t), 3),
                    "true_cdf": float(res.truth[j]),
                    "pointwise_covered": int(res.pointwise[j]),
                    "pointwise_randomized_covered": int(
                        res.pointwise_randomized is not None and res.pointwise_randomized[j]
                    ),
                    "simultaneous_covered": int(res.simultaneous),
                    "rank": int(res.rank[j]),
                    "thin": res.thin,
                    "alpha": res.alpha,
                    "ess_cdf_min": res.ess_min,
                }
            )
    return out


def mixing(
    n: int, eps: float, draws: int, seed: int
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The paper's Gibbs sampler against the sampler with the label-integrated moves."""
    gen = noise_source(seed).generator()
    mech = mechanism("laplace", eps)
    z = mech.privatize(sample_truth(n, gen), rng=gen).values
    pts = np.array([-0.5, 0.0, 0.4])
    rows, traces = [], {}
    for label, moves in (("gibbs (paper)", False), ("gibbs + label-integrated moves", True)):
        fit = DPMixture(mechanism=mech, marginal_moves=moves).fit(
            z, draws=draws, warmup=draws // 4, chains=2, rng=gen, diagnostics=False
        )
        cd = fit.cdf_draws(pts)
        row: dict[str, Any] = {"sampler": label, "n": n, "epsilon": eps, "draws": fit.draws}
        row["ess_mean_per_draw"] = ess_bulk(fit.mean_draws()) / fit.mean_draws().size
        for j, t in enumerate(pts):
            row[f"ess_F({t:g})_per_draw"] = ess_bulk(cd[..., j]) / cd[..., j].size
        row["ess_n_clusters_per_draw"] = ess_bulk(fit.n_clusters.astype(float)) / fit.alpha.size
        row["sweeps_per_s"] = fit.sweeps_per_second
        rows.append(row)
        traces[label] = {"cdf": cd[0], "pts": pts, "k": fit.n_clusters[0]}
    return rows, traces


def _real_column(
    name: str, gen: np.random.Generator, size: int | None
) -> tuple[np.ndarray, float, float, str]:
    """(values, lower, upper, label) of a real column with its public range."""
    if name == "randhie":
        from dpbayes.data import load_bundled

        df = load_bundled("randhie")
        first = df.sort_values(["person", "year"]).groupby("person").first()
        x = first["lncoins"].to_numpy(dtype=float)
        lo, hi, label = 0.0, math.log(101.0), "RAND HIE ln(coinsurance + 1)"
    else:
        from sklearn.datasets import load_diabetes

        x = load_diabetes(scaled=False, as_frame=True).frame["bmi"].to_numpy(dtype=float)
        lo, hi, label = 15.0, 45.0, "diabetes body-mass index"
    if size is not None and size < x.shape[0]:
        x = x[gen.permutation(x.shape[0])[:size]]
    return x, lo, hi, label


def real_examples(
    gen: np.random.Generator, *, epsilons: Sequence[float], size: int | None, fit_kw: dict[str, Any]
) -> tuple[list[dict[str, Any]], dict[Any, Any]]:
    """W1 to the non-private empirical CDF and the bands, per data set and eps."""
    rows: list[dict[str, Any]] = []
    figs: dict[Any, Any] = {}
    names = ["randhie"]
    try:
        import sklearn.datasets  # noqa: F401

        names.append("diabetes_bmi")
    except ImportError:  # pragma: no cover - scikit-learn is a test dependency
        pass
    for name in names:
        x_raw, lo, hi, label = _real_column(name, gen, size)
        half, mid = (hi - lo) / 2.0, (hi + lo) / 2.0
        x = np.clip(x_raw, lo, hi) - mid
        grid = np.linspace(-half, half, 2001)
        truth = empirical_cdf(x, grid)
        for eps in epsilons:
            mech = LocalLaplace(epsilon=eps, r=half)
            z = mech.privatize(x, rng=gen).values
            cdfs, fit = estimate_cdfs(z, mech, grid, fit_kw, gen)
            mlo, mhi = fit.interval("mean", 0.95)
            for method, cdf in cdfs.items():
                rows.append(
                    {
                        "data": name,
                        "epsilon": eps,
                        "n": x.shape[0],
                        "method": method,
                        "w1": wasserstein1(cdf, truth, grid),
                        "true_mean": float(np.mean(x) + mid),
                        "mean_interval": f"[{mlo + mid:.3f}, {mhi + mid:.3f}]",
                    }
                )
            g = grid[::20]
            figs[(name, eps)] = {
                "label": label,
                "grid": grid + mid,
                "truth": truth,
                "cdfs": cdfs,
                "band_grid": g + mid,
                "band": fit.cdf_band(g, 0.95),
                "sband": fit.cdf_band(g, 0.95, kind="simultaneous"),
            }
    return rows, figs


def summarise(rows: list[dict[str, Any]], cov_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median W1 per method, wins against the NPMLE and band coverage per cell."""
    out = []
    cells = sorted({(r["mechanism"], r["epsilon"], r["n"]) for r in rows})
    for kind, eps, n in cells:
        sel = [r for r in rows if (r["mechanism"], r["epsilon"], r["n"]) == (kind, eps, n)]
        w = {m: np.array([r["w1"] for r in sel if r["method"] == m]) for m in METHODS}
        entry: dict[str, Any] = {
            "mechanism": kind,
            "epsilon": eps,
            "n": n,
            "reps": w["npmle"].size,
        }
        for m in METHODS:
            entry[f"median_w1_{m}"] = round(float(np.median(w[m])), 4)
        for base in ("npmle", "npmle_em"):
            for est, key in (("dp_mixture", "mean"), ("dp_mixture_median", "median")):
                entry[f"dp_{key}_wins_vs_{base}"] = int(np.sum(w[est] < w[base]))
        cov = [c for c in cov_rows if (c["mechanism"], c["epsilon"], c["n"]) == (kind, eps, n)]
        entry["pointwise_coverage"] = round(
            float(np.mean([c["pointwise_coverage"] for c in cov])), 3
        )
        entry["simultaneous_coverage"] = round(
            float(np.mean([c["simultaneous_covered"] for c in cov])), 3
        )
        entry["ess_cdf_min_per_draw"] = round(
            float(np.median([c["ess_cdf_min_per_draw"] for c in cov])), 3
        )
        out.append(entry)
    return out


def summarise_sbc(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per SBC cell: band coverage (closed, and with ties at 0 or 1 broken at random) and
    the uniformity of the ranks, tested at the level of replicates (:func:`rank_uniformity`:
    the ranks of one replicate's check points are dependent, so a chi-square test on all
    of them pooled would be far too liberal)."""
    out = []
    for cell in sorted({(r["mechanism"], r["epsilon"], r["n"]) for r in rows}):
        sel = [r for r in rows if (r["mechanism"], r["epsilon"], r["n"]) == cell]
        reps = sorted({r["rep"] for r in sel})
        pts = sorted({r["t"] for r in sel})
        by = {(r["rep"], r["t"]): r for r in sel}
        pw = np.array([r["pointwise_covered"] for r in sel], dtype=float)
        pr = np.array([r["pointwise_randomized_covered"] for r in sel], dtype=float)
        sim = np.array([by[(k, pts[0])]["simultaneous_covered"] for k in reps], dtype=float)
        ranks = np.array([[by[(k, t)]["rank"] for t in pts] for k in reps])
        test = rank_uniformity(ranks, int(sel[0]["thin"]))
        per_rep = np.array([[by[(k, t)]["pointwise_covered"] for t in pts] for k in reps])
        out.append(
            {
                "mechanism": cell[0],
                "epsilon": cell[1],
                "n": cell[2],
                "reps": len(reps),
                "pointwise_coverage": round(float(pw.mean()), 3),
                "pointwise_coverage_se": round(
                    float(per_rep.mean(axis=1).std(ddof=1) / np.sqrt(len(reps))), 3
                )
                if len(reps) > 1
                else float("nan"),
                "pointwise_coverage_randomized": round(float(pr.mean()), 3),
                "pointwise_coverage_min_over_t": round(float(per_rep.mean(axis=0).min()), 3),
                "simultaneous_coverage": round(float(sim.mean()), 3),
                "rank_p_replicates": round(test["p_value"], 4),
                "rank_mid_half": round(test["mid_half"], 3),
                "rank_mid_half_se": round(test["mid_half_se"], 3),
            }
        )
    return out


FULL: dict[str, Any] = {
    "lap_eps": (0.5, 1.0, 2.0),
    "ns": (1000, 3000, 10000),
    "gauss_eps": (1.0, 2.0),
    "gauss_ns": (1000, 3000),
    "reps": 10,
    "fit": {"draws": 600, "warmup": 300, "chains": 2},
    "sbc_cells": [("laplace", 1.0, 1000)],
    "sbc_reps": 300,
    "mix": (10000, 2000),
    "real_eps": (1.0, 2.0),
    "real_size": None,
}
SMALL: dict[str, Any] = {
    "lap_eps": (1.0, 2.0),
    "ns": (200, 500),
    "gauss_eps": (2.0,),
    "gauss_ns": (300,),
    "reps": 1,
    "fit": {"draws": 150, "warmup": 75, "chains": 2},
    "sbc_cells": [("laplace", 2.0, 100)],
    "sbc_reps": 3,
    "mix": (300, 100),
    "real_eps": (2.0,),
    "real_size": 300,
}


def run(out_dir: str | Path, *, small: bool = False, seed: int = 0) -> list[Path]:
    """Write the W1, coverage, SBC, mixing and real-data tables and their figures."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    gen = noise_source(seed).generator()
    cfg = SMALL if small else FULL
    fit_kw: dict[str, Any] = {**cfg["fit"], "progress": False}
    lap_eps, gauss_eps, ns, gauss_ns = cfg["lap_eps"], cfg["gauss_eps"], cfg["ns"], cfg["gauss_ns"]
    reps, sbc_cells, sbc_reps = cfg["reps"], cfg["sbc_cells"], cfg["sbc_reps"]
    mix_n, mix_draws, real_eps, real_size = cfg["mix"] + (cfg["real_eps"], cfg["real_size"])
    sbc_kw = dict(fit_kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        rows, cov_rows, example = synthetic(
            "laplace", gen, epsilons=lap_eps, ns=ns, reps=reps, fit_kw=fit_kw
        )
        g_rows, g_cov, _ = synthetic(
            "gaussian", gen, epsilons=gauss_eps, ns=gauss_ns, reps=reps, fit_kw=fit_kw
        )
        rows, cov_rows = rows + g_rows, cov_rows + g_cov
        sbc_rows: list[dict[str, Any]] = []
        for kind, eps, n in sbc_cells:
            sbc_rows += sbc(kind, eps, n, sbc_reps, {**sbc_kw, "diagnostics": False}, seed)
        mix_rows, traces = mixing(mix_n, 1.0, mix_draws, seed)
        real_rows, real_figs = real_examples(gen, epsilons=real_eps, size=real_size, fit_kw=fit_kw)
    summary = summarise(rows, cov_rows)
    sbc_summary = summarise_sbc(sbc_rows)
    paths = [
        _write(out / "nonparametric_w1_runs.csv", rows),
        _write(out / "nonparametric_coverage_runs.csv", cov_rows),
        _write(out / "nonparametric_summary.csv", summary),
        _write(out / "nonparametric_sbc_runs.csv", sbc_rows),
        _write(out / "nonparametric_sbc_summary.csv", sbc_summary),
        _write(out / "nonparametric_mixing.csv", mix_rows),
        _write(out / "nonparametric_real.csv", real_rows),
    ]
    paths += plots.draw_all(
        out,
        rows=rows,
        summary=summary,
        sbc_rows=sbc_rows,
        sbc_summary=sbc_summary,
        example=example,
        traces=traces,
        real=real_figs,
        true_cdf=true_cdf,
        true_pdf=true_pdf,
        methods=METHODS,
    )
    return paths
