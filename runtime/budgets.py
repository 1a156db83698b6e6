"""A run's budget: the limits it carries, how they are written, and when one is reached (issue 32).

A flow file's `[budget]` table, `swarmkit run --budget`, `POST /jobs`'s `budget` and `swarmkit resume
--budget` all come here. The limits are `max_cost` (dollars), `max_tokens`, `max_wall` (the time the
run's agents ran, summed over its hosts: a run parked, queued or at a gate spends none) and
`max_nodes` (nodes finished). A limit reached **stops** the run, resumable, at its next agent
boundary (`hard`: inside the node, as `stop --now` does). Its host asks the stop itself, in the
boundary's own transaction, as the actor `BUDGET`, with the reason (`reached`); from there it is a
stop like any other (runtime/node_boundary.py).

One rule a door cannot break: a limit below what the run has spent is refused at once (`Budget.check`),
and a resume that would stop again at its first boundary is refused, saying how to raise the limit
(`resume_refusal`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from typing import Any

from .quantities import parse_duration

# The actor of a stop a budget asked for (the audit's, the run's stop_requested_by).
BUDGET = "budget"
# The terms a door writes (`cost=5`), and the key each is in a flow file and in JSON.
KEYS = {"cost": "max_cost", "tokens": "max_tokens", "wall": "max_wall", "nodes": "max_nodes"}
_SUFFIXES = {"k": 1e3, "m": 1e6, "g": 1e9}
_TOKENS_RE = re.compile(r"^(\d+(?:\.\d+)?)([kmg]?)$")
# The most of anything counted or spent: inside every store's integers and far past any run.
_MOST = 1e15


class BudgetError(ValueError):
    """A budget that cannot be: what is wrong with it, in words that name the limit."""


class BelowSpent(BudgetError):
    """A limit below what the run has spent already: refused, not bad usage."""


@dataclass(frozen=True)
class Spent:
    """What a run has spent so far, as its row says (`cost`, `tokens`, `ran_s`, and `step`: nodes finished)."""

    cost: float = 0.0
    tokens: int = 0
    wall_s: float = 0.0
    nodes: int = 0


@dataclass(frozen=True)
class Budget:
    max_cost: float | None = None
    max_tokens: int | None = None
    max_wall: float | None = None  # seconds
    max_nodes: int | None = None
    hard: bool = False

    @property
    def empty(self) -> bool:
        return all(getattr(self, k) is None for k in KEYS.values())

    def to_json(self) -> str | None:
        """As the store keeps it (None: no limit)."""
        if self.empty:
            return None
        body = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        if not self.hard:
            body.pop("hard")
        return json.dumps(body, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> Budget:
        """The stored budget; what this version cannot read is no limit (a row never fails to load)."""
        if not text:
            return cls()
        try:
            body = json.loads(text)
            return from_mapping(body, "the stored budget") if isinstance(body, dict) else cls()
        except (ValueError, BudgetError):
            return cls()

    def reached(self, spent: Spent) -> str | None:
        """The first limit `spent` has reached, in words ("cost 5.02 of max_cost 5.00"); None: none."""
        if self.max_cost is not None and spent.cost >= self.max_cost:
            return f"cost {spent.cost:.2f} of max_cost {self.max_cost:.2f}"
        if self.max_tokens is not None and spent.tokens >= self.max_tokens:
            return f"tokens {spent.tokens:,} of max_tokens {self.max_tokens:,}"
        if self.max_wall is not None and spent.wall_s >= self.max_wall:
            return f"wall {_seconds(spent.wall_s)} of max_wall {_seconds(self.max_wall)}"
        if self.max_nodes is not None and spent.nodes >= self.max_nodes:
            return f"nodes {spent.nodes} of max_nodes {self.max_nodes}"
        return None

    def check(self, spent: Spent, whose: str = "the run", keys: set[str] | None = None) -> None:
        """BelowSpent if a limit (of `keys`, else any) is below what `whose` has spent already."""
        for term, key in KEYS.items():
            if keys is not None and key not in keys:
                continue
            limit = getattr(self, key)
            have = getattr(spent, "wall_s" if term == "wall" else term)
            if limit is not None and limit < have:
                raise BelowSpent(f"{key} {_shown(key, limit)} is below what {whose} has spent already ({_shown(key, have)})")

    def words(self, spent: Spent | None = None) -> str:
        """Each limit, with what was spent of it: "cost 1.20 of 5.00, nodes 2 of 4 (hard)"."""
        parts = []
        for term, key in KEYS.items():
            limit = getattr(self, key)
            if limit is None:
                continue
            if spent is None:
                parts.append(f"{key} {_shown(key, limit)}")
            else:
                parts.append(f"{term} {_shown(key, getattr(spent, 'wall_s' if term == 'wall' else term))} of {_shown(key, limit)}")
        return ", ".join(parts) + (" (hard)" if self.hard and parts else "")


@lru_cache(maxsize=64)
def budget_of(text: str | None) -> Budget:
    """The stored budget, read once per text: a host asks at every boundary."""
    return Budget.from_json(text)


def _seconds(s: float) -> str:
    return f"{s:.0f}s" if s >= 10 else f"{s:.1f}s"


def _shown(key: str, value: float) -> str:
    if key == "max_cost":
        return f"{value:.2f}"
    if key == "max_wall":
        return _seconds(value)
    return f"{int(value):,}"


# --- reading limits ------------------------------------------------------------------------------


def _cost(raw: Any, what: str) -> float:
    text = raw.strip().lstrip("$") if isinstance(raw, str) else raw
    try:
        value = float(text) if not isinstance(text, bool) else math.nan
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or value <= 0 or value > _MOST:
        raise BudgetError(f"{what} {raw!r} is not an amount of dollars more than zero, like 5 or 2.50")
    return value


def _count(raw: Any, what: str, example: str) -> int:
    value = math.nan
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = float(raw)
    elif isinstance(raw, str) and (m := _TOKENS_RE.match(raw.strip().lower().replace("_", "").replace(",", ""))):
        value = float(m.group(1)) * _SUFFIXES.get(m.group(2), 1)
    if not math.isfinite(value) or value < 1 or value > _MOST or value != int(value):
        raise BudgetError(f"{what} {raw!r} is not a whole number more than zero, like {example}")
    return int(value)


def _wall(raw: Any, what: str) -> float:
    seconds = parse_duration(raw)
    if seconds is None:
        raise BudgetError(f'{what} {raw!r} is not a duration; write it like "90s", "30m" or "2h"')
    return seconds


def limit_value(key: str, raw: Any, what: str) -> float | int:
    if key == "max_cost":
        return _cost(raw, what)
    if key == "max_tokens":
        return _count(raw, what, "100000 or 100k")
    if key == "max_nodes":
        return _count(raw, what, "10")
    return _wall(raw, what)


def from_mapping(body: dict[str, Any], where: str) -> Budget:
    """A budget from a flow file's `[budget]` table or a JSON object (`POST /jobs`)."""
    known = set(KEYS.values()) | {"hard"}
    unknown = sorted(k for k in body if k not in known)
    if unknown:
        raise BudgetError(f"{where}: unknown key {unknown[0]!r} (a budget has max_cost, max_tokens, max_wall, max_nodes and hard)")
    hard = body.get("hard", False)
    if not isinstance(hard, bool):
        raise BudgetError(f"{where}: hard must be true or false, not {hard!r}")
    values: dict[str, Any] = {key: limit_value(key, body[key], f"{where}: {key}") for key in KEYS.values() if body.get(key) is not None}
    return Budget(**values, hard=hard)


