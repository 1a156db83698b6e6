"""`swarmkit serve`: the HTTP API (api/), hosting runs like a worker unless --no-host."""

from __future__ import annotations

# No other verb imports this module: no other loads FastAPI and uvicorn.
from swarmkit.api.run import cmd_serve as serve

from .store_access import with_store


async def cmd_serve(args) -> int:
    return await serve(args, with_store)
