"""A sync `call` agent in a process of its own, under the agent supervisor.

A thread cannot be interrupted, so a sync callable runs here, where a cancel,
a dead host or a lapsed lease can end it for real (SIGINT raises
KeyboardInterrupt in it; SIGTERM and SIGKILL follow). The host passes the
state in and reads the result back as JSON files in the node's io folder:

    meta.json    {"spec", "flow_path", "look_beside", "run_id", "node", "step", "workspace", "sys_path",
                  "control", "resumed_from"}
    state.json   the run's state
    control.json rewritten by the host on each heartbeat: {"stop_requested": ...}; ctx.boundary reads it
    result.json  written here: {"ok": true, "output": {...}, "usage": {...}}
                 or {"ok": false, "kind": "load" | "raised" | "output", "error": "..."}
                 or {"ok": false, "kind": "parked", "partial": {...}, "usage": {...}} (a stop landed at ctx.boundary)
    usage.jsonl  appended here at each ctx.add_usage, for the host's heartbeat (live_usage.py);
                 result.json's usage is the node's total

Lines the agent logs (ctx.log, or print) go to stdout: they are the run's events.
Imports only the standard library and the runtime's light modules.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from swarmkit.runtime.agent_context import PARKED_EXIT, AgentContext, BadUsage, StopHere, Usage
from swarmkit.runtime.errors import FlowError
from swarmkit.runtime.flow import resolve_call
from swarmkit.runtime.live_usage import USAGE_FILE, append_usage


def _write_result(io_dir: Path, result: dict[str, Any]) -> None:
    tmp = io_dir / "result.json.tmp"
    tmp.write_text(json.dumps(result, allow_nan=False, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, io_dir / "result.json")


def _stop_requested(path: Path) -> bool:
    """What the host last wrote to the control file: a stop pending? (No file yet: no.)"""
    try:
        return bool(json.loads(path.read_text(encoding="utf-8")).get("stop_requested"))
    except (OSError, ValueError, AttributeError):
        return False


def main(io_dir_arg: str) -> int:
    io_dir = Path(io_dir_arg)
    meta = json.loads((io_dir / "meta.json").read_text(encoding="utf-8"))
    for entry in reversed(meta.get("sys_path", [])):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    state = json.loads((io_dir / "state.json").read_text(encoding="utf-8"))

    def log(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    control = meta.get("control")

    def boundary(partial: dict[str, Any]) -> None:
        if control and _stop_requested(Path(control)):
            raise StopHere(partial)

    ctx = AgentContext(
        run_id=meta["run_id"], node=meta["node"], step=meta["step"], state=state,
        inputs=dict(state.get("inputs", {})), workspace=Path(meta["workspace"]), _log=log, usage=Usage(),
        _report=lambda tokens, cost: append_usage(io_dir / USAGE_FILE, tokens, cost),
        resumed_from=meta.get("resumed_from"), _boundary=boundary,
    )
    try:
        fn = resolve_call(meta["spec"], meta.get("flow_path"), look_beside=meta.get("look_beside", True))
    except FlowError as exc:
        _write_result(io_dir, {"ok": False, "kind": "load", "error": str(exc)})
        return 3
    try:
        result = fn(ctx)
        if inspect.isawaitable(result):
            import asyncio  # late: only an async agent needs an event loop; a sync call starts without one

            async def settle(awaitable):
                return await awaitable

            result = asyncio.run(settle(result))
    except StopHere as here:
        try:
            _write_result(io_dir, {"ok": False, "kind": "parked", "partial": here.partial, "usage": {"tokens": ctx.usage.tokens, "cost": ctx.usage.cost}})
        except (TypeError, ValueError, RecursionError) as exc:
            _write_result(io_dir, {"ok": False, "kind": "output", "error": f"parked with a partial state that JSON cannot hold ({type(exc).__name__}: {str(exc)[:200]})"})
            return 1
        return PARKED_EXIT
    except BadUsage as exc:
        _write_result(io_dir, {"ok": False, "kind": "output", "error": f"reported bad usage: {exc}"})
        return 1
    except Exception as exc:
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        _write_result(io_dir, {"ok": False, "kind": "raised", "error": tb})
        return 1
    if ctx.usage.bad:
        _write_result(io_dir, {"ok": False, "kind": "output", "error": f"reported bad usage: {ctx.usage.bad}"})
        return 1
    if result is not None and not isinstance(result, dict):
        _write_result(io_dir, {"ok": False, "kind": "output", "error": f"returned {type(result).__name__}, expected a dict or None"})
        return 1
    try:
        _write_result(io_dir, {"ok": True, "output": result or {}, "usage": {"tokens": ctx.usage.tokens, "cost": ctx.usage.cost}})
    except (TypeError, ValueError, RecursionError) as exc:
        _write_result(io_dir, {"ok": False, "kind": "output", "error": f"returned state that JSON cannot hold ({type(exc).__name__}: {str(exc)[:200]})"})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
