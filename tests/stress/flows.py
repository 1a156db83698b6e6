"""The flows a race round runs, and what each of their agents is known to do.

Every agent, command or call, appends `S|E run step node host_pid pgid time` to
the round's ledger when it starts and when it finishes, prints LINES known log
lines, writes a file into the run's workspace and returns a digest of the state
it was given (so a run's final state depends only on its flow and inputs, never
on how often it was stopped, where it was hosted or how it was resumed).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path

LINES = 3
SEEDS = ("alpha", "beta")

AGENT_MODULE = '''
"""Call agents of the race harness (written per round)."""
import asyncio, hashlib, json, os, time

LEDGER = {ledger!r}
LINES = {lines}


def _mark(kind, ctx):
    with open(LEDGER, "a") as f:
        # A sync agent runs in a process of its own: the ledger names the host that runs it.
        host = os.environ.get("SWARMKIT_HOST_PID") or os.getpid()
        f.write(f"{{kind}} {{ctx.run_id}} {{ctx.step}} {{ctx.node}} {{host}} 0 {{time.time():.6f}}\\n")


def _begin(ctx):
    _mark("S", ctx)
    (ctx.workspace / f"file-{{ctx.node}}.txt").write_text("x")
    for i in range(1, LINES + 1):
        ctx.log(f"line {{i}} of {{ctx.node}}")


def _out(ctx):
    digest = hashlib.sha256((json.dumps(ctx.state, sort_keys=True) + ctx.node).encode()).hexdigest()[:16]
    ctx.add_usage(tokens=5, cost=0.125)
    _mark("E", ctx)
    return {{ctx.node: digest}}


def fast(ctx):
    _begin(ctx)
    return _out(ctx)


def slow_sync(ctx):
    _begin(ctx)
    time.sleep(0.5)
    return _out(ctx)


async def fast_async(ctx):
    _begin(ctx)
    await asyncio.sleep(0.05)
    return _out(ctx)


async def slow_async(ctx):
    _begin(ctx)
    await asyncio.sleep(0.6)
    return _out(ctx)
'''


def command(ledger: Path, sleep: float = 0.0, fail: bool = False) -> str:
    pause = f"sleep {sleep}\n" if sleep else ""
    end = (
        "exit 3\n"
        if fail
        else (
            'h=$( { cat "$SWARMKIT_STATE"; echo "$SWARMKIT_NODE"; } | sha256sum | cut -c1-16)\n'
            "printf '{\"%s\": \"%s\", \"_usage\": {\"tokens\": 3, \"cost\": 0.25}}' \"$SWARMKIT_NODE\" \"$h\" > \"$SWARMKIT_OUTPUT\"\n"
            f'echo "E $SWARMKIT_RUN_ID $SWARMKIT_STEP $SWARMKIT_NODE $host $pg $(date +%s.%N)" >> {ledger}\n'
        )
    )
    return (
        # The hosting process is $SWARMKIT_HOST_PID ($PPID before agents ran under a supervisor);
        # the agent's process group is field 5 of /proc/$$/stat.
        'host=${SWARMKIT_HOST_PID:-$PPID}; pg=$(cut -d" " -f5 /proc/$$/stat)\n'
        f'echo "S $SWARMKIT_RUN_ID $SWARMKIT_STEP $SWARMKIT_NODE $host $pg $(date +%s.%N)" >> {ledger}\n'
        'echo x > "file-$SWARMKIT_NODE.txt"\n'
        f'i=1; while [ $i -le {LINES} ]; do echo "line $i of $SWARMKIT_NODE"; i=$((i+1)); done\n'
        f"{pause}{end}"
    )


@dataclass(frozen=True)
class AgentSpec:
    name: str
    kind: str  # "command" or "call"
    body: str  # the command, or the callable
    approve: bool = False
    fails: bool = False
    sync_thread: bool = False  # a sync call agent: it runs in a supervised process of its own


@dataclass
class FlowSpec:
    name: str
    agents: list[AgentSpec]
    keep_workspaces: bool = False
    weight: float = 1.0
    path: Path | None = None

    @property
    def steps(self) -> int:
        return len(self.agents)

    @property
    def ends_failed(self) -> bool:
        return any(a.fails for a in self.agents)

    def toml(self) -> str:
        out = f'name = "{self.name}"\nkeep_workspaces = {"true" if self.keep_workspaces else "false"}\n'
        for a in self.agents:
            out += f'\n[[agents]]\nname = "{a.name}"\n'
            if a.approve:
                out += "approve = true\n"
            if a.kind == "command":
                out += "command = '''\n" + a.body + "'''\n"
            else:
                out += f'call = "{a.body}"\n'
        return out


def make_flows(folder: Path, ledger: Path) -> dict[str, FlowSpec]:
    """Write the round's flows and agent module into `folder`; return them by name."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "raceagents.py").write_text(textwrap.dedent(AGENT_MODULE.format(ledger=str(ledger), lines=LINES)).lstrip())
    flows = [
        # Many near-instant boundaries: where a cached "not stopped" would show.
        FlowSpec(
            "quick",
            [
                AgentSpec(f"q{i:02d}", "call", ("raceagents:fast" if i % 2 == 0 else "raceagents:fast_async"), sync_thread=i % 2 == 0)
                for i in range(16)
            ],
            weight=0.3,
        ),
        # Shell agents, some slow enough for a cancel to land mid-command; workspaces kept.
        FlowSpec(
            "shell",
            [AgentSpec(f"s{i}", "command", command(ledger, sleep=(0.2, 0.6, 0.3, 0.9, 0.2)[i])) for i in range(5)],
            keep_workspaces=True,
            weight=0.3,
        ),
        # A gate in the middle, and both kinds of slow call agent.
        FlowSpec(
            "gated",
            [
                AgentSpec("g0", "command", command(ledger)),
                AgentSpec("g1", "call", "raceagents:slow_async"),
                AgentSpec("g2", "command", command(ledger, sleep=0.2), approve=True),
                AgentSpec("g3", "call", "raceagents:slow_sync", sync_thread=True),
            ],
            weight=0.25,
        ),
        # Ends failed: the flow chose it.
        FlowSpec(
            "fails",
            [
                AgentSpec("f0", "command", command(ledger, sleep=0.4)),
                AgentSpec("f1", "call", "raceagents:slow_async"),
                AgentSpec("f2", "command", command(ledger, fail=True), fails=True),
            ],
            weight=0.15,
        ),
        # Not raced (weight 0): a long run of near-instant nodes, for the crash tests to kill mid-checkpoint.
        FlowSpec(
            "marathon",
            [AgentSpec(f"m{i:02d}", "call", ("raceagents:fast" if i % 3 == 0 else "raceagents:fast_async"), sync_thread=i % 3 == 0) for i in range(40)],
            weight=0.0,
        ),
    ]
    out = {}
    for f in flows:
        f.path = folder / f"{f.name}.toml"
        f.path.write_text(f.toml(), encoding="utf-8")
        out[f.name] = f
    return out


