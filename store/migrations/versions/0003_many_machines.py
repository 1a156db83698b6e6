"""Many machines, one store: the store's own facts, host-free leases, portable flows, owned workspaces.

- `swarmkit_meta`: facts about the store itself. `min_writer` is the oldest
  schema revision whose code may still write this store (a change that only
  adds columns and tables keeps it where it was, so code one release older
  keeps working); `store_id` names this store, so a process notices a store
  replaced under it.
- `jobs.heartbeat_mono`, `workers.heartbeat_mono`: on SQLite (one machine)
  leases are kept on that machine's monotonic clock, which no NTP step moves.
- `workers.clock_offset_s`: how far a worker's wall clock is from the store's,
  for the warnings of the console and `swarmkit status`.
- `jobs.flow_modules`: the sources of the modules a flow's callables name,
  when they are not installed packages: a worker on another machine runs them.
- `workspaces.host`: the host that made a workspace; only it can delete it.

Additive: `min_writer` stays at 0002.

Revision ID: 0003
Revises: 0002
"""

import uuid

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    meta = op.create_table(
        'swarmkit_meta',
        sa.Column('key', sa.String(64), primary_key=True),
        sa.Column('value', sa.Text(), nullable=False),
    )
    op.bulk_insert(meta, [{'key': 'min_writer', 'value': '0002'}, {'key': 'store_id', 'value': uuid.uuid4().hex}])
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('heartbeat_mono', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('flow_modules', sa.Text(), nullable=True))
    with op.batch_alter_table('workers', schema=None) as batch_op:
        batch_op.add_column(sa.Column('heartbeat_mono', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('clock_offset_s', sa.Float(), nullable=True))
    with op.batch_alter_table('workspaces', schema=None) as batch_op:
        batch_op.add_column(sa.Column('host', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('workspaces', schema=None) as batch_op:
        batch_op.drop_column('host')
    with op.batch_alter_table('workers', schema=None) as batch_op:
        batch_op.drop_column('clock_offset_s')
        batch_op.drop_column('heartbeat_mono')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('flow_modules')
        batch_op.drop_column('heartbeat_mono')
    op.drop_table('swarmkit_meta')
