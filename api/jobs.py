"""Job routes: submit, list, show, and the four acts. Each calls runtime/control, as the CLI verbs do;
the act routes are made from the acts table (runtime/act_table.py), one a verb.

HTTP codes from the runtime's answers: an act that changed the run, or found
the same request pending (`already_requested`), is 200 (202 for a cancel a
host has yet to carry out); an act with nothing to do or refused is 409 with
the runtime's words, naming the status (over HTTP a no-op is a conflict, as
DESIGN.md's transitions say); an unknown run is 404.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from pathlib import Path as FsPath
from typing import Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from swarmkit.runtime import control
from swarmkit.runtime.act_table import ACTS, VERBS, Act
from swarmkit.runtime.errors import FlowError
from swarmkit.runtime.flow import Flow, load_flow, parse_inputs
from swarmkit.runtime.text import plain_lines
from swarmkit.store.models import RUNNING, STORED_STATUSES
from swarmkit.store.pages import UnknownCursor, jobs_page
from swarmkit.store.reads import run_views
from swarmkit.store.records import RUN_LIST_SCHEMA, JobRecord, rfc3339

from .dependencies import BadRequest, Refused, ctx_of, look_for_lost, operator, reader
from .direct import DirectRoute, answers_directly, plain_body
from .schemas import ERRORS, ActAnswer, CancelBody, JobPage, ResumeBody, StopBody, SubmitBody

router = APIRouter(tags=["jobs"], responses=ERRORS, route_class=DirectRoute)

# A flow is named by its file in --flows: no separators, no leading dot, so no name reaches outside the folder.
_FLOW_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$")
# The stored statuses, documented as an enum (built from the one list of them).
Status = Literal[STORED_STATUSES]  # type: ignore[valid-type]
# Ids are 32 hex digits; anything else is refused as the field it is, never looked for (nor stripped).
RUN_REF = "^[0-9A-Fa-f]{1,32}$"
RunId = Path(pattern=RUN_REF, description="a run id or any unique prefix of it")
# The same pattern for the routes that answer directly (api/direct.py). Whole, by fullmatch: `re`'s `$`
# also matches before a trailing newline, which FastAPI's pattern check refuses.
_PLAIN_REF = re.compile(RUN_REF.removeprefix("^").removesuffix("$"))
# Text a query may carry: no NUL or other control (PostgreSQL refuses a NUL outright; none belongs in a name).
NO_CONTROLS = "^[^\\x00-\\x1f\\x7f-\\x9f]*$"


async def view_of(request: Request, job: JobRecord) -> dict[str, Any]:
    return (await ctx_of(request).store.run_read(lambda c: run_views(c, [job]), here=True))[0]


def find_flow(folder: FsPath | None, name: str) -> Flow:
    if folder is None:
        raise BadRequest(404, "this server was started without --flows DIR; no flow can be submitted by name")
    name = name.removesuffix(".toml")
    if not _FLOW_NAME.match(name) or ".." in name:
        raise BadRequest(422, f"flow {name!r}: a flow is named by its file in the flows folder (letters, digits, '.', '_', '-')")
    path = folder / f"{name}.toml"
    if not path.is_file():
        raise BadRequest(404, f"no flow named {name!r}")
    try:
        return load_flow(path)  # a FlowError is 422, in the words `swarmkit run` uses
    except FlowError as exc:
        # ... but naming the file as the client named it, not where it lies on this machine.
        raise FlowError(str(exc).replace(str(path.resolve()), path.name).replace(str(path), path.name)) from None


@router.post("/jobs", status_code=201, response_model=dict[str, Any], summary="Submit a run of a flow (queued for a worker)")
async def submit(body: SubmitBody, request: Request, actor: str = Depends(operator)) -> dict[str, Any]:
    ctx = ctx_of(request)
    bad = [k for k in body.inputs if "=" in k]
    if bad:
        raise BadRequest(422, f"input {bad[0]!r}: a key cannot hold '='")
    # The same checks as `swarmkit run FLOW --input k=v`, before any run is created.
    flow = find_flow(ctx.flows, body.flow)
    inputs = parse_inputs([f"{k}={v}" for k, v in body.inputs.items()])
    job = await control.submit(ctx.store, flow, inputs, actor=actor, budget=body.budget.model_dump() if body.budget else None)
    if ctx.worker is not None:
        ctx.worker.wake()
    return await view_of(request, job)


@router.get("/jobs", response_model=JobPage, summary="Runs, newest first, paged by cursor")
async def list_runs(
    request: Request,
    status: Status | None = Query(None, description="a stored status"),
    flow: str | None = Query(None, max_length=200, pattern=NO_CONTROLS, description="a flow's name"),
    limit: int = Query(50, ge=1, le=500),
    cursor: str | None = Query(None, pattern="^[0-9a-f]{32}$", description="next_cursor of the page before"),
    _actor: str = Depends(reader),
) -> JSONResponse:
    ctx = ctx_of(request)
    await look_for_lost(ctx)

    def page(conn: Any) -> tuple[list[dict[str, Any]], str | None, bool]:
        rows, more = jobs_page(conn, status=status, flow=flow, limit=limit, cursor=cursor)
        return run_views(conn, rows), rows[-1].id if more and rows else None, more

    try:
        views, next_cursor, more = await ctx.store.run_read(page, here=True)
    except UnknownCursor:
        raise BadRequest(422, f"cursor {cursor!r} names no run in this store") from None
    # The run list's one shape (`swarmkit status -o json`), with the page's cursor beside it; sent as it is
    # (JobPage documents it: validating 50 views again would cost more than reading them).
    return JSONResponse({"schema": RUN_LIST_SCHEMA, "runs": views, "next_cursor": next_cursor, "has_more": more})


async def _show(request: Request, job_id: str) -> JSONResponse:
    ctx = ctx_of(request)
    await look_for_lost(ctx)
    # A response as it is: response_model documents the shape, and validating a plain dict again costs as much as reading it.
    return JSONResponse(await control.resolve_view(ctx.store, job_id))


def _plain_id(request: Request) -> str | None:
    """The route's run id when it is one FastAPI would take as it is (api/direct.py), else None."""
    job_id = request.path_params["job_id"]
    return job_id if _PLAIN_REF.fullmatch(job_id) else None


