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

Additive: `min_writer` stays at 0002.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 15:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('stop_now', sa.Boolean(), nullable=True))
        batch_op.add_column(sa.Column('stall_at', sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column('stop_overdue_at', sa.DateTime(), nullable=True))
    with op.batch_alter_table('checkpoints', schema=None) as batch_op:
        batch_op.add_column(sa.Column('partial', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('checkpoints', schema=None) as batch_op:
        batch_op.drop_column('partial')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('stop_overdue_at')
        batch_op.drop_column('stall_at')
        batch_op.drop_column('stop_now')
