"""Paper 001's CDF bands at a fixed truth: the credible level against a calibrated one.

The truth, mechanisms and check points are those of :mod:`dpbayes.experiments.nonparametric`
(two truncated Normals on [-1, 1], clipping r = 1, bands checked at -0.9, ..., 0.9). Per
(mechanism, eps, n) and run: the DP-mixture fit, its 95% credible bands (pointwise and
simultaneous) and the bands of
:func:`~dpbayes.nonparametric.calibration.calibrate_bands` (credible levels chosen by
refits on data simulated from the fitted P; with its bias correction, the default, and
without), each checked against the true CDF. Writes
the runs, a summary per cell (mean coverage with its standard error over runs, the mean
calibrated levels and band widths) and a figure of the coverage per cell.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from dpbayes.experiments._paper004 import write_csv
from dpbayes.experiments.nonparametric import CHECK, mechanism, sample_truth, true_cdf
from dpbayes.nonparametric import ConvergenceWarning, DPMixture
from dpbayes.nonparametric.calibration import calibrate_bands
from dpbayes.privacy.noise import noise_source

NAME = "nonparametric_bands"
DESCRIPTION = (
    "paper 001: coverage of the DP mixture's CDF bands at a fixed truth, credible level "
    "against bootstrap-calibrated levels"
)

LEVEL = 0.95

FULL: dict[str, Any] = {
    "cells": [("laplace", eps, n) for eps in (0.5, 1.0, 2.0) for n in (1000, 3000)]
    + [("gaussian", 1.0, 1000), ("laplace", 1.0, 10000)],
    "reps": 10,
    "refits": 20,
    "fit": {"draws": 600, "warmup": 300, "chains": 2},
}
SMALL: dict[str, Any] = {
    "cells": [("laplace", 2.0, 200)],
    "reps": 2,
    "refits": 3,
    "fit": {"draws": 100, "warmup": 50, "chains": 2},
}


def _covered(lo: np.ndarray, hi: np.ndarray, truth: np.ndarray) -> np.ndarray:
    return (lo <= truth) & (truth <= hi)  # type: ignore[no-any-return]


def one_run(
    kind: str, eps: float, n: int, gen: np.random.Generator, cfg: dict[str, Any]
) -> dict[str, Any]:
    """Fit one data set and check its credible and calibrated bands at CHECK."""
    mech = mechanism(kind, eps)
    truth = true_cdf(CHECK)
    z = mech.privatize(sample_truth(n, gen), rng=gen).values
    t0 = time.perf_counter()
    fit = DPMixture(mechanism=mech).fit(z, rng=gen, progress=False, diagnostics=False, **cfg["fit"])
    lo, hi = fit.cdf_band(CHECK, LEVEL)
    slo, shi = fit.cdf_band(CHECK, LEVEL, kind="simultaneous")
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    cal = calibrate_bands(
        fit,
        CHECK,
        LEVEL,
        refits=cfg["refits"],
        draws=min(cfg["fit"]["draws"], 300),
        rng=gen,
        progress=False,
    )
    cal_s = time.perf_counter() - t0
    clo, chi = cal.pointwise
    cslo, cshi = cal.simultaneous
    plain_pw, plain_sim = cal.uncorrected_levels
    plo, phi = fit.cdf_band(CHECK, plain_pw)
    pslo, pshi = fit.cdf_band(CHECK, plain_sim, kind="simultaneous")
    return {
        "mechanism": kind,
        "epsilon": eps,
        "n": n,
        "credible_pointwise_coverage": float(np.mean(_covered(lo, hi, truth))),
        "credible_simultaneous_covered": int(np.all(_covered(slo, shi, truth))),
        "credible_pointwise_width": float(np.mean(hi - lo)),
        "calibrated_pointwise_level": cal.pointwise_level,
        "calibrated_simultaneous_level": cal.simultaneous_level,
        "calibrated_pointwise_coverage": float(np.mean(_covered(clo, chi, truth))),
        "calibrated_simultaneous_covered": int(np.all(_covered(cslo, cshi, truth))),
        "calibrated_pointwise_width": float(np.mean(chi - clo)),
        "plain_pointwise_level": plain_pw,
        "plain_simultaneous_level": plain_sim,
        "plain_pointwise_coverage": float(np.mean(_covered(plo, phi, truth))),
        "plain_simultaneous_covered": int(np.all(_covered(pslo, pshi, truth))),
        "capped": int(cal.capped),
        "fit_seconds": round(fit_s, 2),
        "calibration_seconds": round(cal_s, 2),
    }


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per cell: mean coverage (and its standard error over runs) of each band."""
    out = []
    for cell in dict.fromkeys((r["mechanism"], r["epsilon"], r["n"]) for r in rows):
        sel = [r for r in rows if (r["mechanism"], r["epsilon"], r["n"]) == cell]
        entry: dict[str, Any] = {"mechanism": cell[0], "epsilon": cell[1], "n": cell[2]}
        entry["runs"] = len(sel)
        for key in (
            "credible_pointwise_coverage",
            "credible_simultaneous_covered",
            "calibrated_pointwise_coverage",
            "calibrated_simultaneous_covered",
            "plain_pointwise_coverage",
            "plain_simultaneous_covered",
            "calibrated_pointwise_level",
            "calibrated_simultaneous_level",
            "plain_pointwise_level",
            "plain_simultaneous_level",
            "credible_pointwise_width",
            "calibrated_pointwise_width",
        ):
            v = np.array([r[key] for r in sel], dtype=float)
            entry[key] = round(float(v.mean()), 3)
            if key.endswith(("coverage", "covered")):
                se = v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else float("nan")
                entry[key + "_se"] = round(float(se), 3)
        out.append(entry)
    return out


