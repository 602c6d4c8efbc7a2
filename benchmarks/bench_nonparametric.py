"""Speed and mixing of the DP-mixture sampler (paper 001), side by side in one process.

Three implementations run interleaved on the same data (Laplace mechanism, eps = 1, r = 1,
the bimodal truth of the experiment), so that they see the same machine load:

* ``moves``: the default sampler (Gibbs sweep + label-integrated moves on P);
* ``gibbs``: the paper's Gibbs sampler alone (``marginal_moves=False``), the baseline;
* ``pure_python``: the straightforward pure-Python Gibbs sweep (``nonparametric/reference.py``,
  tested draw for draw against the compiled one), at n <= 10,000 and for a few sweeps.

Reported per n in {1,000, 10,000, 100,000}: Gibbs sweeps per wall and per CPU second, ESS
per saved draw of the mean of P and of F(t) at t = -0.5, 0, 0.4 (the smallest), and ESS
per CPU second of that smallest one. The machine is shared: the load average is recorded.

    python benchmarks/bench_nonparametric.py [--quick]

Appends to benchmarks/results/nonparametric_sampler.csv (nonparametric_speed.csv holds the
earlier compiled-against-pure-Python runs).
"""

from __future__ import annotations

import argparse
import csv
import os
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from dpbayes.nonparametric import ConvergenceWarning, DPMixture, LocalLaplace
from dpbayes.nonparametric.diagnostics import ess_bulk
from dpbayes.nonparametric.reference import reference_laplace_sweep, reference_new_weights

OUT = Path(__file__).resolve().parent / "results" / "nonparametric_sampler.csv"
POINTS = np.array([-0.5, 0.0, 0.4])


def data(n: int, seed: int) -> tuple[LocalLaplace, np.ndarray]:
    g = np.random.default_rng(seed)
    x = np.where(g.random(n) < 0.4, g.normal(-0.5, 0.15, n), g.normal(0.4, 0.2, n))
    mech = LocalLaplace(epsilon=1.0, r=1.0)
    return mech, mech.privatize(np.clip(x, -1, 1), rng=seed + 1).values


def bench_sampler(
    mech: LocalLaplace, z: np.ndarray, draws: int, moves: bool, chains: int = 2
) -> dict[str, Any]:
    cpu0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = DPMixture(mechanism=mech, marginal_moves=moves).fit(
            z, draws=draws, warmup=draws // 4, chains=chains, rng=1, progress=False,
            diagnostics=False,
        )  # fmt: skip
    cpu = time.process_time() - cpu0
    total = chains * draws
    ess_mean = ess_bulk(fit.mean_draws())
    cd = fit.cdf_draws(POINTS)
    ess_cdf = min(ess_bulk(cd[..., j]) for j in range(POINTS.size))
    return {
        "sweeps": fit.sweeps,
        "seconds": fit.seconds,
        "cpu_seconds": cpu,
        "sweeps_per_s": fit.sweeps_per_second,
        "sweeps_per_cpu_s": fit.sweeps / cpu,
        "ess_mean_per_draw": ess_mean / total,
        "ess_cdf_min_per_draw": ess_cdf / total,
        "ess_cdf_min_per_cpu_s": ess_cdf / cpu,
        "clusters": float(np.mean(fit.n_clusters)),
    }


def bench_reference(mech: LocalLaplace, z: np.ndarray, sweeps: int) -> dict[str, Any]:
    model = DPMixture(
        mechanism=mech, alpha=1.0, alpha_prior=None, base=(0.0, 1.0), base_prior=None,
        support="real", marginal_moves=False,
    )  # fmt: skip
    prepared = model.prepare(z)
    gen = np.random.default_rng(2)
    t0, cpu0 = time.perf_counter(), time.process_time()  # the precomputation counts too
    new_w = reference_new_weights(prepared.z, epsilon=mech.epsilon, r=mech.r, mu=0.0, sigma=1.0)
    state = model.initial_state(prepared.z, gen)
    for _ in range(sweeps):
        state = reference_laplace_sweep(
            state, prepared.z, gen, epsilon=mech.epsilon, r=mech.r, alpha=1.0, mu=0.0,
            sigma=1.0, new_w=new_w,
        )  # fmt: skip
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
    args = parser.parse_args()
    # n: (draws per chain, pure-Python sweeps)
    plan = {1000: (2000, 20), 10000: (1000, 4), 100000: (200, 0)}
    if args.quick:
        plan = {1000: (200, 3), 10000: (100, 1), 100000: (20, 0)}
    m, z = data(300, 0)  # compile the kernels before timing anything
    bench_sampler(m, z, 20, True, chains=1)
    rows = []
    for n, (draws, ref_sweeps) in plan.items():
        mech, z = data(n, n)
        load = os.getloadavg()[0]
        results = {"moves": bench_sampler(mech, z, draws, True)}
        results["gibbs"] = bench_sampler(mech, z, draws, False)
        if ref_sweeps:
            results["pure_python"] = bench_reference(mech, z, ref_sweeps)
        base = results["gibbs"]
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        for impl, res in results.items():
            rows.append(
                {
                    "timestamp": stamp,
                    "n": n,
                    "impl": impl,
                    "sweeps": res["sweeps"],
                    "seconds": round(res["seconds"], 3),
                    "sweeps_per_s": round(res["sweeps_per_s"], 2),
                    "sweeps_per_cpu_s": round(res["sweeps_per_cpu_s"], 2),
                    "ess_mean_per_draw": round(res.get("ess_mean_per_draw", float("nan")), 3),
                    "ess_cdf_min_per_draw": round(res.get("ess_cdf_min_per_draw", float("nan")), 3),
                    "ess_cdf_min_per_cpu_s": round(
                        res.get("ess_cdf_min_per_cpu_s", float("nan")), 2
                    ),
                    "speed_vs_gibbs_cpu": round(
                        res["sweeps_per_cpu_s"] / base["sweeps_per_cpu_s"], 3
                    ),
                    "load_avg_1min": round(load, 2),
                    "cpus": os.cpu_count(),
                }
            )
            print(
                f"n={n:6d} {impl:11s}: {res['sweeps_per_cpu_s']:8.1f} sweeps per CPU s "
                f"({res['sweeps_per_s']:7.1f} wall), ESS/draw mean "
                f"{res.get('ess_mean_per_draw', float('nan')):.3f}, min F(t) "
                f"{res.get('ess_cdf_min_per_draw', float('nan')):.3f}, per CPU s "
                f"{res.get('ess_cdf_min_per_cpu_s', float('nan')):.1f} (load {load:.1f})"
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
