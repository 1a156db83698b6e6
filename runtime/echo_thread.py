"""The lines of the runs a process hosts, echoed without ever blocking or failing the host.

Lines go through a bounded queue to a daemon thread that writes them; when the
queue is full lines are counted and dropped, and when the pipe is closed
echoing stops quietly (echo.py says why). Its own module: queue and threading
load only in a process that hosts, not in a one-shot verb that `say`s a line.
"""

from __future__ import annotations

import queue
import sys
import threading

from .echo import silence

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from typing import TextIO

QUEUE_LINES = 10_000


class Echo:
    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stdout
        self.closed = False
        self.dropped = 0
        self._q: queue.Queue[str | None] = queue.Queue(QUEUE_LINES)
        self._thread = threading.Thread(target=self._write, name="swarmkit-echo", daemon=True)
        self._thread.start()

    def __call__(self, line: str) -> None:
        if self.closed:
            return
        try:
            self._q.put_nowait(line)
        except queue.Full:
            self.dropped += 1

    def _write(self) -> None:
        while True:
            line = self._q.get()
            if line is None:
                return
            try:
                self.stream.write(line + "\n")
                if self._q.empty():
                    self.stream.flush()
            except (OSError, ValueError):
                self._closed_pipe()
                return

    def _closed_pipe(self) -> None:
        self.closed = True
        silence(self.stream)

    def flush(self, timeout: float = 2.0) -> None:
        """Let what is queued reach the stream, for at most `timeout` seconds (a stuck terminal may never take it)."""
        if not self.closed:
            try:
                self._q.put(None, timeout=timeout)
            except queue.Full:
                return  # a terminal that takes nothing: leave what is queued
        self._thread.join(timeout)
