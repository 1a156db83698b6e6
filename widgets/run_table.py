"""The run table: one keyed row per run, diffed in place on every refresh."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Sequence

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import RowDoesNotExist

from .safe_text import safe_text
from .status_badge import status_text
from .tcss import load_css


@dataclass(frozen=True)
class RunRow:
    """What one row shows; plain strings, made safe by the table."""

    key: str  # the full run id; rows are diffed by it
    short_id: str
    flow: str
    status: str  # the shown status (running, stopping, ...)
    node: str
    in_state: str
    last_work: str
    requested_by: str
    usage: str


# Column key, header, and the RunRow field it shows.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("id", "ID", "short_id"),
    ("flow", "FLOW", "flow"),
    ("status", "STATUS", "status"),
    ("node", "NODE", "node"),
    ("in_state", "IN STATE", "in_state"),
    ("last_work", "LAST WORK", "last_work"),
    ("requested_by", "REQUESTED BY", "requested_by"),
    ("usage", "USAGE", "usage"),
)
_FIELD_TO_COLUMN = {field: col for col, _, field in COLUMNS}
_LIMITS = {"flow": 32, "node": 32, "requested_by": 32}

assert set(_FIELD_TO_COLUMN) == {f.name for f in fields(RunRow)} - {"key"}


def _cell(column: str, value: str) -> Text:
    if column == "status":
        return status_text(value)
    return safe_text(value, limit=_LIMITS.get(column))


@dataclass(frozen=True)
class TableChange:
    added: int
    removed: int
    updated_cells: int
    reordered: bool


class RunTable(DataTable):
    """A DataTable of runs.

    Never cleared and rebuilt: `show_rows` removes gone rows, adds new ones and
    updates only the cells whose text changed, inside one batch update, and
    puts the cursor back on the run it was on.
    """

    DEFAULT_CSS = load_css("run_table.tcss")

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self._shown: dict[str, RunRow] = {}
        # The id cell of each row, by run id: DataTable.sort only hands its key
        # function cell values, and the id cell's identity names the run.
        self._id_cells: dict[str, Text] = {}

    def on_mount(self) -> None:
        for key, header, _ in COLUMNS:
            self.add_column(header, key=key)

    @property
    def selected_key(self) -> str | None:
        if not self._shown or self.row_count == 0:
            return None
        try:
            row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        except Exception:  # the cursor is past the end while rows change
            return None
        return row_key.value

    @property
    def shown_keys(self) -> list[str]:
        return [row.key.value for row in self.ordered_rows if row.key.value is not None]

    def row_for(self, key: str) -> RunRow | None:
        return self._shown.get(key)

    def select(self, key: str) -> bool:
        try:
            index = self.get_row_index(key)
        except RowDoesNotExist:
            return False
        self.move_cursor(row=index)
        return True

    def show_rows(self, rows: Sequence[RunRow]) -> TableChange:
        """Make the table show exactly `rows`, in that order."""
        wanted = {row.key: row for row in rows}
        cursor_key = self.selected_key
        cursor_index = self.cursor_row
        added = removed = updated = 0
        reordered = False
        with self.app.batch_update():
            for key in [k for k in self._shown if k not in wanted]:
                self.remove_row(key)
                del self._shown[key]
                del self._id_cells[key]
                removed += 1
            for row in rows:
                old = self._shown.get(row.key)
                if old is None:
                    cells = [_cell(col, getattr(row, field)) for col, _, field in COLUMNS]
                    self.add_row(*cells, key=row.key)
                    self._id_cells[row.key] = cells[0]
                    added += 1
                elif old != row:
                    for field, column in _FIELD_TO_COLUMN.items():
                        value = getattr(row, field)
                        if value != getattr(old, field):
                            self.update_cell(row.key, column, _cell(column, value), update_width=True)
                            updated += 1
                self._shown[row.key] = row
            order = [row.key for row in rows]
            if order != self.shown_keys:
                rank = {id(self._id_cells[key]): i for i, key in enumerate(order)}
                self.sort("id", key=lambda cell: rank[id(cell)])
                reordered = True
            if rows:
                if cursor_key is not None and cursor_key in wanted:
                    target = self.get_row_index(cursor_key)
                else:
                    # The run under the cursor went away: stay at the same
                    # height, on the run that took its place.
                    target = min(max(cursor_index, 0), len(rows) - 1)
                if target != self.cursor_row or reordered or added or removed:
                    self.move_cursor(row=target)
        return TableChange(added, removed, updated, reordered)