def terms_of(given: list[str] | dict[str, Any] | None) -> tuple[list[str], str]:
    """A door's limits as terms, and how a message names them: the CLI's (`cost=5`, "--budget"), or a JSON
    body's (`{"max_cost": 5, "hard": true}`, None left out: `max_cost=5`, "budget")."""
    if not isinstance(given, dict):
        return list(given or []), "--budget"
    return [f"{key}={str(value).lower() if isinstance(value, bool) else value}" for key, value in given.items() if value is not None], "budget"


def changed(base: Budget, terms: list[str], spent: Spent | None = None, *, whose: str = "the run", flag: str = "--budget") -> Budget:
    """`base` with the doors' terms applied: `cost=5` sets a limit, `cost=+5` raises it, `hard` (or
    `hard=false`) says how a limit stops the run; a JSON body's keys (`max_cost=5`) are taken too, and
    `flag` is how a message names where a term came from. With `spent`, a limit the terms set below it is refused
    (one they leave as it was is the run's own: reached, it is a spent budget, `resume_refusal`)."""
    out = base
    keys: set[str] = set()
    for term in terms:
        name, eq, raw = term.partition("=")
        name = name.strip().lower()
        if name == "hard":
            on = raw.strip().lower() if eq else "true"
            if on not in ("true", "false", "yes", "no", "1", "0"):
                raise BudgetError(f"{flag} {term!r}: hard takes true or false")
            out = replace(out, hard=on in ("true", "yes", "1"))
            continue
        key = KEYS.get(name) or (name if name in KEYS.values() else None)
        if key is None or not eq:
            raise BudgetError(f"{flag} {term!r} is not a limit; write cost=5, tokens=100k, wall=30m, nodes=10 or hard (cost=+5 raises one)")
        raw = raw.strip()
        if raw.startswith("+"):
            now = getattr(out, key)
            if now is None:
                raise BudgetError(f"{flag} {term!r}: {whose} has no {key} to raise; set one, like {name}={raw[1:]}")
            value = now + limit_value(key, raw[1:], f"{flag} {term!r}:")
        else:
            value = limit_value(key, raw, f"{flag} {term!r}:")
        out = replace(out, **{key: value})
        keys.add(key)
    if spent is not None:
        out.check(spent, whose, keys)
    return out


