"""What a console is pointed at and how it behaves; made by `make_app`."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from swarmkit.store.clock import store_now


@dataclass(frozen=True)
class ConsoleConfig:
    store: str | None
    workspace: str | os.PathLike | None
    read_only: bool = False
    clock: Callable[[], datetime] = store_now
    poll_interval: float = 1.0
    lease_s: float = 15.0
    # Off only for a frozen clock (snapshots): marking lost compares the
    # store's heartbeats with the real time.
    detect_lost: bool = True
