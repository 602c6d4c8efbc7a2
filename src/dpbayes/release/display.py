"""How a :class:`~dpbayes.release.base.Release` presents itself: noise-aware posterior first.

The naive posterior (the released values taken as exact data) is over-confident: at eps =
0.05 on the bundled data its 95% interval covers the true share about a third of the time.
So every display (``repr``, the notebook's HTML, the CLI text and JSON) leads with the
noise-aware posterior and its interval, and labels the naive one with :data:`NAIVE_LABEL`.
Display only: nothing here draws noise or touches data.
"""

from __future__ import annotations

import html
import json
from typing import Any

__all__ = [
    "NAIVE_LABEL",
    "NOISE_AWARE_LABEL",
    "PRIVATE_N_SLOW_SCALE",
    "interval_record",
    "is_mcmc",
    "slow_reason",
    "summarise",
]

NAIVE_LABEL = "treats the noise as data; over-confident"
NOISE_AWARE_LABEL = "accounts for the privacy noise; use this one"


def plain(v: Any) -> Any:
    """numpy arrays and tuples as (nested) lists of floats, for JSON and text."""
    if hasattr(v, "tolist"):
        return v.tolist()
    if isinstance(v, tuple | list):
        return [plain(x) for x in v]
    return v


def released_text(released: Any, digits: int = 6) -> str:
    """The released values as JSON-like text, floats in ``digits`` significant digits
    (``1.23457e+08``, never a rounded number that looks exact): a noisy count printed as
    3.4278981493400273 beside intervals of 6 digits claimed a precision the noise does not
    have. ``--json`` and the release record keep every digit."""

    def text(v: Any) -> str:
        v = plain(v)
        if isinstance(v, dict):
            return "{" + ", ".join(f"{json.dumps(str(k))}: {text(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(text(x) for x in v) + "]"
        if isinstance(v, float):
            return f"{v:.{digits}g}"
        return json.dumps(v, default=str)

    return text(released)


def fmt(v: Any, digits: int = 4) -> str:
    v = plain(v)
    if isinstance(v, list):
        return "[" + ", ".join(fmt(x, digits) for x in v) + "]"
    return f"{v:.{digits}g}" if isinstance(v, float) else str(v)


def is_mcmc(rel: Any) -> bool:
    """Whether the noise-aware posterior of ``rel`` runs MCMC (networks with edges, regression)."""
    model = rel.model
    family = model.to_dict().get("family") if hasattr(model, "to_dict") else None
    if family == "bayesian-linear-regression":
        return True
    if family in ("bayes-net", "naive-bayes"):
        edges = getattr(model, "edges", ())
        return not (rel.mechanism == "laplace" and not edges)
    return False


#: A private-n posterior's exact sum over the true counts grows with the noise scale: at
#: 200 (eps 0.01 on a count pair) it takes about a second, at 2000 about ten.
PRIVATE_N_SLOW_SCALE = 200.0


def slow_reason(rel: Any) -> str | None:
    """Why the noise-aware posterior of ``rel`` takes seconds, or None when it is quick.

    MCMC (networks with edges, regression: seconds to a minute, by ``iterations``), the
    exponential mechanism's exact sum over every candidate (about 10 s at n = 20,000), and
    the exact sums over a private n at large noise scales.
    """
    if is_mcmc(rel):
        return "MCMC, seconds to a minute"
    if rel.mechanism == "expmech":
        n = rel.record.n
        size = f" at n = {n:,}" if isinstance(n, int) else ""
        return f"exact sum over every candidate{size}, up to tens of seconds"
    details = rel.guarantee.details
    scale = details.get("sigma", details.get("scale"))
    private_n = getattr(rel.record, "n", 0) is None
    if private_n and isinstance(scale, int | float) and scale >= PRIVATE_N_SLOW_SCALE:
        return f"exact sum over the private n at noise scale {scale:.3g}, seconds"
    return None


