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
SCRIPTS = {
    "per_node.py": "swarmkit / floor",
    "boundary_check.py": "sql: the SELECT alone",
    "stop_reaction.py": "stop_requested_at -> RunStoppedError",
    "stop_in_node.py": "plain stop, async ctx.aboundary loop",
    "throughput.py": "node boundaries/s over the window",
    "console_poll.py": "full reload / changed-rows poll",
    "console_render.py": "peak memory",
    "cli_start.py": "sqlite3: stop ID",
    "logs.py": "lag: printed -> painted on screen",
    "wal.py": "WAL largest",
    "http_api.py": "GET /jobs/{id} with 16 clients",
    "containment.py": "from the host frozen (SIGSTOP) to its agent dead",
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
