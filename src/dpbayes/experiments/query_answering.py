"""Paper 000's evaluation, reproduced and extended: ``dpbayes experiment query-answering``.

Three parts, each a CSV and a figure:

1. ``methods``: error and time of the exact, PC (FFT), PC (direct convolution, Algorithm 2)
   and MC (Algorithm 1) evaluations of the BLUE's error distribution as the history grows
   (random range queries on a 64-cell domain). The error is the largest absolute error
   of P(|E| <= d) over d in {0.5, 1, 2, 3} std, against the exact method at accuracy 1e-10.
2. ``budget``: the privacy budget the engine spends on a workload of random marginal and
   range queries over the bundled RAND HIE data, against answering each query with
   fresh noise (the smallest eps that meets the same requirement alone), both with
   parallel composition over cells; and how many queries each answers within eps = 1.
3. ``coverage``: over repeated runs (fresh noise, same data), how often the engine's
   credible intervals contain the true answer, against the nominal level; and the
   width of the non-negative-integer posterior's intervals relative to the paper's.
"""

from __future__ import annotations

import csv
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from dpbayes.answers import Bins, Cube, History, LaplaceSum, QueryEngine
from dpbayes.privacy import Accountant, BudgetExceeded
from dpbayes.privacy.noise import noise_source

NAME = "query-answering"
DESCRIPTION = "paper 000: error-distribution methods, budget saved, interval coverage"


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# ---------------------------------------------------------------------- part 1
def _history_scales(k: int, gen: np.random.Generator, n: int = 64) -> np.ndarray:
    """Error scales of the BLUE of a random range from k random range answers."""
    h = History(n)
    for _ in range(k):
        lo, hi = sorted(gen.integers(0, n, size=2))
        c = np.zeros(n)
        c[lo : hi + 1] = 1.0
        h.add(c, 0.0, float(gen.uniform(0.05, 0.5)))
    for _ in range(50):
        lo, hi = sorted(gen.integers(0, n, size=2))
        q = np.zeros(n)
        q[lo : hi + 1] = 1.0
        if h.is_estimable(q):
            break
    else:  # fall back to a combination of asked queries
        q = h.coefficients[: min(3, k)].sum(axis=0)
    b = h.blue(q)
    return b.scales[b.scales > 0]


def direct_convolution_cost(scales: np.ndarray, h: float, accuracy: float) -> float:
    """Multiply-adds of Algorithm 2 by direct convolution, shortest vector first."""
    lengths = 2 * np.ceil(np.sort(scales) / h * math.log(20 * scales.size / accuracy)) + 1
    done = np.cumsum(lengths) - np.arange(lengths.size)
    return float(np.sum(done[:-1] * lengths[1:]))


def _timed(fn: Any, reps: int) -> tuple[Any, float]:
    best, out = math.inf, None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def methods_table(
    ks: list[int], seed: int, reps: int = 3, mc_large: bool = True
) -> list[dict[str, Any]]:
    gen = noise_source(seed).generator()
    rows = []
    for k in ks:
        scales = _history_scales(k, gen)
        ref = LaplaceSum(scales, method="exact", accuracy=1e-10)
        ds = np.array([0.5, 1.0, 2.0, 3.0]) * ref.std
        truth = ref.prob_within(ds)
        pc = LaplaceSum(scales, method="pc", accuracy=1e-6)
        h = pc.details["grid_step"]
        runs: list[tuple[str, dict[str, Any]]] = [
            ("exact", {"method": "exact", "accuracy": 1e-6}),
            ("pc-fft", {"method": "pc", "grid_step": h}),
            ("mc-1e5", {"method": "mc", "n_samples": 10**5, "rng": gen}),
        ]
        if mc_large and scales.size <= 200:  # 10^6 draws of each of k Laplaces
            runs.append(("mc-1e6", {"method": "mc", "n_samples": 10**6, "rng": gen}))
        if direct_convolution_cost(scales, h, 1e-6) < 3e8:  # quadratic: skip when huge
            runs.append(("pc-direct", {"method": "pc-direct", "grid_step": h}))
        for label, kw in runs:
            n_reps = 1 if label.startswith("mc") or label == "pc-direct" else reps

            def build(
                kw: dict[str, Any] = kw,
                scales: np.ndarray = scales,
                ds: np.ndarray = ds,
                truth: np.ndarray = truth,
            ) -> tuple[float, LaplaceSum]:
                d = LaplaceSum(scales, **kw)
                return float(np.max(np.abs(d.prob_within(ds) - truth))), d

            (err, dist), secs = _timed(build, n_reps)
            rows.append(
                {
                    "history": k,
                    "scales": scales.size,
                    "method": label,
                    "abs_error": err,
                    "reported_error": dist.error,
                    "seconds": secs,
                    "formula": dist.details.get("formula", ""),
                }
            )
    return rows


