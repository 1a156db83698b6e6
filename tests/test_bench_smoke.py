"""Every benchmark under bench/ still runs: each with tiny counts (--smoke), all at once.

Benchmarks, not timed tests: nothing here asserts a figure, only that each
script runs to its end and prints its report. SQLite only (the PostgreSQL
cases are the same code with another URL).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# per_node.py is not here: CI runs a round of it of its own (`bench/per_node.py --ci` in .ci/run), alone,
# after the tests.
SCRIPTS = {
    "boundary_check.py": "sql: the SELECT alone",
    "stop_reaction.py": "stop_requested_at -> RunStoppedError",
    "stop_in_node.py": "plain stop, async ctx.aboundary loop",
    "throughput.py": "node boundaries/s over the window",
    "console_poll.py": "full reload / changed-rows poll",
    "console_render.py": "peak memory",
    "console_scale.py": "first paint with 300 runs in history",
    "cli_start.py": "sqlite3: stop ID",
    "logs.py": "lag: printed -> painted on screen",
    "wal.py": "WAL largest",
    "http_api.py": "GET /jobs/{id} with 16 clients",
    "http_throughput.py": "req/s ratio to floor",
    "containment.py": "from the host frozen (SIGSTOP) to its agent dead",
    "run_table_lines.py": "a changed line drawn",
}


@pytest.mark.timeout(240)
def test_every_benchmark_runs_with_tiny_counts(tmp_path: Path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    env.pop("SWARMKIT_STORE", None)
    procs = {}
    for script in SCRIPTS:
        out = tmp_path / (script + ".out")
        procs[script] = (subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / script), "--smoke"],
            cwd=tmp_path, env=env, stdout=out.open("w"), stderr=subprocess.STDOUT,
        ), out)
    deadline = time.monotonic() + 200
    failures = []
    for script, (proc, out) in procs.items():
        try:
            code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            code = "timeout"
        text = out.read_text(errors="replace")
        if code != 0 or SCRIPTS[script] not in text:
            failures.append(f"{script} (exit {code}):\n{text[-3000:]}")
    assert not failures, "\n\n".join(failures)


@pytest.mark.timeout(90)
def test_the_fleet_bench_runs_direct_and_through_pgbouncer(tmp_path: Path):
    """bench/fleet.py's round for a fleet of 1 and of 2 workers, on the test server and through a PgBouncer
    of its own (the two modes side by side): every case runs, its runs end completed or stopped (none lost
    or faulted), its workers held connections and measured boundaries, and none is left running."""
    import json

    from .conftest import require_pg
    from .helpers import need
    from .pgbouncer_instance import pgbouncer_bin

    require_pg()
    need(pgbouncer_bin(), "no pgbouncer installed (Debian package pgbouncer; .ci/run installs it)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
               SWARMKIT_POLL="0.1")
    env.pop("SWARMKIT_STORE", None)
    procs = {}
    for mode in ("direct", "pgbouncer"):
        out = tmp_path / f"{mode}.out"
        procs[mode] = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "fleet.py"), "--mode", mode, "--workers", "1,2", "--runs", "2", "--min-runs", "0",
             "--agents", "2", "--agent-s", "0.05", "--json", str(tmp_path / f"{mode}.json")],
            cwd=tmp_path, env=env, stdout=out.open("w"), stderr=subprocess.STDOUT,
        )
    for mode, proc in procs.items():
        try:
            code = proc.wait(timeout=75)
        except subprocess.TimeoutExpired:
            proc.terminate()  # the bench cleans up on TERM as on Ctrl-C
            proc.wait(timeout=30)
            code = "timeout"
        text = (tmp_path / f"{mode}.out").read_text(errors="replace")
        assert code == 0, f"{mode} (exit {code}):\n{text[-3000:]}"
        assert "runs/s" in text and "growth:" in text, text[-3000:]
        rows = json.loads((tmp_path / f"{mode}.json").read_text())["rows"]
        assert [(r["mode"], r["workers"]) for r in rows] == [(mode, 1), (mode, 2)], text[-3000:]
        for r in rows:
            assert r["skipped"] is None, text[-3000:]
            assert (r["lost"], r["faulted"]) == (0, 0), text[-3000:]
            assert r["completed"] >= 1 and r["completed"] + r["statuses"].get("stopped", 0) == r["runs"], text[-3000:]
            assert r["boundary"], text[-3000:]
            if mode == "direct":
                assert r["server_peak"] >= 1, text[-3000:]
            else:
                # Through PgBouncer the server connections are the pooler's, opened and closed by it,
                # and a sample four times a second of a round this short may find none held (seen on
                # an idle machine): what the fleet holds is its clients' connections to PgBouncer.
                assert r["client_peak"] >= r["workers"], text[-3000:]
            for pid in r["pids"]:
                cmdline = Path(f"/proc/{pid}/cmdline")
                assert not cmdline.exists() or b"swarmkit.cli" not in cmdline.read_bytes(), f"worker {pid} left running"
