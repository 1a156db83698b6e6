"""The console's acts: runtime/act_table.py's acts (which runs each applies to, on which it asks
first, what it says and does), each with what is the console's own: its key, its footer label and
its palette name.

Bindings, the help screen, the command palette and acts on marked runs all read this table; an
act added to the runtime's table is one more `Act(...)` line here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.binding import Binding

from swarmkit.runtime import act_table

if TYPE_CHECKING:
    pass


@dataclass(frozen=True)
class Act:
    rule: act_table.Act  # the act as every door has it
    key: str
    label: str  # in the footer
    title: str  # in the command palette, followed by the run's short id

    @property
    def verb(self) -> str:
        """The screen's action name, and the word in messages."""
        return self.rule.name

    @property
    def help(self) -> str:  # in the help screen and the palette
        return self.rule.help

    @property
    def applies(self) -> frozenset[str]:  # the palette offers it on those only
        return self.rule.applies_to

    @property
    def confirms(self) -> frozenset[str]:
        return self.rule.confirms_on

    @property
    def done(self) -> str:
        return self.rule.done

    @property
    def asks(self) -> str:
        return self.rule.confirm_title

    @property
    def says(self) -> str:
        return self.rule.confirm_text

    @property
    def keep(self) -> bool:
        return self.rule.keep

    @property
    def action(self) -> str:
        """The screen's action string: one `act` action for every act, named by its verb."""
        return f"act('{self.verb}')"

    def binding(self) -> Binding:
        return Binding(self.key, self.action, self.label, id=f"act.{self.verb}")

    def read_only_binding(self) -> Binding:
        # Tried when the act's own binding is off (read-only): the key says why nothing happens.
        return Binding(self.key, f"read_only('{self.verb}')", self.label, show=False, id=f"act.{self.verb}.read_only")


_RULES = act_table.ACTS
ACTS: tuple[Act, ...] = (
    Act(_RULES["stop"], "s", "Stop", "Stop run"),
    Act(_RULES["stop_now"], "S", "Stop now", "Stop run now"),
    Act(_RULES["resume"], "r", "Resume", "Resume run"),
    Act(_RULES["approve"], "a", "Approve", "Approve run"),
    Act(_RULES["cancel"], "c", "Cancel", "Cancel run"),
    Act(_RULES["cancel_keep"], "C", "Cancel+keep", "Cancel run, keep workspaces"),
)
ACT_BY_VERB = {act.verb: act for act in ACTS}
ACT_BY_ACTION = {act.action: act for act in ACTS}
ACT_VERBS = tuple(ACT_BY_VERB)
