"""Running one agent: a shell command in its own process group, or a Python callable."""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import os
import signal
import sys
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import AgentFailed
from .flow import Agent, resolve_call

SUPERVISOR = str(Path(__file__).with_name("agent_supervisor.py"))
# A longer line is cut: one runaway line must not become a 1 GB event.
MAX_LINE = 64 * 1024
USAGE_KEY = "_usage"


@dataclass
class Usage:
    tokens: int = 0
    cost: float = 0.0

    def add(self, tokens: int | float = 0, cost: float = 0.0) -> None:
        self.tokens += int(tokens or 0)
        self.cost += float(cost or 0.0)


@dataclass
class AgentContext:
    """What a `call` agent receives."""

    run_id: str
    node: str
    step: int
    state: dict[str, Any]
    inputs: dict[str, Any]
    workspace: Path
    _log: Callable[[str], None]
    usage: Usage = field(default_factory=Usage)

    def log(self, line: str) -> None:
        """Add a line to the run's log (an event, readable from any machine)."""
        for part in str(line).splitlines() or [""]:
            self._log(part)

    def add_usage(self, tokens: int = 0, cost: float = 0.0) -> None:
        self.usage.add(tokens, cost)


_CALLS: dict[tuple[str, str | None], Callable[..., Any]] = {}


def _resolved(spec: str, flow_path: str | None) -> Callable[..., Any]:
    """Import an agent's callable once per process, not once per node."""
    key = (spec, flow_path)
    fn = _CALLS.get(key)
    if fn is None:
        fn = _CALLS[key] = resolve_call(spec, flow_path)
    return fn


def _take_usage(output: dict[str, Any], usage: Usage, node: str) -> dict[str, Any]:
    raw = output.pop(USAGE_KEY, None)
    if raw is None:
        return output
    if not isinstance(raw, dict):
        raise AgentFailed(f"{node}: {USAGE_KEY} must be an object like {{\"tokens\": 10, \"cost\": 0.01}}")
    try:
        usage.add(raw.get("tokens", 0), raw.get("cost", 0.0))
    except (TypeError, ValueError):
        raise AgentFailed(f"{node}: {USAGE_KEY} holds a value that is not a number: {raw!r}") from None
    return output


async def run_call(
    agent: Agent,
    ctx: AgentContext,
    flow_path: str | None,
) -> tuple[dict[str, Any], Usage]:
    fn = _resolved(agent.call or "", flow_path)
    try:
        if inspect.iscoroutinefunction(fn):
            result = await fn(ctx)
        else:
            # A sync agent runs in a thread; a cancel abandons the thread (Python
            # cannot interrupt it) but the run still ends at once.
            result = await asyncio.to_thread(fn, ctx)
            if inspect.isawaitable(result):
                result = await result
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        raise AgentFailed(f"{agent.name}: {tb}") from exc
    if result is None:
        return {}, ctx.usage
    if not isinstance(result, dict):
        raise AgentFailed(f"{agent.name}: returned {type(result).__name__}, expected a dict or None")
    result = dict(result)
    return _take_usage(result, ctx.usage, agent.name), ctx.usage


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return False


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


