"""Timings of the runtime, read from the environment so tests and operators can tune them."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from .exit_code import ExitCode
from .quantities import YEAR_S, BadValue, number

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    from typing import NoReturn

# The longest lease a host may hold: a year. A host writes its lease on the rows it claims, and
# every judge adds it to a heartbeat in SQL: a lease of inf, nan or 1e13 s (past PostgreSQL's
# intervals, about 9.2e12 s) would make every judge of the store fail "interval out of range".
MAX_LEASE_S = YEAR_S
# The most log text a run may write: a pebibyte is no cap anyone meant to reach.
MAX_LOG_CAP_BYTES = float(2**50)


def env_number(name: str, default: float, most: float = YEAR_S, unit: str = "seconds") -> float:
    """A timing (or a size) from the environment: unset or empty is `default`; anything else is a finite number
    more than zero and at most `most`, or bad usage said in one line naming the variable. The one rule of
    every flag's number too (quantities.number)."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return number(raw, most=most, unit=unit)
    except BadValue as exc:
        _bad_env(f"{name}={raw!r} {exc}")


def _bad_env(words: str) -> NoReturn:
    """A timing variable that cannot be used: bad usage (exit 2), said in one line."""
    print(f"swarmkit: {words}", file=sys.stderr)
    raise SystemExit(ExitCode.USAGE)


def looks_apart(poll_s: float, lease_s: float) -> float:
    """How often lost runs are looked for, by a worker (`Settings.look_every_s`) or a reader (the
    console's poll): a part of the lease, and never more often than the poll."""
    return max(poll_s, lease_s / 3)


@dataclass(frozen=True)
class Settings:
    # How often a host proves it is alive and looks for a cancel.
    heartbeat_s: float = 1.0
    # A running row whose heartbeat is older than this is lost.
    lease_s: float = 15.0
    # SIGINT, then SIGTERM after this, then SIGKILL after term_grace_s.
    interrupt_grace_s: float = 3.0
    term_grace_s: float = 3.0
    # How often a worker looks for queued runs.
    poll_s: float = 0.5
    # A run's log lines (bytes of text) past which further lines are counted and dropped.
    log_cap_bytes: float = 64 * 1024 * 1024
    # The wait before the second try of a timed-out node; it doubles for each try after (at most a minute).
    retry_backoff_s: float = 1.0
    # A running run with no sign of work this long shows stalled (a flow's `stall_after` wins).
    stall_after_s: float = 120.0

    @property
    def lease_margin_s(self) -> float:
        """How long before anyone may take a run its host's agents are already dead, if the host cannot renew."""
        return max(2 * self.heartbeat_s, 0.25 * self.lease_s)

    @property
    def look_every_s(self) -> float:
        """How often a worker judges lost runs, renews its own row and, where it listens (store/wakeups.py),
        looks for queued runs unwoken: a part of the lease, so a dead host's runs are marked within it and a
        bit, whatever the fleet's size (readers mark them as they read, too)."""
        return looks_apart(self.poll_s, self.lease_s)

    @property
    def fence_grace_s(self) -> float:
        """SIGTERM to SIGKILL when a lapsed lease ends the agents: inside the margin."""
        return self.lease_margin_s / 2

    @classmethod
    def from_env(cls) -> Settings:
        return cls(
            heartbeat_s=env_number("SWARMKIT_HEARTBEAT", cls.heartbeat_s),
            lease_s=env_number("SWARMKIT_LEASE", cls.lease_s, MAX_LEASE_S),
            interrupt_grace_s=env_number("SWARMKIT_INTERRUPT_GRACE", cls.interrupt_grace_s),
            term_grace_s=env_number("SWARMKIT_TERM_GRACE", cls.term_grace_s),
            poll_s=env_number("SWARMKIT_POLL", cls.poll_s),
            log_cap_bytes=env_number("SWARMKIT_LOG_CAP", cls.log_cap_bytes, MAX_LOG_CAP_BYTES, "bytes"),
            retry_backoff_s=env_number("SWARMKIT_RETRY_BACKOFF", cls.retry_backoff_s),
            stall_after_s=env_number("SWARMKIT_STALL_AFTER", cls.stall_after_s),
        )


def host_name() -> str:
    """This machine's name as the store knows it: SWARMKIT_HOST, else the hostname.

    Workspaces belong to the host that made them, by this name: two machines
    that share a hostname (containers, cloned VMs) must set SWARMKIT_HOST apart.
    """
    # uname's node name is gethostname()'s on POSIX, without loading socket into every one-shot verb.
    return os.environ.get("SWARMKIT_HOST") or os.uname().nodename


def application_name(role: str) -> str:
    """What PostgreSQL's `pg_stat_activity` shows of this process: `swarmkit-worker@HOST` and so on
    (`role`: worker, console, serve or cli), so a DBA can tell Swarmkit's connections apart."""
    return f"swarmkit-{role}@{host_name()}"


def default_actor() -> str:
    """Who a human act is recorded as: SWARMKIT_ACTOR, else user@host."""
    actor = os.environ.get("SWARMKIT_ACTOR")
    if actor:
        return actor
    try:
        import getpass  # late: it loads termios; only an act names its actor

        user = getpass.getuser()
    except Exception:  # no passwd entry in some containers
        user = str(os.getuid())
    return f"{user}@{host_name()}"

