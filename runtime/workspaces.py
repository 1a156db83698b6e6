"""Run workspaces: a folder per run under `<workspace>/.swarmkit/runs/`, and the policy that keeps or destroys it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from swarmkit.store.clock import store_now
from swarmkit.store.models import events, workspaces

ACTIVE = "active"
KEPT = "kept"
DESTROYED = "destroyed"


def run_dir(runs_dir: Path, job_id: str) -> Path:
    return runs_dir / job_id


async def ensure_workspace(conn: AsyncConnection, runs_dir: Path, job_id: str) -> Path:
    """Create the run's folder here and record it (once per path)."""
    path = run_dir(runs_dir, job_id)
    runs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # noqa: ASYNC240  (a mkdir; moving file work out of transactions is its own change)
    path.mkdir(exist_ok=True, mode=0o700)
    now = store_now()
    existing = await conn.scalar(
        select(workspaces.c.id).where(workspaces.c.job_id == job_id, workspaces.c.path == str(path))
    )
    if existing is None:
        await conn.execute(
            insert(workspaces).values(job_id=job_id, path=str(path), state=ACTIVE, created_at=now, updated_at=now)
        )
    else:
        await conn.execute(update(workspaces).where(workspaces.c.id == existing).values(state=ACTIVE, updated_at=now))
    return path


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


async def apply_policy(
    conn: AsyncConnection, job_id: str, *, destroy: bool, runs_dir: Path, reason: str
) -> list[str]:
    """Destroy or keep the run's workspaces; returns one line per workspace saying what happened."""
    now = store_now()
    rows = (
        await conn.execute(
            select(workspaces.c.id, workspaces.c.path, workspaces.c.state).where(
                workspaces.c.job_id == job_id, workspaces.c.state != DESTROYED
            )
        )
    ).all()
    said: list[str] = []
    for wid, path, _state in rows:
        if not destroy:
            await conn.execute(update(workspaces).where(workspaces.c.id == wid).values(state=KEPT, updated_at=now))
            said.append(f"kept {path}")
            continue
        ok, why = safe_to_remove(path, runs_dir, job_id)
        if not ok:
            said.append(f"left {path} in place: {why}")
            await conn.execute(
                insert(events).values(
                    job_id=job_id, at=now, kind="workspace", node=None, step=None,
                    text=json.dumps({"path": path, "left": why}),
                )
            )
            continue
        if Path(path).exists():  # noqa: ASYNC240
            shutil.rmtree(path, ignore_errors=True)
        if Path(path).exists():  # noqa: ASYNC240
            said.append(f"could not remove {path}")
            continue
        await conn.execute(update(workspaces).where(workspaces.c.id == wid).values(state=DESTROYED, updated_at=now))
        said.append(f"destroyed {path} ({reason})")
    return said
