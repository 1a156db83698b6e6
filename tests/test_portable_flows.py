"""Portable flows: a run carries the modules its callables name, so any worker can host it.

A worker that cannot load what a run needs leaves it queued and says so; a
callable that fails to load at run time faults the run (workspace kept), never
fails it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from .conftest import ROOT, Cli, wait_for, write_flow
from .helpers import checkpoints, events, job, workspaces


def stop_worker(proc: subprocess.Popen) -> tuple[str, str]:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.communicate()


def with_path(*folders: Path) -> dict[str, str]:
    """A child environment whose PYTHONPATH also holds `folders` (as a shared path would)."""
    return {"PYTHONPATH": os.pathsep.join([str(ROOT), *map(str, folders)])}


def final_state(cli: Cli, run_id: str) -> dict:
    return json.loads(checkpoints(cli.store_url, cli.workspace, run_id)[-1].state)


def status_of(cli: Cli, run_id: str) -> str:
    return job(cli.store_url, cli.workspace, run_id).status


def test_modules_beside_the_flow_run_on_a_worker_after_the_flow_folder_is_gone(cli: Cli, tmp_path: Path):
    flows = tmp_path / "flows"
    (flows / "tools").mkdir(parents=True)
    (flows / "helpers.py").write_text("def shout(s):\n    return s.upper() + '!'\n")
    (flows / "agents.py").write_text(
        "import helpers\n"
        "async def greet(ctx):\n"
        "    from helpers import shout\n"
        "    ctx.log('greeting ' + shout('a'))\n"
        "    return {'greet': helpers.shout('hello')}\n"
        "def count(ctx):\n"
        "    return {'count': helpers.shout(str(len(ctx.state)))}\n"
    )
    (flows / "tools" / "__init__.py").write_text("")
    (flows / "tools" / "util.py").write_text("SUFFIX = '-util'\n")
    (flows / "tools" / "work.py").write_text("from .util import SUFFIX\ndef run(ctx):\n    return {'tools': 'ran' + SUFFIX}\n")
    (flows / "unrelated.py").write_text("raise SystemExit('never imported, never stored')\n")
    flow = write_flow(
        flows, "portable",
        'name = "portable"\n'
        '[[agents]]\nname = "greet"\ncall = "agents:greet"\n'
        '[[agents]]\nname = "count"\ncall = "agents:count"\n'
        '[[agents]]\nname = "tools"\ncall = "tools.work:run"\n',
    )
    run_id = cli.run("run", "--detach", str(flow), check=True).stdout.strip()
    # The submitting machine's folder is gone: only the store has the agents now.
    shutil.rmtree(flows)
    worker = cli.start("worker")
    try:
        wait_for(lambda: status_of(cli, run_id) not in ("queued", "running"), timeout=60, what="the run to end")
    finally:
        out, errs = stop_worker(worker)
    row = job(cli.store_url, cli.workspace, run_id)
    assert row.status == "completed", (row.status, row.error, errs[-2000:])
    state = final_state(cli, run_id)
    assert (state["greet"], state["count"], state["tools"]) == ("HELLO!", "2!", "ran-util")
    assert any(e.kind == "log" and e.text == "greeting A!" for e in events(cli.store_url, cli.workspace, run_id))
    # What was named and what that imports from beside the flow; not the rest of the folder.
    assert sorted(json.loads(row.flow_modules)) == ["agents", "helpers", "tools.__init__", "tools.util", "tools.work"]


def test_one_worker_hosts_two_versions_of_a_module_side_by_side(cli: Cli, tmp_path: Path):
    ids = []
    for version in ("one", "two"):
        folder = tmp_path / version
        folder.mkdir()
        (folder / "shared_name_helpers.py").write_text(f"VERSION = {version!r}\n")
        (folder / "shared_name_agents.py").write_text(
            "import asyncio\nimport shared_name_helpers\n"
            "async def which(ctx):\n    await asyncio.sleep(0.3)\n    return {'version': shared_name_helpers.VERSION}\n"
        )
        flow = write_flow(folder, "v", 'name = "v"\n[[agents]]\nname = "which"\ncall = "shared_name_agents:which"\n')
        ids.append(cli.run("run", "--detach", str(flow), check=True).stdout.strip())
        shutil.rmtree(folder)
    worker = cli.start("worker", "--concurrency", "2")
    try:
        wait_for(lambda: all(status_of(cli, i) not in ("queued", "running") for i in ids), timeout=60, what="both runs to end")
    finally:
        stop_worker(worker)
    assert [status_of(cli, i) for i in ids] == ["completed", "completed"]
    assert [final_state(cli, i)["version"] for i in ids] == ["one", "two"]
    assert len({job(cli.store_url, cli.workspace, i).pid for i in ids}) == 1, "one process hosted both"


def test_a_worker_that_cannot_load_a_run_leaves_it_queued_and_says_why(cli: Cli, tmp_path: Path):
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "nosuchmodule_xyz.py").write_text("def fn(ctx):\n    return {'from': 'the shared path'}\n")
    flow = write_flow(tmp_path, "needs", 'name = "needs"\n[[agents]]\nname = "first"\ncommand = "true"\n[[agents]]\nname = "use"\ncall = "nosuchmodule_xyz:fn"\n')
    # The submitter has it on a path of its own; the first worker has not.
    run_id = cli.run("run", "--detach", str(flow), env=with_path(shared), check=True).stdout.strip()
    lacking = cli.start("worker")
    try:
        banner = lacking.stdout.readline()
        worker_id = banner.split()[2]  # `<time> worker <id> on <host> ...`

        def told():
            return [e for e in events(cli.store_url, cli.workspace, run_id) if e.kind == "run.unloadable"]

        (event,) = wait_for(told, timeout=30, what="the run.unloadable event")
        assert f"worker {worker_id}@" in event.text and "nosuchmodule_xyz" in event.text, event.text
        # Many polls (0.1 s apart): still queued, and said once. Not a wait for a condition: what is
        # tested is that nothing more happens in this window.
        time.sleep(1.5)
        assert status_of(cli, run_id) == "queued"
        assert len(told()) == 1
        logs = cli.run("logs", run_id[:8], check=True).stdout
        assert "run.unloadable" in logs and worker_id in logs and "nosuchmodule_xyz" in logs

        # Hosting it here by hand is refused the same way, before anything changes.
        assert cli.run("stop", run_id[:8], check=True).returncode == 0
        refused = cli.run("run", "--resume", run_id[:8])
        assert refused.returncode == 1 and "nosuchmodule_xyz" in refused.stderr, refused.stdout + refused.stderr
        assert status_of(cli, run_id) == "stopped"
        assert cli.run("resume", run_id[:8], check=True).returncode == 0

        able = cli.start("worker", env=with_path(shared))
        try:
            wait_for(lambda: status_of(cli, run_id) not in ("queued", "running"), timeout=60, what="the able worker to host it")
        finally:
            stop_worker(able)
    finally:
        stop_worker(lacking)
    row = job(cli.store_url, cli.workspace, run_id)
    assert row.status == "completed", (row.status, row.error)
    assert final_state(cli, run_id)["from"] == "the shared path"
    assert row.pid == able.pid
    assert json.loads(row.flow_modules) == {}, "found on sys.path at submit: not stored"


def test_a_worker_hosts_a_run_it_could_not_load_once_the_module_is_installed_beside_it(cli: Cli, tmp_path: Path):
    """What the unloadable event tells the operator to do works on the worker that said it: the module put
    on its path later, it hosts the run. A worker knows a flow's callables once per content (each claim
    checks every candidate, runtime/flow_modules.py `_loading`), but asks what is installed each time."""
    later = tmp_path / "later"
    later.mkdir()
    flow = write_flow(tmp_path, "needs", 'name = "needs"\n[[agents]]\nname = "use"\ncall = "installed_later_xyz:fn"\n')
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "installed_later_xyz.py").write_text("def fn(ctx):\n    return {'from': 'installed later'}\n")
    run_id = cli.run("run", "--detach", str(flow), env=with_path(shared), check=True).stdout.strip()
    worker = cli.start("worker", env=with_path(later))
    try:
        wait_for(lambda: [e for e in events(cli.store_url, cli.workspace, run_id) if e.kind == "run.unloadable"], timeout=30, what="the run.unloadable event")
        shutil.copy(shared / "installed_later_xyz.py", later / "installed_later_xyz.py")
        wait_for(lambda: status_of(cli, run_id) == "completed", timeout=60, what="the same worker to host it once installed")
    finally:
        stop_worker(worker)
    assert job(cli.store_url, cli.workspace, run_id).pid == worker.pid
    assert final_state(cli, run_id)["from"] == "installed later"


def test_a_callable_that_cannot_be_loaded_at_run_time_faults_the_run_and_keeps_its_workspace(cli: Cli, tmp_path: Path):
    flows, submit_only = tmp_path / "flows", tmp_path / "submit_only"
    flows.mkdir()
    submit_only.mkdir()
    (submit_only / "only_at_submit_dep.py").write_text("X = 1\n")
    (flows / "needs_dep.py").write_text("import only_at_submit_dep\ndef go(ctx):\n    return {'x': only_at_submit_dep.X}\n")
    flow = write_flow(flows, "dep", 'name = "dep"\n[[agents]]\nname = "make"\ncommand = "echo work > made.txt"\n[[agents]]\nname = "go"\ncall = "needs_dep:go"\n')
    run_id = cli.run("run", "--detach", str(flow), env=with_path(submit_only), check=True).stdout.strip()
    worker = cli.start("worker")
    try:
        wait_for(lambda: status_of(cli, run_id) not in ("queued", "running"), timeout=60, what="the run to end")
    finally:
        stop_worker(worker)
    row = job(cli.store_url, cli.workspace, run_id)
    assert row.status == "faulted", (row.status, row.error)
    assert "only_at_submit_dep" in (row.error or "") and row.current_node == "go", row.error
    [ws] = workspaces(cli.store_url, cli.workspace, run_id)
    assert ws.state == "kept" and (Path(ws.path) / "made.txt").read_text() == "work\n"


def test_modules_too_big_to_store_refuse_the_submit(cli: Cli, tmp_path: Path):
    (tmp_path / "huge_agent.py").write_text("BLOB = " + repr("x" * (1 << 20)) + "\ndef go(ctx):\n    return {}\n")
    flow = write_flow(tmp_path, "huge", 'name = "huge"\n[[agents]]\nname = "go"\ncall = "huge_agent:go"\n')
    res = cli.run("run", "--detach", str(flow))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "huge_agent" in res.stderr and "1,048,576 bytes" in res.stderr and "Shipping agents to workers" in res.stderr, res.stderr
