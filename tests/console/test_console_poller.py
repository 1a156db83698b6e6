"""The poll: cheap change check first, only changed rows fetched, filter in SQL, ended runs bounded."""

from __future__ import annotations

from datetime import datetime, timedelta

from console_helpers import init_store, set_rows, submit
from sqlalchemy import select, update

from swarmkit.console.poller import LINGER, Poller
from swarmkit.console.store_link import StoreLink
from swarmkit.runtime import control
from swarmkit.store import Store
from swarmkit.store.clock import store_now
from swarmkit.store.models import jobs
from swarmkit.store.records import STALL_AFTER
from tests.conftest import write_flow


def quick_flow(ws, name="quick"):
    return write_flow(ws, name, f"""
        name = "{name}"
        [[agents]]
        name = "hi"
        command = "echo hi"
    """)


async def test_polls_read_only_what_changed(store_url, workspace, fast_env):
    await init_store(store_url, workspace)
    runs = await submit(store_url, workspace, quick_flow(workspace), count=4)
    # Minutes apart: after a change the poll re-reads what changed since
    # its last marker, less a clock-skew margin of seconds.
    await set_rows(store_url, workspace, {run: dict(updated_at=store_now() - timedelta(minutes=10 + i)) for i, run in enumerate(runs)})
    link = StoreLink(store_url, workspace)
    poller = Poller(link, clock=store_now, lease_s=2)
    try:
        snap = await poller.poll()
        assert snap.full and {j.id for j in snap.jobs} == set(runs)
        assert snap.counts == {"queued": 4}
        snap = await poller.poll()
        assert not snap.full and snap.fetched == 0  # nothing changed: nothing read but the marker
        store = await link.get()
        await control.stop(store, runs[1], actor="tester@ci")
        snap = await poller.poll()
        assert not snap.full and snap.fetched == 2  # the stopped run, and the newest (inside the margin)
        assert {j.id: j.status for j in snap.jobs}[runs[1]] == "stopped"
        assert snap.counts == {"queued": 3, "stopped": 1}
        # A new run is seen without a full read.
        (new,) = await submit(store_url, workspace, quick_flow(workspace))
        snap = await poller.poll()
        assert not snap.full and snap.jobs[0].id == new  # newest active run first
    finally:
        await link.close()


async def test_a_poll_says_which_runs_changed_and_hands_back_the_same_records_for_the_others(store_url, workspace, fast_env):
    """What lets the console apply a poll at the cost of what changed: the records of runs that did
    not change are the very objects of the poll before, a full read included."""
    await init_store(store_url, workspace)
    runs = await submit(store_url, workspace, quick_flow(workspace), count=3)
    link = StoreLink(store_url, workspace)
    poller = Poller(link, clock=store_now, lease_s=2)
    try:
        first = await poller.poll()
        assert set(first.changed) == set(runs)
        poller.focus = runs[0]  # the detail pane's run is read again at every poll
        again = await poller.poll()
        assert again.changed == {} and again.jobs is first.jobs, "read again, the same: nothing changed"
        assert again.runs_version == first.runs_version
        store = await link.get()
        await control.stop(store, runs[1], actor="tester@ci")
        stopped = await poller.poll()
        by_id = {j.id: j for j in stopped.jobs}
        assert stopped.changed == {runs[1]: by_id[runs[1]]} and stopped.runs_version == first.runs_version, "the same runs, one changed"
        assert by_id[runs[1]].status == "stopped"
        assert all(by_id[j.id] is j for j in first.jobs if j.id != runs[1])
        assert [j.id for j in stopped.jobs] == [j.id for j in first.jobs], "the changed run kept its place"
        poller.forget()  # the next poll reads everything
        full = await poller.poll()
        assert full.full and full.changed == {}
        assert all(a is b for a, b in zip(full.jobs, stopped.jobs, strict=True)), "a full read keeps the records that did not change"
        (new,) = await submit(store_url, workspace, quick_flow(workspace))
        joined = await poller.poll()
        assert joined.runs_version != full.runs_version and set(joined.changed) == {new}, "a run joined"
    finally:
        await link.close()


