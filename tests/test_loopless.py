"""A verb's coroutine run with no event loop until it asks for one (store/loopless.py)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from swarmkit.store.loopless import drive, loop_needed


def test_a_coroutine_that_never_waits_runs_with_no_loop():
    seen = []

    async def verb() -> int:
        try:
            asyncio.get_running_loop()
            seen.append("a loop")
        except RuntimeError:
            seen.append("no loop")
        return 7

    assert drive(verb()) == 7
    assert seen == ["no loop"]


def test_a_coroutine_that_asks_for_the_loop_goes_on_on_one_with_what_it_had():
    calls = []

    async def inner() -> str:
        return "inner"

    async def verb() -> tuple[str, str, bool]:
        before = await inner()  # awaits that finish at once: still by hand
        await loop_needed()
        await asyncio.sleep(0.01)  # the loop's from here
        after = await asyncio.to_thread(lambda: "thread")
        await loop_needed()  # on the loop already: nothing happens
        return before, after, asyncio.get_running_loop().is_running()

    assert drive(verb(), on_loop=lambda: calls.append("on_loop")) == ("inner", "thread", True)
    assert calls == ["on_loop"]


def test_an_exception_after_the_handoff_reaches_the_caller():
    async def verb() -> None:
        await loop_needed()
        await asyncio.sleep(0)
        raise LookupError("after the handoff")

    with pytest.raises(LookupError, match="after the handoff"):
        drive(verb())


def test_a_path_that_waits_on_the_loop_without_asking_is_named():
    async def verb() -> None:
        await asyncio.sleep(0.01)  # no loop_needed() first

    with pytest.raises(RuntimeError, match="no running event loop"):
        drive(verb())

    async def bare_yield() -> None:
        await asyncio.sleep(0)  # a bare yield to a loop that is not there

    with pytest.raises(RuntimeError, match="await loop_needed"):
        drive(bare_yield())


def test_another_threads_loop_is_not_handed_off_while_a_verb_runs_by_hand():
    """The flag is this thread's (a context variable): a loop on another thread awaiting loop_needed() goes on."""
    entered, release, results = threading.Event(), threading.Event(), []

    def other_thread() -> None:
        async def work() -> str:
            entered.wait(10)
            await loop_needed()
            release.set()
            return "other loop fine"

        results.append(asyncio.run(work()))

    async def verb() -> str:
        entered.set()
        assert release.wait(10), "the other thread's loop_needed() did not return"
        return "by hand"

    t = threading.Thread(target=other_thread)
    t.start()
    assert drive(verb()) == "by hand"
    t.join(10)
    assert results == ["other loop fine"]
