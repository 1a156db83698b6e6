"""How store records look in the console: table rows, the detail pane, log lines, paths and sizes.

The widgets take plain dataclasses; this module is where store records become them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from swarmkit.runtime.budgets import Budget, spent_of
from swarmkit.runtime.estimates import estimate_of
from swarmkit.runtime.run_columns import RunView, age, cells, in_state_since, node_cell, node_ran_s, stop_eta, usage_cell
from swarmkit.runtime.steps import step_words
from swarmkit.runtime.stop_conditions import shown as shown_stops
from swarmkit.store import StoreLocation
from swarmkit.store.records import UNLOADABLE, JobRecord, WorkspaceRecord
from swarmkit.store.statuses import TERMINAL_STATUSES
from swarmkit.store.trail_records import AuditRecord, CheckpointRecord, EventRecord
from swarmkit.widgets.run_detail import DetailSection, RunDetailData
from swarmkit.widgets.run_row import RunRow
from swarmkit.widgets.safe_text import safe

if TYPE_CHECKING:
    from swarmkit.widgets.log_tail import LogLine


def ago(now: datetime, then: datetime | None) -> str:
    if then is None:
        return "-"
    return age((now - then).total_seconds()) + " ago"


def clock_time(value: datetime | None) -> str:
    return value.strftime("%H:%M:%S") if value else "-"


def stamp(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else "-"


def run_row(
    job: JobRecord, now: datetime, burn_since: tuple[datetime, float] | None = None, usual_s: float | None = None, node_cost: float | None = None,
) -> RunRow:
    """The widget's row: the shared columns' cells (runtime/run_columns.py), and what they sort on (`node_cost`:
    the median cost of a node of its flow, for its estimated cost at completion)."""
    view = RunView(job, now, burn_since, usual_s)
    last = job.last_event_at or job.heartbeat_at
    return RunRow(
        key=job.id,
        **cells(view),
        created_at=job.created_at.timestamp(),
        in_state_at=in_state_since(job).timestamp(),
        last_work_at=last.timestamp() if last else 0.0,
        burn_rate=view.burn or 0.0,
        cost=job.cost or 0.0,
        tokens=job.tokens or 0,
        estimate=(job.cost or 0.0) + (max(0, job.steps - job.step) * node_cost if node_cost is not None and job.status not in TERMINAL_STATUSES else 0.0),
    )


def shown_path(path: str | os.PathLike) -> str:
    """A path as an operator reads it: relative to where the console runs when inside it."""
    p = Path(path)
    try:
        rel = p.relative_to(Path.cwd())
    except ValueError:
        return str(p)
    return "./" + str(rel) if str(rel) != "." else "."


def shown_store(loc: StoreLocation) -> str:
    if loc.is_sqlite and loc.url.database:
        return shown_path(loc.url.database)
    return loc.display


def human_size(n: int | None) -> str:
    if n is None:
        return "not on this host"
    size = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"


def _inputs(raw: str) -> str:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return raw
    if not value:
        return "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def detail_facts(job: JobRecord, now: datetime, usual_s: float | None = None, node_costs: list[float] | None = None) -> tuple[tuple[str, str], ...]:
    shown = job.display_status(now)
    facts: list[tuple[str, str]] = [("run", job.id), ("flow", job.flow + (f"  ({job.flow_path})" if job.flow_path else ""))]
    node = node_cell(job)
    ran = node_ran_s(job, now)
    if ran is not None:
        node += f", for {age(ran)}"
    facts.append(("node", node))
    if job.pending_gate:
        facts.append(("waiting at", f"gate {job.pending_gate}, for a human's approval (`swarmkit approve {job.short_id}`)"))
    if job.stop_requested_at or job.stop_requested_by:
        why = f": {job.stop_reason}" if job.stop_reason else ""
        facts.append(("stop asked", f"by {job.stop_requested_by or '?'} at {stamp(job.stop_requested_at)} ({ago(now, job.stop_requested_at)}){why}"))
        if job.status == "running" and (eta := stop_eta(job, now, usual_s)):
            facts.append(("stops", eta + (f" (its node usually takes ~{age(usual_s)})" if usual_s is not None else "")))
    if job.cancel_requested_at or job.cancel_requested_by:
        keep = "kept" if job.cancel_keep else "destroyed"
        facts.append(("cancel asked", f"by {job.cancel_requested_by or '?'} at {stamp(job.cancel_requested_at)} ({ago(now, job.cancel_requested_at)}); workspaces {keep}"))
    if job.host:
        beat = f", heartbeat {ago(now, job.heartbeat_at)}" if job.status == "running" else ""
        facts.append(("host", f"{job.host} pid {job.pid} epoch {job.epoch}{beat}"))
    facts.append(("last work", ago(now, job.last_event_at or job.heartbeat_at)))
    facts.append(("created", f"{stamp(job.created_at)} ({ago(now, job.created_at)})"))
    if job.started_at:
        facts.append(("started", stamp(job.started_at)))
    if job.ended_at:
        facts.append(("ended", f"{stamp(job.ended_at)} ({ago(now, job.ended_at)})"))
    facts.append(("in state", f"{shown} for {age((now - in_state_since(job)).total_seconds())}"))
    facts.append(("usage", usage_cell(job)))
    if node_costs is not None and job.status not in TERMINAL_STATUSES:
        facts.append(("estimate", estimate_of(job, node_costs, now).words()))
    if job.budget:
        facts.append(("budget", Budget.from_json(job.budget).words(spent_of(job))))
    if job.stop_when:
        facts.append(("stops set", shown_stops(job.stop_when)))
    facts.append(("inputs", _inputs(job.inputs)))
    if job.error:
        facts.append(("error", job.error))
    return tuple((label, safe(value)) for label, value in facts)


def _detail_text(detail: dict, steps: int) -> str:
    def shown(k: str, v: object) -> object:
        # Audit rows written before steps were recorded as `k/N` hold the 0-based index.
        return step_words(v, steps) if k == "step" and isinstance(v, int) and not isinstance(v, bool) and steps else v

    return ", ".join(f"{k}={shown(k, v)}" for k, v in sorted(detail.items()) if v not in (None, "", [])) if detail else ""


def _checkpoint_line(cp: CheckpointRecord, steps: int) -> str:
    # A checkpoint's step counts the nodes done: the one it follows is that number, 1-based.
    after = f"after {step_words(cp.step - 1, steps, cp.node, None)}" if cp.node and steps else (cp.node or "(start)")
    return f"{clock_time(cp.created_at)}  {after}  epoch {cp.epoch}"


def detail_sections(
    checkpoints: Iterable[CheckpointRecord], audit: Iterable[AuditRecord], workspaces: Iterable[WorkspaceRecord],
    recent: Iterable[EventRecord] = (), steps: int = 0,
) -> tuple[DetailSection, ...]:
    cps = list(checkpoints)
    cp_lines = tuple(_checkpoint_line(cp, steps) for cp in cps[-12:])
    if len(cps) > 12:
        cp_lines = (f"… {len(cps) - 12} earlier",) + cp_lines
    trail = list(audit)
    audit_lines = tuple(
        f"{stamp(a.at)}  {a.actor}  {a.action}" + (f"  ({_detail_text(a.detail, steps)})" if a.detail else "") for a in trail[-20:]
    )
    if len(trail) > 20:
        audit_lines = (f"… {len(trail) - 20} earlier",) + audit_lines
    ws_lines = tuple(f"{shown_path(w.path)}  {w.state}  (since {stamp(w.updated_at)})" for w in workspaces)
    # A queued run that workers pass over: which ones, and what they lack.
    unloadable = tuple(f"{stamp(ev.at)}  {ev.text}" for ev in recent if ev.kind == UNLOADABLE)
    waiting = (DetailSection("Not claimed", unloadable[-8:]),) if unloadable else ()
    return waiting + (
        DetailSection("Checkpoints", cp_lines),
        DetailSection("Audit trail", audit_lines),
        DetailSection("Workspaces", ws_lines, empty="none yet (made when an agent first runs)"),
    )


def detail_data(
    job: JobRecord, now: datetime, sections: tuple[DetailSection, ...], usual_s: float | None = None, node_costs: list[float] | None = None,
) -> RunDetailData:
    """`node_costs`: what a node of its flow cost in its completed runs, for a run not yet ended (its estimate)."""
    return RunDetailData(
        title=f"{job.short_id}  {safe(job.flow, 60)}",
        status=job.display_status(now),
        facts=detail_facts(job, now, usual_s, node_costs),
        sections=sections,
    )


def log_line(ev: EventRecord) -> LogLine:
    from swarmkit.widgets.log_tail import LogLine  # late: with the log screen; the first frame needs none of it

    t = clock_time(ev.at)
    node = ev.node or ""
    if ev.kind == "log":
        return LogLine(ev.id, t, "log", node, ev.text)
    if ev.kind == "node.started":
        return LogLine(ev.id, t, "node", node, ev.text)
    if ev.kind in ("node.finished", "runtime"):
        return LogLine(ev.id, t, "note", node, ev.text)
    return LogLine(ev.id, t, "event", node, f"{ev.kind}: {ev.text}")
