"""The workspace policy, status by status (DESIGN.md): the row's state and the folder agree with it.

stopped, deferred, lost keep theirs; cancelled destroys unless kept; completed
and failed destroy unless the flow keeps them; faulted keeps them. The race
harness checks the same rule on every run it makes; this names each case.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability import swarmkit_in_process

from .conftest import Cli, write_flow
from .helpers import job, workspaces


def flow(tmp_path: Path, name: str, *, keep: bool, fail: bool = False, gate: bool = False) -> Path:
    last = 'command = "echo failing; exit 4"' if fail else 'command = "echo done > done.txt"'
    gate_line = "approve = true\n" if gate else ""
    return write_flow(
        tmp_path, name,
        f'name = "{name}"\nkeep_workspaces = {"true" if keep else "false"}\n'
        f'[[agents]]\nname = "a"\ncommand = "echo a > a.txt"\n[[agents]]\nname = "b"\n{gate_line}{last}\n',
    )


def sk(cli: Cli, *args: str):
    return swarmkit_in_process(args[0], cli.store_url, *args[1:], cwd=cli.workspace)


def state(cli: Cli, short: str) -> tuple[str, list[str], list[bool]]:
    row = job(cli.store_url, cli.workspace, short)
    ws = workspaces(cli.store_url, cli.workspace, row.id)
    return row.status, [w.state for w in ws], [Path(w.path).exists() for w in ws]


@pytest.mark.parametrize(
    "case, keep, fail, want_status, want_state, want_exists",
    [
        ("completed", False, False, "completed", "destroyed", False),
        ("failed", False, True, "failed", "destroyed", False),
        ("failed, flow keeps", True, True, "failed", "kept", True),
    ],
)
def test_ended_runs(cli: Cli, tmp_path: Path, case, keep, fail, want_status, want_state, want_exists):
    res = sk(cli, "run", str(flow(tmp_path, "f", keep=keep, fail=fail)), str(cli.workspace))
    assert res.returncode == (1 if fail else 0), res.stderr
    assert state(cli, res.stdout.split()[0]) == (want_status, [want_state], [want_exists])


def test_a_completed_run_whose_flow_keeps_workspaces_marks_them_kept(cli: Cli, tmp_path: Path):
    """A completed run's workspace is no longer in use: `kept`, as a failed one's is, not `active`."""
    res = sk(cli, "run", str(flow(tmp_path, "f", keep=True)), str(cli.workspace))
    assert res.returncode == 0, res.stderr
    status, states, exists = state(cli, res.stdout.split()[0])
    assert status == "completed" and exists == [True]
    assert states == ["kept"], f"a completed run's kept workspace reads {states}"


def test_parked_runs_keep_theirs_and_cancel_destroys_unless_kept(cli: Cli, tmp_path: Path):
    gated = flow(tmp_path, "g", keep=False, gate=True)
    deferred = sk(cli, "run", str(gated), str(cli.workspace)).stdout.split()[0]
    assert state(cli, deferred) == ("deferred", ["active"], [True])
    # A stopped run: queued, claimed here, stopped at its first boundary by a stop sent while queued... then resumed here.
    stopped = sk(cli, "run", "--detach", str(gated), str(cli.workspace)).stdout.strip()[:8]
    assert sk(cli, "stop", stopped, str(cli.workspace)).returncode == 0
    assert state(cli, stopped) == ("stopped", [], [])  # never hosted: nothing to keep
    for short, keep, want in ((deferred, True, ("cancelled", ["kept"], [True])),):
        args = ["cancel", short, str(cli.workspace)] + (["--keep"] if keep else [])
        assert sk(cli, *args).returncode == 0
        assert state(cli, short) == want
    other = sk(cli, "run", str(gated), str(cli.workspace)).stdout.split()[0]
    assert sk(cli, "cancel", other, str(cli.workspace)).returncode == 0
    assert state(cli, other) == ("cancelled", ["destroyed"], [False])
