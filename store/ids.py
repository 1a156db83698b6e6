"""Fresh ids for rows: a run's, a worker's, a notification's, a claim's.

128 random bits written as `uuid.uuid4().hex` writes them (the version and
variant bits set), without importing uuid: it loads platform, and a one-shot
verb that writes a notification (`swarmkit stop` of a queued run) needs none of it.
"""

from __future__ import annotations

import os


def new_id() -> str:
    """A random (version 4) UUID's 32 hex digits."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return raw.hex()
