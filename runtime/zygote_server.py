"""The zygote: a warm interpreter that forks each sync `call` agent's supervisor, so a node costs a fork, not two interpreter starts.

Started by the host (zygote.py) as

    python -m swarmkit.runtime.zygote_server SOCKET_FD HOST_PID [pdeathsig]

with the runtime's light modules (call_child's, the supervisor's) imported
once, and never an agent's own module: that is imported afresh in each
agent's process, so an edit between nodes and each node's sys.path hold as
they did with an exec.

It reads one request at a time from its end of a SOCK_SEQPACKET pair: a JSON
object (`argv` or `call`, `cwd`, `env`, `opts`) with four descriptors passed
by SCM_RIGHTS: the read end of the control pipe and the write ends of stdout,
stderr and the verdict pipe. It forks, answers on the verdict pipe (`pid N`,
or `error ERRNO TEXT`: the host awaits it on its loop, nothing blocks) and
closes its copies. The fork is the supervisor: in a session of its own, a
child subreaper, with exactly those four descriptors as 0, 1, 2 and 3, the
node's environment and folder, it runs `agent_supervisor.Supervisor`, whose
agent is a further fork running call_child's `main` in-process (or an exec of
`argv`). The supervisor's status goes to the host on the verdict pipe too
(`status N`, minus a signal's number), since the host is not its parent.

What a fork does not renew: the interpreter's str hash seed, shared by every
agent one zygote forks (an exec drew one each); `random` is re-seeded.

It stays single-threaded (a fork from a threaded process may inherit a held
lock), ignores SIGCHLD so the kernel reaps the supervisors it forked, and
leaves when the host does: end of file on its socket, and SIGKILL by
PR_SET_PDEATHSIG when the host started it from its main thread.
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import importlib
import json
import os
import signal
import socket
import sys
import traceback
from typing import Any, NoReturn

from swarmkit.runtime import call_child
from swarmkit.runtime.agent_supervisor import Supervisor, become_subreaper

# Big enough for any environment a node gets; a larger request fails and the host execs that node.
MAX_REQUEST = 1 << 20
PR_SET_PDEATHSIG = 1
# The supervisor's own descriptors in its fork: the host's pipes, then the verdict.
VERDICT_FD = 3
# What an interpreter started for `python -m` puts first on sys.path: the folder it starts in.
_BASE_PATH: list[str] = []


def _die_with_host(host_pid: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != host_pid:
        os._exit(0)  # the host died before the death signal was armed


def _exit_code(exc: SystemExit) -> int:
    """What the interpreter exits with for a SystemExit that reached the top."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(f"{code}\n")
    except Exception:
        pass
    return 1


def _finalize() -> None:
    """What Py_Finalize would do before the exit: wait for the agent's threads, run its atexit, flush."""
    import threading  # late: the zygote itself never starts a thread; an agent may have

    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        try:
            shutdown()
        except BaseException:
            pass
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def run_call(io_dir: str, cwd: str) -> NoReturn:
    """The agent's process, a fork of its supervisor: call_child's main as `python -m swarmkit.runtime.call_child IO_DIR` runs it."""
    # The dispositions an interpreter starts with (the supervisor ignores SIGINT and SIGTERM).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    random = sys.modules.get("random")
    if random is not None:
        random.seed()  # os.register_at_fork does it too; no two agents may share a stream
    safe_path = bool(os.environ.get("PYTHONSAFEPATH"))
    sys.path[:] = ([] if safe_path else [cwd]) + _BASE_PATH
    # The zygote listed folders long ago: a module written since must be found.
    importlib.invalidate_caches()
    sys.argv = [call_child.__file__ or "call_child.py", io_dir]
    atexit._clear()  # the zygote's, not the agent's
    code = 1
    try:
        code = call_child.main(io_dir)
    except SystemExit as exc:
        code = _exit_code(exc)
    except KeyboardInterrupt:
        traceback.print_exc()
        _finalize()
        # As the interpreter does: an uncaught KeyboardInterrupt ends the process by SIGINT.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        os._exit(130)
    except BaseException:
        traceback.print_exc()
        code = 1
    _finalize()
    os._exit(code)


def _supervise(sock: socket.socket, request: dict[str, Any], fds: list[int]) -> NoReturn:
    """The fork that becomes the node's supervisor. Never returns."""
    code = 70
    try:
        os.close(sock.detach())
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        control, out, err, verdict = fds
        for fd, to in ((control, 0), (out, 1), (err, 2), (verdict, VERDICT_FD)):
            if fd != to:
                os.dup2(fd, to)
        # Nothing of the zygote's (its socket, another node's pipes) may stay open below the node.
        os.closerange(VERDICT_FD + 1, os.sysconf("SC_OPEN_MAX"))
        os.set_inheritable(VERDICT_FD, False)
        become_subreaper()
        cwd, env = request["cwd"], request["env"]
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        opts = request["opts"]
        call = request.get("call")
        launch = None if call is None else (lambda: run_call(call, cwd))
        supervisor = Supervisor(
            list(request.get("argv") or ["call_child"]), float(opts["interrupt_grace"]), float(opts["term_grace"]),
            float(opts["fence_grace"]), None if opts.get("lease") is None else float(opts["lease"]), VERDICT_FD, launch=launch,
        )
        code = supervisor.run()
        supervisor.tell(f"status {code}")
    except BaseException as exc:
        try:
            os.write(2, f"agent_supervisor: the zygote's fork failed: {type(exc).__name__}: {exc}\n".encode())
            os.write(VERDICT_FD, f"status {code}\n".encode())
        except OSError:
            pass
    os._exit(code if code >= 0 else 128 - code)


class ZygoteServer:
    """One request at a time: fork a supervisor with the passed pipes, say its pid on the verdict pipe."""

    def __init__(self, sock: socket.socket):
        self.sock = sock

    def serve(self) -> None:
        while True:
            raw, fds, _flags, _addr = socket.recv_fds(self.sock, MAX_REQUEST, 4)
            if not raw:
                for fd in fds:
                    os.close(fd)
                return  # the host is gone
            try:
                self._one(raw, fds)
            finally:
                for fd in fds:
                    os.close(fd)

    def _one(self, raw: bytes, fds: list[int]) -> None:
        if len(fds) != 4:
            return  # no verdict pipe to answer on: the host's read of it ends without a pid
        try:
            request = json.loads(raw)
            cwd = request["cwd"]
            if not os.path.isdir(cwd):
                raise FileNotFoundError(2, "No such folder", cwd)
            pid = os.fork()
            if pid == 0:
                _supervise(self.sock, request, fds)
        except OSError as exc:
            answer = f"error {exc.errno or 0} {exc}"
        except (ValueError, KeyError, TypeError) as exc:
            answer = f"error 0 bad request: {exc}"
        else:
            answer = f"pid {pid}"
        try:
            os.write(fds[3], answer.encode(errors="replace") + b"\n")
        except OSError:
            pass  # the host let go of the node already


def main(argv: list[str]) -> int:
    fd, host_pid = int(argv[0]), int(argv[1])
    # The kernel reaps the supervisors: the host learns their status from their verdict pipes.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if "pdeathsig" in argv[2:]:
        _die_with_host(host_pid)
    # `python -m` put the zygote's own folder first; each agent puts its own there instead.
    _BASE_PATH[:] = sys.path[1:]
    sock = socket.socket(fileno=fd)
    # What is imported now lives as long as the zygote: out of the collector's reach, a fork's garbage
    # collection does not write to (and so copy) every page of it.
    gc.collect()
    gc.freeze()
    try:
        ZygoteServer(sock).serve()
    except ConnectionResetError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
