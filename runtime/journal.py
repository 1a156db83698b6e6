"""The run's journal: what a run's trail and the audit hold, as the store keeps it.

Every act and every host writes its audit rows (who did what, when) and its
events (what the run did) through these, inside the transaction of the change
they record: one envelope for an audit row, one for an event, one form of
stored text.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from datetime import datetime

from swarmkit.store.clock import store_now
from swarmkit.store.masking import masked
from swarmkit.store.named import S

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    from typing import Any

    from swarmkit.store.connections import AsyncConn


# The batch an act belongs to (runtime/batch_acts.py): written into the detail of every audit row of its acts.
BATCH: ContextVar[str | None] = ContextVar("swarmkit_batch", default=None)


def audit_row(actor: str, action: str, job_id: str | None, detail: dict[str, Any] | None = None, at: datetime | None = None) -> dict[str, Any]:
    """The audit envelope: one row of `audit` as `S.INSERT_AUDIT` takes it (on an async connection,
    `record_audit`; a sync one executes the statement with this row itself)."""
    if (batch := BATCH.get()) is not None:
        detail = {**(detail or {}), "batch": batch}
    return {"b_at": at or store_now(), "b_actor": actor, "b_action": action, "b_job_id": job_id, "b_detail": json.dumps(detail or {}, sort_keys=True)}


async def record_audit(conn: AsyncConn, actor: str, action: str, job_id: str | None, detail: dict[str, Any] | None = None, at: datetime | None = None) -> None:
    await conn.execute(S.INSERT_AUDIT, audit_row(actor, action, job_id, detail, at))


def storable(text: str) -> str:
    """Text as the store keeps it: every machine sharing the store reads it.

    A password in it (an agent that printed a store URL, a driver's error
    quoting its DSN) is masked. PostgreSQL text cannot hold NUL; the same
    stand-in on both stores keeps them alike.
    """
    text = masked(text)
    return text.replace("\x00", "\u2400") if "\x00" in text else text


async def record_event(conn: AsyncConn, job_id: str, kind: str, text: str = "", node: str | None = None, step: int | None = None, at: datetime | None = None) -> None:
    await conn.execute(S.INSERT_EVENT, {"b_job_id": job_id, "b_at": at or store_now(), "b_kind": kind, "b_node": node, "b_step": step, "b_text": storable(text)})


def state_json(state: dict[str, Any]) -> str:
    """A run's state as stored: strict JSON (no NaN or infinity), or TypeError/ValueError/RecursionError."""
    return json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