def interval_record(dist: Any, level: float) -> dict[str, Any]:
    """``{"level", "kind", "bounds"}``: the central credible interval of ``dist``."""
    return {"level": level, "kind": "central", "bounds": plain(dist.interval(level))}


def summarise(dist: Any, level: float) -> dict[str, Any]:
    """``{"family", "mean", "sd", "interval"}`` of a 1-d or per-category posterior."""
    out: dict[str, Any] = {
        "family": getattr(dist, "family", type(dist).__name__),
        "mean": plain(dist.mean()),
    }
    if hasattr(dist, "std"):
        out["sd"] = plain(dist.std())
    if hasattr(dist, "interval"):
        out["interval"] = interval_record(dist, level)
    n_prior = getattr(dist, "n_prior", None)
    if n_prior is not None:
        out["n_prior"] = n_prior.to_dict()
        out["omitted_mass"] = float(getattr(dist, "omitted_mass", 0.0))
    return out


def _cached_noise_aware(rel: Any) -> tuple[Any, str | None]:
    """The noise-aware posterior for display: computed when exact, never MCMC in a repr."""
    cached = rel.__dict__.get("_noise_aware")
    if cached is not None:
        return cached, None
    slow = slow_reason(rel)
    if slow is not None:
        return None, f"not computed for display ({slow}): call .noise_aware_posterior()"
    try:
        return rel.noise_aware_posterior(), None
    except Exception as exc:  # a display never raises
        return None, f"unavailable ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"


def _interval_text(dist: Any, level: float) -> str:
    try:
        return fmt(dist.interval(level))
    except Exception:  # posteriors without intervals (released parameters)
        return "n/a"


def lines(rel: Any, level: float = 0.95) -> list[tuple[str, str]]:
    """(label, text) rows: noise-aware posterior first, then the naive one, guarantee, released."""
    rows: list[tuple[str, str]] = []
    aware, why = _cached_noise_aware(rel)
    if aware is not None:
        fam = getattr(aware, "family", type(aware).__name__)
        mean = plain(aware.mean()) if hasattr(aware, "interval") else None
        text = f"{fam}, mean {fmt(mean)}, {level:.0%} interval {_interval_text(aware, level)}"
        rows.append(("noise-aware posterior", text))
    else:
        rows.append(("noise-aware posterior", str(why)))
    if rel.posterior is not None:
        interval = _interval_text(rel.posterior, level)
        text = f"{_describe(rel.posterior)}, {level:.0%} interval {interval}"
        rows.append((f"naive posterior ({NAIVE_LABEL})", text))
    rows.append(("guarantee", rel.guarantee.describe()))
    released = released_text(rel.released)
    rows.append(("released", released if len(released) <= 120 else released[:117] + "..."))
    return rows


def _describe(d: Any) -> str:
    try:
        params = {k: v for k, v in d.to_dict().items() if k != "family"}
    except Exception:
        return type(d).__name__
    text = ", ".join(f"{k}={fmt(v)}" for k, v in params.items())
    return f"{type(d).__name__}({text})" if len(text) <= 100 else type(d).__name__


def _title(rel: Any) -> str:
    name = getattr(rel.model, "name", None) or type(rel.model).__name__
    return f"Release({name}, mechanism={rel.mechanism!r})"


def release_repr(rel: Any) -> str:
    rows = lines(rel)
    width = max(len(k) for k, _ in rows if not k.startswith("naive"))
    body = "\n".join(
        f"  {k}:\n    {v}" if k.startswith("naive") else f"  {k + ':':<{width + 1}} {v}"
        for k, v in rows
    )
    return f"{_title(rel)}\n{body}"


def release_html(rel: Any) -> str:
    rows = "".join(
        f"<tr><th style='text-align:left;vertical-align:top'>{html.escape(k)}</th>"
        f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
        for k, v in lines(rel)
    )
    return (
        f"<div><strong>{html.escape(_title(rel))}</strong>"
        f"<table style='font-size:90%'>{rows}</table></div>"
    )
