"""The planning threads, shared in turn among analysts.

A request whose plan is not known (an eps search: a fresh answer's, a refusal's or a
quote's) runs on one of the service's planning threads. A plain thread pool served them
first come, first served: one analyst sending many such requests at once queued them all
ahead of everyone else's, and another analyst's request waited behind the whole flood
(seconds, then 503 at its time limit). Here each analyst (the admin for quotes counts as
one) plans on at most ``per_analyst`` threads at once; its further requests wait on the
event loop (no thread, no queue place in the pool) and, whenever a thread is free, it
goes to the waiting analyst holding the fewest threads (in turn among equals), so a
request of an analyst with nothing planning starts at once while another analyst floods,
or on the next free thread while several flood. A request
that waits past its deadline raises :class:`NoThread` (the HTTP layer answers 503,
nothing was planned, drawn or spent).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

__all__ = ["FairPool", "NoThread", "default_per_analyst"]


class NoThread(Exception):
    """A request waited past its deadline for a thread of its analyst's share."""


def default_per_analyst(threads: int) -> int:
    """Half the planning threads, at least two (all of them if there are fewer)."""
    return min(threads, max(2, threads // 2))


class FairPool:
    """``threads`` threads on which each ``who`` runs at most ``per_analyst`` jobs at once.

    Used from one event loop (every method but the thread's own job runs on it), so the
    counters need no lock. A job holds its place until its thread finishes it, even when
    the request that awaited it is cancelled: the pool never has more jobs than threads.
    """

    def __init__(self, threads: int, per_analyst: int | None = None, name: str = "") -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        per = default_per_analyst(threads) if per_analyst is None else per_analyst
        if not 1 <= per <= threads:
            raise ValueError(f"per_analyst must be in [1, {threads}], got {per}")
        self.threads, self.per_analyst = threads, per
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        self._busy = 0
        self._running: dict[str, int] = {}
        # the analysts with requests waiting, in the order they are served next
        self._waiting: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()

    def running(self, who: str) -> int:
        """How many jobs of ``who`` hold a thread now."""
        return self._running.get(who, 0)

    async def run(self, who: str, fn: Callable[[], Any], deadline: float | None) -> Any:
        """``fn()`` on a thread once ``who`` may have one more; :class:`NoThread` if that
        takes past ``deadline`` (``time.monotonic()``; ``None``: wait as long as it takes)."""
        loop = asyncio.get_running_loop()
        await self._acquire(who, deadline)
        try:
            job: Future[Any] = self.executor.submit(fn)
        except BaseException:
            self._release(who)
            raise
        job.add_done_callback(lambda _j: _call_soon(loop, self._release, who))
        return await asyncio.wrap_future(job)

    def shutdown(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
        for queue in self._waiting.values():
            for fut in queue:
                fut.cancel()
        self._waiting.clear()

    # ------------------------------------------------------------------ internals
    def _free_for(self, who: str) -> bool:
        return self._busy < self.threads and self._running.get(who, 0) < self.per_analyst

    def _grant(self, who: str) -> None:
        self._busy += 1
        self._running[who] = self._running.get(who, 0) + 1

    async def _acquire(self, who: str, deadline: float | None) -> None:
        # Every waiter that could start was started when the state last changed
        # (_dispatch), so a request that finds a free place takes it without overtaking.
        if self._free_for(who):
            self._grant(who)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(who, deque()).append(fut)
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
        except BaseException as exc:  # timed out or cancelled
            if fut.done() and not fut.cancelled():
                self._release(who)  # granted meanwhile: give the place back
            else:
                fut.cancel()
                self._forget(who, fut)
            if isinstance(exc, TimeoutError):
                raise NoThread(self._why(who)) from None
            raise

    def _why(self, who: str) -> str:
        """Why ``who`` has no thread now: its own share taken, or every thread busy."""
        held = self._running.get(who, 0)
        if held >= self.per_analyst:
            return f"this analyst's other requests held its share ({held} at once) of them"
        return f"all {self.threads} planning threads were busy (this analyst held {held} of them)"

    def _forget(self, who: str, fut: asyncio.Future[None]) -> None:
        queue = self._waiting.get(who)
        if queue is not None:
            try:
                queue.remove(fut)
            except ValueError:
                pass
            if not queue:
                del self._waiting[who]

    def _release(self, who: str) -> None:
        self._busy -= 1
        n = self._running[who] - 1
        if n:
            self._running[who] = n
        else:
            del self._running[who]
        self._dispatch()

    def _dispatch(self) -> None:
        """Start waiters while threads are free: the waiting analyst with the fewest
        threads first, and among equals the one whose turn it is."""
        while self._busy < self.threads:
            who, least = "", self.per_analyst
            for name in self._waiting:
                n = self._running.get(name, 0)
                if n < least:
                    who, least = name, n
            if least == self.per_analyst:
                return  # nobody waiting, or every waiting analyst is at its bound
            queue = self._waiting[who]
            fut = queue.popleft()
            if queue:
                self._waiting.move_to_end(who)  # the others go first next time
            else:
                del self._waiting[who]
            if fut.done():  # pragma: no cover - a cancelled waiter removes itself
                continue
            self._grant(who)
            fut.set_result(None)


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> None:
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:  # pragma: no cover - the loop is closed: nothing left to serve
        pass
