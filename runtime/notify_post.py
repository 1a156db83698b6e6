"""One attempt to deliver a notification: a signed POST with an overall deadline, never following a redirect."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import ipaddress
import socket
import ssl
import threading
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

from swarmkit.store import masked

from .text import plain


def signature(secret: str, body: bytes) -> str:
    """What the X-Swarmkit-Signature header carries: `sha256=` and the HMAC of the body, in hex."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


class Refused(Exception):
    """The receiver answered, but not 2xx: a failed attempt (a 3xx too: it is never followed)."""

    def __init__(self, status: int, location: str | None):
        where = f" (Location: {location})" if location else ""
        super().__init__(f"HTTP {status}{where}")
        self.status = status
        self.location = location


def cleaned(text: str, limit: int = 500) -> str:
    """What a receiver said, as the store keeps it: no password, no control character, bounded."""
    return plain(masked(text), limit)


async def _lookup(host: str, port: int) -> list[tuple]:
    """getaddrinfo on a daemon thread: a resolver that hangs is abandoned at the deadline, and
    never joined at exit (the loop's default executor would be)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return [(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, host)]
    loop = asyncio.get_running_loop()
    found: asyncio.Future[list[tuple]] = loop.create_future()

    def settle(result: object) -> None:
        if found.done():
            return
        if isinstance(result, BaseException):
            found.set_exception(result)
        else:
            found.set_result(result)  # type: ignore[arg-type]

    def work() -> None:
        result: object
        try:
            result = [(fam, addr[0]) for fam, _t, _p, _c, addr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]
        except Exception as exc:
            result = OSError(f"cannot resolve {host}: {exc}")
        try:
            loop.call_soon_threadsafe(settle, result)
        except RuntimeError:
            pass  # the loop is gone: nobody waits for the answer

    threading.Thread(target=work, name="notify-resolve", daemon=True).start()
    return await found


async def post(url: str, headers: Mapping[str, str], body: bytes, deadline_s: float) -> int:
    """POST `body` to `url` over HTTP/1.1 and return the status of a 2xx answer.

    Connecting (the name's lookup and TLS too), sending, and reading the status
    line and headers all fall within `deadline_s` (TimeoutError past it), and a
    cancel ends the attempt at once: no thread is left in a socket. Any other
    answer raises `Refused` with its status (and a 3xx's Location, which is not
    followed); a broken exchange raises OSError or ValueError.
    """
    parts = urlsplit(url)
    tls = parts.scheme == "https"
    host = parts.hostname
    if not host:
        raise ValueError("no host in the URL")
    port = parts.port or (443 if tls else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    shown_host = f"[{host}]" if ":" in host else host
    lines = [f"POST {target} HTTP/1.1", f"Host: {shown_host}" + (f":{parts.port}" if parts.port else "")]
    if parts.username is not None:
        token = base64.b64encode(f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()).decode("ascii")
        lines.append(f"Authorization: Basic {token}")
    lines += [f"{k}: {v}" for k, v in headers.items()]
    lines += [f"Content-Length: {len(body)}", "Connection: close"]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
    context = None
    if tls:
        context = ssl.create_default_context()
    writer = None
    async with asyncio.timeout(deadline_s):
        failed: OSError | None = None
        for family, address in await _lookup(host, port):
            try:
                reader, writer = await asyncio.open_connection(
                    address, port, family=family, ssl=context, server_hostname=host if tls else None,
                )
                break
            except OSError as exc:
                failed = exc  # the next address, if any; else this is what is said
        if writer is None:
            raise failed or ConnectionError(f"cannot connect to {host}")
        try:
            writer.write(request)
            await writer.drain()
            status_line = (await reader.readline()).decode("latin-1")
            words = status_line.split(None, 2)
            if len(words) < 2 or not words[0].startswith("HTTP/") or not (words[1].isdigit() and len(words[1]) == 3):
                raise ValueError(f"not an HTTP answer: {status_line.strip()[:80]!r}" if status_line else "the receiver closed the connection without an answer")
            status = int(words[1])
            location = None
            for _ in range(200):
                line = (await reader.readline()).decode("latin-1")
                if line in ("\r\n", "\n", ""):
                    break
                name, _, value = line.partition(":")
                if name.strip().lower() == "location":
                    location = cleaned(value.strip())
        finally:
            writer.transport.abort()  # nothing of the answer's body is read; no lingering close
    if not 200 <= status < 300:
        raise Refused(status, location if 300 <= status < 400 else None)
    return status
