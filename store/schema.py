"""The store's schema: which revision it is at, who may write it, and explicit upgrades.

Opening never migrates a shared store behind its operators' backs. What an
open may do is the caller's choice (`Store.open(create=, upgrade=)`):

- a missing store (no SQLite file, no PostgreSQL schema, an empty database) is
  made only by the verbs that host runs (`run`, `worker`, `db upgrade`, the
  demo); everything else says "no store at ...";
- an older schema is brought to this code's head only where the caller allows
  it (`swarmkit db upgrade`; and `run`/`worker` on a local SQLite file);
  otherwise the open is refused with the command that upgrades it;
- a newer schema is used when the store says this code may still write it
  (`swarmkit_meta.min_writer`, kept back by migrations that only add), and
  refused otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from .named import S
from .revisions import MIGRATIONS, head_revision, known_revisions
from .store_errors import NoStoreError, SchemaTooNewError, SchemaTooOldError, StoreError
from .store_location import StoreLocation
from .transactions import write_tx

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    # SQLAlchemy is imported where PostgreSQL is asked or a store migrated: a lite SQLite
    # store (store/lite.py) reads its schema through named statements without it.
    from alembic.config import Config  # late: alembic loads only to migrate
    from sqlalchemy import Connection
    from sqlalchemy.ext.asyncio import AsyncEngine

# Any fixed number: it only has to be the same in every Swarmkit process.
PG_MIGRATION_LOCK = 0x5357_4B31


def _config() -> Config:
    from alembic.config import Config  # late: alembic loads only to migrate

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def _current_revision(conn: Connection, tables: list[str]) -> str | None:
    """What `alembic_version` holds (what Alembic's MigrationContext reads), by plain SQL."""
    if "alembic_version" not in tables:
        return None
    return conn.execute(S.ALEMBIC_VERSION).scalar()


def _table_names(conn: Connection) -> list[str]:
    """What SQLAlchemy's inspector lists (on SQLite, the same statement by name)."""
    if conn.dialect.name == "sqlite":
        return [r[0] for r in conn.execute(S.SQLITE_TABLES)]
    from sqlalchemy import inspect  # late: only off SQLite; a lite store reads its tables by name without SQLAlchemy

    return inspect(conn).get_table_names()


@dataclass(frozen=True)
class SchemaState:
    """What `swarmkit db status` says."""

    current: str | None  # None: no Swarmkit store here
    head: str  # what this code wants
    min_writer: str | None  # the oldest revision whose code may write it
    known: bool  # this code knows `current`
    may_write: bool
    store_id: str | None
    foreign: tuple[str, ...] = ()  # tables of something that is not a Swarmkit store

    @property
    def up_to_date(self) -> bool:
        return self.current == self.head


def read_schema(conn: Connection, schema: str | None = None) -> SchemaState:
    head = head_revision()
    known = set(known_revisions())
    if schema is not None:
        from sqlalchemy import text  # late: a named schema is PostgreSQL only; a lite store loads no SQLAlchemy

        if not conn.scalar(text("SELECT 1 FROM information_schema.schemata WHERE schema_name = :s"), {"s": schema}):
            return SchemaState(None, head, None, True, False, None)
    tables = _table_names(conn)
    current = _current_revision(conn, tables)
    if current is None:
        return SchemaState(None, head, None, True, False, None, tuple(sorted(tables)))
    facts: dict[str, str] = {}
    if "swarmkit_meta" in tables:
        facts = {k: v for k, v in conn.execute(S.META_FACTS)}
    min_writer = facts.get("min_writer")
    is_known = current is None or current in known
    may_write = current is not None and (is_known or (min_writer is not None and min_writer in known))
    return SchemaState(current, head, min_writer, is_known, may_write, facts.get("store_id"))


def _refuse_foreign(found: tuple[str, ...] | list[str], display: str, postgresql: bool) -> None:
    """A database that is not (yet) a Swarmkit store: only an empty one may become one."""
    if found:
        hint = " (on PostgreSQL, name a schema of its own with ?schema=NAME)" if postgresql else ""
        raise StoreError(
            f"{display} is not a Swarmkit store: it holds tables Swarmkit did not make ({', '.join(found[:8])}); "
            f"name an empty file or a new database{hint}. It was left untouched."
        )


def _judge(state: SchemaState, display: str, *, create: bool, upgrade: bool, postgresql: bool = False) -> bool:
    """Raise unless the store may be used as it is; True when it must be migrated (and may be)."""
    _refuse_foreign(state.foreign, display, postgresql)
    if state.current is None:
        if not create:
            raise NoStoreError(f"no store at {display}")
        return True
    if not state.known:
        if state.may_write:
            return False  # newer, but only by additions this code ignores
        raise SchemaTooNewError(
            f"the store {display} was written by a newer Swarmkit (schema revision {state.current}, "
            f"writable by code from revision {state.min_writer or state.current} on); this Swarmkit knows schema "
            f"revisions up to {state.head}. Upgrade Swarmkit to use this store; it was left untouched."
        )
    if state.current == state.head:
        return False
    if not upgrade:
        raise SchemaTooOldError(
            f"the store {display} is at schema revision {state.current}; this Swarmkit needs {state.head}. "
            "Run `swarmkit db upgrade` (with the same --store) to upgrade it; it was left untouched."
        )
    return True


def _alembic() -> tuple[ModuleType, Config]:
    """Alembic's commands and this store's config, loaded before a migration's transaction opens: loading
    them is a few hundred milliseconds of CPU, seconds on a loaded machine, and a PostgreSQL transaction
    left idle that long is ended by the server (`PG_IDLE_IN_TRANSACTION_MS`, engine.py)."""
    from alembic import command  # late: alembic loads only to migrate

    return command, _config()


def _migrate(conn: Connection, display: str, alembic: tuple[ModuleType, Config]) -> None:
    command, cfg = alembic
    if _current_revision(conn, _table_names(conn)) is None:
        _refuse_foreign(sorted(_table_names(conn)), display, conn.dialect.name == "postgresql")
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, "head")


async def ensure_schema(engine: AsyncEngine, loc: StoreLocation, *, create: bool, upgrade: bool) -> tuple[str | None, str]:
    """Check the store's schema for this caller, migrating it where allowed: (revision before, revision now).

    Migration runs inside a write transaction (BEGIN IMMEDIATE on SQLite, an
    advisory lock on PostgreSQL) and checks again there, so two processes
    opening a new store at once migrate it exactly once.
    """
    async with engine.connect() as conn:
        state = await conn.run_sync(read_schema, loc.schema)
        await conn.rollback()
    if not _judge(state, loc.display, create=create, upgrade=upgrade, postgresql=not loc.is_sqlite):
        return state.current, state.current or state.head
    if loc.read_only:
        raise StoreError(f"the store {loc.display} is read-only and not at this Swarmkit's schema ({state.current or 'empty'}, wanted {state.head}); it cannot be migrated")
    alembic = _alembic()
    async with write_tx(engine) as conn:
        if not loc.is_sqlite:
            from sqlalchemy import text  # late: a migration on PostgreSQL only

            await conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_MIGRATION_LOCK})
            if loc.schema:
                await conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{loc.schema}"'))
        state = await conn.run_sync(read_schema, None)
        if _judge(state, loc.display, create=create, upgrade=upgrade, postgresql=not loc.is_sqlite):
            await conn.run_sync(_migrate, loc.display, alembic)
    return state.current, state.head


async def schema_state(engine: AsyncEngine, loc: StoreLocation) -> SchemaState:
    async with engine.connect() as conn:
        state = await conn.run_sync(read_schema, loc.schema)
        await conn.rollback()
    return state