def expected_lines(node: str) -> list[str]:
    return [f"line {i} of {node}" for i in range(1, LINES + 1)]


@dataclass
class Execution:
    """One start of an agent, from the ledger."""

    run: str
    step: int
    node: str
    pid: int
    pgid: int
    t_start: float
    t_end: float | None = None
    epoch: int | None = None
    extra_ends: int = field(default=0)


def read_ledger(path: Path) -> dict[str, list[Execution]]:
    """Executions per run, in start order. An `E` line closes the open start of (run, step, pid)."""
    runs: dict[str, list[Execution]] = {}
    if not path.exists():
        return runs
    open_: dict[tuple[str, int, int], Execution] = {}
    for raw in path.read_text(errors="replace").splitlines():
        parts = raw.split()
        if len(parts) != 7 or parts[0] not in ("S", "E"):
            continue
        kind, run, step, node, pid, pgid, t = parts
        key = (run, int(step), int(pid))
        if kind == "S":
            ex = Execution(run, int(step), node, int(pid), int(pgid), float(t))
            runs.setdefault(run, []).append(ex)
            open_[key] = ex
        else:
            ex = open_.pop(key, None)
            if ex is None:
                # An end without a start: record it on a placeholder so the check sees it.
                ex = Execution(run, int(step), node, int(pid), int(pgid), float("nan"), float(t))
                runs.setdefault(run, []).append(ex)
            else:
                ex.t_end = float(t)
    for execs in runs.values():
        execs.sort(key=lambda e: (e.t_start if e.t_start == e.t_start else 0.0))
    return runs
