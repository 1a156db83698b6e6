"""Run workspaces: a folder per run under `<workspace>/.swarmkit/runs/`, and the policy that keeps or destroys it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import insert, select, update

from swarmkit.store import Store
from swarmkit.store.clock import store_now
from swarmkit.store.models import events, workspaces

from .settings import host_name

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

ACTIVE = "active"
KEPT = "kept"
# Recorded with the run's end; the owning host deletes the folder and records `destroyed`.
PENDING = "destroy pending"
DESTROYED = "destroyed"


def run_dir(runs_dir: Path, job_id: str) -> Path:
    return runs_dir / job_id


def prepare_dir(runs_dir: Path, job_id: str) -> Path:
    """Make the run's folder on this host, once its row is recorded (see `record_workspace`)."""
    path = run_dir(runs_dir, job_id)
    runs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.mkdir(exist_ok=True, mode=0o700)
    return path


async def record_workspace(conn: AsyncConnection, job_id: str, path: Path) -> None:
    """Record the run's folder as active, and as this host's (once per path)."""
    now = store_now()
    existing = await conn.scalar(
        select(workspaces.c.id).where(workspaces.c.job_id == job_id, workspaces.c.path == str(path))
    )
    if existing is None:
        await conn.execute(
            insert(workspaces).values(job_id=job_id, path=str(path), state=ACTIVE, created_at=now, updated_at=now, host=host_name())
        )
    else:
        await conn.execute(update(workspaces).where(workspaces.c.id == existing).values(state=ACTIVE, updated_at=now, host=host_name()))


def safe_to_remove(path: str, runs_dir: Path, job_id: str) -> tuple[bool, str]:
    """Only a real folder named for the run, directly inside this host's runs folder.

    A row's path comes from the store, which any process can write: a forged
    path or a symlink must never lead a cancel outside the runs folder.
    """
    p = Path(path)
    if not p.is_absolute():
        return False, "path is not absolute"
    if p.name != job_id:
        return False, "folder is not named for the run"
    if runs_dir.is_symlink():
        # Made by `prepare_dir` as a real folder: a link put in its place points somewhere else.
        return False, f"the runs folder {runs_dir} is a symbolic link"
    try:
        root = runs_dir.resolve(strict=True)
    except OSError:
        return False, f"no runs folder at {runs_dir} on this host"
    if p.parent != root and p.parent.resolve() != root:
        return False, f"not inside this host's runs folder {root}"
    if p.is_symlink():
        return False, "path is a symbolic link"
    if not p.exists():
        return True, "already gone"
    if not p.is_dir():
        return False, "path is not a folder"
    return True, ""


def dir_size(path: str) -> int | None:
    """Bytes under a folder, not following links; None when it is not here."""
    total = 0
    p = Path(path)
    if not p.is_dir() or p.is_symlink():
        return None
    for root, _dirs, files in os.walk(p, followlinks=False):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


async def decide(conn: AsyncConnection, job_id: str, *, destroy: bool, reason: str) -> list[str]:
    """In the transaction that ends a run: its workspaces are kept, or their destruction is due.

    Nothing is deleted here: file system work inside a transaction holds the
    store's write lock (SQLite) or outlives the server's idle-in-transaction
    limit (PostgreSQL) for as long as the disk takes. `carry_out` does it after
    the commit, on the host that owns the folder.
    """
    now = store_now()
    rows = (
        await conn.execute(
            select(workspaces.c.id, workspaces.c.path).where(workspaces.c.job_id == job_id, workspaces.c.state.in_((ACTIVE, KEPT)))
        )
    ).all()
    state = PENDING if destroy else KEPT
    for wid, _path in rows:
        await conn.execute(update(workspaces).where(workspaces.c.id == wid).values(state=state, updated_at=now))
    return [f"{'to destroy' if destroy else 'kept'} {path} ({reason})" for _wid, path in rows]


async def carry_out(store: Store, job_id: str) -> list[str]:
    """After the run's end is committed: delete what is due here; say what is due elsewhere.

    One line per workspace. A folder on another host is left to that host
    (its worker, or the next `swarmkit` verb run there, deletes it and records it).
    """
    async with store.read() as conn:
        rows = (
            await conn.execute(
                select(workspaces.c.id, workspaces.c.path, workspaces.c.host).where(workspaces.c.job_id == job_id, workspaces.c.state == PENDING)
            )
        ).all()
    here = host_name()
    said: list[str] = []
    for wid, path, host in rows:
        if host is not None and host != here:
            said.append(f"{path} is on host {host}: destroy pending there (its worker, or the next swarmkit run there, removes it)")
            continue
        said.append(await _destroy(store, job_id, wid, path))
    return said


def _remove(runs_dir: Path, job_id: str) -> None:
    """Delete the run's folder through a handle on the runs folder itself, following no link.

    Between `safe_to_remove` and the deletion the runs folder (or the run's) may be swapped for a
    link; opened with O_NOFOLLOW and removed relative to that handle, the deletion stays in the
    folder that was checked (rmtree neither follows a link inside nor removes one in its place).
    """
    try:
        fd = os.open(runs_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return  # not a folder now: nothing is removed, and the caller says it is still there
    try:
        shutil.rmtree(job_id, ignore_errors=True, dir_fd=fd)
    finally:
        os.close(fd)


async def _destroy(store: Store, job_id: str, wid: int, path: str) -> str:
    ok, why = await asyncio.to_thread(safe_to_remove, path, store.loc.runs_dir, job_id)
    if ok:
        await asyncio.to_thread(_remove, store.loc.runs_dir, job_id)
        if await asyncio.to_thread(Path(path).exists):
            ok, why = False, "it could not be removed"
    now = store_now()
    async with store.write() as conn:
        if not ok:
            # Left in place, and no longer due: a forged or moved path is never retried blindly.
            await conn.execute(update(workspaces).where(workspaces.c.id == wid, workspaces.c.state == PENDING).values(state=KEPT, updated_at=now))
            await conn.execute(
                insert(events).values(job_id=job_id, at=now, kind="workspace", node=None, step=None, text=json.dumps({"path": path, "left": why}))
            )
            return f"left {path} in place: {why}"
        await conn.execute(update(workspaces).where(workspaces.c.id == wid, workspaces.c.state == PENDING).values(state=DESTROYED, updated_at=now))
    return f"destroyed {path}"


async def sweep(store: Store) -> list[str]:
    """Carry out the destroys due on this host that another host recorded (a cancel from another machine)."""
    if store.loc.read_only:
        return []
    async with store.read() as conn:
        jobs_due = (
            await conn.execute(
                select(workspaces.c.job_id).where(workspaces.c.state == PENDING, workspaces.c.host == host_name()).distinct()
            )
        ).scalars().all()
    said: list[str] = []
    for job_id in jobs_due:
        said += [line for line in await carry_out(store, job_id) if line.startswith(("destroyed", "left"))]
    return said
