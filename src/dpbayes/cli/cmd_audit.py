"""``dpbayes audit``: empirical privacy audit of a release mechanism or a §6 program.

Prints the claimed eps, the lower bound the audit found and whether the claim survived;
exit code 0 when no violation was found, 1 when the lower bound exceeds the claim. For
mechanisms with finitely many outputs whose probabilities are known (the exponential
mechanism with global or local sensitivity) it also prints the exact eps over the pairs
searched: the sampling bound can only fail a mechanism whose exact eps exceeds the claim,
and an exact eps above the claim (beyond a relative 1e-9, see
``dpbayes.audit.auditor.EXACT_TOLERANCE``) fails it, exit code 1, even where the samples
do not show the violation.

The local-sensitivity exponential mechanism (paper 003 §2.2, not DP) is below its claim
on the default coin at n = 10 (exact eps 0.633 at eps = 1), so its audit there passes;
it violates the claim, detectably, on the die with a concentrated prior, e.g.
``dpbayes audit --model dirichlet-categorical --prior 30 --n 200 --mechanism expmech
--sensitivity local --epsilon 1 --allow-non-private`` (exact eps 1.86).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

from dpbayes.cli.common import add_json_argument, add_quiet_argument, emit_json, progress

#: Largest --n an audit accepts: it builds neighbouring data sets of n records (and the
#: exponential mechanism scores every candidate), so memory grows with n.
MAX_AUDIT_N = 10_000_000

#: Largest number of candidate posteriors an --example's exponential mechanism may list:
#: ``hellinger-dirichlet`` enumerates all (n + 1)^k tuples of k counts (k = 3 categories),
#: which caps --n at 99; ``hellinger-beta`` lists n + 1 (--n at most 999,999; at 10^7 it
#: took 3 GB and 40 s).
MAX_EXAMPLE_TUPLES = 1_000_000

#: Largest number of records the neighbouring pairs of an --example audit may hold
#: (--max-pairs pairs of two data sets of n records each; 800 MB as 8-byte integers).
MAX_PAIR_RECORDS = 100_000_000

#: Largest --samples (outputs drawn per data set; the outputs of a pair are held at once).
MAX_AUDIT_SAMPLES = 10_000_000

#: Largest --categories of the die model, and of --samples times --categories (its outputs
#: are vectors of that many coordinates: ~90 bytes each, so at most ~1 GB; a review ran
#: --categories 100000000 to 8.7 GB).
MAX_AUDIT_CATEGORIES = 1_000
MAX_AUDIT_OUTPUT_COORDS = 10_000_000

#: The examples whose neighbours are k vs k + 1 ones for every k (n pairs, built lazily
#: here: only the first --max-pairs of them).
_BOOL_PAIR_EXAMPLES = frozenset({"input-beta", "params-beta", "hellinger-beta"})


def register(sub: Any) -> None:
    p = sub.add_parser(
        "audit",
        help="estimate a lower bound on eps from outputs on neighbouring data sets",
        description=(
            "Audit a release mechanism of a built-in model (searching neighbouring data sets "
            "of size n) or a paper-002 example program (--example). Exit code 1 if the "
            "empirical lower bound, or the exact eps where it is known, exceeds the claimed "
            "eps."
        ),
    )
    from dpbayes.audit.names import MODEL_NAMES

    p.add_argument("--model", choices=MODEL_NAMES, help="built-in model")
    p.add_argument("--mechanism", help="release mechanism (see dpbayes.release.mechanisms_for)")
    p.add_argument("--example", help="audit a paper-002 §6 example program instead")
    p.add_argument("--n", type=int, default=10, help="public number of records (default 10)")
    p.add_argument("--epsilon", type=float, default=1.0, help="claimed eps (default 1)")
    p.add_argument("--delta", type=float, default=None, help="claimed delta")
    p.add_argument("--sensitivity", help="expmech sensitivity: global, smooth or local")
    p.add_argument("--divergence", help="expmech score divergence: hellinger or tv")
    p.add_argument(
        "--categories", type=int, default=None, help="categories of the die model (default 3)"
    )
    p.add_argument(
        "--prior",
        type=float,
        nargs="+",
        help="prior: ALPHA BETA for beta-bernoulli; one or --categories concentrations for "
        "dirichlet-categorical (default: all 1)",
    )
    p.add_argument("--samples", type=int, default=10_000, help="outputs per data set")
    p.add_argument("--confidence", type=float, default=0.95, help="confidence of the bound")
    p.add_argument(
        "--max-pairs", type=int, default=10, help="neighbouring pairs searched (default 10)"
    )
    p.add_argument(
        "--keep-pairs",
        type=int,
        default=None,
        help="pairs audited with the full sample after ranking (default 2; 1 when the exact "
        "output distribution ranks them)",
    )
    p.add_argument("--seed", type=int, default=0, help="simulation seed")
    p.add_argument(
        "--allow-non-private",
        action="store_true",
        help="allow mechanisms that are not DP (local sensitivity): experiments only",
    )
    add_json_argument(p, "the audit result")
    add_quiet_argument(p)
    p.set_defaults(handler=run)


def _bool_pairs(n: int, limit: int) -> Iterator[tuple[Any, Any, str]]:
    """The first ``limit`` of ``dpbayes.programs.examples.bool_pairs(n)``, one at a time."""
    import numpy as np

    for k in range(min(n, limit)):
        yield (
            np.array([1] * k + [0] * (n - k)),
            np.array([1] * (k + 1) + [0] * (n - k - 1)),
            f"k={k} vs k={k + 1}",
        )


def _max_tuples_n(k: int) -> int:
    """The largest n with (n + 1)^k <= MAX_EXAMPLE_TUPLES."""
    n = 0
    while (n + 2) ** k <= MAX_EXAMPLE_TUPLES:
        n += 1
    return n


def _check_example_n(args: argparse.Namespace, examples: Any) -> None:
    """Refuse an --n the example cannot be audited at, in one line naming --n."""
    n, name = args.n, args.example
    if name in _BOOL_PAIR_EXAMPLES:  # the other examples have at most 2 pairs
        count = min(args.max_pairs, n)
        if count * 2 * n > MAX_PAIR_RECORDS:
            raise ValueError(
                f"--n must be at most {MAX_PAIR_RECORDS // (2 * count):,} for --example "
                f"{name} with --max-pairs {args.max_pairs} (its pairs hold 2 n records each, "
                f"at most {MAX_PAIR_RECORDS:,} records), got {n:,}"
            )
    if name == "hellinger-beta" and n + 1 > MAX_EXAMPLE_TUPLES:
        raise ValueError(
            f"--n must be at most {MAX_EXAMPLE_TUPLES - 1:,} for --example {name} (it lists "
            f"n + 1 candidate posteriors, at most {MAX_EXAMPLE_TUPLES:,}), got {n:,}"
        )
    if name == "hellinger-dirichlet":
        import inspect

        k = len(inspect.signature(examples[name]).parameters["alpha"].default)
        if n > _max_tuples_n(k):
            raise ValueError(
                f"--n must be at most {_max_tuples_n(k)} for --example {name} (it enumerates "
                f"(n + 1)^{k} count tuples, at most {MAX_EXAMPLE_TUPLES:,}), got {n:,}"
            )


def _example_pairs(args: argparse.Namespace, example: Any) -> list[Any]:
    """The first --max-pairs neighbouring pairs of the example (only those are built)."""
    if args.example in _BOOL_PAIR_EXAMPLES:
        return list(_bool_pairs(args.n, args.max_pairs))
    return list(example.pairs()[: args.max_pairs])


def _result(args: argparse.Namespace) -> Any:
    from dpbayes.audit import audit
    from dpbayes.audit.targets import audit_release, builtin_model

    if not 1 <= args.n <= MAX_AUDIT_N:
        raise ValueError(
            f"--n must be between 1 and {MAX_AUDIT_N:,} (an audit builds data sets of n "
            f"records), got {args.n:,}"
        )
    if args.max_pairs < 1:
        raise ValueError(f"--max-pairs must be >= 1, got {args.max_pairs}")
    if args.keep_pairs is not None and args.keep_pairs < 1:
        raise ValueError(f"--keep-pairs must be >= 1, got {args.keep_pairs}")
    if args.seed < 0:
        raise ValueError(f"--seed must be a non-negative integer, got {args.seed}")
    if not 1 <= args.samples <= MAX_AUDIT_SAMPLES:
        raise ValueError(
            f"--samples must be between 1 and {MAX_AUDIT_SAMPLES:,} (outputs drawn per data "
            f"set), got {args.samples:,}"
        )

    if args.example:
        from dataclasses import replace

        if args.prior is not None:
            raise ValueError("--prior is for --model, not --example")
        given = {
            "--model": args.model, "--mechanism": args.mechanism,
            "--sensitivity": args.sensitivity, "--divergence": args.divergence,
            "--categories": args.categories, "--allow-non-private": args.allow_non_private,
        }  # fmt: skip
        for flag, value in given.items():
            if value not in (None, False):  # it would be ignored: an example fixes its program
                raise ValueError(f"{flag} is for --model, not --example")
        if args.delta is not None:
            raise ValueError(
                "--delta is for --model, not --example (an example's delta is fixed by its "
                "program's certificate)"
            )

        from dpbayes.programs import examples as ex

        if args.example not in ex.EXAMPLES:
            raise ValueError(f"example must be one of {sorted(ex.EXAMPLES)}, got {args.example!r}")
        _check_example_n(args, ex.EXAMPLES)
        try:
            e = ex.EXAMPLES[args.example](n=args.n, epsilon=args.epsilon)
        except ValueError as err:
            raise ValueError(
                f"--epsilon {args.epsilon:g} is refused by --example {args.example} "
                f"(--n {args.n}): {err}"
            ) from None
        r = audit(
            e.program,
            _example_pairs(args, e),
            epsilon=e.epsilon,
            delta=e.delta,
            samples=args.samples,
            confidence=args.confidence,
            batch=True,
            keep_pairs=args.keep_pairs,
            rng=args.seed,
            name=e.name,
        )
        cert = e.program.certificate()
        return replace(r, details={"certificate": cert.to_dict(), "n": args.n})
    if not args.model or not args.mechanism:
        raise ValueError("give --model and --mechanism, or --example")
    if args.categories is not None and args.model != "dirichlet-categorical":
        raise ValueError(f"--categories is for dirichlet-categorical, not {args.model}")
    if args.categories is None:
        args.categories = 3
    if not 2 <= args.categories <= MAX_AUDIT_CATEGORIES:
        raise ValueError(
            f"--categories must be between 2 and {MAX_AUDIT_CATEGORIES:,}, got {args.categories:,}"
        )
    if args.model == "dirichlet-categorical":
        if args.samples * args.categories > MAX_AUDIT_OUTPUT_COORDS:
            raise ValueError(
                f"--samples times --categories must be at most {MAX_AUDIT_OUTPUT_COORDS:,} "
                f"(each output has --categories coordinates), got {args.samples:,} x "
                f"{args.categories:,}"
            )
    options: dict[str, Any] = {}
    if args.sensitivity:
        options["sensitivity"] = args.sensitivity
    if args.divergence:
        options["divergence"] = args.divergence
    delta = args.delta
    if delta is None:
        delta = 1e-3 if args.mechanism == "gaussian" or args.sensitivity == "smooth" else 0.0
    return audit_release(
        builtin_model(args.model, categories=args.categories, prior=args.prior),
        args.mechanism,
        args.n,
        epsilon=args.epsilon,
        delta=delta,
        samples=args.samples,
        confidence=args.confidence,
        allow_non_private=args.allow_non_private,
        max_pairs=args.max_pairs,
        keep_pairs=args.keep_pairs,
        rng=args.seed,
        **options,
    )


def run(args: argparse.Namespace) -> int:
    from dpbayes.cli.common import check_outputs

    check_outputs({"--json": args.json})
    with progress("auditing", quiet=args.quiet):
        r = _result(args)
    if args.json is not None:
        d = r.to_dict()
        d["epsilon_lower_bound"] = float(d["epsilon_lower_bound"])
        emit_json(d, args.json)
    else:
        print(r.describe())
        for key, value in r.details.items():
            if key != "certificate":
                print(f"  {key}: {value}")
        if not r.details.get("private", True):
            print(
                "  note: this mechanism is NOT differentially private; a pass only means "
                "these samples found no violation"
            )
        if r.exact_exceeds_claim:
            print(
                "  note: the exact eps exceeds the claim on these pairs: the claim is "
                "violated (FAIL) whether or not these samples show it"
            )
        elif r.exact_epsilon is not None:
            print(
                "  note: the exact eps is within the claim on these pairs, so no sampling "
                "audit can (soundly) fail it here"
            )
    return 0 if r.passed else 1
