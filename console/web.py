"""`swarmkit-console serve`: the console in a browser, through textual-serve.

textual-serve runs one command per browser session (a websocket) and relays
its terminal. That command is `swarmkit-console` itself (this interpreter,
`-m swarmkit.console.cli`) on the same store and workspace, with
`--read-only` unless `--allow-acts`: the browser gets the console the
terminal gets, built by the same `make_app`, and nothing else.

textual-serve has no authentication of its own, so console/web_server.py wraps
its aiohttp application in a middleware (`Guard`):

- With a token (`SWARMKIT_CONSOLE_TOKEN`, or `--token-file`), every request
  must carry it: `Authorization: Bearer TOKEN`, or `?token=TOKEN` (which
  answers with a redirect that drops it from the address and sets an HttpOnly
  cookie), or that cookie. The cookie holds an HMAC of the token, not the
  token. Every comparison is constant-time (`hmac.compare_digest`). Missing:
  401; wrong: 403.
- Without a token it binds loopback only (another `--host` is refused, exit
  2).
- Always: it answers only requests whose `Host` is one it serves (loopback
  names, the bound address, --public-url's and those named with
  --allowed-host: api/http_trust.py, the rule `swarmkit serve` uses), so
  that a web page cannot reach it through DNS rebinding (400); and a websocket
  whose `Origin` is not this console's own, or that says `Sec-Fetch-Site:
  cross-site`, is refused (403), so a page open in the operator's browser
  cannot drive the console.

textual-serve (and aiohttp under it) is imported by web_server.py only, which this
module imports once its checks pass, and this module only for `serve`: no other use
of `swarmkit-console` starts slower.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from swarmkit.api.http_trust import allowed_hosts, is_loopback
from swarmkit.cli.quantities import Port, Seconds
from swarmkit.runtime.errors import UsageError
from swarmkit.runtime.exit_code import ExitCode
from swarmkit.store.store_errors import StoreUrlError
from swarmkit.store.store_location import named_store, resolve_store

from .command_line import MIN_POLL_S
from .store_probe import probe_store

TOKEN_ENV = "SWARMKIT_CONSOLE_TOKEN"
MIN_TOKEN_CHARS = 16
DEFAULT_PORT = 8766
INSTALL_HINT = "swarmkit-console serve needs textual-serve: install the web extra, pip install 'swarmkit-run-control[web]'"
MAKE_TOKEN = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"


def build_serve_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="swarmkit-console serve",
        description=(
            "Serve the console in a browser (textual-serve): each browser session runs its own console on this store. "
            f"Read-only unless --allow-acts. Loopback only unless a token is set ({TOKEN_ENV} or --token-file)."
        ),
    )
    p.add_argument("workspace", nargs="?", help="the workspace whose store to open (default: here)")
    p.add_argument("--store", metavar="URL", help="store URL (default: SWARMKIT_STORE, else <workspace>/.swarmkit/store.db)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; any other needs a token)")
    p.add_argument("--port", type=Port(1), default=DEFAULT_PORT, help=f"port to listen on (default {DEFAULT_PORT})")
    p.add_argument("--allow-acts", action="store_true", help="let the browser stop, resume, cancel and approve (default: watch only)")
    p.add_argument("--token-file", metavar="PATH", help=f"a file whose first line is the token (default: {TOKEN_ENV})")
    p.add_argument("--public-url", metavar="URL", help="the address browsers use, when a proxy stands in front (default: the request's own)")
    p.add_argument(
        "--allowed-host", action="append", default=[], metavar="NAME",
        help="a Host name browsers use to reach this console, beyond loopback names and the bound address (repeatable; required with --host 0.0.0.0)",
    )
    p.add_argument("--poll", type=Seconds(least=MIN_POLL_S), default=1.0, metavar="SECONDS", help="how often each console reads the store (default 1)")
    return p


def read_token(token_file: str | None, environ: Mapping[str, str]) -> str | None:
    """The token from --token-file (its first line), else the environment; None when neither is set."""
    if token_file is not None:
        try:
            lines = Path(token_file).expanduser().read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise UsageError(f"cannot read the token file {token_file}: {exc.strerror or exc}") from None
        token = lines[0].strip() if lines else ""
        where = f"the token file {token_file}"
    else:
        raw = environ.get(TOKEN_ENV)
        if raw is None:
            return None
        token = raw.strip()
        where = TOKEN_ENV
    if len(token) < MIN_TOKEN_CHARS:
        raise UsageError(f"the token in {where} is {'empty' if not token else 'too short'}: use at least {MIN_TOKEN_CHARS} characters, e.g. from {MAKE_TOKEN}")
    return token


def console_command(workspace: Path, *, read_only: bool, poll: float) -> str:
    """The shell command textual-serve runs per session: this console, on the same store and workspace."""
    argv = [sys.executable, "-m", "swarmkit.console.cli", "--poll", repr(poll)]
    if read_only:
        argv.append("--read-only")
    argv.append(str(workspace))
    return shlex.join(argv)


def run_serve(argv: list[str], err: Callable[[str], None]) -> int:
    # --port and --poll are checked as they are parsed (swarmkit.cli.quantities).
    args = build_serve_parser().parse_args(argv)
    try:
        token = read_token(args.token_file, os.environ)
    except UsageError as exc:
        err(str(exc))
        return ExitCode.USAGE
    if token is None and not is_loopback(args.host):
        err(
            f"--host {args.host} reaches beyond this machine, and no token is set: anyone who can reach it could watch "
            f"{'and steer ' if args.allow_acts else ''}your runs. Set {TOKEN_ENV} (or --token-file) to a secret of at least "
            f"{MIN_TOKEN_CHARS} characters, e.g. from {MAKE_TOKEN}, or serve on 127.0.0.1"
        )
        return ExitCode.USAGE
    try:
        hosts = allowed_hosts(args.host, args.allowed_host)
    except UsageError as exc:
        err(str(exc))
        return ExitCode.USAGE
    try:
        from .web_server import make_server  # late: textual-serve and aiohttp, the web extra: when it is missing, the hint is said
    except ImportError as exc:
        if (exc.name or "").startswith("swarmkit"):
            raise
        err(INSTALL_HINT)
        return ExitCode.USAGE
    try:
        loc = resolve_store(args.store, args.workspace)
    except StoreUrlError as exc:
        err(str(exc))
        return ExitCode.USAGE
    problem = probe_store(args.store, args.workspace)
    if problem is not None:
        err(problem)
        return ExitCode.USAGE
    workspace = Path(args.workspace or os.getcwd()).expanduser().resolve()
    # The sessions find the store through the environment, not their command
    # line: a store URL's password stays out of every process list.
    if args.store is not None:
        # As the store's one rule reads it here: a relative path means this folder's file, not the session's.
        named = named_store(args.store, args.workspace)
        os.environ["SWARMKIT_STORE"] = str(named.sqlite_file) if named.sqlite_file is not None else named.url_text or ""
    # And the token stays with the server: no session needs it.
    os.environ.pop(TOKEN_ENV, None)
    command = console_command(workspace, read_only=not args.allow_acts, poll=args.poll)
    mode = "acts allowed" if args.allow_acts else "read-only"
    say = lambda m: print(f"swarmkit-console serve: {m} ({mode}; store {loc.display}{'; token required' if token else ''})", flush=True)
    server = make_server(command, host=args.host, port=args.port, title=f"swarmkit-console: {loc.display}", token=token, public_url=args.public_url, say=say, hosts=hosts)
    try:
        server.serve()
    except OSError as exc:
        err(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
        return ExitCode.FAILED
    return ExitCode.OK
