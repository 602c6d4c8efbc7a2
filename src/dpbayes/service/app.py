"""The HTTP API of the query-answering service (FastAPI): paper 000 §5 as a web service.

Endpoints (``Authorization: Bearer KEY``; the security schemes ``analystKey`` for queries,
``adminKey`` for ``/api/admin``, either for reading): ``GET /api/schema``,
``POST /api/query``, ``POST /api/quote`` (the price, nothing spent), ``GET /api/history``,
``GET /api/budget``, ``POST /api/admin/analysts``, ``PUT /api/admin/budget``; the web page
at ``/``; the OpenAPI document at ``/openapi.json`` (bodies and statuses: schemas.py). No
endpoint returns records or exact counts: only the attribute domains, noisy answers and
what is inferred from them.
"""

import asyncio
import contextlib
import gc
import hashlib
import json
import logging
import os
import sqlite3
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException

from dpbayes.answers.limits import TimeLimitExceeded
from dpbayes.service.config import EngineConfig, digest_key
from dpbayes.service.fair import FairPool, NoThread
from dpbayes.service.quotes import Quote, quote
from dpbayes.service.schemas import (
    AnalystIn,
    AnalystOut,
    AnswerOut,
    BudgetIn,
    BudgetOut,
    HistoryOut,
    QueryIn,
    QuoteIn,
    QuoteOut,
    RefusalOut,
    SchemaOut,
    responses,
)
from dpbayes.service.state import (
    MAX_HISTORY_ENTRIES,
    Busy,
    Conflict,
    QueryService,
    Reply,
    check_admin,
)

__all__ = ["BODY_TIMEOUT", "MAX_BODY_BYTES", "WORKER_ENV", "create_app", "worker_app"]

WORKER_ENV = "DPBAYES_SERVE_WORKER"  # the workers' configuration (JSON, never the key)

MAX_BODY_BYTES = 64 * 1024
#: Seconds a request body may take to arrive (``dpbayes serve --body-timeout``).
BODY_TIMEOUT = 30.0
STATIC = Path(__file__).with_name("static")
# The page loads only its own script and style from this server (no CDN, no inline code).
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


#: A refused body's connection is closed: the rest of that body is never read.
_CLOSE = {"connection": "close"}
# who the admin is to the planning threads (a quote's share): no analyst name has a space
ADMIN_SHARE = "the admin"


class _BodyLimit:
    """ASGI middleware: refuse request bodies above ``limit`` bytes with 413, and bodies
    not received within ``timeout`` seconds (the query's time limit) with 408: a client
    that trickles its body (or announces one and never sends it) held a request open for
    as long as it liked."""

    def __init__(self, app: Any, limit: int, timeout: float | None = None) -> None:
        self.app, self.limit, self.timeout = app, limit, timeout

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers", [])).get(b"content-length")
        too_big = length is not None and (not length.isdigit() or int(length) > self.limit)
        chunks: list[dict[str, Any]] = []
        loop = asyncio.get_running_loop()
        deadline = None if self.timeout is None else loop.time() + self.timeout
        if not too_big:
            size, more = 0, True
            while more:
                try:
                    left = None if deadline is None else max(deadline - loop.time(), 0.0)
                    msg = await asyncio.wait_for(receive(), timeout=left)
                except TimeoutError:
                    resp = JSONResponse(
                        {"detail": f"request body not received within {self.timeout:g} s"},
                        status_code=408,
                        headers=_CLOSE,  # else each trickled byte kept the connection
                    )
                    await resp(scope, receive, send)
                    return
                if msg["type"] != "http.request":
                    chunks.append(msg)
                    break
                size += len(msg.get("body", b""))
                chunks.append(msg)
                more = msg.get("more_body", False)
                if size > self.limit:
                    too_big = True
                    break
        if too_big:
            resp = JSONResponse(
                {"detail": f"request body larger than {self.limit} bytes"},
                status_code=413,
                headers=_CLOSE,
            )
            await resp(scope, receive, send)
            return

        async def replay() -> Any:
            return chunks.pop(0) if chunks else await receive()

        await self.app(scope, replay, send)