async def _wait_group(proc: asyncio.subprocess.Process, pgid: int, timeout: float) -> bool:
    """Wait until the shell has exited and nothing is left in its group."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        if proc.returncode is None:
            try:
                await asyncio.wait_for(asyncio.shield(proc.wait()), timeout=0.05)
            except TimeoutError:
                pass
        if proc.returncode is not None and not _group_alive(pgid):
            return True
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(0.05)


async def interrupt_group(proc: asyncio.subprocess.Process, pgid: int, interrupt_grace: float, term_grace: float, note: Callable[[str], None]) -> None:
    """SIGINT the whole group, then SIGTERM, then SIGKILL, each after a grace period."""
    for sig, grace, name in ((signal.SIGINT, interrupt_grace, "SIGINT"), (signal.SIGTERM, term_grace, "SIGTERM")):
        if not _signal_group(pgid, sig):
            break
        note(f"sent {name} to process group {pgid}")
        if await _wait_group(proc, pgid, grace):
            return
    if _group_alive(pgid):
        _signal_group(pgid, signal.SIGKILL)
        note(f"sent SIGKILL to process group {pgid}")
    await _wait_group(proc, pgid, 5.0)


async def _pump(stream: asyncio.StreamReader, emit: Callable[[str], None]) -> None:
    buf = b""
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            break
        buf += chunk
        while True:
            nl = buf.find(b"\n")
            if nl < 0:
                break
            line, buf = buf[:nl], buf[nl + 1 :]
            emit(_decode(line))
        if len(buf) > MAX_LINE:
            emit(_decode(buf[:MAX_LINE]) + " …[line cut]")
            buf = b""
    if buf:
        emit(_decode(buf))


def _decode(raw: bytes) -> str:
    return raw.rstrip(b"\r").decode("utf-8", errors="replace")


async def run_command(
    agent: Agent,
    *,
    run_id: str,
    step: int,
    state: dict[str, Any],
    workspace: Path,
    emit: Callable[[str], None],
    note: Callable[[str], None],
    interrupt_grace: float,
    term_grace: float,
) -> tuple[dict[str, Any], Usage]:
    usage = Usage()
    with tempfile.TemporaryDirectory(prefix="swarmkit-") as io_dir:
        state_path = Path(io_dir) / "state.json"
        output_path = Path(io_dir) / "output.json"
        state_path.write_text(json.dumps(state, sort_keys=True), encoding="utf-8")
        env = dict(os.environ)
        env.update(
            SWARMKIT_RUN_ID=run_id,
            SWARMKIT_NODE=agent.name,
            SWARMKIT_STEP=str(step),
            SWARMKIT_STATE=str(state_path),
            SWARMKIT_OUTPUT=str(output_path),
            SWARMKIT_WORKSPACE=str(workspace),
            # $PPID is the agent's supervisor; this names the hosting process.
            SWARMKIT_HOST_PID=str(os.getpid()),
        )
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-S", SUPERVISOR, "/bin/sh", "-c", agent.command or "",
                cwd=str(workspace),
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                # Its own process group, led by the supervisor, so a cancel
                # reaches every child, the operator's Ctrl-C reaches none of
                # them directly, and a host's death takes them all down.
                start_new_session=True,
            )
        except OSError as exc:
            raise AgentFailed(f"{agent.name}: cannot start /bin/sh: {exc.strerror or exc}") from exc
        pgid = proc.pid
        pumps = [asyncio.create_task(_pump(proc.stdout, emit)), asyncio.create_task(_pump(proc.stderr, emit))]  # type: ignore[arg-type]
        try:
            code = await proc.wait()
            await asyncio.gather(*pumps)
        except asyncio.CancelledError:
            await interrupt_group(proc, pgid, interrupt_grace, term_grace, note)
            for p in pumps:
                p.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            raise
        if code != 0:
            if code < 0:
                raise AgentFailed(f"{agent.name}: command killed by signal {-code}")
            raise AgentFailed(f"{agent.name}: command exited with status {code}")
        if not output_path.exists():
            return {}, usage
        try:
            output = json.loads(output_path.read_text(encoding="utf-8") or "{}")
        except (ValueError, UnicodeDecodeError) as exc:
            raise AgentFailed(f"{agent.name}: $SWARMKIT_OUTPUT is not valid JSON ({exc})") from None
        if not isinstance(output, dict):
            raise AgentFailed(f"{agent.name}: $SWARMKIT_OUTPUT must hold a JSON object, not {type(output).__name__}")
        return _take_usage(output, usage, agent.name), usage


def make_context(run_id: str, agent: Agent, step: int, state: dict[str, Any], workspace: Path, emit: Callable[[str], None]) -> AgentContext:
    return AgentContext(
        run_id=run_id,
        node=agent.name,
        step=step,
        state=copy.deepcopy(state),
        inputs=copy.deepcopy(state.get("inputs", {})),
        workspace=workspace,
        _log=emit,
    )
