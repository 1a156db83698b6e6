"""The host's zygote: one warm process per hosting process that forks each sync `call` agent (zygote_server.py).

Started on the first sync node and again after it died; a node it cannot take
(no zygote would start, it did not answer, the node's environment would start
an interpreter differently, or SWARMKIT_ZYGOTE=0) is exec'd as before, and the
host says why once. What a node gets from a fork is what it got from an exec:
its own session under a subreaper supervisor, the same pipes, environment and
folder, and its callable's module imported afresh.

The host sends requests over a SOCK_SEQPACKET pair (a message is one
request, with its pipes); the answer, the supervisor's pid, comes on the
node's own verdict pipe, awaited on the host's loop (forked_process.py), so a
slow or stuck zygote never holds the loop. The host's end is close-on-exec, so
when the host dies the zygote reads end of file and leaves (and, started from
the main thread, gets SIGKILL from PR_SET_PDEATHSIG at once).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .agent_env import agent_env

log = logging.getLogger("swarmkit.zygote")

# "0": every sync call agent starts interpreters of its own, as before the zygote (the bench's "before").
SWITCH = "SWARMKIT_ZYGOTE"
# How long a request may wait for its answer (the first one's includes the zygote's start) before the node is exec'd.
ANSWER_S = 30.0
# After a zygote that never answered, how long nodes are exec'd before another is tried.
RETRY_AFTER_S = 30.0
# Variables that decide how an interpreter starts (sys.path, flags, stdio's encoding): a node whose values
# differ from the zygote's would have started another interpreter, so it is exec'd.
_STARTUP_NAMES = frozenset({"HOME", "LANG", "LC_ALL", "LC_CTYPE"})


def startup_vars(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith("PYTHON") or k in _STARTUP_NAMES}


class Zygote:
    """The hosting process's zygote: started lazily, restarted when it died, passed over when it fails."""

    def __init__(self) -> None:
        self.python = sys.executable
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._startup: dict[str, str] = {}
        self._answered = False
        self._failed_at: float | None = None
        self._said: set[str] = set()

    @property
    def pid(self) -> int | None:
        """The zygote's pid while one runs (for the tests and the bench)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def _once(self, why: str) -> None:
        if why not in self._said:
            self._said.add(why)
            log.warning("sync call agents start an interpreter of their own (slower, contained the same): %s", why)

    def send(self, request: dict[str, Any], fds: list[int]) -> subprocess.Popen | None:
        """Hand the zygote `request` with `fds` (control, stdout, stderr, verdict): the zygote it went to (to say
        how it answered: `answered`, `failed`), or None when the node must be exec'd."""
        if os.environ.get(SWITCH, "1") == "0":
            return None
        payload = json.dumps(request).encode()
        with self._lock:
            for _attempt in range(2):
                if self._proc is not None and self._proc.poll() is not None:
                    log.info("the zygote (pid %d) had exited (%s); starting another", self._proc.pid, self._proc.returncode)
                    self._stop()
                if self._proc is None:
                    if self._failed_at is not None and time.monotonic() - self._failed_at < RETRY_AFTER_S:
                        return None
                    try:
                        self._start()
                    except OSError as exc:
                        self._failed_at = time.monotonic()
                        self._once(f"the zygote did not start: {exc}")
                        return None
                if startup_vars(request["env"]) != self._startup:
                    self._once("a node's environment sets interpreter variables (PYTHON*, HOME, LANG, LC_ALL, LC_CTYPE) other than the zygote's")
                    return None
                assert self._sock is not None
                try:
                    socket.send_fds(self._sock, [payload], fds)
                    return self._proc
                except OSError as exc:
                    # It died since the poll above: once more with a new one (a request too big for the socket fails again).
                    code = self._stop()
                    if not self._answered:
                        self._failing(f"the zygote did not take a request ({exc}; its exit status {code})")
                        return None
                    log.info("the zygote did not take a request (%s; its exit status %s); starting another", exc, code)
            return None

    def answered(self, proc: subprocess.Popen) -> None:
        with self._lock:
            if proc is self._proc:
                self._answered = True

    def failed(self, proc: subprocess.Popen, why: str) -> None:
        """The zygote `proc` did not answer a request: end it; the next node starts another, or, when it never answered, waits a while."""
        with self._lock:
            if proc is not self._proc:
                return
            code = self._stop()
            if not self._answered:
                self._failing(f"the zygote did not answer ({why}; its exit status {code})")
            else:
                log.warning("the zygote did not answer a request (%s; its exit status %s); this node starts an interpreter, the next a new zygote", why, code)

    def _failing(self, why: str) -> None:
        self._failed_at = time.monotonic()
        self._once(why)

    def _start(self) -> None:
        host_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            startup = startup_vars(agent_env(Path("/"), python=True))
            argv = [self.python, "-m", "swarmkit.runtime.zygote_server", str(zygote_end.fileno()), str(os.getpid())]
            # PR_SET_PDEATHSIG fires when the starting *thread* ends: only the main thread lives as long as the host.
            if threading.current_thread() is threading.main_thread():
                argv.append("pdeathsig")
            self._proc = subprocess.Popen(
                argv, cwd="/", env=startup, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=(zygote_end.fileno(),),
                # Out of the terminal's reach: the operator's Ctrl-C is the host's to handle.
                start_new_session=True,
            )
        except BaseException:
            host_end.close()
            raise
        finally:
            zygote_end.close()
        # Never wait on the loop's thread: the zygote reads requests as they come, a full socket is a stuck zygote.
        host_end.setblocking(False)
        self._sock, self._startup, self._answered, self._failed_at = host_end, startup, False, None

    def _stop(self) -> int | None:
        """End this zygote (the supervisors it forked live on: their pipes are the host's). Its exit status."""
        sock, proc = self._sock, self._proc
        self._sock, self._proc = None, None
        if sock is not None:
            sock.close()
        if proc is None:
            return None
        if proc.poll() is None:
            proc.kill()
        return proc.wait()

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _forget(self) -> None:
        """In a fork of the host: the zygote is the parent's. Let go of the socket so its end of file still comes."""
        self._lock = threading.Lock()
        if self._sock is not None:
            self._sock.close()
        self._sock, self._proc = None, None


_ZYGOTE = Zygote()
os.register_at_fork(after_in_child=_ZYGOTE._forget)


def zygote() -> Zygote:
    """This hosting process's zygote."""
    return _ZYGOTE
