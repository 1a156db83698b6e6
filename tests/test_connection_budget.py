"""Connection budget and names on PostgreSQL (issue 15): a worker hosting ten runs holds at most 2 server
connections, a console and a one-shot verb 1, and every process is named swarmkit-ROLE@HOST; counted
on the server (pg_stat_activity) and, through PgBouncer, on the pooler (SHOW CLIENTS, its log).
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from tests.reliability import console_in_process

from .conftest import Cli, hold, release, wait_for, write_flow
from .fleet_probe import (
    ENV,
    HOST,
    LONG_LEASE,
    Backends,
    Sampler,
    clients_of,
    clients_of_each,
    console_on_pty,
    drain,
    end,
    nothing,
    own_pgbouncer,
    peak_clients,
    queue,
    rows,
    schema_of,
    told_by,
)
from .helpers import job
from .pgbouncer_instance import PgBouncer

TEN = """
    name = "busy"
    [[agents]]
    name = "a"
    command = "{hold}; echo a"
    [[agents]]
    name = "b"
    command = "for i in 1 2 3 4 5; do echo b $i; sleep 0.05; done"
    [[agents]]
    name = "c"
    command = "echo c"
"""


@pytest.mark.parametrize("via", ["postgresql", "pgbouncer"])
def test_a_worker_hosting_ten_runs_holds_at_most_two_server_connections(via: str, pg_url: str, workspace: Path, tmp_path: Path):
    """Ten runs at once in one worker: never more than 2 connections on the server (directly),
    nor more than 2 clients on the pooler and 2 server connections behind it (through PgBouncer)."""
    gates = tmp_path / "gates"
    flow = write_flow(tmp_path, "busy", TEN.format(hold=hold(gates, "go")))
    ids = queue(pg_url, workspace, flow, 10)  # directly: only the worker goes through the pooler
    pg = Backends()
    with own_pgbouncer() if via == "pgbouncer" else nothing() as pgb:
        url = pgb.url(schema_of(pg_url)) if pgb else pg_url
        worker = Cli(url, workspace).start("worker", "--concurrency", "10", env=LONG_LEASE)

        def sample() -> dict[str, int]:
            mine = pg.of(worker.pid)
            seen = {"server": len(mine), "named": sum(1 for a, _, _ in mine if a == f"swarmkit-worker@{HOST}")}
            if pgb:
                seen["pooler_clients"] = len(clients_of(pgb, worker.pid))
                seen["server"] = len(pg.of(pgb.pid))  # every server connection of this test's own pooler
            return seen

        try:
            with Sampler(sample) as sampler:
                wait_for(lambda: all(r[1] == "a" for r in rows(pg_url, workspace, ids).values()), what="all ten running a")
                # Sampled through a round of heartbeats of the ten held runs (each run's, seen on its row).
                beats = {i: job(pg_url, workspace, i).heartbeat_at for i in ids}
                wait_for(lambda: all(job(pg_url, workspace, i).heartbeat_at != beats[i] for i in ids), timeout=60, interval=0.1, what="a heartbeat of each held run")
                release(gates, "go")
                with told_by(worker, lambda: rows(pg_url, workspace, ids)):
                    wait_for(lambda: all(r[0] == "completed" for r in rows(pg_url, workspace, ids).values()), timeout=40, what="all ten to complete")
        finally:
            end(worker)
            pg.close()
    assert len({r[2] for r in rows(pg_url, workspace, ids).values()}) == 1, "one worker hosted all ten"
    samples = sampler.samples
    assert len(samples) >= 10, f"too few samples ({len(samples)}; {sampler.errors[:3]})"
    peak = {k: max(s[k] for s in samples) for k in samples[0]}
    assert 1 <= peak["server"] <= 2, peak
    if pgb:
        assert 1 <= peak["pooler_clients"] <= 2, peak
    else:
        assert all(s["named"] == s["server"] for s in samples), "every connection of the worker is named swarmkit-worker@HOST"


def test_a_one_shot_verb_and_the_console_once_use_one_connection(pg_url: str, workspace: Path, tmp_path: Path):
    """Counted on PgBouncer's own log (every client's login and close): a one-shot verb opens at most
    1 connection at a time, however short-lived it is."""
    flow = write_flow(tmp_path, "one", 'name = "one"\n[[agents]]\nname = "a"\ncommand = "echo hi"\n')
    (rid,) = queue(pg_url, workspace, flow, 1)
    with own_pgbouncer() as pgb:
        cli = Cli(pgb.url(schema_of(pg_url)), workspace)
        # In this process, through the verbs' own main()s: what they open is the point, not their start-up.
        for argv in (["status"], ["stop", rid[:8]]):
            before = len(pgb.log_text())
            res = cli.call(*argv, env=ENV)
            assert res.returncode == 0, res.stderr
            assert peak_clients(pgb.log_text()[before:], pgb.dbname)[0] == 1, f"swarmkit {' '.join(argv)}"
        before = len(pgb.log_text())
        once = console_in_process(cli.store_url, "--once", str(workspace), cwd=workspace)
        assert once.returncode == 0 and rid[:8] in once.stdout, once.stderr
        assert peak_clients(pgb.log_text()[before:], pgb.dbname)[0] == 1, "swarmkit-console --once"


# --- application_name, and what each long-lived process holds ---------------------------------


@pytest.mark.parametrize("via", ["postgresql", "pgbouncer"])
def test_every_process_is_named_and_keeps_to_its_connection_budget(via: str, request, pg_url: str, workspace: Path, tmp_path: Path):
    """A worker hosting a run, `swarmkit serve`, the console and a long-lived cli verb (`status -w`), at once:
    each is named swarmkit-ROLE@HOST (in pg_stat_activity directly, in SHOW CLIENTS through PgBouncer);
    the worker and serve hold at most 2 connections, the console and the cli verb 1."""
    gates = tmp_path / "gates"
    flow = write_flow(tmp_path, "held", f'name = "held"\n[[agents]]\nname = "a"\ncommand = "{hold(gates, "go")}"\n')
    (rid,) = queue(pg_url, workspace, flow, 1)
    pgb: PgBouncer | None = request.getfixturevalue("pgbouncer") if via == "pgbouncer" else None
    url = pgb.url(schema_of(pg_url)) if pgb else pg_url
    cli = Cli(url, workspace)
    pg = Backends()
    procs: dict[str, subprocess.Popen] = {}
    seen, stop_draining = bytearray(), threading.Event()
    master = None
    try:
        procs["worker"] = cli.start("worker", "--concurrency", "4", env=ENV)
        procs["serve"] = cli.start("serve", "--port", "0", "--no-host", env=ENV)
        procs["cli"] = cli.start("status", "-w", env=ENV)
        procs["console"], master = console_on_pty(url, workspace)
        threading.Thread(target=drain, args=(master, seen, stop_draining), daemon=True).start()
        wait_for(lambda: job(pg_url, workspace, rid).status == "running", what="the worker to host the run")

        pids = {role: p.pid for role, p in procs.items()}

        def names_and_counts() -> dict[str, tuple[int, set[str]]]:
            if pgb:
                return {role: (len(rows), {r["application_name"] for r in rows}) for role, rows in clients_of_each(pgb, pids).items()}
            return {role: (len(rows), {r[0] for r in rows}) for role, rows in pg.of_each(pids).items()}

        wait_for(lambda: all(n for n, _ in names_and_counts().values()), timeout=30, what="every process to connect")
        with Sampler(names_and_counts, every=0.1) as sampler:
            wait_for(lambda: len(sampler.samples) >= 10, timeout=60, what="10 samples")
        for role, p in procs.items():
            assert p.poll() is None, f"{role} exited: {p.stderr.read() if p.stderr else ''}"
    finally:
        release(gates, "go")
        end(*procs.values())
        stop_draining.set()
        if master is not None:
            os.close(master)
        pg.close()
    assert b"Traceback" not in bytes(seen)
    names = {role: set().union(*(s[role][1] for s in sampler.samples)) for role in procs}
    peaks = {role: max(s[role][0] for s in sampler.samples) for role in procs}
    assert names == {role: {f"swarmkit-{role}@{HOST}"} for role in procs}, (names, peaks)
    budget = {"worker": 2, "serve": 2, "cli": 1, "console": 1}
    assert all(peaks[role] <= limit for role, limit in budget.items()), peaks
