"""The body of ``dpbayes release``: check everything, release, lead with the noise-aware posterior.

Order (so that a failing call spends nothing and loses nothing): the arguments and every
flag's applicability; every output destination (``--out``, ``--json FILE``, the ledger);
``--dry-run`` stops here with the guarantee and its price; then the release (the only
step that draws noise and charges the ledger); then the outputs, the record before the
figure. A write that fails after the charge still prints the release record on stdout
(on stderr when stdout itself fails), and reports the failure in one line on stderr
(exit 2); Ctrl+C or SIGTERM from the release on does the same (exit 130).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable
from typing import Any

from dpbayes.cli.cmd_release import build_model, build_model_only
from dpbayes.cli.common import (
    check_ledger_writable,
    check_outputs,
    describe_distribution,
    emit_json,
    fmt,
    forget_stdout,
    ledger_files,
    privacy_unit,
    progress,
    refuse_inapplicable,
)
from dpbayes.release.display import released_text

__all__ = ["run_release"]

EXPMECH_ONLY = ("sensitivity", "divergence", "max_candidates", "lattice")


def _check_flags(args: argparse.Namespace) -> float:
    from dpbayes.privacy.validation import check_delta, check_epsilon, check_probability

    level = check_probability(args.level, "--level", open_interval=True)
    check_epsilon(args.epsilon, "--epsilon")
    check_delta(args.delta, "--delta")
    if args.seed is not None and args.budget_file:
        raise ValueError(
            "--seed cannot spend from --budget-file: seeded noise is a reproducible "
            "simulation, not a release; drop --seed (secure noise) to spend real budget"
        )
    expmech = args.mechanism == "expmech"
    refuse_inapplicable(
        args,
        {
            d: (
                expmech,
                f"--{d.replace('_', '-')} is for --mechanism expmech, not {args.mechanism}",
            )
            for d in EXPMECH_ONLY
        },
    )
    if expmech and args.model != "dirichlet-categorical":
        for d in ("max_candidates", "lattice"):
            if getattr(args, d) is not None:
                raise ValueError(f"--{d.replace('_', '-')} is for dirichlet-categorical")
    if args.dry_run and args.out:
        raise ValueError("--out: a --dry-run draws nothing, so there is nothing to plot")
    if expmech and args.sensitivity == "local" and not args.allow_non_private:
        # the library's refusal names its keyword, allow_non_private; here it is a flag
        raise ValueError(
            "--sensitivity local is not differentially private (the scale reads the data): "
            "pass --allow-non-private to run it as an experiment (never charged to a ledger)"
        )
    return level


def _options(args: argparse.Namespace) -> dict[str, Any]:
    return {k: getattr(args, k) for k in EXPMECH_ONLY if getattr(args, k, None) is not None}


def _stand_in(model: Any, column: str, user: str | None, k: int | None) -> Any:
    """Public values of the model's domain (no private data) for planning a dry run."""
    import pandas as pd

    from dpbayes.data import Table
    from dpbayes.models import BetaBernoulli, DirichletCategorical

    if isinstance(model, BetaBernoulli):
        values: list[Any] = [0, 1]
    elif isinstance(model, DirichletCategorical):
        values = list(model.categories)
    else:
        values = [model.lower, model.upper]
    frame = pd.DataFrame({column: values})
    if user is None:
        return frame
    frame[user] = range(len(values))
    return Table(frame, user_column=user, max_rows_per_user=k)


