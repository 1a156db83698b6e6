"""Indexes for the console's header, (status, stall_at, cost), and for the lost-run check on SQLite,
(status, heartbeat_mono).

The console reads only the runs on its screen (issue 31: its cost follows the
screen, not the store). What its header says of every running run comes from
this index's ranges instead of a pass over the rows: how many show stalled
(`stall_at` past, a range probe; a row whose host set no `stall_at` is looked
at by its last sign of work), and what the running runs cost together (a sum
read from the index alone, for the header's burn).

Every sign of work moves `stall_at` (and usage moves `cost` with it), so a
heartbeat or a node boundary rewrites this entry as it already rewrites
(status, heartbeat_at)'s. Measured with bench/per_node.py: see the README.

On SQLite the lost-run check (every console poll, every worker twice a
second) judges a heartbeat by the monotonic clock (`heartbeat_mono`): without
an index of its own that visited every running row, 87 ms a poll with 20,000
running runs on a loaded machine. Each way a heartbeat lapses is now asked as
a range of (status, heartbeat_mono) (`liveness.stale_sqlite`). A heartbeat
moves it once a second a run, as it moves (status, heartbeat_at).

Additive: `min_writer` stays at 0002.

Revision ID: 0008
Revises: 0007
"""

from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index('ix_jobs_status_stall', ['status', 'stall_at', 'cost'], unique=False)
        batch_op.create_index('ix_jobs_status_mono', ['status', 'heartbeat_mono'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_status_mono')
        batch_op.drop_index('ix_jobs_status_stall')
