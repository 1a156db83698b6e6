"""The statuses a run's row may hold, and the kinds of its node boundaries.

Plain constants, without SQLAlchemy: what a one-shot verb on SQLite reads
(records, the run table) must not load it (issue 13: start-up). `models`
re-exports them beside the tables.
"""

from __future__ import annotations

# Every status the `jobs.status` column may hold. The shown statuses
# (stopping, cancelling, stalled) are derived and never stored.
QUEUED = "queued"
RUNNING = "running"
STOPPED = "stopped"
DEFERRED = "deferred"
LOST = "lost"
COMPLETED = "completed"
FAILED = "failed"
FAULTED = "faulted"
CANCELLED = "cancelled"

STORED_STATUSES = (QUEUED, RUNNING, STOPPED, DEFERRED, LOST, COMPLETED, FAILED, FAULTED, CANCELLED)
TERMINAL_STATUSES = frozenset({COMPLETED, FAILED, FAULTED, CANCELLED})
RESUMABLE_STATUSES = frozenset({STOPPED, DEFERRED, LOST})
ACTIVE_STATUSES = frozenset({QUEUED, RUNNING, STOPPED, DEFERRED, LOST})


# A run's workspace (`workspaces.state`): active, or kept, with its run's end; or due for
# destruction then (`destroy pending`), until the host that owns the folder deletes it.
WS_ACTIVE, WS_KEPT, WS_PENDING, WS_DESTROYED = "active", "kept", "destroy pending", "destroyed"

# A notification's delivery to one receiver (`notification_deliveries.state`): pending until
# delivered, or dead after its last attempt (an operator may retry it).
DELIVERY_STATES = ("pending", "delivered", "dead")

NODE_STARTED, NODE_FINISHED = "node.started", "node.finished"
NODE_BOUNDS = "kind IN ('node.started', 'node.finished')"
