"""The lease of the host that holds a run, on its row; and each worker's on its own.

A run is lost when its host stopped heart-beating past the lease. Each
process read the lease from its own SWARMKIT_LEASE: a console or a
`swarmkit status` whose lease was shorter than a worker's marked that
worker's healthy runs lost while their agents still worked (a host fences
itself by its own lease, not by the judge's). The host now says its lease
where it claims the run (`jobs.lease_s`) and where it registers
(`workers.lease_s`), and whoever judges waits for the longer of that and its
own (`store.liveness.stale`). NULL (a row no host of this revision claimed):
the judge's own. A host older than this revision that claims a run leaves
the lease of the run's previous host on it: a judge then waits for the
longer of that and its own, never less than before this revision.

Additive: `min_writer` stays at 0002.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('lease_s', sa.Float(), nullable=True))
    with op.batch_alter_table('workers', schema=None) as batch_op:
        batch_op.add_column(sa.Column('lease_s', sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('workers', schema=None) as batch_op:
        batch_op.drop_column('lease_s')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('lease_s')
