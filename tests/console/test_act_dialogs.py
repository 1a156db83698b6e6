"""The confirmations' and outcomes' words, from the pure functions that make them (no app, no store)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from swarmkit.console.act_dialogs import LISTED, Outcome, Target, act_confirmation, cancel_confirmation, confirmation, outcome_lines, outcome_summary
from swarmkit.console.acts import ACT_BY_VERB, ACTS
from swarmkit.runtime.control import DONE, REFUSED, ActResult
from swarmkit.store.records import JobRecord

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def job(n: int, status: str = "running", **kw) -> JobRecord:
    base = JobRecord(
        id=f"{n:08x}" + "0" * 24, flow="release", flow_path=None, flow_source="", inputs="{}", status=status,
        created_at=NOW - timedelta(minutes=5), updated_at=NOW - timedelta(minutes=1), started_at=NOW - timedelta(minutes=4),
        ended_at=None, stop_requested_at=None, stop_requested_by=None, cancel_requested_at=None, cancel_requested_by=None,
        cancel_keep=False, epoch=1, host="h", pid=1, heartbeat_at=NOW, last_event_at=NOW, current_node="build", step=1,
        steps=3, tokens=0, cost=0.0, error=None, pending_gate=None, approved_step=None, workspace_root=None,
        heartbeat_mono=None, flow_modules=None, node_started_at=None, stop_now=False, stall_at=None, stop_overdue_at=None, lease_s=None,
    )
    return replace(base, **kw)


def words(c) -> str:
    return c.body.plain


def test_cancel_names_the_run_its_node_and_each_workspace_it_destroys():
    c = cancel_confirmation([Target(job(1), (("/w/runs/a", "active", 2_500_000),))], keep=False, now=NOW)
    assert c.title == "Cancel run 00000001?"
    text = words(c)
    assert "00000001 release is running at 2/3 build." in text
    assert "its host interrupts the agent in flight now" in text
    assert "DESTROYED" in text and "/w/runs/a  (2.5 MB, active)" in text
    assert [ch.key for ch in c.choices] == ["cancel", "stop"]  # stop is the safer way, offered


def test_cancel_keep_and_the_safer_words_follow_the_status():
    stopped = cancel_confirmation([Target(job(1, "stopped"))], keep=True, now=NOW)
    assert stopped.title == "Cancel run 00000001 (keep workspaces)?"
    assert "KEPT" in words(stopped) and "none (no agent has run yet" in words(stopped)
    assert "Safer: leave it stopped" in words(stopped) and [ch.key for ch in stopped.choices] == ["cancel"]
    stopping = cancel_confirmation([Target(job(1, stop_requested_at=NOW, stop_requested_by="ana"))], keep=False, now=NOW)
    assert "is stopping" in words(stopping) and "a stop is already requested (by ana)" in words(stopping)
    assert [ch.key for ch in stopping.choices] == ["cancel"]


def test_one_cancel_confirmation_lists_every_marked_run():
    targets = [Target(job(i, "queued" if i % 2 else "running"), ((f"/w/{i}", "active", 1000),)) for i in range(1, LISTED + 3)]
    targets.append(Target(job(99, "completed", ended_at=NOW)))
    c = cancel_confirmation(targets, keep=False, now=NOW)
    assert c.title == f"Cancel {LISTED + 2} marked runs?"
    text = words(c)
    assert all(f"{i:08x} release is" in text for i in range(1, LISTED + 1))
    assert "… and 2 more\n" in text  # past the listed ones, counted
    assert "Left as they are (ended): 00000063 completed" in text
    assert "00000001  /w/1  (1.0 kB, active)" in text and "… and 2 more (2.0 kB)" in text
    assert "stop" in [ch.key for ch in c.choices]


def test_approving_names_the_gate_and_destroys_nothing():
    gated = job(1, "deferred", pending_gate="ship", current_node="ship", step=2)
    a = act_confirmation(ACT_BY_VERB["approve"], [Target(gated)], NOW)
    assert a.title == "Approve the gate of run 00000001?"
    assert "00000001 release is deferred at 3/3 ship, waiting at the gate 'ship'." in words(a)
    assert "Nothing is destroyed" in words(a)
    r = confirmation(ACT_BY_VERB["resume"], [Target(gated), Target(job(2, "stopped"))], NOW)
    assert r.title == "Resume 2 marked runs?"
    assert "waiting at the gate 'ship'.\nResuming lets it past the gate" in words(r)
    assert "Also resumed, where it applies: 00000002 stopped" in words(r)
    assert [ch.label for ch in r.choices] == ["Resume 2"]


def test_which_acts_ask_first():
    asks = {act.verb: sorted(act.confirms) for act in ACTS}
    assert asks["stop"] == [] and asks["resume"] == ["deferred"] and asks["approve"] == ["deferred"]
    assert asks["cancel"] == asks["cancel_keep"] == ["deferred", "lost", "queued", "running", "stopped"]
    assert asks["stop_now"] == ["running"]  # its node's work in flight is lost
    assert {act.key for act in ACTS} == {"s", "S", "r", "a", "c", "C"}


def test_outcomes_are_counted_and_the_others_named():
    stop = ACT_BY_VERB["stop"]
    done = [Outcome(f"{i:08x}", ActResult(DONE, True, "stop requested", job(i))) for i in range(3)]
    same = Outcome("0000000a", ActResult(DONE, False, "0000000a is completed; nothing to stop.", job(10, "completed")))
    refused = Outcome("0000000b", None, "could not stop 0000000b: the store is locked")
    assert outcome_summary(stop, done, NOW) == ("3 stopped", "information")
    assert outcome_summary(stop, done + [same], NOW) == ("3 stopped, 1 unchanged: 0000000a is completed", "warning")
    cancelling = Outcome("0000000c", ActResult(REFUSED, False, "cannot resume 0000000c: it is running.", job(12, cancel_requested_at=NOW)))
    text, severity = outcome_summary(ACT_BY_VERB["resume"], done[:1] + [cancelling, refused], NOW)
    assert (text, severity) == ("1 resumed, 2 refused: 0000000c is cancelling, 0000000b: could not stop 0000000b: the store is locked", "error")
    # Each run's words, led by its id where they do not start with it.
    assert outcome_lines([same, cancelling]).plain == "0000000a is completed; nothing to stop.\n0000000c  cannot resume 0000000c: it is running.\n"
