"""The run table's order: run keys as shown, each with the sort value it had when placed.

Rows stay put: a run whose values change keeps its place, so the order is
sorted on the values the rows had when they were placed, and a new run is
placed by bisecting those. Only a new sort (`sort`) places every row again.
"""

from __future__ import annotations

from bisect import bisect_right

from .run_row import Reversed, RunRow, sort_value


class RowOrder:
    def __init__(self) -> None:
        self.keys: list[str] = []  # in the order shown
        self.column: str | None = None  # None: newest first
        self.reverse = False
        self._sort_keys: list[tuple] = []  # the sort value of each key, as placed
        self._index: dict[str, int] | None = {}  # key -> position; None when stale

    def __len__(self) -> int:
        return len(self.keys)

    def positions(self) -> dict[str, int]:
        if self._index is None:
            self._index = {k: i for i, k in enumerate(self.keys)}
        return self._index

    def sort_key(self, row: RunRow) -> tuple:
        value = sort_value(row, self.column)
        return Reversed(value) if self.reverse else value  # type: ignore[return-value]

    def keep_only(self, wanted: set[str] | dict[str, object]) -> None:
        """Drop the keys not in `wanted`; the others keep their order."""
        keep = [i for i, k in enumerate(self.keys) if k in wanted]
        self.keys = [self.keys[i] for i in keep]
        self._sort_keys = [self._sort_keys[i] for i in keep]
        self._index = None

    def insert(self, rows: list[RunRow]) -> None:
        """Place new rows where the sort puts them among the shown, which keep their places."""
        self._index = None
        if not self.keys:
            self._place_all(rows)
            return
        if len(rows) > 64:
            # Many at once: merge in one pass, keeping shown rows where they are relative to each other.
            rows.sort(key=self.sort_key)
            merged: list[str] = []
            keys: list[tuple] = []
            i = 0
            for key, sk in zip(self.keys, self._sort_keys):
                while i < len(rows) and self.sort_key(rows[i]) < sk:
                    merged.append(rows[i].key)
                    keys.append(self.sort_key(rows[i]))
                    i += 1
                merged.append(key)
                keys.append(sk)
            for r in rows[i:]:
                merged.append(r.key)
                keys.append(self.sort_key(r))
            self.keys, self._sort_keys = merged, keys
            return
        for row in rows:
            sk = self.sort_key(row)
            # Shown rows keep their places when values change, so the order
            # stays sorted on the values the rows had when placed: bisect on those.
            at = bisect_right(self._sort_keys, sk)
            self.keys.insert(at, row.key)
            self._sort_keys.insert(at, sk)

    def sort(self, rows: list[RunRow], column: str | None, reverse: bool) -> None:
        """A new sort: every row (`rows`, those shown) placed again by its values now."""
        self.column, self.reverse = column, reverse
        self._index = None
        self._place_all(rows)

    def _place_all(self, rows: list[RunRow]) -> None:
        rows.sort(key=self.sort_key)
        self.keys = [r.key for r in rows]
        self._sort_keys = [self.sort_key(r) for r in rows]
