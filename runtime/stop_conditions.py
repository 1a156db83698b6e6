"""Stops set for later (issue 32): `stop --when 'cost>2.5'`, `stop --after NODE`, `stop --before NODE`.

Each is kept on the run's row (`jobs.stop_when`, JSON: `{"stops": [{"kind", "what", "by", "at"}]}`) like the
stop flag: it survives its host's death and holds on any host. The host asks at each node boundary
(runtime/node_boundary.py) whether one holds; the first that does becomes the run's stop, asked as the
person who set it, with the reason, and is taken off in the same UPDATE, so that a resume goes on past it.
`stop --clear` takes them all off. Setting one is runtime/stop_later.py's act; these are the rules.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any

from .budgets import KEYS, BudgetError, Spent, limit_value

WHEN, AFTER, BEFORE = "when", "after", "before"
KINDS = (WHEN, AFTER, BEFORE)
# `cost>2.5`, `tokens >= 100k`, `wall>30m`, `nodes>=3`.
_WHEN_RE = re.compile(r"^\s*(cost|tokens|wall|nodes)\s*(>=|>)\s*(\S+)\s*$")
# At most this many stops wait on one run: a list an operator can read, and a row that stays small.
MOST = 20


class StopConditionError(ValueError):
    """A stop for later that cannot be: what is wrong with it, naming it."""


@dataclass(frozen=True)
class Later:
    kind: str  # when, after, before
    what: str  # the condition as written again (`cost>2.5`), or the node's name
    by: str  # who set it: the actor of the stop it asks
    at: str  # when it was set (RFC 3339)

    def words(self) -> str:
        return f"stop --{self.kind} {self.what} set by {self.by}"


@dataclass(frozen=True)
class Condition:
    term: str  # cost, tokens, wall, nodes
    op: str  # > or >=
    value: float

    def holds(self, spent: Spent) -> float | None:
        """What was spent of its term if the condition holds; None if it does not."""
        have = getattr(spent, "wall_s" if self.term == "wall" else self.term)
        return have if (have > self.value if self.op == ">" else have >= self.value) else None


def condition(text: str) -> Condition:
    """`cost>2.5` as a Condition; StopConditionError saying how to write one."""
    m = _WHEN_RE.match(text or "")
    if m is None:
        raise StopConditionError(f"--when {text!r} is not a condition; write it like 'cost>2.5', 'tokens>100k', 'wall>30m' or 'nodes>=3'")
    term, op, raw = m.groups()
    try:
        value = float(limit_value(KEYS[term], raw, f"--when {text!r}:"))
    except BudgetError as exc:
        raise StopConditionError(str(exc)) from None
    return Condition(term, op, value)


def load(text: str | None) -> list[Later]:
    """The stops kept on a row; what this version cannot read is none (a row never fails to load)."""
    if not text:
        return []
    try:
        body = json.loads(text)
        return [Later(**{k: str(s[k]) for k in ("kind", "what", "by", "at")}) for s in body["stops"] if s.get("kind") in KINDS]
    except (ValueError, KeyError, TypeError, AttributeError):
        return []


def dump(stops: list[Later]) -> str | None:
    return json.dumps({"stops": [asdict(s) for s in stops]}, sort_keys=True) if stops else None


def fired(text: str | None, spent: Spent, finished: str | None, before: str | None) -> tuple[Later, str, str | None] | None:
    """The first stop kept in `text` that holds at the boundary after node `finished` (None: none ran here)
    and before node `before`: (it, the reason the run's stop says, "stop --when cost>2.5 (cost 2.61)", and
    the stops left as the row keeps them). Every one that holds here is taken off, not only the first: a
    resume goes on from this boundary, past all of them. Who set the first is the stop's actor."""
    stops = load(text)
    holding: list[tuple[Later, str]] = []
    for s in stops:
        if s.kind == WHEN:
            try:
                have = condition(s.what).holds(spent)
            except StopConditionError:
                continue
            if have is None:
                continue
            shown = f"{have:.2f}" if s.what.startswith("cost") else f"{have:.1f}s" if s.what.startswith("wall") else f"{int(have):,}"
            holding.append((s, f"stop --{s.kind} {s.what} ({s.what.split('>')[0]} {shown})"))
        elif (s.kind == AFTER and s.what == finished) or (s.kind == BEFORE and s.what == before):
            holding.append((s, f"stop --{s.kind} {s.what}"))
    if not holding:
        return None
    gone = {id(s) for s, _ in holding}
    return holding[0][0], "; ".join(r for _, r in holding), dump([s for s in stops if id(s) not in gone])


def shown(text: str | None) -> str:
    """The stops kept, in a line: "when cost>2.5 (alice), before review (bob)"; "" for none."""
    return ", ".join(f"{s.kind} {s.what} ({s.by})" for s in load(text))


def as_view(value: Any) -> str:
    """The view's `stop_when` (the object the JSON column holds) in a line, as `shown` says it."""
    return shown(json.dumps(value)) if value else ""
