"""``dpbayes demo``: private releases on the bundled RAND HIE data, end to end."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="run private releases on the bundled data")
    p.add_argument("--epsilon", type=float, default=1.0, help="eps per release (default 1)")
    p.add_argument("--out", default="dpbayes-demo", help="folder for the figure")
    p.add_argument("--seed", type=int, help="seeded SIMULATION noise instead of secure noise")
    p.add_argument(
        "--max-rows-per-user",
        type=int,
        metavar="K",
        help="keep at most K person-years per person (default 5: every row is kept)",
    )
    p.add_argument(
        "--record-level",
        action="store_true",
        help="protect one person-year instead of one person",
    )
    p.set_defaults(handler=run, user_column=None)


def run(args: argparse.Namespace) -> int:
    import dpbayes as dpb
    from dpbayes.cli.cmd_release import describe_distribution, privacy_unit
    from dpbayes.data import BUNDLED_DESCRIPTION, Table, load_bundled
    from dpbayes.plots import plot_posteriors
    from dpbayes.privacy import Accountant, BudgetExceeded

    user, k = privacy_unit(args, bundled=True)
    df = load_bundled("randhie")
    data: Any = df if user is None else Table(df, user_column=user, max_rows_per_user=k)
    eps = args.epsilon
    # seeded noise is a simulation: it is accounted apart from any real budget
    budget = Accountant(3 * eps, simulation=args.seed is not None)
    people = df["person"].nunique()
    print(
        f"Bundled data: RAND Health Insurance Experiment, {len(df)} person-years, {people} people."
    )
    if user is None:
        print(
            "Guarantees below protect one person-year (one row), not one person (--record-level)."
        )
    else:
        kept = int(df.groupby(user).size().clip(upper=k).sum())
        print(
            f"Guarantees below protect one person: all of their rows, at most {k} per person "
            f"('{user}' column; {kept} of {len(df)} person-years kept), so noise scales by {k}."
        )
    print(f"Privacy budget for this session: eps = {3 * eps:g} (three releases of eps = {eps:g}).")
    noise = "secure (OpenDP)" if args.seed is None else f"SIMULATION, seed {args.seed}"
    print(f"Noise: {noise}\n")

    jobs: list[tuple[str, Any, str, str]] = [
        (
            "Share rating their health as poor",
            dpb.models.BetaBernoulli(alpha=1, beta=1),
            "hlthp",
            "laplace",
        ),
        (
            "Self-rated health",
            dpb.models.DirichletCategorical(
                alpha=[1, 1, 1, 1], categories=["excellent", "good", "fair", "poor"]
            ),
            "health",
            "geometric",
        ),
        (
            "Mean outpatient visits per year (clamped to [0, 20])",
            dpb.models.NormalMean(
                prior_mean=0.0, prior_sd=10.0, noise_sd=5.0, lower=0.0, upper=20.0
            ),
            "mdvis",
            "laplace",
        ),
    ]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seed = args.seed
    for i, (title, model, column, mechanism) in enumerate(jobs):
        exact = model.posterior(data, column=column)
        rel = dpb.release(
            model,
            data,
            column=column,
            mechanism=mechanism,
            epsilon=eps,
            accountant=budget,
            rng=None if seed is None else seed + i,
        )
        print(f"== {title}: column '{column}' ({BUNDLED_DESCRIPTION.get(column, '')})")
        print(f"   exact posterior (curator only): {describe_distribution(exact)}")
        print(f"   private posterior (publishable): {describe_distribution(rel.posterior)}")
        lo_hi = rel.posterior.interval(0.95)
        if getattr(lo_hi, "ndim", 1) == 2:
            cats = model.categories
            for c, (lo, hi) in zip(cats, lo_hi, strict=True):
                print(f"   95% interval P({c}): [{lo:.4f}, {hi:.4f}]")
        else:
            print(f"   95% credible interval: [{lo_hi[0]:.4f}, {lo_hi[1]:.4f}]")
        print(f"   guarantee: {rel.guarantee.describe()}")
        fig = plot_posteriors(
            {"private posterior": rel.posterior, "exact posterior": exact},
            out / f"demo_{column}.png",
            title=f"{title}: {rel.guarantee.describe()}",
        )
        print(f"   figure: {fig}\n")
    left = budget.remaining[0]
    print(f"Budget spent: eps {budget.spent[0]:g} of {budget.total[0]:g}; remaining {left:g}.")
    try:
        dpb.release(
            jobs[0][1],
            data,
            column="hlthf",
            mechanism="laplace",
            epsilon=eps,
            accountant=budget,
            rng=seed,
        )
    except BudgetExceeded as exc:
        print(f"A fourth release is refused: {exc}")
    return 0
