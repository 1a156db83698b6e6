"""Whom the HTTP doors answer: the one rule for `Host` and `Origin`, shared by `swarmkit serve` and
`swarmkit-console serve`.

A page on any site can make the operator's browser talk to a loopback port: by a
"simple" cross-site request (a form post, `text/plain`, no preflight), or by rebinding
its own name to 127.0.0.1 so the browser sends `Host: evil.example`. So a door answers
only the host names it serves (loopback names and the bound address, and more only when
named), and takes an act only from its own origin or one named with `--cors-origin`.

Stdlib only: both doors import it before their web stacks.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from swarmkit.runtime.errors import UsageError

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_WILDCARD_BINDS = {"0.0.0.0", "::", ""}


def bare_host(host: str) -> str:
    """A host name or address as compared: lower case, IPv6 without its brackets."""
    return host.strip().lower().removeprefix("[").removesuffix("]")


def is_loopback(host: str) -> bool:
    """A name or address only this machine reaches: `localhost` (and `*.localhost`), 127.0.0.0/8, ::1."""
    host = bare_host(host)
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_host_name(name: str, flag: str = "--allowed-host") -> str:
    """A name given with --allowed-host: a DNS name or an address, no port, no wildcard but a leading `*.`."""
    bare = bare_host(name)
    body = bare[2:] if bare.startswith("*.") else bare
    ok = bool(body) and len(bare) <= 253 and "*" not in body
    if ok:
        try:
            ipaddress.ip_address(body)
        except ValueError:
            ok = all(part and len(part) <= 63 and all(c.isascii() and (c.isalnum() or c == "-") for c in part) for part in body.split("."))
    if not ok:
        raise UsageError(f"{flag} {name!r}: expected a host name or address without a port (e.g. swarmkit.example.com, 10.0.0.5 or *.example.com)")
    return bare


def allowed_hosts(bound: str, extra: Iterable[str] = ()) -> list[str]:
    """The `Host` names a door answers: loopback names, the address it is bound to, and those named.

    A wildcard bind (0.0.0.0, ::) answers on every address, so the names clients use must be
    given: with none, any name would do, and rebinding would be open again.
    """
    named = [check_host_name(h) for h in extra]
    b = bare_host(bound)
    if b in _WILDCARD_BINDS and not named:
        shown = f"[{bound}]" if ":" in bound else bound
        raise UsageError(
            f"--host {shown} answers on every address of this machine: name the host names clients use with "
            "--allowed-host NAME (repeatable), so that a web page cannot reach the API by rebinding its own name"
        )
    hosts = list(LOOPBACK_NAMES)
    if b not in _WILDCARD_BINDS:
        hosts.append(b)
    hosts.extend(named)
    # Starlette keeps the brackets of an IPv6 literal in the name it compares: both spellings.
    hosts.extend(f"[{h}]" for h in list(hosts) if ":" in h)
    return list(dict.fromkeys(hosts))


def host_allowed(header: str | None, hosts: Iterable[str]) -> bool:
    """Whether a `Host` header names one of `hosts` (any port: the port does not change who sent it)."""
    if not header:
        return False
    parts = urlsplit(f"//{header}")
    try:
        name = parts.hostname or ""
        parts.port  # noqa: B018  (a port that does not parse is a bad header)
    except ValueError:
        return False
    name = bare_host(name)
    for pattern in hosts:
        pattern = bare_host(pattern)
        if name == pattern or (pattern.startswith("*.") and name.endswith(pattern[1:])):
            return True
    return False


def check_origin(text: str) -> str:
    """An origin given with --cors-origin: scheme://host[:port], no path."""
    parts = urlsplit(text.strip())
    try:
        parts.port  # noqa: B018
    except ValueError:
        parts = urlsplit("")
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") or parts.query or parts.fragment:
        raise UsageError(f"--cors-origin {text!r}: expected an origin such as https://dashboard.example.com (scheme, host and port only)")
    return _origin_key(parts.scheme, parts.hostname, parts.port)


def _origin_key(scheme: str, host: str, port: int | None) -> str:
    default = 443 if scheme == "https" else 80
    host = bare_host(host)
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}" + (f":{port}" if port and port != default else "")


def origin_allowed(origin: str, host_header: str | None, scheme: str, cors_origins: Iterable[str]) -> bool:
    """Whether `Origin` is this door itself (the address the request was sent to) or one named with --cors-origin.

    `Origin: null` (a sandboxed frame, a file: page) is never allowed.
    """
    parts = urlsplit(origin.strip())
    try:
        key = _origin_key(parts.scheme, parts.hostname or "", parts.port)
    except ValueError:
        return False
    if not parts.scheme or not parts.hostname:
        return False
    if key in set(cors_origins):
        return True
    if not host_header:
        return False
    here = urlsplit(f"//{host_header}")
    try:
        # Behind a TLS proxy the browser's origin is https while this door sees http: the host and port decide.
        return key in {_origin_key(s, here.hostname or "", here.port) for s in {scheme, "http", "https"}} and parts.scheme in ("http", "https")
    except ValueError:
        return False
