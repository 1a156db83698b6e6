"""The parent of every process an agent starts: nothing of them outlives the node, the cancel or the lease.

Run by the host as

    python -S agent_supervisor.py --interrupt-grace S --term-grace S --fence-grace S --lease D -- ARGV...

in a session of its own. It makes itself a child subreaper
(`PR_SET_CHILD_SUBREAPER`), so every descendant of the agent stays in its
tree even after a double fork or `setsid`: orphans are re-parented to the
supervisor, not to init. It finds them by walking /proc, and ends them by pid,
whatever group or session they moved to.

Its stdin is the host's control pipe, one command a line:

    lease D       the host renewed its lease: the agents may live until D
                  (a `time.monotonic()` value; CLOCK_MONOTONIC is one clock for
                  every process of the machine)
    interrupt     the run is cancelled: SIGINT to every descendant, then
                  SIGTERM after the interrupt grace, then SIGKILL after the
                  term grace

End of file on stdin means the host is gone (killed, even by SIGKILL): every
descendant gets SIGTERM, then SIGKILL after the term grace. When the lease
deadline passes without a renewal (the host is frozen, or cut off from the
store), the agents are ended at once (SIGTERM, SIGKILL after the fence grace):
the host set D with a margin before anyone else may take the run, so they are
gone before the run can read `lost`. When the command itself exits, whatever
it left behind gets SIGTERM, then SIGKILL after the term grace, and the
supervisor exits with the command's status once nothing is left.

The agent's stdin is /dev/null; its stdout and stderr are the supervisor's
(the host's pipes). The supervisor ignores SIGINT and SIGTERM so that it can
always finish the escalation and report how the command ended. Stdlib only:
run as a script it starts in milliseconds, and the zygote (zygote_server.py)
runs the same `Supervisor` in a fork of itself, where the agent is a further
fork running a sync callable in-process (`launch`) instead of an exec.
"""

import ctypes
import os
import select
import signal
import sys
import time
from collections.abc import Callable

PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.05
# Exit status when the lease ran out and the supervisor ended the agents itself.
LEASE_EXPIRED = 75
# Exit status when the host went away.
HOST_GONE = 76



def pause(seconds: float) -> None:
    """time.sleep, through select: libfaketime (the clock-skew tests) breaks Python's absolute-deadline sleep."""
    select.select([], [], [], seconds)

def say(text: str) -> None:
    try:
        os.write(2, f"agent_supervisor: {text}\n".encode())
    except OSError:
        pass


