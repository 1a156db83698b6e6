"""The HTTP floor: the same FastAPI/uvicorn stack as `swarmkit serve`, answering the same routes with the same
JSON from the database driver alone (sqlite3, or asyncpg for PostgreSQL). Not a benchmark itself:
bench/http_throughput.py starts it beside `swarmkit serve` and measures both.

    python bench/_http_floor.py STORE_URL

Each route does the least that can give its answer: `GET /jobs` one page of the run columns and one read
of the page's workspaces; `GET /jobs/{id}` the row and its workspaces; `POST /jobs/{id}/stop` the
conditional UPDATE of a stop, then the row and its workspaces for the answer. No auth, no middleware, no
checks: what is left of a request when Swarmkit's own work is taken out.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import sys
from datetime import UTC, datetime
from pathlib import Path

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from swarmkit.store.records import JOB_COLUMNS  # noqa: E402  (the column names only: the floor's JSON has the same keys)

COLS = ", ".join(JOB_COLUMNS)


TIMES = tuple(c for c in JOB_COLUMNS if c.endswith("_at"))
JSON_TEXT = ("inputs", "flow_modules")


def view(row: dict, ws: list[tuple[str, str]]) -> dict:
    """The run's merged view as Swarmkit gives it: times in RFC 3339 UTC, JSON columns as objects."""
    out = row
    for k in TIMES:
        v = out[k]
        if isinstance(v, datetime):
            out[k] = v.astimezone(UTC).isoformat().replace("+00:00", "Z")
        elif v is not None:
            out[k] = v.replace(" ", "T") + "Z"  # SQLite's text, in UTC
    for k in JSON_TEXT:
        if out[k] is not None:
            out[k] = json.loads(out[k])
    out["short_id"] = out["id"][:8]
    out["display_status"] = out["status"]
    out["workspaces"] = [{"path": p, "state": s} for p, s in ws]
    return out


def sqlite_app(path: str) -> FastAPI:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA busy_timeout=30000")
    db.row_factory = sqlite3.Row
    app = FastAPI()

    def one(job_id: str) -> dict | None:
        row = db.execute(f"SELECT {COLS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            return None
        ws = db.execute("SELECT path, state FROM workspaces WHERE job_id = ?", (job_id,)).fetchall()
        return view(dict(row), [tuple(w) for w in ws])

    @app.get("/jobs")
    async def jobs(limit: int = 50) -> JSONResponse:
        rows = [dict(r) for r in db.execute(f"SELECT {COLS} FROM jobs ORDER BY created_at DESC, id DESC LIMIT ?", (limit + 1,))]
        page = rows[:limit]
        ids = [r["id"] for r in page]
        ws: dict[str, list] = {i: [] for i in ids}
        if ids:
            for j, p, s in db.execute(f"SELECT job_id, path, state FROM workspaces WHERE job_id IN ({','.join('?' * len(ids))})", ids):
                ws[j].append((p, s))
        return JSONResponse({"schema": 1, "runs": [view(r, ws[r["id"]]) for r in page], "next_cursor": page[-1]["id"] if len(rows) > limit else None,
                             "has_more": len(rows) > limit})

    @app.get("/jobs/{job_id}")
    async def show(job_id: str) -> JSONResponse:
        found = one(job_id)
        return JSONResponse(found) if found else JSONResponse({"detail": "no such run"}, 404)

    @app.post("/jobs/{job_id}/stop")
    async def stop(job_id: str, request: Request) -> JSONResponse:
        at = datetime.now(UTC).isoformat()
        db.execute("BEGIN IMMEDIATE")
        cur = db.execute("UPDATE jobs SET stop_requested_at = ?, stop_requested_by = 'floor' WHERE id = ? AND status = 'running' AND stop_requested_at IS NULL",
                         (at, job_id))
        db.execute("COMMIT")
        found = one(job_id)
        return JSONResponse({"job_id": job_id, "action": "stop", "changed": cur.rowcount == 1, "already_requested": cur.rowcount == 0,
                             "detail": "stop already requested", "status": found["status"], "display_status": found["status"],
                             "stop_requested_at": found["stop_requested_at"], "stop_requested_by": found["stop_requested_by"], "hint": None, "job": found})

    return app


def pg_app(url: str) -> FastAPI:
    import asyncpg

    base, _, query = url.partition("?")
    schema = dict(kv.split("=", 1) for kv in query.split("&") if kv).get("schema")

    app = FastAPI()
    pool: dict = {}

    async def conn_pool():
        if "p" not in pool:
            pool["p"] = await asyncpg.create_pool(base, min_size=4, max_size=4, server_settings={"search_path": schema} if schema else None)
        return pool["p"]

    async def one(c, job_id: str) -> dict | None:
        row = await c.fetchrow(f"SELECT {COLS} FROM jobs WHERE id = $1", job_id)
        if row is None:
            return None
        ws = await c.fetch("SELECT path, state FROM workspaces WHERE job_id = $1", job_id)
        return view(dict(row), [tuple(w) for w in ws])

    @app.get("/jobs")
    async def jobs(limit: int = 50) -> JSONResponse:
        async with (await conn_pool()).acquire() as c:
            rows = [dict(r) for r in await c.fetch(f"SELECT {COLS} FROM jobs ORDER BY created_at DESC, id DESC LIMIT $1", limit + 1)]
            page = rows[:limit]
            ids = [r["id"] for r in page]
            ws: dict[str, list] = {i: [] for i in ids}
            for j, p, s in await c.fetch("SELECT job_id, path, state FROM workspaces WHERE job_id = ANY($1)", ids):
                ws[j].append((p, s))
        return JSONResponse({"schema": 1, "runs": [view(r, ws[r["id"]]) for r in page], "next_cursor": page[-1]["id"] if len(rows) > limit else None,
                             "has_more": len(rows) > limit})

    @app.get("/jobs/{job_id}")
    async def show(job_id: str) -> JSONResponse:
        async with (await conn_pool()).acquire() as c:
            found = await one(c, job_id)
        return JSONResponse(found) if found else JSONResponse({"detail": "no such run"}, 404)

    @app.post("/jobs/{job_id}/stop")
    async def stop(job_id: str, request: Request) -> JSONResponse:
        async with (await conn_pool()).acquire() as c:
            done = await c.execute("UPDATE jobs SET stop_requested_at = now(), stop_requested_by = 'floor' WHERE id = $1 AND status = 'running' "
                                   "AND stop_requested_at IS NULL", job_id)
            found = await one(c, job_id)
        changed = done.endswith(" 1")
        return JSONResponse({"job_id": job_id, "action": "stop", "changed": changed, "already_requested": not changed,
                             "detail": "stop already requested", "status": found["status"], "display_status": found["status"],
                             "stop_requested_at": found["stop_requested_at"], "stop_requested_by": found["stop_requested_by"], "hint": None, "job": found})

    return app


def main() -> None:
    url = sys.argv[1]
    if url.startswith("sqlite"):
        app = sqlite_app(url.split(":///", 1)[1])
    else:
        app = pg_app(url.replace("postgresql+asyncpg://", "postgresql://"))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # IPPROTO_TCP: asyncio sets TCP_NODELAY only then; without it each answer waits 40 ms for a delayed ACK
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)  # before it is announced: a client may connect before uvicorn has started
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", server_header=False)
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    main()
