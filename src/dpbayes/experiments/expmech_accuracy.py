"""Paper 003 §3.1-3.2: accuracy of the exponential-mechanism posterior releases.

§3.2 (their Figs. 2-3): Hellinger distance H(released posterior, true posterior) for the
exponential mechanism over candidate posteriors with global, smooth (delta = 1e-6) and
local sensitivity, and for the Laplace release of the counts, Beta(1, 1) prior, data with
k = round(0.3 n) ones, n in {10, 100, 1000}, eps in {0.1, 0.5, 1, 2}, 500 runs per setting
on the seeded simulation path. Box plots and a CSV of every run plus a summary CSV.

``expmech-smooth-notes`` is the smooth mechanism as paper 003 calibrates it (exponent eps,
beta = ln(1 - eps / (2 ln(delta / (2 (n + 1)))))), whose argument does not bound the
normaliser (issue 14): it is shown only to measure the accuracy cost of the proven
``expmech-smooth`` (exponent eps/2, the beta of release/expmech/PROOF.md). Not a release.

§3.1 (their Fig. 1): for every candidate r, the max over neighbours y' of
|H(BI(x), r) - H(BI(y'), r)|; the notes' reduction says the largest is at r = BI(x).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import numpy as np

from dpbayes.models import BetaBernoulli, CountStatistics
from dpbayes.models.divergence import hellinger_beta
from dpbayes.privacy import Neighbours
from dpbayes.privacy.noise import noise_source
from dpbayes.progress import Progress
from dpbayes.release.counts.mechanism import plan_counts
from dpbayes.release.expmech.candidates import coin_scores, coin_smooth_sensitivity
from dpbayes.release.expmech.mechanism import plan_expmech_coin, select_candidate

NAME = "expmech-accuracy"
DESCRIPTION = "paper 003 §3.1-3.2: Hellinger accuracy of expmech (global/smooth/local) vs Laplace"

MECHANISMS = (
    "expmech-global",
    "expmech-smooth",
    "expmech-smooth-notes",
    "expmech-local",
    "laplace",
)
PRIVATE = ("expmech-global", "expmech-smooth", "laplace")
DELTA = 1e-6
PROPORTION = 0.3


def _runs(n: int, eps: float, mechanism: str, runs: int, gen: np.random.Generator) -> np.ndarray:
    model = BetaBernoulli(alpha=1.0, beta=1.0)
    k = round(PROPORTION * n)
    src = noise_source(gen)
    out = np.empty(runs)
    stats = CountStatistics(counts=np.array([k, n - k]), n=n)
    if mechanism == "laplace":  # the "laplace" release of the counts, planned once
        lap = plan_counts(
            model,
            stats,
            epsilon=eps,
            delta=0.0,
            neighbours=Neighbours.SUBSTITUTE,
            mechanism="laplace",
        )
        for i in range(runs):
            post = lap.run(src).posterior
            out[i] = hellinger_beta(post.a, post.b, 1.0 + k, 1.0 + n - k)
        return out
    if mechanism == "expmech-smooth-notes":  # paper 003's calibration, for comparison only
        beta = math.log1p(eps / (2.0 * math.log(2.0 * (n + 1) / DELTA)))
        scale = 2.0 * coin_smooth_sensitivity(1.0, 1.0, n, k, beta) / eps
        scores = coin_scores(1.0, 1.0, n, k)
        for i in range(runs):
            out[i] = -scores[select_candidate(src, scores, scale)]
        return out
    kind = mechanism.split("-")[1]
    plan = plan_expmech_coin(
        model,
        stats,
        epsilon=eps,
        delta=DELTA if kind == "smooth" else 0.0,
        neighbours=Neighbours.SUBSTITUTE,
        allow_non_private=True,
        sensitivity=kind,
    )
    scores = coin_scores(1.0, 1.0, n, k)
    for i in range(runs):
        j = plan.run(src).released["counts"][0]
        out[i] = -scores[j]
    return out


def _reduction_check(n: int, counts: list[int]) -> list[dict[str, Any]]:
    """Per candidate r: max over neighbours y' of |H(BI(x), r) - H(BI(y'), r)| (notes §3.1)."""
    rows = []
    for k in counts:
        here = coin_scores(1.0, 1.0, n, k)
        diffs = [
            np.abs(here - coin_scores(1.0, 1.0, n, k2)) for k2 in (k - 1, k + 1) if 0 <= k2 <= n
        ]
        worst = np.max(np.array(diffs), axis=0)
        for j in range(n + 1):
            rows.append({"n": n, "k": k, "candidate": j, "max_utility_change": float(worst[j])})
    return rows


def _plot(
    summary_rows: list[dict[str, Any]],
    all_runs: dict[tuple[int, float, str], np.ndarray],
    ns: list[int],
    epss: list[float],
    path: Path,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {
        "expmech-global": "#1f77b4",
        "expmech-smooth": "#2ca02c",
        "expmech-smooth-notes": "#98df8a",
        "expmech-local": "#ff7f0e",
        "laplace": "#7f7f7f",
    }
    fig, axes = plt.subplots(1, len(ns), figsize=(5.2 * len(ns), 4.4), squeeze=False)
    for ax, n in zip(axes[0], ns, strict=True):
        width = 0.8 / len(MECHANISMS)
        for mi, mech in enumerate(MECHANISMS):
            pos = [e + (mi - (len(MECHANISMS) - 1) / 2) * width for e in range(len(epss))]
            data = [all_runs[(n, eps, mech)] for eps in epss]
            bp = ax.boxplot(
                data,
                positions=pos,
                widths=width * 0.9,
                patch_artist=True,
                showfliers=False,
                medianprops={"color": "black"},
            )
            for box in bp["boxes"]:
                box.set_facecolor(colours[mech])
            ax.plot([], [], color=colours[mech], lw=8, label=mech)
        ax.set_xticks(range(len(epss)), [f"eps={e:g}" for e in epss])
        ax.set_yscale("symlog", linthresh=1e-3)  # 0 = the true posterior was chosen
        ax.set_ylim(0, 1.05)
        ax.set_title(f"n = {n}")
        ax.set_ylabel("Hellinger(released, true posterior)")
    axes[0][0].legend(loc="lower left", fontsize=8)
    fig.suptitle("Paper 003 §3.2: accuracy of private posteriors (Beta(1,1), k = 0.3 n)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_reduction(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for k in sorted({r["k"] for r in rows}):
        xs = [r["candidate"] for r in rows if r["k"] == k]
        ys = [r["max_utility_change"] for r in rows if r["k"] == k]
        (line,) = ax.plot(xs, ys, marker=".", label=f"data k = {k}")
        ax.axvline(k, color=line.get_color(), ls=":", lw=1)
    ax.set_xlabel("candidate r = Beta(1 + j, 1 + n - j), index j")
    ax.set_ylabel("max over neighbours |u(x, r) - u(y', r)|")
    ax.set_title("Paper 003 §3.1: the max over r is at r = BI(x) (dotted)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(out_dir: Path, *, small: bool = False, seed: int = 0) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ns = [10, 100] if small else [10, 100, 1000]
    epss = [0.5, 1.0] if small else [0.1, 0.5, 1.0, 2.0]
    runs = 100 if small else 500
    gen = noise_source(seed).generator()  # the seeded simulation stream (privacy.noise)
    all_runs: dict[tuple[int, float, str], np.ndarray] = {}
    run_rows: list[dict[str, Any]] = []
    summary: list[dict[str, Any]] = []
    bar = Progress(len(ns) * len(epss) * len(MECHANISMS), "expmech experiment", unit="setting")
    for n in ns:
        for eps in epss:
            for mech in MECHANISMS:
                h = _runs(n, eps, mech, runs, gen)
                bar.update(1)
                all_runs[(n, eps, mech)] = h
                run_rows.extend(
                    {"n": n, "epsilon": eps, "mechanism": mech, "run": i, "hellinger": float(v)}
                    for i, v in enumerate(h)
                )
                q25, med, q75 = np.quantile(h, [0.25, 0.5, 0.75])
                summary.append(
                    {
                        "n": n,
                        "epsilon": eps,
                        "mechanism": mech,
                        "runs": runs,
                        "private": mech in PRIVATE,
                        "median_hellinger": float(med),
                        "q25": float(q25),
                        "q75": float(q75),
                        "mean_hellinger": float(np.mean(h)),
                    }
                )
    bar.close()
    paths = []
    for name, rows in (
        ("expmech_accuracy_runs.csv", run_rows),
        ("expmech_accuracy_summary.csv", summary),
    ):
        path = out / name
        with path.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        paths.append(path)
    fig = out / "expmech_accuracy.png"
    _plot(summary, all_runs, ns, epss, fig)
    paths.append(fig)
    red_n = 20
    red = _reduction_check(red_n, [2, 6, 14])
    red_csv = out / "expmech_reduction.csv"
    with red_csv.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(red[0]))
        writer.writeheader()
        writer.writerows(red)
    red_png = out / "expmech_reduction.png"
    _plot_reduction(red, red_png)
    paths += [red_csv, red_png]
    return paths
