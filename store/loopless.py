"""A verb's coroutine run with no event loop until it needs one.

A one-shot verb on a SQLite file (`swarmkit status`, `stop`, `resume`, `approve`, `cancel`)
runs on a lite store (lite.py): every await in it finishes at once, on this thread,
and nothing in it waits on the event loop. Importing asyncio (with ssl, socket,
concurrent.futures and inspect) and making a loop cost such a verb about a quarter
of its start (issue 31: one-shot verbs at most 3x `python -c pass`). `drive` runs
the coroutine by hand; a path that does need a loop (the full store, a sleep
between retries, a watch) awaits `loop_needed()` first, and asyncio carries the
same coroutine on from there. Outside `drive`, `loop_needed()` is a no-op.
"""

from __future__ import annotations

import types
from contextvars import ContextVar

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine
    from typing import Any, TypeVar

    T = TypeVar("T")

# True while `drive` runs a coroutine by hand on this thread: no loop is running. A context
# variable, not a global: another thread of the same process may be running a loop meanwhile.
_by_hand: ContextVar[bool] = ContextVar("swarmkit_by_hand", default=False)


class _Handoff:
    """What a coroutine run by hand yields to `drive` when it needs a loop."""

    def __await__(self):
        yield self


async def loop_needed() -> None:
    """Before anything that waits on the event loop: under `drive`, the coroutine moves onto one here."""
    if _by_hand.get():
        await _Handoff()


async def off_loop(fn: Callable[..., T], *args: Any) -> T:
    """`await asyncio.to_thread(fn, *args)` on a loop (slow file system work keeps it free); run by hand,
    with no loop to keep free, `fn(*args)` at once."""
    if _by_hand.get():
        return fn(*args)
    import asyncio  # late: as in drive

    return await asyncio.to_thread(fn, *args)


@types.coroutine
def _carry_on(coro: Coroutine[Any, Any, Any]):
    # Resumes `coro` where it awaited the handoff; what it awaits from here on is the loop's.
    return (yield from coro)


def drive(coro: Coroutine[Any, Any, Any], on_loop: Callable[[], None] | None = None) -> Any:
    """`asyncio.run(coro)`, with no loop (and no asyncio) unless the coroutine asks for one; `on_loop()`
    first when it does (what the loop's paths need set up, such as logging)."""
    token = _by_hand.set(True)
    try:
        yielded = coro.send(None)
    except StopIteration as done:
        return done.value
    finally:
        _by_hand.reset(token)
    if not isinstance(yielded, _Handoff):
        # Only a loop's future could be yielded, and there is no loop: a path that forgot `loop_needed()`.
        coro.close()
        raise RuntimeError(f"a coroutine run with no event loop waited on {yielded!r}: await loop_needed() first")
    if on_loop is not None:
        on_loop()
    import asyncio  # late: only a verb that needs the loop pays for it

    async def rest() -> Any:
        return await _carry_on(coro)

    return asyncio.run(rest())