def _plot_methods(rows: list[dict[str, Any]], path: Path) -> Path:
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for label in dict.fromkeys(r["method"] for r in rows):
        sel = [r for r in rows if r["method"] == label]
        ks = [r["history"] for r in sel]
        axes[0].loglog(ks, [max(r["abs_error"], 1e-16) for r in sel], "o-", label=label)
        axes[1].loglog(ks, [r["seconds"] for r in sel], "o-", label=label)
    axes[0].set_xlabel("answers in the history")
    axes[0].set_ylabel("max |error| of P(|E| <= d)")
    axes[1].set_xlabel("answers in the history")
    axes[1].set_ylabel("seconds")
    axes[0].legend(fontsize=8)
    axes[0].set_title("accuracy", fontsize=10)
    axes[1].set_title("time", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------- data
def randhie_cube() -> Cube:
    """health (4) x doctor visits (7 bins) x year (5) x idp (2): 280 cells."""
    from dpbayes.data import load_bundled

    return Cube.from_table(
        load_bundled("randhie"),
        {
            "health": ["excellent", "good", "fair", "poor"],
            "mdvis": Bins([0, 1, 2, 3, 5, 8, 13, math.inf]),
            "year": [1, 2, 3, 4, 5],
            "idp": [0, 1],
        },
    )


_EDGES = [0, 1, 2, 3, 5, 8, 13]


def random_query(gen: np.random.Generator) -> str:
    """A random marginal (1-2 attributes fixed) or range (doctor visits) query."""
    kind = gen.integers(0, 3)
    health = ["excellent", "good", "fair", "poor"]
    if kind == 0:  # one-way or two-way marginal cell
        parts = [f"health = {health[gen.integers(0, 4)]}"]
        if gen.random() < 0.5:
            parts.append(f"year = {gen.integers(1, 6)}")
        if gen.random() < 0.3:
            parts.append(f"idp = {gen.integers(0, 2)}")
        return " and ".join(parts)
    i, j = sorted(gen.choice(len(_EDGES) + 1, size=2, replace=False))
    hi = "inf" if j == len(_EDGES) else str(_EDGES[j])
    rng_part = f"mdvis in [{_EDGES[i]}, {hi})"
    if kind == 1:
        return rng_part
    return f"{rng_part} and year in [{gen.integers(1, 3)}, {gen.integers(3, 6)}]"


# ---------------------------------------------------------------------- part 2
def marginal_workload(n: int, seed: int) -> list[tuple[str, float, float]]:
    """Random marginal and range queries; half of them repeat an earlier query with a new
    requirement (users come back to the same statistics)."""
    gen = noise_source(seed).generator()
    out: list[tuple[str, float, float]] = []
    for _ in range(n):
        where = out[gen.integers(0, len(out))][0] if out and gen.random() < 0.5 else None
        out.append(
            (
                where or random_query(gen),
                float(gen.choice([50.0, 100.0, 200.0])),
                float(gen.choice([0.9, 0.95])),
            )
        )
    return out


_VISITS = [*range(0, 16), 16, 20, 25, 30, 40, 50, 78]


def visits_cube() -> Cube:
    """Doctor visits (mdvis) in 22 bins: the 1-d histogram of paper 000's range queries."""
    from dpbayes.data import load_bundled

    return Cube.from_table(load_bundled("randhie"), {"mdvis": Bins(_VISITS)})


def range_workload(n: int, seed: int) -> list[tuple[str, float, float]]:
    """Random ranges [a, b) of doctor visits, as in paper 000's experiments."""
    gen = noise_source(seed).generator()
    out = []
    for _ in range(n):
        i, j = sorted(gen.choice(len(_VISITS), size=2, replace=False))
        out.append(
            (
                f"mdvis in [{_VISITS[i]}, {_VISITS[j]})",
                float(gen.choice([50.0, 100.0, 200.0])),
                float(gen.choice([0.9, 0.95])),
            )
        )
    return out


def budget_table(
    cube: Cube, workload: list[tuple[str, float, float]], seed: int, total: float, label: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    eng = QueryEngine(cube, accountant=Accountant(1e9, simulation=True), rng=seed)
    base = Accountant(1e9)
    rows: list[dict[str, Any]] = []
    for i, (where, d, p) in enumerate(workload):
        t0 = time.perf_counter()
        a = eng.ask(where, half_width=d, confidence=p)
        secs = time.perf_counter() - t0
        q = cube.query(where)
        alone = q.sensitivity * math.log(1.0 / (1.0 - p)) / d
        base.spend(alone, scope=[f"cell:{j}" for j in q.cells])
        rows.append(
            {
                "workload": label,
                "query": i + 1,
                "where": where,
                "half_width": d,
                "confidence": p,
                "status": a.status,
                "epsilon": a.epsilon,
                "fresh_only_epsilon": alone,
                "engine_spent": eng.accountant.spent[0],
                "fresh_only_spent": base.spent[0],
                "seconds": secs,
            }
        )
    # With a finite budget: how many queries does each answer?
    eng2 = QueryEngine(cube, accountant=Accountant(total, simulation=True), rng=seed + 1)
    base2 = Accountant(total)
    answered_engine = answered_base = 0
    for where, d, p in workload:
        answered_engine += eng2.ask(where, half_width=d, confidence=p).answered
        q = cube.query(where)
        try:
            base2.spend(
                q.sensitivity * math.log(1.0 / (1.0 - p)) / d,
                scope=[f"cell:{j}" for j in q.cells],
            )
            answered_base += 1
        except BudgetExceeded:
            pass
    engine_spent = float(rows[-1]["engine_spent"])
    fresh_spent = float(rows[-1]["fresh_only_spent"])
    summary = {
        "workload": label,
        "cells": cube.n_cells,
        "queries": len(workload),
        "engine_spent": engine_spent,
        "fresh_only_spent": fresh_spent,
        "saved_fraction": 1.0 - engine_spent / fresh_spent,
        "from_history": sum(r["status"] == "history" for r in rows),
        "budget": total,
        "answered_engine": answered_engine,
        "answered_fresh_only": answered_base,
        "median_seconds": float(np.median([r["seconds"] for r in rows])),
        "max_seconds": float(np.max([r["seconds"] for r in rows])),
    }
    return rows, summary


def _plot_budget(parts: list[tuple[list[dict[str, Any]], dict[str, Any]]], path: Path) -> Path:
    plt = _plt()
    fig, axes = plt.subplots(1, len(parts), figsize=(5 * len(parts), 3.8), squeeze=False)
    for ax, (rows, summary) in zip(axes[0], parts, strict=True):
        x = [r["query"] for r in rows]
        ax.plot(x, [r["fresh_only_spent"] for r in rows], label="fresh noise for every query")
        ax.plot(x, [r["engine_spent"] for r in rows], label="query engine (paper 000 §5)")
        hist = [r for r in rows if r["status"] == "history"]
        ax.plot(
            [r["query"] for r in hist],
            [r["engine_spent"] for r in hist],
            "|",
            color="C1",
            ms=8,
            label="answered from the history",
        )
        ax.set_xlabel("query")
        ax.set_ylabel("privacy budget spent (eps)")
        ax.set_title(
            f"{summary['workload']} ({summary['cells']} cells): "
            f"{summary['from_history']}/{summary['queries']} from history",
            fontsize=9,
        )
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------- part 3
def coverage_table(
    cube: Cube,
    workload: list[tuple[str, float, float]],
    runs: int,
    seed: int,
    levels: tuple[float, ...] = (0.8, 0.95),
) -> list[dict[str, Any]]:
    """The same workload answered ``runs`` times with fresh noise (the data fixed)."""
    halfw = [d for _, d, _ in workload]
    workload_q = [w for w, _, _ in workload]
    rows = []
    for p in levels:
        for r in range(runs):
            eng = QueryEngine(
                cube, accountant=Accountant(1e9, simulation=True), rng=seed * 1000 + r
            )
            for where, d in zip(workload_q, halfw, strict=True):
                a = eng.ask(where, half_width=d, confidence=p)
                truth = cube.true_answer(cube.query(where))
                assert a.interval is not None
                lo, hi = a.interval
                ints = eng.history.posterior(
                    cube.query(where).coefficients, support="nonnegative-integers"
                )
                ilo, ihi = ints.interval(p)
                rows.append(
                    {
                        "level": p,
                        "run": r,
                        "where": where,
                        "status": a.status,
                        "truth": truth,
                        "covered": int(lo <= truth <= hi),
                        "width": hi - lo,
                        "int_covered": int(ilo <= truth <= ihi),
                        "int_width": ihi - ilo,
                    }
                )
    return rows


def small_count_table(
    runs: int, seed: int, levels: tuple[float, ...] = (0.8, 0.95)
) -> list[dict[str, Any]]:
    """Where the integer support matters: counts 0..20 with noise of scale ~10 (eps ~0.1)."""
    rows = []
    gen = noise_source(seed).generator()
    for p in levels:
        for truth in [0, 2, 5, 10, 20]:
            x = np.array([float(truth), 200.0])
            H = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
            eps = np.array([0.1, 0.12, 0.08])  # distinct scales: partial fractions
            cov = icov = 0
            w = iw = 0.0
            for _ in range(runs):
                h = History(2)
                for row, e in zip(H, eps, strict=True):
                    h.add(row, float(row @ x + gen.laplace(0.0, 1.0 / e)), float(e))
                real = h.posterior([1.0, 0.0])
                ints = h.posterior([1.0, 0.0], support="nonnegative-integers")
                lo, hi = real.interval(p)
                ilo, ihi = ints.interval(p)
                cov += lo <= truth <= hi
                icov += ilo <= truth <= ihi
                w += hi - lo
                iw += ihi - ilo
            rows.append(
                {
                    "level": p,
                    "truth": truth,
                    "runs": runs,
                    "coverage": cov / runs,
                    "int_coverage": icov / runs,
                    "mean_width": w / runs,
                    "int_mean_width": iw / runs,
                }
            )
    return rows


def _plot_coverage(rows: list[dict[str, Any]], small: list[dict[str, Any]], path: Path) -> Path:
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    levels = sorted({r["level"] for r in rows})
    labels, vals, errs, nominal = [], [], [], []
    for p in levels:
        for status in ("fresh", "history"):
            sel = [r["covered"] for r in rows if r["level"] == p and r["status"] == status]
            if not sel:
                continue
            m = float(np.mean(sel))
            labels.append(f"{status}\np={p}")
            vals.append(m)
            errs.append(1.96 * math.sqrt(max(m * (1 - m), 1e-12) / len(sel)))
            nominal.append(p)
    xs = np.arange(len(vals))
    axes[0].bar(xs, vals, yerr=errs, color="C0", alpha=0.8, capsize=3, label="observed")
    axes[0].scatter(xs, nominal, color="k", marker="_", s=400, zorder=3, label="nominal")
    axes[0].set_xticks(xs, labels, fontsize=8)
    axes[0].set_ylim(min(levels) - 0.15, 1.0)
    axes[0].set_ylabel("coverage of the credible interval")
    axes[0].legend(fontsize=8, loc="lower right")
    axes[0].set_title("engine intervals, 1-d range workload (RAND HIE)", fontsize=10)
    for p, style in zip(levels, ("o-", "s--"), strict=False):
        sel = [r for r in small if r["level"] == p]
        axes[1].plot(
            [r["truth"] for r in sel],
            [r["int_mean_width"] / r["mean_width"] for r in sel],
            style,
            label=f"p={p}",
        )
    axes[1].axhline(1.0, color="grey", lw=0.8)
    axes[1].set_xlabel("true count")
    axes[1].set_ylabel("width: integer / real support")
    axes[1].set_title("non-negative-integer prior, noise std ~ 12", fontsize=10)
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------- run
def run(out_dir: str | Path, *, small: bool = False, seed: int = 0) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    ks = [4, 16] if small else [4, 16, 64, 256, 1000]
    m = methods_table(ks, seed, reps=1 if small else 3, mc_large=not small)
    paths.append(_write_csv(out / "methods.csv", m))
    paths.append(_plot_methods(m, out / "methods.png"))

    cube = randhie_cube()
    n_b = 20 if small else 150
    parts = [
        budget_table(cube, marginal_workload(n_b, seed), seed, 1.0, "marginals + ranges"),
        budget_table(visits_cube(), range_workload(n_b, seed + 1), seed, 1.0, "1-d ranges"),
    ]
    paths.append(_write_csv(out / "budget.csv", [r for rows, _ in parts for r in rows]))
    paths.append(_write_csv(out / "budget_summary.csv", [sm for _, sm in parts]))
    paths.append(_plot_budget(parts, out / "budget.png"))

    vc = visits_cube()
    c_rows = coverage_table(
        vc, range_workload(10 if small else 30, seed + 7), 2 if small else 25, seed + 7
    )
    paths.append(_write_csv(out / "coverage.csv", c_rows))
    s_rows = small_count_table(10 if small else 300, seed + 11)
    paths.append(_write_csv(out / "integer_support.csv", s_rows))
    paths.append(_plot_coverage(c_rows, s_rows, out / "coverage.png"))
    return paths
