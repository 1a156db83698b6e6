"""Whether there is a store for the console to open: what both doors of the console ask before they start
(`swarmkit-console`, console/cli.py, and `swarmkit-console serve`, console/web.py).

Its own module so that neither of those imports the other. Imported by them after the collector is
off (console/start.py) or for `serve`: the full store (SQLAlchemy) loads only for a store that is no
plain SQLite file.
"""

from __future__ import annotations

import asyncio

from swarmkit.runtime.settings import application_name
from swarmkit.store.lite import LiteStore, lite_location
from swarmkit.store.store_errors import NoStoreError, is_store_fault


def probe_store(store_url: str | None, workspace: str | None) -> str | None:
    """What is wrong with the store, when there is none to open; None when the console can start.

    A mistyped path or schema is an error to say, not an empty console that
    waits for ever. An unreachable or locked store is not: the console shows
    it, and retries."""
    try:
        asyncio.run(_probe(store_url, workspace))
    except NoStoreError as exc:
        return str(exc)
    except Exception as exc:
        if not is_store_fault(exc):
            raise
    return None


async def _probe(store_url: str | None, workspace: str | None) -> None:
    # A plain SQLite file opens through sqlite3 alone, by the same rules (store/lite.py).
    lite = lite_location(store_url, workspace)
    if lite is not None:
        await (await LiteStore.open(lite)).close()
        return
    from swarmkit.store import Store  # late: SQLAlchemy; a plain SQLite file opens through sqlite3 alone

    store = await Store.open(store_url, workspace, create=False, upgrade=False, inline=True, application_name=application_name("console"))
    await store.close()
