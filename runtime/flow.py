"""Flows: a TOML file naming agents, each a shell command or a Python callable."""

from __future__ import annotations

import importlib
import re
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .agent_env import withheld
from .budgets import Budget, BudgetError, from_mapping
from .errors import FlowError
from .quantities import parse_duration as parse_duration  # where flows' durations are read; said here too for the doors
from .text import text_fault

_CALL_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_FLOW_KEYS = {"name", "description", "agents", "keep_workspaces", "env", "stall_after", "budget"}
_AGENT_KEYS = {"name", "command", "call", "approve", "description", "env", "timeout", "retries"}
# A variable's name, or a prefix of names written `PREFIX*` (see agent_env.py).
_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\*?$")
MAX_RETRIES = 100


@dataclass(frozen=True)
class Agent:
    name: str
    command: str | None = None
    call: str | None = None
    approve: bool = False
    # The variables passed through to its process: the flow's `env`, then its own.
    env: tuple[str, ...] = ()
    # Past this many seconds a try of the node is interrupted (the cancel's escalation); as written, for messages.
    timeout_s: float | None = None
    timeout: str | None = None
    # Tries after a timed-out one, with backoff, before the run ends failed.
    retries: int = 0


@dataclass(frozen=True)
class Flow:
    name: str
    agents: tuple[Agent, ...]
    source: str
    path: str | None = None
    # Completed and failed runs destroy their workspaces unless the flow keeps them.
    keep_workspaces: bool = False
    env: tuple[str, ...] = ()
    # No sign of work this long shows the run stalled (None: SWARMKIT_STALL_AFTER on its host).
    stall_after_s: float | None = None
    # The limits its runs carry unless a run sets its own (runtime/budgets.py).
    budget: Budget = Budget()

    @property
    def steps(self) -> int:
        return len(self.agents)


def _agent_lines(source: str) -> list[int]:
    """Line numbers (1-based) of each `[[agents]]` header, to point at a bad agent."""
    return [i + 1 for i, line in enumerate(source.splitlines()) if re.match(r"^\s*\[\[\s*agents\s*\]\]", line)]


def _key_line(source: str, key: str) -> int | None:
    for i, line in enumerate(source.splitlines()):
        if re.match(rf"^\s*{re.escape(key)}\s*=", line):
            return i + 1
    return None


def _table_line(source: str, table: str) -> int | None:
    for i, line in enumerate(source.splitlines()):
        if re.match(rf"^\s*\[\s*{re.escape(table)}\s*\]", line):
            return i + 1
    return None


