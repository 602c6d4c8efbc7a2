"""``dpbayes posterior --privatized``: the analyst's side of ``dpbayes privatize``.

Reads a column of locally privatised values and the guarantee written beside it, rebuilds
the local mechanism from that guarantee, and samples the posterior of the distribution P
of the true values under paper 001's Dirichlet-process prior
(:class:`~dpbayes.nonparametric.DPMixture`). Post-processing of released values: nothing
is spent and no noise is drawn; the sampler's randomness is fresh unless ``--seed``.
Every flag and output is checked before the (slow) fit.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

COLUMN_FLAGS = {
    "column": "--column",
    "guarantee": "--guarantee",
    "draws": "--draws",
    "chains": "--chains",
    "calibrate": "--calibrate",
    "grid": "--grid",
    "seed": "--seed",
}


def add_column_arguments(p: Any) -> None:
    """The flags of ``--privatized`` (refused with ``--release``)."""
    g = p.add_argument_group("with --privatized (a locally privatised column)")
    g.add_argument("--column", help="the privatised column (default: the file's only column)")
    g.add_argument(
        "--guarantee",
        metavar="FILE.json",
        help="its guarantee (default: VALUES.guarantee.json, written by `dpbayes privatize`)",
    )
    g.add_argument("--draws", type=int, default=None, help="saved draws per chain (1000)")
    g.add_argument("--chains", type=int, default=None, help="Gibbs chains (4)")
    g.add_argument(
        "--grid",
        type=float,
        nargs=3,
        metavar=("LO", "HI", "POINTS"),
        default=None,
        help="points where the CDF bands are given (default: 21 points on [-r, r])",
    )
    g.add_argument(
        "--calibrate",
        type=int,
        default=None,
        metavar="REFITS",
        help="also CDF bands calibrated to cover at --level at a fixed truth, by REFITS "
        "refits on data simulated from the fit (each of 2 chains x min(--draws, 300) draws; a 95%% "
        "simultaneous band needs 19 or more)",
    )
    g.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the sampler, for a reproducible report (no privacy noise is drawn)",
    )


def refuse_column_flags(args: argparse.Namespace) -> None:
    """With ``--release``, the flags of ``--privatized`` do not apply."""
    for dest, flag in COLUMN_FLAGS.items():
        if getattr(args, dest, None) is not None:
            raise ValueError(f"{flag} is for --privatized, not --release")


def _grid(args: argparse.Namespace, r: float) -> Any:
    import numpy as np

    from dpbayes.privacy.validation import check_finite, check_int

    if args.grid is None:
        return np.linspace(-r, r, 21)
    lo = check_finite(args.grid[0], "--grid LO")
    hi = check_finite(args.grid[1], "--grid HI")
    points = check_finite(args.grid[2], "--grid POINTS")
    if points != int(points):
        raise ValueError(f"--grid POINTS must be a whole number, got {points:g}")
    if points > 1000:
        raise ValueError(f"--grid POINTS must be at most 1000, got {points:g}")
    points = check_int(int(points), "--grid POINTS", minimum=2)
    if not lo < hi:
        raise ValueError(f"--grid: LO must be below HI, got {lo:g} and {hi:g}")
    return np.linspace(lo, hi, points)


def _at_most(value: int, flag: str, most: int) -> int:
    """``value``, or a one-line refusal naming ``flag`` (a run that long is a typo)."""
    if value > most:
        raise ValueError(f"{flag} must be at most {most:,}, got {value:,}")
    return value


def run_column(args: argparse.Namespace) -> int:
    """Fit the DP mixture to the privatised column and print (or write) its posterior."""
    from dpbayes.cli.common import check_outputs, emit_json
    from dpbayes.nonparametric import ConvergenceWarning, DPMixture, read_privatized
    from dpbayes.privacy.noise import noise_source
    from dpbayes.privacy.validation import check_int, check_probability

    for dest, flag in (("n", "--n"), ("n_prior", "--n-prior"), ("iterations", "--iterations")):
        if getattr(args, dest, None) is not None:
            hint = " (use --draws)" if dest == "iterations" else ""
            raise ValueError(f"{flag} is for --release, not --privatized{hint}")
    level = check_probability(args.level, "--level", open_interval=True)
    draws = _at_most(
        check_int(1000 if args.draws is None else args.draws, "--draws", minimum=10),
        "--draws",
        10**6,
    )
    chains = _at_most(
        check_int(4 if args.chains is None else args.chains, "--chains", minimum=1), "--chains", 64
    )
    refits = (
        None
        if args.calibrate is None
        else _at_most(check_int(args.calibrate, "--calibrate", minimum=2), "--calibrate", 1000)
    )
    if args.seed is not None:
        check_int(args.seed, "--seed", minimum=0)
    side = args.guarantee
    if side is None:  # the default sidecar is read too: never written over
        from pathlib import Path

        try:
            side = str(Path(args.privatized).with_suffix(".guarantee.json"))
        except ValueError:  # "." or "/": no name (read_privatized says it is a folder)
            side = None
    check_outputs(
        {"--out": args.out, "--json": args.json},
        keep={"--privatized": args.privatized, "--guarantee": side},
    )
    if args.out:
        from dpbayes.plots import check_figure_path

        check_figure_path(args.out, "--out")
    try:
        z = read_privatized(args.privatized, column=args.column, guarantee=args.guarantee)
    except (OSError, ValueError) as exc:  # the library names its argument; the CLI its flag
        text = str(exc)
        for name, flag in (("path", "--privatized"), ("column", "--column")):
            if text.startswith((name + " ", name + ":")):
                text = flag + text[len(name) :]
        if text.startswith("guarantee"):
            text = "--guarantee" + text[len("guarantee") :]
        raise type(exc)(text) from None
    grid = _grid(args, z.mechanism.r)
    if z.simulation:
        print(
            "dpbayes: warning: the column carries SEEDED SIMULATION noise (its guarantee "
            "says so): not a release; fine for trying the analysis",
            file=sys.stderr,
        )
    bar = False if args.quiet else None  # None: a progress bar on a terminal
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        fit = DPMixture(mechanism=z.mechanism).fit(
            z, draws=draws, chains=chains, rng=args.seed, progress=bar
        )
        cal = None
        if refits is not None:
            from dpbayes.nonparametric import calibrate_bands

            # the calibration's own stream, spawned from --seed's (else fresh)
            seed = None if args.seed is None else noise_source(args.seed).generator().spawn(1)[0]
            cal = calibrate_bands(fit, grid, level, refits=refits, rng=seed, progress=bar)
    for w in caught:
        text = str(w.message).split(":")[0]
        print(f"dpbayes: warning: {text} (run longer chains: --draws N)", file=sys.stderr)
    table = fit.summary(level)
    lo_key, hi_key = f"eti_{level:g}_lo", f"eti_{level:g}_hi"
    functionals: dict[str, dict[str, Any]] = {
        name: {
            "mean": float(row["mean"]),
            "sd": float(row["sd"]),
            "interval": [float(row[lo_key]), float(row[hi_key])],
            "rhat": float(row["rhat"]),
            "ess_bulk": float(row["ess_bulk"]),
        }
        for name, row in table.iterrows()
    }
    bands: dict[str, Any] = {"grid": grid.tolist(), "cdf": fit.cdf(grid).tolist()}
    for kind in ("pointwise", "simultaneous"):
        lo, hi = fit.cdf_band(grid, level, kind=kind)
        bands[f"credible_{kind}"] = [lo.tolist(), hi.tolist()]
    if cal is not None:
        bands["calibrated_pointwise"] = [cal.pointwise[0].tolist(), cal.pointwise[1].tolist()]
        bands["calibrated_simultaneous"] = [
            cal.simultaneous[0].tolist(),
            cal.simultaneous[1].tolist(),
        ]
        bands["calibrated_levels"] = [cal.pointwise_level, cal.simultaneous_level]
        bands["calibration_refits"] = cal.refits
        bands["calibration_capped"] = cal.capped
    if args.out:
        from dpbayes.plots import plot_cdf_bands

        plot_cdf_bands(fit, grid, args.out, level=level, calibration=cal)
    out: dict[str, Any] = {
        "data": str(args.privatized),
        "n": fit.n,
        "guarantee": z.guarantee.to_dict(),
        "model": {
            "name": "DP mixture (paper 001)",
            "alpha_prior": fit.model.alpha_prior,
            "draws": draws,
            "chains": chains,
        },
        "level": level,
        "functionals": functionals,
        "cdf_bands": bands,
    }
    if args.json is not None:
        emit_json(out, args.json)
        return 0
    r = z.mechanism.r
    print(f"data:        {args.privatized} (n = {fit.n}); {z.guarantee.describe()}")
    print(
        f"model:       DP mixture on the true values (paper 001), {chains} chains x "
        f"{draws} draws; the data identify the law of clip(X) to [{-r:g}, {r:g}]"
    )
    print(f"posterior of the distribution of the true values ({level:.0%} central intervals):")
    print(f"  {'':12} {'mean':>10} {'sd':>10}   {'interval':<25} {'R-hat':>6} {'ESS':>6}")
    for name, f in functionals.items():
        if name in ("n_clusters", "alpha", "base_mu", "base_sigma"):
            continue  # the model's own parameters: in --json, for diagnosis
        iv = f"[{f['interval'][0]:.4g}, {f['interval'][1]:.4g}]"
        print(
            f"  {name:12} {f['mean']:10.4g} {f['sd']:10.4g}   {iv:<25} "
            f"{f['rhat']:6.3f} {f['ess_bulk']:6.0f}"
        )
    print(f"CDF at {len(grid)} points from {grid[0]:g} to {grid[-1]:g} (--json for all):")
    step = max(1, len(grid) // 5)
    for j in range(0, len(grid), step):
        sl, sh = bands["credible_simultaneous"][0][j], bands["credible_simultaneous"][1][j]
        line = f"  F({grid[j]:.4g}) = {bands['cdf'][j]:.3f}  simultaneous band [{sl:.3f}, {sh:.3f}]"
        if cal is not None:
            cl, ch = bands["calibrated_simultaneous"][0][j], bands["calibrated_simultaneous"][1][j]
            line += f"  calibrated [{cl:.3f}, {ch:.3f}]"
        print(line)
    if cal is not None:
        print(
            f"calibrated:  credible levels {cal.pointwise_level:g} (pointwise) and "
            f"{cal.simultaneous_level:g} (simultaneous) cover {level:g} in {cal.refits} refits"
            + (" (capped at the widest: more refits needed)" if cal.capped else "")
        )
    if args.out:
        print(f"figure:      {args.out}")
    return 0
