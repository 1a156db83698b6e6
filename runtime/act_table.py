"""The acts on a run, in one table: what each is, which runs it applies to, what it asks and says,
what it destroys, what the audit records, and whether it warns when no worker is running.

The CLI's verbs (cli/acts.py), the HTTP API's act routes (api/jobs.py) and the console's keys,
palette, help and confirmations (console/acts.py, act_dialogs.py, act_runner.py) all read it;
the doors keep only what is theirs (a key, an argparse flag, a route's body). The acts themselves,
one conditional UPDATE each, are runtime/acts.py's (`perform` carries out an entry of this table),
loaded at the first act: this table is data only and costs a door nothing at start-up (no
SQLAlchemy, no control module).
"""

from __future__ import annotations

from dataclasses import dataclass

from swarmkit.store.statuses import ACTIVE_STATUSES, CANCELLED, DEFERRED, QUEUED, RESUMABLE_STATUSES, RUNNING

# The runs a cancel can still end: every one not ended.
CANCELLABLE = ACTIVE_STATUSES


@dataclass(frozen=True)
class Act:
    name: str  # the act: a console action's name, and the word in its messages ("stop_now")
    verb: str  # the runtime function it calls, the CLI verb and the API route it is ("stop")
    applies_to: frozenset[str]  # the stored statuses it can change; doors offer it on those only
    help: str  # what it does, in a line (the console's help and palette)
    done: str  # how an outcome is counted: "3 stopped"
    audit: str  # the audit action recorded when it takes
    confirms_on: frozenset[str] = frozenset()  # the stored statuses on which a door asks first
    confirm_title: str = ""  # the confirmation's title for one run ({run}: its short id)
    confirm_text: str = ""  # what the confirmation says the act does ({them}: it or them); a cancel's words are its own
    destroys: str = ""  # what it destroys ("" nothing)
    warns_without_worker: bool = False  # when it took, say so if no worker watches the store (it queued the run)
    options: tuple[tuple[str, bool], ...] = ()  # keyword options of the runtime function it fixes (now, keep)
    host_carries_out: bool = False  # on a running run, its host carries it out later (the HTTP API's 202)

    @property
    def keep(self) -> bool:
        return dict(self.options).get("keep", False)

    @property
    def names_workspaces(self) -> bool:
        """A confirmation of it names the run's workspaces (destroyed or kept)."""
        return self.verb == "cancel"

    def wants_worker(self, changed: bool) -> bool:
        """Whether a door should look for a live worker after the act: it `changed` the run, queuing it for one."""
        return self.warns_without_worker and changed

    def destroys_words(self) -> str:
        """What it destroys, with the options that make it do so ("" nothing): the API's and the help's words."""
        if not self.destroys:
            return ""
        flags = ", ".join(f"{k}={str(v).lower()}" for k, v in self.options)
        return f"with {flags}: destroys {self.destroys}" if flags else f"destroys {self.destroys}"


_ACTS = (
    Act("stop", "stop", frozenset({RUNNING, QUEUED}), "stop the run at its next agent boundary (resumable)", "stopped", "run.stop_requested"),
    Act("stop_now", "stop", frozenset({RUNNING}), "stop now: interrupt the agent in flight; its node runs again on resume (asks first)", "stopped", "run.stop_requested",
        frozenset({RUNNING}), "Stop run {run} now?",
        "Stop now interrupts the agent in flight: its work in flight is lost, and {them} park before that node, which runs again from its start on resume.",
        destroys="the work of the node in flight", options=(("now", True),)),
    Act("resume", "resume", RESUMABLE_STATUSES, "queue a stopped, deferred or lost run again (deferred: approves its gate, asks first)", "resumed", "run.resumed",
        frozenset({DEFERRED}), "Resume run {run}, approving its gate?", "Resuming lets {them} past the gate: a worker runs the gated agent next.",
        warns_without_worker=True),
    Act("approve", "approve", frozenset({DEFERRED}), "approve the gate a deferred run waits at (asks first)", "approved", "gate.approved",
        frozenset({DEFERRED}), "Approve the gate of run {run}?", "Approving lets {them} past the gate: a worker runs the gated agent next.",
        warns_without_worker=True),
    Act("cancel", "cancel", CANCELLABLE, "end the run for good and destroy its workspaces (asks first)", CANCELLED, "run.cancel_requested",
        CANCELLABLE, destroys="its workspaces", options=(("keep", False),), host_carries_out=True),
    Act("cancel_keep", "cancel", CANCELLABLE, "end the run for good, keeping its workspaces (asks first)", "cancelled (workspaces kept)", "run.cancel_requested",
        CANCELLABLE, options=(("keep", True),), host_carries_out=True),
)
ACTS: dict[str, Act] = {act.name: act for act in _ACTS}
# The four acts on a run as the CLI's verbs and the API's routes (POST /jobs/{id}/<verb>): each its own table entry.
VERBS = ("stop", "approve", "resume", "cancel")


def no_worker_hint(short_id: str) -> str:
    """What to say after a resume or approve when no worker watches the store."""
    return (
        "no live worker is watching this store: start one with `swarmkit worker`, "
        f"or host it here with `swarmkit run --resume {short_id}`."
    )
