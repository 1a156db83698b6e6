"""Routes whose plain requests skip FastAPI's solving of their parameters (issue 31: the HTTP door at its floor).

FastAPI's work around an endpoint (solving its dependencies, validating its path parameter, reading,
parsing and validating its body, building a model only to dump it again) was about a quarter of what
`GET /jobs/{id}` and a repeated `POST /jobs/{id}/stop` cost (bench/http_throughput.py). For the
requests these routes nearly always get (a well-formed id, no body or a small JSON object of the
route's model), a route's `direct` function does the same checks itself and calls what its endpoint
calls. Anything else it hands back untouched (`None`) and FastAPI answers as it always did: every
error a client can get, and which comes first (a bad token's 401 before a bad id's 422; a body that
is not JSON, 422, before either), is FastAPI's own. A direct answer is given only where FastAPI would
have reached the endpoint with the same values; the only errors on the way are the ones the endpoint
and the route's own dependency (called as the same function) raise in FastAPI's path too.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Coroutine
from functools import cache
from typing import Any, TypeVar

from fastapi import Request
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

Direct = Callable[[Request], Awaitable[Response | None]]
F = TypeVar("F", bound=Callable[..., Any])


def answers_directly(direct: Direct) -> Callable[[F], F]:
    """Give an endpoint its direct path; put it under the router's decorator (it must be there when the route is made)."""

    def mark(endpoint: F) -> F:
        endpoint.direct = direct  # type: ignore[attr-defined]
        return endpoint

    return mark


async def plain_body(request: Request, model: type[BaseModel]) -> dict[str, Any] | None:
    """The flags of a body FastAPI would take as `model` (none sent is all defaults), or None for any other body."""
    try:
        raw = await request.body()  # kept on the request: FastAPI reads the same bytes if it answers instead
    except HTTPException:
        raise  # the body limit's 413, as FastAPI passes it on
    except Exception:
        return None
    if not raw:
        return {}
    if request.headers.get("content-type", "").strip().lower() != "application/json":
        return None
    if raw == b"{}":  # what nearly every client sends: the model's defaults, made once
        return dict(_defaults(model))
    try:
        data = json.loads(raw)
        return model.model_validate(data).model_dump() if isinstance(data, dict) else None
    except (ValueError, ValidationError):  # not JSON, or not the model: FastAPI says why
        return None


@cache
def _defaults(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_validate({}).model_dump()


class DirectRoute(APIRoute):
    """An APIRoute that tries its endpoint's `direct` (set by `answers_directly`) before FastAPI's handler."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        full = super().get_route_handler()
        direct: Direct | None = getattr(self.endpoint, "direct", None)
        if direct is None:
            return full

        async def handler(request: Request) -> Response:
            answered = await direct(request)
            return answered if answered is not None else await full(request)

        return handler