def spent_of(job: Any) -> Spent:
    """What a run's row says it has spent (a JobRecord)."""
    return Spent(job.cost or 0.0, job.tokens or 0, job.ran_s or 0.0, job.step or 0)


def held(job: Any, given: list[str] | dict[str, Any] | None) -> tuple[str | None, tuple[int, str] | None]:
    """A resume of `job` (a JobRecord) with the door's limits (`terms_of`): (the budget it leaves, JSON), or why it is
    refused as (exit code, words): a term that cannot be (2), a limit below what was spent or a budget
    still spent (1)."""
    from .exit_code import ExitCode  # late: a door's codes, only where a resume is judged

    sid, spent = job.id[:8], spent_of(job)
    terms, flag = terms_of(given)
    try:
        limits = changed(Budget.from_json(job.budget), terms, spent, whose=f"run {sid}", flag=flag)
    except BelowSpent as exc:
        return None, (ExitCode.FAILED, f"cannot resume {sid}: {exc}.")
    except BudgetError as exc:
        return None, (ExitCode.USAGE, f"cannot resume {sid}: {exc}.")
    refusal = resume_refusal(limits, spent, sid)
    if refusal is not None:
        return None, (ExitCode.FAILED, refusal)
    return limits.to_json(), None


def raise_words(reason: str, short_id: str, verb: str = "resume") -> str:
    """How to go on past the limit `reason` names: "Raise it as you resume: `swarmkit resume ID --budget cost=+5`."."""
    term = next((t for t in KEYS if reason.startswith(t)), "cost")
    return f"Raise it as you resume: `swarmkit {verb} {short_id} --budget {term}=+{_RAISE[term]}`."


def resume_refusal(budget: Budget, spent: Spent, short_id: str) -> str | None:
    """Why a resume of a run holding `budget` would stop again at its first boundary, and how to raise it; None: it would not."""
    reason = budget.reached(spent)
    if reason is None:
        return None
    return f"cannot resume {short_id}: its budget is spent ({reason}). {raise_words(reason, short_id)}"


_RAISE = {"cost": "5", "tokens": "100k", "wall": "30m", "nodes": "5"}
