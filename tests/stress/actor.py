"""One actor of the race harness: a process of its own that acts on runs at random moments.

It stops, cancels (with and without keep), resumes (`swarmkit resume` and
`swarmkit run --resume`) and approves, sometimes right after a node boundary,
sometimes as the last agent finishes, sometimes at once, sometimes on runs that
have already ended. Most acts call the runtime's control functions (the ones
the CLI and the console call); a share goes through the real `swarmkit` CLI.
Every act is one JSON line: who (a unique actor name), what, when it was sent,
when it returned, and what it said.

    python -m tests.stress.actor --store URL --workspace WS --runs runs.json --out acts.jsonl --name a1 --acts 100
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from pathlib import Path

from sqlalchemy import text

from swarmkit.runtime import control
from swarmkit.store import Store

KIND_WEIGHTS = {"stop": 30, "cancel": 10, "cancel_keep": 8, "resume": 22, "run_resume": 7, "approve": 15}
MODE_WEIGHTS = {"now": 35, "boundary": 30, "completion": 15, "delay": 20}
PARKED = ("stopped", "deferred", "lost")


def classify(kind: str, code: int, out: str) -> bool:
    """Did a CLI act change anything? Read from what it printed, as an operator would."""
    if kind == "stop":
        return code == 0 and ("stop requested for" in out or "stopped at once" in out)
    if kind.startswith("cancel"):
        return code == 0 and ("cancel requested for" in out or "cancelled (it was" in out)
    if kind in ("resume", "approve"):
        return code == 0 and "(was " in out and "pick it up" in out
    if kind == "run_resume":
        return out.startswith("resuming ")
    raise ValueError(kind)


async def statuses(store: Store) -> dict[str, tuple[str, int, int]]:
    async with store.read() as conn:
        rows = (await conn.execute(text("SELECT id, status, step, steps FROM jobs"))).all()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


async def one(store: Store, run_id: str) -> tuple[str, int, int] | None:
    async with store.read() as conn:
        row = (await conn.execute(text("SELECT status, step, steps FROM jobs WHERE id = :i"), {"i": run_id})).first()
    return (row[0], row[1], row[2]) if row else None


async def wait_until(store: Store, run_id: str, pred, timeout: float, interval: float = 0.008) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        row = await one(store, run_id)
        if row is None or pred(*row):
            return "hit"
        await asyncio.sleep(interval)
    return "timeout"


def pick(rnd: random.Random, weights: dict[str, float]) -> str:
    keys = list(weights)
    return rnd.choices(keys, [weights[k] for k in keys])[0]


async def act_api(store: Store, kind: str, run_id: str, actor: str) -> control.ActResult:
    if kind == "stop":
        return await control.stop(store, run_id, actor=actor)
    if kind == "cancel":
        return await control.cancel(store, run_id, actor=actor)
    if kind == "cancel_keep":
        return await control.cancel(store, run_id, keep=True, actor=actor)
    if kind == "resume":
        return await control.resume(store, run_id, actor=actor)
    if kind == "approve":
        return await control.approve(store, run_id, actor=actor)
    raise ValueError(kind)


def cli_argv(args, kind: str, run_id: str) -> list[str]:
    verb = {"cancel_keep": "cancel", "run_resume": "run"}.get(kind, kind)
    argv = [sys.executable, "-m", "swarmkit.cli", verb, "--store", args.store]
    if kind == "run_resume":
        return argv + ["--resume", run_id, args.workspace]
    argv += [run_id, args.workspace]
    if kind == "cancel_keep":
        argv.append("--keep")
    return argv


async def main_async(args) -> int:
    rnd = random.Random(args.seed)
    runs_path = Path(args.runs)
    runs_mtime = None
    cancellable: set[str] = set()
    ids: list[str] = []
    store = await Store.open(args.store, args.workspace)
    out = open(args.out, "a", buffering=1)
    bg: list[tuple[dict, asyncio.subprocess.Process, Path, Path]] = []
    logs = Path(args.out).parent
    deadline = time.monotonic() + args.seconds
    # Past the window, an actor that has tried fewer than --min-acts goes on (up to three windows
    # in all): the round must race, however slow the machine is today.
    hard_deadline = time.monotonic() + 3 * args.seconds
    n = 0
    idle = 0
    next_by_run = args.seed % 2 == 0  # flips at each resume: the next one goes the other way
    try:
        while n < args.acts and (time.monotonic() < deadline or (n < args.min_acts and time.monotonic() < hard_deadline)):
            mtime = runs_path.stat().st_mtime_ns
            if mtime != runs_mtime:  # the harness queued more runs
                runs_mtime = mtime
                runs = json.loads(runs_path.read_text())
                cancellable = {r["id"] for r in runs if r.get("cancel_ok")}
                ids = [r["id"] for r in runs]
            try:
                known = set(ids)
                now = {i: v for i, v in (await statuses(store)).items() if i in known}
            except Exception as exc:  # a store fault surfaced to an operator is itself a finding
                out.write(json.dumps({"actor": args.name, "kind": "poll", "error": repr(exc), "t_sent": time.time(), "t_ret": time.time()}) + "\n")
                await asyncio.sleep(0.2)
                continue
            kind = pick(rnd, KIND_WEIGHTS)
            if kind == "resume":
                # The two ways of resuming take turns, half the actors starting with `swarmkit
                # run --resume`: a loaded machine gets few acts into the window (in CI, 14 of
                # 160: three resumes, every one an actor's first), and both must be raced in it.
                kind = "run_resume" if next_by_run else "resume"
            # A run the act can change; one time in ten any run at all, ended ones included.
            if kind == "stop":
                pool = [i for i in ids if now.get(i, ("",))[0] in ("running", "queued")]
            elif kind.startswith("cancel"):
                pool = [i for i in ids if i in cancellable and now.get(i, ("",))[0] in ("running", "queued") + PARKED]
            elif kind == "approve":
                pool = [i for i in ids if now.get(i, ("",))[0] == "deferred"]
            else:
                pool = [i for i in ids if now.get(i, ("",))[0] in PARKED]
            if not pool:
                idle += 1
                if idle > 50 and len(ids) >= args.total and all(s[0] in ("completed", "failed", "faulted", "cancelled") for s in now.values()):
                    break  # everything has ended; nothing left to race
                await asyncio.sleep(0.02)
                continue
            if rnd.random() < 0.1:
                pool = ids
            idle = 0
            if kind in ("resume", "run_resume"):
                next_by_run = not next_by_run
            run_id = rnd.choice(pool)
            status, step, steps = now.get(run_id, ("?", 0, 0))
            mode = pick(rnd, MODE_WEIGHTS)
            waited = ""
            if mode == "boundary":
                if kind in ("stop", "cancel", "cancel_keep"):
                    # Fire right after the next checkpoint: at the node boundary.
                    waited = await wait_until(store, run_id, lambda s, st, sts: st != step or s != status, 1.0)
                else:
                    # Fire the moment the run parks (races the host letting go of it).
                    waited = await wait_until(store, run_id, lambda s, st, sts: s in PARKED, 1.0)
            elif mode == "completion":
                if kind in ("stop", "cancel", "cancel_keep"):
                    target = steps - 1 if rnd.random() < 0.5 else steps
                    waited = await wait_until(store, run_id, lambda s, st, sts: st >= target or s not in ("running", "queued"), 2.0)
                else:
                    waited = await wait_until(store, run_id, lambda s, st, sts: s != status, 1.0)
            elif mode == "delay":
                await asyncio.sleep(rnd.uniform(0, 0.4))
            n += 1
            actor = f"{args.name}-{n}@race"
            via = "cli" if rnd.random() < args.cli_frac else "api"
            if kind == "run_resume":
                via = "cli-bg"
            rec = {"actor": actor, "kind": kind, "run": run_id, "mode": mode, "waited": waited, "via": via, "seen": status}
            rec["t_sent"] = time.time()
            try:
                if via == "api":
                    res = await act_api(store, kind, run_id, actor)
                    rec.update(code=res.code, changed=res.changed, msg=res.message, epoch=res.job.epoch if res.job else None, after=res.job.status if res.job else None)
                elif via == "cli":
                    env = dict(os.environ, SWARMKIT_ACTOR=actor)
                    proc = await asyncio.create_subprocess_exec(
                        *cli_argv(args, kind, run_id), cwd=args.workspace, env=env,
                        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                    )
                    o, e = await proc.communicate()
                    o_s, e_s = o.decode(errors="replace"), e.decode(errors="replace")
                    rec.update(code=proc.returncode, msg=o_s, err=e_s, changed=classify(kind, proc.returncode, o_s))
                else:
                    env = dict(os.environ, SWARMKIT_ACTOR=actor)
                    o_path, e_path = logs / f"{actor}.out", logs / f"{actor}.err"
                    with open(o_path, "wb") as o_f, open(e_path, "wb") as e_f:
                        proc = await asyncio.create_subprocess_exec(
                            *cli_argv(args, kind, run_id), cwd=args.workspace, env=env, stdout=o_f, stderr=e_f,
                        )
                    rec["pid"] = proc.pid
                    bg.append((rec, proc, o_path, e_path))
            except Exception as exc:
                rec["error"] = f"{type(exc).__name__}: {exc}"
            rec["t_ret"] = time.time()
            if via != "cli-bg":
                out.write(json.dumps(rec) + "\n")
            if args.pause:
                await asyncio.sleep(rnd.uniform(0, args.pause))
        # The foreground hosts started with `run --resume` end when their run ends, stops or defers.
        for rec, proc, o_path, e_path in bg:
            try:
                code = await asyncio.wait_for(proc.wait(), timeout=args.bg_timeout)
            except TimeoutError:
                code = None
                rec["error"] = f"run --resume still hosting after {args.bg_timeout}s"
            o_s = o_path.read_text(errors="replace")
            e_s = e_path.read_text(errors="replace")
            rec.update(code=code, msg=o_s, err=e_s, changed=classify("run_resume", code or 0, o_s), t_exit=time.time())
            out.write(json.dumps(rec) + "\n")
    finally:
        out.close()
        await store.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--store", required=True)
    p.add_argument("--workspace", required=True)
    p.add_argument("--runs", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--acts", type=int, default=100)
    p.add_argument("--total", type=int, default=0, help="how many runs the harness will queue in all")
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--min-acts", type=int, default=0, help="acts to try even past --seconds (up to three times it)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cli-frac", type=float, default=0.15)
    p.add_argument("--pause", type=float, default=0.05)
    p.add_argument("--bg-timeout", type=float, default=120)
    args = p.parse_args(argv)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
