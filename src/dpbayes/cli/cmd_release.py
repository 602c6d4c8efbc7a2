"""``dpbayes release``: release a private posterior of a column and print it.

Privacy unit: on the bundled RAND HIE data one person (``person`` column, <= 5 rows, which
keeps every row; ``--record-level`` protects one person-year instead); on ``--data`` one
record unless ``--user-column COL --max-rows-per-user K`` bound each user to K rows. At
user level the neighbours are add/remove one user and n is private (mechanisms that need
a public n, expmech and input, are refused there).
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from dpbayes.cli.common import (
    add_json_argument,
    add_privacy_unit_arguments,
    add_quiet_argument,
    refuse_inapplicable,
)

# Defaults on the bundled RAND HIE data when no --data is given.
BUNDLED_DEFAULTS: dict[str, dict[str, Any]] = {
    "beta-bernoulli": {"column": "hlthp"},
    "dirichlet-categorical": {
        "column": "health",
        "categories": ["excellent", "good", "fair", "poor"],
    },
    "normal-mean": {"column": "mdvis", "bounds": [0.0, 20.0]},
}
MODELS = tuple(BUNDLED_DEFAULTS)


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments that pick the data and the model; shared with other commands."""
    p.add_argument("--data", help="CSV or Parquet file (default: the bundled RAND HIE data)")
    p.add_argument("--column", help="column to analyse (required with --data)")
    p.add_argument("--model", choices=MODELS, default="beta-bernoulli")
    p.add_argument(
        "--prior",
        type=float,
        nargs="+",
        help="beta-bernoulli: a b (default 1 1); dirichlet-categorical: one value per "
        "category or one symmetric value (default 1); normal-mean: mean sd (default 0 10)",
    )
    p.add_argument(
        "--categories", nargs="+", help="dirichlet-categorical: the public category labels"
    )
    p.add_argument(
        "--bounds",
        type=float,
        nargs=2,
        metavar=("LOWER", "UPPER"),
        help="normal-mean: the public range the data are clamped to",
    )
    p.add_argument(
        "--noise-sd",
        type=float,
        default=None,
        help="normal-mean: the known standard deviation of one observation (default: the "
        "bounds' width / 4)",
    )


def register(sub: Any) -> None:
    p = sub.add_parser(
        "release",
        help="release a differentially private posterior",
        description="Release a differentially private posterior of one column and print "
        "its noise-aware posterior (the one to use: it accounts for the privacy noise), "
        "then the naive one (treats the noise as data; over-confident).",
    )
    add_model_arguments(p)
    add_privacy_unit_arguments(p)
    p.add_argument("--epsilon", type=float, required=True, help="privacy parameter eps > 0")
    p.add_argument("--delta", type=float, default=0.0, help="privacy parameter delta in [0, 1)")
    p.add_argument("--mechanism", default="laplace", help="release mechanism (default laplace)")
    p.add_argument(
        "--neighbours",
        default=None,
        choices=["substitute", "add-remove"],
        help="neighbouring relation (default: substitute one record, n public, at record "
        "level; add/remove one user, n private, at user level, where substitute is refused)",
    )
    p.add_argument("--sensitivity", help="expmech: global, smooth or local")
    p.add_argument("--divergence", help="expmech: hellinger (default) or tv")
    p.add_argument(
        "--max-candidates",
        type=int,
        help="expmech, dirichlet: enumerate candidates exactly up to this many (default 2e6)",
    )
    p.add_argument(
        "--lattice", type=int, help="expmech, dirichlet: candidate lattice with this step count"
    )
    p.add_argument(
        "--allow-non-private",
        action="store_true",
        help="permit mechanisms that are not DP (experiments only)",
    )
    p.add_argument("--level", type=float, default=0.95, help="credible level (default 0.95)")
    p.add_argument("--budget-file", help="spend from this ledger (see `dpbayes budget`)")
    p.add_argument(
        "--seed",
        type=int,
        help="seeded SIMULATION noise (not for publication; refused with --budget-file)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the guarantee and its cost against --budget-file; spend nothing, read no data",
    )
    add_json_argument(p, "the release record (the file `dpbayes posterior --release` reads)")
    p.add_argument(
        "--out",
        "--plot",
        dest="out",
        metavar="FILE.png",
        help="draw the noise-aware and naive posteriors (--plot is an alias)",
    )
    add_quiet_argument(p)
    p.set_defaults(handler=run)


def _check_prior(prior: list[float] | None, k: int, what: str) -> list[float] | None:
    if prior is not None and len(prior) != k:
        raise ValueError(f"--prior takes {k} values ({what}), got {len(prior)}")
    return prior


def _check_positive_prior(values: Any, what: str) -> None:
    """Prior parameters that must be finite and > 0, named by the flag (not the model's)."""
    if not all(math.isfinite(v) and v > 0 for v in values):
        got = " ".join(f"{v:g}" for v in values)
        raise ValueError(f"--prior values must be finite and > 0 ({what}), got {got}")


def build_model(args: argparse.Namespace) -> tuple[Any, Any, str]:
    """(model, data, column) from the parsed arguments, with bundled defaults."""

    model = build_model_only(args)
    if args.data is None:
        from dpbayes.data import load_bundled

        return model, load_bundled("randhie"), args.column or BUNDLED_DEFAULTS[args.model]["column"]
    if args.categories and args.model == "dirichlet-categorical":
        model = _categories_as_column(model, args.data, args.column)
    return model, args.data, args.column


