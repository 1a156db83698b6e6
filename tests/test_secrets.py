"""Secrets stay secret.

1. A store URL's password never reaches a terminal: not in the errors of
   `swarmkit` or `swarmkit-console` (a URL that does not parse, names an
   unknown database or an impossible schema, or does not answer), not in the
   console's header or `--once [--json]`, whether the password is in the URL's
   user part or in its query (`?password=`).
2. Agents get a clean environment: a command agent and a sync `call` agent (a
   process of its own) running under `SWARMKIT_STORE`, `PG*` and
   `DATABASE_URL` holding a password see none of them, nor Swarmkit's own
   settings, and see what the flow's `env` lists (names and `PREFIX*`).
3. A password an agent prints, or an error quotes, is masked in the events
   and the run's error as the store keeps them, so in `swarmkit logs`, in
   `status --json` and in the foreground run's echo.
4. A flow's `env` key is checked like every other key: a message naming the
   file and line.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from swarmkit.console.app import make_app
from tests.reliability import console_argv, env_for_children, sql, swarmkit_argv

from .conftest import PG_BASE, Cli, _pg_exec, require_pg, write_flow

SECRET = "hunter2"

BAD_URLS = {
    # An impossible schema: the message quotes the URL.
    "bad-schema": f"postgresql://postgres:{SECRET}@127.0.0.1:5432/test?schema=not-a-name",
    # A URL that does not parse: the parser's own message quotes it too.
    "no-parse": f"postgresql://postgres:{SECRET}@127.0.0.1:notaport/test",
    "unsupported": f"mysql://root:{SECRET}@db.example/app",
    # Nothing answers: the driver's error, with the password given as a query parameter.
    "unreachable-query-password": f"postgresql://postgres@127.0.0.1:1/test?password={SECRET}",
    "unreachable": f"postgresql://postgres:{SECRET}@127.0.0.1:1/test?schema=x",
}


@pytest.mark.parametrize("name", sorted(BAD_URLS))
def test_store_errors_mask_the_password(name: str, tmp_path: Path):
    url = BAD_URLS[name]
    for argv in (swarmkit_argv("status", url), swarmkit_argv("logs", url, "abcdef12"), console_argv(url, "--once"), console_argv(url, "--once", "--json")):
        res = subprocess.run(argv, cwd=tmp_path, env=env_for_children(), capture_output=True, text=True, timeout=60)
        shown = res.stdout + res.stderr
        assert res.returncode != 0, shown
        assert SECRET not in shown, f"{argv[2:]} showed the password:\n{shown}"
        assert "***" in res.stderr, f"{argv[2:]} did not say which store (masked):\n{shown}"
        assert "Traceback" not in shown


def _pg_url_with_passwords() -> str:
    """The test server (it trusts loopback, so any password passes) named with a password in both places."""
    require_pg()
    base = PG_BASE.replace("postgresql://postgres@", f"postgresql://postgres:{SECRET}@", 1)
    assert SECRET in base, f"SWARMKIT_TEST_PG={PG_BASE} has no postgres@ user part to put a password in"
    schema = "t_" + uuid.uuid4().hex[:12]
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}schema={schema}&password={SECRET}"


async def _header_of(url: str, workspace: Path) -> str:
    app = make_app(url, workspace, read_only=True, poll_interval=0.1)
    async with app.run_test(size=(200, 30)):
        deadline = time.monotonic() + 20
        while getattr(app.screen, "polls", 0) < 1:
            assert time.monotonic() < deadline, "the console never polled"
            await asyncio.sleep(0.05)
        header = app.screen.query_one("#header")
        return header.summary.store + "\n" + str(header.render())


def test_the_console_and_the_cli_mask_a_query_password(tmp_path: Path, workspace: Path):
    url = _pg_url_with_passwords()
    schema = url.split("schema=")[1].split("&")[0]
    cli = Cli(url, workspace)
    flow = write_flow(tmp_path, "one", """
        name = "one"
        [[agents]]
        name = "hi"
        command = "echo hi"
    """)
    try:
        ran = cli.run("run", str(flow), str(workspace))
        assert ran.returncode == 0, ran.stderr
        assert SECRET not in ran.stdout + ran.stderr and "***" in ran.stdout + ran.stderr
        for argv in (console_argv(url, "--once"), console_argv(url, "--once", "--json")):
            res = subprocess.run(argv, cwd=workspace, env=env_for_children(), capture_output=True, text=True, timeout=60)
            assert res.returncode == 0, res.stderr
            assert SECRET not in res.stdout + res.stderr
        store_field = json.loads(res.stdout)["store"]
        assert "postgres:***@" in store_field and "password=***" in store_field, store_field
        header = asyncio.run(_header_of(url, workspace))
        assert SECRET not in header and "***" in header, header
    finally:
        _pg_exec(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


PROBE_MODULE = '''
import os


def probe(ctx):
    for name in sorted(os.environ):
        ctx.log(f"call-env {name}={os.environ[name]}")
'''

HOST_SECRETS = {
    "PGPASSWORD": SECRET,
    "PGHOST": "db.internal",
    "PGUSER": "admin",
    "DATABASE_URL": f"postgresql://admin:{SECRET}@db.internal/app",
    "SWARMKIT_SOMETHING_INTERNAL": "internal",
}
PASSED = {"SK_TEST_TOKEN": "passed-through", "SK_GLOB_ONE": "one", "SK_GLOB_TWO": "two"}
NOT_LISTED = {"SK_NOT_LISTED": "not-listed"}


def _env_lines(out: str, marker: str) -> dict[str, str]:
    seen: dict[str, str] = {}
    for line in out.splitlines():
        if marker in line:
            name, _, value = line.split(marker, 1)[1].partition("=")
            seen[name] = value
    return seen


def test_agents_get_a_clean_environment_and_what_the_flow_lists(cli: Cli, tmp_path: Path):
    (tmp_path / "sk_env_probe.py").write_text(PROBE_MODULE, encoding="utf-8")
    flow = write_flow(tmp_path, "envflow", """
        name = "envflow"
        env = ["SK_TEST_TOKEN"]

        [[agents]]
        name = "shell"
        command = "env | sed 's/^/cmd-env /'"
        env = ["SK_GLOB_*"]

        [[agents]]
        name = "python"
        call = "sk_env_probe:probe"
    """)
    host_url = f"postgresql://admin:{SECRET}@db.internal:5432/app"
    extra = {"SWARMKIT_STORE": host_url, **HOST_SECRETS, **PASSED, **NOT_LISTED}
    ran = cli.run("run", str(flow), str(cli.workspace), env=extra)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    run_id = ran.stdout.split()[0]
    logs = cli.run("logs", run_id, str(cli.workspace), check=True).stdout
    command_env = _env_lines(logs, "cmd-env ")
    call_env = _env_lines(logs, "call-env ")
    assert command_env and call_env, logs
    for who, env in (("the command agent", command_env), ("the sync call agent", call_env)):
        leaked = sorted(n for n in env if n.startswith("PG") or n == "DATABASE_URL" or n in NOT_LISTED or n in ("SWARMKIT_STORE", "SWARMKIT_SOMETHING_INTERNAL", "SWARMKIT_LEASE", "SWARMKIT_HEARTBEAT"))
        assert not leaked, f"{who} inherited {leaked}"
        assert SECRET not in "".join(env.values())
        assert env.get("SK_TEST_TOKEN") == "passed-through", f"{who} did not get the flow's env: {sorted(env)}"
        assert env.get("SWARMKIT_RUN_ID", "").startswith(run_id) and env.get("SWARMKIT_NODE") and env.get("PATH")
        assert "SWARMKIT_HOST_PID" in env and "SWARMKIT_WORKSPACE" in env
    # An agent's own env adds to the flow's; a trailing * passes a prefix.
    assert command_env.get("SK_GLOB_ONE") == "one" and command_env.get("SK_GLOB_TWO") == "two"
    assert "SK_GLOB_ONE" not in call_env
    assert SECRET not in logs


def test_a_password_an_agent_prints_or_raises_is_masked_where_it_is_kept(cli: Cli, tmp_path: Path):
    (tmp_path / "sk_raiser.py").write_text(
        f"def boom(ctx):\n    raise RuntimeError('cannot reach postgresql://alice:{SECRET}@db.internal/app')\n", encoding="utf-8"
    )
    flow = write_flow(tmp_path, "leaky", f"""
        name = "leaky"
        [[agents]]
        name = "talk"
        command = "echo connecting to postgresql://alice:{SECRET}@db.internal:5432/app; echo dsn host=db password={SECRET} user=alice; echo 'url https://bob:{SECRET}@git.example/repo.git'"
        [[agents]]
        name = "raise"
        call = "sk_raiser:boom"
    """)
    ran = cli.run("run", str(flow), str(cli.workspace))
    assert ran.returncode != 0
    run_id = ran.stdout.split()[0]
    assert SECRET not in ran.stdout + ran.stderr, ran.stdout + ran.stderr
    logs = cli.run("logs", run_id, str(cli.workspace), check=True).stdout
    assert SECRET not in logs, logs
    assert "postgresql://alice:***@db.internal:5432/app" in logs
    assert "password=*** user=alice" in logs and "https://bob:***@git.example/repo.git" in logs
    view = json.loads(cli.run("status", run_id, str(cli.workspace), "--json", check=True).stdout)
    assert view["status"] == "failed"
    assert "postgresql://alice:***@db.internal/app" in view["error"] and SECRET not in view["error"], view["error"]
    stored = sql(cli.store_url, cli.workspace, "SELECT text FROM events") + sql(cli.store_url, cli.workspace, "SELECT error FROM jobs")
    assert not [row for row in stored if row[0] and SECRET in row[0]]


@pytest.mark.parametrize(
    ("body", "words", "line"),
    [
        ('env = "OPENAI_API_KEY"', "env must be a list of variable names", 2),
        ("env = [1]", "env must be a list of variable names", 2),
        ('env = ["NOT A NAME"]', "'NOT A NAME' is not a variable name", 2),
        ('env = ["PGPASSWORD"]', "'PGPASSWORD' is never passed to agents", 2),
        ('env = ["SWARMKIT_*"]', "'SWARMKIT_*' is never passed to agents", 2),
        ('[[agents]]\nname = "a"\ncommand = "true"\nenv = ["DATABASE_URL"]', "agent 'a': env: 'DATABASE_URL' is never passed", 2),
    ],
)
def test_a_bad_env_key_is_named_with_its_line(body: str, words: str, line: int, tmp_path: Path):
    agents = "" if body.startswith("[[agents]]") else '[[agents]]\nname = "a"\ncommand = "true"\n'
    flow = tmp_path / "bad.toml"
    flow.write_text(f'name = "bad"\n{body}\n{agents}', encoding="utf-8")
    ws = tmp_path / "ws"
    ws.mkdir()
    res = subprocess.run(
        [sys.executable, "-m", "swarmkit.cli", "run", "--detach", str(flow), str(ws)],
        cwd=ws, env=env_for_children(), capture_output=True, text=True, timeout=60,
    )
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"{flow}:{line}:" in res.stderr and words in res.stderr, res.stderr