async def test_the_check_of_every_held_run_comes_less_often_past_recheck_runs(store_url, workspace, fast_env, monkeypatch):
    """The check of every held run's update (PollPlan.recheck) reads every held key: past RECHECK_RUNS held
    runs its period grows in proportion, so that its cost per second stays that of RECHECK_RUNS runs."""
    import time

    from swarmkit.console import poller as poller_module

    await init_store(store_url, workspace)
    await submit(store_url, workspace, quick_flow(workspace), count=4)
    link = StoreLink(store_url, workspace)
    poller = Poller(link, clock=store_now, lease_s=60)
    try:
        await poller.poll()
        assert len(poller.held) == 4
        every = poller_module.FULL_EVERY_S
        poller._last_full = time.monotonic() - every - 1
        assert poller._plan(None).recheck, "4 runs held, at most RECHECK_RUNS: checked every FULL_EVERY_S"
        monkeypatch.setattr(poller_module, "RECHECK_RUNS", 2)
        assert not poller._plan(None).recheck, "twice RECHECK_RUNS held: not yet"
        poller._last_full = time.monotonic() - 2 * every - 1
        assert poller._plan(None).recheck, "twice RECHECK_RUNS held: every 2 x FULL_EVERY_S"
    finally:
        await link.close()


async def test_a_run_only_the_counts_catch_shows_at_once_and_past_recheck_runs_when_they_are_next_counted(store_url, workspace, fast_env, monkeypatch):
    """A run added by a writer whose clock lags ours does not move the newest update: only the marker's
    counts catch it. Up to RECHECK_RUNS held they are read every poll; past it every COUNT_EVERY_S (a
    range as long as the active runs: issue 31), and between them the run is not shown yet."""
    import time

    from swarmkit.console import poller as poller_module

    await init_store(store_url, workspace)
    await submit(store_url, workspace, quick_flow(workspace), count=4)
    link = StoreLink(store_url, workspace)
    poller = Poller(link, clock=store_now, lease_s=60)

    async def lagging_run() -> str:
        (run,) = await submit(store_url, workspace, quick_flow(workspace))
        await set_rows(store_url, workspace, {run: dict(updated_at=store_now() - timedelta(hours=1))})
        return run

    try:
        await poller.poll()
        first = await lagging_run()
        snap = await poller.poll()
        assert first in {j.id for j in snap.jobs}, "5 runs held, at most RECHECK_RUNS: counted every poll"
        monkeypatch.setattr(poller_module, "RECHECK_RUNS", 2)
        second = await lagging_run()
        poller._counted_at = time.monotonic()  # counted just now (opening stores above may take seconds under load)
        assert not poller._plan(None).count
        snap = await poller.poll()
        assert second not in {j.id for j in snap.jobs}, "past RECHECK_RUNS, counted a moment ago: not yet"
        poller._counted_at = time.monotonic() - poller_module.COUNT_EVERY_S - 1
        snap = await poller.poll()
        assert second in {j.id for j in snap.jobs}, "counted again: shown"
    finally:
        await link.close()


async def test_the_poll_looks_for_lost_runs_a_part_of_the_lease_apart(store_url, workspace, fast_env):
    """As a worker does (Settings.look_every_s): not at every poll, yet within the lease and a third."""
    import time

    await init_store(store_url, workspace)
    (run,) = await submit(store_url, workspace, quick_flow(workspace))
    link = StoreLink(store_url, workspace)
    poller = Poller(link, clock=store_now, lease_s=60)
    try:
        await poller.poll()
        await poller.poll()
        # Its host fell silent two lease lengths ago (a row of a host that gave no monotonic time: by the wall clock).
        past = store_now() - timedelta(seconds=120)
        await set_rows(store_url, workspace, {run: dict(status="running", epoch=1, host="gone", heartbeat_at=past, heartbeat_mono=None, started_at=past, updated_at=store_now())})
        poller._lease_looked_at = time.monotonic()  # looked just now (opening a store above may take seconds under load)
        snap = await poller.poll()
        assert {j.id: j.status for j in snap.jobs}[run] == "running", "looked a moment ago: not yet"
        poller._lease_looked_at = time.monotonic() - 60 / 3
        snap = await poller.poll()
        assert {j.id: j.status for j in snap.jobs}[run] == "lost"
    finally:
        await link.close()


