"""Stop now, and boundaries inside a node.

- `jobs.stop_now`: the stop asked for interrupts the node in flight
  (`swarmkit stop --now`); the host parks the run at the boundary before it.
- `checkpoints.partial`: the partial state a node handed to a boundary of its
  own (`ctx.boundary`, a command agent's parked exit) when a stop landed
  there; it belongs to the checkpoint the node started from, and the node
  gets it back on resume.

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
    with op.batch_alter_table('checkpoints', schema=None) as batch_op:
        batch_op.add_column(sa.Column('partial', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('checkpoints', schema=None) as batch_op:
        batch_op.drop_column('partial')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('stop_now')
