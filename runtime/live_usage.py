"""Usage an agent reports in the middle of a node, for the heartbeat to put on the run's row.

An operator needs to see a run burn tokens while it happens, not when the node
ends. Three ways in, one total:

- an async `call` agent's `ctx.add_usage` adds to the context's `Usage`, here
  in the host's process;
- a sync `call` agent runs in a child process: its `ctx.add_usage` also
  appends a line to the node's usage file;
- a command agent appends lines of JSON, `{"tokens": 1200, "cost": 0.004}`,
  to the file named by `$SWARMKIT_USAGE`.

The host reads the file's new lines at each heartbeat, by the rules of
`$SWARMKIT_OUTPUT`: opened without blocking, only a regular file, a bounded
read each time and a bounded size in all. A FIFO, a device or a file past the
limit is never waited on; the node's end says what was wrong.

Imports only the standard library: `call_child.py` writes the file with it.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path

from .agent_context import BadUsage, Usage

USAGE_FILE = "usage.jsonl"
# A usage file is a few short lines a node; past this it is a bug, not a report.
MAX_USAGE_BYTES = 4 * 1024 * 1024
# Read at most this much at one heartbeat, so that a heartbeat stays short.
READ_PER_BEAT = 256 * 1024
MAX_LINE = 4096


def append_usage(path: Path, tokens: int, cost: float) -> None:
    """One report as one line (a sync call agent's child writes its `ctx.add_usage` this way).

    Best effort: the file is live progress only (the child's result carries the
    node's total), so a full disk must not fail the agent."""
    line = json.dumps({"tokens": tokens, "cost": cost}) + "\n"
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line)
    except OSError:
        pass


@dataclass
class LiveUsage:
    """The usage of the node in flight so far, and how much of it the row already holds."""

    path: Path | None = None  # the usage file, when the agent has one
    in_process: Usage | None = None  # an async call agent's own Usage
    from_file: Usage = field(default_factory=Usage)
    bad: str | None = None  # the first thing wrong with the file; the node ends failed or faulted on it
    fault: bool = False  # `bad` is the file's kind or size (a fault), not a bad line (the agent's failure)
    written: tuple[int, float] = (0, 0.0)  # added to the row by heartbeats, for the checkpoint to subtract
    _offset: int = 0
    _partial: bytes = b""
    # The heartbeat and the node's end read from threads of their own.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def total(self) -> tuple[int, float]:
        tokens, cost = self.from_file.tokens, self.from_file.cost
        if self.in_process is not None:
            tokens, cost = tokens + self.in_process.tokens, cost + self.in_process.cost
        return tokens, cost

    def unwritten(self) -> tuple[int, float]:
        tokens, cost = self.total()
        return tokens - self.written[0], cost - self.written[1]

    def read(self, limit: int = READ_PER_BEAT) -> None:
        """Take the file's new complete lines (blocking I/O: run it off the event loop)."""
        with self._lock:
            self._read(limit)

    def _read(self, limit: int) -> None:
        if self.path is None or self.fault:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        except FileNotFoundError:
            return
        except OSError as exc:
            self._refuse(f"cannot be opened: {exc.strerror or exc}")
            return
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self._refuse("is not a regular file; the host does not read it")
                return
            if st.st_size > MAX_USAGE_BYTES:
                self._refuse(f"holds {st.st_size:,} bytes, more than the limit of {MAX_USAGE_BYTES:,}")
                return
            os.lseek(fd, self._offset, os.SEEK_SET)
            chunk = os.read(fd, max(0, min(limit, MAX_USAGE_BYTES - self._offset)))
        finally:
            os.close(fd)
        self._offset += len(chunk)
        data = self._partial + chunk
        *lines, self._partial = data.split(b"\n")
        if len(self._partial) > MAX_LINE:
            self._bad_line(f"has a line longer than {MAX_LINE} bytes")
            self._partial = b""
        for raw in lines:
            if raw.strip():
                self._take(raw)

    def finish(self) -> None:
        """At the node's end: everything left in the file, and a last line without its newline."""
        with self._lock:
            for _ in range(MAX_USAGE_BYTES // READ_PER_BEAT + 1):
                before = self._offset
                self._read(READ_PER_BEAT)
                if self._offset == before:
                    break
            if self._partial.strip() and not self.fault:
                self._take(self._partial)
            self._partial = b""

    def _take(self, raw: bytes) -> None:
        try:
            value = json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError):
            self._bad_line(f"has a line that is not JSON: {raw[:80]!r}")
            return
        if not isinstance(value, dict):
            self._bad_line(f"has a line that is not an object like {{\"tokens\": 10, \"cost\": 0.01}}: {raw[:80]!r}")
            return
        try:
            self.from_file.add(value.get("tokens", 0), value.get("cost", 0.0))
        except BadUsage as exc:
            self._bad_line(f"reports usage a run cannot have: {exc}")

    def _bad_line(self, why: str) -> None:
        self.bad = self.bad or f"$SWARMKIT_USAGE {self.path} {why}"

    def _refuse(self, why: str) -> None:
        if not self.fault:
            self.bad, self.fault = f"$SWARMKIT_USAGE {self.path} {why}", True
