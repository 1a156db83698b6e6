"""A supervisor the zygote forked, seen by the host as it sees one it exec'd (asyncio.subprocess.Process).

The host is not its parent and cannot wait for it. Everything comes on the
verdict pipe: first the zygote's answer (`pid N`, or `error ERRNO TEXT`), and
the supervisor's status (`status N`, minus a signal's number) just before it
exits; the end of that pipe is its exit. A supervisor killed before it could
say (the host's SIGKILL to its group when it hung) reads as killed by SIGKILL.
An end with no pid is a zygote that never took the request.
"""

from __future__ import annotations

import asyncio
import os
import signal

# The stream limit asyncio's subprocess pipes have: the same back-pressure as an exec'd agent's.
_LIMIT = 2**16


class ZygoteRefused(OSError):
    """The zygote could not fork for this node, for a reason an exec would have met too (its folder is gone)."""


class _Told(asyncio.Protocol):
    """Collects the verdict pipe until its end; settles `answer` with the zygote's."""

    def __init__(self, answer: asyncio.Future[int], ended: asyncio.Future[None]):
        self.data = bytearray()
        self.answer = answer
        self.ended = ended

    def data_received(self, data: bytes) -> None:
        self.data += data[: 4096 - len(self.data)]
        if self.answer.done():
            return
        for line in bytes(self.data).splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break
            word, _, rest = line.strip().partition(b" ")
            if word == b"pid":
                self.answer.set_result(int(rest))
            elif word == b"error":
                number, _, text = rest.partition(b" ")
                self.answer.set_exception(ZygoteRefused(int(number or 0), text.decode(errors="replace")))
            else:
                continue
            return

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.answer.done():
            self.answer.set_exception(ConnectionError("the verdict pipe ended without an answer"))
        if not self.ended.done():
            self.ended.set_result(None)


class ForkedProcess:
    """pid, stdin (the control pipe), stdout, stderr, returncode and wait(), as asyncio gives them for an exec."""

    def __init__(self) -> None:
        self.pid = 0
        self.returncode: int | None = None
        self.stdin: asyncio.WriteTransport | None = None
        self.stdout: asyncio.StreamReader | None = None
        self.stderr: asyncio.StreamReader | None = None
        self._told: _Told | None = None
        self._transports: list[asyncio.BaseTransport] = []

    @classmethod
    async def attach(cls, control: int, out: int, err: int, verdict: int) -> ForkedProcess:
        """The host's ends of the pipes, on this loop. Owns (and closes) the four descriptors from here on."""
        loop = asyncio.get_running_loop()
        files = [os.fdopen(control, "wb", buffering=0), os.fdopen(out, "rb", buffering=0), os.fdopen(err, "rb", buffering=0), os.fdopen(verdict, "rb", buffering=0)]
        self = cls()
        try:
            stdin, _ = await loop.connect_write_pipe(asyncio.Protocol, files[0])
            self._transports.append(stdin)
            self.stdin = stdin
            self.stdout = await self._reader(loop, files[1])
            self.stderr = await self._reader(loop, files[2])
            told = _Told(loop.create_future(), loop.create_future())
            transport, _ = await loop.connect_read_pipe(lambda: told, files[3])
            self._transports.append(transport)
            self._told = told
        except BaseException:
            self.close()
            for f in files:
                f.close()
            raise
        return self

    async def _reader(self, loop: asyncio.AbstractEventLoop, pipe) -> asyncio.StreamReader:
        reader = asyncio.StreamReader(limit=_LIMIT, loop=loop)
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), pipe)
        self._transports.append(transport)
        return reader

    async def forked(self, timeout: float) -> int:
        """The supervisor's pid, once the zygote has forked it. Raises ZygoteRefused (its errno), ConnectionError
        (the zygote let go of the request) or TimeoutError."""
        assert self._told is not None
        self.pid = await asyncio.wait_for(asyncio.shield(self._told.answer), timeout)
        return self.pid

    @property
    def told(self) -> bytes:
        """What the supervisor wrote on its verdict pipe."""
        return bytes(self._told.data) if self._told is not None else b""

    async def wait(self) -> int:
        if self.returncode is None:
            assert self._told is not None
            await asyncio.shield(self._told.ended)
            self.returncode = -signal.SIGKILL
            for line in self.told.splitlines():
                if line.startswith(b"status "):
                    try:
                        self.returncode = int(line.split()[1])
                    except (IndexError, ValueError):
                        pass
        return self.returncode

    def close(self) -> None:
        """Let go of every pipe (after the output drained, or when it never will)."""
        for transport in self._transports:
            transport.close()
        self._transports = []
