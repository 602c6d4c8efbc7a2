"""``dpbayes audit``: empirical privacy audit of a release mechanism or a §6 program.

Prints the claimed eps, the lower bound the audit found and whether the claim survived;
exit code 0 when no violation was found, 1 when the lower bound exceeds the claim. For
mechanisms with finitely many outputs whose probabilities are known (the exponential
mechanism with global or local sensitivity) it also prints the exact eps over the pairs
searched: the sampling bound can only fail a mechanism whose exact eps exceeds the claim.

The local-sensitivity exponential mechanism (paper 003 §2.2, not DP) is below its claim
on the default coin at n = 10 (exact eps 0.633 at eps = 1), so its audit there passes;
it violates the claim, detectably, on the die with a concentrated prior, e.g.
``dpbayes audit --model dirichlet-categorical --prior 30 --n 200 --mechanism expmech
--sensitivity local --epsilon 1 --allow-non-private`` (exact eps 1.86).
"""

from __future__ import annotations

import argparse
from typing import Any

from dpbayes.cli.common import add_json_argument, add_quiet_argument, emit_json, progress

#: Largest --n an audit accepts: it builds neighbouring data sets of n records (and the
#: exponential mechanism scores every candidate), so memory grows with n.
MAX_AUDIT_N = 10_000_000


def register(sub: Any) -> None:
    p = sub.add_parser(
        "audit",
        help="estimate a lower bound on eps from outputs on neighbouring data sets",
        description=(
            "Audit a release mechanism of a built-in model (searching neighbouring data sets "
            "of size n) or a paper-002 example program (--example). Exit code 1 if the "
            "empirical lower bound exceeds the claimed eps."
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
    p.add_argument("--categories", type=int, default=3, help="categories of the die model")
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


def _result(args: argparse.Namespace) -> Any:
    from dpbayes.audit import audit
    from dpbayes.audit.targets import audit_release, builtin_model

    if not 1 <= args.n <= MAX_AUDIT_N:
        raise ValueError(
            f"--n must be between 1 and {MAX_AUDIT_N:,} (an audit builds data sets of n "
            f"records), got {args.n:,}"
        )

    if args.example:
        from dataclasses import replace

        if args.prior is not None:
            raise ValueError("--prior is for --model, not --example")

        from dpbayes.programs import examples as ex

        if args.example not in ex.EXAMPLES:
            raise ValueError(f"example must be one of {sorted(ex.EXAMPLES)}, got {args.example!r}")
        e = ex.EXAMPLES[args.example](n=args.n, epsilon=args.epsilon)
        r = audit(
            e.program,
            e.pairs()[: args.max_pairs],
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
        if r.exact_epsilon is not None and r.exact_epsilon <= r.claimed_epsilon:
            print(
                "  note: the exact eps is within the claim on these pairs, so no sampling "
                "audit can (soundly) fail it here"
            )
    return 0 if r.passed else 1
