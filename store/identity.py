"""A SQLite store that moves is noticed: the file a process opened must stay the one at the path.

A restore from a backup, an `mv` or an `rm` under a running worker would
otherwise let it write on into an unlinked file and report runs completed
that nobody will ever see, while every other process opens a new, empty store
at the same path. So each process notes the file's device and inode when it
opens it and checks them before every write; and a store leaves its id beside
itself (`store.db.id`), so that nothing makes a fresh store where one was.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from .engine import StoreError, StoreLocation
from .named import S

if TYPE_CHECKING:
    from . import Store


class StoreReplaced(StoreError):
    """The store file at the path is not the one this process opened, or is gone."""


def _paths(loc: StoreLocation) -> tuple[Path, Path]:
    db = Path(loc.url.database or "")
    return db, db.with_name(db.name + ".id")


def check_not_gone(loc: StoreLocation, create: bool) -> None:
    db, id_file = _paths(loc)
    if db.exists() or not id_file.exists():
        return
    try:
        was = id_file.read_text().strip()
    except OSError:
        was = "?"
    raise StoreReplaced(
        f"the store {db} is gone: it was moved or deleted (it was store {was[:12]}). "
        f"Swarmkit does not make a new, empty store in its place{' for this verb' if not create else ''}: "
        f"put it back, or remove {id_file} to start a new store here."
    )


def _stat(db: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(db)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


async def claim(store: Store) -> tuple[int, int] | None:
    """Note the opened file, and check (or leave) the store's id beside it."""
    db, id_file = _paths(store.loc)
    try:
        # Through run_read: on the store's thread, with no async engine made for it (see Store.engine).
        row = await store.run_read(lambda conn: conn.execute(S.STORE_ID).first())
    except Exception as exc:
        # sqlite3's OperationalError, raw (a lite store) or wrapped by SQLAlchemy.
        if not isinstance(getattr(exc, "orig", exc), sqlite3.OperationalError):
            raise
        row = None  # a store from before migration 0003, opened without migrating
    store_id = row[0] if row else None
    if store_id is not None:
        try:
            was = id_file.read_text().strip()
        except FileNotFoundError:
            was = None
        migrated = store.schema_change is not None and store.schema_change[0] != store.schema_change[1]
        if was is None or migrated:  # a store upgraded just now may have been given its id just now
            fd = os.open(id_file, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(store_id + "\n")
        elif was != store_id:
            raise StoreReplaced(
                f"the store {db} was replaced: it was store {was[:12]}, the file there now is store {store_id[:12]}. "
                f"If that is meant (a different store moved here), remove {id_file} and try again."
            )
    return _stat(db)


def check_same(loc: StoreLocation, opened: tuple[int, int]) -> None:
    db, _ = _paths(loc)
    now = _stat(db)
    if now != opened:
        what = "removed" if now is None else "replaced by another file"
        raise StoreReplaced(f"the store file {db} was {what} under this process: it writes nothing more to it")
