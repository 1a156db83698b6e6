"""Agents for `swarmkit-console demo`: they really run, slowly enough to watch.

Each sleeps a little between log lines, writes files in its run's workspace
and reports usage as it goes, like a model-backed agent would: the row's cost
and burn rate move within a heartbeat. Async, so that a cancel interrupts them
at once.
"""

from __future__ import annotations

import asyncio
import json
import random

TOPICS = ["lease renewal", "compare-and-set transitions", "cooperative stop", "fencing tokens", "heartbeats", "checkpoints"]


def _rng(ctx) -> random.Random:
    # Same run, same numbers: a resumed run prints what it would have printed.
    return random.Random(f"{ctx.run_id}:{ctx.node}")


async def _steps(ctx, count: int, every: float, line, tokens: int = 0, cost: float = 0.0) -> None:
    for i in range(1, count + 1):
        await asyncio.sleep(every)
        ctx.log(line(i))
        if tokens or cost:
            ctx.add_usage(tokens, cost)


async def plan(ctx):
    ctx.log(f"reading the brief for {ctx.inputs.get('topic', 'agent run control')!r}")
    await _steps(ctx, 3, 0.6, lambda i: f"drafting search {i}/3")
    (ctx.workspace / "plan.md").write_text("# plan\n- search\n- read\n- summarise\n", encoding="utf-8")
    ctx.add_usage(1840, 0.021)
    return {"searches": 3}


async def fetch_sources(ctx):
    rng = _rng(ctx)
    (ctx.workspace / "sources").mkdir(exist_ok=True)
    for i in range(1, 13):
        await asyncio.sleep(0.7)
        size = rng.randint(2_000, 9_000)
        (ctx.workspace / "sources" / f"page-{i:02d}.html").write_text("x" * size, encoding="utf-8")
        ctx.log(f"GET https://docs.example.org/scheduling/page-{i:02d} 200 ({size / 1000:.1f} kB)")
        ctx.add_usage(900, 0.011)
    return {"pages": 12}


async def read(ctx):
    """A tool loop with boundaries of its own: a stop lands between two pages, and a resumed
    run goes on from the page it stopped at (the same notes as a run never stopped)."""
    rng = _rng(ctx)
    notes = list((ctx.resumed_from or {}).get("notes", []))
    for _ in notes:  # the numbers the pages already read drew
        rng.choice(TOPICS), rng.randint(2, 11)
    if notes:
        ctx.log(f"resuming after page {len(notes)} of 40")
    for i in range(len(notes) + 1, 41):
        await ctx.aboundary({"notes": notes})
        await asyncio.sleep(1.5)
        topic = rng.choice(TOPICS)
        notes.append(topic)
        ctx.log(f"page-{(i - 1) % 12 + 1:02d}: {topic} — {rng.randint(2, 11)} notes")
        ctx.add_usage(1500, 0.019)
    (ctx.workspace / "notes.json").write_text(json.dumps(notes), encoding="utf-8")
    return {"notes": len(notes)}


async def summarise(ctx):
    await _steps(ctx, 20, 1.5, lambda i: f"summarising section {i}/20", 600, 0.008)
    (ctx.workspace / "summary.md").write_text("# summary\n", encoding="utf-8")


async def cite(ctx):
    await _steps(ctx, 8, 1.0, lambda i: f"checked citation {i}/8")
    ctx.add_usage(2_400, 0.03)


async def publish(ctx):
    await _steps(ctx, 3, 0.5, lambda i: ["rendering report", "uploading report.html", "posted to #research"][i - 1])
    ctx.add_usage(300, 0.004)


async def prepare(ctx):
    await _steps(ctx, 4, 0.6, lambda i: f"loading shard {i}/4")
    (ctx.workspace / "data").mkdir(exist_ok=True)
    (ctx.workspace / "data" / "train.jsonl").write_text("{}\n" * 4000, encoding="utf-8")
    ctx.add_usage(500, 0.005)


async def train(ctx):
    rng = _rng(ctx)
    loss = 2.4
    with (ctx.workspace / "metrics.jsonl").open("a", encoding="utf-8") as metrics:
        for epoch in range(1, 61):
            await asyncio.sleep(1.0)
            loss *= 0.97 + rng.random() * 0.02
            metrics.write(json.dumps({"epoch": epoch, "loss": round(loss, 4)}) + "\n")
            metrics.flush()
            ctx.log(f"epoch {epoch:02d}/60 loss {loss:.4f}")
            ctx.add_usage(2_000, 0.03)
    return {"loss": round(loss, 4)}


async def evaluate(ctx):
    await _steps(ctx, 5, 1.0, lambda i: f"eval batch {i}/5: accuracy {0.80 + i * 0.01:.2f}")
    ctx.add_usage(4_000, 0.05)


async def split(ctx):
    await _steps(ctx, 4, 0.8, lambda i: f"split docs/part-{i}.md into {10 + i} chunks")
    (ctx.workspace / "chunks.jsonl").write_text("{}\n" * 200, encoding="utf-8")
    ctx.add_usage(200, 0.002)


async def clean(ctx):
    await _steps(ctx, 4, 0.8, lambda i: f"cleaned chunk batch {i}/4")


async def embed(ctx):
    await _steps(ctx, 20, 1.0, lambda i: f"embedded batch {i}/20", 400, 0.0004)


async def store(ctx):
    await _steps(ctx, 2, 0.8, lambda i: f"wrote index segment {i}/2")


async def build(ctx):
    await _steps(ctx, 4, 0.7, lambda i: ["resolving dependencies", "compiling", "linking", "packing dist/release.tar.gz"][i - 1])
    (ctx.workspace / "dist").mkdir(exist_ok=True)
    (ctx.workspace / "dist" / "release.tar.gz").write_bytes(b"\0" * 150_000)
    ctx.add_usage(600, 0.007)


async def test(ctx):
    await _steps(ctx, 5, 0.7, lambda i: f"suite {i}/5 passed")


async def ship(ctx):
    await _steps(ctx, 3, 0.7, lambda i: ["tagging v1.4.0", "pushing the tag", "published v1.4.0"][i - 1])


async def fetch_metrics(ctx):
    await _steps(ctx, 3, 0.6, lambda i: f"fetched metrics for region {['eu', 'us', 'ap'][i - 1]}")
    ctx.add_usage(400, 0.004)


async def check_upstream(ctx):
    await _steps(ctx, 2, 1.0, lambda i: f"GET https://status.example.org/api attempt {i}: 502")
    raise RuntimeError("upstream returned 502 twice; giving up")
