"""Shared test helpers: what to do when a system dependency (Chromium, PostgreSQL, Spark's
Java) is missing.

A test that needs one skips with a one-line reason naming the ``.ci/setup.d`` script that
installs it, so ``python -m pytest`` passes on a fresh machine; under ``CI=true`` (where
``.ci/run`` runs those scripts first) it FAILS instead, so CI never skips silently.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NoReturn

import pytest


def unavailable(what: str, script: str) -> NoReturn:
    """Skip (fail under CI=true): ``what`` is missing; ``script`` in .ci/setup.d installs it."""
    reason = f"{what}: run .ci/setup.d/{script} (part of .ci/run)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} [CI=true: required]", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def _xdist_group_is_honoured(request: pytest.FixtureRequest) -> None:
    """Under ``--dist loadgroup`` (the default addopts) a test marked ``xdist_group`` must
    carry the group in its node id, or pytest-xdist spreads the group over workers: the
    engine tests then share one PostgreSQL database from two processes and start Spark
    twice. A pytest/pytest-xdist pair that drops the mark fails those tests here."""
    item = request.node
    if getattr(request.config.option, "loadgroup", False) and "@" not in item.nodeid:
        if item.get_closest_marker("xdist_group") is not None:
            pytest.fail(
                f"xdist_group marks are ignored by pytest {pytest.__version__} with this "
                "pytest-xdist (the group is missing from the node id); install the versions "
                "of pyproject.toml's test extra",
                pytrace=False,
            )


@pytest.fixture(scope="session")
def require() -> Callable[[str, str], NoReturn]:
    """The helper :func:`unavailable`, for conftest fixtures in any test folder."""
    return unavailable


@pytest.fixture(scope="session")
def mp_kl_dirichlet() -> Callable[[list[float], list[float]], float]:
    """KL(Dir(a) || Dir(b)) in mpmath at 420 digits (a Beta is the 2-category case): the
    reference of the divergence tests at tiny and huge parameters."""
    mp = pytest.importorskip("mpmath")

    def kl(a: list[float], b: list[float]) -> float:
        with mp.workdps(420):
            x, y = [mp.mpf(v) for v in a], [mp.mpf(v) for v in b]
            x0, y0 = sum(x), sum(y)
            out = mp.loggamma(x0) - mp.loggamma(y0)
            out += sum(mp.loggamma(v) for v in y) - sum(mp.loggamma(v) for v in x)
            out += sum(
                (u - v) * (mp.digamma(u) - mp.digamma(x0)) for u, v in zip(x, y, strict=True)
            )
            return float(out)

    return kl
