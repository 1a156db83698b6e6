"""The HTTP door against its floor: `GET /jobs`, `GET /jobs/{id}` and a repeated `POST /jobs/{id}/stop`, each
served by `swarmkit serve --no-host` and by the floor app (bench/_http_floor.py: the same FastAPI/uvicorn
stack answering the same JSON from the driver alone), side by side, under concurrent clients.

    python bench/http_throughput.py [--requests 4000] [--clients 16] [--rounds 3] [--stores sqlite,postgresql]

The store holds 200 runs (one page is 50) with a workspace each; the stopped-at run is running with a stop
already asked, so each timed stop is the idempotent repeat. Rounds alternate floor and Swarmkit, so load on
the machine falls on both; each round's ratio is Swarmkit's requests/s over the floor's in that round.
The clients are one lean keep-alive HTTP/1.1 loop of this process (no client library), so the client's own
cost, which both servers share, is small beside theirs. Target (issue 31): each ratio's median >= 0.7.
Each server's CPU time per request (from /proc) is shown beside its rate: a ratio that other load on
the machine moves less than it moves the rates.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._benchlib import PG_DEFAULT, compile_tree, header, pct, store_url  # noqa: E402
from bench.http_api import pg_answers  # noqa: E402
from swarmkit.runtime import control  # noqa: E402
from swarmkit.runtime.flow import parse_flow  # noqa: E402
from swarmkit.store import Store  # noqa: E402
from swarmkit.store.clock import store_now  # noqa: E402
from swarmkit.store.workspace_rows import add_workspace  # noqa: E402

TARGET = 0.7
LEASE = "3600"  # the hosted run must not lapse to lost while the server looks for lost runs


def start(argv: list[str], log: Path) -> tuple[subprocess.Popen, tuple[str, int]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), SWARMKIT_ACTOR="bench", SWARMKIT_LEASE=LEASE)
    env.pop("SWARMKIT_STORE", None)
    proc = subprocess.Popen([sys.executable, *argv], env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = re.search(r"listening on http://([\d.]+):(\d+)", log.read_text())
        if found:
            return proc, (found.group(1), int(found.group(2)))
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"{argv[:3]} did not start:\n{log.read_text()}")


async def client(addr: tuple[str, int], request: bytes, count: int, latencies: list[float], codes: set[int]) -> None:
    reader, writer = await asyncio.open_connection(*addr)
    try:
        for _ in range(count):
            t0 = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
            await reader.readexactly(length)
            latencies.append((time.perf_counter() - t0) * 1000)
            codes.add(int(head[9:12]))
    finally:
        writer.close()


def cpu_s(pid: int) -> float:
    """The process's CPU time so far (user and system, all threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def load(addr: tuple[str, int], method: str, path: str, requests: int, clients: int, pid: int) -> tuple[float, list[float], set[int], float]:
    body = b"{}" if method == "POST" else b""
    request = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    latencies: list[float] = []
    codes: set[int] = set()
    await client(addr, request, 20, [], codes)  # warm: the route's first answer builds what later ones reuse
    t0, c0 = time.perf_counter(), cpu_s(pid)
    await asyncio.gather(*(client(addr, request, requests // clients, latencies, codes) for _ in range(clients)))
    return len(latencies) / (time.perf_counter() - t0), latencies, codes, (cpu_s(pid) - c0) / len(latencies) * 1e6


async def fill(url: str, ws: str) -> tuple[str, str]:
    store = await Store.open(url, ws)
    try:
        flow = parse_flow('name = "page"\n[[agents]]\nname = "a"\ncommand = "true"\n')
        ids = [(await control.submit(store, flow, {"n": str(i)})).id for i in range(199)]
        running = await control.submit(store, flow, {}, host_here=True, lease_s=float(LEASE))
        first = await control.stop(store, running.id, actor="bench")
        assert first.changed, first.message
        async with store.write() as conn:
            for i, job_id in enumerate([*ids, running.id]):
                await add_workspace(conn, job_id, f"{ws}/w/{i}", host="bench", now=store_now())
        return ids[-1], running.id
    finally:
        await store.close()


async def measure(url: str, ws: str, requests: int, clients: int, rounds: int) -> list[tuple[str, list[float]]]:
    shown, stopping = await fill(url, ws)
    ours, ours_at = start(["-m", "swarmkit.cli", "serve", "--store", url, "--port", "0", "--no-host", ws], Path(ws) / "serve.out")
    floor, floor_at = start([str(ROOT / "bench" / "_http_floor.py"), url], Path(ws) / "floor.out")
    out = []
    try:
        for label, method, path, want in (
            ("GET /jobs (a page of 50)", "GET", "/jobs?limit=50", 200),
            ("GET /jobs/{id}", "GET", f"/jobs/{shown}", 200),
            ("POST /jobs/{id}/stop, repeated", "POST", f"/jobs/{stopping}/stop", 200),
        ):
            ratios: list[float] = []
            cpu: list[float] = []
            for r in range(rounds):
                f_rate, f_lat, f_codes, f_cpu = await load(floor_at, method, path, requests, clients, floor.pid)
                o_rate, o_lat, o_codes, o_cpu = await load(ours_at, method, path, requests, clients, ours.pid)
                assert f_codes == {want} and o_codes == {want}, (label, f_codes, o_codes)
                ratios.append(o_rate / f_rate)
                cpu.append(f_cpu / o_cpu)
                print(f"  {label:<32} round {r + 1}: swarmkit {o_rate:6.0f} req/s p50 {statistics.median(o_lat):6.2f} ms p99 {pct(o_lat, 99):6.2f} ms {o_cpu:5.0f} us CPU/req"
                      f" | floor {f_rate:6.0f} req/s p50 {statistics.median(f_lat):6.2f} ms p99 {pct(f_lat, 99):6.2f} ms {f_cpu:5.0f} us CPU/req"
                      f" | ratio {o_rate / f_rate:.2f} (by CPU {f_cpu / o_cpu:.2f})", flush=True)
            out.append((label, ratios, cpu))
    finally:
        for p in (ours, floor):
            p.terminate()
            p.wait(20)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=4000, help="requests per server per round")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--stores", default="sqlite,postgresql")
    ap.add_argument("--smoke", action="store_true", help="tiny counts: proves the script runs")
    args = ap.parse_args()
    stores = args.stores.split(",")
    if args.smoke:
        args.requests, args.rounds, stores = 64, 1, ["sqlite"]
    compile_tree()
    header(f"HTTP door against its floor, {args.clients} clients, {args.requests} requests a round")
    for kind in stores:
        if kind == "postgresql" and not pg_answers():
            print(f"postgresql: skipped, no server at {PG_DEFAULT}")
            continue
        print(f"{kind}:")
        with tempfile.TemporaryDirectory() as ws, store_url(kind, ws) as url:
            for label, ratios, cpu in asyncio.run(measure(url, ws, args.requests, args.clients, args.rounds)):
                ok = statistics.median(ratios) >= TARGET
                print(f"  {label:<32} req/s ratio to floor min {min(ratios):.2f} median {statistics.median(ratios):.2f} max {max(ratios):.2f}"
                      f"   target >= {TARGET}  {'MET' if ok else 'MISSED'}   (by CPU per request: median {statistics.median(cpu):.2f})", flush=True)


if __name__ == "__main__":
    main()
