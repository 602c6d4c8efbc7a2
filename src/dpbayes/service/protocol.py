"""The HTTP protocol ``dpbayes serve`` runs: uvicorn's h11 protocol with deadlines on the
two things a client controls and uvicorn did not time, each request's head and the
reading of its responses.

uvicorn times a kept-alive connection only while it sends nothing, and a request's body
is timed by the app (``--body-timeout``). Two ways to hold a connection were left:

* **A slow head** (slowloris): a client sending one header line every few seconds held
  its connection for as long as it liked. Each request's head (request line and headers)
  must now arrive whole within ``header_timeout`` seconds (``--header-timeout``) of the
  start of the connection for its first request, of its first byte for a later one, and
  of the end of the previous response for a head whose first bytes came pipelined with
  the previous request. The deadline does not move as bytes trickle in. A late head is
  answered 408 and the connection closed; a connection that sent nothing is closed
  without a reply.
* **A client that does not read** its responses (say, a thousand pipelined requests and
  a receive window that never opens): uvicorn waited for the send buffer to drain, with
  no limit. Once the transport pauses writing (the buffer above its high-water mark), the
  client must take at least 64 KiB of it in each window of ``send_timeout`` seconds
  (``--send-timeout``) until writing resumes, else the connection is aborted: a slow but
  honest reader of a large answer (2 MB of history at 50 KB/s) keeps its connection.

Either way enough such clients could hold every file descriptor the server may open.

The protocol class is passed to uvicorn as ``http=`` (``dpbayes serve`` always uses it,
whether or not httptools is installed). The deadlines are class attributes, set by
:func:`set_timeouts` in each process that serves (the parent with one worker, each
worker's app factory with several), since uvicorn builds one protocol object per
connection from the class.
"""

from __future__ import annotations

import asyncio
import email.utils

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HEADER_TIMEOUT", "SEND_TIMEOUT", "HeadTimedH11Protocol", "set_timeouts"]

#: Seconds a request's head may take to arrive (``dpbayes serve --header-timeout``).
HEADER_TIMEOUT = 10.0
#: Seconds a client may leave a paused response unread (``dpbayes serve --send-timeout``).
SEND_TIMEOUT = 30.0
#: Bytes a client must take from a paused response per ``send_timeout`` window.
SEND_MIN_BYTES = 64 * 1024

_BODY = b"the request's headers did not arrive within the server's time limit\n"


def set_timeouts(header: float = HEADER_TIMEOUT, send: float = SEND_TIMEOUT) -> None:
    """Set the deadlines of every connection this process serves from now on."""
    for name, seconds in (("header", header), ("send", send)):
        if not seconds > 0:
            raise ValueError(f"{name} timeout must be > 0 seconds, got {seconds}")
    HeadTimedH11Protocol.header_timeout = float(header)
    HeadTimedH11Protocol.send_timeout = float(send)


def _cancel(timer: asyncio.TimerHandle | None) -> None:
    """Cancel ``timer``, if there is one."""
    if timer is not None:
        timer.cancel()


class HeadTimedH11Protocol(H11Protocol):
    """uvicorn's :class:`H11Protocol` with a deadline on each request's head and on a
    paused response (module docstring)."""

    header_timeout: float = HEADER_TIMEOUT
    send_timeout: float = SEND_TIMEOUT

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = False  # some of the current head has arrived
        self._send_timer: asyncio.TimerHandle | None = None
        self._send_left = 0  # bytes buffered when the send window started
        super().connection_made(transport)
        self._arm_head()  # the first head is timed from the connection

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:
            self._head_bytes = True
            if self._head_timer is None:  # the first byte of a later request's head
                self._arm_head()
        super().data_received(data)
        self._watch_head()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch_head()  # a pipelined head may now be the current one

    def _watch_head(self) -> None:
        """Disarm once the head is whole; arm when bytes of a next head sit in h11's
        buffer (they came with the previous request, or with the end of its body)."""
        if self.conn.their_state is not h11.IDLE:
            self._disarm_head()
            self._head_bytes = False
        elif self.conn.trailing_data[0] and self._head_timer is None:
            self._head_bytes = True
            self._arm_head()

    def _arm_head(self) -> None:
        self._disarm_head()
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_timed_out)

    def _disarm_head(self) -> None:
        _cancel(self._head_timer)
        self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self._head_bytes and self.conn.our_state is h11.IDLE:
            self.transport.write(self._late_head_reply())  # say why it is closed
        self.transport.close()

    def _late_head_reply(self) -> bytes:
        """The 408, written out: h11 sends no response before it has read a request."""
        headers = [
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, value in getattr(self.server_state, "default_headers", [])
        ]
        if not any(name.lower() == "date" for name, _ in headers):
            headers.append(("date", email.utils.formatdate(usegmt=True)))
        headers += [
            ("content-type", "text/plain; charset=utf-8"),
            ("connection", "close"),
            ("content-length", str(len(_BODY))),
        ]
        lines = "".join(f"{name}: {value}\r\n" for name, value in headers)
        return f"HTTP/1.1 408 Request Timeout\r\n{lines}\r\n".encode("latin-1") + _BODY

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._send_timer is None:
            self._arm_send()

    def _arm_send(self) -> None:
        self._send_left = self.transport.get_write_buffer_size()
        self._send_timer = self.loop.call_later(self.send_timeout, self._send_timed_out)

    def resume_writing(self) -> None:
        self._disarm_send()
        super().resume_writing()

    def _disarm_send(self) -> None:
        _cancel(self._send_timer)
        self._send_timer = None

    def _send_timed_out(self) -> None:
        """A client reading at least ``SEND_MIN_BYTES`` per window keeps its connection (a
        slow but honest reader of a large answer); one reading less is dropped."""
        self._send_timer = None
        if not (self.flow.write_paused or self.transport.is_closing()):
            return
        if self._send_left - self.transport.get_write_buffer_size() >= SEND_MIN_BYTES:
            self._arm_send()  # progress: another window
            return
        self.transport.abort()  # a close would wait for the unread buffer to drain

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head()
        self._disarm_send()
        super().connection_lost(exc)
