"""The CLI's output conventions, in process: one JSON shape checked by its JSON Schema, -o, filters, logs, audit, cells."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema_rs
import pytest
from rich.cells import cell_len

from swarmkit.store.models import JOB_COLUMNS

from .conftest import Cli, write_flow
from .reliability import console_in_process

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "runtime" / "schemas" / "run_list.schema.json").read_text())
RUN_LIST = jsonschema_rs.validator_for(SCHEMA)
ONE_RUN = jsonschema_rs.validator_for({**SCHEMA, "$ref": "#/$defs/run", "required": [], "properties": {}, "additionalProperties": True})


def _gated(cli: Cli, name: str = "gated") -> Path:
    return write_flow(cli.workspace, name, f"""
        name = "{name}"
        [[agents]]
        name = "build"
        command = "echo building; echo built"
        [[agents]]
        name = "ship"
        approve = true
        command = "echo shipping"
    """)


def _deferred_run(cli: Cli, flow: Path, *inputs: str) -> str:
    """A run hosted here to its gate: it ends deferred, with events, an audit entry and a workspace."""
    res = cli.call("run", str(flow), *(a for i in inputs for a in ("--input", i)), str(cli.workspace), check=True)
    return res.stdout.split()[0]


def test_every_json_output_is_the_one_shape_of_the_schema(cli: Cli):
    short = _deferred_run(cli, _gated(cli), "topic=release")
    lst = json.loads(cli.call("status", "-o", "json", str(cli.workspace), check=True).stdout)
    RUN_LIST.validate(lst)
    (run,) = lst["runs"]
    # Every jobs column under its own name, objects for what holds JSON, RFC 3339 UTC times.
    assert set(JOB_COLUMNS) <= set(run) and run["display_status"] == "deferred" and run["short_id"] == short
    assert run["inputs"] == {"topic": "release"} and run["created_at"].endswith("Z")
    assert run["workspaces"] and run["workspaces"][0]["state"] == "active"
    # --json is -o json; one run is the same object as in the list.
    assert json.loads(cli.call("status", "--json", str(cli.workspace), check=True).stdout) == lst
    one = json.loads(cli.call("status", short, "-o", "json", str(cli.workspace), check=True).stdout)
    ONE_RUN.validate(one)
    assert {k: v for k, v in one.items() if k != "heartbeat_at"} == {k: v for k, v in run.items() if k != "heartbeat_at"}
    # The console's --once --json: the same list, with the store beside it.
    once = console_in_process(cli.store_url, "--once", "--json", str(cli.workspace))
    assert once.returncode == 0, once.stderr
    doc = json.loads(once.stdout)
    RUN_LIST.validate(doc)
    assert [r["id"] for r in doc["runs"]] == [run["id"]] and doc["schema"] == 1


def test_the_schema_names_every_jobs_column():
    # A column added to the jobs table must be added to the shipped schema too.
    assert set(JOB_COLUMNS) <= set(SCHEMA["$defs"]["run"]["required"])


def test_output_formats_and_filters(cli: Cli):
    flow = _gated(cli)
    first = _deferred_run(cli, flow)
    queued = cli.call("run", "--detach", str(write_flow(cli.workspace, "other", """
        name = "other"
        [[agents]]
        name = "a"
        command = "true"
    """)), str(cli.workspace), check=True).stdout.strip()
    names = cli.call("status", "-o", "name", str(cli.workspace), check=True).stdout.split()
    assert sorted(names) == sorted([queued, cli.call("status", first, "-o", "name", str(cli.workspace), check=True).stdout.strip()])
    wide = cli.call("status", "-o", "wide", str(cli.workspace), check=True).stdout.splitlines()
    assert wide[0].split()[-4:] == ["HOST", "PID", "EPOCH", "CREATED"]
    by_status = cli.call("status", "--status", "queued", "-o", "name", str(cli.workspace), check=True).stdout.split()
    assert by_status == [queued]
    by_flow = cli.call("status", "--flow", "gated", "-o", "name", str(cli.workspace), check=True).stdout.split()
    assert len(by_flow) == 1 and by_flow[0].startswith(first)
    assert cli.call("status", "--status", "deferred,queued", "-o", "name", str(cli.workspace), check=True).stdout.split() != []
    # Nothing changed in the last instant of a far future: --since is a window back from now.
    assert len(cli.call("status", "--since", "1h", "-o", "name", str(cli.workspace), check=True).stdout.split()) == 2
    bad = cli.call("status", "--since", "soon", str(cli.workspace))
    assert bad.returncode == 2 and "not a duration" in bad.stderr


def test_logs_tail_since_timestamps_and_json(cli: Cli):
    short = _deferred_run(cli, _gated(cli))
    everything = cli.call("logs", short, str(cli.workspace), check=True).stdout.splitlines()
    assert any("build | building" in line for line in everything) and "[run.deferred]" in everything[-1]
    last2 = cli.call("logs", short, "--tail", "2", str(cli.workspace), check=True).stdout.splitlines()
    assert last2 == everything[-2:]
    stamped = cli.call("logs", short, "--timestamps", str(cli.workspace), check=True).stdout.splitlines()
    assert len(stamped) == len(everything) and all(line.split(" ", 1)[0].endswith("Z") and "T" in line.split(" ", 1)[0] for line in stamped)
    assert [s.split(" ", 1)[1] for s in stamped] == everything
    as_json = [json.loads(line) for line in cli.call("logs", short, "-o", "json", str(cli.workspace), check=True).stdout.splitlines()]
    assert [e["text"] for e in as_json if e["kind"] == "log"] == ["building", "built"]
    assert all(e["at"].endswith("Z") for e in as_json) and as_json[-1]["kind"] == "run.deferred"
    assert cli.call("logs", short, "--since", "1h", str(cli.workspace), check=True).stdout.splitlines() == everything


def test_audit_says_who_did_what_when_and_at_which_boundary(cli: Cli):
    short = _deferred_run(cli, _gated(cli))
    cli.call("resume", short, str(cli.workspace))  # queued again, from its gate
    cli.call("stop", short, str(cli.workspace), check=True)  # a queued run stops at once, before it is claimed
    doc = json.loads(cli.call("audit", short, "-o", "json", str(cli.workspace), check=True).stdout)
    assert doc["schema"] == 1
    actions = [(a["actor"], a["action"]) for a in doc["audit"]]
    assert ("tester@ci", "run.submitted") in actions and ("tester@ci", "run.stopped") in actions
    assert all(isinstance(a["detail"], dict) and a["at"].endswith("Z") for a in doc["audit"])
    table = cli.call("audit", short, str(cli.workspace), check=True).stdout.splitlines()
    assert table[0].split() == ["AT", "RUN", "ACTOR", "ACTION", "BOUNDARY", "DETAIL"]
    stopped = next(line for line in table if "run.stopped" in line)
    assert "tester@ci" in stopped and short in stopped and "before it was claimed" in stopped


@pytest.mark.parametrize("flow_name", ["発表-リリース", "deploy 🚀 prod", "plain"])
def test_table_columns_align_in_terminal_cells(cli: Cli, flow_name: str):
    for name in (flow_name, "x"):
        write_flow(cli.workspace, f"f{len(name)}", f"""
            name = "{name}"
            [[agents]]
            name = "a"
            command = "true"
        """)
        cli.call("run", "--detach", str(cli.workspace / f"f{len(name)}.toml"), str(cli.workspace), check=True)
    lines = cli.call("status", str(cli.workspace), check=True).stdout.splitlines()
    assert len(lines) == 3

    def status_column(line: str) -> int:
        # The cell where the STATUS column starts, as a terminal shows it.
        at = line.index("queued") if "queued" in line else line.index("STATUS")
        return cell_len(line[:at])

    assert len({status_column(line) for line in lines}) == 1, "\n".join(lines)


def test_json_lines_of_logs_and_audit_carry_no_control_or_bidi_character(cli: Cli):
    flow = write_flow(cli.workspace, "noisy", r"""
        name = "noisy"
        [[agents]]
        name = "a"
        command = '''printf '\033[31mred \302\233 \342\200\256 end\n' '''
    """)
    short = cli.call("run", str(flow), str(cli.workspace), check=True).stdout.split()[0]
    for argv in (("logs", short, "-o", "json"), ("audit", short, "-o", "json"), ("logs", short, "--timestamps"), ("audit", short)):
        out = cli.call(*argv, str(cli.workspace), check=True).stdout
        assert not [c for c in out if (ord(c) < 0x20 and c not in "\n") or 0x7F <= ord(c) <= 0x9F or c in "\u202e\u2066"], (argv, out)
    texts = [json.loads(line)["text"] for line in cli.call("logs", short, "-o", "json", str(cli.workspace), check=True).stdout.splitlines()]
    assert "\x1b[31mred \x9b \u202e end" in texts, "the JSON keeps the text exactly, escaped"


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_what_swarmkit_logs_follows_the_log_format_with_passwords_masked(fmt: str):
    import io
    import logging

    from swarmkit.runtime.log_lines import LogLines

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        LogLines(fmt).install()
        logging.getLogger("swarmkit.worker").warning("worker poll failed: postgresql://ops:hunter2@db/swarmkit refused")
    finally:
        root.removeHandler(handler)
    line = stream.getvalue().strip()
    assert "hunter2" not in line and "refused" in line
    if fmt == "json":
        doc = json.loads(line)
        assert doc["level"] == "warning" and doc["logger"] == "swarmkit.worker" and doc["at"].endswith("Z")
    else:
        stamp, rest = line.split(" ", 1)
        assert stamp.endswith("Z") and rest.startswith("swarmkit: swarmkit.worker: worker poll failed")
