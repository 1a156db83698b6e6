"""One round of the race harness, and the invariants checked after it.

A round, on one store:

1. reference runs: every flow with every input, hosted by `swarmkit run` in the
   foreground and never touched (gates approved and resumed as an operator would);
2. the race: `--runs` runs queued for `--workers` worker processes while
   `--actors` actor processes send `--acts` acts at random moments and a sampler
   records every change of every row;
3. quiesce: acts end, the workers host what is queued until nothing runs; the
   first set of invariants is checked (parked runs keep their workspaces, no
   agent process of an ended run is alive, ...);
4. finish: every parked run is resumed or approved until every run has ended;
   the invariants are checked again, now with every run's final state compared
   with its reference.

The invariants (each violation is one line naming the run and what broke):

- a terminal status never changes, and a terminal row is never written again;
- epochs go 1, 2, 3 with one host process each; no run is hosted by two
  processes at once (executions of two epochs never overlap, unless the
  earlier host was declared lost);
- each completed node ran exactly once: one execution in the epoch that
  checkpointed it, with every log line it printed and one node.started and one
  node.finished; extra executions only in epochs that were lost;
- a stop acknowledged before a node boundary was reached stops the run at that
  boundary (no node starts after it in that epoch; the epoch ends stopped,
  cancelled or lost);
- a cancel acknowledged always ends the run cancelled, with its keep and its
  audit row, within seconds, and nothing of the run starts or runs afterwards;
- every act that changed something has its audit rows under its own actor
  name, and one that changed nothing has none;
- workspaces exist exactly when the policy says;
- every stopped-and-resumed run ends with the same final state (bytes of the
  last checkpoint, tokens, cost) as its untouched reference;
- nothing faulted, and no process surfaced "database is locked" or a traceback.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.reliability import (
    env_for_children,
    integrity_check,
    run_group_alive,
    snapshot,
    sqlite_path,
    swarmkit_argv,
    with_store,
)

from .flows import SEEDS, FlowSpec, expected_lines, make_flows, read_ledger

TERMINAL = {"completed", "failed", "faulted", "cancelled"}
PARKED = {"stopped", "deferred", "lost"}
END_KINDS = {"run.stopped", "run.deferred", "run.lost", "run.completed", "run.failed", "run.faulted", "run.cancelled"}
CLAIM_RE = re.compile(r"pid (\d+) \(epoch (\d+)\)")
FINISHED_USAGE_RE = re.compile(r" done \((\d+) tokens, \$([0-9.]+)\)$")


def finished_usage(events) -> tuple[int, float]:
    """What a run's finished nodes cost, from their node.finished events (written with their checkpoints,
    so once a node). A node cut short with its host and run again from its start may have had part of its
    usage put on the row by heartbeats: the row can hold more than this, never less."""
    tokens, cost = 0, 0.0
    for ev in events:
        if ev["kind"] == "node.finished":
            m = FINISHED_USAGE_RE.search(ev["text"] or "")
            if m:
                tokens, cost = tokens + int(m.group(1)), cost + float(m.group(2))
    return tokens, round(cost, 4)


# Legal transitions between stored statuses (DESIGN.md), closed transitively for sampling.
LEGAL = {
    "queued": {"running", "stopped", "cancelled"},
    "running": {"stopped", "deferred", "lost", "completed", "failed", "faulted", "cancelled"},
    "stopped": {"queued", "running", "cancelled"},
    "deferred": {"queued", "running", "cancelled"},
    "lost": {"queued", "running", "cancelled"},
}
# How long a cancel of a running run may take to end it: the heartbeat notices
# it, then SIGINT, grace, SIGTERM, grace, SIGKILL (FAST_ENV: 0.2 + 1 + 1), plus
# a loaded machine's slack.
CANCEL_BOUND_S = 15.0


def _closure() -> dict[str, set[str]]:
    out = {}
    for s in list(LEGAL) + list(TERMINAL):
        seen, todo = set(), [s]
        while todo:
            for n in LEGAL.get(todo.pop(), ()):
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        out[s] = seen
    return out


REACHABLE = _closure()


def ts(value: Any) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    return float(value)


@dataclass
class Params:
    workers: int = 3
    concurrency: int = 4
    runs: int = 30
    acts: int = 150
    actors: int = 3
    seconds: float = 30.0
    # Acts tried in all before the actors stop, past `seconds` if need be (up to three times
    # it): a loaded machine gets few acts into the window (CI once got 14 of 160 in 15 s).
    min_acts: int = 0
    cli_frac: float = 0.15
    cancel_frac: float = 0.35
    seed: int = 1
    quiesce_s: float = 120.0
    finish_s: float = 180.0
    plant: str | None = None  # a planted bug (tests/stress/plant), to prove the checks catch it


@dataclass
class Report:
    store: str
    params: Params
    violations: list[str] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    acts_by_kind: Counter = field(default_factory=Counter)
    acts_changed: Counter = field(default_factory=Counter)
    acts_by_mode: Counter = field(default_factory=Counter)
    acts_by_via: Counter = field(default_factory=Counter)
    final_status: Counter = field(default_factory=Counter)
    parked_status: Counter = field(default_factory=Counter)
    cancel_latency_max: float = 0.0
    wal_max: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def violate(self, phase: str, run: str | None, what: str) -> None:
        self.violations.append(f"[{phase}] {run[:8] if run else '-'}: {what}")

    def summary(self) -> str:
        lines = [
            f"store: {self.store}",
            f"params: workers={self.params.workers}x{self.params.concurrency} runs={self.params.runs} acts={self.params.acts} actors={self.params.actors} seed={self.params.seed}",
            f"took {self.seconds:.1f}s",
            f"acts tried: {sum(self.acts_by_kind.values())} ({', '.join(f'{k} {v}' for k, v in sorted(self.acts_by_kind.items()))})",
            f"acts that changed something: {sum(self.acts_changed.values())} ({', '.join(f'{k} {v}' for k, v in sorted(self.acts_changed.items()))})",
            f"acts by moment: {dict(sorted(self.acts_by_mode.items()))}; by way: {dict(sorted(self.acts_by_via.items()))}",
            f"runs parked after the race: {dict(sorted(self.parked_status.items()))}",
            f"runs at the end: {dict(sorted(self.final_status.items()))}",
            f"counts: {dict(sorted(self.counts.items()))}",
            f"slowest cancel (acknowledged -> ended): {self.cancel_latency_max:.2f}s",
        ]
        if self.wal_max:
            lines.append(f"largest WAL seen by the reader: {self.wal_max / 1024:.0f} KiB")
        lines.extend(self.notes)
        lines.append(f"invariant violations: {len(self.violations)}")
        lines.extend("  " + v for v in self.violations[:200])
        if len(self.violations) > 200:
            lines.append(f"  ... and {len(self.violations) - 200} more")
        return "\n".join(lines)


class Round:
    def __init__(self, store_url: str, workspace: Path, base: Path, params: Params, *, say=print):
        self.store_url = store_url
        self.workspace = Path(workspace)
        self.base = Path(base)
        self.p = params
        self.say = say
        self.rnd = random.Random(params.seed)
        self.ledger = self.base / "ledger"
        self.logs = self.base / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.flows: dict[str, FlowSpec] = {}
        self.refs: dict[tuple[str, str], str] = {}  # (flow, seed) -> run id
        self.ref_pid: dict[str, int] = {}  # reference run id -> the `swarmkit run` that submitted and hosted it
        self.runs: dict[str, dict] = {}  # run id -> {flow, seed, cancel_ok}
        self.acts: list[dict] = []
        self.samples: list[dict] = []
        self.procs: list[subprocess.Popen] = []
        self.report = Report(store_url, params)
        self.env = env_for_children()
        if params.plant:
            plant_dir = str(Path(__file__).with_name("plant"))
            self.env["PYTHONPATH"] = plant_dir + os.pathsep + self.env["PYTHONPATH"]
            self.env["SWARMKIT_RACE_PLANT"] = params.plant

    # --- processes -------------------------------------------------------------

    def _spawn(self, argv: list[str], name: str, env: dict | None = None) -> subprocess.Popen:
        out = open(self.logs / f"{name}.out", "wb")
        err = open(self.logs / f"{name}.err", "wb")
        proc = subprocess.Popen(argv, cwd=self.workspace, env=env or self.env, stdout=out, stderr=err, start_new_session=True)
        out.close()
        err.close()
        proc.name = name  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    def _swarmkit(self, *args: str, actor: str = "reference@race", timeout: float = 180) -> subprocess.CompletedProcess:
        env = dict(self.env, SWARMKIT_ACTOR=actor)
        return subprocess.run(swarmkit_argv(args[0], self.store_url, *args[1:]), cwd=self.workspace, env=env, capture_output=True, text=True, timeout=timeout)

    # --- the round -------------------------------------------------------------

    def run(self) -> Report:
        t0 = time.monotonic()
        self.flows = make_flows(self.base / "flows", self.ledger)
        with_store(self.store_url, self.workspace, lambda s: asyncio.sleep(0))  # create and migrate once
        until = self.base / "sampler.stop"
        sampler = self._spawn(
            [sys.executable, "-m", "tests.stress.sampler", "--store", self.store_url, "--workspace", str(self.workspace), "--out", str(self.base / "samples.jsonl"), "--until", str(until)],
            "sampler",
        )
        workers: list[subprocess.Popen] = []
        try:
            refs = self._start_references()
            plan = self._plan()
            first = max(1, len(plan) // 4)
            self._submit(plan[:first])
            race_started = time.monotonic()
            for i in range(self.p.workers):
                workers.append(
                    self._spawn(swarmkit_argv("worker", self.store_url, "--concurrency", str(self.p.concurrency), str(self.workspace)), f"worker{i}")
                )
            actors = []
            per = math.ceil(self.p.acts / max(1, self.p.actors))
            for i in range(self.p.actors):
                actors.append(
                    self._spawn(
                        [
                            sys.executable, "-m", "tests.stress.actor", "--store", self.store_url, "--workspace", str(self.workspace),
                            "--runs", str(self.base / "runs.json"), "--out", str(self.base / f"acts{i}.jsonl"), "--name", f"a{i}",
                            "--acts", str(min(per, self.p.acts - per * i)), "--seconds", str(self.p.seconds), "--seed", str(self.p.seed * 100 + i),
                            "--cli-frac", str(self.p.cli_frac), "--total", str(self.p.runs),
                            "--min-acts", str(math.ceil(self.p.min_acts / max(1, self.p.actors))),
                        ],
                        f"actor{i}",
                    )
                )
            self._submit_over_time(plan[first:], race_started + self.p.seconds * 0.85)
            self._finish_references(refs)
            for a in actors:
                a.wait(timeout=self.p.seconds + 300)
                if a.returncode != 0:
                    self.report.violate("race", None, f"actor {a.name} exited {a.returncode}: {self._tail(a.name)}")  # type: ignore[attr-defined]
            self._load_acts()
            self.say(f"race over: {len(self.acts)} acts; quiescing")
            self._quiesce("quiesce", self.p.quiesce_s)
            self._check("parked", final=False)
            self._finish()
        finally:
            for w in workers:
                if w.poll() is None:
                    w.send_signal(signal.SIGTERM)
            for w in workers:
                try:
                    w.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    w.kill()
                    self.report.violate("final", None, f"worker {w.name} did not exit within 60s of SIGTERM")  # type: ignore[attr-defined]
            until.write_text("stop")
            try:
                sampler.wait(timeout=30)
            except subprocess.TimeoutExpired:
                sampler.kill()
            for proc in self.procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        self._load_samples()
        self._check("final", final=True)
        self._check_logs()
        db = sqlite_path(self.store_url)
        if db is not None:
            res = integrity_check(db)
            if res != "ok":
                self.report.violate("final", None, f"PRAGMA integrity_check: {res}")
        self.report.seconds = time.monotonic() - t0
        return self.report

    def _tail(self, name: str) -> str:
        try:
            return (self.logs / f"{name}.err").read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def _start_references(self) -> list[tuple[tuple[str, str], subprocess.Popen]]:
        out = []
        for fname, flow in self.flows.items():
            if not flow.weight:
                continue
            for seed in SEEDS:
                env = dict(self.env, SWARMKIT_ACTOR="reference@race")
                argv = swarmkit_argv("run", self.store_url, str(flow.path), str(self.workspace), "--input", f"seed={seed}")
                proc = subprocess.Popen(argv, cwd=self.workspace, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
                out.append(((fname, seed), proc))
        return out

    def _finish_references(self, refs) -> None:
        for key, proc in refs:
            o, e = proc.communicate(timeout=300)
            short = o.split()[0] if o.split() else ""
            if not short:
                self.report.violate("reference", None, f"reference {key} printed nothing: {e[-500:]}")
                continue
            for _ in range(5):  # a gate: approve it and host the rest here, as an operator would
                if "waiting for approval" not in o:
                    break
                self._swarmkit("approve", short, str(self.workspace))
                r = self._swarmkit("run", "--resume", short, str(self.workspace))
                o, e = r.stdout, r.stderr
            full = self._resolve(short)
            self.refs[key] = full
            self.ref_pid[full] = proc.pid
        self.say(f"references: {len(self.refs)} runs")

    def _resolve(self, short: str) -> str:
        rows = with_store(self.store_url, self.workspace, lambda s: _ids_like(s, short))
        if len(rows) != 1:
            raise AssertionError(f"cannot resolve reference {short}: {rows}")
        return rows[0]

    def _plan(self) -> list[tuple[str, str, bool]]:
        names = [n for n, f in self.flows.items() if f.weight]
        weights = [self.flows[n].weight for n in names]
        return [(self.rnd.choices(names, weights)[0], self.rnd.choice(SEEDS), self.rnd.random() < self.p.cancel_frac) for _ in range(self.p.runs)]

    def _submit(self, plan: list[tuple[str, str, bool]]) -> None:
        """Queue runs for the workers and tell the actors about them (runs.json, replaced atomically)."""
        from swarmkit.runtime import control
        from swarmkit.runtime.flow import load_flow

        async def go(store):
            loaded = {n: load_flow(f.path) for n, f in self.flows.items()}
            out = []
            for fname, seed, cancel_ok in plan:
                job = await control.submit(store, loaded[fname], {"seed": seed}, actor="harness@race")
                out.append({"id": job.id, "flow": fname, "seed": seed, "cancel_ok": cancel_ok, "steps": job.steps})
            return out

        for r in with_store(self.store_url, self.workspace, go):
            self.runs[r["id"]] = r
        tmp = self.base / "runs.json.tmp"
        tmp.write_text(json.dumps(list(self.runs.values())))
        os.replace(tmp, self.base / "runs.json")

    def _submit_over_time(self, plan, until: float) -> None:
        """The rest of the runs arrive in small batches while the acts go on, so there is always something to race."""
        batches = max(1, int((until - time.monotonic()) / 1.0))
        size = math.ceil(len(plan) / batches) if plan else 0
        while plan:
            batch, plan = plan[:size], plan[size:]
            self._submit(batch)
            if plan:
                time.sleep(max(0.0, min(1.0, until - time.monotonic())))

    def _statuses(self) -> dict[str, tuple[str, Any, Any]]:
        from sqlalchemy import text

        async def go(store):
            async with store.read() as conn:
                rows = (await conn.execute(text("SELECT id, status, cancel_requested_at, updated_at FROM jobs"))).all()
            return {r[0]: (r[1], r[2], r[3]) for r in rows}

        return with_store(self.store_url, self.workspace, go)

    def _quiesce(self, phase: str, timeout: float) -> None:
        """Wait until no run is queued or running (the workers host whatever is queued)."""
        deadline = time.monotonic() + timeout
        while True:
            now = self._statuses()
            busy = {i: s for i, s in now.items() if s[0] in ("queued", "running")}
            if not busy:
                return
            if time.monotonic() > deadline:
                for i, (status, cancel_at, _) in busy.items():
                    what = "stuck cancelling" if cancel_at is not None and status == "running" else f"still {status}"
                    self.report.violate(phase, i, f"{what} {timeout:.0f}s after the acts ended")
                return
            time.sleep(0.25)

    def _finish(self) -> None:
        """Resume or approve every parked run until every run has ended."""
        from swarmkit.runtime import control

        deadline = time.monotonic() + self.p.finish_s
        rounds = 0
        while time.monotonic() < deadline:
            now = self._statuses()
            # References too: a host starved of CPU past its lease leaves its run lost, resumable.
            parked = [i for i, s in now.items() if s[0] in PARKED and (i in self.runs or i in self.ref_pid)]
            if not parked:
                break
            rounds += 1

            async def go(store):
                for i in parked:
                    await control.resume(store, i, actor="finisher@race")

            with_store(self.store_url, self.workspace, go)
            self._quiesce("finish", max(10.0, deadline - time.monotonic()))
        self.report.counts["finisher passes"] = rounds
        left = [i for i, s in self._statuses().items() if s[0] not in TERMINAL and (i in self.runs or i in self.ref_pid)]
        for i in left:
            self.report.violate("finish", i, "never ended although it was resumed and approved")

    # --- loading what the processes wrote --------------------------------------------

    def _load_acts(self) -> None:
        acts = []
        for path in sorted(self.base.glob("acts*.jsonl")):
            for line in path.read_text().splitlines():
                if line.strip():
                    acts.append(json.loads(line))
        self.acts = acts

    def _load_samples(self) -> None:
        path = self.base / "samples.jsonl"
        self.samples = []
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    rec = json.loads(line)
                    if "summary" in rec:
                        self.report.wal_max = rec["summary"]["wal_max"]
                        self.report.counts["sampler polls"] = rec["summary"]["polls"]
                        if rec["summary"]["errors"]:
                            self.report.violate("sampler", None, f"{rec['summary']['errors']} reads failed")
                    elif "error" in rec:
                        self.report.violate("sampler", None, f"read failed: {rec['error']}")
                    else:
                        self.samples.append(rec)

    # --- the invariants ------------------------------------------------------------

    def _check(self, phase: str, *, final: bool) -> None:
        rep = self.report
        snap = snapshot(self.store_url, self.workspace)
        ledger = read_ledger(self.ledger)
        acts_by_run: dict[str, list[dict]] = defaultdict(list)
        for a in self.acts:
            if "run" in a:
                acts_by_run[a["run"]].append(a)
        by_actor_audit: dict[str, list[dict]] = defaultdict(list)
        for rows in snap["audit"].values():
            for a in rows:
                by_actor_audit[a["actor"]].append(a)
        runs_dir = self.workspace / ".swarmkit" / "runs"
        all_ids = set(self.runs) | set(self.refs.values())
        for run_id in all_ids:
            job = snap["jobs"].get(run_id)
            if job is None:
                rep.violate(phase, run_id, "the run's row is gone")
                continue
            info = self.runs.get(run_id) or self._ref_info(run_id)
            flow = self.flows[info["flow"]]
            ctx = RunFacts(
                run_id, job, flow, snap["events"].get(run_id, []), snap["checkpoints"].get(run_id, []), snap["workspaces"].get(run_id, []),
                ledger.get(run_id, []), first_pid=self.ref_pid.get(run_id),
            )
            errs = ctx.attribute()
            for e in errs:
                rep.violate(phase, run_id, e)
            for e in ctx.check_structure(final):
                rep.violate(phase, run_id, e)
            for e in ctx.check_executions(rep.counts if final else Counter()):
                rep.violate(phase, run_id, e)
            for e in ctx.check_workspaces(runs_dir):
                rep.violate(phase, run_id, e)
            if phase == "parked":
                rep.parked_status[job.status] += 1
                for e in ctx.check_no_live_agents():
                    rep.violate(phase, run_id, e)
            if final:
                lost = sum(1 for end in ctx.epoch_end.values() if end == "run.lost")
                if lost:
                    # No host is killed in the race: a lost epoch is a host whose heartbeat ran late past the lease.
                    rep.counts["epochs lost with their host alive (heartbeat late)"] += lost
                rep.final_status[job.status] += 1
                if job.status == "faulted":
                    rep.violate(phase, run_id, f"faulted: {job.error}")
                if job.status not in TERMINAL:
                    rep.violate(phase, run_id, f"did not end ({job.status})")
        # Acts: their audit rows, stops, cancels.
        if final:
            for a in self.acts:
                if "run" not in a:
                    if a.get("error"):
                        rep.violate("acts", None, f"{a.get('actor')}: {a['error']}")
                    continue
                rep.acts_by_kind[a["kind"]] += 1
                rep.acts_by_mode[a["mode"]] += 1
                rep.acts_by_via[a["via"]] += 1
                if a.get("changed"):
                    rep.acts_changed[a["kind"]] += 1
            for e in self._check_acts(snap, by_actor_audit):
                rep.violations.append(e)
            for e in self._check_references(snap):
                rep.violations.append(e)
            for e in self._check_samples():
                rep.violations.append(e)
            # The runs folder holds only this store's runs' workspaces.
            if runs_dir.exists():
                for entry in runs_dir.iterdir():
                    if entry.name not in snap["jobs"]:
                        rep.violate(phase, None, f"{entry} is in the runs folder but belongs to no run")

    def _ref_info(self, run_id: str) -> dict:
        for (flow, seed), rid in self.refs.items():
            if rid == run_id:
                return {"flow": flow, "seed": seed, "cancel_ok": False}
        raise KeyError(run_id)

    def _check_acts(self, snap, by_actor_audit) -> list[str]:
        out = []
        rep = self.report
        for a in self.acts:
            if "run" not in a:
                continue
            run_id, kind, actor = a["run"], a["kind"], a["actor"]
            tag = f"[acts] {run_id[:8]}: {kind} by {actor} ({a['via']}, {a['mode']})"
            if a.get("error"):
                out.append(f"{tag}: raised {a['error']}")
                continue
            for stream in ("msg", "err"):
                text = a.get(stream) or ""
                # The CLI's own traceback starts a line. An agent's is relayed as its log lines
                # ("  node | ..."): a cancel interrupts the agent, and a Python agent started a moment
                # before prints its KeyboardInterrupt (CI, 2026-12-03). That one is the agent's to print.
                if "database is locked" in text or re.search(r"^Traceback", text, re.M):
                    out.append(f"{tag}: printed {text[-300:]!r}")
            code = a.get("code")
            if kind in ("stop", "cancel", "cancel_keep") and code != 0:
                out.append(f"{tag}: exit {code} (stop and cancel are 0 when done or a no-op): {a.get('msg')!r} {a.get('err', '')[-200:]!r}")
            if kind in ("resume", "approve") and code not in (0, 1):
                out.append(f"{tag}: exit {code}: {a.get('err', '')[-200:]!r}")
            rows = by_actor_audit.get(actor, [])
            actions = {r["action"] for r in rows}
            if any(r["job_id"] != run_id for r in rows):
                out.append(f"{tag}: audit rows on another run: {rows}")
            job = snap["jobs"][run_id]
            if not a.get("changed"):
                if actions:
                    out.append(f"{tag}: changed nothing, yet audited {sorted(actions)}: {a.get('msg')!r}")
                continue
            msg = a.get("msg") or ""
            if kind == "stop":
                need = {"run.stop_requested"} | ({"run.stopped"} if "stopped at once" in msg else set())
                allowed = {"run.stop_requested", "run.stopped"}
            elif kind.startswith("cancel"):
                need = allowed = {"run.cancel_requested", "run.cancelled"}
            elif kind == "approve":
                need = allowed = {"gate.approved", "run.resumed"}
            elif kind == "resume":
                need = {"run.resumed"} | ({"gate.approved"} if "approved" in msg else set())
                allowed = {"run.resumed", "gate.approved"}
            else:  # run_resume
                need = set() if "(was queued)" in msg else {"run.resumed"}
                allowed = {"run.resumed", "gate.approved"}
            if not need <= actions:
                out.append(f"{tag}: acknowledged ({msg.splitlines()[0] if msg else ''!r}) but the audit lacks {sorted(need - actions)}")
            if not actions <= allowed:
                out.append(f"{tag}: unexpected audit rows {sorted(actions - allowed)}")
            if kind.startswith("cancel"):
                keep = kind == "cancel_keep"
                if job.status != "cancelled":
                    out.append(f"{tag}: cancel acknowledged, but the run ended {job.status}")
                first = next((r for r in snap["audit"].get(run_id, []) if r["action"] == "run.cancel_requested"), None)
                if first is not None and first["actor"] == actor and bool(job.cancel_keep) != keep:
                    out.append(f"{tag}: cancel_keep is {job.cancel_keep}, asked {keep}")
                if "cancel requested for" in msg and job.ended_at is not None and a.get("t_ret"):
                    took = ts(job.ended_at) - a["t_ret"]
                    rep.cancel_latency_max = max(rep.cancel_latency_max, took)
                    if took > CANCEL_BOUND_S:
                        out.append(f"{tag}: the run took {took:.1f}s to end cancelled")
            if kind == "stop" and "stop requested for" in msg:
                out.extend(self._check_stop(a, snap, tag))
            if kind.startswith("cancel") and "cancel requested for" in msg:
                out.extend(self._check_no_start_after(a, snap, tag, "run.cancel_requested", f"by {actor} ("))
        # Every audit row is someone's: an act, the harness, the finisher, a draining worker.
        known = {a["actor"] for a in self.acts} | {"harness@race", "finisher@race", "reference@race"}
        for actor, rows in by_actor_audit.items():
            if actor not in known and not actor.startswith("worker "):
                out.append(f"[acts] audit rows by an unknown actor {actor!r}: {[r['action'] for r in rows][:5]}")
        return out

    def _check_stop(self, a: dict, snap, tag: str) -> list[str]:
        """A stop acknowledged at t_ret: no node of that epoch starts after a boundary reached later."""
        run_id = a["run"]
        facts = self._facts(run_id, snap)
        ev = next((e for e in facts.events if e["kind"] == "run.stop_requested" and e["text"].endswith(f"by {a['actor']}")), None)
        if ev is None:
            return [f"{tag}: acknowledged, but no run.stop_requested event names it"]
        epoch = facts.epoch_of(ev["id"])
        t = a["t_ret"]
        evs = [e for e in facts.events if facts.epoch_of(e["id"]) == epoch]
        finished = {e["step"]: e for e in evs if e["kind"] == "node.finished"}
        out = []
        boundary_after = False
        for e in evs:
            if e["kind"] == "node.started" and e["step"] - 1 in finished and ts(finished[e["step"] - 1]["at"]) > t:
                out.append(f"{tag}: stop acknowledged at {t:.3f}, yet node {e['node']} started after the boundary reached at {ts(finished[e['step'] - 1]['at']):.3f}")
        for step, e in finished.items():
            if ts(e["at"]) > t and step < facts.flow.steps - 1:
                boundary_after = True
        end = facts.epoch_end.get(epoch)
        self.report.counts["stops acknowledged mid-run"] += 1
        if boundary_after:
            self.report.counts["stops with a boundary after them"] += 1
            if end is not None and end not in ("run.stopped", "run.cancelled", "run.lost"):
                out.append(f"{tag}: a boundary came after the stop, yet epoch {epoch} ended {end}")
        elif end == "run.completed":
            self.report.counts["stops after the last boundary (run completed)"] += 1
        return out

    def _check_no_start_after(self, a: dict, snap, tag: str, kind: str, needle: str) -> list[str]:
        """A request acknowledged at t_ret: no node of its epoch starts after a boundary reached later."""
        facts = self._facts(a["run"], snap)
        ev = next((e for e in facts.events if e["kind"] == kind and needle in e["text"]), None)
        if ev is None:
            return [f"{tag}: acknowledged, but no {kind} event names it"]
        epoch = facts.epoch_of(ev["id"])
        evs = [e for e in facts.events if facts.epoch_of(e["id"]) == epoch]
        finished = {e["step"]: e for e in evs if e["kind"] == "node.finished"}
        out = []
        for e in evs:
            if e["kind"] == "node.started" and e["step"] - 1 in finished and ts(finished[e["step"] - 1]["at"]) > a["t_ret"]:
                out.append(f"{tag}: acknowledged at {a['t_ret']:.3f}, yet node {e['node']} started after the boundary reached at {ts(finished[e['step'] - 1]['at']):.3f}")
        return out

    def _facts(self, run_id: str, snap) -> RunFacts:
        info = self.runs.get(run_id) or self._ref_info(run_id)
        f = RunFacts(
            run_id, snap["jobs"][run_id], self.flows[info["flow"]], snap["events"].get(run_id, []), snap["checkpoints"].get(run_id, []),
            snap["workspaces"].get(run_id, []), [], first_pid=self.ref_pid.get(run_id),
        )
        f.attribute()
        return f

    def _check_references(self, snap) -> list[str]:
        out = []
        ref_state = {}
        for key, rid in self.refs.items():
            job = snap["jobs"][rid]
            cps = snap["checkpoints"].get(rid, [])
            want = "failed" if self.flows[key[0]].ends_failed else "completed"
            if job.status != want:
                out.append(f"[final] reference {key} ended {job.status}, not {want}")
            ref_state[key] = self._final(rid, job, cps, snap, out)
        for run_id, info in self.runs.items():
            job = snap["jobs"][run_id]
            if job.status not in ("completed", "failed"):
                continue
            mine = self._final(run_id, job, snap["checkpoints"].get(run_id, []), snap, out)
            ref = ref_state.get((info["flow"], info["seed"]))
            if ref is None:
                continue
            self.report.counts["final states compared"] += 1
            if mine != ref:
                out.append(f"[final] {run_id[:8]}: {job.status} with a final state other than its reference's: {mine!r} vs {ref!r}")
        return out

    def _final(self, run_id: str, job, cps, snap, out: list[str]) -> tuple:
        """An ended run's final state, step and the usage of its finished nodes; the row's usage is
        checked against the latter (more only where a host was lost mid-node)."""
        done = finished_usage(snap["events"].get(run_id, []))
        if job.tokens < done[0] or job.cost + 1e-9 < done[1]:
            out.append(f"[final] {run_id[:8]}: the row holds {job.tokens} tokens, ${job.cost}, less than its finished nodes' {done}")
        elif job.tokens > done[0] and job.epoch <= 1:
            out.append(f"[final] {run_id[:8]}: hosted once, yet the row holds {job.tokens} tokens against its finished nodes' {done[0]}")
        elif job.tokens > done[0]:
            self.report.counts["runs that paid again for a node cut short"] += 1
        return (cps[-1]["state"] if cps else None, done, job.step)

    def _check_samples(self) -> list[str]:
        out = []
        last: dict[str, dict] = {}
        first_terminal: dict[str, dict] = {}
        pids: dict[tuple[str, str], set] = defaultdict(set)
        for s in self.samples:
            rid, row = s["id"], s["row"]
            prev = last.get(rid)
            if row["status"] == "running" and row["pid"] not in (None, "None"):
                pids[(rid, row["epoch"])].add(row["pid"])
            if prev is not None:
                if prev["status"] in TERMINAL and row != prev:
                    out.append(f"[samples] {rid[:8]}: ended {prev['status']}, then the row changed: {prev} -> {row}")
                elif prev["status"] != row["status"] and row["status"] not in REACHABLE.get(prev["status"], set()):
                    out.append(f"[samples] {rid[:8]}: {prev['status']} -> {row['status']} is not a legal transition")
                if int(row["epoch"]) < int(prev["epoch"]):
                    out.append(f"[samples] {rid[:8]}: epoch went back {prev['epoch']} -> {row['epoch']}")
                if int(row["step"]) < int(prev["step"]):
                    out.append(f"[samples] {rid[:8]}: step went back {prev['step']} -> {row['step']}")
            if row["status"] in TERMINAL and rid not in first_terminal:
                first_terminal[rid] = row
            last[rid] = row
        for (rid, epoch), ps in pids.items():
            if len(ps) > 1:
                out.append(f"[samples] {rid[:8]}: epoch {epoch} was hosted by {len(ps)} processes {sorted(ps)}")
        self.report.counts["status changes sampled"] = len(self.samples)
        self.report.counts["runs seen terminal by the sampler"] = len(first_terminal)
        return out

    def _check_logs(self) -> None:
        for path in sorted(self.logs.glob("*.err")):
            text = path.read_text(errors="replace")
            if "database is locked" in text:
                self.report.violate("logs", None, f"{path.name}: 'database is locked' x{text.count('database is locked')}")
            if "Traceback" in text:
                i = text.index("Traceback")
                self.report.violate("logs", None, f"{path.name}: traceback: {text[i:i + 1500]}")
            warnings = [l for l in text.splitlines() if "failed" in l]
            if warnings:
                self.report.counts[f"warnings in {path.stem}"] = len(warnings)


async def _ids_like(store, short: str) -> list[str]:
    from sqlalchemy import text

    async with store.read() as conn:
        return [r[0] for r in await conn.execute(text("SELECT id FROM jobs WHERE id LIKE :p"), {"p": short + "%"})]


class RunFacts:
    """What the store and the ledger say about one run, with every event and execution given its epoch."""

    def __init__(self, run_id, job, flow: FlowSpec, events, checkpoints, workspaces, execs, first_pid: int | None = None):
        self.id = run_id
        self.first_pid = first_pid
        self.job = job
        self.flow = flow
        self.events = events
        self.checkpoints = checkpoints
        self.workspaces = workspaces
        self.execs = execs
        self.claims: list[tuple[int, int, int, float]] = []  # (event id, epoch, pid, at)
        self.epoch_end: dict[int, str] = {}
        self.epoch_end_step: dict[int, int | None] = {}

    def epoch_of(self, event_id: int) -> int:
        epoch = 0
        for cid, e, _pid, _at in self.claims:
            if cid < event_id:
                epoch = e
            else:
                break
        return epoch

    def attribute(self) -> list[str]:
        errs = []
        for ev in self.events:
            if ev["kind"] == "run.claimed":
                m = CLAIM_RE.search(ev["text"])
                if not m:
                    errs.append(f"cannot read the claim {ev['text']!r}")
                    continue
                self.claims.append((ev["id"], int(m.group(2)), int(m.group(1)), ts(ev["at"])))
        if self.first_pid is not None and self.events:
            # Submitted and hosted at once by `swarmkit run` (epoch 1, no claim event).
            first = self.events[0]
            self.claims.insert(0, (first["id"] - 1, 1, self.first_pid, ts(first["at"]) - 0.001))
        epochs = [c[1] for c in self.claims]
        want = list(range(1, len(epochs) + 1))
        if epochs != want:
            errs.append(f"claims went through epochs {epochs}, not {want}")
        if (epochs[-1] if epochs else 0) != self.job.epoch:
            errs.append(f"the row is at epoch {self.job.epoch}, the last claim at {epochs[-1] if epochs else 0}")
        for ev in self.events:
            if ev["kind"] in END_KINDS:
                e = self.epoch_of(ev["id"])
                if e not in self.epoch_end:
                    self.epoch_end[e] = ev["kind"]
                    self.epoch_end_step[e] = ev["step"]
        # Executions to epochs: the latest claim by the same process before the agent started.
        for ex in self.execs:
            best = None
            for _cid, e, pid, at in self.claims:
                if pid == ex.pid and at <= ex.t_start + 0.001:
                    best = e
            ex.epoch = best
            if best is None and ex.t_start == ex.t_start:
                errs.append(f"step {ex.step} ({ex.node}) ran in process {ex.pid}, which never claimed the run")
        return errs

    def check_structure(self, final: bool) -> list[str]:
        errs = []
        cps = self.checkpoints
        steps = [c["step"] for c in cps]
        if steps != list(range(0, self.job.step + 1)):
            errs.append(f"checkpoints at steps {steps}, row at step {self.job.step}")
        epochs = [c["epoch"] for c in cps]
        if epochs != sorted(epochs):
            errs.append(f"checkpoint epochs go back: {epochs}")
        names = [a.name for a in self.flow.agents]
        for c in cps[1:]:
            if c["node"] != names[c["step"] - 1]:
                errs.append(f"checkpoint {c['step']} is of {c['node']}, not {names[c['step'] - 1]}")
        finished = Counter(e["step"] for e in self.events if e["kind"] == "node.finished")
        for c in cps[1:]:
            s = c["step"] - 1
            if finished.get(s, 0) != 1:
                errs.append(f"node {names[s]} finished {finished.get(s, 0)} times in the events, checkpointed once")
            evs = [e for e in self.events if self.epoch_of(e["id"]) == c["epoch"] and e["step"] == s and e["node"] == names[s]]
            started = [e for e in evs if e["kind"] == "node.started"]
            if len(started) != 1:
                errs.append(f"node {names[s]} started {len(started)} times in epoch {c['epoch']}, which checkpointed it")
            logs = [e["text"] for e in evs if e["kind"] == "log"]
            if logs != expected_lines(names[s]):
                errs.append(f"node {names[s]} (epoch {c['epoch']}) logged {logs}, not {expected_lines(names[s])}")
            fin = [e for e in evs if e["kind"] == "node.finished"]
            if len(fin) != 1:
                errs.append(f"node {names[s]}'s node.finished is not in epoch {c['epoch']} that checkpointed it")
        for s in finished:
            if s >= self.job.step:
                errs.append(f"node.finished for step {s}, beyond the row's step {self.job.step}")
        if self.job.status in TERMINAL:
            ends = [e for e in self.events if e["kind"] in ("run.completed", "run.failed", "run.faulted", "run.cancelled")]
            if len(ends) != 1:
                errs.append(f"{len(ends)} terminal events: {[e['kind'] for e in ends]}")
            elif ends[0]["kind"] != f"run.{self.job.status}":
                errs.append(f"ended {self.job.status}, its terminal event says {ends[0]['kind']}")
            elif ends[0]["id"] != self.events[-1]["id"]:
                later = [(e["kind"], e["text"][:60]) for e in self.events if e["id"] > ends[0]["id"]]
                errs.append(f"events written after it ended {self.job.status}: {later[:5]}")
            if self.job.ended_at is None:
                errs.append(f"{self.job.status} without ended_at")
        if self.job.status == "stopped" and self.job.stop_requested_at is None:
            errs.append("stopped without stop_requested_at")
        return errs

    def check_executions(self, counts: Counter) -> list[str]:
        """Each committed node ran once in its epoch; other runs of a node only in lost epochs."""
        errs = []
        names = [a.name for a in self.flow.agents]
        cp_epoch = {c["step"] - 1: c["epoch"] for c in self.checkpoints[1:]}
        by_step: dict[int, list] = defaultdict(list)
        for ex in self.execs:
            if ex.t_start != ex.t_start:
                errs.append(f"step {ex.step}: an end line with no start (pid {ex.pid})")
                continue
            by_step[ex.step].append(ex)
        for s, execs in sorted(by_step.items()):
            committed = cp_epoch.get(s)
            in_commit = [x for x in execs if x.epoch == committed] if committed is not None else []
            if committed is not None:
                if len(in_commit) != 1:
                    errs.append(f"node {names[s]} ran {len(in_commit)} times in epoch {committed}, which checkpointed it")
                elif in_commit[0].t_end is None:
                    errs.append(f"node {names[s]}'s execution in epoch {committed} never finished, yet it was checkpointed")
            per_epoch = Counter(x.epoch for x in execs)
            for x in execs:
                if x.epoch == committed:
                    continue
                end = self.epoch_end.get(x.epoch) if x.epoch is not None else None
                if end == "run.lost":
                    counts["legal re-runs (epoch lost)"] += 1
                elif end in ("run.cancelled", "run.failed", "run.faulted") and committed is None and s == self.job.step:
                    counts["interrupted or failed node executions"] += 1
                else:
                    errs.append(f"node {names[s]} ran in epoch {x.epoch} (pid {x.pid}), which ended {end} and did not checkpoint it")
                if per_epoch[x.epoch] > 1:
                    errs.append(f"node {names[s]} ran {per_epoch[x.epoch]} times in epoch {x.epoch}")
            if committed is None and s > self.job.step:
                errs.append(f"node {names[s]} ran although the run never got past step {self.job.step}")
        # No two epochs' executions overlap unless the earlier one was lost.
        spans = sorted((x for x in self.execs if x.t_start == x.t_start), key=lambda x: x.t_start)
        for i, a in enumerate(spans):
            a_end = a.t_end if a.t_end is not None else None
            for b in spans[i + 1 :]:
                if a_end is not None and b.t_start >= a_end:
                    break
                if b.epoch != a.epoch and a_end is not None and b.t_start < a_end:
                    if self.epoch_end.get(a.epoch) == "run.lost":
                        counts["overlaps with a lost host's agent"] += 1
                    else:
                        errs.append(f"{a.node} (epoch {a.epoch}, pid {a.pid}) and {b.node} (epoch {b.epoch}, pid {b.pid}) ran at the same time")
        # Nothing starts after a run ended.
        if self.job.status in TERMINAL and self.job.ended_at is not None:
            end = ts(self.job.ended_at)
            for x in self.execs:
                if x.t_start == x.t_start and x.t_start > end + 0.05:
                    errs.append(f"node {x.node} started {x.t_start - end:.2f}s after the run ended {self.job.status}")
        return errs

    def check_workspaces(self, runs_dir: Path) -> list[str]:
        errs = []
        status = self.job.status
        rows = self.workspaces
        if not rows:
            # A claim can be lost before its host takes the run (a host slow to
            # start, marked lost meanwhile): only a run whose agent ran was hosted.
            if self.execs and status not in ("queued",):
                errs.append(f"{status}, hosted at least once, but no workspace row")
            if (runs_dir / self.id).exists():
                errs.append("a workspace folder with no row")
            return errs
        for w in rows:
            exists = Path(w["path"]).exists()
            if Path(w["path"]).parent != runs_dir:
                errs.append(f"workspace {w['path']} is outside {runs_dir}")
            if status in PARKED or status == "running":
                want_state, want_exists = {"active"}, True
            elif status == "cancelled":
                want_state, want_exists = ({"kept"}, True) if self.job.cancel_keep else ({"destroyed"}, False)
            elif status in ("completed", "failed"):
                # DESIGN.md names the states active, kept, destroyed; a completed run's kept workspace is not active.
                want_state, want_exists = ({"kept", "active"}, True) if self.flow.keep_workspaces else ({"destroyed"}, False)
            elif status == "faulted":
                want_state, want_exists = {"kept"}, True
            else:
                want_state, want_exists = {"active", "kept", "destroyed"}, exists
            if w["state"] not in want_state:
                errs.append(f"{status} (keep={self.job.cancel_keep}, flow keeps={self.flow.keep_workspaces}): workspace row is {w['state']}, want {sorted(want_state)}")
            if exists != want_exists:
                errs.append(f"{status} (keep={self.job.cancel_keep}): workspace folder {'exists' if exists else 'is gone'}")
        return errs

    def check_no_live_agents(self) -> list[str]:
        """No agent process of a run that is not running is still alive ("the work runs on")."""
        errs = []
        if self.job.status == "running":
            return errs
        # A lost run's host may still be alive (its heartbeat ran late): it is fenced at its next
        # heartbeat and interrupts its agent within the grace periods. Give it that long.
        deadline = time.monotonic() + (6.0 if self.job.status == "lost" else 0.0)
        for x in self.execs:
            if not x.pgid:
                continue
            while run_group_alive(x.pgid, self.id) and time.monotonic() < deadline:
                time.sleep(0.2)
            if run_group_alive(x.pgid, self.id):
                errs.append(f"the agent {x.node} (process group {x.pgid}) is still alive, yet the run is {self.job.status}")
        return errs
