"""Webhook deliveries over HTTP: `GET /notifications` (dead letters among them) and `POST /notifications/{id}/retry`.

The same store functions as `swarmkit notifications` (runtime/deliveries.py): a
retry is one conditional UPDATE (dead -> pending, attempts reset), audited
with the token's actor.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from swarmkit.runtime import control
from swarmkit.runtime.deliveries import list_deliveries, retry_dead
from swarmkit.store.clock import store_now
from swarmkit.store.records import rfc3339

from .dependencies import BadRequest, Refused, ctx_of, operator, reader
from .jobs import NO_CONTROLS
from .schemas import ERRORS

router = APIRouter(tags=["notifications"], responses=ERRORS)


class Delivery(BaseModel):
    """One notification's delivery to one receiver."""

    id: int
    event_id: str
    run_id: str
    kind: str
    receiver: str = Field(description="the receiver's URL, any password masked")
    state: str = Field(description="pending, delivered or dead (a dead letter: retry it)")
    attempts: int
    next_at: str | None = Field(None, description="when a pending delivery is due (or, in flight, when its claim lapses)")
    last_status: int | None = Field(None, description="the HTTP status the last attempt got (a 3xx is a failure, never followed)")
    last_error: str | None = None
    location: str | None = Field(None, description="the Location a 3xx answered with")
    created_at: str | None = None
    updated_at: str | None = None
    delivered_at: str | None = None
    dead_at: str | None = None


class DeliveryPage(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    schema_: int = Field(1, alias="schema", description="1: this shape")
    notifications: list[Delivery]


class Retried(BaseModel):
    id: int
    outcome: Literal["retried"]
    detail: str


def _view(d: dict) -> Delivery:
    return Delivery.model_validate({k: (rfc3339(v) if isinstance(v, datetime) else v) for k, v in d.items()})


@router.get("/notifications", response_model=DeliveryPage, response_model_by_alias=True, summary="Webhook deliveries, newest first; ?state=dead for dead letters")
async def deliveries(
    request: Request,
    state: Literal["pending", "delivered", "dead"] | None = Query(None, description="only deliveries in this state"),
    run: str | None = Query(None, min_length=1, max_length=64, pattern=NO_CONTROLS, description="only this run's (an id or a unique prefix)"),
    limit: int = Query(100, ge=1, le=1000),
    _actor: str = Depends(reader),
) -> DeliveryPage:
    ctx = ctx_of(request)
    run_id = (await control.resolve_run(ctx.store, run)).id if run else None
    rows = await ctx.store.run_read(partial(list_deliveries, state=state, run_id=run_id, limit=limit))
    return DeliveryPage.model_validate({"schema": 1, "notifications": [_view(r) for r in rows]})


@router.post("/notifications/{delivery_id}/retry", response_model=Retried, summary="Make a dead letter pending again, due now (409 when it is not dead)")
async def retry(request: Request, delivery_id: int = Path(ge=1, le=2**62), actor: str = Depends(operator)) -> Retried:
    ctx = ctx_of(request)
    outcome = (await ctx.store.run_write(partial(retry_dead, ids=[delivery_id], actor=actor, now=store_now())))[delivery_id]
    if outcome == "unknown":
        raise BadRequest(404, f"no delivery {delivery_id}")
    if outcome != "retried":
        raise Refused(f"delivery {delivery_id} is not a dead letter ({outcome}); nothing to do", outcome)
    return Retried(id=delivery_id, outcome="retried", detail=f"delivery {delivery_id} is pending again, due now")
