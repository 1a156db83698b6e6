"""The server of `swarmkit-console serve` (console/web.py): textual-serve's, with a guard in front.

Imported by web.py once its checks pass: textual-serve and aiohttp, the web extra, load here and nowhere else.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import re
import signal
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web
from textual_serve.server import Server

from swarmkit.api.http_trust import allowed_hosts, check_host_name, host_allowed, origin_allowed

# What a Host header may look like: a name, an IPv4 address or a bracketed IPv6 one, and a port.
HOST_HEADER = re.compile(r"^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$")


def cookie_name(port: int) -> str:
    # Cookies ignore ports: one name per port keeps two servers on one host apart.
    return f"swarmkit_console_{port}"


class Guard:
    """The aiohttp middleware in front of textual-serve's routes: token, Host and Origin checks."""

    __middleware_version__ = 1  # aiohttp's mark of a new-style middleware (what @web.middleware sets)

    def __init__(self, token: str | None, *, port: int, public_url: str | None, hosts: list[str] | None = None) -> None:
        self.token = token.encode("utf-8") if token is not None else None
        self.hosts = list(hosts or allowed_hosts("127.0.0.1"))
        if public_url and urlsplit(public_url).hostname:
            self.hosts.append(check_host_name(urlsplit(public_url).hostname or "", "--public-url"))
        self.cookie = cookie_name(port)
        # The cookie carries a value derived from the token, never the token itself.
        self.cookie_value = hmac.new(self.token, b"swarmkit-console session", hashlib.sha256).hexdigest() if self.token else ""
        self.public_netloc = urlsplit(public_url).netloc.lower() if public_url else None
        self.secure_cookie = bool(public_url and public_url.lower().startswith("https:"))

    def _matches(self, given: str | None, expected: bytes) -> bool:
        return given is not None and hmac.compare_digest(given.encode("utf-8"), expected)

    def _bearer(self, request: Any) -> str | None:
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        return value.strip() if scheme.lower() == "bearer" and value.strip() else None

    async def __call__(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        host = request.headers.get("Host", "")
        if not HOST_HEADER.match(host):
            return web.Response(status=400, text="bad Host header\n")
        # A page on another site that resolves its own name to 127.0.0.1 is not let in.
        if not host_allowed(host, self.hosts):
            return web.Response(status=400, text="refused: not a Host name this console serves (--allowed-host names more)\n")
        if request.headers.get("Upgrade", "").lower() == "websocket":
            origin = request.headers.get("Origin")
            ours = origin is not None and (
                origin_allowed(origin, host, request.scheme, ()) or urlsplit(origin).netloc.lower() == self.public_netloc
            )
            if (origin is not None and not ours) or (request.headers.get("Sec-Fetch-Site", "").lower() == "cross-site" and not ours):
                return web.Response(status=403, text="refused: a websocket from another site\n")
        if self.token is None:
            return await handler(request)
        query_token = request.query.get("token")
        if query_token is not None:
            if not self._matches(query_token, self.token):
                return web.Response(status=403, text="refused: wrong token\n")
            # Good: set the cookie and drop the token from the address bar.
            rest = [(k, v) for k, v in request.query.items() if k != "token"]
            target = request.rel_url.with_query(rest) if rest else request.rel_url.with_query(None)
            resp = web.HTTPSeeOther(location=str(target))
            resp.set_cookie(self.cookie, self.cookie_value, httponly=True, samesite="Lax", secure=self.secure_cookie, path="/")
            return resp
        bearer = self._bearer(request)
        if bearer is not None:
            if self._matches(bearer, self.token):
                return await handler(request)
            return web.Response(status=403, text="refused: wrong token\n")
        cookie = request.cookies.get(self.cookie)
        if cookie is not None:
            if self._matches(cookie, self.cookie_value.encode("ascii")):
                return await handler(request)
            return web.Response(status=403, text="refused: wrong token\n")
        return web.Response(
            status=401,
            text="a token is needed: open this address with ?token=TOKEN, or send Authorization: Bearer TOKEN\n",
            headers={"WWW-Authenticate": 'Bearer realm="swarmkit-console"'},
        )


def make_server(
    command: str, *, host: str, port: int, title: str, token: str | None, public_url: str | None, say: Callable[[str], None], hosts: list[str] | None = None,
) -> Any:
    """textual-serve's Server with the guard in front and a start-up line of our own."""
    guard = Guard(token, port=port, public_url=public_url, hosts=hosts or allowed_hosts(host))

    class ConsoleServer(Server):
        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            app.middlewares.append(guard)
            return app

        async def handle_index(self, request: web.Request) -> Any:
            # The page names its websocket by an absolute URL: the address this
            # browser used (the guard has checked the Host header), unless told.
            if public_url is None:
                self.public_url = f"{request.scheme}://{request.host}"
            return await super().handle_index(request)

        async def on_startup(self, app: web.Application) -> None:
            pass

        def serve(self, debug: bool = False) -> None:
            self.debug = debug
            self.initialize_logging()
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self.request_exit)
            web.run_app(self._make_app(), host=self.host, port=self.port, handle_signals=False, loop=loop, print=lambda *a: say(shown))

    shown_host = f"[{host}]" if ":" in host else host
    shown = f"serving the console at http://{shown_host}:{port}/"
    return ConsoleServer(command, host=host, port=port, title=title, public_url=public_url)
