"""Run workspaces: a folder per run under `<workspace>/.swarmkit/runs/`, and the policy that keeps or destroys it."""

from __future__ import annotations

import os
from pathlib import Path

from swarmkit.store import workspace_rows as rows
from swarmkit.store.clock import store_now
from swarmkit.store.loopless import off_loop
from swarmkit.store.statuses import WS_DESTROYED as DESTROYED
from swarmkit.store.statuses import WS_KEPT as KEPT
from swarmkit.store.statuses import WS_PENDING as PENDING

from .settings import host_name

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    from swarmkit.store import Store
    from swarmkit.store.connections import AsyncConn


def run_dir(runs_dir: Path, job_id: str) -> Path:
    return runs_dir / job_id


def prepare_dir(runs_dir: Path, job_id: str) -> Path:
    """Make the run's folder on this host, once its row is recorded (see `record_workspace`)."""
    path = run_dir(runs_dir, job_id)
    runs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.mkdir(exist_ok=True, mode=0o700)
    return path


async def record_workspace(conn: AsyncConn, job_id: str, path: Path) -> None:
    """Record the run's folder as active, and as this host's (once per path)."""
    now = store_now()
    existing = await rows.workspace_id(conn, job_id, str(path))
    if existing is None:
        await rows.add_workspace(conn, job_id, str(path), host=host_name(), now=now)
    else:
        await rows.reactivate_workspace(conn, existing, host=host_name(), now=now)


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


async def decide(conn: AsyncConn, job_id: str, *, destroy: bool, reason: str) -> list[str]:
    """In the transaction that ends a run: its workspaces are kept, or their destruction is due.

    Nothing is deleted here: file system work inside a transaction holds the
    store's write lock (SQLite) or outlives the server's idle-in-transaction
    limit (PostgreSQL) for as long as the disk takes. `carry_out` does it after
    the commit, on the host that owns the folder.
    """
    now = store_now()
    found = await rows.open_workspaces(conn, job_id)
    state = PENDING if destroy else KEPT
    for wid, _path in found:
        await rows.set_workspace_state(conn, wid, state, now)
    return [f"{'to destroy' if destroy else 'kept'} {path} ({reason})" for _wid, path in found]


async def carry_out(store: Store, job_id: str) -> list[str]:
    """After the run's end is committed: delete what is due here; say what is due elsewhere.

    One line per workspace. A folder on another host is left to that host
    (its worker, or the next `swarmkit` verb run there, deletes it and records it).
    """
    async with store.read() as conn:
        due = await rows.destroys_due(conn, job_id)
    here = host_name()
    said: list[str] = []
    for wid, path, host in due:
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
    import shutil  # late: it loads bz2 and lzma; only a deletion needs rmtree

    try:
        shutil.rmtree(job_id, ignore_errors=True, dir_fd=fd)
    finally:
        os.close(fd)


async def _destroy(store: Store, job_id: str, wid: int, path: str) -> str:
    ok, why = await off_loop(safe_to_remove, path, store.loc.runs_dir, job_id)
    if ok:
        await off_loop(_remove, store.loc.runs_dir, job_id)
        if await off_loop(Path(path).exists):
            ok, why = False, "it could not be removed"
    now = store_now()
    async with store.write() as conn:
        if not ok:
            # Left in place, and no longer due: a forged or moved path is never retried blindly.
            await rows.end_destroy(conn, wid, KEPT, now)
            await rows.record_left_in_place(conn, job_id, path, why, now)
            return f"left {path} in place: {why}"
        await rows.end_destroy(conn, wid, DESTROYED, now)
    return f"destroyed {path}"


async def sweep(store: Store) -> list[str]:
    """Carry out the destroys due on this host that another host recorded (a cancel from another machine)."""
    if store.loc.read_only:
        return []
    host = host_name()
    jobs_due = await store.run_read(lambda conn: rows.runs_with_destroys_due(conn, host), here=True)
    said: list[str] = []
    for job_id in jobs_due:
        said += [line for line in await carry_out(store, job_id) if line.startswith(("destroyed", "left"))]
    return said
