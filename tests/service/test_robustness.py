"""One request cannot hang the service (issue: a coefficient of 1e-300 looped forever).

Over real HTTP against the session's servers (conftest.py), each reproduction gets a
one-line 4xx or a correct answer and spends nothing; abandoned pathological requests do
not stall the page or other requests; a server with a time limit answers 503 and spends
nothing; ``dpbayes serve --seed`` is refused; answers never share noise across rebuilds.
"""

from __future__ import annotations

import concurrent.futures
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from dpbayes.service import EngineConfig

from conftest import Server as ServerProcess
from test_service_http import budget, history, post

Server = Any  # tests/service/conftest.py: Server

Z = [0.0] * 199
FIRST = {"coefficients": [1.0, *Z], "half_width": 50, "confidence": 0.9}
# (body, status, words in the one-line detail): the issue's reproductions after FIRST
PATHOLOGICAL: list[tuple[dict[str, Any], int, str]] = [
    ({"coefficients": [1e-300, *Z], "half_width": 50}, 400, "coefficients"),
    ({"coefficients": [5e-324, *Z], "half_width": 50}, 400, "coefficients"),
    ({"coefficients": [5e-324] * 200, "half_width": 50}, 400, "coefficients"),
    ({"coefficients": [1e-300, *Z], "half_width": 1e9}, 400, "coefficients"),
    ({"coefficients": [1e-300, *Z], "half_width": 1e-300}, 400, "coefficients"),
    ({"coefficients": [1e300, *Z], "half_width": 50}, 400, "coefficients"),
]


def _state(srv: Server) -> tuple[dict[str, Any], int]:
    return budget(srv), len(history(srv))


def test_issue_reproductions_get_a_one_line_4xx_and_spend_nothing(server: Server) -> None:
    key = server.new_analyst()
    first = post(server, key, FIRST)
    assert first.status_code == 200, first.text  # fresh, or free (test order)
    before = _state(server)
    for body, code, words in PATHOLOGICAL:
        r = post(server, key, {"confidence": 0.9, **body})
        assert r.status_code == code, (body["coefficients"][:2], r.text)
        detail = r.json()["detail"]
        assert words in detail and "\n" not in detail, detail
    assert _state(server) == before


def test_extreme_but_valid_numbers_get_correct_answers(server: Server) -> None:
    """The edges of the valid range are answered, and answered correctly: a query scaled
    by c has c times the estimate and interval of the unscaled one (from the history)."""
    key = server.new_analyst()
    one = post(server, key, FIRST).json()
    before = _state(server)
    for c in (1e-100, 1e-30, 1e7):  # (half_width <= 1e9 over HTTP)
        body = {"coefficients": [c, *Z], "half_width": 50 * c, "confidence": 0.9}
        r = post(server, key, body)
        assert r.status_code == 200, r.text
        a = r.json()
        assert a["free_from_history"] and a["epsilon_spent"] == 0.0
        assert a["estimate"] == pytest.approx(c * one["estimate"], rel=1e-9)
        lo, hi = a["interval"]
        assert (hi - lo) / 2 == pytest.approx(c * (one["interval"][1] - one["estimate"]), rel=1e-6)
        assert a["confidence_reached"] >= 0.9 - 1e-9
    # a half-width far beyond any count: met by the history, certainly
    wide = post(server, key, {**FIRST, "half_width": 1e9}).json()
    assert wide["free_from_history"] and wide["confidence_reached"] == 1.0
    assert _state(server) == before


def test_abandoned_pathological_requests_do_not_stall_the_server(server: Server) -> None:
    """More abandoned pathological requests than the server has threads (the issue: after
    about 50 the page stopped answering), then the page, the API and a query answer."""
    key = server.new_analyst()
    post(server, key, FIRST)
    body = {"coefficients": [1e-300, *Z], "half_width": 50, "confidence": 0.9}

    def abandon(_: int) -> None:
        try:  # the issue's client gave up after 2 s; so does this one
            httpx.post(server.url + "/api/query", json=body, headers=key, timeout=2)
        except httpx.TimeoutException:
            pass

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(abandon, range(64)))
    assert httpx.get(server.url + "/").status_code == 200
    assert httpx.get(server.url + "/api/history", headers=key).status_code == 200
    assert httpx.get(server.url + "/api/budget", headers=key).status_code == 200
    r = post(server, key, FIRST)
    assert r.status_code == 200 and r.json()["free_from_history"], r.text


