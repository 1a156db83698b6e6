"""`POST /jobs/stop`, `/jobs/resume`, `/jobs/approve`, `/jobs/cancel`: an act on the runs a filter names, as
`swarmkit stop --flow nightly --yes` does it (runtime/batch_acts.py): the same runs, each by the one-run
rules, one batch id on their audit entries, every run's outcome in the answer. `dry_run` only lists them."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from swarmkit.runtime.act_table import ACTS, VERBS
from swarmkit.runtime.batch_acts import act_on_runs, matching, summary
from swarmkit.runtime.quantities import BadValue, Duration
from swarmkit.runtime.run_filter import RunFilter
from swarmkit.runtime.text import plain_lines
from swarmkit.store.clock import store_now

from .dependencies import BadRequest, ctx_of, look_for_lost, operator
from .schemas import ERRORS, BatchBody

router = APIRouter(tags=["jobs"], responses=ERRORS)


_OWN = {"now": "stop", "keep": "cancel", "budget": "resume"}


def _span(raw: str | None, name: str) -> Any:
    if raw is None:
        return None
    try:
        return Duration().parse(raw)
    except BadValue as exc:
        raise BadRequest(422, f"{name} {raw!r} {exc}") from None


def _route(verb: str):
    act = ACTS[verb]

    async def act_on_many(request: Request, body: BatchBody, actor: str = Depends(operator)) -> JSONResponse:
        ctx = ctx_of(request)
        wrong = [k for k, owner in _OWN.items() if getattr(body, k) is not None and owner != verb]
        if wrong:
            raise BadRequest(422, f"{wrong[0]} goes with POST /jobs/{_OWN[wrong[0]]}, not /jobs/{verb}")
        runs = RunFilter.of(body.status, body.flow, body.node, _span(body.since, "since"), _span(body.older_than, "older_than"), body.all)
        if not (runs.narrows or runs.all):
            raise BadRequest(422, "name the runs: status, flow, node, since, older_than, or all")
        await look_for_lost(ctx)
        targets = await matching(ctx.store, act, runs)
        now = store_now()
        listed = [{"job_id": j.id, "short_id": j.short_id, "status": j.status, "display_status": j.display_status(now), "flow": j.flow, "node": j.current_node} for j in targets]
        if body.dry_run or not targets:
            return JSONResponse({"batch": None, "dry_run": body.dry_run, "filter": runs.words(), "runs": listed, "results": [], "summary": f"{len(targets)} would be acted on"})
        options: dict[str, Any] = {k: getattr(body, k) for k in _OWN if getattr(body, k) is not None}
        if "budget" in options:
            options["budget"] = body.budget.model_dump(exclude_none=True) if body.budget else None
        batch = await act_on_runs(ctx.store, act, [j.id for j in targets], actor=actor, **options)
        results = [
            {
                "job_id": o.result.job.id if o.result is not None and o.result.job is not None else None,
                "short_id": o.short_id,
                "changed": bool(o.result is not None and o.result.changed),
                "refused": o.refused,
                "detail": plain_lines(o.words),
                "status": o.result.job.status if o.result is not None and o.result.job is not None else None,
            }
            for o in batch.outcomes
        ]
        return JSONResponse({"batch": batch.id, "dry_run": False, "filter": runs.words(), "runs": listed, "results": results, "summary": summary(act, batch.outcomes)})

    act_on_many.__name__ = act_on_many.__qualname__ = f"{verb}_many"
    return act_on_many


for _verb in VERBS:
    router.post(f"/jobs/{_verb}", summary=f"{_verb.capitalize()} the runs a filter names (as `swarmkit {_verb} --flow ... --yes`)")(_route(_verb))
