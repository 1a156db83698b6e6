"""One agent process under its supervisor, seen from the host: output, lease renewals, interrupt.

The supervisor (agent_supervisor.py) is the parent of everything the agent
starts; this side speaks to it over its stdin (the control pipe) and reads the
agent's stdout and stderr as the run's log lines, with back-pressure: when the
host has too many lines waiting for the store, it stops reading, the pipe
fills, and the agent waits on its own writes instead of the host's memory
growing.

A sync `call` agent's supervisor is forked by the host's zygote (zygote.py)
with the same pipes, when it can be; otherwise, and for commands, it is
exec'd as `python -S agent_supervisor.py`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from .forked_process import ForkedProcess, ZygoteRefused
from .zygote import ANSWER_S as ZYGOTE_ANSWER_S
from .zygote import zygote

SUPERVISOR = str(Path(__file__).with_name("agent_supervisor.py"))
# A longer line is cut: one runaway line must not become a 1 GB event.
MAX_LINE = 64 * 1024
# After the agent's process has exited, how long its output may take to drain.
DRAIN_S = 2.0
# A supervisor that has not finished the escalation this long after it should have is killed.
SUPERVISOR_SLACK_S = 5.0
# The supervisor's exit status when the host's lease ran out and it ended the agents itself.
LEASE_EXPIRED = 75


class LineSink:
    """Where an agent's lines go: `emit` for each line, `room` awaited between reads (back-pressure),
    `capped` true when the run's log is full and whole chunks may be counted instead of split."""

    def __init__(self, emit: Callable[[str], None], room: Callable[[], Awaitable[None]], capped: Callable[[], bool], drop: Callable[[int, int], None]):
        self.emit = emit
        self.room = room
        self.capped = capped
        self.drop = drop


def _decode(raw: bytes) -> str:
    return raw.rstrip(b"\r").decode("utf-8", errors="replace")


async def pump(stream: asyncio.StreamReader, sink: LineSink) -> None:
    buf = b""
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            break
        if sink.capped():
            # Past the run's log cap: count, do not split or keep.
            buf += chunk
            nl = buf.rfind(b"\n")
            if nl >= 0:
                sink.drop(buf.count(b"\n", 0, nl + 1), nl + 1)
                buf = buf[nl + 1 :]
            if len(buf) > MAX_LINE:
                sink.drop(1, len(buf))
                buf = b""
            continue
        buf += chunk
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            sink.emit(_decode(buf[start:nl]))
            start = nl + 1
        buf = buf[start:]
        if len(buf) > MAX_LINE:
            sink.emit(_decode(buf[:MAX_LINE]) + " …[line cut]")
            buf = b""
        await sink.room()
    if buf:
        sink.emit(_decode(buf))


