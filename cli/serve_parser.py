"""`swarmkit serve`'s parser: imported to build `swarmkit`'s; the command is serve.py."""

from __future__ import annotations

from .common import add_log_format, add_notify, add_store, add_workspace, verb
from .quantities import MAX_CONCURRENCY, Count, Port


def add_parsers(sub) -> None:
    p = verb(
        sub, "serve", "serve the HTTP API, hosting runs like a worker",
        "Serve the HTTP API (runs, acts, events, the audit, /metrics) and, unless --no-host, host queued runs like "
        "`swarmkit worker` in the same process. Beyond loopback it needs bearer tokens (--tokens) or --insecure.",
        ["swarmkit serve --flows flows/", "swarmkit serve --host 0.0.0.0 --port 8765 --tokens tokens.txt --no-host"],
    )
    add_store(p)
    add_workspace(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; beyond loopback needs tokens or --insecure)")
    p.add_argument("--port", type=Port(), default=8765, help="port (default 8765; 0 picks a free one and prints it)")
    p.add_argument("--concurrency", type=Count(1, MAX_CONCURRENCY), default=4, metavar="N", help="runs hosted at once (default 4)")
    p.add_argument("--flows", metavar="DIR", help="folder of flow files that POST /jobs may start, by name")
    p.add_argument("--no-host", action="store_true", help="serve the API only; workers elsewhere host the runs")
    p.add_argument("--tokens", metavar="FILE", help="bearer tokens, one `name scope token` a line (default: SWARMKIT_TOKENS)")
    p.add_argument("--insecure", action="store_true", help="allow listening beyond loopback with no token configured")
    p.add_argument(
        "--allowed-host", action="append", default=[], metavar="NAME",
        help="a Host name clients use to reach this server, beyond loopback names and the bound address (repeatable; "
        "required with --host 0.0.0.0; *.example.com allowed). Any other Host is refused: no DNS rebinding",
    )
    p.add_argument(
        "--cors-origin", action="append", default=[], metavar="ORIGIN",
        help="an origin whose pages may call this API from a browser, e.g. https://dash.example.com (repeatable; default: none, CORS off)",
    )
    add_notify(p)
    add_log_format(p)
