"""The workspaces' statements, each written once: a run's folder recorded, kept or due for
destruction with the run's end, and destroyed (or left in place) by the host that owns it
(runtime/workspaces.py holds the policy and does the file system work).

Each function runs one named statement (store/statements.py) on the connection it is handed, the caller's
transaction: on a lite SQLite store too, with no SQLAlchemy loaded (a `swarmkit cancel`).
"""

from __future__ import annotations

import json
from datetime import datetime

from .named import S

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from .connections import AsyncConn, Conn



async def workspace_id(conn: AsyncConn, job_id: str, path: str) -> int | None:
    """The id of the run's workspace at `path`, if recorded."""
    return await conn.scalar(S.WORKSPACE_ID, {"b_job_id": job_id, "b_path": path})


async def add_workspace(conn: AsyncConn, job_id: str, path: str, *, host: str, now: datetime) -> None:
    """The run's folder at `path`, active, on `host`."""
    await conn.execute(S.ADD_WORKSPACE, {"b_job_id": job_id, "b_path": path, "b_at": now, "b_host": host})


async def reactivate_workspace(conn: AsyncConn, workspace: int, *, host: str, now: datetime) -> None:
    """A recorded folder active again, and `host`'s (a resumed run)."""
    await conn.execute(S.REACTIVATE_WORKSPACE, {"b_id": workspace, "b_at": now, "b_host": host})


async def open_workspaces(conn: AsyncConn, job_id: str) -> list[tuple[int, str]]:
    """(id, path) of the run's workspaces neither destroyed nor due for it: active or kept."""
    return [(wid, path) for wid, path in await conn.execute(S.OPEN_WORKSPACES, {"b_job_id": job_id})]


async def set_workspace_state(conn: AsyncConn, workspace: int, state: str, now: datetime) -> None:
    """The workspace kept, or due for destruction, with its run's end."""
    await conn.execute(S.SET_WORKSPACE_STATE, {"b_id": workspace, "b_state": state, "b_at": now})


async def destroys_due(conn: AsyncConn, job_id: str) -> list[tuple[int, str, str | None]]:
    """(id, path, host) of the run's workspaces due for destruction."""
    return [(wid, path, host) for wid, path, host in await conn.execute(S.DESTROYS_DUE, {"b_job_id": job_id})]


def runs_with_destroys_due(conn: Conn, host: str) -> list[str]:
    """The runs with a workspace on `host` due for destruction (on any connection: a worker asks it
    once a part of the lease, as one autocommit statement where the store allows, `Store.run_read(here=True)`)."""
    return [job_id for (job_id,) in conn.execute(S.RUNS_WITH_DESTROYS_DUE, {"b_host": host})]


async def end_destroy(conn: AsyncConn, workspace: int, state: str, now: datetime) -> None:
    """A destruction carried out (`destroyed`) or given up (`kept`): only while it is still due."""
    await conn.execute(S.END_DESTROY, {"b_id": workspace, "b_state": state, "b_at": now})


async def record_left_in_place(conn: AsyncConn, job_id: str, path: str, why: str, now: datetime) -> None:
    """The run's `workspace` event: its folder at `path` was left in place, and why."""
    await conn.execute(S.INSERT_EVENT, {"b_job_id": job_id, "b_at": now, "b_kind": "workspace", "b_node": None, "b_step": None, "b_text": json.dumps({"path": path, "left": why})})
