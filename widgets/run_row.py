"""What the run table shows of a run: the row, its columns, how rows sort and what a cell says.

Plain data and functions (no widget): the console builds `RunRow`s from its
records (console/run_views.py), `RunTable` (widgets/run_table.py) diffs and
draws them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property

from rich.cells import cell_len
from rich.text import Text

from .safe_text import safe, safe_text
from .status_look import STATUS_ORDER, status_text


@dataclass(frozen=True)
class RunRow:
    """What one row shows; plain strings, made safe by the table. The `*_at` floats only sort."""

    key: str  # the full run id; rows are diffed by it
    short_id: str
    flow: str
    status: str  # the shown status (running, stopping, ...)
    node: str
    in_state: str
    last_work: str
    requested_by: str
    usage: str
    burn: str = ""  # cost per minute, for a running run
    created_at: float = 0.0  # epoch seconds; the default order, newest first
    in_state_at: float = 0.0  # when it entered the state it is shown in
    last_work_at: float = 0.0  # its last sign of work
    burn_rate: float = 0.0  # cost per minute; the burn column sorts on it, the highest first
    cost: float = 0.0  # what it spent and the tokens it used: the usage column sorts on them, the most first
    tokens: int = 0
    estimate: float = 0.0  # its estimated cost at completion (its cost so far where there is none): `$` sorts on it, the most first

    def shown(self) -> tuple[str, ...]:
        return self._shown

    @cached_property
    def _shown(self) -> tuple[str, ...]:
        # Asked several times a row each poll (the diff, the cells, the strip cache): made once.
        return tuple(getattr(self, f) for _, _, f in COLUMNS)


# Column key, header, and the RunRow field it shows. What each column says is defined once, for
# `swarmkit status` too, in swarmkit.runtime.run_columns (which widgets may not import): a test
# holds these headers and fields to it.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("id", "ID", "short_id"),
    ("flow", "FLOW", "flow"),
    ("status", "STATUS", "status"),
    ("node", "NODE", "node"),
    ("in_state", "IN STATE", "in_state"),
    ("last_work", "LAST WORK", "last_work"),
    ("requested_by", "REQUESTED BY", "requested_by"),
    ("usage", "USAGE", "usage"),
    ("burn", "BURN", "burn"),
)
_FIELD_TO_COLUMN = {field: col for col, _, field in COLUMNS}
COLUMN_INDEX = {col: i for i, (col, _, _) in enumerate(COLUMNS)}
_LIMITS = {"flow": 32, "node": 64, "requested_by": 32}
_SORT_ONLY = {"key", "created_at", "in_state_at", "last_work_at", "burn_rate", "cost", "tokens", "estimate"}
# Sorts on what no column shows: their name, as the table's key bindings and messages say it.
SORT_ONLY_SORTS = {"estimate": "estimated cost at completion"}
_STATUS_RANK = {s: i for i, s in enumerate(STATUS_ORDER)}

assert set(_FIELD_TO_COLUMN) == {f.name for f in fields(RunRow)} - _SORT_ONLY


def cell_text(column: str, value: str) -> Text:
    """What a cell shows: the status in its look, anything else made safe and bounded."""
    if column == "status":
        return status_text(value)
    return safe_text(value, limit=_LIMITS.get(column))


def cell_plain(column: str, value: str) -> str:
    """The words of `cell_text(column, value)` for any column but the status (which has a look), without making a Text."""
    return safe(value, _LIMITS.get(column))


def cell_width(column: str, value: str) -> int:
    """The cells `cell_text(column, value)` takes, without making its Text: a column is
    measured on every row, a Text is made only for the rows painted."""
    if column == "status":
        width = _STATUS_WIDTHS.get(value)
        if width is None:
            width = status_text(value).cell_len
            if len(_STATUS_WIDTHS) < 64:  # a store's unknown statuses are not kept without end
                # A status's glyph and word are the same in every theme: only its style follows one.
                _STATUS_WIDTHS[value] = width
        return width
    return cell_len(cell_plain(column, value))


_STATUS_WIDTHS: dict[str, int] = {}


def sort_value(row: RunRow, column: str | None) -> tuple:
    """The value a row sorts on, ascending; `None` is the default order (newest first)."""
    if column is None:
        return (-row.created_at, row.key)
    if column == "status":
        return (_STATUS_RANK.get(row.status, len(_STATUS_RANK)), -row.created_at, row.key)
    # Ages sort by the time they count from: the shortest first.
    if column == "in_state":
        return (-row.in_state_at, row.key)
    if column == "last_work":
        return (-row.last_work_at, row.key)
    if column == "burn":
        return (-row.burn_rate, -row.created_at, row.key)
    # By the amount, not the text ("$10.00" before "$9.00").
    if column == "usage":
        return (-row.cost, -row.tokens, -row.created_at, row.key)
    if column == "estimate":
        return (-row.estimate, -row.cost, -row.created_at, row.key)
    return (getattr(row, COLUMNS[COLUMN_INDEX[column]][2]).casefold(), -row.created_at, row.key)


@dataclass(frozen=True)
class TableChange:
    """What one `RunTable.show` did."""

    added: int
    removed: int
    updated_cells: int
    reordered: bool


class Reversed:
    """A sort value that orders the other way round."""

    __slots__ = ("value",)

    def __init__(self, value: tuple) -> None:
        self.value = value

    def __lt__(self, other: Reversed) -> bool:
        return other.value < self.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Reversed) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)
