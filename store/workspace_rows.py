"""The workspaces' statements, each written once: a run's folder recorded, kept or due for
destruction with the run's end, and destroyed (or left in place) by the host that owns it
(runtime/workspaces.py holds the policy and does the file system work).

Each function runs one statement on the connection it is handed; the caller opens the transaction.
"""

from __future__ import annotations

import json
from datetime import datetime

from sqlalchemy import insert, select, update

from .models import workspaces as w
from .named import S

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from .connections import AsyncConn

# A workspace's states (workspaces.state).
ACTIVE = "active"
KEPT = "kept"
# Recorded with the run's end; the owning host deletes the folder and records `destroyed`.
PENDING = "destroy pending"
DESTROYED = "destroyed"


async def workspace_id(conn: AsyncConn, job_id: str, path: str) -> int | None:
    """The id of the run's workspace at `path`, if recorded."""
    return await conn.scalar(select(w.c.id).where(w.c.job_id == job_id, w.c.path == path))


async def add_workspace(conn: AsyncConn, job_id: str, path: str, *, host: str, now: datetime) -> None:
    """The run's folder at `path`, active, on `host`."""
    await conn.execute(insert(w).values(job_id=job_id, path=path, state=ACTIVE, created_at=now, updated_at=now, host=host))


async def reactivate_workspace(conn: AsyncConn, workspace: int, *, host: str, now: datetime) -> None:
    """A recorded folder active again, and `host`'s (a resumed run)."""
    await conn.execute(update(w).where(w.c.id == workspace).values(state=ACTIVE, updated_at=now, host=host))


async def open_workspaces(conn: AsyncConn, job_id: str) -> list[tuple[int, str]]:
    """(id, path) of the run's workspaces neither destroyed nor due for it: active or kept."""
    return [(wid, path) for wid, path in await conn.execute(select(w.c.id, w.c.path).where(w.c.job_id == job_id, w.c.state.in_((ACTIVE, KEPT))))]


async def set_workspace_state(conn: AsyncConn, workspace: int, state: str, now: datetime) -> None:
    """The workspace kept, or due for destruction, with its run's end."""
    await conn.execute(update(w).where(w.c.id == workspace).values(state=state, updated_at=now))


async def destroys_due(conn: AsyncConn, job_id: str) -> list[tuple[int, str, str | None]]:
    """(id, path, host) of the run's workspaces due for destruction."""
    query = select(w.c.id, w.c.path, w.c.host).where(w.c.job_id == job_id, w.c.state == PENDING)
    return [(wid, path, host) for wid, path, host in await conn.execute(query)]


async def runs_with_destroys_due(conn: AsyncConn, host: str) -> list[str]:
    """The runs with a workspace on `host` due for destruction."""
    return list((await conn.execute(select(w.c.job_id).where(w.c.state == PENDING, w.c.host == host).distinct())).scalars().all())


async def end_destroy(conn: AsyncConn, workspace: int, state: str, now: datetime) -> None:
    """A destruction carried out (`destroyed`) or given up (`kept`): only while it is still due."""
    await conn.execute(update(w).where(w.c.id == workspace, w.c.state == PENDING).values(state=state, updated_at=now))


async def record_left_in_place(conn: AsyncConn, job_id: str, path: str, why: str, now: datetime) -> None:
    """The run's `workspace` event: its folder at `path` was left in place, and why."""
    await conn.execute(S.INSERT_EVENT, {"b_job_id": job_id, "b_at": now, "b_kind": "workspace", "b_node": None, "b_step": None, "b_text": json.dumps({"path": path, "left": why})})