def _dry_run(args: argparse.Namespace, user: str | None, k: int | None) -> int:
    """The guarantee and its price against the ledger: nothing drawn, spent or read."""
    from dpbayes.privacy import Accountant
    from dpbayes.release import plan

    model = build_model_only(args)
    # the price goes to --json: never onto the ledger it is priced against, or the data
    check_outputs(
        {"--json": args.json}, keep={**ledger_files(args.budget_file), "--data": args.data}
    )
    column = args.column or "value"
    planned = plan(
        model,
        _stand_in(model, column, user, k),
        column=column,
        mechanism=args.mechanism,
        epsilon=args.epsilon,
        delta=args.delta,
        neighbours=args.neighbours,
        allow_non_private=args.allow_non_private,
        **_options(args),
    )
    g = planned.guarantee.with_simulation(args.seed is not None)
    note = (
        "the sensitivity depends on n and is computed from the data when run"
        if args.mechanism == "expmech"
        else None
    )
    out: dict[str, Any] = {
        "dry_run": True,
        "spent": {"epsilon": 0.0, "delta": 0.0},
        "cost": {"epsilon": g.epsilon, "delta": g.delta},
        "guarantee": g.to_dict(),
        "guarantee_text": g.describe(),
        "note": note,
        "ledger": None,
    }
    fits = True
    if args.budget_file:
        acc = Accountant.open(args.budget_file)
        refused = None
        try:
            acc.check_unit(g)
        except ValueError as exc:  # the real run would refuse it whatever the epsilon
            refused = str(exc)
        # the guarantee itself: priced by its noise record under pld/rdp, as charged
        fits = refused is None and acc.can_spend(g)
        eps_left, delta_left = acc.remaining
        out["ledger"] = {
            "path": args.budget_file,
            "remaining": {"epsilon": eps_left, "delta": delta_left},
            "fits": fits,
            **({"refused": refused} if refused else {}),
        }
    if args.json is not None:
        emit_json(out, args.json)
    else:
        print("dry run:     nothing drawn, nothing spent, no data read")
        print(f"guarantee:   {g.describe()}")
        if note:
            print(f"note:        {note}")
        print(f"cost:        eps {g.epsilon:.6g}, delta {g.delta:.3g}")
        if out["ledger"] is not None:
            led = out["ledger"]["remaining"]
            verdict = "fits" if fits else "does NOT fit: the release would be refused"
            print(
                f"ledger:      {args.budget_file}: eps {led['epsilon']:.6g}, delta "
                f"{led['delta']:.3g} remaining; this release {verdict}"
            )
    if not fits:
        why = (
            refused.replace("(nothing was spent)", "(dry run: nothing was spent)")
            if refused
            else f"budget exceeded (dry run): eps {g.epsilon:.6g} does not fit in "
            f"{args.budget_file}; nothing was spent"
        )
        print(f"dpbayes: error: {why}", file=sys.stderr)
        return 2
    return 0


def _noise_aware(
    rel: Any, quiet: bool, made: str, level: float, deliver: Callable[[], None] = lambda: None
) -> tuple[Any, dict | None, str | None, bool]:
    """(posterior, its summary, why they are missing, interrupted). Runs after the
    charge: whatever stops it (an error, Ctrl+C or SIGTERM, memory), the release that was
    paid for is still printed. The summary (quantiles: slow too) is computed here, under
    the same guard. SIGTERM is already turned into Ctrl+C by :func:`run_release`; one held
    since the charge (``deliver``) is delivered here, under the guard."""
    from dpbayes.release.display import slow_reason, summarise

    slow = slow_reason(rel)
    label = "noise-aware posterior" + (f" ({slow})" if slow else "")
    try:
        deliver()
        if slow:  # a kill (SIGKILL) during a long computation cannot be caught: say it first
            print(f"dpbayes: {made}: {json.dumps(rel.released)}", file=sys.stderr)
        with progress(label, quiet=quiet):
            aware = rel.noise_aware_posterior()
            return aware, summarise(aware, level), None, False
    except KeyboardInterrupt:
        return None, None, "interrupted (Ctrl+C or SIGTERM)", True
    except Exception as exc:  # charged already: nothing may lose the release
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return None, None, why, False


