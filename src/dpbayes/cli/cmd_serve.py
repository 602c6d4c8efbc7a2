"""``dpbayes serve``: the online query-answering service (paper 000 §5) over HTTP.

Default: the bundled RAND HIE data over health, idp, year and binned mdvis, budget eps=1,
state in ``sqlite:///dpbayes-service.db``, privacy unit one person (``person`` column,
<= 5 rows: every row kept; ``--record-level`` for one person-year)::

    dpbayes serve --admin-key-file admin.key
    dpbayes serve --data people.csv --attributes sex=f,m age=bins:0,30,50,inf \\
        --epsilon 2 --db postgresql://user:pw@127.0.0.1/dp --port 8000 \\
        --user-column person_id --max-rows-per-user 3

On other data the unit is one record unless ``--user-column`` and ``--max-rows-per-user``
are given. The unit is stored with the cube: a restart with another unit on the same
database is refused.

The admin key is read from ``--admin-key-file`` (created with a new random key, mode 600,
if missing); without the option a random key is printed once on stderr. The admin key
also keys the database's digest of the counts: restart with the same key.

``--workers N`` serves with N processes on the one database (each worker reads the admin
key from ``--admin-key-file``); the ledger is shared through the database. ``--time-limit``
bounds how long one query may take to plan (then 503, nothing spent). ``--composition
pld`` accounts Gaussian answers by their privacy-loss distributions and ``rdp`` Laplace and
Gaussian ones by Rényi composition (several times as many answers from one budget as
basic composition); it is recorded in the database.
``--max-history-entries`` caps what the in-memory history of answers may store (then
fresh answers are refused, nothing spent).
There is no ``--seed``: the service spends a real budget, and every answer gets secure
noise.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from dpbayes.cli.common import add_privacy_unit_arguments, privacy_unit


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the HTTP query-answering service (paper 000)")
    p.add_argument("--data", help="CSV/Parquet file (default: the bundled RAND HIE data)")
    p.add_argument(
        "--attributes",
        "--attribute",
        dest="attributes",
        nargs="+",
        action="extend",
        default=[],
        metavar="SPEC",
        help="name=a,b,c (categories) or name=bins:e0,e1,...,inf; required with --data",
    )
    p.add_argument("--epsilon", type=float, default=1.0, help="total budget for a new database")
    p.add_argument("--delta", type=float, default=0.0, help="total delta for a new database")
    p.add_argument(
        "--composition",
        choices=("basic", "pld", "rdp"),
        help="how answers' spends add up within a cell: basic (eps adds up), pld "
        "(privacy-loss distributions of Gaussian answers, tight; needs --delta > 0) or rdp "
        "(Rényi; needs --delta > 0); recorded in the database (default: the database's, "
        "basic for a new one)",
    )
    p.add_argument(
        "--noise",
        choices=("laplace", "gaussian", "auto"),
        default=None,
        help="noise of fresh answers: laplace (default; gaussian under --composition pld, "
        "which takes Gaussian answers only), gaussian (needs --delta > 0) or auto (per "
        "answer, the one that raises the spent budget least; Gaussian answers pay off "
        "under --composition rdp once a cell has several answers)",
    )
    p.add_argument("--db", default="sqlite:///dpbayes-service.db", help="SQLAlchemy URL")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "--admin-key-file",
        help="file holding the admin key (created if missing); keep it: the key also keys "
        "the database's digest of the counts, so a restart needs it",
    )
    p.add_argument("--max-epsilon", type=float, help="cap on the eps of one fresh answer")
    p.add_argument(
        "--min-epsilon-fraction",
        type=float,
        default=1e-3,
        metavar="F",
        help="a fresh answer is charged at least F times the total eps (default 1e-3; 0: no "
        "floor), so that near-free answers cannot pile up on one cell",
    )
    p.add_argument(
        "--workers", type=int, default=1, help="worker processes on the one database (default 1)"
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long one query may take to plan before it is answered 503 (default 10)",
    )
    p.add_argument(
        "--body-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long a request's body may take to arrive before it is answered 408 (default 30)",
    )
    p.add_argument(
        "--header-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long a request's headers may take to arrive before it is answered 408 "
        "(default 10)",
    )
    p.add_argument(
        "--send-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long a client may leave a response it does not read before the connection "
        "is dropped (default 30)",
    )
    p.add_argument(
        "--max-history-entries",
        metavar="N",
        help="the most numbers the history of answers may store (its answers' non-zero "
        "coefficients and its factorisation over the cells they read); past it a fresh "
        "answer is refused, nothing spent (default 2^25 = 33554432, 256 MiB; 0: no cap)",
    )
    # refused with a one-line error (a real ledger never gets simulated noise)
    p.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    add_privacy_unit_arguments(p)
    p.set_defaults(handler=run)


def _admin_key(path: str | None) -> str:
    if path is None:
        key = secrets.token_urlsafe(32)
        print(f"dpbayes serve: admin key (shown once): {key}", file=sys.stderr)
        return key
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"--admin-key-file {p}: is a folder, not a file")
    if p.is_symlink() and not p.exists():
        raise ValueError(f"--admin-key-file {p}: a link to a file that does not exist")
    if p.exists():
        try:
            key = p.read_text(encoding="utf-8").strip()
        except UnicodeDecodeError:
            raise ValueError(f"--admin-key-file {p}: not UTF-8 text (a key file?)") from None
        if len(key) < 16:
            raise ValueError(f"--admin-key-file {p}: the key must have at least 16 characters")
        return key
    key = secrets.token_urlsafe(32)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(key + "\n")
    print(f"dpbayes serve: wrote a new admin key to {p}", file=sys.stderr)
    return key


def run(args: argparse.Namespace) -> int:
    if args.seed is not None:
        raise ValueError(
            "--seed is refused: the service spends a real privacy budget, so every answer "
            "gets secure noise (seeded simulation belongs to experiments, never to a ledger)"
        )
    if args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    if not args.time_limit > 0:
        raise ValueError(f"--time-limit must be > 0 seconds, got {args.time_limit}")
    if not args.body_timeout > 0:
        raise ValueError(f"--body-timeout must be > 0 seconds, got {args.body_timeout}")
    if not args.header_timeout > 0:
        raise ValueError(f"--header-timeout must be > 0 seconds, got {args.header_timeout}")
    if not args.send_timeout > 0:
        raise ValueError(f"--send-timeout must be > 0 seconds, got {args.send_timeout}")
    cap = max_history_entries(args.max_history_entries)
    if args.workers > 1 and not args.admin_key_file:
        raise ValueError("--workers needs --admin-key-file (each worker reads the key from it)")
    try:
        import uvicorn

        from dpbayes.service.app import create_app
        from dpbayes.service.protocol import HeadTimedH11Protocol, set_timeouts
    except ImportError as exc:
        msg = f"{exc}; install the service extra: pip install 'dpbayes[service]'"
        raise ImportError(msg) from None
    from dpbayes.cli.cmd_query import parse_attributes
    from dpbayes.service import EngineConfig

    if not 0 < args.port < 65536:
        raise ValueError(f"--port must be in 1..65535, got {args.port}")
    user, k = privacy_unit(args, bundled=not args.data)
    kw: dict[str, Any] = {"epsilon": args.epsilon, "delta": args.delta}
    kw.update(user_column=user, max_rows_per_user=k, record_level=user is None)
    if args.max_epsilon is not None:
        kw["max_epsilon"] = args.max_epsilon
    kw["min_epsilon_fraction"] = args.min_epsilon_fraction
    if args.composition is not None:
        kw["composition"] = args.composition
    if args.noise is not None:
        kw["noise"] = args.noise
    if args.data:
        if not args.attributes:
            raise ValueError("--data needs --attributes (the domains are never read from data)")
        kw["data"] = args.data
        kw["attributes"] = parse_attributes(args.attributes)
    elif args.attributes:
        kw["attributes"] = parse_attributes(args.attributes)
    config = EngineConfig(**kw)
    _check_port_free(args.host, args.port)  # before a new admin key file is written
    key = _admin_key(args.admin_key_file)
    common = {"host": args.host, "port": args.port, "log_level": "warning", "access_log": False}
    common["http"] = HeadTimedH11Protocol  # heads and unread responses are timed (protocol.py)
    _announce_when_listening(args.host, args.port, args.workers)
    if args.workers == 1:
        app = create_app(
            config,
            args.db,
            key,
            time_limit=args.time_limit,
            body_timeout=args.body_timeout,
            max_history_entries=cap,
        )
        set_timeouts(args.header_timeout, args.send_timeout)
        uvicorn.run(app, timeout_graceful_shutdown=5, **common)
        return 0
    # Set the database up once here (migrations, first rows, one-line errors), then start
    # the workers; each opens the database and catches up from its ledger.
    from dpbayes.service.app import WORKER_ENV
    from dpbayes.service.config import digest_key
    from dpbayes.service.state import QueryService

    QueryService(config, args.db, digest_key=digest_key(key), max_history_entries=cap).close()
    os.environ[WORKER_ENV] = json.dumps(
        {
            "config": worker_config(config),
            "db": args.db,
            "admin_key_file": str(Path(args.admin_key_file).resolve()),
            "time_limit": args.time_limit,
            "body_timeout": args.body_timeout,
            "header_timeout": args.header_timeout,
            "send_timeout": args.send_timeout,
            "max_history_entries": cap,
        }
    )
    uvicorn.run(
        "dpbayes.service.app:worker_app",
        factory=True,
        workers=args.workers,
        timeout_graceful_shutdown=5,
        **common,
    )
    return 0


def max_history_entries(text: str | None) -> int | None:
    """``--max-history-entries``: a whole number >= 0 (0: no cap; ``None``: the default)."""
    from dpbayes.service.state import MAX_HISTORY_ENTRIES

    if text is None:
        return MAX_HISTORY_ENTRIES
    try:
        n = int(text)
    except ValueError:
        try:
            f = float(text)
        except ValueError:
            f = math.nan
        n = int(f) if math.isfinite(f) and f.is_integer() else -1
    if n < 0:
        raise ValueError(
            f"--max-history-entries must be a whole number >= 0 (0: no cap), got {text!r}"
        )
    return None if n == 0 else n


def _check_port_free(host: str, port: int) -> None:
    """Refuse a port another process listens on, before anything is written (a busy port
    left a new admin key file behind). A port taken between this check and the server's
    own bind is still refused by the server."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ValueError(f"--host {host}: cannot be resolved ({exc})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            raise ValueError(
                f"--port {port}: cannot listen on {host}:{port} ({exc.strerror})"
            ) from None


def _announce_when_listening(host: str, port: int, workers: int, wait: float = 600.0) -> None:
    """Say on stderr where the service listens and how to stop it, once it accepts
    connections (a daemon thread polls the port: the same for one worker or several)."""
    import socket
    import threading
    import time

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:  # a busy port: one line now, not a false announcement
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            msg = f"--port {port}: cannot listen on {host}:{port} ({exc.strerror})"
            raise ValueError(msg) from None
    shown = f"[{host}]" if ":" in host else host
    probe = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    url = f"http://{shown}:{port}"
    where = "" if workers == 1 else f" with {workers} workers"

    def poll() -> None:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                socket.create_connection((probe, port), timeout=0.5).close()
            except OSError:
                time.sleep(0.1)
                continue
            print(
                f"dpbayes serve: listening on {url}{where} (web page {url}/, API document "
                f"{url}/openapi.json); press Ctrl+C to stop",
                file=sys.stderr,
                flush=True,
            )
            return

    threading.Thread(target=poll, name="dpbayes-serve-announce", daemon=True).start()


def worker_config(config: Any) -> dict[str, Any]:
    """The EngineConfig as keyword arguments that survive JSON (for the workers)."""
    import dataclasses

    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
