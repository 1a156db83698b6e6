"""`swarmkit run FLOW [WORKSPACE]` and `swarmkit run --resume RUN_ID`: host a run in this process until it ends, stops or defers."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from swarmkit.runtime import control
from swarmkit.runtime.budgets import BUDGET, BudgetError, changed, raise_words
from swarmkit.runtime.echo import say
from swarmkit.runtime.echo_thread import Echo
from swarmkit.runtime.errors import FlowError, UsageError
from swarmkit.runtime.exit_code import ExitCode
from swarmkit.runtime.flow import load_flow, parse_inputs
from swarmkit.runtime.settings import default_actor
from swarmkit.runtime.steps import step_words
from swarmkit.runtime.text import plain, plain_lines
from swarmkit.store import STORE_FAULTS, StoreReplaced, masked
from swarmkit.store.queries import get_job, workspaces_for

from .store_access import err, with_store

if TYPE_CHECKING:
    from swarmkit.store import Store


async def host_foreground(store: Store, job_id: str, epoch: int, flow, *, resumed: bool) -> int:
    from swarmkit.runtime.executor import RunHost  # late: the executor hosts a run here; `run --detach` queues one and loads none

    loop = asyncio.get_running_loop()
    presses = {"n": 0}
    actor = default_actor()

    echo = Echo()

    def on_line(_job_id: str, node: str | None, line: str) -> None:
        echo(f"  {plain(node or '-', 20)} | {plain(masked(line))}")

    def on_sigint() -> None:
        presses["n"] += 1
        if presses["n"] == 1:
            loop.create_task(_say(control.stop(store, job_id, actor=actor), "\n(Ctrl-C again to cancel the run for good, keeping its workspace)"))
        elif presses["n"] == 2:
            # The console asks before it destroys a workspace; a second key
            # press cannot ask, so it keeps it and says where.
            loop.create_task(_say(control.cancel(store, job_id, actor=actor, keep=True), ""))

    async def _say(coro, extra: str) -> None:
        try:
            res = await coro
            say(plain_lines(res.message) + extra, sys.stderr)
        except Exception as exc:
            err(f"could not reach the store: {exc}")

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    except (NotImplementedError, RuntimeError):
        pass
    host = RunHost(store, job_id, epoch, flow, on_line=on_line)
    try:
        status = await host.run()
    finally:
        try:
            loop.remove_signal_handler(signal.SIGINT)
        except Exception:
            pass
        echo.flush()
    sid = job_id[:8]
    if status == "abandoned":
        try:
            async with store.read() as conn:
                now_row = await conn.run_sync(get_job, job_id)
        except STORE_FAULTS:
            now_row = None
        if now_row is not None and now_row.epoch != epoch:
            # This host was silent past its lease (frozen, cut off), and the run moved on.
            status = "fenced"
    if status == "abandoned":
        try:
            store.check_file()
        except StoreReplaced:
            err(f"{sid}: this process stopped hosting it and wrote nothing more: the store file it opened is not the one at {store.loc.display} any more.")
            return ExitCode.FAILED
        err(
            f"{sid}: the store stayed out of reach; this process stopped hosting it and wrote nothing more. "
            f"It shows lost once its lease passes; resume it with `swarmkit run --resume {sid}`."
        )
        return ExitCode.FAILED
    async with store.read() as conn:
        job = await conn.run_sync(get_job, job_id)
    if job is None:
        err(f"{sid} {status}, and its row is gone from {store.loc.display}")
        return ExitCode.FAILED
    if status == "completed":
        say(f"{sid} completed ({job.step}/{job.steps} agents; {job.tokens:,} tokens, ${job.cost:.4f}).")
        return ExitCode.OK
    if status == "stopped":
        if job.stop_reason and job.stop_requested_by == BUDGET:
            say(f"{sid} stopped by its budget ({plain(job.stop_reason)}) before {step_words(job.step, job.steps, job.current_node, None)}. {raise_words(job.stop_reason, sid, 'run --resume')}")
            return ExitCode.OK
        if job.stop_reason:  # a stop set for later
            said = f"{plain(job.stop_reason)}, set by {plain(job.stop_requested_by or '?')}"
            say(f"{sid} stopped ({said}) before {step_words(job.step, job.steps, job.current_node, None)}. Resume with `swarmkit run --resume {sid}`.")
            return ExitCode.OK
        say(f"{sid} stopped before {step_words(job.step, job.steps, job.current_node, None)}. Resume with `swarmkit run --resume {sid}`.")
        return ExitCode.OK
    if status == "deferred":
        say(f"{sid} is waiting for approval at {plain(job.pending_gate)}. Approve with `swarmkit approve {sid}`, then `swarmkit run --resume {sid}` or a worker hosts it.")
        return ExitCode.OK
    if status == "cancelled":
        async with store.read() as conn:
            kept = [w.path for w in (await conn.run_sync(workspaces_for, [job_id]))[job_id] if w.state == "kept"]
        where = f"; its workspace is kept at {', '.join(plain(p) for p in kept)}" if kept else ""
        say(f"{sid} cancelled{where}.")
        return ExitCode.FAILED
    if status == "fenced":
        err(f"{sid} is now hosted elsewhere (this process's epoch {epoch} is gone); it stopped and wrote nothing more.")
        return ExitCode.FAILED
    err(f"{sid} {status}: {plain(job.error or '')}")
    return ExitCode.FAILED


async def cmd_run(args) -> int:
    positional = list(args.args)
    if args.resume:
        # Judged before any store is opened: `run --resume ID flow.toml` is a usage
        # slip, not a workspace named flow.toml.
        if len(positional) > 1:
            raise UsageError("run --resume RUN_ID takes at most one more argument, the workspace")
        if positional and (positional[0].endswith(".toml") or _is_file(positional[0])):
            raise UsageError(f"run --resume RUN_ID takes no flow file (a resumed run keeps its flow); {positional[0]!r} is not a workspace folder")
        args.workspace = positional[0] if positional else None
        if args.input:
            raise UsageError("--input cannot be given with --resume: a resumed run keeps its inputs")
        return await with_store(args, lambda store: _resume_here(args, store))

    if not positional:
        raise UsageError("run needs a flow file: swarmkit run FLOW [--input k=v]... [WORKSPACE]")
    if len(positional) > 2:
        raise UsageError(f"run takes a flow file and optionally a workspace, not {len(positional)} arguments")
    flow_path = positional[0]
    args.workspace = positional[1] if len(positional) > 1 else None
    # Refuse a bad flow or bad inputs before any run is created.
    flow = load_flow(flow_path)
    inputs = parse_inputs(args.input)
    try:
        changed(flow.budget, args.budget, whose="the flow")
    except BudgetError as exc:
        raise UsageError(str(exc)) from None

    async def go(store: Store) -> int:
        if args.detach:
            job = await control.submit(store, flow, inputs, budget=args.budget)
            print(job.id)
            return ExitCode.OK
        job = await control.submit(store, flow, inputs, host_here=True, budget=args.budget)
        say(f"{job.short_id} running {plain(flow.name)} ({flow.steps} agents) on {store.loc.display}; Ctrl-C stops it at the next agent boundary.")
        return await host_foreground(store, job.id, job.epoch, flow, resumed=False)

    return await with_store(args, go)


def _is_file(path: str) -> bool:
    return Path(path).is_file()


async def _resume_here(args, store: Store) -> int:
    from swarmkit.runtime.executor import flow_for_job  # late: as host_foreground's RunHost (the executor, for a run hosted here)

    res, job = await control.claim_for_resume(store, args.resume, budget=args.budget)
    if job is None:
        err(res.message)
        return res.code
    say(plain_lines(res.message))
    try:
        flow = flow_for_job(job.flow_source, job.flow_path)
    except FlowError as exc:
        err(str(exc))
        return ExitCode.FAILED
    return await host_foreground(store, job.id, job.epoch, flow, resumed=True)
