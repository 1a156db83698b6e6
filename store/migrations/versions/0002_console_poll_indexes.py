"""Indexes for the poll paths: lost-run checks and the console's live-row refresh.

`(status, heartbeat_at)` answers "is any running row past its lease?" (every
worker's and console's `mark_lost` check) with a range probe instead of a scan
of every running row; `(status, last_event_at)` answers "which running rows
showed work since the last poll?" the same way. Measured in bench/console_poll.py.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 10:40:00
"""

from alembic import op


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index('ix_jobs_status_heartbeat', ['status', 'heartbeat_at'], unique=False)
        batch_op.create_index('ix_jobs_status_last_event', ['status', 'last_event_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_status_last_event')
        batch_op.drop_index('ix_jobs_status_heartbeat')
