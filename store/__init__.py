"""The shared jobs store: SQLite (WAL) by default, PostgreSQL across machines.

Knows nothing of flows or of any UI.

Its names load on first use (PEP 562): `swarmkit --help` imports a module
of this package without loading SQLAlchemy, and a verb pays only for the
parts it touches (issue 13: start-up).
"""

from __future__ import annotations

from importlib import import_module

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: `--version` reads revisions.py
if TYPE_CHECKING:
    from typing import Any

# name -> the module of this package that defines it
_WHERE = {
    "Store": "store", "STORE_FAULTS": "store_faults", "describe_db_error": "store_faults", "is_transient": "store_faults",
    "STORE_ENV": "store_location", "StoreError": "store_errors", "StoreLocation": "store_location", "StoreUrlError": "store_errors",
    "masked": "masking", "resolve_store": "store_location",
    "NoStoreError": "store_errors", "SchemaTooNewError": "store_errors", "SchemaTooOldError": "store_errors",
    "StoreReplaced": "identity",
    "store_now": "clock",
    "JobRecord": "records", "merged_view": "records",
    **{name: "statuses" for name in (
        "ACTIVE_STATUSES", "CANCELLED", "COMPLETED", "DEFERRED", "FAILED", "FAULTED", "LOST", "QUEUED",
        "RESUMABLE_STATUSES", "RUNNING", "STOPPED", "STORED_STATUSES", "TERMINAL_STATUSES",
    )},
}

__all__ = [
    "ACTIVE_STATUSES", "CANCELLED", "COMPLETED", "DEFERRED", "FAILED", "FAULTED", "JobRecord", "LOST", "QUEUED",
    "RESUMABLE_STATUSES", "RUNNING", "STOPPED", "STORED_STATUSES", "STORE_ENV", "STORE_FAULTS", "NoStoreError",
    "SchemaTooNewError", "SchemaTooOldError", "StoreReplaced", "Store", "StoreError", "StoreLocation", "StoreUrlError",
    "TERMINAL_STATUSES", "describe_db_error", "is_transient", "masked", "merged_view", "resolve_store", "store_now",
]
assert sorted(__all__) == sorted(_WHERE)


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{where}", __name__), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from .clock import store_now
    from .identity import StoreReplaced
    from .masking import masked
    from .records import JobRecord, merged_view
    from .statuses import (
        ACTIVE_STATUSES,
        CANCELLED,
        COMPLETED,
        DEFERRED,
        FAILED,
        FAULTED,
        LOST,
        QUEUED,
        RESUMABLE_STATUSES,
        RUNNING,
        STOPPED,
        STORED_STATUSES,
        TERMINAL_STATUSES,
    )
    from .store import Store
    from .store_errors import NoStoreError, SchemaTooNewError, SchemaTooOldError, StoreError, StoreUrlError
    from .store_faults import STORE_FAULTS, describe_db_error, is_transient
    from .store_location import STORE_ENV, StoreLocation, resolve_store
