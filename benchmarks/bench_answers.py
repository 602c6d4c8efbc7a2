"""Speed of inference from noisy answers (paper 000), in one run, with in-process baselines.

    python benchmarks/bench_answers.py [--quick] [--out benchmarks/results/answers.csv]

1. ``interval``: a 95% credible interval (BLUE + exact error distribution + Algorithm 3)
   for a range query over a history of 1,000 random range answers on a 200-cell domain
   (target: well under 100 ms); baseline: the same BLUE by a brute-force weighted least
   squares with a pseudo-inverse, the error distribution left out.
2. ``add``: adding one answer to a history of 1,000 (incremental QR/Gram-Schmidt update);
   baseline: refitting the brute-force weighted least squares on all 1,001 answers.
3. ``methods``: the error distribution P(|E| <= d) from the BLUE of a history of k
   answers by the exact method (closed form / characteristic-function inversion), PC by
   FFT, the paper's PC by direct convolution (Algorithm 2) and MC (Algorithm 1), each set
   to the same target accuracy (1e-2 and 1e-3); achieved error against the exact method
   at 1e-10; the ratio is time / exact's time.
4. ``mixed``: the same with a Normal part (a history with Gaussian answers): the error
   is the Laplace sum plus N(0, s^2), s equal to the Laplace part's std, by the exact
   method (inversion with the Normal factor) and PC by FFT (with the discretised
   Normal); achieved error against the exact method at 1e-10; the baseline is the exact
   method on the Laplace part alone (what the Normal part costs).

5. ``big cube``: a history of 1,000 short range answers (1-9 cells) on a 100,000-cell
   cube, as a service holds it: a snapshot (``copy``, one per fresh request and reload),
   a snapshot plus one answer (how a fresh request is planned) and an answer from the
   history (``blue``); the baseline (floor) is copying one dense query row over the
   cube, so a ratio below 1 says the step no longer scales with answers x cells (a dense
   history copied 1,000 such rows: about 220 ms and 1.6 GB held).

6. ``disjoint``: a fresh answer (a snapshot plus one answer on new cells) to a history of
   k answers on disjoint cells (1-9 each) of a 100,000-cell cube, rank k: the history
   factorises each connected component of its answers on its own (block-diagonal), so
   the answer touches a block of its own; the baseline is what the old single
   factorisation paid on every answer: Gram-Schmidt over its rank x cells basis and the
   Givens update of its rank-k R (``qr_insert``; the old answer took about 25 ms at rank
   1,000 and 0.5 s at rank 3,000). The time includes reading the answer's dense row over
   the cube (about 0.5 ms here, what remains at small k: ``--quick`` has ratio > 1). The
   numbers held (``History.entries``) are printed beside those of one factorisation
   (rank x cells read + answers x rank + rank^2: 5.3 million at rank 1,000, 47 million at
   3,000 on a 10^6-cell cube, against 8,500 and 25,500 now).

Writes ``benchmark,k,scales,method,target_accuracy,achieved_error,seconds,cpu_seconds,
baseline_seconds,ratio`` (ratio = seconds / baseline_seconds). Timings depend on the
machine's load; compare ratios and CPU seconds, not absolute wall-clock numbers. Monte
Carlo runs needing more than 3e7 Laplace draws are left out (they take minutes).
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy.linalg import qr_insert

from dpbayes.answers import History, LaplaceSum
from dpbayes.experiments.query_answering import direct_convolution_cost
from dpbayes.privacy.noise import noise_source


def _median_time(fn: Callable[[], Any], repeats: int) -> tuple[float, float, Any]:
    """Median wall-clock and CPU seconds (the machine is shared: CPU time is steadier)."""
    times, cpu, out = [], [], None
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(times), statistics.median(cpu), out


def _range(n: int, gen: np.random.Generator) -> np.ndarray:
    lo, hi = sorted(gen.integers(0, n, size=2))
    c = np.zeros(n)
    c[lo : hi + 1] = 1.0
    return c


def random_history(k: int, n: int, seed: int) -> History:
    gen = noise_source(seed).generator()
    h = History(n)
    for _ in range(k):
        h.add(_range(n, gen), float(gen.normal(500, 50)), float(gen.uniform(0.05, 0.5)))
    return h


def brute_force(h: History, q: np.ndarray) -> tuple[float, float]:
    H, y, s, e = h.coefficients, h.answers, h.sensitivities, h.epsilons
    w = 1.0 / (2.0 * (s / e) ** 2)
    P = np.linalg.pinv((H.T * w) @ H)
    A = q @ P @ H.T * w
    return float(A @ y), float(q @ P @ q)


def bench_interval(rows: list[dict[str, Any]], k: int, n: int, repeats: int) -> None:
    h = random_history(k, n, seed=1)
    gen = noise_source(2).generator()
    targets = [_range(n, gen) for _ in range(repeats)]
    targets = [q for q in targets if h.is_estimable(q)]
    times, cpu, base, scales = [], [], [], []
    for q in targets:
        t0, c0 = time.perf_counter(), time.process_time()
        post = h.posterior(q)
        post.interval(0.95)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        scales.append(int(np.count_nonzero(post.weights)))
        t0 = time.perf_counter()
        brute_force(h, q)
        base.append(time.perf_counter() - t0)
    t, b = statistics.median(times), statistics.median(base)
    rows.append(
        dict(
            benchmark="interval (95%, real support)",
            k=k,
            scales=int(statistics.median(scales)),
            method="auto",
            target_accuracy=1e-6,
            achieved_error=float("nan"),
            seconds=t,
            cpu_seconds=statistics.median(cpu),
            baseline_seconds=b,
            ratio=t / b,
        )
    )
    # one add + one refit
    q = _range(n, gen)
    t_add, c_add, _ = _median_time(lambda: h.add(q, 500.0, 0.1), 1)
    t_fit, _, _ = _median_time(lambda: brute_force(h, targets[0]), 3)
    rows.append(
        dict(
            benchmark="add one answer",
            k=k,
            scales=0,
            method="incremental",
            target_accuracy=float("nan"),
            achieved_error=float("nan"),
            seconds=t_add,
            cpu_seconds=c_add,
            baseline_seconds=t_fit,
            ratio=t_add / t_fit,
        )
    )


def history_scales(k: int, n: int, seed: int) -> np.ndarray:
    h = random_history(k, n, seed)
    gen = noise_source(seed + 1).generator()
    best = None
    for _ in range(40):  # the estimable range with the most answers in its BLUE
        q = _range(n, gen)
        if h.is_estimable(q):
            s = h.blue(q).scales
            s = s[s > 0]
            if best is None or s.size > best.size:
                best = s
    if best is None:
        s = h.blue(h.coefficients[:3].sum(axis=0)).scales
        best = s[s > 0]
    return best


def bench_methods(
    rows: list[dict[str, Any]], ks: list[int], accuracies: list[float], repeats: int
) -> None:
    for k in ks:
        scales = history_scales(k, 64, seed=10 + k)
        ref = LaplaceSum(scales, method="exact", accuracy=1e-9)
        ds = np.array([0.5, 1.0, 2.0, 3.0]) * ref.std
        truth = ref.prob_within(ds)
        for acc in accuracies:
            runs: dict[str, dict[str, Any]] = {
                "exact": {"method": "exact", "accuracy": acc},
                "pc-fft": {"method": "pc", "accuracy": acc},
            }
            probe = LaplaceSum(scales, method="pc", accuracy=acc)
            if direct_convolution_cost(scales, probe.details["grid_step"], acc) < 3e8:
                runs["pc-direct"] = {"method": "pc-direct", "accuracy": acc}
            n_mc = math.ceil((1.5 / acc) ** 2)  # 3 sigma of the CDF <= acc
            if n_mc * scales.size <= 3e7:  # else too slow to include (noted as missing)
                runs["mc"] = {"method": "mc", "n_samples": n_mc, "rng": 0}
            t_exact = None
            for label, kw in runs.items():
                reps = 1 if label in ("mc", "pc-direct") else repeats

                def build(
                    kw: dict[str, Any] = kw,
                    scales: np.ndarray = scales,
                    ds: np.ndarray = ds,
                    truth: np.ndarray = truth,
                ) -> float:
                    d = LaplaceSum(scales, **kw)
                    return float(np.max(np.abs(d.prob_within(ds) - truth)))

                build()  # warm-up (FFT plans, caches)
                t, c, err = _median_time(build, reps)
                if label == "exact":
                    t_exact = t
                assert t_exact is not None
                rows.append(
                    dict(
                        benchmark="error distribution",
                        k=k,
                        scales=scales.size,
                        method=label,
                        target_accuracy=acc,
                        achieved_error=err,
                        seconds=t,
                        cpu_seconds=c,
                        baseline_seconds=t_exact,
                        ratio=t / t_exact,
                    )
                )
                head = f"  k={k:5d} scales={scales.size:4d} acc={acc:g} {label:10s}"
                print(f"{head} {t:9.4f}s err={err:.2e}")


def bench_mixed(
    rows: list[dict[str, Any]], ks: list[int], accuracies: list[float], repeats: int
) -> None:
    for k in ks:
        scales = history_scales(k, 64, seed=10 + k)
        s = math.sqrt(2.0 * float(scales @ scales))  # as large as the Laplace part
        ref = LaplaceSum(scales, gaussian_sd=s, method="exact", accuracy=1e-10)
        ds = np.array([0.5, 1.0, 2.0, 3.0]) * ref.std
        truth = ref.prob_within(ds)
        for acc in accuracies:
            t_lap, _, _ = _median_time(
                lambda acc=acc, scales=scales: LaplaceSum(scales, method="exact", accuracy=acc),
                repeats,
            )
            for label, method in (("exact", "exact"), ("pc-fft", "pc")):

                def build(
                    method: str = method,
                    acc: float = acc,
                    scales: np.ndarray = scales,
                    s: float = s,
                    ds: np.ndarray = ds,
                    truth: np.ndarray = truth,
                ) -> float:
                    d = LaplaceSum(scales, gaussian_sd=s, method=method, accuracy=acc)
                    return float(np.max(np.abs(d.prob_within(ds) - truth)))

                build()  # warm-up
                t, c, err = _median_time(build, repeats)
                rows.append(
                    dict(
                        benchmark="error distribution + Normal",
                        k=k,
                        scales=scales.size,
                        method=label,
                        target_accuracy=acc,
                        achieved_error=err,
                        seconds=t,
                        cpu_seconds=c,
                        baseline_seconds=t_lap,
                        ratio=t / t_lap,
                    )
                )
                head = f"  k={k:5d} scales={scales.size:4d} + Normal acc={acc:g} {label:8s}"
                print(f"{head} {t:9.4f}s err={err:.2e} (Laplace part alone {t_lap:.4f}s)")


def bench_big_cube(rows: list[dict[str, Any]], k: int, n: int, repeats: int) -> None:
    gen = noise_source(3).generator()
    h = History(n)
    q = np.zeros(n)
    for i in range(k):
        q[:] = 0.0
        lo = int(gen.integers(0, n - 10))
        q[lo : lo + (1 if i % 2 == 0 else int(gen.integers(2, 10)))] = 1.0
        h.add(q, float(gen.normal(100, 10)), 0.1)
    answered = q.copy()
    fresh = np.zeros(n)
    fresh[7:10] = 1.0

    def copy_and_add() -> None:
        h.copy().add(fresh, 0.0, 0.1)

    floor, _, _ = _median_time(lambda: answered.copy(), repeats)
    for method, fn in (
        ("snapshot (copy)", h.copy),
        ("snapshot + one answer", copy_and_add),
        ("answer from the history (blue)", lambda: h.blue(answered)),
    ):
        t, c, _ = _median_time(fn, repeats)
        rows.append(
            dict(
                benchmark=f"big cube ({n:,} cells)",
                k=k,
                scales=0,
                method=method,
                target_accuracy=float("nan"),
                achieved_error=float("nan"),
                seconds=t,
                cpu_seconds=c,
                baseline_seconds=floor,
                ratio=t / floor,
            )
        )
        print(f"big cube, {method}: {t * 1e3:.2f} ms ({t / floor:.2f}x one dense row's copy)")


def bench_disjoint(rows: list[dict[str, Any]], k: int, n: int, repeats: int) -> None:
    gen = noise_source(4).generator()
    starts = gen.permutation(n // 10)[: k + 1] * 10
    h = History(n)
    q = np.zeros(n)
    for i in range(k):
        q[:] = 0.0
        lo = int(starts[i])
        q[lo : lo + (1 if i % 2 == 0 else int(gen.integers(2, 10)))] = 1.0
        h.add(q, float(gen.normal(100, 10)), 0.1)
    fresh = np.zeros(n)
    fresh[int(starts[k]) : int(starts[k]) + 3] = 1.0

    def copy_and_add() -> None:
        h.copy().add(fresh, 0.0, 0.1)

    r = h.rank
    nc = sum(idx.size for idx, _ in h.rows())  # the cells read (disjoint rows)
    old_Q = np.zeros((r, nc + 3))  # the old basis: rank x cells read
    old_Q[np.arange(r), np.arange(r)] = 1.0
    old_R = np.diag(gen.uniform(0.01, 0.1, size=r + 1))  # the old R (rank r + 1)
    m = np.zeros(nc + 3)
    m[nc:] = 0.07
    row = np.zeros(r + 1)
    row[r] = 0.07

    def old_update() -> None:  # what the single factorisation did on every answer
        c = old_Q @ m  # Gram-Schmidt twice over every direction and cell read
        resid = m - old_Q.T @ c
        c2 = old_Q @ resid
        resid -= old_Q.T @ c2
        qr_insert(np.eye(r + 1), old_R, row, r + 1, which="row", check_finite=False)

    base, _, _ = _median_time(old_update, repeats)
    t, c, _ = _median_time(copy_and_add, repeats)
    one = h.entries  # what the blocks hold
    single = nc + r * nc + len(h) * r + r * r  # one factorisation over every cell read
    rows.append(
        dict(
            benchmark=f"disjoint answers ({n:,} cells)",
            k=k,
            scales=0,
            method=f"snapshot + fresh answer at rank {r} (entries {one:,} vs {single:,})",
            target_accuracy=float("nan"),
            achieved_error=float("nan"),
            seconds=t,
            cpu_seconds=c,
            baseline_seconds=base,
            ratio=t / base,
        )
    )
    print(
        f"disjoint answers, fresh answer at rank {r}: {t * 1e3:.2f} ms "
        f"({t / base:.3f}x the old rank-{r} factorisation update, {base * 1e3:.1f} ms); "
        f"entries held {one:,} (one factorisation: {single:,})"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "answers.csv"))
    args = ap.parse_args(argv)
    rows: list[dict[str, Any]] = []
    k = 200 if args.quick else 1000
    bench_interval(rows, k, 200, repeats=5 if args.quick else 15)
    print(
        f"interval over {k} answers: {rows[0]['seconds'] * 1e3:.1f} ms wall, "
        f"{rows[0]['cpu_seconds'] * 1e3:.1f} ms CPU (medians)"
    )
    ks = [16, 64] if args.quick else [16, 64, 256, 1000]
    bench_methods(rows, ks, [1e-2, 1e-3], repeats=3)
    bench_mixed(rows, ks, [1e-3, 1e-6], repeats=3)
    bench_big_cube(rows, 200 if args.quick else 1000, 100_000, repeats=5)
    bench_disjoint(rows, 200 if args.quick else 1000, 100_000, repeats=5)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