def test_a_query_over_its_time_limit_is_503_and_spends_nothing(
    tmp_path: Path,
) -> None:
    """With a time limit shorter than any planning, every query is cut short: 503, one
    line, nothing spent; the rest of the API answers meanwhile."""
    srv = ServerProcess(f"sqlite:///{tmp_path / 'tl.db'}", tmp_path, "--time-limit", "1e-6")
    srv.start()
    try:
        key = srv.new_analyst()
        before = _state(srv)
        for where in ("health = poor", "idp = 1 and year = 2"):
            r = post(srv, key, {"where": where, "half_width": 20, "confidence": 0.9})
            assert r.status_code == 503, r.text
            assert "time limit" in r.json()["detail"] and "nothing was spent" in r.json()["detail"]
            assert r.headers["retry-after"] == "1"
        assert httpx.get(srv.url + "/api/schema", headers=key, timeout=30).status_code == 200
        assert _state(srv) == before
    finally:
        srv.stop()


def test_a_body_that_never_arrives_is_408_and_the_rest_keeps_answering(
    tmp_path: Path,
) -> None:
    """A review found no limit on how long a request body may take: a client announcing
    a body and trickling (or never sending) it held its request open for good. Over a
    real socket, such a request is answered 408 after --body-timeout, the API answers
    meanwhile, and nothing is spent."""
    import socket
    import time
    from urllib.parse import urlparse

    srv = ServerProcess(f"sqlite:///{tmp_path / 'bt.db'}", tmp_path, "--body-timeout", "1")
    srv.start()
    try:
        key = srv.new_analyst()
        before = _state(srv)
        url = urlparse(srv.url)
        with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
            head = (
                "POST /api/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Authorization: {key['Authorization']}\r\nContent-Length: 100\r\n\r\n"
            )
            sock.sendall(head.encode() + b'{"where": ')  # and nothing more
            t0 = time.monotonic()
            assert httpx.get(srv.url + "/api/schema", headers=key, timeout=30).status_code == 200
            reply = b""
            while b"\r\n\r\n" not in reply:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                reply += chunk
            waited = time.monotonic() - t0
            # and the connection is closed, even while the client keeps trickling bytes
            sock.settimeout(1.0)
            closed = False
            for _ in range(8):
                try:
                    sock.sendall(b" ")
                    if sock.recv(4096) == b"":
                        closed = True
                        break
                except TimeoutError:
                    continue
                except OSError:  # reset: closed as well
                    closed = True
                    break
        assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
        assert b"connection: close" in reply.lower() and closed
        assert waited < 10, waited
        assert _state(srv) == before
    finally:
        srv.stop()


def _trickle_until_closed(sock: Any, line: bytes, seconds: float) -> tuple[bytes, float]:
    """Send ``line`` every 0.2 s until the server closes the connection (or ``seconds``
    pass): what it replied, and how long that took."""
    import select
    import time

    t0, reply = time.monotonic(), b""
    while time.monotonic() - t0 < seconds:
        try:
            sock.sendall(line)
        except OSError:  # reset or broken pipe: closed
            break
        ready, _, _ = select.select([sock], [], [], 0.2)
        if ready:
            try:
                chunk = sock.recv(4096)
            except OSError:
                break
            if not chunk:
                break
            reply += chunk
    return reply, time.monotonic() - t0


