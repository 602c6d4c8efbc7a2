"""``dpbayes demo``: private releases on the bundled RAND HIE data, end to end."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from dpbayes.cli.common import add_json_argument, add_quiet_argument


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
    add_json_argument(p, "the three release records")
    add_quiet_argument(p)
    p.set_defaults(handler=run, user_column=None)


def run(args: argparse.Namespace) -> int:
    import dpbayes as dpb
    from dpbayes.cli.common import (
        check_outputs,
        describe_distribution,
        emit_json,
        privacy_unit,
        progress,
    )
    from dpbayes.data import BUNDLED_DESCRIPTION, Table, load_bundled
    from dpbayes.plots import plot_posteriors
    from dpbayes.privacy import Accountant, BudgetExceeded
    from dpbayes.privacy.validation import check_epsilon
    from dpbayes.release.display import NAIVE_LABEL, NOISE_AWARE_LABEL, summarise

    quiet_text = args.json == "-"  # stdout carries the JSON object alone

    def say(text: str = "") -> None:
        if not quiet_text:
            print(text)

    user, k = privacy_unit(args, bundled=True)
    df = load_bundled("randhie")
    data: Any = df if user is None else Table(df, user_column=user, max_rows_per_user=k)
    eps = check_epsilon(args.epsilon, "--epsilon")
    # seeded noise is a simulation: it is accounted apart from any real budget
    budget = Accountant(3 * eps, simulation=args.seed is not None)
    people = df["person"].nunique()
    say(f"Bundled data: RAND Health Insurance Experiment, {len(df)} person-years, {people} people.")
    if user is None:
        say("Guarantees below protect one person-year (one row), not one person (--record-level).")
    else:
        kept = int(df.groupby(user).size().clip(upper=k).sum())
        say(
            f"Guarantees below protect one person: all of their rows, at most {k} per person "
            f"('{user}' column; {kept} of {len(df)} person-years kept), so noise scales by {k}."
        )
    say(f"Privacy budget for this session: eps = {3 * eps:g} (three releases of eps = {eps:g}).")
    noise = "secure (OpenDP)" if args.seed is None else f"SIMULATION, seed {args.seed}"
    say(f"Noise: {noise}\n")

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
    for folder in (out, *out.parents):
        if folder.exists() and not folder.is_dir():
            raise OSError(f"--out {out}: {folder} is a file, not a folder (nothing was released)")
    made = [folder for folder in (out, *out.parents) if not folder.exists()]
    out.mkdir(parents=True, exist_ok=True)  # before any noise is drawn
    try:
        if not os.access(out, os.W_OK | os.X_OK):
            raise OSError(f"--out {out}: folder not writable (nothing was released)")
        # every figure (and --json, never one of them) checked before the first release
        figures = {column: str(out / f"demo_{column}.png") for _, _, column, _ in jobs}
        check_outputs(
            {**{f"--out's {c} figure": f for c, f in figures.items()}, "--json": args.json}
        )
    except OSError:
        for folder in made:  # the folders this call made, innermost first, left as found
            folder.rmdir()
        raise
    seed = args.seed
    records = []
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
        with progress("noise-aware posterior", quiet=args.quiet):
            aware = rel.noise_aware_posterior()
        say(f"== {title}: column '{column}' ({BUNDLED_DESCRIPTION.get(column, '')})")
        say(f"   noise-aware posterior (publishable; {NOISE_AWARE_LABEL}):")
        _intervals(say, model, aware, "      ")
        say(f"   naive posterior ({NAIVE_LABEL}):")
        say(f"      {describe_distribution(rel.posterior)}")
        _intervals(say, model, rel.posterior, "      ")
        say(f"   exact posterior (curator only, never published): {describe_distribution(exact)}")
        say(f"   guarantee: {rel.guarantee.describe()}")
        fig = plot_posteriors(
            {
                "noise-aware posterior": aware,
                "naive posterior (treats the noise as data)": rel.posterior,
                "exact posterior (curator only, not published)": exact,
            },
            figures[column],
            title=f"{title}: {rel.guarantee.describe()}",
            categories=getattr(model, "categories", None),
            xlabel=column,
        )
        say(f"   figure: {fig} (the exact curve is the curator's, drawn for comparison)\n")
        rec: dict[str, Any] = {"title": title, "figure": str(fig)}
        rec["noise_aware_posterior"] = {"label": NOISE_AWARE_LABEL, **summarise(aware, 0.95)}
        rec["naive_posterior"] = {"label": NAIVE_LABEL, **summarise(rel.posterior, 0.95)}
        records.append({**rec, **rel.to_dict()})
    left = budget.remaining[0]
    say(f"Budget spent: eps {budget.spent[0]:g} of {budget.total[0]:g}; remaining {left:g}.")
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
        say(f"A fourth release is refused: {exc}")
    if args.json is not None:
        emit_json({"releases": records, "budget": budget.summary()}, args.json)
    return 0


def _intervals(say: Any, model: Any, d: Any, indent: str) -> None:
    lo_hi = d.interval(0.95)
    if getattr(lo_hi, "ndim", 1) == 2:
        for c, (lo, hi), m in zip(model.categories, lo_hi, d.mean(), strict=True):
            say(f"{indent}P({c}): 95% interval [{lo:.4f}, {hi:.4f}], mean {m:.4f}")
    else:
        lo, hi, m = float(lo_hi[0]), float(lo_hi[1]), float(d.mean())
        say(f"{indent}95% credible interval: [{lo:.4f}, {hi:.4f}], mean {m:.4f}")