def _reply_json(r: Reply) -> dict[str, Any]:
    a = r.answer
    out: dict[str, Any] = {
        "query": a.query,
        "status": a.status,
        "free_from_history": a.status == "history",
        "estimate": a.estimate,
        "interval": list(a.interval) if a.interval else None,
        "half_width": a.half_width,
        "confidence_required": a.level,
        "confidence_reached": a.confidence,
        "epsilon_spent": a.epsilon,
        "noise": a.noise if a.status == "fresh" else None,
        "remaining_epsilon": r.remaining_epsilon,
        "reason": a.reason,
        "guarantee": a.guarantee.describe() if a.guarantee else None,
    }
    if r.density is not None:
        out["density"] = r.density
    return out


def _first_error(exc: RequestValidationError) -> tuple[int, str]:
    errs = exc.errors()
    if not errs:
        return 422, "invalid request"
    e = errs[0]
    if e.get("type") == "json_invalid":
        return 400, f"malformed JSON body: {e.get('ctx', {}).get('error', e.get('msg'))}"
    loc = ".".join(str(p) for p in e.get("loc", ()) if p != "body")
    msg = str(e.get("msg", "invalid value")).removeprefix("Value error, ")
    if loc:
        return 422, f"{loc}: {msg}"
    return 422, msg if e.get("type") == "value_error" else f"body: {msg}"


def _parse_error(cause: BaseException | None) -> str:
    """One line for a body the JSON parser gave up on (FastAPI chains the cause)."""
    if isinstance(cause, RecursionError):
        return "malformed request body: JSON nested too deeply (arrays or objects)"
    if isinstance(cause, UnicodeError):
        return "malformed request body: not JSON text in UTF-8"
    if isinstance(cause, ValueError) and "digits" in str(cause):
        # Python's int parsing limit
        return "malformed request body: a number written with more than 4300 digits"
    return (
        "malformed request body: not JSON text in UTF-8, JSON nested too deeply, or a "
        "number written with more than 4300 digits"
    )


#: What a database failure is answered (503): nothing reached the ledger or the client.
DB_FAILURE = "the database failed ({}); nothing was spent or released: retry later"
_DB_ERRORS: tuple[type[Exception], ...] = (sa_exc.SQLAlchemyError, sqlite3.Error)
try:  # pragma: no cover - psycopg is installed with the PostgreSQL extra
    import psycopg

    _DB_ERRORS = (*_DB_ERRORS, psycopg.Error)
except ImportError:  # pragma: no cover
    pass


def _db_failure(exc: BaseException) -> JSONResponse:
    """503 for a database error, in one line (its class, never its SQL or parameters).

    Nothing was spent or released: a commit that fails rolls the transaction back (the
    answer's row and the budget's version with it), the in-memory state is marked stale
    and rebuilt from the database before the next request (so the accountant forgets
    the charge), and the failed request's noisy value is never handed to the HTTP layer
    (commits.py: the job's error is raised to its owner instead of an answer)."""
    logging.getLogger("dpbayes.service").error("database failure", exc_info=exc)
    return JSONResponse(
        {"detail": DB_FAILURE.format(type(exc).__name__)},
        status_code=503,
        headers={"Retry-After": "5"},
    )


