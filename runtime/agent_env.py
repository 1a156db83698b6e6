"""What an agent's process inherits: a small safe base, what its flow lists, and Swarmkit's agent variables.

An agent is code the flow's author chose, and whatever it prints lands in
events that every machine sharing the store can read. So it does not get the
host's environment: not the store's URL (`SWARMKIT_STORE`, with its
password), not `PG*` or `DATABASE_URL`, not Swarmkit's own settings. A flow
names what to pass through with `env = ["OPENAI_API_KEY", "MY_*"]` (top level
for every agent, or per agent); a name ending in `*` passes every variable
that begins with what precedes it. The withheld names are withheld even when
listed: `parse_flow` refuses a flow that lists one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

# What a shell and most programs need to behave as they do in a terminal.
SAFE_BASE = frozenset({"PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ", "TMPDIR", "TERM", "SHELL"})
SAFE_PREFIXES = ("LC_",)
# A sync `call` agent runs in the host's interpreter: it must start as the host did.
PYTHON_VARS = frozenset({"PYTHONPATH", "PYTHONHOME"})
WITHHELD_NAMES = frozenset({"DATABASE_URL"})
# The agent variables (SWARMKIT_RUN_ID, ...) are set afresh by the host, never inherited.
WITHHELD_PREFIXES = ("SWARMKIT_", "PG")


def withheld(name: str) -> bool:
    """True for a variable no agent may inherit, whatever its flow lists."""
    return name in WITHHELD_NAMES or name.startswith(WITHHELD_PREFIXES)


def agent_env(workspace: Path, passed: Iterable[str] = (), *, python: bool = False, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of an agent's process, before the host adds the run's own variables."""
    source = os.environ if environ is None else environ
    names = set(SAFE_BASE | (PYTHON_VARS if python else frozenset()))
    prefixes = list(SAFE_PREFIXES)
    for entry in passed:
        if entry.endswith("*"):
            prefixes.append(entry[:-1])
        else:
            names.add(entry)
    starts = tuple(prefixes)
    env = {k: v for k, v in source.items() if (k in names or k.startswith(starts)) and not withheld(k)}
    # $PPID is the agent's supervisor; this names the hosting process.
    env["SWARMKIT_HOST_PID"] = str(os.getpid())
    env["SWARMKIT_WORKSPACE"] = str(workspace)
    return env
