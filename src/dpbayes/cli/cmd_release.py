"""``dpbayes release``: release a private posterior of a column and print it.

Privacy unit: on the bundled RAND HIE data one person (``person`` column, <= 5 rows, which
keeps every row; ``--record-level`` protects one person-year instead); on ``--data`` one
record unless ``--user-column COL --max-rows-per-user K`` bound each user to K rows. At
user level the neighbours are add/remove one user and n is private (mechanisms that need
a public n, expmech and input, are refused there).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

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


def add_privacy_unit_arguments(p: argparse.ArgumentParser) -> None:
    """``--user-column``, ``--max-rows-per-user``, ``--record-level``; see :func:`privacy_unit`."""
    g = p.add_argument_group(
        "privacy unit",
        "bundled data: one person (person column, <= 5 rows, every row kept) unless "
        "--record-level; your data: one record unless --user-column and --max-rows-per-user",
    )
    g.add_argument(
        "--user-column",
        metavar="COL",
        help="the column naming the person; guarantees protect one user (<= K rows)",
    )
    g.add_argument(
        "--max-rows-per-user",
        type=int,
        metavar="K",
        help="keep at most K rows per user, chosen in the engine (a public bound >= 1)",
    )
    g.add_argument(
        "--record-level",
        action="store_true",
        help="protect one row, not one person (opt-out of the bundled data's person level)",
    )


def privacy_unit(args: argparse.Namespace, *, bundled: bool) -> tuple[str | None, int | None]:
    """(user column, rows per user) from the arguments; (None, None) is record level.

    On the bundled data the default is person level (``BUNDLED_PRIVACY_UNIT``: the
    ``person`` column, k = 5, which keeps every row); on other data, record level unless
    both ``--user-column`` and ``--max-rows-per-user`` are given.
    """
    from dpbayes.data.datasets import BUNDLED_PRIVACY_UNIT
    from dpbayes.privacy.validation import check_int

    user, k = args.user_column, args.max_rows_per_user
    if args.record_level:
        if user is not None or k is not None:
            raise ValueError(
                "--record-level excludes --user-column and --max-rows-per-user: "
                "choose one privacy unit"
            )
        return None, None
    if k is not None:
        k = check_int(k, "--max-rows-per-user", minimum=1)
    if user is not None and (not isinstance(user, str) or not user.strip()):
        raise ValueError("--user-column must name a column")
    if bundled:
        default_user, default_k = BUNDLED_PRIVACY_UNIT["randhie"]
        if user is None or user == default_user:
            return default_user, default_k if k is None else k
    if user is None and k is None:
        return None, None
    if user is None:
        raise ValueError("--max-rows-per-user needs --user-column (the column naming the person)")
    if k is None:
        raise ValueError(
            "--user-column needs --max-rows-per-user K (a public bound, never read from the data)"
        )
    return user, k


def register(sub: Any) -> None:
    p = sub.add_parser(
        "release",
        help="release a differentially private posterior",
        description="Release a differentially private posterior of one column.",
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
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--plot", metavar="FILE.png", help="draw the released posterior")
    p.set_defaults(handler=run)


def build_model(args: argparse.Namespace) -> tuple[Any, Any, str]:
    """(model, data, column) from the parsed arguments, with bundled defaults."""
    from dpbayes import models
    from dpbayes.data import load_bundled

    defaults = BUNDLED_DEFAULTS[args.model] if args.data is None else {}
    if args.data is None:
        data: Any = load_bundled("randhie")
        column = args.column or defaults["column"]
    else:
        if not args.column:
            raise ValueError("--column is required with --data")
        data, column = args.data, args.column
    prior = args.prior
    if args.model == "beta-bernoulli":
        a, b = prior if prior else (1.0, 1.0)
        if prior and len(prior) != 2:
            raise ValueError("--prior takes two values (alpha beta) for beta-bernoulli")
        return models.BetaBernoulli(alpha=a, beta=b), data, column
    if args.model == "dirichlet-categorical":
        cats = args.categories or defaults.get("categories")
        if not cats:
            raise ValueError(
                "--categories is required for dirichlet-categorical: the category labels "
                "are public and must not be read from the private data"
            )
        alpha: Any = prior if prior else [1.0]
        if len(alpha) == 1:
            alpha = [alpha[0]] * len(cats)
        if len(alpha) != len(cats):
            raise ValueError(f"--prior needs 1 or {len(cats)} values, got {len(alpha)}")
        return models.DirichletCategorical(alpha=alpha, categories=cats), data, column
    bounds = args.bounds or defaults.get("bounds")
    if not bounds:
        raise ValueError("--bounds LOWER UPPER is required for normal-mean")
    mean, sd = prior if prior else (0.0, 10.0)
    if prior and len(prior) != 2:
        raise ValueError("--prior takes two values (mean sd) for normal-mean")
    noise_sd = args.noise_sd if args.noise_sd is not None else (bounds[1] - bounds[0]) / 4
    model = models.NormalMean(
        prior_mean=mean, prior_sd=sd, noise_sd=noise_sd, lower=bounds[0], upper=bounds[1]
    )
    return model, data, column


def describe_distribution(d: Any) -> str:
    params = ", ".join(f"{k}={_fmt(v)}" for k, v in d.to_dict().items() if k != "family")
    return f"{type(d).__name__}({params})"


def _fmt(v: Any) -> str:
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def interval_of(d: Any, level: float) -> Any:
    lo_hi = d.interval(level)
    try:
        return [float(lo_hi[0]), float(lo_hi[1])]
    except TypeError:
        return [[float(a), float(b)] for a, b in lo_hi]


def run(args: argparse.Namespace) -> int:
    import dpbayes as dpb
    from dpbayes.data import Table
    from dpbayes.privacy import Accountant
    from dpbayes.privacy.validation import check_probability

    level = check_probability(args.level, "--level", open_interval=True)
    if args.seed is not None and args.budget_file:
        raise ValueError(
            "--seed cannot spend from --budget-file: seeded noise is a reproducible "
            "simulation, not a release; drop --seed (secure noise) to spend real budget"
        )
    user, k = privacy_unit(args, bundled=args.data is None)
    model, data, column = build_model(args)
    if user is not None:
        data = Table(data, user_column=user, max_rows_per_user=k)
    accountant = Accountant.open(args.budget_file) if args.budget_file else None
    options = {
        k: v
        for k, v in (
            ("sensitivity", args.sensitivity),
            ("divergence", args.divergence),
            ("max_candidates", args.max_candidates),
            ("lattice", args.lattice),
        )
        if v is not None
    }
    rel = dpb.release(
        model,
        data,
        column=column,
        mechanism=args.mechanism,
        epsilon=args.epsilon,
        delta=args.delta,
        neighbours=args.neighbours,
        accountant=accountant,
        rng=args.seed,
        allow_non_private=args.allow_non_private,
        **options,
    )
    interval = interval_of(rel.posterior, level)
    if args.plot:
        from dpbayes.plots import plot_posteriors

        plot_posteriors(
            {"released posterior": rel.posterior, "prior": model.prior},
            args.plot,
            title=f"{model.name} on '{column}', {rel.guarantee.describe()}",
            level=level,
        )
    if args.json:
        out = rel.to_dict()
        out["credible_interval"] = {"level": level, "kind": "central", "bounds": interval}
        if accountant is not None:
            out["budget"] = accountant.summary()
        json.dump(out, sys.stdout)
        sys.stdout.write("\n")
        return 0
    print(f"model:       {model.name} on column '{column}'" + _n_text(rel))
    print(f"released:    {json.dumps(rel.released)}")
    print(f"posterior:   {describe_distribution(rel.posterior)}")
    print(f"mean:        {_fmt(_tolist(rel.posterior.mean()))}")
    print(f"{level:.0%} credible interval (central): {_fmt(_tolist(interval))}")
    print(f"guarantee:   {rel.guarantee.describe()}")
    if accountant is not None:
        eps_left, delta_left = accountant.remaining
        print(f"budget:      eps {eps_left:.6g}, delta {delta_left:.3g} remaining")
    if args.plot:
        print(f"plot:        {args.plot}")
    return 0


def _tolist(v: Any) -> Any:
    return v.tolist() if hasattr(v, "tolist") else v


def _n_text(rel: Any) -> str:
    n = rel.public.get("n")
    return f" (n = {n})" if n is not None else ""
