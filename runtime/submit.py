"""Submit: a run of a flow created, queued for a worker or claimed by the process that submits it.

Its budget is the flow's [budget] with the door's limits over it (runtime/budgets.py). A submit writes
through store/run_writes.py, imported where it writes: it builds its statements with SQLAlchemy.
"""

from __future__ import annotations

import json
import os

from swarmkit.store.clock import boot_clock, store_now
from swarmkit.store.ids import new_id
from swarmkit.store.records import JobRecord
from swarmkit.store.statuses import QUEUED, RUNNING
from swarmkit.store.wakeups import announce, queued

from .acts import reload_run
from .journal import record_audit, record_event, state_json
from .leases import claim_lease
from .settings import default_actor, host_name

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    from typing import Any

    from swarmkit.store import Store

    from .flow import Flow


def _initial_state(inputs: dict[str, str]) -> dict[str, Any]:
    return {"inputs": dict(inputs)}


async def submit(
    store: Store,
    flow: Flow,
    inputs: dict[str, str],
    *,
    actor: str | None = None,
    host_here: bool = False,
    lease_s: float | None = None,
    budget: list[str] | dict[str, Any] | None = None,
) -> JobRecord:
    """Create a run: queued for a worker, or (host_here) already claimed by this process at epoch 1,
    under its lease (`lease_s`; SWARMKIT_LEASE if not given). `budget`: the door's terms (`cost=5`,
    runtime/budgets.py), or a JSON body's limits, over the flow's own [budget]; BudgetError names a term that cannot be."""
    from .budgets import changed, terms_of  # late: only a submit reads terms

    terms, flag = terms_of(budget)
    limits = changed(flow.budget, terms, whose="the flow", flag=flag)
    from swarmkit.store.run_writes import insert_run  # late: `swarmkit stop` on SQLite loads no SQLAlchemy

    actor = actor or default_actor()
    # Read before the run exists: a module too big to store refuses the submit.
    from .flow_modules import collect_modules, encode_modules  # late: flows load only where one is submitted or claimed, not for `swarmkit stop`

    modules = encode_modules(collect_modules(flow))
    now = store_now()
    job_id = new_id()
    values: dict[str, Any] = dict(
        id=job_id,
        flow=flow.name,
        flow_path=flow.path,
        flow_source=flow.source,
        flow_modules=modules,
        inputs=json.dumps(inputs, sort_keys=True),
        status=QUEUED,
        created_at=now,
        updated_at=now,
        cancel_keep=False,
        epoch=0,
        step=0,
        steps=flow.steps,
        tokens=0,
        cost=0.0,
        workspace_root=str(store.loc.workspace),
        budget=limits.to_json(),
    )
    if host_here:
        values.update(
            status=RUNNING, epoch=1, host=host_name(), pid=os.getpid(), heartbeat_at=now, heartbeat_mono=boot_clock(), started_at=now, last_event_at=now,
            lease_s=claim_lease(lease_s),
        )
    async with store.write() as conn:
        await insert_run(conn, values, state_json(_initial_state(inputs)))
        await record_event(conn, job_id, "run.submitted", f"{flow.name}: {flow.steps} agents", at=now)
        await record_audit(conn, actor, "run.submitted", job_id, {"flow": flow.name, "inputs": inputs, **({"budget": limits.words()} if not limits.empty else {})}, at=now)
        if not host_here:
            await announce(conn, queued(job_id))
    return await reload_run(store, job_id)