class _DBFailure(Exception):
    """A database error met on a query thread (answered by :func:`_db_failure`)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(type(cause).__name__)
        self.cause = cause


def create_app(
    engine_config: EngineConfig | None,
    db_url: str,
    admin_key: str,
    *,
    service: Any = None,
    time_limit: float | None = 10.0,
    query_threads: int = 8,
    analyst_threads: int | None = None,
    body_timeout: float | None = BODY_TIMEOUT,
    max_history_entries: int | None = MAX_HISTORY_ENTRIES,
) -> FastAPI:
    """The FastAPI app: opens (and migrates) the database, restores budget and history.

    ``time_limit``: seconds a query may take from its arrival to the end of its planning
    (then 503, nothing spent). ``body_timeout``: seconds a request's body may take to
    arrive (then 408). ``max_history_entries``: the cap on what the history stores
    (:class:`QueryService`; ``None``: none). Queries run on their own ``query_threads``
    threads, so a flood of slow ones cannot starve the page, the schema, the budget or the history.
    Each analyst plans on at most ``analyst_threads`` of them at once (``None``: half, at
    least two), the analysts waiting taken in turn (fair.py): one analyst's flood cannot
    stall another's query.
    """
    key = digest_key(admin_key)  # checks the admin key too
    svc: QueryService = service or QueryService(
        engine_config or EngineConfig(),
        db_url,
        digest_key=key,
        time_limit=time_limit,
        max_history_entries=max_history_entries,
    )
    admin_sha = hashlib.sha256(admin_key.encode()).hexdigest()
    # eps searches: each analyst on at most ``analyst_threads`` of them at once, the
    # analysts waiting served in turn (fair.py), never one analyst's flood ahead of all
    pool = FairPool(query_threads, analyst_threads, name="dpbayes-query")
    # Requests whose plan is known (cached for the current state, or carried over) are
    # served on threads of their own, never queued behind eps searches on ``pool``.
    fast = ThreadPoolExecutor(
        max_workers=max(2, query_threads // 2), thread_name_prefix="dpbayes-cached"
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # Before the first request: load what answering loads (numerics, first plan), then
        # move everything made so far (modules, the cube, the history) out of the garbage
        # collector's reach. Its full collections scanned all of it, and stalled every
        # request for 40-140 ms several times a minute under load.
        svc.warm_up()
        gc.collect()
        gc.freeze()
        try:
            yield
        finally:
            pool.shutdown()
            fast.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(
        title="dpbayes query service",
        version="1",
        description="Differentially private answers to counting queries with guaranteed "
        "accuracy (paper 000 §5). Every answer is noisy or inferred from noisy answers.",
        lifespan=lifespan,
    )
    app.state.service = svc

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_req: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail
        if exc.status_code == 400 and detail == "There was an error parsing the body":
            detail = _parse_error(exc.__cause__)
        return JSONResponse({"detail": detail}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(_DB_ERRORS[0])
    async def _db_error(_req: Request, exc: Exception) -> JSONResponse:
        return _db_failure(exc)

    for extra in _DB_ERRORS[1:]:
        app.add_exception_handler(extra, _db_error)

    @app.exception_handler(_DBFailure)
    async def _db_failed(_req: Request, exc: _DBFailure) -> JSONResponse:
        return _db_failure(exc.cause)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_req: Request, exc: RequestValidationError) -> JSONResponse:
        code, msg = _first_error(exc)
        return JSONResponse({"detail": msg}, status_code=code)

    analyst_scheme = HTTPBearer(
        scheme_name="analystKey",
        description="an analyst's API key (POST /api/admin/analysts makes one)",
        auto_error=False,
    )
    admin_scheme = HTTPBearer(
        scheme_name="adminKey",
        description="the data curator's admin key (dpbayes serve --admin-key-file)",
        auto_error=False,
    )
    Cred = HTTPAuthorizationCredentials | None

    def _unauthorised(msg: str) -> HTTPException:
        return HTTPException(401, msg, headers={"WWW-Authenticate": "Bearer"})

    def _analyst(token: str | None) -> str:
        name = svc.analyst(token)
        if name is None:
            raise _unauthorised("missing or invalid API key (Authorization: Bearer KEY)")
        return name

    def analyst(cred: Annotated[Cred, Security(analyst_scheme)]) -> str | None:
        return None if cred is None else cred.credentials.strip()

    def reader(
        a: Annotated[Cred, Security(analyst_scheme)], _b: Annotated[Cred, Security(admin_scheme)]
    ) -> str:
        token = None if a is None else a.credentials.strip()
        if check_admin(token, admin_sha):
            return ADMIN_SHARE  # no analyst's name: an analyst "admin" has a share of its own
        return _analyst(token)

    def admin(cred: Annotated[Cred, Security(admin_scheme)]) -> str:
        if not check_admin(None if cred is None else cred.credentials.strip(), admin_sha):
            raise _unauthorised("missing or invalid admin key")
        return "admin"

    async def _in_pool(fn: Any, who: str | None = None, deadline: float | None = None) -> Any:
        """Run ``fn`` on the fast threads, or with ``who`` on a planning thread of
        ``who``'s share; 503 when it runs out of time or retries, or the database fails."""
        try:
            if who is None:
                return await asyncio.get_running_loop().run_in_executor(fast, fn)
            try:
                return await pool.run(who, fn, deadline)
            except NoThread as exc:
                raise HTTPException(
                    503,
                    f"waited past the time limit for a planning thread: {exc}; nothing spent: "
                    "retry",
                    headers={"Retry-After": "1"},
                ) from None
        except _DB_ERRORS as exc:
            raise _DBFailure(exc) from None
        except (TimeLimitExceeded, Busy) as exc:
            raise HTTPException(
                503, str(exc).splitlines()[0], headers={"Retry-After": "1"}
            ) from None
        except Conflict as exc:
            raise HTTPException(409, str(exc)) from None
        except (ValueError, TypeError) as exc:
            raise HTTPException(400, str(exc).splitlines()[0]) from None

    def _deadline() -> float | None:
        return None if time_limit is None else time.monotonic() + time_limit

    @app.get("/api/schema", response_model=SchemaOut, responses=responses(401))
    def schema(_who: Annotated[str, Depends(reader)]) -> dict[str, Any]:
        """The attributes and their values (the cube's cells); no counts."""
        return svc.schema()

    def _ask_cached(
        body: QueryIn, token: str | None, deadline: float | None
    ) -> tuple[str, Reply | None]:
        who = _analyst(token)  # here, on the query's thread: one hop per request
        return who, _ask(body, who, deadline, True)

    def _ask(
        body: QueryIn, who: str, deadline: float | None, cached_only: bool = False
    ) -> Reply | None:
        q = svc.make_query(body.where, body.coefficients)
        return svc.ask(
            who,
            q,
            half_width=body.half_width,
            confidence=body.confidence,
            density=body.density,
            deadline=deadline,
            cached_only=cached_only,
        )

    @app.post(
        "/api/query",
        response_model=AnswerOut,
        responses=responses(
            400,
            401,
            409,
            413,
            422,
            503,
            bodies={409: RefusalOut},
            why={409: "refused (e.g. the budget cannot pay for it); nothing was spent"},
        ),
    )
    async def query(body: QueryIn, token: Annotated[str | None, Depends(analyst)]) -> Any:
        """Answer within +-half_width with probability >= confidence (free if the history
        can; else one fresh noisy answer, or a refusal that spends nothing)."""
        deadline = _deadline()
        who, r = await _in_pool(partial(_ask_cached, body, token, deadline))
        if r is None:  # not planned yet on this state: an eps search, on the query threads
            r = await _in_pool(partial(_ask, body, who, deadline), who, deadline)
        assert r is not None
        if r.answer.status == "refused":
            return JSONResponse(
                {
                    "detail": r.answer.reason,
                    "status": "refused",
                    "epsilon_spent": 0.0,
                    "remaining_epsilon": r.remaining_epsilon,
                },
                status_code=409,
            )
        return JSONResponse(_reply_json(r))

    def _quote(body: QuoteIn, deadline: float | None, cached_only: bool = False) -> Quote | None:
        q = svc.make_query(body.where, body.coefficients)
        return quote(
            svc,
            q,
            half_width=body.half_width,
            confidence=body.confidence,
            deadline=deadline,
            cached_only=cached_only,
        )

    @app.post(
        "/api/quote",
        response_model=QuoteOut,
        responses=responses(400, 401, 413, 422, 503),
    )
    async def price(body: QuoteIn, who: Annotated[str, Depends(reader)]) -> dict[str, Any]:
        """What the query would cost now: free from the history, eps for one fresh answer,
        or refused. Spends nothing and draws no noise."""
        deadline = _deadline()
        got: Quote | None = await _in_pool(partial(_quote, body, deadline, True))
        if got is None:
            got = await _in_pool(partial(_quote, body, deadline), who, deadline)
        assert got is not None
        return {
            "query": got.query,
            "status": got.status,
            "epsilon": got.epsilon,
            "remaining_epsilon": got.remaining_epsilon,
            "spent_after_epsilon": got.spent_after_epsilon,
            "reason": got.reason,
        }

    @app.get("/api/history", response_model=HistoryOut, responses=responses(401, 422))
    def history(
        _who: Annotated[str, Depends(reader)],
        offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> dict[str, Any]:
        """The noisy answers released so far (each with its eps)."""
        return {"answers": svc.history(offset=offset, limit=limit)}

    @app.get("/api/budget", response_model=BudgetOut, responses=responses(401))
    def budget(_who: Annotated[str, Depends(reader)]) -> dict[str, Any]:
        """Total, spent and remaining budget."""
        return svc.budget()

    @app.post(
        "/api/admin/analysts",
        status_code=201,
        response_model=AnalystOut,
        responses=responses(400, 401, 409, 413, 422, why={409: "an analyst of this name exists"}),
    )
    def add_analyst(body: AnalystIn, _who: Annotated[str, Depends(admin)]) -> dict[str, Any]:
        """Add an analyst; the API key is returned once (stored hashed)."""
        try:
            return {"name": body.name, "api_key": svc.add_analyst(body.name)}
        except Conflict as exc:
            raise HTTPException(409, str(exc)) from None

    @app.put(
        "/api/admin/budget",
        response_model=BudgetOut,
        responses=responses(400, 401, 409, 413, 422, why={409: "below what is already spent"}),
    )
    def set_budget(body: BudgetIn, _who: Annotated[str, Depends(admin)]) -> dict[str, Any]:
        """Set the total budget (never below what is spent)."""
        try:
            return svc.set_budget(body.epsilon, body.delta)
        except Conflict as exc:
            raise HTTPException(409, str(exc)) from None

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        index = STATIC / "index.html"
        if not index.is_file():
            raise HTTPException(404, "the web page is not installed")
        return FileResponse(index, media_type="text/html", headers=PAGE_HEADERS)

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str) -> FileResponse:
        path = STATIC / name
        if "/" in name or name.startswith(".") or not path.is_file():
            raise HTTPException(404, "not found")
        return FileResponse(path, headers=PAGE_HEADERS)

    app.add_middleware(_BodyLimit, limit=MAX_BODY_BYTES, timeout=body_timeout)
    return app


def worker_app() -> FastAPI:
    """The app of one ``dpbayes serve --workers N`` worker (an ASGI factory for uvicorn).

    The parent passes the configuration in ``DPBAYES_SERVE_WORKER`` (never the key: each
    worker reads it from the admin key file).
    """
    from dpbayes.service.protocol import HEADER_TIMEOUT, SEND_TIMEOUT, set_timeouts

    spec = json.loads(os.environ[WORKER_ENV])
    # this worker's connections (protocol.py)
    set_timeouts(spec.get("header_timeout", HEADER_TIMEOUT), spec.get("send_timeout", SEND_TIMEOUT))
    key = Path(spec["admin_key_file"]).read_text().strip()
    return create_app(
        EngineConfig(**spec["config"]),
        spec["db"],
        key,
        time_limit=spec["time_limit"],
        body_timeout=spec.get("body_timeout", BODY_TIMEOUT),
        max_history_entries=spec.get("max_history_entries", MAX_HISTORY_ENTRIES),
    )
