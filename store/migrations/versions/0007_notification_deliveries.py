"""Each notification's delivery to each receiver, and dead letters.

A notifier POSTed the outbox (`notifications`, 0005) to one URL, one row at a
time, and retried for ever. `notification_deliveries` holds one row per
notification and receiver (`--notify URL` is repeatable): its state
(`pending`, `delivered`, `dead`), its attempts, when it is due (or, while an
attempt is in flight, when the attempt's claim lapses), the claim token of the
attempt in flight, what the last attempt got (status, error, a 3xx's
`Location`), and when it was delivered or went dead. A notification is marked
delivered once each of its deliveries is settled. The receiver is the URL with
any password masked.

A notifier older than this revision still delivers from `notifications` alone
(to its one URL) and marks them delivered: what it delivered, this revision's
notifiers no longer fan out. Delivery stays at least once.

Additive: `min_writer` stays at 0002.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'notification_deliveries',
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), primary_key=True, autoincrement=True),
        sa.Column('notification_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
        sa.Column('event_id', sa.String(32), nullable=False),
        sa.Column('job_id', sa.String(32), nullable=False),
        sa.Column('receiver', sa.Text(), nullable=False),
        sa.Column('state', sa.String(16), nullable=False),
        sa.Column('attempts', sa.Integer(), nullable=False),
        sa.Column('next_at', sa.DateTime(), nullable=False),
        sa.Column('claim', sa.String(32), nullable=True),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('updated_at', sa.DateTime(), nullable=False),
        sa.Column('last_status', sa.Integer(), nullable=True),
        sa.Column('last_error', sa.Text(), nullable=True),
        sa.Column('location', sa.Text(), nullable=True),
        sa.Column('delivered_at', sa.DateTime(), nullable=True),
        sa.Column('dead_at', sa.DateTime(), nullable=True),
        sa.UniqueConstraint('notification_id', 'receiver', name='uq_notification_deliveries_receiver'),
    )
    op.create_index('ix_notification_deliveries_due', 'notification_deliveries', ['state', 'receiver', 'next_at'])
    op.create_index('ix_notification_deliveries_order', 'notification_deliveries', ['job_id', 'receiver', 'notification_id'])


def downgrade() -> None:
    op.drop_index('ix_notification_deliveries_order', table_name='notification_deliveries')
    op.drop_index('ix_notification_deliveries_due', table_name='notification_deliveries')
    op.drop_table('notification_deliveries')
