"""Whether a heartbeat still holds its lease, as SQL conditions over a table with the heartbeat
columns (`jobs`, `workers`): the one rule the lost-run judge, the live-worker count and the skew
warning share. The ages come from `clock.age_params`, by the store's clock.
"""

from __future__ import annotations

from sqlalchemy import Table, and_, bindparam, literal_column, not_, or_
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import Interval

from .models import UTCDateTime


def stale(table: Table, sqlite: bool) -> ColumnElement[bool]:
    """`table`'s heartbeat is older than the age given to `age_params` (a lapsed lease, a gone worker),
    and older than the row's own `lease_s` where its host gave one: the longer lease decides.

    A host fences itself by its own lease; a judge with a shorter one (a console, `swarmkit status`
    started with another SWARMKIT_LEASE) marked its healthy runs lost while their agents still
    worked (migration 0006)."""
    lease = table.c.lease_s
    by_wall = table.c.heartbeat_at < bindparam("b_cutoff", type_=UTCDateTime())
    if not sqlite:
        its_own = table.c.heartbeat_at + lease * literal_column("interval '1 second'", Interval()) < bindparam("b_now", type_=UTCDateTime())
        return and_(by_wall, or_(lease.is_(None), its_own))
    return or_(*stale_sqlite(table))


def stale_sqlite(table: Table) -> tuple[ColumnElement[bool], ...]:
    """`stale` on SQLite, as three conditions no row meets two of, each a range of an index on
    (status, heartbeat_mono) or (status, heartbeat_at): a statement that asks them one by one (a
    UNION ALL) reads the stale rows only, not every running row (issue 31: the console's poll and
    every worker ask twice a second)."""
    mono = table.c.heartbeat_mono
    # Spelled so that no branch is NULL: NOT (NULL OR ...) would hide a live row (`fresh`: a worker
    # stamped by another machine, without a monotonic time, went uncounted).
    return (
        # Lapsed by the monotonic clock: past the judge's lease, and past its host's own where it gave one.
        and_(mono.is_not(None), mono < bindparam("b_mono_cutoff"), or_(table.c.lease_s.is_(None), mono + table.c.lease_s < bindparam("b_mono_now"))),
        # Stamped in this machine's future: a clock from before a reboot.
        and_(mono.is_not(None), mono > bindparam("b_mono_future")),
        # A row stamped before migration 0003 (no lease of its own either): by the wall clock.
        and_(mono.is_(None), table.c.heartbeat_at < bindparam("b_cutoff", type_=UTCDateTime())),
    )


def fresh(table: Table, sqlite: bool) -> ColumnElement[bool]:
    return and_(table.c.heartbeat_at.is_not(None), not_(stale(table, sqlite)))
