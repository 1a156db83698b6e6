"""The workspace sweep every verb that hosts runs (or cancels one) does first: workspaces of this host whose
destroy another machine recorded (runtime/workspaces.py `sweep`, by named statements: a `swarmkit cancel`
on a SQLite file runs it on the lite store)."""

from __future__ import annotations

from swarmkit.runtime.text import plain
from swarmkit.runtime.workspaces import sweep
from swarmkit.store.store_errors import is_store_fault

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    from swarmkit.store import Store


async def swept_lines(store: Store) -> list[str]:
    """What the sweep did, a line each, to be said on stderr: this is the next swarmkit process here.
    A store fault is logged, not raised: the verb goes on."""
    try:
        return [plain(line) for line in await sweep(store)]
    except Exception as exc:
        if not is_store_fault(exc):
            raise
        import logging  # late: logging loads only where something is logged (cli/verb_runner.py)

        logging.getLogger("swarmkit.cli").info("workspace sweep failed: %s", exc)
        return []
