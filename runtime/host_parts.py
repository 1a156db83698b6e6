"""What the parts of a run's host share: the state a `RunHost` keeps and the methods its parts call on each other.

`RunHost` (executor.py) is assembled from parts, one a module: the lease and
heartbeat (`host_lease.LeaseKeeping`), the node boundary (`node_boundary.NodeBoundaries`),
running a node (`node_runs.NodeRuns`) and ending or parking the run
(`run_ends.RunEnds`). Each part is written against this description of the host.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from swarmkit.store import Store

    from .agent_process import AgentProcess
    from .event_sink import EventSink
    from .flow import Agent, Flow
    from .flow_modules import RunModules
    from .host_writes import Flags
    from .live_usage import LiveUsage
    from .settings import Settings
    from .stop_state import StopState

T = TypeVar("T")


class HostParts:
    store: Store
    job_id: str
    epoch: int
    flow: Flow
    settings: Settings
    on_line: Callable[[str, str | None, str], None] | None
    sink: EventSink
    stops: StopState
    calls: RunModules
    workspace: Path
    final_status: str | None
    lease_deadline: float | None
    _control_path: Path | None
    _stall_after: timedelta
    _fenced: bool
    _ending: bool
    _warned: set[str]
    _node_task: asyncio.Task | None
    _procs: set[AgentProcess]
    _lease_lapsed: bool
    _store_replaced: bool
    _last_renewal: float | None
    _late_said_at: float
    _beat_phase: tuple[str, float]
    _node_agent: Agent | None
    _node_in_process: bool
    _escalation: asyncio.Task | None
    _live: LiveUsage | None
    _node_live: LiveUsage | None
    _usage_lock: asyncio.Lock
    _beat_soon: asyncio.Event
    _entered_mono: float | None
    _entered_node: str | None

    if TYPE_CHECKING:

        def fence(self, why: str | None = None) -> None: ...

        def warn_once(self, fault: str, text: str) -> None: ...

        def fault_text(self, exc: BaseException) -> str: ...

        def touch_flags(self, conn: Any, stmt: Any, **params: Any) -> Flags: ...

        def _params(self, **more: Any) -> dict[str, Any]: ...

        def _retrying(self, what: str, op: Callable[[], Awaitable[T]]) -> Awaitable[T]: ...

        def _interrupt_node(self) -> None: ...

        def _heard(self, flags: Flags) -> None: ...

        def _register(self, proc: AgentProcess) -> None: ...

        def _unregister(self, proc: AgentProcess) -> None: ...

        def _set_control(self, path: Path | None) -> None: ...

        async def _aboundary_here(self, partial: dict[str, Any]) -> None: ...

        async def _parked_inside(self, agent: Agent, step: int, parked: Any) -> BaseException: ...

        def _decide(self, flags: Flags, step: int, agent: Agent) -> None: ...

        def _held_to_limits(self, conn: Any, flags: Flags, node: str | None, now: Any, *, inside: bool = False, finished: str | None = None) -> tuple[Flags, list[dict[str, Any]]]: ...

        async def _until_ended(self, task: asyncio.Task, agent: Agent, in_process: bool) -> None: ...
