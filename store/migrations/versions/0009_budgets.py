"""A run's budget, its conditional and positional stops, the time its agents ran, and why it was stopped (issue 32).

`budget` (JSON text, NULL: none) holds the limits a run may carry: max_cost,
max_tokens, max_wall (seconds), max_nodes, and whether a reached limit
interrupts the node in flight (hard). `ran_s` is the time its agents ran,
summed over every host that ran them (the time queued, parked or at a gate
does not count): what max_wall is held to. `stop_when` (JSON text, NULL: none)
holds the stops an operator set for later (`stop --when 'cost>2.5'`, `--after
NODE`, `--before NODE`): its host asks each at the first boundary where it
holds, and takes it off. `stop_reason` says why a stop nobody typed at that
moment was asked for ("cost 5.02 of max_cost 5.00"); a resume clears it with
the stop.

A host older than this revision neither holds a run to its budget nor adds
to `ran_s`: it hosts the run as before. Additive: `min_writer` stays at 0002.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('budget', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('ran_s', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('stop_reason', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('stop_when', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('stop_when')
        batch_op.drop_column('stop_reason')
        batch_op.drop_column('ran_s')
        batch_op.drop_column('budget')
