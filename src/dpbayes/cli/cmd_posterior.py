"""``dpbayes posterior``: the recipient's side: the noise-aware posterior of a release file."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "posterior",
        help="noise-aware posterior of a released JSON (no data needed)",
        description=(
            "Read a release written by `dpbayes release --json` and print the posterior "
            "that accounts for the privacy noise (computed from the released values and "
            "public facts only), next to the naive one."
        ),
    )
    p.add_argument("--release", required=True, metavar="RELEASE.json", help="the release file")
    p.add_argument("--level", type=float, default=0.95, help="credible level (default 0.95)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
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
    p.set_defaults(handler=run)


def _plain(v: Any) -> Any:
    if hasattr(v, "tolist"):
        return v.tolist()
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    return v


def _fmt(v: Any) -> str:
    v = _plain(v)
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def _read(path: str) -> Any:
    """read_release, plus the Bayesian-network and regression records it cannot rebuild.

    Those models write ``{"family": ...}`` records; the recipient needs only the model,
    mechanism, released values, public facts and guarantee (the naive posterior is left
    out for them).
    """
    from pathlib import Path

    from dpbayes.models.bayes_net import BayesNet, NaiveBayes
    from dpbayes.models.linear_regression import BayesianLinearRegression
    from dpbayes.privacy import Guarantee
    from dpbayes.release.base import Release
    from dpbayes.release.reader import read_release

    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a JSON release record ({exc})") from None
    fam = record.get("model", {}).get("family") if isinstance(record, dict) else None
    if fam not in ("bayes-net", "naive-bayes", "bayesian-linear-regression"):
        return read_release(path)
    params = {k: v for k, v in record["model"].items() if k != "family"}
    model: Any
    if fam == "bayes-net":
        model = BayesNet(
            params["variables"], [tuple(e) for e in params["edges"]], alpha=params["alpha"]
        )
    elif fam == "naive-bayes":
        tgt = params["target"]
        feats = {k: v for k, v in params["variables"].items() if k != tgt}
        model = NaiveBayes(tgt, params["variables"][tgt], feats, alpha=params["alpha"])
    else:
        model = BayesianLinearRegression(**params)
    return Release(
        model=model,
        mechanism=str(record["mechanism"]),
        posterior=None,
        guarantee=Guarantee.from_dict(record["guarantee"]),
        released=dict(record["released"]),
        public=dict(record.get("public") or {}),
    )


def run(args: argparse.Namespace) -> int:
    from dpbayes.privacy.validation import check_probability
    from dpbayes.release.noise_aware import noise_aware_posterior
    from dpbayes.release.noise_aware_bayes_net import BayesNetNoiseAwarePosterior

    level = check_probability(args.level, "--level", open_interval=True)
    rel = _read(args.release)
    options: dict[str, Any] = {} if args.n is None else {"n": args.n}
    if args.n_prior is not None:
        options["n_prior"] = tuple(args.n_prior)
    aware = noise_aware_posterior(rel, **options)
    n_prior = getattr(aware, "n_prior", None)
    if isinstance(aware, BayesNetNoiseAwarePosterior):
        out = {
            "mechanism": rel.mechanism,
            "guarantee": rel.guarantee.to_dict(),
            "method": aware.method,
            "mean": {k: v.tolist() for k, v in aware.mean().cpts.items()},
            "credible_interval": {
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
        if args.json:
            json.dump({"noise_aware_posterior": out}, sys.stdout)
            sys.stdout.write("\n")
            return 0
        n_rec = rel.public.get("n", args.n)
        print(f"model:       Bayesian network {list(rel.model.nodes)} (n = {n_rec})")
        print(f"mechanism:   {rel.mechanism}; {rel.guarantee.describe()}")
        print(f"noise-aware posterior ({aware.method}):")
        for v in rel.model.nodes:
            print(f"  {v}: mean {_fmt(out['mean'][v])}")
            print(f"  {v}: {level:.0%} intervals {_fmt(out['credible_interval']['bounds'][v])}")
        if n_prior is not None:
            print(f"  n is private; prior on n: {n_prior.to_dict()['text']}")
        if out["diagnostics"] is not None:
            print(f"  diagnostics: {out['diagnostics']}")
        if aware.normaliser is not None:
            what = "grid normaliser" if rel.mechanism == "map" else "trimmed-region normaliser"
            print(f"  {what}: {aware.normaliser}")
        return 0
    summary: dict[str, Any] = {
        "mean": _plain(aware.mean()),
        "sd": _plain(aware.std()),
        "credible_interval": {
            "level": level,
            "kind": "central",
            "bounds": _plain(aware.interval(level)),
        },
    }
    if n_prior is not None:
        summary["n_prior"] = n_prior.to_dict()
        summary["omitted_mass"] = float(getattr(aware, "omitted_mass", 0.0))
    naive = None
    if rel.posterior is not None and hasattr(rel.posterior, "interval"):
        naive = {
            "mean": _plain(rel.posterior.mean()),
            "sd": _plain(rel.posterior.std()),
            "credible_interval": {
                "level": level,
                "kind": "central",
                "bounds": _plain(rel.posterior.interval(level)),
            },
        }
    if args.json:
        out = {
            "model": rel.model.to_dict(),
            "mechanism": rel.mechanism,
            "released": rel.released,
            "guarantee": rel.guarantee.to_dict(),
            "noise_aware_posterior": {"family": getattr(aware, "family", None), **summary},
            "naive_posterior": naive,
        }
        json.dump(out, sys.stdout)
        sys.stdout.write("\n")
        return 0
    n = rel.public.get("n")
    name = getattr(rel.model, "name", type(rel.model).__name__)
    print(f"model:       {name}" + (f" (n = {n})" if n is not None else ""))
    print(f"mechanism:   {rel.mechanism}; {rel.guarantee.describe()}")
    print(f"released:    {json.dumps(rel.released)}")
    print(f"noise-aware posterior ({getattr(aware, 'family', type(aware).__name__)}):")
    print(f"  mean:      {_fmt(summary['mean'])}")
    print(f"  sd:        {_fmt(summary['sd'])}")
    print(
        f"  {level:.0%} credible interval (central): {_fmt(summary['credible_interval']['bounds'])}"
    )
    if n_prior is not None:
        print(f"  n is private; prior on n: {n_prior.to_dict()['text']}")
    if naive is not None:
        print("naive posterior (noise ignored, over-confident):")
        print(f"  mean:      {_fmt(naive['mean'])}")
        bounds = naive["credible_interval"]["bounds"]
        print(f"  {level:.0%} credible interval (central): {_fmt(bounds)}")
    return 0