async def test_shown_statuses_are_counted_and_running_rows_refreshed(store_url, workspace, fast_env):
    await init_store(store_url, workspace)
    a, b, c = await submit(store_url, workspace, quick_flow(workspace), count=3)
    now = store_now()
    await set_rows(store_url, workspace, {
        run: dict(status="running", epoch=1, heartbeat_at=now, last_event_at=now - timedelta(minutes=5) if run == c else now, updated_at=now, **extra)
        for run, extra in ((a, dict(stop_requested_at=now, stop_requested_by="x")), (b, dict(cancel_requested_at=now, cancel_requested_by="y")), (c, {}))
    })
    link = StoreLink(store_url, workspace)
    poller = Poller(link, clock=store_now, lease_s=60)
    try:
        snap = await poller.poll()
        assert snap.counts == {"stopping": 1, "cancelling": 1, "stalled": 1}
        # A heartbeat or a log line does not touch updated_at; the running row is still re-read.
        later = store_now()
        store = await link.get()
        async with store.write() as conn:
            await conn.execute(update(jobs).where(jobs.c.id == c).values(last_event_at=later))
        snap = await poller.poll()
        assert {j.id: j for j in snap.jobs}[c].last_event_at == later.replace(microsecond=later.microsecond)
        assert snap.counts == {"stopping": 1, "cancelling": 1, "running": 1}
    finally:
        await link.close()


async def test_only_the_runs_on_screen_are_read_for_their_signs_of_work_and_the_header_still_counts_every_run(store_url, workspace, fast_env, monkeypatch):
    """Issue 31: a poll reads the running rows' ticking values of the runs on screen only; a run that comes
    into view is read whole at once; the header's stalled count and the running runs' cost come from the store."""
    from swarmkit.console import poller as poller_module

    monkeypatch.setattr(poller_module, "COST_EVERY_S", 0.0)  # the cost read at every poll, not every few seconds
    await init_store(store_url, workspace)
    a, b, c = await submit(store_url, workspace, quick_flow(workspace), count=3)
    now = store_now()
    # c is quiet: its host set no stall_at and its last sign of work is 5 minutes old.
    await set_rows(store_url, workspace, {
        run: dict(status="running", epoch=1, heartbeat_at=now, updated_at=now, cost=1.0,
                  last_event_at=now - timedelta(minutes=5) if run == c else now, stall_at=None if run == c else now + STALL_AFTER)
        for run in (a, b, c)
    })
    link = StoreLink(store_url, workspace)
    poller = Poller(link, clock=store_now, lease_s=60)
    try:
        snap = await poller.poll()
        assert snap.counts == {"running": 2, "stalled": 1} and snap.running_cost == 3.0
        assert poller.set_window([a]) is False, "a was read whole by the full read"
        store = await link.get()

        async def tick(run: str, cost: float) -> datetime:
            at = store_now()
            async with store.write() as conn:  # a host's heartbeat with usage: it moves no updated_at
                await conn.execute(update(jobs).where(jobs.c.id == run).values(last_event_at=at, stall_at=at + STALL_AFTER, cost=cost))
            return at

        await tick(a, 1.5)
        b_at = await tick(b, 2.0)
        c_at = await tick(c, 4.0)  # off screen, c works again: it no longer shows stalled
        snap = await poller.poll()
        held = {j.id: j for j in snap.jobs}
        assert held[a].cost == 1.5, "on screen: read"
        assert held[b].cost == 1.0 and held[c].cost == 1.0, "off screen: not read"
        assert set(snap.changed) == {a}
        assert snap.counts == {"running": 3}, "the stalled count is the store's, not the stale rows'"
        assert snap.running_cost == 7.5, "the running runs' cost together is the store's"
        # b scrolls into view: read whole at once, whatever moved it.
        assert poller.set_window([a, b]) is True
        snap = await poller.poll()
        held = {j.id: j for j in snap.jobs}
        assert held[b].cost == 2.0 and held[b].last_event_at == b_at and held[c].cost == 1.0
        assert poller.set_window([a, b]) is False, "both read fresh"
        # Sorted on a column the signs of work move: every running run is read.
        assert poller.set_window(None) is True
        await tick(c, 5.0)
        snap = await poller.poll()
        assert {j.id: j for j in snap.jobs}[c].cost == 5.0 and c_at < {j.id: j for j in snap.jobs}[c].last_event_at
        # A run that ends takes its cost out of the running runs' sum: the poll says it moved.
        async with store.write() as conn:
            await conn.execute(update(jobs).where(jobs.c.id == b).values(status="completed", updated_at=store_now(), ended_at=store_now(), cost=2.5))
        snap = await poller.poll()
        assert snap.running_cost == 6.5 and snap.cost_moved == 2.5
        # Read every few seconds: meanwhile a poll says it did not read it, and keeps what moved for the next.
        monkeypatch.setattr(poller_module, "COST_EVERY_S", 3600.0)
        async with store.write() as conn:
            await conn.execute(update(jobs).where(jobs.c.id == c).values(status="stopped", updated_at=store_now(), cost=5.5))
        snap = await poller.poll()
        assert snap.running_cost is None and snap.cost_moved == 0.0
        monkeypatch.setattr(poller_module, "COST_EVERY_S", 0.0)
        snap = await poller.poll()
        assert snap.running_cost == 1.5 and snap.cost_moved == 5.5
    finally:
        await link.close()


