"""The HTTP protocol ``dpbayes serve`` runs: uvicorn's h11 protocol with a deadline on
each request's head (its request line and headers).

uvicorn times a keep-alive connection only while it sends nothing, and a request's body
is timed by the app (``--body-timeout``), but the head was not timed at all: a client
that opened a connection and sent one header line every few seconds (slowloris) held it
for as long as it liked, and enough of them could hold every file descriptor the
server may open. Here each request's head must arrive whole within ``header_timeout``
seconds of its first byte (or, for a new connection, of the connection): the deadline is
not moved by the bytes that trickle in. A late head is answered 408 and the connection
is closed; a connection that sent nothing is closed without a reply.

The protocol class is passed to uvicorn as ``http=`` (``dpbayes serve`` always uses it,
whether or not httptools is installed). The deadline is a class attribute, set by
:func:`set_header_timeout` in each process that serves (the parent with one worker, each
worker's app factory with several), since uvicorn builds one protocol object per
connection from the class.
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HEADER_TIMEOUT", "HeadTimedH11Protocol", "set_header_timeout"]

#: Seconds a request's head may take to arrive (``dpbayes serve --header-timeout``).
HEADER_TIMEOUT = 10.0

_BODY = b"the request's headers did not arrive within the server's time limit\n"
_LATE_HEAD = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: " + str(len(_BODY)).encode() + b"\r\n\r\n" + _BODY
)


def set_header_timeout(seconds: float) -> None:
    """Set the head's deadline of every connection this process serves from now on."""
    if not seconds > 0:
        raise ValueError(f"header timeout must be > 0 seconds, got {seconds}")
    HeadTimedH11Protocol.header_timeout = float(seconds)


class HeadTimedH11Protocol(H11Protocol):
    """uvicorn's :class:`H11Protocol` with a deadline on each request's head."""

    header_timeout: float = HEADER_TIMEOUT

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_started = False
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:
            if not self._head_started:  # the first byte of a new request's head
                self._head_started = True
                self._arm()
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the head arrived whole
            self._disarm()
            self._head_started = False

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_timed_out)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self._head_started and self.conn.our_state is h11.IDLE:
            self.transport.write(_LATE_HEAD)  # some of a head arrived: say why it is closed
        self.transport.close()
