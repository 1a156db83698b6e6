"""`swarmkit-console --once` and `--once --json`: every status, every column, nothing but plain text."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import subprocess
import sys
import time
from datetime import UTC, datetime

import pytest
from console_helpers import HOSTILE_FLOW, add_hostile_run

from swarmkit.store.models import JOB_COLUMNS
from tests.conftest import ROOT, child_env
from tests.sample_store import build_sample_store

EVERY_STATUS = {"queued", "running", "stopping", "cancelling", "stalled", "stopped", "deferred", "lost", "completed", "failed", "faulted", "cancelled"}
# A long lease: the sample's running rows must not turn lost while the command starts.
ENV = {"SWARMKIT_LEASE": "600"}


def console(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "swarmkit.console.cli", *args], cwd=ROOT, env=child_env(ENV), capture_output=True, text=True, timeout=timeout
    )


def on_a_pty(*args: str, timeout: float = 60) -> tuple[int, bytes]:
    """Run the console with a terminal on stdout; returns its exit code and every byte it wrote."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "swarmkit.console.cli", *args], cwd=ROOT, env=child_env({**ENV, "TERM": "xterm-256color"}),
        stdin=follower, stdout=follower, stderr=follower, close_fds=True,
    )
    os.close(follower)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    return proc.wait(timeout=10), out


@pytest.fixture
def every_status(workspace):
    # Timestamps around the real now: the command compares heartbeats with the real clock.
    return build_sample_store(workspace, datetime.now(UTC))


def test_once_prints_every_status_as_plain_text(every_status, workspace):
    proc = console("--once", "--store", every_status, str(workspace))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("store: ") and "ID" in lines[1] and "STATUS" in lines[1]
    shown = {line.split()[2] for line in lines[2:]}
    assert shown == EVERY_STATUS
    assert "\x1b" not in proc.stdout


def test_once_json_carries_every_column(every_status, workspace):
    proc = console("--once", "--json", "--store", every_status, str(workspace))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema"] == 1 and "store.db" in doc["store"]
    assert {run["display_status"] for run in doc["runs"]} == EVERY_STATUS
    for run in doc["runs"]:
        assert set(JOB_COLUMNS) <= set(run), set(JOB_COLUMNS) - set(run)
        assert isinstance(run["workspaces"], list)
        assert all(set(w) == {"path", "state"} for w in run["workspaces"])
    assert any(run["workspaces"] for run in doc["runs"])


def test_once_on_a_terminal_and_with_hostile_text_writes_no_escape(sqlite_url, workspace):
    run = asyncio.run(add_hostile_run(sqlite_url, workspace))
    proc = console("--once", "--store", sqlite_url, str(workspace))
    assert proc.returncode == 0, proc.stderr
    assert "[@click=app.quit]x[/]" in proc.stdout and run[:8] in proc.stdout
    assert not any(ord(c) < 0x20 and c != "\n" or 0x7F <= ord(c) <= 0x9F or c == "\u202e" for c in proc.stdout)
    code, raw = on_a_pty("--once", "--store", sqlite_url, str(workspace))
    assert code == 0
    text = raw.decode("utf-8", errors="replace")
    assert "\x1b" not in text and "\x9b" not in text and "\x07" not in text
    assert HOSTILE_FLOW[:21] in text
    proc = console("--once", "--json", "--store", sqlite_url, str(workspace))
    assert "\x1b" not in proc.stdout and json.loads(proc.stdout)["runs"][0]["flow"] == HOSTILE_FLOW


def test_once_never_creates_a_store(workspace):
    proc = console("--once", str(workspace / "nowhere"))
    assert proc.returncode == 2 and "no store at" in proc.stderr
    assert not (workspace / "nowhere").exists()
    proc = console("--json")
    assert proc.returncode == 2