def _env_list(value: Any, what: str) -> tuple[str, ...] | str:
    """The names of an `env` key, or what is wrong with it."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return f'{what} must be a list of variable names, like env = ["OPENAI_API_KEY", "MY_*"]'
    for name in value:
        if not _ENV_RE.match(name):
            return f"{what}: {name!r} is not a variable name (letters, digits and underscores; a trailing * passes every name that begins so)"
        if withheld(name.rstrip("*")):
            return f"{what}: {name!r} is never passed to agents (the store's URL, PG* credentials and Swarmkit's own variables stay with the host)"
    return tuple(dict.fromkeys(value))


def parse_flow(source: str, path: str | None = None) -> Flow:
    where = path or "<flow>"

    def fail(msg: str, line: int | None = None) -> FlowError:
        loc = f"{where}:{line}" if line else where
        return FlowError(f"{loc}: {msg}")

    try:
        data = tomllib.loads(source)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        line = int(m.group(1)) if m else None
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        if m:
            msg += f" (column {m.group(2)})"
        raise fail(f"not valid TOML: {msg}", line) from None

    unknown = sorted(set(data) - _FLOW_KEYS)
    if unknown:
        raise fail(f"unknown key {unknown[0]!r} (a flow has name, description, keep_workspaces, env, stall_after, [budget] and [[agents]])", _key_line(source, unknown[0]))
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise fail('a flow needs a name: add  name = "my-flow"', _key_line(source, "name"))
    if "\x00" in name or "\x00" in source:
        raise fail("a flow cannot hold a NUL character", _key_line(source, "name"))
    agents_raw = data.get("agents")
    if agents_raw is None:
        raise fail("a flow needs at least one [[agents]] table")
    if not isinstance(agents_raw, list) or not agents_raw:
        raise fail("`agents` must be an array of tables written [[agents]]", _key_line(source, "agents"))
    flow_env = _env_list(data.get("env", []), "env")
    if isinstance(flow_env, str):
        raise fail(flow_env, _key_line(source, "env"))
    lines = _agent_lines(source)
    agents: list[Agent] = []
    seen: set[str] = set()
    for i, raw in enumerate(agents_raw):
        line = lines[i] if i < len(lines) else None
        label = f"agent #{i + 1}"
        if not isinstance(raw, dict):
            raise fail(f"{label} must be a table", line)
        unknown = sorted(set(raw) - _AGENT_KEYS)
        if unknown:
            raise fail(f"{label}: unknown key {unknown[0]!r} (an agent has name, command or call, approve, env, timeout, retries)", line)
        aname = raw.get("name")
        if not isinstance(aname, str) or not aname.strip():
            raise fail(f"{label} needs a name", line)
        if "\x00" in aname:
            raise fail(f"{label}: a name cannot hold a NUL character", line)
        label = f"agent {aname!r}"
        if aname in seen:
            raise fail(f"{label} is defined twice; agent names must be unique", line)
        seen.add(aname)
        command, call = raw.get("command"), raw.get("call")
        if (command is None) == (call is None):
            raise fail(f"{label} needs exactly one of command = \"...\" or call = \"module:function\"", line)
        if command is not None and (not isinstance(command, str) or not command.strip()):
            raise fail(f"{label}: command must be a non-empty string", line)
        if call is not None and (not isinstance(call, str) or not _CALL_RE.match(call)):
            raise fail(f"{label}: call must look like \"package.module:function\", not {call!r}", line)
        approve = raw.get("approve", False)
        if not isinstance(approve, bool):
            raise fail(f"{label}: approve must be true or false", line)
        own_env = _env_list(raw.get("env", []), f"{label}: env")
        if isinstance(own_env, str):
            raise fail(own_env, line)
        timeout_raw, timeout_s = raw.get("timeout"), None
        if timeout_raw is not None:
            timeout_s = parse_duration(timeout_raw)
            if timeout_s is None:
                raise fail(f'{label}: timeout {timeout_raw!r} is not a duration; write it like "90s", "10m" or "1h30m" (more than zero)', line)
        retries = raw.get("retries", 0)
        if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES:
            raise fail(f"{label}: retries must be a whole number from 0 to {MAX_RETRIES}, not {retries!r}", line)
        if retries and timeout_s is None:
            raise fail(f'{label}: retries applies to a timed-out try; set a timeout too, like timeout = "10m"', line)
        agents.append(Agent(
            name=aname, command=command, call=call, approve=approve, env=tuple(dict.fromkeys(flow_env + own_env)),
            timeout_s=timeout_s, timeout=None if timeout_raw is None else str(timeout_raw), retries=retries,
        ))
    keep = data.get("keep_workspaces", False)
    if not isinstance(keep, bool):
        raise fail("keep_workspaces must be true or false", _key_line(source, "keep_workspaces"))
    stall_raw, stall_after_s = data.get("stall_after"), None
    if stall_raw is not None:
        stall_after_s = parse_duration(stall_raw)
        if stall_after_s is None:
            raise fail(f'stall_after {stall_raw!r} is not a duration; write it like "90s", "10m" or "1h30m" (more than zero)', _key_line(source, "stall_after"))
    budget_raw, budget = data.get("budget"), Budget()
    if budget_raw is not None:
        if not isinstance(budget_raw, dict):
            raise fail("budget must be a table written [budget], with max_cost, max_tokens, max_wall, max_nodes or hard", _key_line(source, "budget"))
        try:
            budget = from_mapping(budget_raw, "[budget]")
        except BudgetError as exc:
            raise fail(str(exc), _table_line(source, "budget")) from None
    return Flow(name=name.strip(), agents=tuple(agents), source=source, path=path, keep_workspaces=keep, env=flow_env, stall_after_s=stall_after_s, budget=budget)


def load_flow(path: str | Path, *, check_calls: bool = True) -> Flow:
    p = Path(path)
    try:
        source = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FlowError(f"{p}: no such flow file") from None
    except IsADirectoryError:
        raise FlowError(f"{p}: is a directory, not a flow file") from None
    except UnicodeDecodeError as exc:
        raise FlowError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise FlowError(f"{p}: cannot read the flow file ({exc.strerror or exc})") from None
    flow = parse_flow(source, str(p.resolve()))
    if check_calls:
        for agent in flow.agents:
            if agent.call:
                resolve_call(agent.call, flow.path)
    return flow


def resolve_call(
    spec: str,
    flow_path: str | None = None,
    *,
    look_beside: bool = True,
    import_module: Callable[[str], Any] = importlib.import_module,
) -> Callable[..., Any]:
    """Import `module:attr`, looking beside the flow file first unless told not to
    (a run's stored modules say where its callables come from: see flow_modules.py)."""
    if flow_path and look_beside:
        folder = str(Path(flow_path).parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
    module_name, _, attr = spec.partition(":")
    where = flow_path or "<flow>"
    try:
        module = import_module(module_name)
    except ImportError as exc:
        raise FlowError(f"{where}: agent callable {spec!r}: cannot import module {module_name!r} ({exc})") from None
    except Exception as exc:  # the module itself raised while importing
        raise FlowError(f"{where}: agent callable {spec!r}: importing {module_name!r} raised {type(exc).__name__}: {exc}") from None
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise FlowError(f"{where}: agent callable {spec!r}: module {module_name!r} has no {attr!r}")
    if not callable(obj):
        raise FlowError(f"{where}: agent callable {spec!r} is not callable")
    return obj


# Inputs are a run's parameters, not its data: a key is a short name, a value at most a page.
MAX_INPUT_KEY = 200
MAX_INPUT_VALUE = 16 * 1024


def parse_inputs(pairs: list[str] | None) -> dict[str, str]:
    """`--input key=value` pairs (the HTTP API's `inputs` come through here too): one rule for both doors."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise FlowError(f"--input {pair!r}: expected key=value")
        key = key.strip()
        shown = repr(key if len(key) <= 60 else key[:57] + "...")  # repr: a control or surrogate shows as its escape
        fault = text_fault(key, most=MAX_INPUT_KEY)
        if fault is not None:
            raise FlowError(f"--input {shown}: the key {fault}")
        fault = text_fault(value, most=MAX_INPUT_VALUE, lines=True)
        if fault is not None:
            raise FlowError(f"--input {shown}: the value {fault}")
        if key in out:
            raise FlowError(f"--input {key!r} given twice")
        out[key] = value
    return out