def _figure(out: Path, summary: list[dict[str, Any]]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{s['mechanism'][:3]} eps {s['epsilon']:g}\nn {s['n']}" for s in summary]
    x = np.arange(len(summary))
    fig, axes = plt.subplots(2, 1, figsize=(max(7.0, 1.25 * len(summary)), 7.0))
    for ax, kind in zip(axes, ("pointwise", "simultaneous"), strict=True):
        suffix = "coverage" if kind == "pointwise" else "covered"
        for shift, which, colour, label in (
            (-0.18, "credible", "grey", "95% credible level"),
            (0.0, "plain", "C1", "calibrated, plain bootstrap"),
            (0.18, "calibrated", "C0", "calibrated, bias-corrected (default)"),
        ):
            key = f"{which}_{kind}_{suffix}"
            y = [s[key] for s in summary]
            err = [0.0 if np.isnan(s[key + "_se"]) else s[key + "_se"] for s in summary]
            ax.errorbar(x + shift, y, yerr=err, fmt="o", color=colour, label=label, capsize=3)
        ax.axhspan(LEVEL - 0.03, LEVEL + 0.03, color="C2", alpha=0.15, label="0.95 +- 0.03")
        ax.set_xticks(x, labels, fontsize=7)
        ax.set_xlim(-0.6, len(summary) - 0.4)
        ax.set_ylim(0.5, 1.02)
        ax.set_ylabel("coverage at the fixed truth")
        ax.set_title(f"{kind} 95% bands", fontsize=10)
        if kind == "pointwise":
            ax.legend(fontsize=7, loc="lower center", ncol=2)
    fig.tight_layout()
    path = out / "nonparametric_bands.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def run(out_dir: str | Path, *, small: bool = False, seed: int = 0) -> list[Path]:
    """Write the runs, the per-cell summary and the coverage figure."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = SMALL if small else FULL
    gen = noise_source(seed).generator()
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for kind, eps, n in cfg["cells"]:
            for rep in range(cfg["reps"]):
                rows.append({"rep": rep, **one_run(kind, eps, n, gen, cfg)})
    summary = summarise(rows)
    return [
        write_csv(out / "nonparametric_bands_runs.csv", rows),
        write_csv(out / "nonparametric_bands_summary.csv", summary),
        _figure(out, summary),
    ]
