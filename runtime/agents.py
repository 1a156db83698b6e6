"""Running one agent: a shell command or a sync callable in a supervised process of its own, or an async callable here.

Everything an agent leaves behind is read without blocking the host and with a
size limit: a FIFO, a device or an oversized file at $SWARMKIT_OUTPUT faults
that run (naming the file), never the host.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import os
import stat
import sys
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .agent_context import PARKED_EXIT, AgentContext, BadUsage, StopHere, Usage
from .agent_env import agent_env
from .agent_process import LEASE_EXPIRED, AgentProcess, LineSink
from .errors import AgentFailed, AgentFault, FlowError, LeaseLapsedError, NodeParked
from .flow import Agent
from .flow_modules import RunModules
from .live_usage import USAGE_FILE, LiveUsage

USAGE_KEY = "_usage"
# Where a resumed command agent finds the partial state it parked with, in $SWARMKIT_STATE.
RESUMED_KEY = "_resumed_from"
# What an agent may leave for the host to read: its output, a sync agent's result.
MAX_OUTPUT_BYTES = 16 * 1024 * 1024

__all__ = ["AgentContext", "ProcessHooks", "Usage", "make_context", "run_call", "run_command", "run_sync_call"]


@dataclass
class ProcessHooks:
    """What the host lends an agent process: where its lines go, its graces, its lease, and a register of the live ones."""

    lines: LineSink
    note: Callable[[str], None]
    interrupt_grace: float
    term_grace: float
    fence_grace: float
    lease_deadline: Callable[[], float | None]
    register: Callable[[AgentProcess], None]
    unregister: Callable[[AgentProcess], None]
    # The node's usage so far, read by the host's heartbeat.
    live: LiveUsage = field(default_factory=LiveUsage)
    # The node's control file ($SWARMKIT_CONTROL), for the host to rewrite on each heartbeat; None when the node ends.
    control: Callable[[Path | None], None] = lambda _path: None


def _take_usage(output: dict[str, Any], usage: Usage, node: str) -> dict[str, Any]:
    raw = output.pop(USAGE_KEY, None)
    if raw is None:
        return output
    if not isinstance(raw, dict):
        raise AgentFailed(f"{node}: {USAGE_KEY} must be an object like {{\"tokens\": 10, \"cost\": 0.01}}, not {raw!r:.200}")
    try:
        usage.add(raw.get("tokens", 0), raw.get("cost", 0.0))
    except BadUsage as exc:
        raise AgentFailed(f"{node}: {USAGE_KEY} is not usage a run can have: {exc}") from None
    return output


def read_agent_file(path: Path, what: str, limit: int = MAX_OUTPUT_BYTES) -> bytes | None:
    """The bytes of a file an agent left, or None when there is none.

    Opened without blocking (a FIFO would otherwise wait for a writer for ever)
    and refused unless it is a regular file within `limit` bytes. Run it off
    the event loop: a slow file system must not stall the host either.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AgentFault(f"{what} {path} cannot be opened: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise AgentFault(f"{what} {path} is {kind}, not a regular file; the host does not read it")
        if st.st_size > limit:
            raise AgentFault(f"{what} {path} holds {st.st_size:,} bytes, more than the limit of {limit:,}")
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > limit:
                raise AgentFault(f"{what} {path} grew past the limit of {limit:,} bytes while it was read")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _json_object(raw: bytes, agent: Agent, what: str) -> dict[str, Any]:
    try:
        value = json.loads(raw.decode("utf-8") or "{}")
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise AgentFailed(f"{agent.name}: {what} is not valid JSON ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not isinstance(value, dict):
        raise AgentFailed(f"{agent.name}: {what} must hold a JSON object, not {type(value).__name__}")
    return value


async def _supervised(argv: list[str], hooks: ProcessHooks, workspace: Path, env: dict[str, str], agent: Agent, call_io: str | None = None) -> int:
    """Run `argv` under the supervisor until it exits; on cancel, escalate and re-raise.
    `call_io`: a sync call agent's io folder, which the zygote can run without an exec."""
    proc = AgentProcess(
        argv, cwd=workspace, env=env, lines=hooks.lines, note=hooks.note,
        interrupt_grace=hooks.interrupt_grace, term_grace=hooks.term_grace, fence_grace=hooks.fence_grace,
        lease_deadline=hooks.lease_deadline(), call_io=call_io,
    )
    try:
        await proc.start()
    except OSError as exc:
        raise AgentFailed(f"{agent.name}: cannot start the agent's process: {exc.strerror or exc}") from exc
    hooks.register(proc)
    try:
        code = await proc.wait()
    except asyncio.CancelledError:
        await proc.interrupt()
        raise
    finally:
        hooks.unregister(proc)
        proc.close()
    if proc.lease_expired:
        # Not the agent's doing, whatever its status says (a command parking on its own exits 75 too):
        # this host fell silent, the run shows lost and is resumed from its last boundary.
        raise LeaseLapsedError(f"{agent.name}: ended by its supervisor: this host did not renew its lease in time")
    return code


def _ended(code: int, agent: Agent) -> None:
    if code == 0:
        return
    if code == LEASE_EXPIRED:
        raise LeaseLapsedError(f"{agent.name}: ended by its supervisor: this host did not renew its lease in time")
    if code < 0:
        raise AgentFailed(f"{agent.name}: command killed by signal {-code}")
    raise AgentFailed(f"{agent.name}: command exited with status {code}")


async def run_command(
    agent: Agent,
    *,
    run_id: str,
    step: int,
    state: dict[str, Any],
    workspace: Path,
    hooks: ProcessHooks,
    resumed_from: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], Usage]:
    usage = Usage()
    with tempfile.TemporaryDirectory(prefix="swarmkit-") as io_dir:
        state_path = Path(io_dir) / "state.json"
        output_path = Path(io_dir) / "output.json"
        control_path = Path(io_dir) / "control.json"
        seen = state if resumed_from is None else {**state, RESUMED_KEY: resumed_from}
        state_path.write_text(json.dumps(seen, sort_keys=True), encoding="utf-8")
        env = agent_env(workspace, agent.env)
        env.update(
            SWARMKIT_RUN_ID=run_id,
            SWARMKIT_NODE=agent.name,
            SWARMKIT_STEP=str(step),
            SWARMKIT_STATE=str(state_path),
            SWARMKIT_OUTPUT=str(output_path),
            SWARMKIT_USAGE=str(Path(io_dir) / USAGE_FILE),
            SWARMKIT_CONTROL=str(control_path),
        )
        hooks.live.path = Path(io_dir) / USAGE_FILE
        hooks.control(control_path)
        try:
            code = await _supervised(["/bin/sh", "-c", agent.command or ""], hooks, workspace, env, agent)
        finally:
            hooks.control(None)
        if code != PARKED_EXIT:
            _ended(code, agent)
        await asyncio.to_thread(hooks.live.finish)
        if hooks.live.bad is not None:
            raise (AgentFault if hooks.live.fault else AgentFailed)(f"{agent.name}: {hooks.live.bad}")
        usage.add(hooks.live.from_file.tokens, hooks.live.from_file.cost)
        raw = await asyncio.to_thread(read_agent_file, output_path, "$SWARMKIT_OUTPUT")
        output = {} if raw is None else _json_object(raw, agent, "$SWARMKIT_OUTPUT")
        output = _take_usage(output, usage, agent.name)
        if code == PARKED_EXIT:
            raise NodeParked(agent.name, output, usage.tokens, usage.cost)
        return output, usage


async def run_sync_call(agent: Agent, ctx: AgentContext, calls: RunModules, hooks: ProcessHooks) -> tuple[dict[str, Any], Usage]:
    """A sync callable, in a child process under the supervisor (see call_child.py), forked by the zygote when it can be."""
    with tempfile.TemporaryDirectory(prefix="swarmkit-") as io_dir:
        io = Path(io_dir)
        first, look_beside = calls.child_path()
        meta = dict(
            spec=agent.call, flow_path=calls.flow_path, look_beside=look_beside, run_id=ctx.run_id, node=ctx.node, step=ctx.step,
            workspace=str(ctx.workspace), sys_path=first + [p for p in sys.path if p and p not in first],
            control=str(io / "control.json"), resumed_from=ctx.resumed_from,
        )
        (io / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
        (io / "state.json").write_text(json.dumps(ctx.state, sort_keys=True), encoding="utf-8")
        env = agent_env(ctx.workspace, agent.env, python=True)
        env.update(SWARMKIT_RUN_ID=ctx.run_id, SWARMKIT_NODE=ctx.node, SWARMKIT_STEP=str(ctx.step), SWARMKIT_CONTROL=str(io / "control.json"))
        # Live progress only: the result's usage is the node's total.
        hooks.live.path = io / USAGE_FILE
        hooks.control(io / "control.json")
        try:
            code = await _supervised([sys.executable, "-m", "swarmkit.runtime.call_child", str(io)], hooks, ctx.workspace, env, agent, call_io=str(io))
        finally:
            hooks.control(None)
        raw = await asyncio.to_thread(read_agent_file, io / "result.json", "the agent's result")
        if raw is None:
            _ended(code, agent)
            raise AgentFailed(f"{agent.name}: its process exited with status {code} and no result")
        result = _json_object(raw, agent, "the agent's result")
        if result.get("kind") == "parked":
            partial = result.get("partial")
            used = result.get("usage") or {}
            if not isinstance(partial, dict):
                raise AgentFailed(f"{agent.name}: parked with {type(partial).__name__} as its partial state, expected a dict")
            try:
                ctx.usage.add(used.get("tokens", 0), used.get("cost", 0.0))
            except BadUsage as exc:
                raise AgentFailed(f"{agent.name}: reported bad usage: {exc}") from None
            raise NodeParked(agent.name, partial, ctx.usage.tokens, ctx.usage.cost)
        if not result.get("ok"):
            error = str(result.get("error", "failed"))
            if result.get("kind") == "load":
                raise FlowError(error)
            raise AgentFailed(f"{agent.name}: {error}")
        output = result.get("output") or {}
        if not isinstance(output, dict):
            raise AgentFailed(f"{agent.name}: returned {type(output).__name__}, expected a dict or None")
        used = result.get("usage") or {}
        try:
            ctx.usage.add(used.get("tokens", 0), used.get("cost", 0.0))
        except BadUsage as exc:
            raise AgentFailed(f"{agent.name}: reported bad usage: {exc}") from None
        return _take_usage(dict(output), ctx.usage, agent.name), ctx.usage


def is_async_call(agent: Agent, calls: RunModules) -> bool:
    return inspect.iscoroutinefunction(calls.resolve(agent.call or ""))


async def run_call(agent: Agent, ctx: AgentContext, calls: RunModules) -> tuple[dict[str, Any], Usage]:
    """An async callable, here on the host's loop: a cancel cancels it (the host escalates one that ignores it)."""
    fn = calls.resolve(agent.call or "")
    try:
        result = await fn(ctx)
    except asyncio.CancelledError:
        raise
    except StopHere as here:
        raise NodeParked(agent.name, here.partial, ctx.usage.tokens, ctx.usage.cost) from None
    except BadUsage as exc:
        raise AgentFailed(f"{agent.name}: reported bad usage: {exc}") from None
    except Exception as exc:
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        raise AgentFailed(f"{agent.name}: {tb}") from exc
    if ctx.usage.bad:
        raise AgentFailed(f"{agent.name}: reported bad usage: {ctx.usage.bad}")
    if result is None:
        return {}, ctx.usage
    if not isinstance(result, dict):
        raise AgentFailed(f"{agent.name}: returned {type(result).__name__}, expected a dict or None")
    return _take_usage(dict(result), ctx.usage, agent.name), ctx.usage


def make_context(
    run_id: str, agent: Agent, step: int, state: dict[str, Any], workspace: Path, emit: Callable[[str], None], resumed_from: dict[str, Any] | None = None,
) -> AgentContext:
    return AgentContext(
        resumed_from=copy.deepcopy(resumed_from),
        run_id=run_id,
        node=agent.name,
        step=step,
        state=copy.deepcopy(state),
        inputs=copy.deepcopy(state.get("inputs", {})),
        workspace=workspace,
        _log=emit,
    )
