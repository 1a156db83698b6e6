"""The run table's columns, defined once (runtime/run_columns.py) for `swarmkit status` and the console;
a stopping run's ETA from its flow's past runs; the burn rate."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import insert

from swarmkit.console.burn_meter import BurnMeter, SpendMeter
from swarmkit.console.run_views import run_row
from swarmkit.runtime.run_columns import COLUMNS, RunView, burn_rate, burn_text, cell_width, cells, runs_table, stop_eta, usual
from swarmkit.store import Store
from swarmkit.store.models import events, jobs
from swarmkit.store.queries import node_durations
from swarmkit.store.records import JobRecord
from swarmkit.widgets import run_row as row_module

NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)


def record(**kw) -> JobRecord:
    base = {f.name: None for f in dataclasses.fields(JobRecord)}
    base.update(
        id="a1b2c3d4" + "0" * 24, flow="release", flow_source="", inputs="{}", status="running", created_at=NOW - timedelta(minutes=30),
        updated_at=NOW - timedelta(minutes=5), cancel_keep=False, epoch=1, step=1, steps=3, current_node="build", tokens=0, cost=0.0,
        started_at=NOW - timedelta(minutes=20), node_started_at=NOW - timedelta(seconds=50), last_event_at=NOW - timedelta(seconds=2),
    )
    base.update(kw)
    return JobRecord(**base)


def test_the_console_widget_shows_the_shared_columns_in_their_order():
    assert [(key, header) for key, header, _ in row_module.COLUMNS] == [(c.key if c.key != "short_id" else "id", c.header) for c in COLUMNS]
    assert [field for _, _, field in row_module.COLUMNS] == [c.key for c in COLUMNS]
    # And the console's row holds exactly what the shared cells say.
    job = record(stop_requested_at=NOW - timedelta(seconds=12), stop_requested_by="ana@ops")
    row = run_row(job, NOW)
    assert row.shown() == tuple(cells(RunView(job, NOW)).values())


def test_in_state_counts_from_the_stop_request_in_the_cli_as_in_the_console():
    """Before: the CLI's IN STATE was updated_at (5m here), the console's the stop request (12s)."""
    job = record(stop_requested_at=NOW - timedelta(seconds=12), stop_requested_by="ana@ops")
    header, line = runs_table([job], NOW).splitlines()
    at = header.index("IN STATE")
    assert line[at:].split()[0] == "12s"
    assert run_row(job, NOW).in_state == "12s"


def test_columns_align_in_terminal_cells_with_cjk_and_emoji_names():
    rows = [record(id=f"{i:08x}" + "0" * 24, flow=name) for i, name in enumerate(["release", "発表の準備", "deploy 🚀 now"])]
    lines = runs_table(rows, NOW).splitlines()
    # Where STATUS starts, counted in cells, is the same on every line.
    starts = set()
    for line in lines:
        i = line.index("STATUS") if "STATUS" in line else line.index("running")
        starts.add(cell_width(line[:i]))
    assert len(starts) == 1, lines


def test_a_stopping_row_says_how_long_its_node_ran_and_when_it_should_stop():
    job = record(stop_requested_at=NOW - timedelta(seconds=12), stop_requested_by="ana@ops")
    assert stop_eta(job, NOW, 90.0) == "50s in, stops in ~40s"
    assert stop_eta(job, NOW, 30.0) == "50s in, usually ~30s: any moment"
    assert stop_eta(job, NOW, None) == "50s in"
    assert "stops in ~40s" in cells(RunView(job, NOW, usual_s=90.0))["node"]
    assert "stops in" not in cells(RunView(record(), NOW, usual_s=90.0))["node"], "only a stopping row"
    assert usual([10, 50, 30, 1000]) == 40 and usual([]) is None


def test_the_burn_rate_is_the_cost_per_minute_over_the_last_minute_watched():
    meter = BurnMeter()
    t0 = NOW
    meter.observe([record(cost=1.0)], t0)
    # Not watched for 10 s yet: the average since the run started ($1 over 20 minutes).
    assert burn_rate(record(cost=1.0), t0, meter.since(record().id, t0)) == 1.0 / 20
    meter.observe([record(cost=1.5)], t0 + timedelta(seconds=30))
    meter.observe([record(cost=2.0)], t0 + timedelta(seconds=60))
    later = t0 + timedelta(seconds=60)
    assert burn_rate(record(cost=2.0), later, meter.since(record().id, later)) == 1.0  # $1 in the last minute
    # Nothing spent for the next minute: the rate falls to zero.
    idle = t0 + timedelta(seconds=121)
    meter.observe([record(cost=2.0)], idle)
    assert burn_rate(record(cost=2.0), idle, meter.since(record().id, idle)) == 0.0
    meter.observe([record(status="stopped", cost=2.0)], idle)
    assert meter.since(record().id, idle) is None and burn_rate(record(status="stopped"), idle) is None
    # Off screen, a run ticks unread: back in view it is measured from then, never across the time unwatched.
    meter.observe([record(cost=2.0)], idle)
    meter.forget([record().id])
    back = idle + timedelta(minutes=10)
    meter.observe([record(cost=12.0)], back)
    assert meter.since(record().id, back) == (back, 12.0)
    assert [burn_text(r) for r in (None, 0, 0.0042, 0.123, 1.26, 42.4)] == ["-", "$0/m", "$0.004/m", "$0.12/m", "$1.3/m", "$42/m"]


def test_the_header_burn_is_what_every_run_spent_in_the_last_minute_though_runs_end_and_begin():
    """SpendMeter sees only the running runs' cost together and what joined or left it (poller.py's
    Snapshot.cost_moved): its rate must be the money every run spent within the window, watched."""
    import random

    rng = random.Random(7)
    meter = SpendMeter()
    runs = {f"{i:032x}": ("running" if i % 4 else "queued", float(i % 3)) for i in range(40)}
    spent: list[tuple[datetime, float]] = []  # (time, what every run spent since the first poll): the truth
    total = 0.0
    at = NOW
    for tick in range(200):
        at += timedelta(seconds=rng.choice([1, 1, 2, 5]))
        moved = 0.0
        for key in rng.sample(sorted(runs), 6):
            status, cost = runs[key]
            if status == "running" and rng.random() < 0.1:
                runs[key] = ("stopped", cost)
                moved += cost  # it left with its cost
            elif status != "running" and rng.random() < 0.3:
                runs[key] = ("running", cost)
                moved -= cost  # it joined with its cost before
            elif status == "running":
                step = rng.choice([0.0, 0.01, 0.5])
                runs[key] = (status, cost + step)
                total += step if tick else 0.0
        running = [cost for status, cost in runs.values() if status == "running"]
        meter.observe(at, sum(running), moved if tick else 0.0, len(running))
        spent.append((at, total))
        start = at - timedelta(seconds=60)
        base_at, base = next(((t, s) for t, s in reversed(spent) if t <= start), spent[0])
        since = max(base_at, start)
        if at - since >= timedelta(seconds=10):
            assert meter.total(at, lambda: None) == pytest.approx((total - base) / ((at - since).total_seconds() / 60)), tick
        else:
            assert meter.total(at, lambda: -1.0) == -1.0, "watched under 10 s: the rates since each run started"
    assert any(status == "stopped" for status, _ in runs.values()), "some runs stopped on the way"
    meter.observe(at, 0.0, sum(cost for status, cost in runs.values() if status == "running"), 0)
    assert meter.total(at, lambda: None) is None, "none runs: no burn"


def test_a_nodes_usual_duration_is_read_from_the_flows_past_runs(store_url: str, workspace: Path):
    async def go() -> tuple[list[float], list[float], list[float]]:
        store = await Store.open(store_url, workspace)
        try:
            async with store.write() as conn:
                for i, (flow, took, restarted) in enumerate([("release", 40, False), ("release", 60, True), ("release", 50, False), ("other", 999, False)]):
                    jid = f"{i:032x}"
                    at = NOW - timedelta(hours=10 - i)
                    await conn.execute(insert(jobs).values(
                        id=jid, flow=flow, flow_source="", inputs="{}", status="completed", created_at=at, updated_at=at, cancel_keep=False,
                        epoch=1, step=2, steps=2, tokens=0, cost=0.0,
                    ))
                    rows = [dict(job_id=jid, at=at, kind="node.started", node="build", step=0, text="1/2 build")]
                    if restarted:  # stopped now mid-node, resumed an hour later: counts from the last start
                        rows.append(dict(job_id=jid, at=at + timedelta(hours=1), kind="node.started", node="build", step=0, text="1/2 build"))
                        at += timedelta(hours=1)
                    rows += [dict(job_id=jid, at=at + timedelta(seconds=took // 2), kind="log", node="build", step=0, text="half way")]
                    rows += [dict(job_id=jid, at=at + timedelta(seconds=took), kind="node.finished", node="build", step=0, text="1/2 build done")]
                    rows += [dict(job_id=jid, at=at + timedelta(seconds=took + 1), kind="node.started", node="ship", step=1, text="2/2 ship")]
                    await conn.execute(insert(events), rows)
            async with store.read() as conn:
                release = await conn.run_sync(node_durations, "release", "build")
                without_newest = await conn.run_sync(node_durations, "release", "build", f"{2:032x}")
                ship = await conn.run_sync(node_durations, "release", "ship")
            return release, without_newest, ship
        finally:
            await store.close()

    release, without_newest, ship = asyncio.run(go())
    assert release == [50.0, 60.0, 40.0]  # newest first; the other flow's 999 s is not among them
    assert without_newest == [60.0, 40.0]
    assert ship == []  # started, never finished
    assert usual(release) == 50.0


def test_the_runs_a_stop_was_asked_of_are_held_indexed_newest_first():
    """Their ETA's node durations are read for them; found without walking every active run (1,000 running
    rows each poll, bench/console_render.py), and a run cancelled after its stop is one of them still."""
    from swarmkit.console.held_runs import HeldRuns

    def run(n: int, **kw) -> JobRecord:
        return record(id=f"{n:032x}", created_at=NOW - timedelta(minutes=60 - n), **kw)

    asked = dict(stop_requested_at=NOW - timedelta(seconds=5), stop_requested_by="ana")
    cancelled = dict(cancel_requested_at=NOW - timedelta(seconds=3), cancel_requested_by="bo")
    held = HeldRuns(ended_bound=200, linger=timedelta(minutes=10))
    held.reset([run(1, **asked), run(2), run(3, **asked, **cancelled), run(4, **cancelled), run(5, status="queued"), run(6, **asked)])
    assert [j.id for j in held.stop_asked()] == [f"{n:032x}" for n in (6, 3, 1)]
    held.put(run(6, **asked, **cancelled))  # cancelled after its stop: still asked to stop
    held.put(run(1, status="stopped"))  # reached its boundary
    assert [j.id for j in held.stop_asked()] == [f"{n:032x}" for n in (6, 3)]
