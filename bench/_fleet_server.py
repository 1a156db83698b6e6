"""bench/fleet.py's server side: the PostgreSQL it runs on, its free slots, and who holds which connection."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path

import _benchlib  # noqa: F401  (puts the project on sys.path)
import asyncpg
from sqlalchemy.engine import make_url

from tests.pg_instance import PgInstance
from tests.pgbouncer_instance import PgBouncer


@dataclass
class Server:
    """The shared server (never restarted), or one of the bench's own on a free port (`--own-server`)."""

    base: str  # the store URL without a schema
    dsn: str  # the same for asyncpg
    port: int
    own: bool
    instance: PgInstance | None = None

    @classmethod
    def shared(cls, base: str) -> Server:
        u = make_url(base)
        dsn = base.replace("postgresql+asyncpg://", "postgresql://").split("?")[0]
        return cls(base, dsn, u.port or 5432, False)

    @classmethod
    def of_our_own(cls, max_connections: int) -> Server:
        inst = PgInstance().start()
        try:
            asyncio.run(_alter_system(inst.url, max_connections))
            inst.restart()
        except BaseException:
            inst.stop()
            raise
        return cls(inst.url, inst.url, inst.port, True, inst)

    def close(self) -> None:
        if self.instance is not None:
            self.instance.stop()


async def _alter_system(dsn: str, max_connections: int) -> None:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        await conn.execute(f"ALTER SYSTEM SET max_connections = {int(max_connections)}")
    finally:
        await conn.close()


async def headroom(dsn: str) -> tuple[int, int]:
    """(connection slots free for ordinary users now, max_connections)."""
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        most = int(await conn.fetchval("SHOW max_connections"))
        reserved = int(await conn.fetchval("SHOW superuser_reserved_connections"))
        used = int(await conn.fetchval("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"))
        return most - reserved - used, most
    finally:
        await conn.close()



def _ports_to(pids: list[int], port: int) -> set[int]:
    """Local ports of the established TCP connections these processes hold to `port` (from /proc)."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            for fd in os.scandir(f"/proc/{pid}/fd"):
                try:
                    link = os.readlink(fd.path)
                except OSError:
                    continue
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for text in lines:
            f = text.split()
            if f[3] == "01" and f[9] in inodes and int(f[2].rsplit(":", 1)[1], 16) == port:
                ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return ports


class Sampler:
    """Peaks of the connections a fleet holds, four times a second, until stopped."""

    def __init__(self, dsn: str, server_port: int, holders: list[int], clients: list[int], pgb: PgBouncer | None):
        self.dsn, self.server_port, self.holders, self.clients, self.pgb = dsn, server_port, holders, clients, pgb
        self.server = self.busy = self.client = self.waiting = 0

    async def run(self, done: asyncio.Event) -> None:
        conn = await asyncpg.connect(self.dsn, timeout=10)
        try:
            while not done.is_set():
                await self._sample(conn)
                try:
                    await asyncio.wait_for(done.wait(), 0.25)
                except TimeoutError:
                    pass
            # One sample more, begun after the round is done: the connections it opened are still held
            # then (the workers' pools, PgBouncer's). A round of 0.4 s on a loaded machine fell between
            # two samples, or inside one (its admin query waits on psql), and its peak read 0.
            await self._sample(conn)
        finally:
            await conn.close()

    async def _sample(self, conn) -> None:
        ports = sorted(_ports_to(self.holders, self.server_port))
        held, busy = await conn.fetchrow(
            "SELECT count(*), count(*) FILTER (WHERE state <> 'idle') FROM pg_stat_activity WHERE client_port = ANY($1::int[])", ports
        )
        self.server, self.busy = max(self.server, held), max(self.busy, busy)
        if self.pgb is not None:
            self.client = max(self.client, len(_ports_to(self.clients, self.pgb.port)))
            pools = await asyncio.to_thread(self.pgb.admin, "SHOW POOLS")
            self.waiting = max([self.waiting] + [int(p["cl_waiting"]) for p in pools if p["database"] == self.pgb.dbname])
