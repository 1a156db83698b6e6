"""What a notifier is configured with: `--notify URL` (repeatable), the shared secret and the
SWARMKIT_NOTIFY_* timings, checked before any work."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from swarmkit.store import masked

from .errors import UsageError
from .quantities import BadValue, Count
from .settings import _bad_env, env_number

SECRET_ENV = "SWARMKIT_NOTIFY_SECRET"
TIMEOUT_ENV = "SWARMKIT_NOTIFY_TIMEOUT"
ATTEMPTS_ENV = "SWARMKIT_NOTIFY_ATTEMPTS"
GRACE_ENV = "SWARMKIT_SHUTDOWN_GRACE"
# The overall deadline of one attempt (connect, send, read the answer's head), in seconds.
NOTIFY_TIMEOUT_S = 10.0
# Attempts before a delivery is a dead letter: with the backoff below, about 20 minutes of failures.
NOTIFY_ATTEMPTS = 12
# Once signalled, how long a worker or `serve` gives the attempts in flight.
SHUTDOWN_GRACE_S = 10.0


@dataclass(frozen=True)
class NotifyConfig:
    """What `--notify URL` (repeatable) and the SWARMKIT_NOTIFY_* variables configure."""

    urls: tuple[str, ...]
    secret: str
    # The overall deadline of one attempt: connect, send and read the answer's head.
    timeout_s: float = NOTIFY_TIMEOUT_S
    # Attempts before a delivery is a dead letter.
    attempts: int = NOTIFY_ATTEMPTS
    # How long a shutdown gives the attempts in flight, from its signal.
    grace_s: float = SHUTDOWN_GRACE_S

    @property
    def receivers(self) -> dict[str, str]:
        """Each receiver as the store and the logs name it (its URL, password masked) -> its URL."""
        return {masked(u): u for u in self.urls}





def _count_env(name: str, default: int, most: int) -> int:
    """A whole number from the environment, by the rule of every flag's count (quantities.Count)."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return Count(1, most).parse(raw)
    except BadValue as exc:
        _bad_env(f"{name}={raw!r} {exc}")


def notify_config(urls: list[str] | str | None, environ: Mapping[str, str]) -> NotifyConfig | None:
    """What a verb's --notify (repeatable) configures, checked before any work; the secret comes from
    the environment, never argv. Bad timing variables: one line naming the variable, exit 2."""
    if isinstance(urls, str):
        urls = [urls]
    urls = [u for u in urls or () if u]
    if not urls:
        return None
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"--notify {masked(url)!r}: expected an http:// or https:// URL")
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018  (a port out of range raises here, not at the first delivery)
        except ValueError as exc:
            raise UsageError(f"--notify {masked(url)!r}: {exc}") from None
        if not parts.hostname:
            raise UsageError(f"--notify {masked(url)!r}: no host")
    shown = [masked(u) for u in urls]
    if len(set(shown)) != len(shown):
        raise UsageError("--notify: the same receiver named twice (URLs that differ only in their password count as one)")
    secret = environ.get(SECRET_ENV, "")
    if len(secret) < 16:
        raise UsageError(f"--notify needs a shared secret of at least 16 characters in {SECRET_ENV} (the receiver checks X-Swarmkit-Signature with it)")
    return NotifyConfig(
        urls=tuple(urls), secret=secret,
        timeout_s=env_number(TIMEOUT_ENV, NOTIFY_TIMEOUT_S, most=3600.0),
        attempts=_count_env(ATTEMPTS_ENV, NOTIFY_ATTEMPTS, most=1000),
        grace_s=shutdown_grace_s(),
    )


def shutdown_grace_s() -> float:
    """SWARMKIT_SHUTDOWN_GRACE: how long a worker or `serve` gives its notification attempts in flight once signalled."""
    return env_number(GRACE_ENV, SHUTDOWN_GRACE_S, most=3600.0)
