"""Tight accounting against basic composition, side by side, and against exact values.

* Laplace(eps = 0.01) releases a budget of (eps 1, delta 1e-6) admits under basic and RDP
  composition, and Gaussian (eps 0.05, delta 1e-8) releases under basic, PLD and RDP (the
  accountant's own refusal decides; a PLD ledger takes Gaussian spends only, as a valid
  filter, so its Laplace row is 0);
* the eps of 300 of them composed as a plan fixed in advance (``compose``) against the
  exact optimal composition of 300 pure 0.01-DP guarantees (binomial formula);
* 100 Gaussian releases (eps 0.5, delta 1e-8, analytic calibration): PLD and RDP against
  the exact composition (one Gaussian with mu = sqrt(100) / ratio).

Writes one CSV row per figure (``--out``, default benchmarks/results/accounting.csv).
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from pathlib import Path

from scipy import optimize, special, stats

from dpbayes.privacy import Accountant, GaussianMechanism, Guarantee, LaplaceMechanism
from dpbayes.privacy.accountant import BudgetExceeded
from dpbayes.privacy.composition import compose, event_of


def exact_pure(eps0: float, k: int, delta: float) -> float:
    def d(e: float) -> float:
        tot = 0.0
        for j in range(k + 1):
            loss = (k - 2 * j) * eps0
            if loss <= e:
                break
            log_p = (
                special.gammaln(k + 1)
                - special.gammaln(j + 1)
                - special.gammaln(k - j + 1)
                + (k - j) * eps0
                - k * math.log1p(math.exp(eps0))
            )
            tot += math.exp(log_p) * -math.expm1(e - loss)
        return tot - delta

    return float(optimize.brentq(d, 0.0, k * eps0, xtol=1e-12))


def exact_gaussian(ratio: float, k: int, delta: float) -> float:
    mu = math.sqrt(k) / ratio

    def d(e: float) -> float:
        return (
            float(stats.norm.cdf(-e / mu + mu / 2) - math.exp(e) * stats.norm.cdf(-e / mu - mu / 2))
            - delta
        )

    return float(optimize.brentq(d, 0.0, 50 * mu + 50, xtol=1e-12))


def admitted(composition: str, g: Guarantee, limit: int = 5000) -> tuple[int, float]:
    acc = Accountant(1.0, 1e-6, composition=composition)
    t0 = time.perf_counter()
    for i in range(limit):
        try:
            acc.spend(g)
        except BudgetExceeded:
            return i, time.perf_counter() - t0
        except ValueError:  # a spend this ledger's filter does not take
            return 0, time.perf_counter() - t0
    return limit, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "accounting.csv"))
    args = ap.parse_args()
    rows: list[dict[str, object]] = []
    releases = {
        "laplace_0.01": LaplaceMechanism(epsilon=0.01, sensitivity=1.0).guarantee(),
        "gaussian_(0.05,1e-8)": GaussianMechanism(
            epsilon=0.05, delta=1e-8, sensitivity=1.0
        ).guarantee(),
    }
    for name, release in releases.items():
        counts = {}
        for method in ("basic", "pld", "rdp"):
            n, secs = admitted(method, release)
            counts[method] = n
            rows.append(
                {
                    "figure": f"{name}_admitted_under_(1,1e-6)",
                    "method": method,
                    "value": n,
                    "ratio_to_basic": n / counts["basic"],
                    "seconds": round(secs, 3),
                }
            )
    exact = exact_pure(0.01, 300, 1e-6)
    ev = event_of(0.01, 0.0, 1.0, "substitute", {})
    for method in ("basic", "pld", "rdp"):
        eps, _ = compose([ev] * 300, method, 1e-6)
        rows.append(
            {
                "figure": "eps_after_300_laplace_0.01_at_1e-6",
                "method": method,
                "value": eps,
                "ratio_to_exact": eps / exact,
            }
        )
    rows.append({"figure": "eps_after_300_laplace_0.01_at_1e-6", "method": "exact", "value": exact})
    g = GaussianMechanism(epsilon=0.5, delta=1e-8, sensitivity=1.0).guarantee()
    gev = event_of(g.epsilon, g.delta, g.sensitivity, g.neighbours.value, g.details)
    assert gev.gaussian_ratio is not None
    gex = exact_gaussian(gev.gaussian_ratio, 100, 1e-6)
    for method in ("basic", "pld", "rdp"):
        eps, dlt = compose([gev] * 100, method, 1e-6)
        rows.append(
            {
                "figure": "eps_after_100_gaussian_(0.5,1e-8)",
                "method": method,
                "value": eps,
                "delta": dlt,
                "ratio_to_exact": eps / gex,
            }
        )
    rows.append({"figure": "eps_after_100_gaussian_(0.5,1e-8)", "method": "exact", "value": gex})
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    keys = ["figure", "method", "value", "delta", "ratio_to_basic", "ratio_to_exact", "seconds"]
    with open(out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    for r in rows:
        extra = "".join(
            f"  {k} {r[k]:.4g}" if isinstance(r[k], float) else f"  {k} {r[k]}"
            for k in ("ratio_to_basic", "ratio_to_exact", "delta")
            if k in r
        )
        print(f"{r['figure']:<40} {r['method']:<6} {r['value']:.6g}{extra}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
