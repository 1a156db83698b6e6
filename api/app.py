"""The ASGI app: `create_app(store, ...)`, its error mapping, body limit, metrics and auth.

Every route calls runtime/control and store/queries, as the CLI does; this
module only turns their answers and errors into HTTP. No error reaches a
client as a 500 with a traceback, and no error body names a file, a store URL
or a stack: ids and fields only.

In front of every route (outermost first): Starlette's `TrustedHostMiddleware`
(only the `Host` names this server serves: api/http_trust.py), CORS when
`--cors-origin` names origins, and `CrossSiteGuard` (no act from another site,
and every act in JSON).

The routers (jobs.py, events.py, notifications.py) take what they share from
dependencies.py, never from here: this module imports them, and nothing imports it but run.py.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from swarmkit.runtime.budgets import BudgetError
from swarmkit.runtime.errors import AmbiguousRun, FlowError, RunNotFound
from swarmkit.runtime.settings import default_actor
from swarmkit.runtime.text import plain
from swarmkit.runtime.worker import Worker
from swarmkit.store import STORE_FAULTS, Store, describe_db_error, masked
from swarmkit.store.schema import schema_state

from .auth import Auth, Denied, Token
from .batch import router as batch_router
from .dependencies import BadRequest, Ctx, Refused, problem, reader
from .events import router as events_router
from .http_trust import allowed_hosts as default_hosts
from .http_trust import origin_allowed
from .jobs import router as jobs_router
from .metrics import Metrics, read_gauges
from .notifications import router as notifications_router
from .schemas import Health, Problem

log = logging.getLogger("swarmkit.serve")
MAX_BODY = 64 * 1024  # a submit is a flow name and its inputs: kilobytes, never megabytes
# Methods a browser may send cross-site without asking first; everything else here changes state.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_GUARDED = frozenset({b"origin", b"host", b"sec-fetch-site", b"content-type"})


def _is_json(content_type: str) -> bool:
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


class CrossSiteGuard:
    """No request from another site, and no act but in JSON.

    A browser sends a "simple" request (a form post, `text/plain`) to any address
    without asking first, and the page never needs to read the answer for the act
    to happen. So a request whose `Origin` is not this server's own (or one named
    with `--cors-origin`), or that says `Sec-Fetch-Site: cross-site`, is refused with
    403, whatever its method; and a request that changes state must say
    `Content-Type: application/json` (415), which no page can send cross-site
    without a CORS preflight this server does not grant.
    """

    def __init__(self, app: ASGIApp, cors_origins: tuple[str, ...] = ()):
        self.app = app
        self.cors_origins = frozenset(cors_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # Only the four it reads (a request carries a dozen; decoding them all cost more than the checks).
        headers = {name: v.decode("latin-1") for k, v in scope.get("headers") or [] if (name := k.lower()) in _GUARDED}
        origin = headers.get(b"origin")
        named = origin is not None and origin.strip() in self.cors_origins
        if origin is not None and not origin_allowed(origin, headers.get(b"host"), scope.get("scheme", "http"), self.cors_origins):
            await problem(403, "refused: a request from another site (Origin is not this server's; --cors-origin names the origins allowed)")(scope, receive, send)
            return
        if headers.get(b"sec-fetch-site", "").strip().lower() == "cross-site" and not named:
            await problem(403, "refused: a request from another site (Sec-Fetch-Site: cross-site)")(scope, receive, send)
            return
        if scope["method"] not in SAFE_METHODS and not _is_json(headers.get(b"content-type", "")):
            await problem(415, "a request that changes state must be sent as Content-Type: application/json (an empty body is fine)")(scope, receive, send)
            return
        await self.app(scope, receive, send)


class BodyLimit:
    """413 for a body past the limit, whether it says its length or streams it (chunked)."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY):
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await problem(413, f"request body over {self.limit} bytes")(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    # An HTTPException while reading the body is one FastAPI passes on as it is.
                    raise StarletteHTTPException(413, f"request body over {self.limit} bytes")
            return message

        await self.app(scope, limited, send)


def _install_handlers(app: FastAPI, ctx: Ctx) -> None:
    @app.exception_handler(Denied)
    async def denied(_r: Request, exc: Denied) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.code == 401 else None
        return problem(exc.code, exc.detail, headers)

    def say(code: int, detail: str, headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
        return problem(code, ctx.scrub(detail), headers, **extra)

    @app.exception_handler(RunNotFound)
    async def not_found(_r: Request, exc: RunNotFound) -> JSONResponse:
        return say(404, exc.what)  # the id, not the store it was looked for in

    @app.exception_handler(AmbiguousRun)
    async def ambiguous(_r: Request, exc: AmbiguousRun) -> JSONResponse:
        return say(400, str(exc), candidates=exc.candidates)

    @app.exception_handler(FlowError)
    async def bad_flow(_r: Request, exc: FlowError) -> JSONResponse:
        return say(422, str(exc))

    @app.exception_handler(BudgetError)
    async def bad_budget(_r: Request, exc: BudgetError) -> JSONResponse:
        return say(422, str(exc))

    @app.exception_handler(Refused)
    async def refused(_r: Request, exc: Refused) -> JSONResponse:
        return say(409, exc.detail, status=exc.status)

    @app.exception_handler(BadRequest)
    async def bad(_r: Request, exc: BadRequest) -> JSONResponse:
        return say(exc.code, exc.detail)

    @app.exception_handler(RequestValidationError)
    async def invalid(_r: Request, exc: RequestValidationError) -> JSONResponse:
        # Every part through `plain`: a field's name or a message may quote what was sent (a NUL, a lone surrogate).
        errors = [{"loc": [plain(p, 200) for p in e.get("loc", ())], "msg": plain(e.get("msg", ""), 500), "type": plain(e.get("type", ""))} for e in exc.errors()]
        first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
        return say(422, f"{'.'.join(first['loc']) or 'request'}: {first['msg']}", errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_r: Request, exc: StarletteHTTPException) -> JSONResponse:
        return say(exc.status_code, str(exc.detail), getattr(exc, "headers", None))

    async def store_away(_r: Request, exc: Exception) -> JSONResponse:
        ctx.metrics.store_errors += 1
        log.warning("serving a request: %s", describe_db_error(exc, ctx.store.loc))
        return say(503, "the store is unavailable; try again (the server's log says why)", {"Retry-After": "1"})

    # One handler per class, not under `Exception`: Starlette answers an `Exception` handler's
    # response and then raises again, which drops the client's kept-alive connection.
    for fault in STORE_FAULTS:
        app.add_exception_handler(fault, store_away)

    @app.exception_handler(Exception)
    async def bug(_r: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error serving a request")
        return say(500, f"internal error ({type(exc).__name__}); the server's log has the details")


class CountServed:
    """Counts each answer by route template, method and code, timed to its headers (a stream counts until them).

    Plain ASGI: Starlette's `@app.middleware("http")` runs each request in a task group of its own and
    streams the answer through a queue, which cost more than most routes' own work (bench/http_throughput.py)."""

    def __init__(self, app: ASGIApp, metrics: Metrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                route = scope.get("route")  # the router writes the matched route into this same scope
                self.metrics.served(getattr(route, "path", "unmatched"), scope["method"], message["status"], time.perf_counter() - t0)
            await send(message)

        await self.app(scope, receive, counted)


def create_app(
    store: Store,
    *,
    tokens: list[Token] | None = None,
    flows: Path | None = None,
    worker: Worker | None = None,
    keepalive_s: float = 15.0,
    max_body: int = MAX_BODY,
    allowed_hosts: list[str] | None = None,
    cors_origins: tuple[str, ...] = (),
) -> FastAPI:
    """The API on `store`. `allowed_hosts`: the `Host` names it answers (default: loopback names;
    api/http_trust.allowed_hosts makes the list from --host and --allowed-host)."""
    ctx = Ctx(store=store, auth=Auth(tokens or [], default_actor()), flows=flows, worker=worker, keepalive_s=keepalive_s)
    loc = store.loc
    # Longest first: the store's URL holds its file's path, which holds the workspace's.
    ctx.secrets = tuple(
        (raw, shown) for raw, shown in (
            (loc.display, "the store"),
            (masked(loc.url), "the store"),
            (loc.url.database or "" if loc.is_sqlite else "", "the store"),
            (str(flows) if flows else "", "the flows folder"),
            (str(loc.workspace), "the workspace"),
        ) if raw
    )
    app = FastAPI(
        title="Swarmkit run control",
        version="1",
        description="Submit, stop, resume, cancel, approve and watch runs: a peer of the `swarmkit` CLI on the same store.",
        docs_url=None, redoc_url=None,  # no third-party scripts served from here
        redirect_slashes=False,  # a path matches as sent: `/jobs/ID/` is not `/jobs/ID`
    )
    app.state.ctx = ctx
    app.add_middleware(BodyLimit, limit=max_body)
    _install_handlers(app, ctx)
    app.add_middleware(CountServed, metrics=ctx.metrics)
    # Added last, so run first (Starlette puts each new middleware outside the ones before it).
    app.add_middleware(CrossSiteGuard, cors_origins=tuple(cors_origins))
    if cors_origins:
        app.add_middleware(
            CORSMiddleware, allow_origins=list(cors_origins), allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "Last-Event-ID"], allow_credentials=False, max_age=600,
        )
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts or default_hosts("127.0.0.1")), www_redirect=False)
    # The routers' routes are the app's own: FastAPI matches an included router's routes twice a request
    # (the app's match, then the router's), a fifth of what `GET /jobs/{id}` costs in it (bench/http_throughput.py).
    # Each router carries the error answers of every route (schemas.ERRORS) and its tag itself.
    for router in (batch_router, jobs_router, events_router, notifications_router):
        app.router.routes.extend(router.routes)

    @app.get("/health", response_model=Health, responses={503: {"model": Problem}}, tags=["server"])
    async def health() -> Health:
        """Whether the store answers, and at which schema revision. Open to all: it says nothing a probe should not know."""
        state = await schema_state(store.engine, store.loc)
        return Health(ok=True, store="sqlite" if store.loc.is_sqlite else "postgresql", schema_revision=state.current,
                      schema_head=state.head, hosting=worker is not None, auth=ctx.auth.enabled)

    @app.get("/metrics", response_class=PlainTextResponse, responses={401: {"model": Problem}, 403: {"model": Problem}, 503: {"model": Problem}}, tags=["server"])
    async def metrics(_actor: str = Depends(reader)) -> PlainTextResponse:
        """The Prometheus text format: runs by status, heartbeat age, served requests, store errors."""
        counts, ages, notes = await store.run_read(read_gauges)
        return PlainTextResponse(ctx.metrics.render(counts, ages, notes), media_type="text/plain; version=0.0.4; charset=utf-8")

    return app
