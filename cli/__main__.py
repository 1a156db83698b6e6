"""`python -m swarmkit.cli`: the same `swarmkit` the entry point runs."""

import sys

from swarmkit.cli import main

sys.exit(main())
