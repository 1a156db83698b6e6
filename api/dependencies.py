"""What the routes of the API share: the server's context (`Ctx`), the scope checks, the marking of lost runs,
and the errors a route raises (answered by app.py's handlers).

The routers (jobs.py, events.py, notifications.py) and app.py import this module; it imports none of them.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from swarmkit.runtime import control
from swarmkit.runtime.settings import Settings
from swarmkit.runtime.text import plain
from swarmkit.runtime.worker import Worker
from swarmkit.store import Store, masked

from .auth import OPERATE, READ, Auth
from .metrics import Metrics


@dataclass
class Ctx:
    store: Store
    auth: Auth
    flows: Path | None = None
    worker: Worker | None = None
    settings: Settings = field(default_factory=Settings.from_env)
    keepalive_s: float = 15.0
    metrics: Metrics = field(default_factory=Metrics)
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    last_lost_check: float = 0.0
    # Text no error body may show (the store's path and URL, the flows folder): said as what it is instead.
    secrets: tuple[tuple[str, str], ...] = ()

    def scrub(self, text: str) -> str:
        for raw, shown in self.secrets:
            if raw:
                text = text.replace(raw, shown)
        return text


def ctx_of(request: Request) -> Ctx:
    return request.app.state.ctx


# async, though neither awaits: FastAPI runs a plain `def` dependency on a worker thread, a hop per request.
async def reader(request: Request) -> str:
    return ctx_of(request).auth.check(request.headers.get("authorization"), READ)


async def operator(request: Request) -> str:
    return ctx_of(request).auth.check(request.headers.get("authorization"), OPERATE)


async def look_for_lost(ctx: Ctx) -> None:
    """Mark runs whose host went silent past the lease, as `swarmkit status` does first; once a second at most.

    A server that hosts nothing (--no-host) has no worker loop doing it, and a
    reader must see a dead host's run as lost, not running forever.
    """
    now = time.monotonic()
    if now - ctx.last_lost_check < 1.0:
        return
    ctx.last_lost_check = now
    await control.mark_lost(ctx.store, ctx.settings.lease_s, ctx.worker.hosting if ctx.worker is not None else None)


class Refused(Exception):
    """An act the runtime refused or found nothing to do: HTTP 409, naming the status."""

    def __init__(self, detail: str, status: str | None):
        super().__init__(detail)
        self.detail = detail
        self.status = status


class BadRequest(Exception):
    def __init__(self, code: int, detail: str):
        super().__init__(detail)
        self.code = code
        self.detail = detail


def problem(code: int, detail: str, headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    body = {"detail": plain(masked(detail)), **{k: v for k, v in extra.items() if v is not None}}
    return JSONResponse(body, status_code=code, headers=headers)
