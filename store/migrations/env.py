"""Alembic environment: always driven from `store.schema`, on a connection it hands over."""

from alembic import context

from swarmkit.store.models import declare_dialect_options, metadata

declare_dialect_options()

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
context.run_migrations()