@pytest.mark.parametrize("workers", ["1", "2"])
def test_headers_that_trickle_are_408_and_the_connection_is_closed(
    tmp_path: Path, workers: str
) -> None:
    """A review found the request head untimed: a client sending one header line at a
    time (slowloris) held its connection for good. Over real sockets, with
    --header-timeout 1: a head that trickles is answered 408 and closed, even on a
    kept-alive connection after a first answer; a connection that sends nothing is closed;
    the API answers meanwhile. With one worker and with several (each worker process
    sets its own deadline)."""
    import socket
    from urllib.parse import urlparse

    db = f"sqlite:///{tmp_path / 'ht.db'}"
    srv = ServerProcess(db, tmp_path, "--header-timeout", "1", "--workers", workers)
    srv.start()
    try:
        key = srv.new_analyst()
        url = urlparse(srv.url)
        address = (url.hostname, url.port)
        with socket.create_connection(address, timeout=10) as sock:
            sock.sendall(b"GET /api/schema HTTP/1.1\r\nHost: x\r\n")
            assert httpx.get(srv.url + "/api/schema", headers=key, timeout=30).status_code == 200
            reply, waited = _trickle_until_closed(sock, b"X-Slow: 1\r\n", 10.0)
        assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
        assert b"connection: close" in reply.lower() and waited < 8, waited
        with socket.create_connection(address, timeout=10) as sock:  # sends nothing
            reply, waited = _trickle_until_closed(sock, b"", 10.0)
        assert reply == b"" and waited < 8, (reply[:200], waited)
        with socket.create_connection(address, timeout=10) as sock:  # one answer, then slow
            sock.sendall(b"GET /api/schema HTTP/1.1\r\nHost: x\r\n")
            sock.sendall(f"Authorization: {key['Authorization']}\r\n\r\n".encode())
            first = b""
            while b"\r\n\r\n" not in first:
                first += sock.recv(4096)
            assert first.startswith(b"HTTP/1.1 200"), first[:200]
            sock.settimeout(0.5)
            try:  # the rest of the first answer's body
                while sock.recv(65536):
                    pass
            except TimeoutError:
                pass
            sock.settimeout(10)
            sock.sendall(b"GET /api/schema HTTP/1.1\r\n")
            reply, waited = _trickle_until_closed(sock, b"X-Slow: 1\r\n", 10.0)
        assert b"HTTP/1.1 408" in reply and waited < 8, (reply[:200], waited)
        assert b"\r\ndate: " in reply.lower(), reply[:300]
        with socket.create_connection(address, timeout=10) as sock:  # pipelined, then silent
            first = b"GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n"
            sock.sendall(first + b"GET /openapi.json HTTP/1.1\r\n")
            # timed from the end of the first answer: closed before the 5 s keep-alive would
            reply, waited = _trickle_until_closed(sock, b"", 10.0)
        assert reply.startswith(b"HTTP/1.1 200") and b"HTTP/1.1 408" in reply, reply[-300:]
        assert waited < 4, waited
    finally:
        srv.stop()


def test_a_client_that_does_not_read_its_answers_is_dropped(tmp_path: Path) -> None:
    """A review found that a client pipelining many requests and never reading the answers
    held its connection for good (uvicorn waits for the send buffer to drain). With
    --send-timeout 1 it is dropped: it can read only what the kernel had queued, not the
    thousand answers it asked for."""
    import socket
    import time
    from urllib.parse import urlparse

    srv = ServerProcess(f"sqlite:///{tmp_path / 'st.db'}", tmp_path, "--send-timeout", "1")
    srv.start()
    try:
        size = len(httpx.get(srv.url + "/openapi.json", timeout=30).content)
        url = urlparse(srv.url)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(10)
        with sock:
            sock.connect((url.hostname, url.port))
            sock.sendall(b"GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n" * 1000)
            time.sleep(4)  # read nothing: the server's buffer fills, its writing pauses
            got = 0
            try:
                while chunk := sock.recv(1 << 16):
                    got += len(chunk)
            except (ConnectionResetError, TimeoutError):
                pass
        # what the kernel had queued arrives; without the deadline, all 1000 answers did
        assert got < 500 * size, (got, size)
        assert httpx.get(srv.url + "/openapi.json", timeout=30).status_code == 200
    finally:
        srv.stop()


