"""``dpbayes posterior``: the recipient's side: the noise-aware posterior of a release file."""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

from dpbayes.cli.common import add_json_argument, add_quiet_argument
from dpbayes.cli.posterior_column import add_column_arguments, refuse_column_flags, run_column
from dpbayes.release.display import released_text


def register(sub: Any) -> None:
    p = sub.add_parser(
        "posterior",
        help="noise-aware posterior of a released JSON or a privatised column",
        description=(
            "Read a release written by `dpbayes release --json` and print the posterior "
            "that accounts for the privacy noise (computed from the released values and "
            "public facts only), next to the naive one; or read a column written by "
            "`dpbayes privatize` and print the posterior of the distribution of the true "
            "values (paper 001)."
        ),
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--release", metavar="RELEASE.json", help="the release file")
    which.add_argument(
        "--privatized",
        metavar="VALUES.csv",
        help="a column written by `dpbayes privatize` (CSV or Parquet, its guarantee beside "
        "it): the posterior of the distribution of the true values (paper 001's DP mixture)",
    )
    p.add_argument("--level", type=float, default=0.95, help="credible level (default 0.95)")
    add_json_argument(p, "the noise-aware (and naive) posterior")
    p.add_argument(
        "--out",
        "--plot",
        dest="out",
        metavar="FILE.png",
        help="draw the noise-aware and naive posteriors (coins, categories, means)",
    )
    p.add_argument(
        "--iterations",
        type=int,
        default=None,
        help="MCMC paths (Bayesian networks with edges, regression): sweeps per chain "
        "(default: the sampler's, a few seconds to a minute; progress shown on a terminal)",
    )
    add_quiet_argument(p)
    p.add_argument(
        "--n",
        type=int,
        default=None,
        help="number of records, for releases that do not write it (Bayesian-network "
        "`sampling`, or `map` under add/remove; public under substitute neighbours)",
    )
    p.add_argument(
        "--n-prior",
        type=float,
        nargs=2,
        metavar=("MEAN", "SD"),
        default=None,
        help="for releases whose n is private (add/remove, user level): a Normal prior on "
        "the number of records (default: flat, the improper uniform on n >= 0)",
    )
    add_column_arguments(p)
    p.set_defaults(handler=run)


def _fmt(v: Any) -> str:
    from dpbayes.release.display import plain

    v = plain(v)
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dpbayes.cli.common import check_outputs, emit_json, progress
    from dpbayes.privacy.validation import check_int, check_probability
    from dpbayes.release.base import noise_aware_posterior
    from dpbayes.release.bayes_net.posterior import BayesNetNoiseAwarePosterior
    from dpbayes.release.display import (
        NAIVE_LABEL,
        NOISE_AWARE_LABEL,
        is_mcmc,
        slow_reason,
        summarise,
    )
    from dpbayes.release.reader import read_release

    if args.privatized is not None:
        return run_column(args)
    refuse_column_flags(args)
    level = check_probability(args.level, "--level", open_interval=True)
    # the outputs are checked before the slow part, and never onto the release they read
    check_outputs({"--out": args.out, "--json": args.json}, keep={"--release": args.release})
    if args.out:
        from dpbayes.plots import check_figure_path

        check_figure_path(args.out, "--out")
    if Path(args.release).is_dir():
        raise OSError(f"--release {args.release}: is a folder, not a release file")
    if not Path(args.release).exists():
        raise OSError(f"--release {args.release}: no such file")
    rel = read_release(args.release)
    options: dict[str, Any] = {} if args.n is None else {"n": args.n}
    if args.n_prior is not None:
        options["n_prior"] = tuple(args.n_prior)
    if args.iterations is not None:
        if not is_mcmc(rel):
            raise ValueError(
                f"--iterations is for MCMC paths; the noise-aware posterior of "
                f"{rel.mechanism!r} on {type(rel.model).__name__} is exact"
            )
        options["iterations"] = check_int(args.iterations, "--iterations", minimum=20)
    slow = slow_reason(rel)
    label = "noise-aware posterior" + (f" ({slow})" if slow else "")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        with progress(label, quiet=args.quiet):
            aware = noise_aware_posterior(rel, **options)
    for w in caught:  # one line each (poor MCMC mixing), in CLI words
        text = str(w.message).splitlines()[0].replace("(iterations=...)", "(--iterations N)")
        print(f"dpbayes: warning: {text}", file=sys.stderr)
    n_prior = getattr(aware, "n_prior", None)
    if isinstance(aware, BayesNetNoiseAwarePosterior):
        if args.out:
            raise ValueError("--out draws coins, categories and means, not Bayesian networks")
        out: dict[str, Any] = {
            "label": NOISE_AWARE_LABEL,
            "mechanism": rel.mechanism,
            "guarantee": rel.guarantee.to_dict(),
            "method": aware.method,
            "mean": {k: v.tolist() for k, v in aware.mean().cpts.items()},
            "interval": {
                "level": level,
                "kind": "central, per CPT entry",
                "bounds": {k: v.tolist() for k, v in aware.intervals(level).items()},
            },
            "diagnostics": None
            if aware.diagnostics is None
            else {
                "max_rhat": aware.diagnostics.max_rhat,
                "min_ess": aware.diagnostics.min_ess,
                "chains": aware.diagnostics.chains,
            },
            "normaliser": aware.normaliser,
            "n_prior": None if n_prior is None else n_prior.to_dict(),
        }
        if args.json is not None:
            emit_json({"noise_aware_posterior": out}, args.json)
            return 0
        n_rec = rel.record.n if rel.record.n is not None else args.n
        print(f"model:       Bayesian network {list(rel.model.nodes)} (n = {n_rec})")
        print(f"mechanism:   {rel.mechanism}; {rel.guarantee.describe()}")
        print(f"noise-aware posterior ({aware.method}) ({NOISE_AWARE_LABEL}):")
        for v in rel.model.nodes:
            print(f"  {v}: mean {_fmt(out['mean'][v])}")
            print(f"  {v}: {level:.0%} intervals {_fmt(out['interval']['bounds'][v])}")
        if n_prior is not None:
            print(f"  n is private; prior on n: {n_prior.to_dict()['text']}")
        if out["diagnostics"] is not None:
            print(f"  diagnostics: {out['diagnostics']}")
        if aware.normaliser is not None:
            what = "grid normaliser" if rel.mechanism == "map" else "trimmed-region normaliser"
            print(f"  {what}: {aware.normaliser}")
        return 0
    summary = {"label": NOISE_AWARE_LABEL, **summarise(aware, level)}
    naive = None
    if rel.posterior is not None and hasattr(rel.posterior, "interval"):
        naive = {"label": NAIVE_LABEL, **summarise(rel.posterior, level)}
    if args.out:
        from dpbayes.plots import plot_posteriors

        curves = {"noise-aware posterior": aware}
        if naive is not None:
            curves["naive posterior (treats the noise as data)"] = rel.posterior
        plot_posteriors(
            curves,
            args.out,
            title=f"{getattr(rel.model, 'name', '')}: {rel.guarantee.describe()}",
            level=level,
            categories=getattr(rel.model, "categories", None),
        )
    if args.json is not None:
        out = {
            "noise_aware_posterior": summary,
            "naive_posterior": naive,
            "model": rel.model.to_dict(),
            "mechanism": rel.mechanism,
            "released": rel.released,
            "guarantee": rel.guarantee.to_dict(),
        }
        emit_json(out, args.json)
        return 0
    n = rel.record.n
    name = getattr(rel.model, "name", type(rel.model).__name__)
    print(f"model:       {name}" + (f" (n = {n})" if n is not None else ""))
    print(f"mechanism:   {rel.mechanism}; {rel.guarantee.describe()}")
    print(f"released:    {released_text(rel.released)}  (6 digits; --json keeps all)")
    print(f"noise-aware posterior ({summary['family']}) ({NOISE_AWARE_LABEL}):")
    print(f"  mean:      {_fmt(summary['mean'])}")
    print(f"  sd:        {_fmt(summary['sd'])}")
    print(f"  {level:.0%} credible interval (central): {_fmt(summary['interval']['bounds'])}")
    if n_prior is not None:
        print(f"  n is private; prior on n: {n_prior.to_dict()['text']}")
    if naive is not None:
        print(f"naive posterior ({NAIVE_LABEL}):")
        print(f"  mean:      {_fmt(naive['mean'])}")
        print(f"  {level:.0%} credible interval (central): {_fmt(naive['interval']['bounds'])}")
    if args.out:
        print(f"figure:      {args.out}")
    return 0
