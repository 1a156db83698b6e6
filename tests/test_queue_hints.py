"""When a listening worker looks for queued runs after a wakeup (runtime/queue_hints.py): a fleet of
listening workers reads the queue about once a run, not once a worker (issue 31)."""

from __future__ import annotations

from swarmkit.runtime.queue_hints import SPREAD_S, QueueHints


def test_a_run_heard_queued_is_looked_for_within_the_spread_and_not_before_its_moment():
    hints = QueueHints()
    assert hints.due_at() is None and not hints.due(1e9)
    hints.queued("a" * 32, now=100.0)
    at = hints.due_at()
    assert at is not None and 100.0 <= at <= 100.0 + SPREAD_S
    assert hints.due(100.0 + SPREAD_S)
    hints.looked()
    assert hints.due_at() is None


def test_spread_workers_look_at_different_moments():
    """Fifty workers told of one run at once do not all look at the same moment: the first looks early
    and most of the others, hearing it claimed meanwhile, never do."""
    moments = []
    for _ in range(50):
        hints = QueueHints()
        hints.queued("b" * 32, now=0.0)
        moments.append(hints.due_at())
    assert len(set(moments)) > 40 and min(moments) < SPREAD_S / 5


def test_a_run_heard_claimed_before_the_look_calls_for_no_look():
    hints = QueueHints()
    hints.queued("c" * 32, now=0.0)
    hints.queued("d" * 32, now=0.0)
    hints.claimed("c" * 32)
    assert hints.due(SPREAD_S), "one of the two runs told of is still unclaimed"
    hints.claimed("d" * 32)
    assert hints.due_at() is None and not hints.due(1e9)


def test_a_run_claimed_that_this_worker_was_not_told_of_changes_nothing():
    hints = QueueHints()
    hints.claimed("e" * 32)
    assert hints.due_at() is None
    hints.queued("f" * 32, now=0.0)
    hints.claimed("e" * 32)
    assert hints.due(SPREAD_S)


def test_a_wakeup_that_names_no_run_and_a_look_called_for_here_are_due_at_once():
    for call in (lambda h: h.queued(None, now=5.0), lambda h: h.look_now()):
        hints = QueueHints()
        call(hints)
        assert hints.due(float("-inf")), "due at once, whatever the clock says"
        hints.claimed("g" * 32)
        assert hints.due(0.0), "a claim heard of another run does not cancel a look called for here"
        hints.looked()
        assert hints.due_at() is None


def test_a_full_worker_told_of_many_runs_still_looks_when_it_has_room():
    hints = QueueHints()
    for i in range(5000):
        hints.queued(f"{i:032x}", now=0.0)
    hints.claimed(f"{0:032x}")
    assert hints.due(SPREAD_S)
