"""The service's app served by uvicorn on a free port, in a thread of the test's process
(a real HTTP server, shared by the tests that need one in process)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import httpx
import uvicorn

from dpbayes.service.app import create_app
from dpbayes.service.protocol import HeadTimedH11Protocol
from dpbayes.service.state import QueryService

from conftest import ADMIN_KEY

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


class LiveApp:
    """``create_app(..., service=svc, **kw)`` listening on 127.0.0.1; ``close`` stops it
    and closes the service."""

    def __init__(self, svc: QueryService, **kw: Any) -> None:
        self.svc = svc
        app = create_app(None, "", ADMIN_KEY, service=svc, **kw)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        config = uvicorn.Config(app, http=HeadTimedH11Protocol, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=lambda: asyncio.run(self.server.serve(sockets=[self.listener])), daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.server.started

    def analyst(self, name: str) -> dict[str, str]:
        """A new analyst's authorisation header."""
        r = httpx.post(
            self.url + "/api/admin/analysts", json={"name": name}, headers=ADMIN, timeout=30
        )
        r.raise_for_status()
        return {"Authorization": f"Bearer {r.json()['api_key']}"}

    def post(self, path: str, body: Any, key: dict[str, str], timeout: float = 60) -> Any:
        return httpx.post(self.url + path, json=body, headers=key, timeout=timeout)

    def get(self, path: str, key: dict[str, str]) -> Any:
        return httpx.get(self.url + path, headers=key, timeout=30)

    def budget(self, key: dict[str, str] = ADMIN) -> Any:
        return self.get("/api/budget", key).json()

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(20)
        self.svc.close()
