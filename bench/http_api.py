"""The HTTP front door (not `http.py`: that name would shadow the standard library for every script in bench/): stop latency beside the CLI's, and GET /jobs/{id} under 16 concurrent clients.

    python bench/http_api.py [--runs 20] [--requests 3200] [--clients 16] [--stores sqlite,postgresql]

A `swarmkit serve --no-host` process fronts the store. Runs of 1 ms agents
are hosted here; each is stopped at a random moment, alternately by
`POST /jobs/{id}/stop` and by a `swarmkit stop` process. The delay is from
the moment the stop is sent (the request, or the process started) to the host
raising RunStoppedError: what an operator waits for. Then `--clients` clients
read one run's merged view as fast as the server answers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._benchlib import PG_DEFAULT, header, line, pct, store_url  # noqa: E402
from bench.stop_reaction import TimedHost  # noqa: E402
from swarmkit.runtime import control  # noqa: E402
from swarmkit.runtime.flow import parse_flow  # noqa: E402
from swarmkit.store import Store  # noqa: E402


def start_server(url: str, ws: str) -> tuple[subprocess.Popen, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), SWARMKIT_ACTOR="bench")
    env.pop("SWARMKIT_STORE", None)
    log = Path(ws) / "serve.out"
    proc = subprocess.Popen([sys.executable, "-m", "swarmkit.cli", "serve", "--store", url, "--port", "0", "--no-host", ws],
                            env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = re.search(r"listening on (http://\S+)", log.read_text())
        if found:
            return proc, found.group(1)
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"swarmkit serve did not start:\n{log.read_text()}")


async def stops(store: Store, ws: str, url: str, base: str, runs: int) -> dict[str, list[float]]:
    mod = Path(ws) / "httpbenchagents.py"
    mod.write_text("import asyncio\nasync def work(ctx):\n    await asyncio.sleep(0.001)\n")
    sys.path.insert(0, ws)
    flow = parse_flow('name = "http-stop"\n' + "".join(f'[[agents]]\nname = "a{i}"\ncall = "httpbenchagents:work"\n' for i in range(3000)))
    env = dict(os.environ, PYTHONPATH=str(ROOT), SWARMKIT_ACTOR="bench")
    # Per door, from the moment the stop is sent (the request, or the process started): to the host
    # raising RunStoppedError, and to the run parked (its status written, the host done); and the
    # `swarmkit stop` process's own start to exit, what the CLI alone costs the operator.
    out: dict[str, list[float]] = {"http": [], "cli": [], "http parked": [], "cli parked": [], "cli process": []}
    missed = 0
    async with httpx.AsyncClient(base_url=base, timeout=30, headers={"Content-Type": "application/json"}) as client:
        await client.get("/health")  # the connection is open before the first timed stop, as a client's would be
        for i in range(runs * 2):
            door = "http" if i % 2 == 0 else "cli"
            job = await control.submit(store, flow, {}, host_here=True)
            host = TimedHost(store, job.id, job.epoch, flow)
            sent: dict[str, float] = {}

            async def stop(job_id: str = job.id, door: str = door, sent: dict[str, float] = sent) -> None:
                await asyncio.sleep(random.uniform(0.1, 0.4))
                sent["at"] = time.time()
                if door == "http":
                    (await client.post(f"/jobs/{job_id}/stop")).raise_for_status()
                else:
                    p = await asyncio.create_subprocess_exec(sys.executable, "-m", "swarmkit.cli", "stop", "--store", url, job_id, ws,
                                                             env=env, stdout=subprocess.DEVNULL)
                    await p.wait()
                    sent["exited"] = time.time()

            stopper = asyncio.create_task(stop())
            status = await host.run()
            parked = time.time()
            await stopper
            if status != "stopped" or host.raised_at is None:
                missed += 1
                continue
            out[door].append((host.raised_at.timestamp() - sent["at"]) * 1000)
            out[f"{door} parked"].append((parked - sent["at"]) * 1000)
            if door == "cli":
                out["cli process"].append((sent["exited"] - sent["at"]) * 1000)
    out["missed"] = [float(missed)]
    return out


async def reads(base: str, job_id: str, requests: int, clients: int) -> tuple[float, list[float]]:
    latencies: list[float] = []
    each = max(1, requests // clients)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, timeout=30, limits=limits, headers={"Content-Type": "application/json"}) as client:
        (await client.get(f"/jobs/{job_id}")).raise_for_status()

        async def one_client() -> None:
            for _ in range(each):
                t0 = time.perf_counter()
                resp = await client.get(f"/jobs/{job_id}")
                latencies.append((time.perf_counter() - t0) * 1000)
                assert resp.status_code == 200, resp.text

        t0 = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(clients)))
        elapsed = time.perf_counter() - t0
    return len(latencies) / elapsed, latencies


async def bench(url: str, ws: str, runs: int, requests: int, clients: int) -> None:
    store = await Store.open(url, ws)
    proc, base = start_server(url, ws)
    try:
        got = await stops(store, ws, url, base, runs)
        kind = url.split(":")[0].split("+")[0]
        print(f"{kind}: {runs} stops by each door, agents of 1 ms, missed={int(got['missed'][0])}")
        print(line("HTTP POST /jobs/{id}/stop -> RunStoppedError", got["http"]))
        print(line("swarmkit stop (a process) -> RunStoppedError", got["cli"]))
        print(line("HTTP POST /jobs/{id}/stop -> run parked", got["http parked"]))
        print(line("swarmkit stop (a process) -> run parked", got["cli parked"]))
        print(line("  the swarmkit stop process, start to exit", got["cli process"]))
        job = await control.submit(store, parse_flow('name = "read"\n[[agents]]\nname = "a"\ncommand = "true"\n'), {})
        rate, lat = await reads(base, job.id, requests, clients)
        print(f"  GET /jobs/{{id}} with {clients} clients: {rate:8.0f} req/s  p50={sorted(lat)[len(lat) // 2]:.2f} ms  p99={pct(lat, 99):.2f} ms  (n={len(lat)})", flush=True)
    finally:
        proc.terminate()
        proc.wait(20)
        await store.close()


def pg_answers() -> bool:
    async def probe() -> None:
        import asyncpg

        conn = await asyncpg.connect(PG_DEFAULT.replace("postgresql+asyncpg://", "postgresql://"), timeout=5)
        await conn.close()

    try:
        asyncio.run(probe())
        return True
    except Exception:
        return False


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20, help="stops by each door")
    ap.add_argument("--requests", type=int, default=3200)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--stores", default="sqlite,postgresql")
    ap.add_argument("--smoke", action="store_true", help="tiny counts: proves the script runs")
    args = ap.parse_args()
    stores = args.stores.split(",")
    if args.smoke:
        args.runs, args.requests, stores = 1, 64, ["sqlite"]
    header("HTTP API: stop by HTTP and by the CLI; GET /jobs/{id} under concurrent clients")
    for kind in stores:
        if kind == "postgresql" and not pg_answers():
            print(f"postgresql: skipped, no server at {PG_DEFAULT}")
            continue
        with tempfile.TemporaryDirectory() as ws, store_url(kind, ws) as url:
            asyncio.run(bench(url, ws, args.runs, args.requests, args.clients))


if __name__ == "__main__":
    main()
