"""A time limit on the query engine's numerical work, checked cooperatively in its loops.

Every loop of the engine terminates after a bounded number of iterations; the bound can
still be large (a history of thousands of answers makes each step costly). A caller that
must answer in bounded time (the HTTP service) runs the work inside ``time_limit(s)``;
the loops call :func:`check_time`, which raises :class:`TimeLimitExceeded` once the limit
has passed. Nothing is spent or released by work that is cut short: the limit applies to
planning (the eps search, the posterior), never to a release in progress.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from contextvars import ContextVar

from dpbayes.privacy.validation import check_finite

__all__ = ["TimeLimitExceeded", "check_time", "own_time_limit", "time_limit"]

_DEADLINE: ContextVar[float] = ContextVar("dpbayes_answers_deadline", default=math.inf)


class TimeLimitExceeded(TimeoutError):
    """The work took longer than the time limit it ran under; nothing was spent."""


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Run the block with a time limit of ``seconds`` (``None``: no limit; <= 0: the limit
    has already passed, so the first check raises).

    Nested limits keep the earlier deadline. The limit is per thread (a context variable).
    """
    if seconds is None:
        yield
        return
    s = check_finite(seconds, "seconds")
    deadline = min(_DEADLINE.get(), time.monotonic() + s)
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


@contextlib.contextmanager
def own_time_limit(seconds: float | None) -> Iterator[None]:
    """Run the block with a time limit of ``seconds`` from now that replaces any enclosing
    one (``None``: no limit), and restore the enclosing one after it.

    For shared work that many callers wait for (a service's plan of a query): it gets its
    whole limit whatever the deadline of the caller that happens to run it."""
    if seconds is None:
        token = _DEADLINE.set(math.inf)
    else:
        s = check_finite(seconds, "seconds")
        token = _DEADLINE.set(time.monotonic() + s)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def check_time() -> None:
    """Raise :class:`TimeLimitExceeded` if the current time limit has passed."""
    deadline = _DEADLINE.get()
    if deadline != math.inf and time.monotonic() > deadline:
        raise TimeLimitExceeded("the query took longer than its time limit; nothing was spent")
