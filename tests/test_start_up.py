"""Start-up (issue 13): what a real `swarmkit` process loads for each verb.

A one-shot verb loads no Alembic unless it migrates, no Textual, no executor;
on SQLite it runs its statements inline, so neither SQLAlchemy's asyncio layer
(with the ORM under it) nor aiosqlite nor the PostgreSQL dialect is loaded; `--help` and `--version` load
no SQLAlchemy at all, nor do `status` and `stop` on SQLite (a lite store, store/lite.py). Read from the interpreter's own import log
(PYTHONPROFILEIMPORTTIME), so a module loaded by any path counts.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import child_env, write_flow
from .helpers import run_child

SWARMKIT = str(Path(sys.executable).with_name("swarmkit"))
NEVER = ("alembic", "textual", "swarmkit.runtime.executor", "swarmkit.runtime.worker", "swarmkit.widgets", "swarmkit.console")
# The PostgreSQL dialect brings every one of its drivers: a SQLite store needs none of it.
NOT_ON_SQLITE = ("aiosqlite", "sqlalchemy.ext.asyncio", "sqlalchemy.orm", "sqlalchemy.dialects.postgresql")


def loaded(*argv: str, cwd: Path) -> tuple[subprocess.CompletedProcess, set[str]]:
    env = child_env({"PYTHONPROFILEIMPORTTIME": "1"})
    # Under scripts/coverage every child starts coverage, which loads tomllib, typing, dataclasses and
    # more before swarmkit does: these children are not measured, so the log is swarmkit's alone.
    env.pop("COVERAGE_PROCESS_CONFIG", None)
    env.pop("COVERAGE_PROCESS_START", None)
    proc = run_child([SWARMKIT, *argv], 120, cwd=cwd, env=env)
    modules = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:") and "|" in line}
    assert "swarmkit.cli" in modules, proc.stderr[-2000:]
    return proc, modules


def _hits(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_load_no_sqlalchemy(tmp_path: Path, flag: str):
    proc, modules = loaded(flag, cwd=tmp_path)
    assert proc.returncode == 0 and "swarmkit" in proc.stdout
    assert _hits(modules, ("sqlalchemy", *NEVER)) == []
    # Nor what only a verb's work needs (each a tenth of Python's own start-up or more): the
    # version is a constant, not looked up among the installed distributions.
    assert _hits(modules, ("typing", "json", "logging", "dataclasses", "importlib.metadata", "asyncio")) == []
    # --version names the schema revision it wants: read from the migration files, nothing else of the store.
    assert _hits(modules, ("swarmkit.store",)) == ([] if flag == "--help" else ["swarmkit.store", "swarmkit.store.revisions"])
    if flag == "--version":
        assert "store schema revision" in proc.stdout


def test_one_shot_verbs_load_no_alembic_textual_or_executor(store_url: str, workspace: Path):
    flow = write_flow(workspace, "quick.toml", 'name = "quick"\n[[agents]]\nname = "a"\ncommand = "true"\n')
    # Each child through run_child: one that hangs (this test once did, intermittently, on SQLite) says
    # what it was doing, its /proc state and Python stacks, before it is killed.
    made = run_child([SWARMKIT, "run", str(flow), "--detach", "--store", store_url], 120, cwd=workspace, env=child_env())
    assert made.returncode == 0, made.stderr
    run_id = made.stdout.strip()
    forbidden = NEVER + (NOT_ON_SQLITE if store_url.startswith("sqlite") else ())
    for verb in (["status"], ["status", run_id[:8], "--json"], ["logs", run_id[:8]], ["stop", run_id[:8]], ["resume", run_id[:8]], ["cancel", run_id[:8]], ["db", "status"]):
        proc, modules = loaded(*verb[:1], "--store", store_url, *verb[1:], cwd=workspace)
        assert proc.returncode == 0, (verb, proc.stdout, proc.stderr[-2000:])
        assert _hits(modules, forbidden) == [], verb
        if verb[0] in ("status", "stop", "resume", "cancel"):
            # Neither reads a flow (tomllib) nor takes a median (statistics, with fractions and decimal).
            assert _hits(modules, ("swarmkit.runtime.flow", "tomllib", "statistics")) == [], verb
            if store_url.startswith("sqlite"):
                # Their statements run compiled, through sqlite3 (store/lite.py): SQLAlchemy is most of a verb.
                # And with no event loop (store/loopless.py): asyncio, with ssl and socket, is a quarter of the rest.
                assert _hits(modules, ("sqlalchemy", "asyncio", "ssl")) == [], verb
                assert "swarmkit.store.lite" in modules, verb
    status = run_child([SWARMKIT, "status", run_id, "--store", store_url], 120, cwd=workspace, env=child_env())
    assert "cancelled" in status.stdout  # the acts above did what they say


def test_the_head_revision_read_from_the_migration_files_is_alembics():
    from alembic.script import ScriptDirectory

    from swarmkit.store.schema import _config, head_revision, known_revisions

    script = ScriptDirectory.from_config(_config())
    assert known_revisions() == {rev.revision: rev.down_revision for rev in script.walk_revisions()}
    assert head_revision() == script.get_current_head()


def test_each_verb_parses_with_its_part_of_the_parser_alone():
    # A verb's run builds only its own module's parsers (the whole parser is a tenth of --help):
    # each verb of the whole parser must be found, and parse alike, in its part alone.
    import argparse

    from swarmkit.cli import build_parser

    def verbs(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return dict(sub.choices)

    whole = verbs(build_parser())
    assert {"run", "stop", "status", "logs", "audit", "db", "completion"} <= set(whole)
    for name, full in whole.items():
        alone = verbs(build_parser(only=name))
        assert name in alone and len(alone) < len(whole), name
        assert alone[name].format_help() == full.format_help(), name


# Run in a fresh interpreter: which SQLAlchemy modules (and which of ours that only an act or
# the log view needs) are loaded when the run table first paints rows, and how many rows it
# holds once the full store has read everything.
_FIRST_FRAME = r'''
import asyncio, json, sys
from swarmkit.widgets.run_table import RunTable

seen = {}
render_line = RunTable.render_line
LATER = ("swarmkit.runtime.control", "swarmkit.runtime.notify", "swarmkit.widgets.log_tail")

def spy(self, y):
    if self.row_count and "first" not in seen:
        seen["first"] = sorted(m for m in sys.modules if m.split(".")[0] == "sqlalchemy" or m in LATER)
        seen["rows"] = self.row_count
    return render_line(self, y)

RunTable.render_line = spy
from swarmkit.console.app import make_app

async def main():
    app = make_app(sys.argv[1], sys.argv[2])
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.screen.query_one(RunTable)
        for _ in range(600):
            await pilot.pause(0.05)
            if table.row_count >= int(sys.argv[3]):
                break
        seen["rows_after"] = table.row_count
        seen["loaded_after"] = "sqlalchemy" in sys.modules

asyncio.run(main())
print(json.dumps(seen))
'''


async def test_the_consoles_first_frame_on_sqlite_loads_no_sqlalchemy_and_the_rest_follows(sqlite_url: str, workspace: Path):
    """SQLAlchemy is a third of the console's start-up (bench/console_render.py): the first poll
    runs through a lite store, and the full store opens once those rows are on screen. The
    acts' control module and the log view load when first used, not before the first frame."""
    import json
    from datetime import timedelta

    from sqlalchemy import insert

    from swarmkit.console.poller import PEEK
    from swarmkit.store import Store
    from swarmkit.store.clock import store_now
    from swarmkit.store.models import jobs

    now = store_now()
    n = PEEK + 50  # more than the first read takes: the second must read the rest
    rows = [dict(id=f"{i:032x}", flow="bulk", flow_source="", inputs="{}", status="queued", created_at=now - timedelta(seconds=i),
                 updated_at=now - timedelta(seconds=i), cancel_keep=False, epoch=0, step=0, steps=1, tokens=0, cost=0.0) for i in range(n)]
    store = await Store.open(sqlite_url, workspace)
    try:
        async with store.write() as conn:
            await conn.execute(insert(jobs), rows)
    finally:
        await store.close()
    proc = subprocess.run([sys.executable, "-c", _FIRST_FRAME, sqlite_url, str(workspace), str(n)], cwd=workspace, env=child_env(),
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["first"] == [] and seen["rows"] >= 1, seen
    assert seen["rows_after"] == n and seen["loaded_after"], seen
