"""Progress bars for long computations (MCMC, the nonparametric fit, experiments, audits).

A bar is drawn on stderr only when stderr is a terminal, and only once the work has run
for ``delay`` seconds, so quick calls, pipes, logs, CI and notebooks' captured output
stay clean. It is erased when the work ends. Silence every bar with
``dpbayes.progress.set_progress(False)`` (or the environment variable
``DPBAYES_PROGRESS=0``); force bars even without a terminal with ``set_progress(True)``
(``DPBAYES_PROGRESS=1``); functions that take ``progress=`` decide per call. This module
imports nothing from dpbayes and no numeric library.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import IO, Any

__all__ = ["Progress", "progress_enabled", "set_progress", "silenced"]

_setting: bool | None = None


def set_progress(enabled: bool | None) -> None:
    """``False`` silences every bar, ``True`` draws them even when stderr is not a
    terminal, ``None`` restores the default (``DPBAYES_PROGRESS``, else terminals only)."""
    global _setting
    if enabled is not None and not isinstance(enabled, bool):
        raise TypeError(f"enabled must be True, False or None, got {enabled!r}")
    _setting = enabled


@contextlib.contextmanager
def silenced() -> Iterator[None]:
    """Within the block, no progress bar is drawn."""
    global _setting
    before = _setting
    _setting = False
    try:
        yield
    finally:
        _setting = before


def progress_enabled(show: bool | None = None, stream: IO[str] | None = None) -> bool:
    """Whether a bar is drawn: ``show`` if given, else the global setting, else
    ``DPBAYES_PROGRESS`` (``0``/``1``), else whether ``stream`` (stderr) is a terminal."""
    if show is not None:
        if not isinstance(show, bool):
            raise TypeError(f"progress must be None or a bool, got {show!r}")
        return show
    if _setting is not None:
        return _setting
    env = os.environ.get("DPBAYES_PROGRESS", "").strip().lower()
    if env in ("0", "false", "no", "off"):
        return False
    if env in ("1", "true", "yes", "on"):
        return True
    out = stream if stream is not None else sys.stderr
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):
        return False


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class Progress:
    """A one-line bar: ``desc: 45%|#####     | 450/1000 sweeps [00:03<00:04]``.

    Use as a context manager and call :meth:`update` with the work done since the last
    call. ``show``: None (the default rule, :func:`progress_enabled`), True or False.
    ``delay``: seconds before the bar first appears (default :attr:`DELAY`). Never raises
    from drawing.
    """

    WIDTH = 24
    DELAY = 1.0  # default seconds before a bar first appears

    def __init__(
        self,
        total: float,
        desc: str,
        *,
        unit: str = "step",
        show: bool | None = None,
        delay: float | None = None,
        stream: IO[str] | None = None,
    ) -> None:
        self.total = max(float(total), 0.0)
        self.desc = desc
        self.unit = unit
        self.stream: Any = stream if stream is not None else sys.stderr
        self.enabled = progress_enabled(show, self.stream)
        self.delay = self.DELAY if delay is None else float(delay)
        self.done = 0.0
        self._start = time.monotonic()
        self._last = -1.0
        self._drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, n: float = 1.0) -> None:
        """Add ``n`` units of finished work and redraw (at most ten times a second)."""
        self.done = min(self.done + n, self.total) if self.total else self.done + n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._start < self.delay or now - self._last < 0.1:
            return
        self._last = now
        self._write("\r" + self.line(now - self._start))
        self._drawn = True

    def line(self, elapsed: float) -> str:
        """The bar's text after ``elapsed`` seconds."""
        if self.total > 0:
            frac = self.done / self.total
            fill = int(frac * self.WIDTH)
            left = elapsed * (1.0 - frac) / frac if frac > 0 else 0.0
            return (
                f"{self.desc}: {frac:4.0%}|{'#' * fill}{' ' * (self.WIDTH - fill)}| "
                f"{self.done:.0f}/{self.total:.0f} {self.unit}s "
                f"[{_clock(elapsed)}<{_clock(left)}]"
            )
        return f"{self.desc}: {self.done:.0f} {self.unit}s [{_clock(elapsed)}]"

    def close(self) -> None:
        """Erase the bar (if it was drawn)."""
        if self._drawn:
            width = len(self.line(time.monotonic() - self._start))
            self._write("\r" + " " * width + "\r")
            self._drawn = False

    def _write(self, s: str) -> None:
        try:
            self.stream.write(s)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: no bar, no error
            self.enabled = False
