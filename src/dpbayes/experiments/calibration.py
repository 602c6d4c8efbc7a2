"""Calibration of the naive, noise-aware and non-private posteriors of every release.

For each mechanism and eps in {0.01, 0.1, 1, 10}: draw the parameter from the prior,
then data, then the release; record the probability integral transform
u = F_posterior(true parameter) of the naive posterior (noisy values taken as exact), the
noise-aware posterior (:mod:`dpbayes.release.counts.noise_aware`) and the exact non-private
posterior. A central interval of level l covers the truth iff (1 - l)/2 <= u <= (1 + l)/2,
so one CDF evaluation gives the 50%, 90% and 95% coverages; a calibrated posterior has
u ~ Uniform(0, 1) (simulation-based calibration, Talts et al. 2018: the rank histogram
with infinitely many posterior draws is the histogram of u).

Writes ``calibration_coverage.csv`` (coverage with binomial standard errors),
``calibration_ranks.csv`` (histograms of u), ``calibration_coverage.png`` and
``calibration_sbc.png``.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dpbayes.models import BetaBernoulli, DirichletCategorical, NormalMean
from dpbayes.models.statistics import CountStatistics, SumStatistics
from dpbayes.privacy import Neighbours
from dpbayes.privacy.noise import noise_source
from dpbayes.progress import Progress
from dpbayes.release.base import noise_aware_posterior
from dpbayes.release.counts.mechanism import plan_counts, plan_normal_mean
from dpbayes.release.expmech.mechanism import plan_expmech_coin
from dpbayes.release.input.mechanism import plan_input_coin

NAME = "calibration"
DESCRIPTION = "coverage and SBC of naive vs noise-aware vs non-private posteriors, all releases"

EPSILONS = (0.01, 0.1, 1.0, 10.0)
LEVELS = (0.5, 0.9, 0.95)
KINDS = ("naive", "noise-aware", "non-private")
DELTA = 1e-6
BINS = 20


@dataclass(frozen=True)
class Setting:
    """One mechanism: its model, how to draw (truth, stats), and how to plan a release."""

    model: Any
    draw: Callable[[np.random.Generator, int], tuple[float, Any]]
    plan: Callable[..., Any]
    delta: float
    n_full: int
    n_small: int
    marginal: bool = False  # Dirichlet: calibrate the first coordinate's marginal


_COIN = BetaBernoulli(alpha=1.0, beta=1.0)
_DIE = DirichletCategorical(alpha=[1.0, 1.0, 1.0])
_NORMAL = NormalMean(prior_mean=0.0, prior_sd=1.0, noise_sd=1.0, lower=-12.0, upper=12.0)


def _draw_coin(gen: np.random.Generator, n: int) -> tuple[float, Any]:
    theta = float(gen.beta(_COIN.alpha, _COIN.beta))
    k = int(gen.binomial(n, theta))
    return theta, CountStatistics(counts=np.array([k, n - k]), n=n)


def _draw_die(gen: np.random.Generator, n: int) -> tuple[float, Any]:
    theta = gen.dirichlet(np.asarray(_DIE.alpha))
    return float(theta[0]), CountStatistics(counts=gen.multinomial(n, theta), n=n)


def _draw_normal(gen: np.random.Generator, n: int) -> tuple[float, Any]:
    mu = float(gen.normal(_NORMAL.prior_mean, _NORMAL.prior_sd))
    x = np.clip(gen.normal(mu, _NORMAL.noise_sd, size=n), _NORMAL.lower, _NORMAL.upper)
    return mu, SumStatistics(n=n, total=float(np.sum(x)))


def _counts(mech: str) -> Callable[..., Any]:
    def plan(model: Any, stats: Any, **kw: Any) -> Any:
        return plan_counts(model, stats, mechanism=mech, **kw)

    return plan


def _normal(mech: str) -> Callable[..., Any]:
    def plan(model: Any, stats: Any, **kw: Any) -> Any:
        return plan_normal_mean(model, stats, mechanism=mech, **kw)

    return plan


SETTINGS: dict[str, Setting] = {
    "laplace-coin": Setting(_COIN, _draw_coin, _counts("laplace"), 0.0, 1000, 100),
    "geometric-coin": Setting(_COIN, _draw_coin, _counts("geometric"), 0.0, 1000, 100),
    "gaussian-coin": Setting(_COIN, _draw_coin, _counts("gaussian"), DELTA, 1000, 100),
    "laplace-die": Setting(_DIE, _draw_die, _counts("laplace"), 0.0, 100, 30, marginal=True),
    "laplace-normal": Setting(_NORMAL, _draw_normal, _normal("laplace"), 0.0, 1000, 100),
    "gaussian-normal": Setting(_NORMAL, _draw_normal, _normal("gaussian"), DELTA, 1000, 100),
    "expmech-coin": Setting(_COIN, _draw_coin, plan_expmech_coin, 0.0, 100, 20),
    "input-coin": Setting(_COIN, _draw_coin, plan_input_coin, 0.0, 1000, 100),
}


def _cdf(post: Any, truth: float, marginal: bool) -> float:
    dist = post.marginal(0) if marginal else post
    return float(np.clip(dist.cdf(truth), 0.0, 1.0))


def pit_values(
    mechanism: str, epsilon: float, reps: int, *, n: int | None = None, seed: Any = 0
) -> dict[str, np.ndarray]:
    """u = F(truth) for the naive, noise-aware and non-private posteriors, ``reps`` times."""
    setting = SETTINGS[mechanism]
    n = setting.n_full if n is None else n
    src = noise_source(seed)
    gen = src.generator()
    out = {kind: np.empty(reps) for kind in KINDS}
    for r in range(reps):
        truth, stats = setting.draw(gen, n)
        plan = setting.plan(
            setting.model,
            stats,
            epsilon=epsilon,
            delta=setting.delta,
            neighbours=Neighbours.SUBSTITUTE,
        )
        rel = plan.run(src)
        out["naive"][r] = _cdf(rel.posterior, truth, setting.marginal)
        out["noise-aware"][r] = _cdf(noise_aware_posterior(rel), truth, setting.marginal)
        exact = setting.model.posterior_from(stats)
        out["non-private"][r] = _cdf(exact, truth, setting.marginal)
    return out


def coverage(u: np.ndarray, level: float) -> float:
    """Fraction of central ``level`` intervals that contain the truth, from PIT values."""
    tail = (1.0 - level) / 2.0
    return float(np.mean((u >= tail) & (u <= 1.0 - tail)))


def run(out_dir: Path | str, *, small: bool = False, seed: int = 0) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    reps = 24 if small else 400
    cov_rows: list[dict[str, Any]] = []
    rank_rows: list[dict[str, Any]] = []
    all_u: dict[tuple[str, float], dict[str, np.ndarray]] = {}
    bar = Progress(len(SETTINGS) * len(EPSILONS), "calibration experiment", unit="setting")
    for mi, (mech, setting) in enumerate(SETTINGS.items()):
        n = setting.n_small if small else setting.n_full
        for ei, eps in enumerate(EPSILONS):
            u = pit_values(mech, eps, reps, n=n, seed=seed * 1000 + mi * 10 + ei)
            all_u[(mech, eps)] = u
            bar.update(1)
            for kind in KINDS:
                for level in LEVELS:
                    c = coverage(u[kind], level)
                    cov_rows.append(
                        {
                            "mechanism": mech,
                            "n": n,
                            "epsilon": eps,
                            "posterior": kind,
                            "level": level,
                            "coverage": round(c, 4),
                            "se": round(math.sqrt(level * (1 - level) / reps), 4),
                            "reps": reps,
                        }
                    )
                hist, _ = np.histogram(u[kind], bins=BINS, range=(0.0, 1.0))
                for b, count in enumerate(hist):
                    rank_rows.append(
                        {
                            "mechanism": mech,
                            "epsilon": eps,
                            "posterior": kind,
                            "bin": b,
                            "count": int(count),
                        }
                    )
    bar.close()
    paths = [out / "calibration_coverage.csv", out / "calibration_ranks.csv"]
    for path, rows in zip(paths, (cov_rows, rank_rows), strict=True):
        with path.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    paths.append(_plot_coverage(cov_rows, reps, out / "calibration_coverage.png"))
    paths.append(_plot_sbc(all_u, out / "calibration_sbc.png"))
    return paths


_COLOURS = {"naive": "#d62728", "noise-aware": "#1f77b4", "non-private": "#7f7f7f"}


def _plot_coverage(rows: list[dict[str, Any]], reps: int, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mechs = list(SETTINGS)
    cols = 4
    fig, axes = plt.subplots(2, cols, figsize=(3.6 * cols, 6.6), sharey=True, squeeze=False)
    level = 0.9
    band = 2 * math.sqrt(level * (1 - level) / reps)
    for ax, mech in zip(axes.flat, mechs, strict=False):
        for kind in KINDS:
            pts = [
                (r["epsilon"], r["coverage"])
                for r in rows
                if r["mechanism"] == mech and r["posterior"] == kind and r["level"] == level
            ]
            ax.plot(*zip(*pts, strict=True), "o-", color=_COLOURS[kind], label=kind)
        ax.axhspan(level - band, level + band, color="#bbbbbb", alpha=0.4, lw=0)
        ax.axhline(level, color="black", lw=0.8)
        ax.set_xscale("log")
        ax.set_ylim(0, 1.02)
        ax.set_title(mech, fontsize=10)
        ax.set_xlabel("epsilon")
    axes[0][0].set_ylabel("coverage of 90% intervals")
    axes[1][0].set_ylabel("coverage of 90% intervals")
    axes[0][0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Coverage of central 90% intervals ({reps} draws from the prior; grey: +-2 se)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _plot_sbc(all_u: dict[tuple[str, float], dict[str, np.ndarray]], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mechs = list(SETTINGS)
    eps = 0.1
    fig, axes = plt.subplots(2, len(mechs), figsize=(2.3 * len(mechs), 4.4), squeeze=False)
    for j, mech in enumerate(mechs):
        for i, kind in enumerate(("naive", "noise-aware")):
            ax = axes[i][j]
            u = all_u[(mech, eps)][kind]
            ax.hist(u, bins=BINS, range=(0, 1), color=_COLOURS[kind])
            ax.axhline(u.size / BINS, color="black", lw=0.8)
            ax.set_yticks([])
            ax.set_title(f"{mech}\n{kind}" if i == 0 else kind, fontsize=8)
    fig.suptitle(f"SBC rank (PIT) histograms at eps = {eps}: flat = calibrated")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
