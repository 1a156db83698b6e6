"""`python -m swarmkit.runtime.cli`: the same `swarmkit` the entry point runs."""

import sys

from swarmkit.runtime.cli import main

sys.exit(main())
