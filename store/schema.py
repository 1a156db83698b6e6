"""Schema migrations, run on open, and the refusal of a store from a newer schema."""

from __future__ import annotations

from pathlib import Path

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from .engine import StoreError, StoreLocation, write_tx

MIGRATIONS = Path(__file__).with_name("migrations")
# Any fixed number: it only has to be the same in every Swarmkit process.
PG_MIGRATION_LOCK = 0x5357_4B31


class SchemaTooNewError(StoreError):
    pass


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def _script() -> ScriptDirectory:
    return ScriptDirectory.from_config(_config())


def head_revision() -> str:
    head = _script().get_current_head()
    assert head is not None
    return head


def _check_and_upgrade(sync_conn, display: str, upgrade: bool) -> str | None:
    from alembic import command

    script = _script()
    current = MigrationContext.configure(sync_conn).get_current_revision()
    known = {rev.revision for rev in script.walk_revisions()}
    if current is not None and current not in known:
        raise SchemaTooNewError(
            f"the store {display} was written by a newer Swarmkit (schema revision {current}); "
            f"this Swarmkit knows schema revisions up to {script.get_current_head()}. "
            "Upgrade Swarmkit to use this store; it was left untouched."
        )
    if current is None:
        # A database that is not (yet) a Swarmkit store: only an empty one may become one.
        from sqlalchemy import inspect

        found = sorted(inspect(sync_conn).get_table_names())
        if found:
            hint = " (on PostgreSQL, name a schema of its own with ?schema=NAME)" if sync_conn.dialect.name == "postgresql" else ""
            raise StoreError(
                f"{display} is not a Swarmkit store: it holds tables Swarmkit did not make ({', '.join(found[:8])}); "
                f"name an empty file or a new database{hint}. It was left untouched."
            )
    if not upgrade or current == script.get_current_head():
        return current
    cfg = _config()
    cfg.attributes["connection"] = sync_conn
    command.upgrade(cfg, "head")
    return script.get_current_head()


async def ensure_schema(engine: AsyncEngine, loc: StoreLocation) -> None:
    """Bring the store to this Swarmkit's schema, or refuse one that is newer.

    The check runs inside a write transaction (BEGIN IMMEDIATE on SQLite, an
    advisory lock on PostgreSQL) so that two processes opening a new store at
    once migrate it exactly once.
    """
    head = head_revision()
    # Fast path: a store already at head needs no write lock.
    async with engine.connect() as conn:
        if loc.schema:
            exists = await conn.scalar(
                text("SELECT 1 FROM information_schema.schemata WHERE schema_name = :s"), {"s": loc.schema}
            )
            if not exists:
                current = None
            else:
                current = await conn.run_sync(lambda c: _check_and_upgrade(c, loc.display, False))
        else:
            current = await conn.run_sync(lambda c: _check_and_upgrade(c, loc.display, False))
        await conn.rollback()
    if current == head:
        return
    if loc.read_only:
        raise StoreError(f"the store {loc.display} is read-only and not at this Swarmkit's schema ({current or 'empty'}, wanted {head}); it cannot be migrated")
    async with write_tx(engine) as conn:
        if not loc.is_sqlite:
            await conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_MIGRATION_LOCK})
            if loc.schema:
                await conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{loc.schema}"'))
        await conn.run_sync(lambda c: _check_and_upgrade(c, loc.display, True))