async def test_a_run_that_scrolls_into_view_shows_what_it_did_off_screen(sqlite_url, workspace, fast_env):
    """The console reads the signs of work of the runs on screen only: a run off screen ticks unread,
    and shows its fresh usage as soon as it is scrolled to; sorted by usage, every run is read."""
    from console_helpers import first_poll, until

    from swarmkit.console.app import make_app
    from swarmkit.widgets.run_table import RunTable

    await init_store(sqlite_url, workspace)
    runs = await submit(sqlite_url, workspace, quick_flow(workspace), count=40)
    now = store_now()
    store = await Store.open(sqlite_url, workspace)
    try:
        async with store.write() as conn:
            await conn.execute(update(jobs).where(jobs.c.id.in_(runs)).values(
                status="running", epoch=1, heartbeat_at=now, updated_at=now, last_event_at=now, stall_at=now + STALL_AFTER, tokens=100))
    finally:
        await store.close()
    oldest = runs[0]  # newest first: the oldest run is the table's last row, off screen
    app = make_app(sqlite_url, workspace, poll_interval=0.1, lease_s=3600)
    async with app.run_test(size=(150, 30)) as pilot:
        screen = await first_poll(pilot)
        table = screen.query_one(RunTable)
        await until(pilot, lambda: table.row_count == 40 and oldest not in table.visible_keys(), what="40 rows, the oldest off screen")
        polls = screen.polls
        store = await screen.link.get()
        async with store.write() as conn:  # its host reports usage: no updated_at moves
            await conn.execute(update(jobs).where(jobs.c.id == oldest).values(last_event_at=store_now(), tokens=98_765))
        await until(pilot, lambda: screen.polls >= polls + 5, what="five polls after the usage came")
        assert screen.jobs[oldest].tokens == 100, "off screen, the run's usage is not read"
        await pilot.press("end")
        await until(pilot, lambda: "98,765" in table.get_cell(oldest, "usage").plain, what="the oldest run's fresh usage once in view")
        # Sorted by usage, the order needs every running run's: a run off screen is read again.
        await pilot.press("home")
        newest = runs[-1]
        await until(pilot, lambda: oldest not in table.visible_keys(), what="the oldest run off screen again")
        await pilot.press("8")  # USAGE, the 8th column
        async with store.write() as conn:
            await conn.execute(update(jobs).where(jobs.c.id == runs[1]).values(last_event_at=store_now(), tokens=99_999))
        await until(pilot, lambda: screen.jobs[runs[1]].tokens == 99_999, what="a run off screen read while the table sorts by usage")
        assert newest in screen.jobs


def test_the_header_tally_and_the_lost_run_check_read_index_ranges_not_every_running_row(sqlite_url, workspace):
    """SQLite's plans for what every poll asks of all running runs: the tally (stalled runs, the running runs'
    cost) as ranges of ix_jobs_status_stall, the sum from the index alone; the lost-run check (and the rows a
    judge then marks) as ranges of (status, heartbeat_mono) or (status, heartbeat_at). Their cost follows the
    stalled or lapsed runs, not the running ones (issue 31)."""
    import asyncio
    import sqlite3

    from swarmkit.store.compiled_sqlite import STATEMENTS

    async def make() -> None:
        store = await Store.open(sqlite_url, workspace)
        await store.close()

    asyncio.run(make())
    conn = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))

    def plan(name: str) -> list[str]:
        sql, defaults = STATEMENTS[name][:2]
        params = {"b_now": "2026-01-01", "b_cutoff": "2026-01-01", "b_mono_cutoff": 1.0, "b_mono_now": 2.0, "b_mono_future": 3.0}
        return [row[-1] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, {**defaults, **params})]

    try:
        tally = [p for p in plan("STALLED_COUNT") + plan("RUNNING_COST") if " jobs" in p]
        lease = [p for p in plan("LEASE_EXPIRED_SQLITE") if " jobs" in p]
        stale = [p for p in plan("STALE_RUNNING_SQLITE") if " jobs" in p]
    finally:
        conn.close()
    assert len(tally) == 3 and all(p.startswith("SEARCH jobs USING") and "ix_jobs_status_stall" in p for p in tally), tally
    assert any("COVERING INDEX ix_jobs_status_stall (status=?)" in p for p in tally), tally
    assert sum("stall_at<?" in p or "stall_at=?" in p for p in tally) == 2, tally
    for found in (lease, stale):
        assert len(found) == 3 and all(p.startswith("SEARCH jobs USING") and ("heartbeat_mono" in p or "heartbeat_at" in p) for p in found), found