async def _show_directly(request: Request) -> JSONResponse | None:
    if (job_id := _plain_id(request)) is None:
        return None
    await reader(request)
    return await _show(request, job_id)


@router.get("/jobs/{job_id}", response_model=dict[str, Any], summary="One run's merged view (as `swarmkit status ID --json`)")
@answers_directly(_show_directly)
async def show(request: Request, job_id: str = RunId, _actor: str = Depends(reader)) -> JSONResponse:
    return await _show(request, job_id)


async def answer(request: Request, act: Act, res: control.ActResult) -> JSONResponse:
    if res.code == control.USAGE:  # what the body asked cannot be (a stop --when that is no condition, a budget that is no limit)
        raise BadRequest(422, plain_lines(res.message))
    assert res.job is not None  # every act on a run that exists names it
    job = res.job
    if not res.changed and not res.already:
        raise Refused(plain_lines(res.message), job.display_status())
    ctx = ctx_of(request)
    hint = None
    if act.wants_worker(res.changed) and ctx.worker is None:
        hint = await control.no_worker_warning(ctx.store, job.short_id, ctx.settings.lease_s) or None
    view = res.view if res.view is not None else await view_of(request, job)
    # ActAnswer's fields, in its order, sent as they are (tests/test_serve.py validates real answers against it):
    # validating them again would cost as much as the read of an idempotent repeat. The shown status is the
    # view's, worked out with it from the same row.
    body = {
        "job_id": job.id, "action": act.verb, "changed": res.changed, "already_requested": res.already, "detail": plain_lines(res.message),
        "status": job.status, "display_status": view["display_status"],
        "stop_requested_at": rfc3339(job.stop_requested_at) if job.stop_requested_at else None,
        "stop_requested_by": job.stop_requested_by, "hint": hint, "job": view,
    }
    return JSONResponse(body, status_code=202 if act.host_carries_out and job.status == RUNNING else 200)


_ACTED: dict[int | str, dict[str, Any]] = {200: {"model": ActAnswer}, 202: {"model": ActAnswer, "description": "a cancel its host is carrying out"}}

# What the act routes have of their own: each one's body (the act's flags), its summary, its other answers.
# What they call and what they say is the acts table's (runtime/act_table.py). In the order they are routed.
_ROUTED: dict[str, tuple[type[BaseModel] | None, str, dict[int | str, dict[str, Any]] | None]] = {
    "stop": (StopBody, "Stop at the next agent boundary, or now (interrupting the node in flight); resumable", None),
    "resume": (ResumeBody, "Queue a stopped, deferred or lost run for a worker (a spent budget raised with it)", None),
    "approve": (None, "Approve a run waiting at a gate", None),
    "cancel": (CancelBody, "End a run for good", _ACTED),
}
assert set(_ROUTED) == set(VERBS)


def _act_route(act: Act, body_type: type[BaseModel] | None) -> Callable[..., Awaitable[JSONResponse]]:
    """`POST /jobs/{job_id}/<verb>`: the act on the run, with the body's flags (all false when there is no body)."""

    async def act_on(request: Request, job_id: str, actor: str, options: dict[str, Any]) -> JSONResponse:
        return await answer(request, act, await control.perform(act, ctx_of(request).store, job_id, actor=actor, with_view=True, **options))

    async def route(request: Request, job_id: str, actor: str, body: BaseModel | None = None) -> JSONResponse:
        return await act_on(request, job_id, actor, body.model_dump() if body is not None else {})

    async def directly(request: Request) -> JSONResponse | None:
        if (job_id := _plain_id(request)) is None:
            return None
        options = await plain_body(request, body_type) if body_type is not None else {}
        if options is None:
            return None
        return await act_on(request, job_id, await operator(request), options)

    P = inspect.Parameter
    params = [P("request", P.POSITIONAL_OR_KEYWORD, annotation=Request), P("job_id", P.POSITIONAL_OR_KEYWORD, annotation=str, default=RunId)]
    if body_type is not None:
        params.append(P("body", P.POSITIONAL_OR_KEYWORD, annotation=body_type | None, default=None))
    params.append(P("actor", P.POSITIONAL_OR_KEYWORD, annotation=str, default=Depends(operator)))
    route.__signature__ = inspect.Signature(params, return_annotation=JSONResponse)  # type: ignore[attr-defined]
    route.__name__ = route.__qualname__ = act.verb  # the OpenAPI operation id: stop_jobs__job_id__stop_post
    return answers_directly(directly)(route)


def _description(verb: str) -> str | None:
    """What the act destroys, from the acts table, for the route's OpenAPI description."""
    return "; ".join(w for a in ACTS.values() if a.verb == verb and (w := a.destroys_words())).capitalize() or None


for _verb, (_body, _summary, _responses) in _ROUTED.items():
    router.post(f"/jobs/{{job_id}}/{_verb}", response_model=ActAnswer, responses=_responses, summary=_summary, description=_description(_verb))(_act_route(ACTS[_verb], _body))
