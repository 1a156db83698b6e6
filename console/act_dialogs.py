"""What the console's confirmations and outcomes say: pure functions of the runs, tested directly.

A confirmation names every run it is about (id, flow, status, the node it is
at) and what will be destroyed; acts on marked runs ask once for all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from rich.text import Text

from swarmkit.runtime.batch_acts import Outcome as Outcome
from swarmkit.runtime.batch_acts import tally
from swarmkit.runtime.steps import step_words
from swarmkit.store import TERMINAL_STATUSES
from swarmkit.store.records import JobRecord
from swarmkit.widgets.confirm_dialog import Choice
from swarmkit.widgets.safe_text import safe, safe_lines

from .acts import Act
from .run_views import human_size, shown_path

# A bulk confirmation lists this many runs in full, then counts the rest.
LISTED = 12


@dataclass(frozen=True)
class Target:
    """A run an act is about, as read just before asking: its row and its live workspaces with their sizes."""

    job: JobRecord
    workspaces: tuple[tuple[str, str, int | None], ...] = ()  # (path, state, bytes or None when not on this host)


@dataclass(frozen=True)
class Confirmation:
    title: str
    body: Text
    choices: tuple[Choice, ...]


def _at(job: JobRecord) -> str:
    if job.current_node and job.status in ("running", "stopped", "deferred", "lost"):
        return f" at {step_words(job.step, job.steps, job.current_node, 40)}"
    return ""


def _run_line(body: Text, job: JobRecord, now: datetime) -> None:
    body.append(f"{job.short_id} ", style="bold")
    body.append(safe(job.flow, 60))
    body.append(f" is {job.display_status(now)}{safe(_at(job))}")


def _workspace_lines(body: Text, targets: list[Target], keep: bool) -> None:
    body.append("\nWorkspaces that will be ")
    body.append("KEPT" if keep else "DESTROYED", style="bold green" if keep else "bold red")
    body.append(":\n")
    lines = [(t.job, w) for t in targets for w in t.workspaces]
    if not lines:
        body.append("  none (no agent has run yet, or they are already gone)\n", style="dim")
    for job, (path, state, size) in lines[:LISTED]:
        prefix = f"{job.short_id}  " if len(targets) > 1 else ""
        body.append(f"  {prefix}{safe(shown_path(path))}  ({human_size(size)}, {safe(state)})\n")
    if len(lines) > LISTED:
        total = sum(size or 0 for _, (_, _, size) in lines[LISTED:])
        body.append(f"  … and {len(lines) - LISTED} more ({human_size(total)})\n")


def cancel_confirmation(targets: list[Target], keep: bool, now: datetime) -> Confirmation:
    """The cancel dialog: the runs, what the cancel does to each, the workspaces it destroys (or keeps), and a safer way."""
    live = [t for t in targets if t.job.status not in TERMINAL_STATUSES]
    body = Text()
    if len(targets) == 1:
        job = targets[0].job
        _run_line(body, job, now)
        body.append(".\n")
        if job.status == "running":
            body.append("Cancel ends it for good: its host interrupts the agent in flight now.\n")
        else:
            body.append("Cancel ends it for good, at once.\n")
        title = f"Cancel run {job.short_id}{' (keep workspaces)' if keep else ''}?"
    else:
        title = f"Cancel {len(live)} marked runs{' (keep workspaces)' if keep else ''}?"
        body.append(f"Cancel ends these {len(live)} runs for good (running ones: their hosts interrupt the agent in flight now):\n")
        for t in live[:LISTED]:
            body.append("  ")
            _run_line(body, t.job, now)
            body.append("\n")
        if len(live) > LISTED:
            body.append(f"  … and {len(live) - LISTED} more\n")
        ended = [t.job for t in targets if t.job.status in TERMINAL_STATUSES]
        if ended:
            body.append("Left as they are (ended): " + ", ".join(f"{j.short_id} {j.status}" for j in ended[:LISTED]) + "\n", style="dim")
    _workspace_lines(body, live, keep)
    choices = [Choice("cancel", "Cancel, keep workspaces" if keep else "Cancel and destroy", "warning" if keep else "error")]
    jobs = [t.job for t in live]
    if jobs and all(j.status in ("running", "queued") and j.cancel_requested_at is None and j.stop_requested_at is None for j in jobs):
        body.append("\nSafer: ")
        body.append("Stop", style="bold")
        body.append(" parks " + ("it" if len(jobs) == 1 else "them") + " at the next agent boundary and keeps everything; "
                    + ("it" if len(jobs) == 1 else "they") + " can be resumed later.")
        choices.append(Choice("stop", "Stop instead", "primary"))
    elif len(jobs) == 1 and jobs[0].status == "running" and jobs[0].cancel_requested_at is None and jobs[0].stop_requested_at is not None:
        body.append(f"\nSafer: a stop is already requested (by {safe(jobs[0].stop_requested_by or '?', 40)}); waiting lets it park at the next agent boundary, keeping everything.")
    elif len(jobs) == 1 and jobs[0].status in ("stopped", "deferred", "lost"):
        body.append(f"\nSafer: leave it {jobs[0].status}; it keeps everything and can be resumed later.")
    return Confirmation(title, body, tuple(choices))


def act_confirmation(act: Act, targets: list[Target], now: datetime) -> Confirmation:
    """Any act but a cancel: the runs (the gate each deferred one waits at), what the act does in the table's words, and that nothing is destroyed."""
    body = Text()
    asked = [t.job for t in targets if t.job.status in act.confirms]
    others = [t.job for t in targets if t.job.status not in act.confirms]
    if len(targets) == 1:
        title = act.asks.format(run=targets[0].job.short_id)
    else:
        title = f"{act.label} {len(targets)} marked runs?"
    for job in asked[:LISTED]:
        _run_line(body, job, now)
        gate = f", waiting at the gate {safe(job.pending_gate or job.current_node or '?', 40)!r}" if job.status == "deferred" else ""
        body.append(gate + ".\n")
    if len(asked) > LISTED:
        body.append(f"… and {len(asked) - LISTED} more\n")
    body.append(act.says.format(them="it" if len(asked) == 1 else "them") + "\n")
    if others:
        body.append(f"Also {act.done}, where it applies: " if act.verb != "approve" else "Not at a gate, left as they are: ", style="dim")
        body.append(", ".join(f"{j.short_id} {j.status}" for j in others[:LISTED]) + "\n", style="dim")
    body.append("\nNothing is destroyed: workspaces are kept.", style="dim")
    go = f"{act.label} {'run' if len(targets) == 1 else str(len(targets))}"
    return Confirmation(title, body, (Choice("go", go, "warning"),))