async def test_filters_and_counts_speak_the_shown_statuses(store_url, workspace, fast_env):
    """Filtering for stopping, cancelling or stalled finds those runs; under any filter the counts bar keeps
    the shown statuses (two stopping runs are "stopping 2", never "running 2")."""
    await init_store(store_url, workspace)
    a1, a2, b, c, d = await submit(store_url, workspace, quick_flow(workspace), count=5)
    now = store_now()
    await set_rows(store_url, workspace, {
        run: dict(status="running", epoch=1, heartbeat_at=now, last_event_at=now - timedelta(minutes=5) if run == c else now, updated_at=now, **extra)
        for run, extra in ((a1, dict(stop_requested_at=now, stop_requested_by="x")), (a2, dict(stop_requested_at=now, stop_requested_by="x")),
                           (b, dict(cancel_requested_at=now, cancel_requested_by="y")), (c, {}), (d, {}))
    })
    link = StoreLink(store_url, workspace)
    poller = Poller(link, clock=store_now, lease_s=60)
    shown = {"stopping": 2, "cancelling": 1, "stalled": 1, "running": 1}
    try:
        for text, wanted in (("stopping", {a1, a2}), ("STOPP", {a1, a2}), ("cancelling", {b}), ("stalled", {c}), ("running", {d}), ("quick", {a1, a2, b, c, d})):
            snap = await poller.poll(text_filter=text)
            assert {j.id for j in snap.jobs} == wanted, text
            assert all(j.display_status(snap.at) in (text.lower(), "stopping", "cancelling", "stalled", "running") for j in snap.jobs)
            assert snap.counts == shown, (text, snap.counts)
        snap = await poller.poll()
        assert snap.counts == shown
        # The SQL form of the shown status is the record's rule, row by row.
        from swarmkit.store.queries import shown_status

        store = await link.get()
        async with store.read() as conn:
            rows = dict((await conn.execute(select(jobs.c.id, shown_status(store_now() - STALL_AFTER)))).all())
        assert rows == {j.id: j.display_status(store_now()) for j in snap.jobs}
    finally:
        await link.close()


async def test_filter_in_sql_and_ended_runs_bounded(store_url, workspace, fast_env):
    await init_store(store_url, workspace)
    alpha = await submit(store_url, workspace, quick_flow(workspace, "alpha"), count=2)
    beta = await submit(store_url, workspace, quick_flow(workspace, "beta_100%"), count=3)
    store = await Store.open(store_url, workspace)
    try:
        for run in beta:
            await control.cancel(store, run, actor="tester@ci")
    finally:
        await store.close()
    link = StoreLink(store_url, workspace)
    try:
        poller = Poller(link, clock=store_now, lease_s=60, ended_bound=2)
        snap = await poller.poll(text_filter="ALPHA")
        assert {j.id for j in snap.jobs} == set(alpha)
        snap = await poller.poll(text_filter="_100%")  # LIKE wildcards are the caller's text, not patterns
        assert {j.id for j in snap.jobs} <= set(beta) and len(snap.jobs) == 2  # ended runs are bounded
        snap = await poller.poll()
        assert len(snap.jobs) == 4  # 2 active + the 2 most recent ended
        # Ended long ago (for the clock): only shown when asked for.
        later = Poller(link, clock=lambda: store_now() + LINGER + timedelta(minutes=1), lease_s=10**6)
        assert {j.id for j in (await later.poll()).jobs} == set(alpha)
        shown = (await later.poll(show_ended=True)).jobs
        assert [j.id for j in shown][:2] != [] and len(shown) == 2 + 3
        assert [j.status for j in shown][-3:] == ["cancelled"] * 3
    finally:
        await link.close()