def _made(rel: Any, args: argparse.Namespace) -> str:
    """What the call made and what it cost, as it is (for the messages after the noise)."""
    g = rel.guarantee
    what = (
        "the simulation (seeded noise, not a release)"
        if g.simulation
        else "the result (NOT differentially private)"
        if not g.private
        else "the release"
    )
    if args.budget_file:
        return f"{what} was made and charged to --budget-file {args.budget_file}"
    return f"{what} was made (no --budget-file: no ledger was charged)"


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _on_sigterm(handler: Any) -> Any:
    """Install ``handler`` for SIGTERM (a ``timeout`` or a service manager stopping the
    CLI), returning the previous one; None where signals cannot be set (not the main
    thread). SIGTERM during the posterior then ends like Ctrl+C: the release is printed."""
    import signal
    import threading

    if handler is None or threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, handler)


def _record(rel: Any, summary: dict | None, why: str | None, level: float, accountant: Any) -> dict:
    from dpbayes.release.display import NAIVE_LABEL, NOISE_AWARE_LABEL, summarise

    na: dict[str, Any] = {"label": NOISE_AWARE_LABEL}
    na.update(summary if summary is not None else {"error": why})
    naive = {"label": NAIVE_LABEL, **summarise(rel.posterior, level)}
    out: dict[str, Any] = {"noise_aware_posterior": na, "naive_posterior": naive}
    out.update(rel.to_dict())
    if accountant is not None:
        try:  # a ledger's accountant reads its file again; after the charge that may fail
            out["budget"] = accountant.summary()
        except (OSError, ValueError) as exc:
            out["budget"] = {"error": f"the ledger could not be read after the charge ({exc})"}
    return out


def _print_text(
    rel: Any, rec: dict, model: Any, column: str, level: float, args: argparse.Namespace
) -> None:
    na, naive = rec["noise_aware_posterior"], rec["naive_posterior"]
    n = rel.record.n
    print(f"model:       {model.name} on column '{column}'" + (f" (n = {n})" if n else ""))
    print(f"noise-aware posterior ({na['label']}):")
    if "error" in na:
        print(f"  unavailable: {na['error']}")
    else:
        _print_summary(na, model, level)
        if "n_prior" in na:
            print(f"  n is private; prior on n: {na['n_prior']['text']}")
    print(f"naive posterior ({naive['label']}):")
    print(f"  {describe_distribution(rel.posterior)}")
    _print_summary(naive, model, level)
    print(f"released:    {released_text(rel.released)}  (6 digits; --json keeps all)")
    print(f"guarantee:   {rel.guarantee.describe()}")
    if "budget" in rec and "remaining" in rec["budget"]:
        r = rec["budget"]["remaining"]
        print(f"budget:      eps {r['epsilon']:.6g}, delta {r['delta']:.3g} remaining")
    elif "budget" in rec:
        print(f"budget:      {rec['budget']['error']}")


def _print_summary(s: dict, model: Any, level: float) -> None:
    bounds = s["interval"]["bounds"]
    cats = getattr(model, "categories", None)
    if cats is not None and isinstance(bounds[0], list):
        print(f"  {level:.0%} credible intervals (central), mean:")
        for c, (lo, hi), m in zip(cats, bounds, s["mean"], strict=True):
            print(f"    P({c}): [{lo:.4g}, {hi:.4g}], mean {m:.4g}")
        return
    print(f"  mean:      {fmt(s['mean'])}" + (f", sd {fmt(s['sd'])}" if "sd" in s else ""))
    print(f"  {level:.0%} credible interval (central): {fmt(bounds)}")


def _plot(rel: Any, aware: Any, model: Any, column: str, level: float, path: str) -> None:
    from dpbayes.plots import plot_posteriors

    curves = {}
    if aware is not None:
        curves["noise-aware posterior"] = aware
    curves["naive posterior (treats the noise as data)"] = rel.posterior
    plot_posteriors(
        curves,
        path,
        title=f"{model.name} on '{column}': {rel.guarantee.describe()}",
        level=level,
        categories=getattr(model, "categories", None),
        xlabel=column,
    )


