"""An index for the lost-run check: (status, heartbeat_at).

Every worker (twice a second) and every console (each poll) asks "is any
running row past its lease?"; with this index that is a range probe instead
of a visit to every running row. A heartbeat moves it once a second a run, so
it costs the node boundary nothing measurable.

Not indexed on purpose: (status, last_event_at). The console's refresh of
running rows would use it, but every node boundary and every batch of log
lines moves last_event_at: it made each boundary write noticeably more to the
WAL (measured with bench/per_node.py's flow) to save the console a fraction of
a millisecond a poll.

Revision ID: 0002
Revises: 0001
"""

from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index('ix_jobs_status_heartbeat', ['status', 'heartbeat_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_status_heartbeat')
