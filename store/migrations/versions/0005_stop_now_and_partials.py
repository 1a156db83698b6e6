"""Stop now, boundaries inside a node, stall thresholds and overdue stops.

- `jobs.stop_now`: the stop asked for interrupts the node in flight
  (`swarmkit stop --now`); the host parks the run at the boundary before it.
- `checkpoints.partial`: the partial state a node handed to a boundary of its
  own (`ctx.boundary`, a command agent's parked exit) when a stop landed
  there; it belongs to the checkpoint the node started from, and the node
  gets it back on resume.
- `jobs.stall_at`: when the run shows stalled if no sign of work comes first
  (its host sets it at each sign of work, from the flow's `stall_after` or
  SWARMKIT_STALL_AFTER); NULL: the readers' default after the last sign.
- `jobs.stop_overdue_at`: when a stop not yet taken shows "stop overdue"
  (a few times its node's usual duration after the request).
- `notifications`: the outbox of notifications (a run deferred, stopped,
  faulted, lost, failed or completed), written with the transition.

Additive: `min_writer` stays at 0002.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'notifications',
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), primary_key=True, autoincrement=True),
        sa.Column('event_id', sa.String(32), nullable=False, unique=True),
        sa.Column('job_id', sa.String(32), nullable=False),
        sa.Column('kind', sa.String(32), nullable=False),
        sa.Column('body', sa.Text(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('next_at', sa.DateTime(), nullable=False),
        sa.Column('attempts', sa.Integer(), nullable=False),
        sa.Column('delivered_at', sa.DateTime(), nullable=True),
        sa.Column('last_error', sa.Text(), nullable=True),
    )
    op.create_index('ix_notifications_due', 'notifications', ['delivered_at', 'next_at'])
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('stop_now', sa.Boolean(), nullable=True))
        batch_op.add_column(sa.Column('stall_at', sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column('stop_overdue_at', sa.DateTime(), nullable=True))
    with op.batch_alter_table('checkpoints', schema=None) as batch_op:
        batch_op.add_column(sa.Column('partial', sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_index('ix_notifications_due', table_name='notifications')
    op.drop_table('notifications')
    with op.batch_alter_table('checkpoints', schema=None) as batch_op:
        batch_op.drop_column('partial')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('stop_overdue_at')
        batch_op.drop_column('stall_at')
        batch_op.drop_column('stop_now')