class AgentProcess:
    """An argv run under the supervisor in a session of its own."""

    def __init__(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: dict[str, str],
        lines: LineSink,
        note: Callable[[str], None],
        interrupt_grace: float,
        term_grace: float,
        fence_grace: float,
        lease_deadline: float | None,
        call_io: str | None = None,
    ):
        self.argv = argv
        # A sync call agent's io folder: the zygote may run call_child on it in a fork instead of exec'ing argv.
        self.call_io = call_io
        self.cwd = cwd
        self.env = env
        self.lines = lines
        self.note = note
        self.interrupt_grace = interrupt_grace
        self.term_grace = term_grace
        self.fence_grace = fence_grace
        self.lease_deadline = lease_deadline
        self.proc: asyncio.subprocess.Process | ForkedProcess | None = None
        self._pumps: list[asyncio.Task] = []
        self.abandoned = False
        self._verdict: int | None = None  # the read end of the supervisor's verdict pipe
        # Set once it has exited: the supervisor ended the agents because the lease ran out
        # (its status, LEASE_EXPIRED, is also what an agent parking at a boundary of its own exits with).
        self.lease_expired = False

    async def start(self) -> None:
        if self.call_io is not None and await self._start_forked():
            return
        opts = ["--interrupt-grace", str(self.interrupt_grace), "--term-grace", str(self.term_grace), "--fence-grace", str(self.fence_grace)]
        if self.lease_deadline is not None:
            opts += ["--lease", repr(self.lease_deadline)]
        verdict, told = os.pipe()
        opts += ["--verdict-fd", str(told)]
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-S", SUPERVISOR, *opts, "--", *self.argv,
                cwd=str(self.cwd),
                env=self.env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                # A session of its own: the operator's Ctrl-C reaches none of the
                # agent's processes directly, and no terminal signal does.
                start_new_session=True,
                pass_fds=(told,),
            )
        except BaseException:
            os.close(verdict)
            raise
        finally:
            os.close(told)
        self._verdict = verdict
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._pumps = [asyncio.create_task(pump(self.proc.stdout, self.lines)), asyncio.create_task(pump(self.proc.stderr, self.lines))]

    async def _start_forked(self) -> bool:
        """Have the zygote fork the supervisor with this side's pipes; False when it cannot (then exec)."""
        request = {
            "call": self.call_io, "argv": self.argv, "cwd": str(self.cwd), "env": self.env,
            "opts": {"interrupt_grace": self.interrupt_grace, "term_grace": self.term_grace, "fence_grace": self.fence_grace, "lease": self.lease_deadline},
        }
        pipes = [os.pipe() for _ in range(4)]  # control, stdout, stderr, verdict; close-on-exec, as the host's own must be
        theirs = [pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][1]]
        ours = [pipes[0][1], pipes[1][0], pipes[2][0], pipes[3][0]]
        try:
            sent_to = zygote().send(request, theirs)
        except BaseException:
            for fd in ours:
                os.close(fd)
            raise
        finally:
            # Only the zygote and the supervisor may hold them now: a write end left here would keep a pump from its end of file.
            for fd in theirs:
                os.close(fd)
        if sent_to is None:
            for fd in ours:
                os.close(fd)
            return False
        proc = await ForkedProcess.attach(*ours)
        try:
            await proc.forked(ZYGOTE_ANSWER_S)
        except ZygoteRefused:
            proc.close()
            zygote().answered(sent_to)
            raise
        except (ConnectionError, TimeoutError) as exc:
            # Closing our ends first: a supervisor it forks after all finds its control pipe closed and ends at once.
            proc.close()
            zygote().failed(sent_to, str(exc) or type(exc).__name__)
            return False
        except BaseException:
            proc.close()
            raise
        zygote().answered(sent_to)
        self.proc = proc
        assert proc.stdout is not None and proc.stderr is not None
        self._pumps = [asyncio.create_task(pump(proc.stdout, self.lines)), asyncio.create_task(pump(proc.stderr, self.lines))]
        return True

    def _send(self, line: str) -> None:
        proc = self.proc
        if proc is None or proc.returncode is not None or proc.stdin is None or proc.stdin.is_closing():
            return
        try:
            proc.stdin.write(line.encode() + b"\n")
        except (BrokenPipeError, ConnectionResetError, RuntimeError):
            pass

    def renew(self, deadline: float) -> None:
        """The host's lease now runs to `deadline` (monotonic): the agent may live until then."""
        self.lease_deadline = deadline
        self._send(f"lease {deadline!r}")

    async def wait(self) -> int:
        """The supervisor's exit status once it has exited (everything below it is gone by then),
        after draining the output for a bounded time."""
        assert self.proc is not None
        code = await self.proc.wait()
        await self._drain()
        self.lease_expired = b"lease-expired" in self._read_verdict()
        return code

    def _read_verdict(self) -> bytes:
        """What the supervisor said before it exited (nothing, mostly): the pipe's write end is closed by then."""
        if isinstance(self.proc, ForkedProcess):
            return self.proc.told
        fd, self._verdict = self._verdict, None
        if fd is None:
            return b""
        try:
            os.set_blocking(fd, False)
            return os.read(fd, 256)
        except OSError:
            return b""
        finally:
            os.close(fd)

    async def _drain(self) -> None:
        if self._pumps:
            done, pending = await asyncio.wait(self._pumps, timeout=DRAIN_S)
            for task in pending:
                task.cancel()
            await asyncio.gather(*self._pumps, return_exceptions=True)
            self._pumps = []
        if isinstance(self.proc, ForkedProcess) and self.proc.returncode is not None:
            # An exec'd supervisor's pipes go with its transport; these are ours to close.
            self.proc.close()

    async def interrupt(self) -> None:
        """The cancel's escalation: the supervisor sends SIGINT, SIGTERM, SIGKILL to every process below it."""
        proc = self.proc
        if proc is None or self.abandoned:
            return
        if proc.returncode is None:
            self.note("interrupting the agent: SIGINT, then SIGTERM, then SIGKILL to every process it started")
            self._send("interrupt")
            try:
                await asyncio.wait_for(asyncio.shield(proc.wait()), timeout=self.interrupt_grace + self.term_grace + SUPERVISOR_SLACK_S)
            except TimeoutError:
                # The supervisor itself is stuck: end its whole session. Anything
                # that left it is re-parented above; the note says so.
                self.note(f"the agent supervisor (pid {proc.pid}) did not finish; killing its process group")
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                await proc.wait()
        await self._drain()

    def abandon(self) -> None:
        """The host is leaving: close the control pipe (the supervisor ends everything on its own) and do not wait."""
        self.abandoned = True
        self.close()

    def close(self) -> None:
        """Closing the control pipe tells the supervisor the host is gone: it ends everything."""
        if self._verdict is not None:
            os.close(self._verdict)
            self._verdict = None
        proc = self.proc
        if proc is not None and proc.stdin is not None and not proc.stdin.is_closing():
            try:
                proc.stdin.close()
            except Exception:
                pass
