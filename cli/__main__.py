"""`python -m swarmkit.cli`: the same `swarmkit` the entry point runs."""

from swarmkit.cli import run

run()
