"""Speed of the DP-mixture Gibbs sampler (paper 001) against a pure-Python implementation.

Both run the same algorithm (Laplace mechanism with clipping: Neal's algorithm 2 for the
labels, the Appendix A conditional for the cluster values) on the same data in the same
process, interleaved so that both see the same machine load. Reports Gibbs sweeps per
second and ESS per second of the mean of P (bulk ESS over the chains) at n = 1,000 and
10,000. The reference is too slow to run long enough for its own ESS; since it makes
the same draws (tests/nonparametric/test_sampler.py checks draw-for-draw equality), its
ESS per sweep is that of the compiled sampler and its ESS/s is scaled by its sweep rate.

    python benchmarks/bench_nonparametric.py [--quick]

Rates are given per wall-clock second and per CPU second of this process (the machine
is shared: the load average is recorded with each row). Appends to
benchmarks/results/nonparametric_speed.csv.
"""

from __future__ import annotations

import argparse
import csv
import os
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from dpbayes.nonparametric import ConvergenceWarning, DPMixture, LocalLaplace
from dpbayes.nonparametric.diagnostics import ess_bulk
from dpbayes.nonparametric.reference import reference_laplace_sweep, reference_new_weights

OUT = Path(__file__).resolve().parent / "results" / "nonparametric_speed.csv"


def data(n: int, seed: int) -> tuple[LocalLaplace, np.ndarray]:
    g = np.random.default_rng(seed)
    x = np.where(g.random(n) < 0.4, g.normal(-0.5, 0.15, n), g.normal(0.4, 0.2, n))
    mech = LocalLaplace(epsilon=1.0, r=1.0)
    return mech, mech.privatize(np.clip(x, -1, 1), rng=seed + 1).values


def bench_fast(mech: LocalLaplace, z: np.ndarray, draws: int, chains: int) -> dict[str, float]:
    cpu0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = DPMixture(mechanism=mech).fit(
            z, draws=draws, warmup=draws // 2, chains=chains, rng=1, progress=False,
            diagnostics=False,
        )  # fmt: skip
    cpu = time.process_time() - cpu0
    ess = ess_bulk(fit.mean_draws())
    return {
        "sweeps": fit.sweeps,
        "seconds": fit.seconds,
        "cpu_seconds": cpu,
        "sweeps_per_s": fit.sweeps_per_second,
        "sweeps_per_cpu_s": fit.sweeps / cpu,
        "ess_mean": ess,
        "ess_per_sweep": ess / (chains * draws),
        "ess_per_s": ess / fit.seconds,
    }


def bench_reference(mech: LocalLaplace, z: np.ndarray, sweeps: int) -> dict[str, float]:
    model = DPMixture(mechanism=mech)
    prepared = model.prepare(z)
    gen = np.random.default_rng(2)
    t0, cpu0 = time.perf_counter(), time.process_time()  # the precomputation counts too
    new_w = reference_new_weights(prepared.z, epsilon=mech.epsilon, r=mech.r, mu=0.0, sigma=mech.r)
    state = model.initial_state(prepared.z, gen)
    for _ in range(sweeps):
        state = reference_laplace_sweep(
            state,
            prepared.z,
            gen,
            epsilon=mech.epsilon,
            r=mech.r,
            alpha=1.0,
            mu=0.0,
            sigma=mech.r,
            new_w=new_w,
        )
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {
        "sweeps": sweeps,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "sweeps_per_s": sweeps / seconds,
        "sweeps_per_cpu_s": sweeps / cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sweeps (a smoke run)")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved repeats per n")
    args = parser.parse_args()
    plan = {1000: (1000, 30), 10000: (1000, 6)}  # n: (draws per chain, reference sweeps)
    if args.quick:
        plan = {1000: (200, 5), 10000: (200, 2)}
    # compile the kernels before timing anything
    m, z = data(200, 0)
    bench_fast(m, z, 20, 1)
    rows = []
    for n, (draws, ref_sweeps) in plan.items():
        mech, z = data(n, n)
        for rep in range(args.repeats):
            load = os.getloadavg()[0]
            fast = bench_fast(mech, z, draws, chains=2)
            ref = bench_reference(mech, z, ref_sweeps)
            ref["ess_per_sweep"] = fast["ess_per_sweep"]
            ref["ess_per_s"] = fast["ess_per_sweep"] * ref["sweeps_per_s"]
            speedup = fast["sweeps_per_s"] / ref["sweeps_per_s"]
            speedup_cpu = fast["sweeps_per_cpu_s"] / ref["sweeps_per_cpu_s"]
            stamp = datetime.now(UTC).isoformat(timespec="seconds")
            for impl, res in (("compiled", fast), ("pure_python", ref)):
                rows.append(
                    {
                        "timestamp": stamp,
                        "n": n,
                        "repeat": rep,
                        "impl": impl,
                        "sweeps": res["sweeps"],
                        "seconds": round(res["seconds"], 3),
                        "sweeps_per_s": round(res["sweeps_per_s"], 2),
                        "sweeps_per_cpu_s": round(res["sweeps_per_cpu_s"], 2),
                        "ess_mean": round(res.get("ess_mean", float("nan")), 1),
                        "ess_per_s": round(res["ess_per_s"], 2),
                        "speedup_vs_pure_python": round(speedup, 1),
                        "speedup_cpu_time": round(speedup_cpu, 1),
                        "load_avg_1min": round(load, 2),
                        "cpus": os.cpu_count(),
                    }
                )
            print(
                f"n={n:6d} rep={rep}: compiled {fast['sweeps_per_s']:8.1f} sweeps/s "
                f"(ESS/s of the mean {fast['ess_per_s']:7.1f}), pure Python "
                f"{ref['sweeps_per_s']:6.2f} sweeps/s: x{speedup:.0f}; per CPU second "
                f"{fast['sweeps_per_cpu_s']:.0f} vs {ref['sweeps_per_cpu_s']:.2f}: "
                f"x{speedup_cpu:.0f} (load {load:.1f})"
            )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    new = not OUT.exists()
    with OUT.open("a", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=list(rows[0]))
        if new:
            wr.writeheader()
        wr.writerows(rows)
    print(f"appended {len(rows)} rows to {OUT}")


if __name__ == "__main__":
    main()
