"""Read a release back from its JSON record (``Release.to_dict`` / ``dpbayes release --json``).

The recipient's side: everything needed for a noise-aware posterior is in the record
(model and prior, mechanism, released values, public facts, guarantee); the data never are.
A record is checked when it is read: a record no mechanism could have produced (counts
outside [0, n], an unknown version, a guarantee of another mechanism, public facts that
do not fit the mechanism's typed record, :mod:`dpbayes.release.record`) is refused with a
one-line ``ValueError`` that names the field, before any inference is done with it.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from dpbayes.privacy import Guarantee
from dpbayes.release.base import Release
from dpbayes.release.record import PublicRecord

__all__ = ["RELEASE_FORMAT", "RELEASE_VERSION", "read_release", "release_from_dict"]

RELEASE_FORMAT = "dpbayes-release"
RELEASE_VERSION = 1
_FIELDS = ("model", "mechanism", "released", "guarantee")

#: The words a release's guarantee names its mechanism with (its ``mechanism`` field
#: starts with one of them; group-privacy releases append "at per-record eps ...").
_GUARANTEE_NAMES: dict[str, tuple[str, ...]] = {
    "laplace": ("laplace",),
    "geometric": ("geometric",),
    "gaussian": ("gaussian",),
    "expmech": ("expmech",),
    "input": ("randomized response", "gaussian input", "laplace input"),
    "fourier": ("laplace on bayes-net fourier",),
    "sampling": ("posterior sampling",),
    "map": ("exponential mechanism map",),
}


def _model(d: Any) -> Any:
    """The model of a record: the conjugate models by name, networks/regressions by family."""
    from dpbayes.models import model_from_dict

    if not isinstance(d, dict):
        raise ValueError(f"release record: 'model' must be an object, got {type(d).__name__}")
    fam = d.get("family")
    if fam is None:
        return model_from_dict(d)
    params = {k: v for k, v in d.items() if k != "family"}
    try:
        if fam == "bayes-net":
            from dpbayes.models.bayes_net import BayesNet

            return BayesNet(
                params["variables"], [tuple(e) for e in params["edges"]], alpha=params["alpha"]
            )
        if fam == "naive-bayes":
            from dpbayes.models.bayes_net import NaiveBayes

            tgt = params["target"]
            feats = {k: v for k, v in params["variables"].items() if k != tgt}
            return NaiveBayes(tgt, params["variables"][tgt], feats, alpha=params["alpha"])
        if fam == "bayesian-linear-regression":
            from dpbayes.models.linear_regression import BayesianLinearRegression

            return BayesianLinearRegression(**params)
        if fam == "bayesian-logistic-regression":
            from dpbayes.models.logistic_regression import BayesianLogisticRegression

            return BayesianLogisticRegression(**params)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"release record: model of family {fam!r} is incomplete ({exc})") from None
    raise ValueError(f"release record: unknown model family {fam!r}")


def _posterior(d: Any, model: Any) -> Any:
    """The naive posterior of a record (None when absent or of an unknown family)."""
    from dpbayes.models import distribution_from_dict
    from dpbayes.models.mixtures import mixture_from_dict

    if d is None:
        return None
    if not isinstance(d, dict):
        raise ValueError(f"release record: 'posterior' must be an object, got {type(d).__name__}")
    fam = d.get("family")
    if fam == "bayes-net-dirichlet":
        from dpbayes.models.bayes_net_posterior import BayesNetPosterior

        return BayesNetPosterior(model, d["alphas"])
    if fam == "bayes-net-parameters":
        from dpbayes.models.bayes_net_posterior import BayesNetParameters

        return BayesNetParameters(model, d["cpts"])
    if fam == "multivariate-normal":
        import numpy as np

        from dpbayes.models.linear_regression import MultivariateNormal

        return MultivariateNormal(
            mean_=np.asarray(d["mean"], dtype=float), cov=np.asarray(d["cov"], dtype=float)
        )
    if fam == "regression-weights":
        import numpy as np

        from dpbayes.models.linear_regression import RegressionWeights

        return RegressionWeights(np.asarray(d["weights"], dtype=float))
    try:
        return distribution_from_dict(d)
    except ValueError:
        return mixture_from_dict(d) if fam else None


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _check_counts(model: Any, released: dict[str, Any], record: PublicRecord) -> None:
    """Counts of a coin/category release: one finite value per category, in [0, n]."""
    from dpbayes.models import BetaBernoulli, DirichletCategorical

    if not isinstance(model, BetaBernoulli | DirichletCategorical):
        return
    counts = released.get("counts")
    m = 2 if isinstance(model, BetaBernoulli) else len(model.categories)
    if not isinstance(counts, list) or len(counts) != m:
        raise ValueError(f"release record: released 'counts' must list {m} numbers, got {counts!r}")
    if not all(_number(c) for c in counts):
        raise ValueError(f"release record: released 'counts' must be finite numbers: {counts}")
    n = record.n  # an integer >= 0 or None (checked by the record)
    upper = math.inf if n is None else float(n)
    bad = [c for c in counts if not 0.0 <= c <= upper]
    if bad:
        where = "[0, n]" if n is not None else ">= 0"
        raise ValueError(
            f"release record: released counts {bad} are outside {where}"
            + (f" (n = {n})" if n is not None else "")
            + ": no mechanism releases them"
        )


def _check_guarantee(mechanism: str, g: Guarantee, record: PublicRecord) -> None:
    names = _GUARANTEE_NAMES.get(mechanism, (mechanism,))
    text = g.mechanism.lower()
    if not any(text.startswith(w) for w in names):
        raise ValueError(
            f"release record: the guarantee is for mechanism {g.mechanism!r}, not the "
            f"record's mechanism {mechanism!r}"
        )
    s = record.sensitivity
    if s is not None and _number(g.sensitivity) and "group_privacy" not in g.details:
        if not math.isclose(float(s), g.sensitivity, rel_tol=1e-9):
            raise ValueError(
                f"release record: the guarantee's sensitivity {g.sensitivity:g} does not "
                f"match the public sensitivity {s:g}"
            )


def release_from_dict(d: dict[str, Any]) -> Release:
    """Rebuild a :class:`Release` from ``Release.to_dict()`` output, checking it.

    Raises ``ValueError`` (one line naming the field) for a record no release could have
    produced: an unknown format or version, missing fields, public facts that do not fit
    the mechanism's record, released counts that are not finite or lie outside [0, n], a
    guarantee for another mechanism or sensitivity.
    """
    if not isinstance(d, dict):
        raise TypeError(f"d must be a dict (a release record), got {type(d).__name__}")
    if d.get("format") != RELEASE_FORMAT:
        raise ValueError(
            f"release record: 'format' must be {RELEASE_FORMAT!r}, got {d.get('format')!r} "
            "(is this a file written by `dpbayes release --json`?)"
        )
    version = d.get("version", RELEASE_VERSION)
    if version != RELEASE_VERSION or isinstance(version, bool):
        raise ValueError(
            f"release record: 'version' {version!r} is not supported (this dpbayes reads "
            f"version {RELEASE_VERSION})"
        )
    missing = [k for k in _FIELDS if k not in d]
    if missing:
        raise ValueError(f"release record: missing field(s) {', '.join(missing)}")
    mechanism = d["mechanism"]
    if not isinstance(mechanism, str) or not mechanism:
        raise ValueError(f"release record: 'mechanism' must be a name, got {mechanism!r}")
    for key in ("released", "public"):
        if d.get(key) is not None and not isinstance(d[key], dict):
            raise ValueError(f"release record: {key!r} must be an object")
    released, public = dict(d["released"]), dict(d.get("public") or {})
    if not isinstance(d["guarantee"], dict):
        raise ValueError("release record: 'guarantee' must be an object")
    try:
        guarantee = Guarantee.from_dict(d["guarantee"])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"release record: invalid guarantee ({exc})") from None
    try:
        model = _model(d["model"])
    except TypeError as exc:
        raise ValueError(f"release record: invalid model ({exc})") from None
    from dpbayes.release.base import mechanisms_for

    known = mechanisms_for(model)
    if mechanism not in known:
        raise ValueError(
            f"release record: mechanism {mechanism!r} does not release "
            f"{type(model).__name__} (one of {known})"
        )
    draft = Release(
        model=model,
        mechanism=mechanism,
        posterior=None,
        guarantee=guarantee,
        released=released,
        public=public,
    )
    try:
        record = draft.record
    except ValueError as exc:
        raise ValueError(f"release record: {exc}") from None
    _check_guarantee(mechanism, guarantee, record)
    _check_counts(model, released, record)
    try:
        posterior = _posterior(d.get("posterior"), model)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"release record: invalid posterior ({exc})") from None
    return replace(draft, posterior=posterior)


def read_release(path: str | Path) -> Release:
    """Read a release JSON file (one object as written by ``dpbayes release --json``)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{p}: not a JSON release record (not UTF-8 text)") from None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: not a JSON release record ({exc.msg})") from None
    if not isinstance(record, dict):
        raise ValueError(f"{p}: not a JSON release record (not an object)")
    try:
        return release_from_dict(record)
    except ValueError as exc:
        raise ValueError(f"{p}: {exc}") from None
