"""The workspace sweep every verb that hosts runs (or cancels one) does first: workspaces of this host whose
destroy another machine recorded. Its own module: runtime/workspaces.py loads SQLAlchemy, and a one-shot
verb on a SQLite file (`status`, `stop`) loads none (cli/store_access.py's `with_store`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from swarmkit.runtime.text import plain
from swarmkit.runtime.workspaces import sweep
from swarmkit.store import STORE_FAULTS

if TYPE_CHECKING:
    from swarmkit.store import Store


async def swept_lines(store: Store) -> list[str]:
    """What the sweep did, a line each, to be said on stderr: this is the next swarmkit process here.
    A store fault is logged, not raised: the verb goes on."""
    try:
        return [plain(line) for line in await sweep(store)]
    except STORE_FAULTS as exc:
        logging.getLogger("swarmkit.cli").info("workspace sweep failed: %s", exc)
        return []
