"""When the node in flight started, and indexes for a node's usual duration (the console's "stops in ~40 s"): (flow, created_at) on
jobs, and (job_id, node, id) on events, for node.started and node.finished only.

A stopping run's ETA comes from the same flow's recent runs of its current
node: the newest runs of a flow are a range probe of the first index, and
their boundaries of one node a probe of the second per run, never a walk over
their log lines. The events index is partial: log lines (nearly every event)
do not touch it; each node adds two entries. jobs.flow and created_at never
change after the insert.

`jobs.node_started_at`: set by the host at each node boundary, so that a row
says how long its node has run (`updated_at` also moves with a stop request).

Additive: `min_writer` stays at 0002.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None

BOUNDS = "kind IN ('node.started', 'node.finished')"


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('node_started_at', sa.DateTime(), nullable=True))
    op.create_index('ix_jobs_flow_created', 'jobs', ['flow', 'created_at'], unique=False)
    op.create_index(
        'ix_events_node_bounds', 'events', ['job_id', 'node', 'id'], unique=False,
        sqlite_where=sa.text(BOUNDS), postgresql_where=sa.text(BOUNDS),
    )


def downgrade() -> None:
    op.drop_index('ix_events_node_bounds', table_name='events')
    op.drop_index('ix_jobs_flow_created', table_name='jobs')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('node_started_at')