def confirmation(act: Act, targets: list[Target], now: datetime) -> Confirmation:
    if act.rule.names_workspaces:
        return cancel_confirmation(targets, act.keep, now)
    return act_confirmation(act, targets, now)


def outcome_summary(act: Act, outcomes: list[Outcome], now: datetime) -> tuple[str, str]:
    """One line for an act on several runs, and how loud: '3 stopped, 1 refused: abc123 is completed'."""
    done, same, refused = tally(outcomes)  # how every door counts a batch

    def why(o: Outcome) -> str:
        if o.result is None:
            return f"{o.short_id}: {o.error}"
        job = o.result.job
        return f"{o.short_id} is {job.display_status(now)}" if job is not None else o.result.message

    parts = [f"{len(done)} {act.done}"]
    if same:
        parts.append(f"{len(same)} unchanged: " + ", ".join(why(o) for o in same[:LISTED]))
    if refused:
        parts.append(f"{len(refused)} refused: " + ", ".join(why(o) for o in refused[:LISTED]))
    severity = "error" if refused else "warning" if same else "information"
    return ", ".join(parts), severity


def outcome_lines(outcomes: list[Outcome]) -> Text:
    """Every run's outcome in the runtime's words, each led by the run's id (unless the words name it)."""
    body = Text()
    for o in outcomes:
        words = safe_lines(o.result.message if o.result is not None else o.error)
        if o.short_id not in words.split(" ", 1)[0]:
            body.append(f"{o.short_id}  ", style="bold")
        body.append(words + "\n")
    return body