def become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _ppid_and_state(pid: int) -> tuple[int, str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # The command name is in parentheses and may hold anything: split after the last ')'.
    rest = raw[raw.rfind(b")") + 2 :].split()
    if len(rest) < 2:
        return None
    return int(rest[1]), rest[0].decode()


def descendants(root: int) -> list[int]:
    """Every live process below `root` (zombies excluded), found through /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        got = _ppid_and_state(int(name))
        if got is None or got[1] in ("Z", "X"):
            continue
        children.setdefault(got[0], []).append(int(name))
    out: list[int] = []
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def send(pids, sig: int) -> None:
    """Signal each pid; one already gone is fine."""
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


class Supervisor:
    def __init__(
        self, argv: list[str], interrupt_grace: float, term_grace: float, fence_grace: float, lease: float | None, verdict_fd: int | None = None,
        launch: Callable[[], object] | None = None,
    ):
        self.argv = argv
        # In a zygote's fork: what the agent's process runs instead of exec'ing argv (it never returns).
        self.launch = launch
        # Where the supervisor says that it ended the agents for the lease: its exit status
        # alone cannot, an agent parking at a boundary of its own exits 75 as well.
        self.verdict_fd = verdict_fd
        self.interrupt_grace = interrupt_grace
        self.term_grace = term_grace
        self.fence_grace = fence_grace
        self.lease = lease
        self.me = os.getpid()
        self.child = -1
        self.child_status: int | None = None
        self.control_open = True
        self.buf = b""
        # Woken by SIGCHLD: the node ends when its agent exits, not at the next poll.
        self.wake_r, self.wake_w = -1, -1

    # --- processes ------------------------------------------------------------

    def reap(self) -> bool:
        """Collect every exited child: the command, and orphans re-parented to us. True while a child lives.

        A subreaper with no child at all has no descendant either: an orphan is re-parented to us
        before its parent can be reaped, so a live descendant always hangs below a child of ours.
        That answer costs one system call where a walk of /proc reads every process of the machine.
        """
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.child:
                self.child_status = status

    def signal_all(self, sig: int) -> int:
        pids = descendants(self.me)
        send(pids, sig)
        return len(pids)

    def kill_all(self) -> None:
        """SIGKILL every descendant. Stop them first, so none can fork a new one between the walk and the kill."""
        for _ in range(100):
            seen: set[int] = set()
            # Walk until nothing new shows: a fork in flight when its parent was stopped appears on the next walk.
            while more := set(descendants(self.me)) - seen:
                send(more, signal.SIGSTOP)
                seen |= more
            if not seen:
                return
            send(seen, signal.SIGKILL)
            self.wait_gone(1.0)

    def wait_gone(self, grace: float) -> bool:
        """Wait up to `grace` seconds for every descendant to be gone (reaping as they go)."""
        deadline = time.monotonic() + grace
        while True:
            if not self.reap() or not descendants(self.me):
                return True
            if time.monotonic() >= deadline:
                return False
            pause(0.02)

    def escalate(self, steps: list[tuple[int, float]]) -> None:
        if not self.reap():
            return
        for sig, grace in steps:
            if not self.signal_all(sig):
                break
            if self.wait_gone(grace):
                break
        self.kill_all()
        self.reap()

    # --- the control pipe -----------------------------------------------------

    def read_control(self, timeout: float) -> list[str]:
        watched = ([0] if self.control_open else []) + ([self.wake_r] if self.wake_r >= 0 else [])
        try:
            ready, _, _ = select.select(watched, [], [], timeout)
        except (OSError, ValueError):
            if not self.control_open:
                return []
            self.control_open = False
            return ["eof"]
        if self.wake_r in ready:
            try:
                os.read(self.wake_r, 4096)
            except OSError:
                pass
        if 0 not in ready or not self.control_open:
            return []
        try:
            chunk = os.read(0, 4096)
        except OSError:
            chunk = b""
        if not chunk:
            self.control_open = False
            return ["eof"]
        self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n")
        return [line.decode(errors="replace").strip() for line in lines if line.strip()]

    # --- the life of one command -----------------------------------------------

    def _watch_children(self) -> None:
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        # A Python handler, or the C handler never writes to the wakeup fd.
        signal.signal(signal.SIGCHLD, lambda _sig, _frame: None)

    def start(self) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        self._watch_children()
        self.child = os.fork()
        if self.child == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.close(devnull)
            # Only the supervisor writes the verdict; a fork (no exec to close them) must let go of it here.
            for fd in (self.wake_r, self.wake_w, self.verdict_fd):
                if fd is not None and fd >= 0:
                    os.close(fd)
            if self.launch is not None:
                self.launch()
                os._exit(70)  # launch never returns; if it does, nothing of the agent ran right
            try:
                os.execvp(self.argv[0], self.argv)
            except OSError as exc:
                say(f"cannot run {self.argv[0]}: {exc.strerror}")
                os._exit(127)

    def tell(self, verdict: str) -> None:
        if self.verdict_fd is None:
            return
        try:
            os.write(self.verdict_fd, verdict.encode() + b"\n")
        except OSError:
            pass

    def finish(self) -> int:
        """How the command ended: its exit status, or minus the signal that killed it (the host tells the two apart)."""
        status = self.child_status
        if status is None:
            return 1
        if os.WIFSIGNALED(status):
            return -os.WTERMSIG(status)
        return os.WEXITSTATUS(status)

    def run(self) -> int:
        self.start()
        while True:
            self.reap()
            if self.child_status is not None:
                # The command has ended, and so has the node: whatever it left
                # behind (a stray `&`, a daemon) would hold the output pipes
                # open and work on for a node that is over.
                self.escalate([(signal.SIGTERM, self.term_grace)])
                return self.finish()
            if self.lease is not None and time.monotonic() >= self.lease:
                say("the host did not renew its lease in time; ending the agent before the run can be taken elsewhere")
                self.tell("lease-expired")
                self.escalate([(signal.SIGTERM, self.fence_grace)])
                return LEASE_EXPIRED
            wait = POLL_S if self.lease is None else max(0.0, min(POLL_S, self.lease - time.monotonic()))
            for line in self.read_control(wait):
                if line == "eof":
                    self.escalate([(signal.SIGTERM, self.term_grace)])
                    return HOST_GONE
                if line == "interrupt":
                    self.escalate([(signal.SIGINT, self.interrupt_grace), (signal.SIGTERM, self.term_grace)])
                    return self.finish()
                if line.startswith("lease "):
                    try:
                        self.lease = float(line.split()[1])
                    except (IndexError, ValueError):
                        pass


def parse(argv: list[str]) -> tuple[dict, list[str]]:
    opts: dict = {"interrupt_grace": 3.0, "term_grace": 3.0, "fence_grace": 0.5, "lease": None, "verdict_fd": None}
    names = {"--interrupt-grace": "interrupt_grace", "--term-grace": "term_grace", "--fence-grace": "fence_grace", "--lease": "lease", "--verdict-fd": "verdict_fd"}
    i = 0
    while i < len(argv) and argv[i] != "--":
        key = names.get(argv[i])
        if key is None or i + 1 >= len(argv):
            raise SystemExit(f"agent_supervisor: bad option {argv[i]!r}")
        opts[key] = int(argv[i + 1]) if key == "verdict_fd" else float(argv[i + 1])
        i += 2
    return opts, argv[i + 1 :]


def exit_as(code: int) -> int:
    """Exit with `code`, or, when it is minus a signal, die of that signal as the command did."""
    if code >= 0:
        return code
    sig = -code
    signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
    os.kill(os.getpid(), sig)
    return 128 + sig


def main(argv: list[str]) -> int:
    opts, command = parse(argv)
    if not command:
        say("no command")
        return 2
    if opts["verdict_fd"] is not None:
        os.set_inheritable(opts["verdict_fd"], False)  # the supervisor's to write, not the agent's
    become_subreaper()
    return exit_as(Supervisor(command, **opts).run())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