async def test_the_header_counts_active_runs_and_those_ended_lately_never_the_history(store_url, workspace, fast_env):
    await init_store(store_url, workspace)
    old, recent, waiting = await submit(store_url, workspace, quick_flow(workspace), count=3)
    now = store_now()
    # Ended last week, and a minute ago: only the second is in view, and counted.
    await set_rows(store_url, workspace, {run: dict(status="completed", ended_at=now - ago, updated_at=now - ago) for run, ago in ((old, timedelta(days=7)), (recent, timedelta(minutes=1)))})
    link = StoreLink(store_url, workspace)
    poller = Poller(link, clock=store_now, lease_s=2)
    try:
        snap = await poller.poll()
        assert snap.full and snap.counts == {"queued": 1, "completed": 1}
        assert {j.id for j in snap.jobs} == {recent, waiting}
    finally:
        await link.close()


def test_the_counts_read_index_ranges_not_every_run(sqlite_url, workspace):
    """SQLite's own plan for the header's counts: a search of an index, never a scan of the table or of an index."""
    import asyncio

    from swarmkit.store.statements import ACTIVE_COUNTS, ENDED_SINCE

    async def plans() -> list[str]:
        store = await Store.open(sqlite_url, workspace)
        try:
            async with store.read() as conn:
                out = []
                for stmt in (ACTIVE_COUNTS, ENDED_SINCE):
                    sql = str(stmt.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
                    out += [row[-1] for row in (await conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql)).all()]
                return out
        finally:
            await store.close()

    found = asyncio.run(plans())
    assert found and all(p.startswith("SEARCH jobs USING") for p in found), found


async def test_the_first_poll_of_a_big_store_shows_the_newest_runs_and_the_next_reads_the_rest(store_url, workspace, fast_env):
    from sqlalchemy import insert

    from swarmkit.console.poller import PEEK

    await init_store(store_url, workspace)
    now = store_now()
    rows = [dict(id=f"{i:032x}", flow="bulk", flow_source="", inputs="{}", status="queued", created_at=now - timedelta(seconds=i),
                 updated_at=now - timedelta(seconds=i), cancel_keep=False, epoch=0, step=0, steps=1, tokens=0, cost=0.0) for i in range(PEEK + 50)]
    store = await Store.open(store_url, workspace)
    try:
        async with store.write() as conn:
            await conn.execute(insert(jobs), rows)
    finally:
        await store.close()
    link = StoreLink(store_url, workspace)
    poller = Poller(link, clock=store_now, lease_s=2)
    try:
        first = await poller.poll()
        assert first.partial and [j.id for j in first.jobs] == [r["id"] for r in rows[:PEEK]]  # the newest, in order
        assert first.counts == {"queued": PEEK + 50}  # the counts are whole at once
        second = await poller.poll()
        assert second.full and not second.partial and len(second.jobs) == PEEK + 50
    finally:
        await link.close()


def test_poll_schedule_backs_off_while_failing_and_polls_again_at_once_when_asked():
    from swarmkit.console.poll_schedule import PollSchedule

    armed: list[float] = []
    polls: list[int] = []

    class Timer:
        def stop(self) -> None:
            armed.append(-1.0)  # a timer stopped before it fired

    def set_timer(delay, callback):
        armed.append(delay)
        return Timer()

    sched = PollSchedule(0.5, set_timer, lambda: polls.append(1))
    for _ in range(6):
        sched.started()
        sched.ended()
        sched.finished(ok=False)
    assert armed == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]  # doubling, capped at 5 s
    assert sched.failures == 6 and sched.retry_delay == 5.0
    sched.started()
    sched.now()  # asked while a poll is in flight: no second poll, but the next comes at once
    assert polls == []
    sched.ended()
    sched.finished(ok=True)
    assert armed[-1] == 0.01 and sched.failures == 0 and sched.retry_delay is None
    sched.now()  # asked between polls: the armed timer goes, the poll runs now
    assert armed[-1] == -1.0 and polls == [1]
    sched.close()
    sched.started()
    sched.ended()
    sched.finished(ok=True)
    sched.now()
    assert polls == [1] and armed[-1] == -1.0  # closed: nothing is armed or run
