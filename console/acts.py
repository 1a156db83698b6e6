"""The console's acts, in one table: the key, the footer label, the palette's name, the help line,
which runs an act applies to and on which it asks first, and the runtime control call it makes.

Bindings, the help screen, the command palette and acts on marked runs all read this table; an
act added here is one more `Act(...)` line.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.binding import Binding

from swarmkit.store.statuses import CANCELLED, DEFERRED, LOST, QUEUED, RESUMABLE_STATUSES, RUNNING, STOPPED

if TYPE_CHECKING:
    from types import ModuleType

    from swarmkit.runtime.control import ActResult
    from swarmkit.store import Store


def _control() -> ModuleType:
    # Imported at the first act, not with the console: its first frame needs none of it.
    from swarmkit.runtime import control

    return control


# The runs a cancel can still end.
_CANCELLABLE = frozenset({QUEUED, RUNNING, STOPPED, DEFERRED, LOST})


@dataclass(frozen=True)
class Act:
    verb: str  # the screen's action name, and the word in messages
    key: str
    label: str  # in the footer
    title: str  # in the command palette, followed by the run's short id
    help: str  # in the help screen and the palette
    applies: frozenset[str]  # the stored statuses it can change; the palette offers it on those only
    confirms: frozenset[str]  # the stored statuses on which it asks first
    done: str  # how an outcome is counted: "3 stopped"
    call: Callable[[Store, str, str], Awaitable[ActResult]]  # (store, run id, actor)
    asks: str = ""  # the confirmation's title for one run ({run}: its short id)
    says: str = ""  # what the confirmation says the act does ({them}: it or them); cancel's words are its own
    keep: bool = False  # a cancel that keeps the workspaces

    @property
    def action(self) -> str:
        """The screen's action string: one `act` action for every act, named by its verb."""
        return f"act('{self.verb}')"

    def binding(self) -> Binding:
        return Binding(self.key, self.action, self.label, id=f"act.{self.verb}")

    def read_only_binding(self) -> Binding:
        # Tried when the act's own binding is off (read-only): the key says why nothing happens.
        return Binding(self.key, f"read_only('{self.verb}')", self.label, show=False, id=f"act.{self.verb}.read_only")


ACTS: tuple[Act, ...] = (
    Act("stop", "s", "Stop", "Stop run", "stop the run at its next agent boundary (resumable)",
        frozenset({RUNNING, QUEUED}), frozenset(), "stopped",
        lambda store, run, actor: _control().stop(store, run, actor=actor)),
    Act("stop_now", "S", "Stop now", "Stop run now", "stop now: interrupt the agent in flight; its node runs again on resume (asks first)",
        frozenset({RUNNING}), frozenset({RUNNING}), "stopped",
        lambda store, run, actor: _control().stop(store, run, actor=actor, now=True),
        "Stop run {run} now?", "Stop now interrupts the agent in flight: its work in flight is lost, and {them} park before that node, which runs again from its start on resume."),
    Act("resume", "r", "Resume", "Resume run", "queue a stopped, deferred or lost run again (deferred: approves its gate, asks first)",
        RESUMABLE_STATUSES, frozenset({DEFERRED}), "resumed",
        lambda store, run, actor: _control().resume(store, run, actor=actor),
        "Resume run {run}, approving its gate?", "Resuming lets {them} past the gate: a worker runs the gated agent next."),
    Act("approve", "a", "Approve", "Approve run", "approve the gate a deferred run waits at (asks first)",
        frozenset({DEFERRED}), frozenset({DEFERRED}), "approved",
        lambda store, run, actor: _control().approve(store, run, actor=actor),
        "Approve the gate of run {run}?", "Approving lets {them} past the gate: a worker runs the gated agent next."),
    Act("cancel", "c", "Cancel", "Cancel run", "end the run for good and destroy its workspaces (asks first)",
        _CANCELLABLE, _CANCELLABLE, CANCELLED,
        lambda store, run, actor: _control().cancel(store, run, keep=False, actor=actor)),
    Act("cancel_keep", "C", "Cancel+keep", "Cancel run, keep workspaces", "end the run for good, keeping its workspaces (asks first)",
        _CANCELLABLE, _CANCELLABLE, "cancelled (workspaces kept)",
        lambda store, run, actor: _control().cancel(store, run, keep=True, actor=actor), keep=True),
)
ACT_BY_VERB = {act.verb: act for act in ACTS}
ACT_BY_ACTION = {act.action: act for act in ACTS}
ACT_VERBS = tuple(ACT_BY_VERB)