def _categories_as_column(model: Any, data: str, column: str) -> Any:
    """``--categories`` arrive as text; on a column of numbers (codes 1 2 3) they are the
    numbers they spell (as ``dpbayes query`` reads them), or no record ever matched.

    Whether they are numbers is decided from what is public, never from the values: for
    a CSV file (no column types; the engine would guess them from the values, and one
    record with a letter would turn a column of codes into text) from the labels
    themselves -- all of them decimal numbers: numbers, else text (the model then reads
    the column as text; also when one of them is 2**53 or more in magnitude, where not
    every number is a double: 64-bit ids are matched as the file spells them); for a typed
    file (Parquet) from its schema.
    """
    from dpbayes import models
    from dpbayes.data import open_table
    from dpbayes.data.readers import is_csv_path
    from dpbayes.data.text_values import parse_number
    from dpbayes.privacy.validation import CATEGORY_LIMIT

    labels = list(model.categories)
    if is_csv_path(data):
        # decimal numbers by the one rule for text fields (no "nan", "inf" or "1_000")
        spelled = all(parse_number(label) is not None for label in labels)
        if not (spelled and all(abs(float(label)) < CATEGORY_LIMIT for label in labels)):
            # text, or ids at or beyond 2**53 (not all doubles): matched as the file's text
            return model
    elif open_table(data).column_types().get(column) != "numeric":
        return model
    numbers = []
    for label in labels:
        try:
            x = float(label)
        except ValueError:
            raise ValueError(
                f"--categories {label!r} is not a number, but column {column!r} is numeric"
            ) from None
        numbers.append(int(x) if x.is_integer() else x)
    if len(set(numbers)) != len(numbers):
        raise ValueError(f"--categories name the same number twice: {labels}")
    return models.DirichletCategorical(alpha=model.alpha.tolist(), categories=numbers)


def build_model_only(args: argparse.Namespace) -> Any:
    """The model from the arguments, reading no data; inapplicable flags are refused."""
    from dpbayes import models

    refuse_inapplicable(
        args,
        {
            "categories": (
                args.model == "dirichlet-categorical",
                f"--categories is for dirichlet-categorical, not {args.model}",
            ),
            "bounds": (
                args.model == "normal-mean",
                f"--bounds is for normal-mean, not {args.model}",
            ),
            "noise_sd": (
                args.model == "normal-mean",
                f"--noise-sd is for normal-mean, not {args.model}",
            ),
        },
    )
    if args.data is not None and not args.column:
        raise ValueError("--column is required with --data")
    defaults = BUNDLED_DEFAULTS[args.model] if args.data is None else {}
    prior = args.prior
    if args.model == "beta-bernoulli":
        a, b = _check_prior(prior, 2, "alpha beta for beta-bernoulli") or (1.0, 1.0)
        _check_positive_prior((a, b), "alpha beta for beta-bernoulli")
        return models.BetaBernoulli(alpha=a, beta=b)
    if args.model == "dirichlet-categorical":
        cats = args.categories or defaults.get("categories")
        if not cats:
            raise ValueError(
                "--categories is required for dirichlet-categorical: the category labels "
                "are public and must not be read from the private data"
            )
        alpha: Any = prior if prior else [1.0]
        _check_positive_prior(alpha, "alpha for dirichlet-categorical")
        if len(alpha) == 1:
            alpha = [alpha[0]] * len(cats)
        if len(alpha) != len(cats):
            raise ValueError(f"--prior takes 1 or {len(cats)} values, got {len(alpha)}")
        return models.DirichletCategorical(alpha=alpha, categories=cats)
    bounds = args.bounds or defaults.get("bounds")
    if not bounds:
        raise ValueError("--bounds LOWER UPPER is required for normal-mean")
    if not all(math.isfinite(b) for b in bounds):
        raise ValueError(
            f"--bounds LOWER UPPER must be finite (the public range the data are clamped "
            f"to), got {bounds[0]:g} {bounds[1]:g}"
        )
    if not bounds[0] < bounds[1]:
        raise ValueError(
            f"--bounds LOWER UPPER needs LOWER < UPPER, got {bounds[0]:g} {bounds[1]:g}"
        )
    mean, sd = _check_prior(prior, 2, "mean sd for normal-mean") or (0.0, 10.0)
    if not (math.isfinite(mean) and math.isfinite(sd) and sd > 0):
        raise ValueError(
            f"--prior needs a finite mean and a finite sd > 0 (mean sd for normal-mean), "
            f"got {mean:g} {sd:g}"
        )
    if not math.isfinite(bounds[1] - bounds[0]):  # the sensitivity is the range
        raise ValueError(
            f"--bounds LOWER UPPER: the range {bounds[0]:g} to {bounds[1]:g} is wider than "
            "the largest double (rescale the data)"
        )
    noise_sd = args.noise_sd if args.noise_sd is not None else (bounds[1] - bounds[0]) / 4
    if args.noise_sd is None and not noise_sd > 0:
        raise ValueError(
            f"--bounds {bounds[0]:g} {bounds[1]:g}: the default --noise-sd (a quarter of the "
            "range) underflows to 0; give --noise-sd (or rescale the data)"
        )
    if not (math.isfinite(noise_sd) and noise_sd > 0):
        raise ValueError(f"--noise-sd must be > 0 and finite, got {noise_sd:g}")
    return models.NormalMean(
        prior_mean=mean, prior_sd=sd, noise_sd=noise_sd, lower=bounds[0], upper=bounds[1]
    )


def run(args: argparse.Namespace) -> int:
    from dpbayes.cli.release_run import run_release

    return run_release(args)
