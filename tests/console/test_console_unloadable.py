"""A queued run that workers cannot load: the detail pane says which worker passed it over and why."""

from __future__ import annotations

from console_helpers import add_events, first_poll, submit, until

from swarmkit.console.app import make_app
from swarmkit.runtime.control import UNLOADABLE
from swarmkit.widgets.run_detail import RunDetail, detail_text
from tests.conftest import write_flow


async def test_the_detail_of_a_queued_run_names_the_workers_that_cannot_load_it(sqlite_url, workspace, fast_env):
    flow = write_flow(workspace, "waits", 'name = "waits"\n[[agents]]\nname = "a"\ncommand = "true"\n')
    (run,) = await submit(sqlite_url, workspace, flow)
    app = make_app(sqlite_url, workspace, poll_interval=0.1)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await first_poll(pilot)
        detail = screen.query_one(RunDetail)
        await until(pilot, lambda: detail.data is not None and detail.data.sections, what="the detail")
        assert "Not claimed" not in detail_text(detail.data).plain
        # Said after the detail was read: the run's row does not change, the pane still shows it.
        text = "worker 1a2b3c4d@far-host (pid 42) cannot load module 'nosuchmodule_xyz'"
        await add_events(sqlite_url, workspace, run, [text], node=None, kind=UNLOADABLE)
        shown = await until(pilot, lambda: "Not claimed" in (t := detail_text(detail.data).plain) and t, what="the unloadable note")
        assert "1a2b3c4d@far-host" in shown and "nosuchmodule_xyz" in shown
