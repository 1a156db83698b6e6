"""A SQLite store that moves is noticed: the file a process opened must stay the one at the path.

A restore from a backup, an `mv` or an `rm` under a running worker would
otherwise let it write on into an unlinked file and report runs completed
that nobody will ever see, while every other process opens a new, empty store
at the same path. So each process notes the file's device and inode when it
opens it and checks them before every write; and a store leaves its id beside
itself (`store.db.id`), so that nothing makes a fresh store where one was.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import struct
from pathlib import Path

from .named import S
from .store_errors import StoreError
from .store_location import StoreLocation

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    from . import Store


class StoreReplaced(StoreError):
    """The store file at the path is not the one this process opened, or is gone."""


def _paths(loc: StoreLocation) -> tuple[Path, Path]:
    db = Path(loc.url.database or "")
    return db, db.with_name(db.name + ".id")


class StoreDamaged(StoreError):
    """The SQLite file at the path is cut short or is not a database: nothing opens it, so nothing changes it."""


_MAGIC = b"SQLite format 3\x00"


def _head(db: Path) -> tuple[bytes, int] | None:
    """The file's first 100 bytes (SQLite's header) and its size, read without SQLite; None when it cannot be read."""
    try:
        with open(db, "rb") as f:
            return f.read(100), os.fstat(f.fileno()).st_size
    except OSError:
        return None


def _damage(head: bytes, size: int, db: Path) -> str | None:
    """What is wrong with the SQLite file `db` (header `head`, `size` bytes), by its header and its WAL's frames."""
    if not head.startswith(_MAGIC[: len(head)]) or (len(head) >= len(_MAGIC) and not head.startswith(_MAGIC)):
        return "file is not a database"
    if len(head) < 100:
        return f"it is {size} bytes, shorter than a SQLite header: it was cut short"
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    if page < 512 or page & (page - 1):
        return "its header names no page size: it is damaged"
    # The header's page count is trusted only while it is current (SQLite's own rule: offset 92 equals 24).
    pages = int.from_bytes(head[28:32], "big") if head[24:28] == head[92:96] else 0
    whole = size // page
    if pages <= whole and not size % page:
        return None  # the file holds every page its header counts (the usual case: the WAL is not read)
    # Every page the store holds must be whole in the file or in its WAL: a checkpoint cut off (a full
    # disk, a kill) leaves the file short of pages its WAL still holds, which SQLite then writes again.
    in_wal, committed = _wal_pages(db, page)
    wanted = max(committed if committed is not None else pages, whole + (1 if size % page else 0))
    missing = [n for n in range(whole + 1, wanted + 1) if n not in in_wal]
    if missing:
        return f"it is {size} bytes, and {len(missing)} of the {wanted} pages it holds are in neither the file nor its WAL: it was cut short"
    return None


def _wal_pages(db: Path, page: int) -> tuple[set[int], int | None]:
    """The pages the WAL beside `db` holds in frames of its current generation (salts as its header's; a
    torn last frame counts too, which can only make a store look whole), and the store's size in pages
    at its last commit there (None without one). Frame headers only: this reads 24 bytes a frame."""
    try:
        f = open(f"{db}-wal", "rb")
    except OSError:
        return set(), None
    found: set[int] = set()
    committed: int | None = None
    with f:
        hdr = f.read(32)
        if len(hdr) < 32 or int.from_bytes(hdr[:4], "big") not in (0x377F0682, 0x377F0683) or int.from_bytes(hdr[8:12], "big") != page:
            return set(), None
        salts = hdr[16:24]
        at = 32
        while True:
            f.seek(at)
            frame = f.read(24)
            if len(frame) < 24 or frame[8:16] != salts:
                break
            number, after = int.from_bytes(frame[:4], "big"), int.from_bytes(frame[4:8], "big")
            found.add(number)
            if after:
                committed = after
            at += 24 + page
    return found, committed


def _checkpointing(db: Path) -> bool:
    """Whether a process holds the WAL's checkpoint lock (byte 121 of the -shm, SQLite's unix VFS): a
    checkpoint writes the header's new page count before the pages that make the file that long."""
    try:
        fd = os.open(f"{db}-shm", os.O_RDONLY)
    except OSError:
        return False
    try:
        probe = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, 121, 1, 0)
        got = fcntl.fcntl(fd, fcntl.F_GETLK, probe)
        return struct.unpack("hhqqi", got)[0] != fcntl.F_UNLCK
    except OSError:
        return False
    finally:
        os.close(fd)


def check_whole(loc: StoreLocation) -> None:
    """Refuse a SQLite store that is cut short (a truncated copy, a full disk's half-written restore),
    emptied while its id says a store was there, or not a database at all: before SQLite opens it,
    because opening a store whose WAL holds pages checkpoints them into it and deletes the WAL when
    the process closes it, even after SQLite has found the file malformed. The files stay as they are,
    for whoever restores them.

    Once per file and process, before this process opens it: POSIX locks belong to the process, and
    closing any descriptor of a file drops every lock the process holds on it. Reading the store or
    its -shm here while this process's SQLite connections hold their locks dropped them: a console's
    act was written and then lost, and its polls read "disk I/O error"."""
    db, id_file = _paths(loc)
    if str(db) in _CHECKED:
        return
    _check_whole(loc, db, id_file)
    _CHECKED.add(str(db))


# The store files this process has checked (and may since hold SQLite's locks on).
_CHECKED: set[str] = set()


def _check_whole(loc: StoreLocation, db: Path, id_file: Path) -> None:
    got = _head(db)
    if got is None:
        return
    head, size = got
    if size == 0:
        wal = Path(f"{db}-wal")
        if id_file.exists() or (wal.exists() and wal.stat().st_size > 0):
            try:
                was = f"store {id_file.read_text().strip()[:12]} was there"
            except OSError:
                was = "its WAL holds pages"
            raise StoreDamaged(
                f"the store {db} is empty (0 bytes) but {was}: it was truncated. Swarmkit leaves it as it is: "
                f"restore it from a backup, or remove it (and its -wal and {id_file.name}) to start a new store here."
            )
        return  # an empty file and nothing else: a store is made in it
    why = _damage(head, size, db)
    if why is not None and why != "file is not a database" and _checkpointing(db):
        return  # a live store mid-checkpoint, not a damaged one
    if why is not None and why != "file is not a database":
        again = _head(db)
        why = _damage(*again, db) if again is not None else why
    if why == "file is not a database":
        raise StoreDamaged(f"{loc.display} is not a Swarmkit store (file is not a database)")
    if why is not None:
        raise StoreDamaged(
            f"the store {db} is damaged: {why}. Swarmkit leaves it as it is: restore it from a backup "
            f"(or recover it with sqlite3's .recover), or move it away to start a new store here."
        )


def check_not_gone(loc: StoreLocation, create: bool) -> None:
    db, id_file = _paths(loc)
    if db.exists():
        check_whole(loc)
        return
    if not id_file.exists():
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
    try:  # the usual answer first, without a Path made: this runs before every write (a host's, every node)
        st = os.stat(loc.url.database or "")
        if (st.st_dev, st.st_ino) == opened:
            return
    except OSError:
        pass
    db, _ = _paths(loc)
    now = _stat(db)
    if now != opened:
        what = "removed" if now is None else "replaced by another file"
        raise StoreReplaced(f"the store file {db} was {what} under this process: it writes nothing more to it")