def run_release(args: argparse.Namespace) -> int:
    import dpbayes as dpb
    from dpbayes.data import Table
    from dpbayes.privacy import Accountant
    from dpbayes.privacy.accountant import interrupts_held

    level = _check_flags(args)
    user, k = privacy_unit(args, bundled=args.data is None)
    if args.dry_run:
        return _dry_run(args, user, k)
    build_model_only(args)  # every flag checked before a file is touched
    check_outputs(
        {"--out": args.out, "--json": args.json},
        keep={**ledger_files(args.budget_file), "--data": args.data},
    )
    if args.out:
        from dpbayes.plots import check_figure_path

        check_figure_path(args.out, "--out")
    check_ledger_writable(args.budget_file)
    accountant = Accountant.open(args.budget_file) if args.budget_file else None
    model, data, column = build_model(args)
    if user is not None:
        try:
            data = Table(data, user_column=user, max_rows_per_user=k)
        except ValueError as exc:  # the library names its argument; the CLI its flag
            raise ValueError(str(exc).replace("user_column ", "--user-column ", 1)) from None
    previous = _on_sigterm(_interrupt)  # from before the charge to the end: no window
    try:
        # a Ctrl+C or SIGTERM from the ledger's save on waits until the release is in
        # hand (delivered by _noise_aware, where it ends like one during the posterior):
        # a charge on disk is never an interrupt that loses its release
        with interrupts_held() as deliver:
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
                **_options(args),
            )
            return _after_charge(rel, model, column, level, accountant, args, deliver)
    finally:
        _on_sigterm(previous)


def _after_charge(
    rel: Any,
    model: Any,
    column: str,
    level: float,
    accountant: Any,
    args: argparse.Namespace,
    deliver: Callable[[], None] = lambda: None,
) -> int:
    """Charged from here on: whatever fails or interrupts below (a write, a closed pipe,
    Ctrl+C or SIGTERM), the release is shown (on stdout, else on stderr), never lost. The
    record is shown before the figure is drawn (the slow step). ``deliver`` delivers a
    Ctrl+C or SIGTERM held since the charge."""
    made = _made(rel, args)
    aware, summary, why, interrupted = _noise_aware(rel, args.quiet, made, level, deliver)
    failures: list[str] = []
    if interrupted:
        failures.append("interrupted during the noise-aware posterior")
    rec: dict | None = None
    shown = False
    try:
        rec = _record(rel, summary, why, level, accountant)
        json_to_stdout = args.json == "-"
        if args.json not in (None, "-"):
            try:
                emit_json(rec, args.json)
            except OSError as exc:
                failures.append(f"could not write --json {args.json} ({exc.strerror or exc})")
                json_to_stdout = True
        try:
            if json_to_stdout:
                emit_json(rec, None)
            else:
                _print_text(rel, rec, model, column, level, args)
                if args.json not in (None, "-") and not any("--json" in f for f in failures):
                    print(f"record:      {args.json}")
                sys.stdout.flush()
            shown = True
        except OSError as exc:  # stdout gone (a reader that quit): the record goes to stderr
            failures.append(f"could not write stdout ({exc.strerror or exc})")
            forget_stdout()
        if args.out:
            try:
                _plot(rel, aware, model, column, level, args.out)
            except (OSError, ValueError, RuntimeError) as exc:
                failures.append(f"could not write --out {args.out} ({exc})")
            else:
                if shown and not json_to_stdout:
                    with contextlib.suppress(OSError):
                        print(f"figure:      {args.out}", flush=True)
    except KeyboardInterrupt:
        interrupted = True
        failures.append("interrupted (Ctrl+C or SIGTERM) while writing the outputs")
        if rec is None:
            rec = _record(rel, summary, why, level, accountant)
    if not failures:
        return 0
    where = "is printed on stdout" if shown else "is printed below"
    print(f"dpbayes: error: {'; '.join(failures)}; {made} and {where}", file=sys.stderr)
    if not shown:
        print(json.dumps(rec, default=str), file=sys.stderr, flush=True)
    return 130 if interrupted else 2
