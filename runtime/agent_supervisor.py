"""The leader of a command agent's process group: it dies with its host, and takes the group with it.

Run as `python -S agent_supervisor.py /bin/sh -c COMMAND` in a new session. It
starts the command in its own group and waits for it. If the host that started
it goes away (even by SIGKILL, which gives the host no chance to clean up), its
parent changes; the supervisor then sends the whole group SIGTERM and, after a
grace period, SIGKILL. Without it a killed host's agents run on beside the
resumed run, in the same workspace.

The host interrupts a cancelled node by signalling the whole group; the
supervisor ignores SIGINT and SIGTERM itself so that it can report how the
command ended. Stdlib only, imported by nothing: it starts in milliseconds.
"""

import os
import signal
import sys
import time

PARENT_POLL_S = 0.2
GRACE_S = float(os.environ.get("SWARMKIT_TERM_GRACE", "3") or 3)


def main(argv: list[str]) -> int:
    if not argv:
        print("agent_supervisor: no command", file=sys.stderr)
        return 2
    parent = os.getppid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    child = os.fork()
    if child == 0:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            print(f"agent_supervisor: cannot run {argv[0]}: {exc.strerror}", file=sys.stderr)
            os._exit(127)
    while True:
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid == child:
            break
        if os.getppid() != parent:
            return orphaned(child)
        signal.sigtimedwait({signal.SIGCHLD}, PARENT_POLL_S)
    # Whatever the command left running in its group (a stray `&`) would hold
    # the output pipes open and work on for a node that has ended.
    try:
        os.killpg(os.getpgrp(), signal.SIGTERM)
    except ProcessLookupError:
        pass
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
        return 128 + sig
    return os.WEXITSTATUS(status)


def orphaned(child: int) -> int:
    """The host is gone: nothing it started may keep working for the run."""
    group = os.getpgrp()
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        return 1
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(child, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == child:
            break
        time.sleep(0.05)
    os.killpg(group, signal.SIGKILL)  # the supervisor goes too
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
