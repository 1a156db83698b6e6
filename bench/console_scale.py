"""The console's cost at the sizes issue 31 names, each figure beside its floor in the same run.

    python bench/console_scale.py [--sizes 50,2000,20000] [--history 100000,1000000]
                                  [--idle-s 20] [--rounds 3] [--paint-reps 5] [--smoke]

1. Idle CPU with N active runs, every one running and ticking (work and usage each
   second, written by this process), for each N in `--sizes`: `swarmkit-console
   --poll 1` in a pseudo-terminal at 160x50, and its floor, a bare Textual app of
   the same size drawing the same number of changed lines each second with no
   store and no poll (bench/_bare_textual.py --lines). In rounds, the console and
   the floor in turn (this machine's speed drifts within minutes). Target: the
   console at most 2x its floor at every size.
2. First paint with H runs in history (2,000 of them active), for each H in
   `--history`: from spawning `swarmkit-console` to its first table row on the
   terminal, against the bare app's first paint, rep by rep in turn. Target: at
   most 1.5x.

The pty, the ticker and the bare app are bench/console_render.py's.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile

import _benchlib as B
from console_render import BARE_LINES, bare_idle, bare_paints, build_live, idle_cpu, pty_paints

from swarmkit.store import Store
from swarmkit.store.models import jobs

IDLE_TARGET = 2.0
PAINT_TARGET = 1.5


def _trio(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


async def _live_store(url: str, ws: str, size: int) -> list[str]:
    # A history beside the live runs, as a store in use has: ten ended runs for each active one, at least 10,000.
    return await build_live(url, ws, max(10_000, 10 * size), size)


async def _history_store(url: str, ws: str, runs: int) -> None:
    big = await B.build_big_store(url, ws, runs, min(2_000, runs))
    print(f"  store: {big.runs:,} runs ({big.active:,} active) built in {big.build_s:.1f} s", flush=True)


async def _count(url: str, ws: str) -> int:
    from sqlalchemy import func, select

    store = await Store.open(url, ws)
    try:
        async with store.read() as conn:
            return int((await conn.execute(select(func.count()).select_from(jobs))).scalar() or 0)
    finally:
        await store.close()


def idle_round(sizes: list[int], idle_s: float, rounds: int, warm_s: float) -> bool:
    ok = True
    for size in sizes:
        with tempfile.TemporaryDirectory() as ws, B.store_url("sqlite", ws) as url:
            live = asyncio.run(_live_store(url, ws, size))
            console: list[float] = []
            floor: list[float] = []
            for _ in range(rounds):
                console.append(idle_cpu(url, ws, idle_s, "line", live, warm_s=warm_s)["cpu_pct"])
                floor.append(bare_idle(ws, idle_s, BARE_LINES, warm_s=warm_s))
            # /proc counts CPU in 10 ms ticks: a floor under 0.05 % (a short --smoke round) gives no ratio.
            ratios = [c / f for c, f in zip(console, floor) if f >= 0.05]
            met = bool(ratios) and statistics.median(ratios) <= IDLE_TARGET
            ok &= met
            print(f"  idle CPU, {size:,} active runs ticking ({asyncio.run(_count(url, ws)):,} in the store), "
                  f"{rounds} rounds of {idle_s:.0f} s, % of a core, min / median / max:")
            said = f"ratio {_trio(ratios)}" if ratios else "no ratio: the floor is under /proc's resolution"
            print(f"    console {_trio(console)}; floor ({BARE_LINES} changed lines, no store) {_trio(floor)}; "
                  f"{said}   target <= {IDLE_TARGET:.1f}x  {B.verdict(met)}", flush=True)
    return ok


def paint_round(history: list[int], reps: int) -> bool:
    ok = True
    for runs in history:
        with tempfile.TemporaryDirectory() as ws, B.store_url("sqlite", ws) as url:
            asyncio.run(_history_store(url, ws, runs))
            console: list[float] = []
            floor: list[float] = []
            for _ in range(reps):
                console += pty_paints(url, ws, 1, "line", settle_s=0.2)["paints"]
                floor += bare_paints(ws, 1)
            ratio = statistics.median(console) / statistics.median(floor)
            met = ratio <= PAINT_TARGET
            ok &= met
            ms = [s * 1000 for s in console]
            floor_ms = [s * 1000 for s in floor]
            print(f"  first paint with {runs:,} runs in history, {reps} reps each, ms min / median / max: console "
                  f"{min(ms):.0f} / {statistics.median(ms):.0f} / {max(ms):.0f}; floor (a bare Textual app) "
                  f"{min(floor_ms):.0f} / {statistics.median(floor_ms):.0f} / {max(floor_ms):.0f}; "
                  f"ratio of medians {ratio:.2f}x   target <= {PAINT_TARGET:.1f}x  {B.verdict(met)}", flush=True)
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="50,2000,20000", help="active runs ticking, for the idle CPU")
    ap.add_argument("--history", default="100000,1000000", help="runs in history, for the first paint")
    ap.add_argument("--idle-s", type=float, default=20.0, help="seconds of each idle measurement")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--paint-reps", type=int, default=5)
    ap.add_argument("--warm-s", type=float, default=5.0, help="seconds a console or app runs before its CPU is measured")
    ap.add_argument("--smoke", action="store_true", help="tiny counts: proves the script runs")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    history = [int(s) for s in args.history.split(",") if s]
    if args.smoke:
        sizes, history, args.idle_s, args.rounds, args.paint_reps, args.warm_s = [20], [300], 1.0, 1, 1, 0.5
    B.header(f"console at scale: idle CPU at {', '.join(f'{s:,}' for s in sizes)} active ticking runs; "
             f"first paint with {', '.join(f'{h:,}' for h in history)} runs in history")
    B.compile_tree()
    ok = idle_round(sizes, args.idle_s, args.rounds, args.warm_s) if sizes else True
    ok &= paint_round(history, args.paint_reps) if history else True
    print(f"\n  all targets: {B.verdict(ok)}")


if __name__ == "__main__":
    main()