def test_serve_refuses_a_seed_in_one_line(tmp_path: Path) -> None:
    """A real ledger never gets simulated noise: ``serve --seed`` exits 2 with one line."""
    key = tmp_path / "admin.key"
    key.write_text("k" * 32 + "\n")
    cmd = [sys.executable, "-m", "dpbayes.cli", "serve", "--seed", "3", "--port", "1"]
    cmd += ["--db", f"sqlite:///{tmp_path / 's.db'}", "--admin-key-file", str(key)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "--seed is refused" in r.stderr
    assert not (tmp_path / "s.db").exists()  # refused before anything was opened
    with pytest.raises(TypeError, match="seed"):
        EngineConfig(seed=3)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "flag", ["--header-timeout", "--send-timeout", "--body-timeout", "--time-limit"]
)
def test_serve_refuses_a_time_limit_that_is_not_positive_in_one_line(
    tmp_path: Path, flag: str
) -> None:
    key = tmp_path / "admin.key"
    key.write_text("k" * 32 + "\n")
    cmd = [sys.executable, "-m", "dpbayes.cli", "serve", flag, "nan", "--port", "1"]
    cmd += ["--db", f"sqlite:///{tmp_path / 's.db'}", "--admin-key-file", str(key)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"{flag} must be > 0 seconds" in r.stderr
    assert not (tmp_path / "s.db").exists()


def test_answers_never_share_noise_across_rebuilds(tmp_path: Path) -> None:
    """The service used to re-seed its engine on every rebuild (a budget change forces
    one), so answers after each rebuild carried the same noise. Standardised noise
    (y - true answer) / scale of fresh answers to one cell each, with a rebuild between
    them, differs (on a server of its own: the cells must not be answered before)."""
    cube = EngineConfig().build_cube()
    srv = ServerProcess(f"sqlite:///{tmp_path / 'noise.db'}", tmp_path, "--epsilon", "5")
    srv.start()
    try:
        key = srv.new_analyst()
        noise = []
        for i, j in enumerate((3, 77, 151)):
            c = [0.0] * 200
            c[j] = 1.0
            r = post(srv, key, {"coefficients": c, "half_width": 200, "confidence": 0.6})
            a = r.json()
            assert r.status_code == 200 and a["status"] == "fresh", r.text
            y = history(srv)[-1]["noisy_answer"]
            scale = 5.0 / a["epsilon_spent"]  # k = 5 rows per person, max |coefficient| 1
            noise.append((y - cube.cell_vector()[j]) / scale)
            r = httpx.put(  # a budget change: the server rebuilds its state
                srv.url + "/api/admin/budget", json={"epsilon": 5.0 + i + 1}, headers=srv.admin()
            )
            assert r.status_code == 200, r.text
    finally:
        srv.stop()
    assert len(set(noise)) == 3 and all(math.isfinite(z) for z in noise), noise


def test_a_cell_cannot_be_flooded_with_near_free_answers(tmp_path: Path) -> None:
    """Asking one cell again and again with ever wider half-widths got fresh answers at eps
    of about 1e-9 each; the plan's error distribution has a term per answer, so a few
    thousand of them (well under 1e-5 of the budget) would push every plan on that cell
    past the time limit. A fresh answer is now charged at least 1e-3 of the total eps:
    the first answer costs that floor (its noise smaller than asked), and the wider asks
    after it are met by the history, free."""
    srv = ServerProcess(f"sqlite:///{tmp_path / 'flood.db'}", tmp_path, "--epsilon", "2")
    srv.start()
    try:
        key = srv.new_analyst()
        c = [0.0] * 200
        c[0] = 1.0
        statuses, spent = [], []
        for k in range(1, 21):
            body = {"coefficients": c, "half_width": 1e9 / math.sqrt(k), "confidence": 0.5}
            r = post(srv, key, body)
            assert r.status_code == 200, r.text
            statuses.append(r.json()["status"])
            spent.append(r.json()["epsilon_spent"])
        assert statuses[0] == "fresh" and spent[0] == pytest.approx(2e-3, rel=1e-12)
        assert set(statuses[1:]) == {"history"} and sum(spent[1:]) == 0.0
        assert budget(srv)["spent"]["epsilon"] == pytest.approx(2e-3, rel=1e-9)
    finally:
        srv.stop()


def test_a_slow_but_honest_reader_of_a_large_answer_keeps_its_connection() -> None:
    """The send deadline is a minimum rate, not a total time (a second review: a client
    reading a 2 MB history at 50 KB/s was dropped after 30 s). A real uvicorn server with
    the service's protocol, a 300 kB answer read at 100 kB/s under --send-timeout 1."""
    import asyncio
    import socket
    import threading
    import time

    import uvicorn

    from dpbayes.service.protocol import HeadTimedH11Protocol, set_timeouts

    size = 300_000
    body = b"x" * size

    async def app(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = [(b"content-length", str(size).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    set_timeouts(10.0, 1.0)
    try:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
        listener.bind(("127.0.0.1", 0))
        config = uvicorn.Config(app, http=HeadTimedH11Protocol, log_level="warning")
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=lambda: asyncio.run(server.serve(sockets=[listener])), daemon=True
        )
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        client.settimeout(10)
        client.connect(listener.getsockname())
        client.sendall(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        got = 0
        with client:
            while got < size:  # 100 kB/s, headers included
                chunk = client.recv(5000)
                if not chunk:
                    break
                got += len(chunk)
                time.sleep(len(chunk) / 100_000)
        assert got >= size, got
    finally:
        set_timeouts()  # this process's protocol back to its defaults
        server.should_exit = True
        thread.join(10)
