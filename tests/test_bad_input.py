"""Bad input, and stores in a bad way: each gets a clear message, a non-zero exit where it is an error,
and nothing is lost.

Extends tests/test_store.py and tests/test_control.py (which cover the basic
malformed flows, bad `--input` without `=`, unknown and ambiguous ids for
`stop`, a junk file and a newer schema for `status`) to every verb and to the
cases they leave out: flows that are not text, callables that vanish after a
run was queued, a store URL that answers nothing, a foreign database, a
read-only store folder, a full disk, and concurrent `swarmkit run`s.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.reliability import (
    console_argv,
    console_in_process,
    env_for_children,
    has_traceback,
    integrity_check,
    sql,
    swarmkit_argv,
    swarmkit_in_process,
    try_mount,
    umount,
    wait_until,
)

from .conftest import Cli, child_env, wait_for, write_flow
from .helpers import ROOMY_LEASE, audit, events, job

ONE = 'name = "one"\n[[agents]]\nname = "only"\ncommand = "echo hi"\n'


def clear(proc: subprocess.CompletedProcess, code: int, *words: str, max_lines: int = 3) -> str:
    """The process failed the way an operator can act on: this exit code, these words, a line or two, no traceback."""
    errs = proc.stderr
    assert proc.returncode == code, f"exit {proc.returncode}, want {code}\nstdout: {proc.stdout[-800:]}\nstderr: {errs[-1500:]}"
    for w in words:
        assert w in errs, f"{w!r} not in the message: {errs[-1500:]}"
    assert not has_traceback(errs), f"a traceback instead of a message:\n{errs[-3000:]}"
    lines = [l for l in errs.splitlines() if l.strip()]
    assert len(lines) <= max_lines, f"{len(lines)} lines of stderr ({len(errs)} bytes) for one fault:\n{errs[:1500]}"
    return errs


def run_cmd(argv: list[str], cwd: Path, timeout: float = 90, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env or env_for_children(), capture_output=True, text=True, timeout=timeout)


def sk(cli: Cli, *args: str, env: dict | None = None):
    """`swarmkit VERB --store URL ...` through its real entry point, in this process (fast for big matrices)."""
    return swarmkit_in_process(args[0], cli.store_url, *args[1:], env=env, cwd=cli.workspace)


def no_runs(cli: Cli) -> None:
    """No run was made: the store holds none, or (refused before anything was written) there is no store at all."""
    res = cli.call("status", "--json", str(cli.workspace))
    if res.returncode == 2:
        assert "no store at" in res.stderr, res.stderr
        return
    assert res.returncode == 0 and json.loads(res.stdout)["runs"] == [], res.stdout


# --- flows, callables, inputs ------------------------------------------------------------


def test_run_accepts_the_workspace_after_inputs(cli: Cli, tmp_path: Path):
    flow = write_flow(tmp_path, "ok", ONE)
    res = cli.run("run", str(flow), "--input", "k=v", str(cli.workspace))
    assert res.returncode == 0, res.stderr
    res = cli.run("logs", res.stdout.split()[0], "-f", str(cli.workspace))
    assert res.returncode == 0, res.stderr


def test_flows_that_are_not_flows_are_refused_before_any_run_exists(cli: Cli, tmp_path: Path):
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    latin = tmp_path / "latin.toml"
    latin.write_bytes('name = "caf\xe9"\n[[agents]]\nname = "a"\ncommand = "true"\n'.encode("latin-1"))
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    cases = {
        binary: "not UTF-8",
        latin: "not UTF-8",
        folder: "is a directory",
        write_flow(tmp_path, "empty", ""): "needs a name",
        write_flow(tmp_path, "blankname", 'name = "  "\n[[agents]]\nname = "a"\ncommand = "true"\n'): "needs a name",
        write_flow(tmp_path, "agentsnum", 'name = "x"\nagents = 3\n'): "array of tables",
        write_flow(tmp_path, "emptyagents", 'name = "x"\nagents = []\n'): "array of tables",
        write_flow(tmp_path, "approveyes", 'name = "x"\n[[agents]]\nname = "a"\ncommand = "true"\napprove = "yes"\n'): "approve must be true or false",
        write_flow(tmp_path, "emptycmd", 'name = "x"\n[[agents]]\nname = "a"\ncommand = "   "\n'): "non-empty string",
        write_flow(tmp_path, "cmdlist", 'name = "x"\n[[agents]]\nname = "a"\ncommand = ["echo", "x"]\n'): "non-empty string",
        write_flow(tmp_path, "noname", 'name = "x"\n[[agents]]\ncommand = "true"\n'): "needs a name",
        write_flow(tmp_path, "keepstr", 'name = "x"\nkeep_workspaces = "no"\n[[agents]]\nname = "a"\ncommand = "true"\n'): "keep_workspaces must be true or false",
        write_flow(tmp_path, "agentkey", 'name = "x"\n[[agents]]\nname = "a"\ncommand = "true"\ndeadline = 5\n'): "unknown key 'deadline'",
        write_flow(tmp_path, "badtimeout", 'name = "x"\n[[agents]]\nname = "a"\ncommand = "true"\ntimeout = "soon"\n'): "timeout 'soon' is not a duration",
        write_flow(tmp_path, "badstall", 'name = "x"\nstall_after = "-1m"\n[[agents]]\nname = "a"\ncommand = "true"\n'): "stall_after '-1m' is not a duration",
        write_flow(tmp_path, "dupkey", 'name = "x"\nname = "y"\n[[agents]]\nname = "a"\ncommand = "true"\n'): "not valid TOML",
        # PostgreSQL text cannot hold NUL: refused at load, on both stores alike (B7).
        write_flow(tmp_path, "nulflow", 'name = "a\\u0000b"\n[[agents]]\nname = "a"\ncommand = "true"\n'): "NUL",
        write_flow(tmp_path, "nulagent", 'name = "x"\n[[agents]]\nname = "a\\u0000b"\ncommand = "true"\n'): "NUL",
    }
    for path, words in cases.items():
        res = sk(cli, "run", str(path), str(cli.workspace))
        clear(res, 2, str(path), words)
        res = sk(cli, "run", "--detach", str(path), str(cli.workspace))
        clear(res, 2, words)
    # And once through the installed command, as a real process.
    clear(cli.run("run", str(binary), str(cli.workspace)), 2, "not UTF-8")
    no_runs(cli)


def test_unknown_agent_callables_are_named_before_any_run_exists(cli: Cli, tmp_path: Path):
    (tmp_path / "agentsmod.py").write_text("VALUE = 3\ndef real(ctx):\n    return {}\n")
    (tmp_path / "explodes.py").write_text("raise RuntimeError('import-time boom')\n")
    cases = {
        "missing_fn": ('call = "agentsmod:nope"', "has no 'nope'"),
        "not_callable": ('call = "agentsmod:VALUE"', "is not callable"),
        "no_module": ('call = "no_such_pkg_zz.sub:f"', "cannot import module 'no_such_pkg_zz.sub'"),
        "raises": ('call = "explodes:f"', "import-time boom"),
        "no_colon": ('call = "agentsmod.real"', 'must look like "package.module:function"'),
        "dotted_attr": ('call = "agentsmod:real.deeper"', "has no 'real.deeper'"),
    }
    for name, (line, words) in cases.items():
        flow = write_flow(tmp_path, name, f'name = "x"\n[[agents]]\nname = "a"\n{line}\n')
        for detach in ((), ("--detach",)):
            res = sk(cli, "run", *detach, str(flow), str(cli.workspace))
            clear(res, 2, words)
    clear(cli.run("run", str(tmp_path / "missing_fn.toml"), str(cli.workspace)), 2, "has no 'nope'")
    no_runs(cli)


def test_a_callable_gone_by_the_time_a_worker_hosts_the_run_runs_from_its_stored_copy(cli: Cli, tmp_path: Path):
    """Queued with a callable whose module then disappears from beside the flow: the run carries
    the module's source (stored at submit), so it still completes; the worker hosts the next run too."""
    mod = tmp_path / "vanishing.py"
    mod.write_text("def go(ctx):\n    ctx.log('ran')\n    return {'ok': 1}\n")
    flow = write_flow(tmp_path, "vanish", 'name = "vanish"\n[[agents]]\nname = "first"\ncommand = "echo first"\n[[agents]]\nname = "v"\ncall = "vanishing:go"\n')
    carried = cli.run("run", "--detach", str(flow), str(cli.workspace), check=True).stdout.strip()
    mod.unlink()
    ok = write_flow(tmp_path, "ok", ONE)
    fine = cli.run("run", "--detach", str(ok), str(cli.workspace), check=True).stdout.strip()
    worker = cli.start("worker", str(cli.workspace))
    try:
        wait_until(lambda: job(cli.store_url, cli.workspace, carried).status not in ("queued", "running") and job(cli.store_url, cli.workspace, fine).status == "completed", timeout=60, what="both runs to end")
    finally:
        worker.terminate()
        out, errs = worker.communicate(timeout=30)
    row = job(cli.store_url, cli.workspace, carried)
    assert row.status == "completed", (row.status, row.error)
    assert row.step == 2
    assert not has_traceback(errs), errs[-3000:]
    shown = cli.run("status", carried, str(cli.workspace))
    assert "completed" in shown.stdout and "vanishing" in shown.stdout, shown.stdout


def test_bad_inputs_are_refused_and_good_odd_ones_kept(cli: Cli, tmp_path: Path):
    flow = write_flow(tmp_path, "ok", ONE)
    for bad, words in ((["=v"], "expected key=value"), (["  =v"], "expected key=value"), (["k"], "expected key=value"),
                       (["k=1", "k=2"], "given twice"), ([""], "expected key=value")):
        argv = ["run", str(flow), str(cli.workspace)]
        for b in bad:
            argv += ["--input", b]
        clear(sk(cli, *argv), 2, words)
    no_runs(cli)
    odd = {"eq": "a=b=c", "empty": "", "uni": "naïve ✓ 𝄞", "long": "x" * 10000, "spaces": "  two  words "}
    argv = ["run", str(flow), str(cli.workspace)]
    for k, v in odd.items():
        argv += ["--input", f"{k}={v}"]
    res = cli.run(*argv)
    assert res.returncode == 0, res.stderr
    row = job(cli.store_url, cli.workspace, res.stdout.split()[0])
    assert json.loads(row.inputs) == odd


def test_a_timing_no_host_can_wait_is_refused_in_a_line(cli: Cli, tmp_path: Path):
    """A host writes its lease on the runs it claims and every judge adds it to a heartbeat in SQL: a lease of
    inf, nan or 1e13 s (past PostgreSQL's intervals) made every look at the store fail "interval out of range"
    (review, 2026-12-05). Refused where it is read, as bad usage, naming the variable; and so is every other
    number a variable sets (issue 29: the stream's keep-alive took nan and inf)."""
    flow = write_flow(tmp_path, "ok", ONE)
    assert cli.run("run", str(flow), "--detach").returncode == 0
    # Both verbs read it through Settings.from_env, by the one rule: every value through `status`'s main() in
    # this process, and a host started with one as a real process of each verb (a worker that took the value
    # would host the queued run and serve on: a process of its own ends at its time-out).
    for value, words in (("inf", "must be a finite number"), ("nan", "must be a finite number"), ("-1", "more than zero"),
                         ("1e13", "must be at most 31536000 seconds"), ("soon", "is not a number of seconds")):
        clear(sk(cli, "status", env={"SWARMKIT_LEASE": value}), 2, f"SWARMKIT_LEASE={value!r}", words, max_lines=1)
    for verb, value, words in (("status", "nan", "must be a finite number"), ("worker", "inf", "must be a finite number"), ("worker", "1e13", "must be at most 31536000 seconds")):
        clear(cli.run(verb, env={"SWARMKIT_LEASE": value}, timeout=60), 2, f"SWARMKIT_LEASE={value!r}", words, max_lines=1)
    assert cli.run("status", env={"SWARMKIT_LEASE": "31536000"}).returncode == 0  # a year is a lease
    # Every number a variable sets, by the same rule (issue 29: settings.env_number), through the same main() in
    # this process: `status` reads the Settings ones; `serve` its stream's keep-alive and `worker --notify` the
    # notification ones before any store (there, a store that cannot be made: a value taken ends the verb at
    # once rather than serving on).
    nowhere = tmp_path / "a-file"
    nowhere.write_text("")
    for name, past in NUMBER_VARS.items():
        if name == "SWARMKIT_SSE_KEEPALIVE" or name.startswith(("SWARMKIT_NOTIFY_", "SWARMKIT_SHUTDOWN_")):
            argv = ["serve", "--port", "0"] if name == "SWARMKIT_SSE_KEEPALIVE" else ["worker", "--notify", "http://127.0.0.1:9/hook"]
            drive = lambda env, argv=argv: swarmkit_in_process(argv[0], f"sqlite:///{nowhere}/store.db", *argv[1:], env={"SWARMKIT_NOTIFY_SECRET": "s" * 20, **env}, cwd=cli.workspace)
        else:
            drive = lambda env: sk(cli, "status", env=env)
        unit = "bytes" if name == "SWARMKIT_LOG_CAP" else "seconds"
        if name == "SWARMKIT_NOTIFY_ATTEMPTS":  # a count: the words of every count (quantities.Count)
            cases = [(v, f"is not a whole number from 1 to {int(past) - 1}") for v in ("nan", "inf", "-1", "0", "1.5", "1e309", past, "soon", " ")]
        else:
            cases = [("nan", "must be a finite number"), ("inf", "must be a finite number"), ("-inf", "must be a finite number"),
                     ("1e309", "must be a finite number"), ("-1", "more than zero"), ("0", "more than zero"), ("-0", "more than zero"),
                     (past, f"must be at most {float(past) - 1:.0f} {unit}"), ("soon", f"is not a number of {unit}"), (" ", "is not a number")]
        for value, words in cases:
            clear(drive({name: value}), 2, f"{name}={value!r}", words, max_lines=1)
    # Set but empty is unset, as for every other variable (SWARMKIT_STORE, SWARMKIT_HOST): the defaults.
    assert sk(cli, "status", env=dict.fromkeys(NUMBER_VARS, "")).returncode == 0


def test_a_log_level_that_is_no_level_is_refused_in_a_line(cli: Cli, tmp_path: Path):
    """SWARMKIT_LOG=LOUD ended every verb and the console in a ValueError traceback from logging."""
    flow = write_flow(tmp_path, "ok", ONE)
    rid = cli.run("run", str(flow), "--detach", check=True).stdout.strip()
    for argv in (["status"], ["stop", rid], ["run", str(flow)], ["worker"]):
        clear(sk(cli, *argv, env={"SWARMKIT_LOG": "LOUD"}), 2, "SWARMKIT_LOG='LOUD' is not a log level: debug, info, warning", max_lines=1)
    console = subprocess.run(
        [sys.executable, "-c", "import sys; from swarmkit.console.cli import main; sys.exit(main())", "--once", "--store", cli.store_url],
        env=child_env({"SWARMKIT_LOG": "LOUD"}), capture_output=True, text=True, timeout=120, cwd=cli.workspace,
    )
    clear(console, 2, "SWARMKIT_LOG='LOUD' is not a log level", max_lines=1)
    assert job(cli.store_url, cli.workspace, rid).status == "queued", "a refused verb acted"
    assert sk(cli, "status", env={"SWARMKIT_LOG": "Info"}).returncode == 0  # a level in any case


# Every number an environment variable sets, and a value just past its bound (a year of seconds for the
# host's timings, an hour for a notification's, a pebibyte of log, a thousand attempts):
# tests/test_cli_numbers.py checks that every variable read through the rule has a row here.
NUMBER_VARS = {
    "SWARMKIT_HEARTBEAT": "31536001",
    "SWARMKIT_LEASE": "31536001",
    "SWARMKIT_INTERRUPT_GRACE": "31536001",
    "SWARMKIT_TERM_GRACE": "31536001",
    "SWARMKIT_POLL": "31536001",
    "SWARMKIT_LOG_CAP": str(2**50 + 1),
    "SWARMKIT_RETRY_BACKOFF": "31536001",
    "SWARMKIT_STALL_AFTER": "31536001",
    "SWARMKIT_SSE_KEEPALIVE": "31536001",
    "SWARMKIT_NOTIFY_TIMEOUT": "3601",
    "SWARMKIT_SHUTDOWN_GRACE": "3601",
    "SWARMKIT_NOTIFY_ATTEMPTS": "1001",
}


# --- run ids ---------------------------------------------------------------------------------


def test_unknown_and_ambiguous_ids_on_every_verb(cli: Cli, tmp_path: Path):
    flow = write_flow(tmp_path, "ok", ONE)
    ids = [sk(cli, "run", "--detach", str(flow), str(cli.workspace)).stdout.strip() for _ in range(17)]
    firsts: dict[str, list[str]] = {}
    for i in ids:
        firsts.setdefault(i[0], []).append(i)
    prefix, shared = next((k, v) for k, v in firsts.items() if len(v) > 1)
    verbs = [("stop",), ("cancel",), ("cancel", "--keep"), ("resume",), ("approve",), ("logs",), ("status",)]
    before = sql(cli.store_url, cli.workspace, "SELECT id, status, updated_at FROM jobs ORDER BY id")
    for verb in verbs:
        for ref, words in (("deadbeef0", "no run matches 'deadbeef0'"), ("%", "'%'"), ("_", "'_'"), ("zz-top", "'zz-top'"), ("0" * 40, "no run matches")):
            res = sk(cli, verb[0], ref, str(cli.workspace), *verb[1:])
            clear(res, 2, words)
        res = sk(cli, verb[0], prefix, str(cli.workspace), *verb[1:])
        errs = clear(res, 2, f"{prefix!r} matches")
        for i in shared:
            assert i[:8] in errs, (verb, errs)
    res = sk(cli, "run", "--resume", "deadbeef0", str(cli.workspace))
    clear(res, 2, "no run matches 'deadbeef0'")
    res = sk(cli, "run", "--resume", prefix, str(cli.workspace))
    clear(res, 2, f"{prefix!r} matches")
    # The same through the installed command.
    clear(cli.run("cancel", "deadbeef0", str(cli.workspace), "--keep"), 2, "no run matches 'deadbeef0'")
    clear(cli.run("logs", prefix, str(cli.workspace), "-f"), 2, f"{prefix!r} matches")
    after = sql(cli.store_url, cli.workspace, "SELECT id, status, updated_at FROM jobs ORDER BY id")
    assert after == before, "a refused id changed a run"
    # A unique prefix (any case) still works.
    res = cli.call("stop", ids[0][:10].upper(), str(cli.workspace))
    assert res.returncode == 0 and "stopped at once" in res.stdout, res.stdout + res.stderr


# --- store URLs and files ---------------------------------------------------------------------


def _black_hole() -> tuple[socket.socket, int]:
    """A TCP port that accepts connections and never says a word (a hung server, a firewall that eats packets)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            held.append(c)

    threading.Thread(target=accept, daemon=True).start()
    return srv, srv.getsockname()[1]


def test_store_urls_that_do_not_parse_or_do_not_answer(tmp_path: Path):
    flow = write_flow(tmp_path, "ok", ONE)
    srv, port = _black_hole()
    try:
        cases = [
            ("postgresql://host:notaport/db", "does not parse"),
            ("://nothing", "does not parse"),
            ("mysql://x/y", "unsupported database"),
            ("sqlite://", "names no database file"),
            ("postgresql://nobody@127.0.0.1:1/none", "cannot reach the store"),
            (f"sqlite:///{tmp_path}/a-file/store.db", "cannot create the store"),
        ]
        (tmp_path / "a-file").write_text("a file, not a folder")
        verbs = [["status"], ["run", str(flow)], ["run", "--detach", str(flow)], ["stop", "abc"], ["logs", "abc"], ["worker"]]
        url_shape = ("does not parse", "unsupported database", "names no database file")

        def want(res, words: str) -> int:
            # A URL of the wrong shape is bad usage (2) or a failure (1) (see test_a_bad_url_exits_alike...);
            # a store that does not answer or cannot be made is a failure (1).
            return res.returncode if words in url_shape and res.returncode in (1, 2) else 1

        for url, words in cases:
            for verb in verbs:
                res = swarmkit_in_process(verb[0], url, *verb[1:], str(tmp_path), cwd=tmp_path)
                if words == "cannot create the store" and verb[0] not in ("run", "worker"):
                    clear(res, 2, "no store at")  # only verbs that host make a store
                    continue
                clear(res, want(res, words), words)
            res = console_in_process(url, "--once", str(tmp_path), cwd=tmp_path)
            # The console never creates a store: where swarmkit would create one, it says there is none.
            clear(res, 2 if words == "cannot create the store" else want(res, words), "no store at" if words == "cannot create the store" else words)
        # Through the installed commands, as real processes.
        clear(run_cmd(swarmkit_argv("status", "postgresql://nobody@127.0.0.1:1/none", str(tmp_path)), tmp_path), 1, "cannot reach the store")
        clear(run_cmd(console_argv("postgresql://nobody@127.0.0.1:1/none", "--once", str(tmp_path)), tmp_path), 1, "cannot reach the store")
        # A server that accepts and then says nothing: a clear message, within the connect timeout.
        t0 = time.monotonic()
        res = run_cmd(swarmkit_argv("status", f"postgresql://nobody@127.0.0.1:{port}/none", str(tmp_path)), tmp_path, timeout=120)
        took = time.monotonic() - t0
        clear(res, 1, "cannot reach the store")
        assert took < 30, f"a silent server held `swarmkit status` for {took:.0f}s"
    finally:
        srv.close()


def test_a_bad_url_exits_alike_in_swarmkit_and_the_console(tmp_path: Path):
    url = "postgresql://host:notaport/db"
    a = swarmkit_in_process("status", url, str(tmp_path), cwd=tmp_path)
    b = console_in_process(url, "--once", str(tmp_path), cwd=tmp_path)
    assert "does not parse" in a.stderr and "does not parse" in b.stderr
    assert a.returncode == b.returncode == 2, (a.returncode, b.returncode)


def test_a_file_that_is_not_a_database_is_refused_by_every_verb_and_left_alone(tmp_path: Path):
    junk = tmp_path / "junk.db"
    body = b"SQLite format 2\x00 but not really" + os.urandom(4000)
    junk.write_bytes(body)
    flow = write_flow(tmp_path, "ok", ONE)
    url = f"sqlite:///{junk}"
    for verb in (["status"], ["run", str(flow)], ["run", "--detach", str(flow)], ["cancel", "abc"], ["worker"], ["logs", "abc"]):
        res = swarmkit_in_process(verb[0], url, *verb[1:], str(tmp_path), cwd=tmp_path)
        clear(res, 1, "is not a Swarmkit store")
    res = console_in_process(url, "--once", str(tmp_path), cwd=tmp_path)
    clear(res, 1, "is not a Swarmkit store")
    clear(run_cmd(swarmkit_argv("run", url, str(flow), str(tmp_path)), tmp_path), 1, "is not a Swarmkit store")
    assert junk.read_bytes() == body, "a foreign file was written to"
    assert not (tmp_path / "junk.db-wal").exists() or (tmp_path / "junk.db-wal").stat().st_size == 0


def _foreign_db(path: Path, table_sql: str, insert_sql: str) -> None:
    import sqlite3

    con = sqlite3.connect(path)
    con.execute(table_sql)
    con.execute(insert_sql)
    con.commit()
    con.close()


def _tables(path: Path) -> list[str]:
    import sqlite3

    con = sqlite3.connect(path)
    try:
        return sorted(r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    finally:
        con.close()


def test_another_apps_database_with_a_jobs_table_is_refused_and_untouched(tmp_path: Path):
    db = tmp_path / "payroll.db"
    _foreign_db(db, "CREATE TABLE jobs (name TEXT, salary INTEGER)", "INSERT INTO jobs VALUES ('bob', 10)")
    res = run_cmd(swarmkit_argv("status", f"sqlite:///{db}", str(tmp_path)), tmp_path)
    clear(res, 1, str(db))
    assert _tables(db) == ["jobs"], "tables were added to another app's database"
    assert integrity_check(db) == "ok"


def test_another_apps_database_is_refused_not_migrated(tmp_path: Path):
    db = tmp_path / "recipes.db"
    _foreign_db(db, "CREATE TABLE recipes (name TEXT)", "INSERT INTO recipes VALUES ('soup')")
    res = run_cmd(swarmkit_argv("status", f"sqlite:///{db}", str(tmp_path)), tmp_path)
    try:
        clear(res, 1, "not a Swarmkit store")
    finally:
        tables = _tables(db)
    assert tables == ["recipes"], f"a read-only `status` added {sorted(set(tables) - {'recipes'})} to another app's database"


def test_a_store_from_a_newer_schema_is_refused_by_every_verb_and_left_untouched(cli: Cli, tmp_path: Path):
    flow = write_flow(tmp_path, "ok", ONE)
    done = cli.call("run", str(flow), str(cli.workspace), check=True).stdout.split()[0]
    sql(cli.store_url, cli.workspace, "UPDATE alembic_version SET version_num = '9999_future'", write=True)
    # Not additive: the oldest code that may write it is that newer release.
    sql(cli.store_url, cli.workspace, "UPDATE swarmkit_meta SET value = '9999_future' WHERE key = 'min_writer'", write=True)
    before = sql(cli.store_url, cli.workspace, "SELECT id, status, updated_at FROM jobs")
    n_events = sql(cli.store_url, cli.workspace, "SELECT count(*) FROM events")
    verbs = [["status"], ["status", done], ["run", str(flow)], ["run", "--detach", str(flow)], ["run", "--resume", done],
             ["stop", done], ["cancel", done], ["resume", done], ["approve", done], ["logs", done], ["worker"]]
    for verb in verbs:
        res = sk(cli, *verb, str(cli.workspace))
        clear(res, 1, "newer Swarmkit", "9999_future")
    res = console_in_process(cli.store_url, "--once", str(cli.workspace), cwd=cli.workspace)
    clear(res, 1, "newer Swarmkit")
    clear(cli.run("worker", str(cli.workspace)), 1, "newer Swarmkit")
    from swarmkit.store import Store  # noqa: F401

    assert sql(cli.store_url, cli.workspace, "SELECT version_num FROM alembic_version") == [("9999_future",)]
    assert sql(cli.store_url, cli.workspace, "SELECT id, status, updated_at FROM jobs") == before
    assert sql(cli.store_url, cli.workspace, "SELECT count(*) FROM events") == n_events


# --- a read-only store folder, a full disk --------------------------------------------------------


@pytest.fixture
def mounts(tmp_path: Path):
    """Mount points this test makes (tmpfs, bind, read-only), unmounted afterwards; skips where mount is
    refused, except under CI (CI set), where a missing capability fails the test rather than hide it."""
    made: list[Path] = []

    def mount(args: list[str], target: Path) -> None:
        why = try_mount(args + [str(target)])
        if why:
            if os.environ.get("CI"):
                pytest.fail(f"CI is set but {why}")
            pytest.skip(why)
        made.append(target)

    yield mount
    for target in reversed(made):
        umount(target)


def _store_with_runs(tmp_path: Path, ws: Path) -> tuple[str, str]:
    flow = write_flow(tmp_path, "ok", ONE)
    env = env_for_children()
    done = run_cmd(swarmkit_argv("run", f"sqlite:///{ws}/.swarmkit/store.db", str(flow), str(ws)), ws, env=env)
    assert done.returncode == 0, done.stderr
    queued = run_cmd(swarmkit_argv("run", f"sqlite:///{ws}/.swarmkit/store.db", "--detach", str(flow), str(ws)), ws, env=env)
    return done.stdout.split()[0], queued.stdout.strip()


def _read_only(mounts, folder: Path) -> None:
    mounts(["--bind", str(folder)], folder)
    mounts(["-o", "remount,bind,ro"], folder)
    probe = folder / "probe"
    try:
        probe.write_text("x")
    except OSError:
        return
    probe.unlink()
    pytest.skip("a read-only bind mount is still writable here")


def test_a_read_only_store_folder_fails_cleanly_and_loses_nothing(workspace: Path, tmp_path: Path, mounts):
    done, queued = _store_with_runs(tmp_path, workspace)
    url = f"sqlite:///{workspace}/.swarmkit/store.db"
    before = sql(url, workspace, "SELECT id, status, updated_at, step FROM jobs ORDER BY id")
    _read_only(mounts, workspace / ".swarmkit")
    flow = write_flow(tmp_path, "ok2", ONE)
    for verb in (["stop", queued], ["cancel", queued], ["run", str(flow)], ["run", "--detach", str(flow)], ["worker"], ["status"], ["logs", done]):
        res = swarmkit_in_process(verb[0], url, *verb[1:], str(workspace), cwd=workspace)
        if verb[0] in ("status", "logs") and res.returncode == 0:
            continue  # reading a read-only store is fine
        clear(res, 1, str(workspace / ".swarmkit"))
    umount(workspace / ".swarmkit")
    after = sql(url, workspace, "SELECT id, status, updated_at, step FROM jobs ORDER BY id")
    assert after == before
    assert integrity_check(workspace / ".swarmkit" / "store.db") == "ok"


def test_a_read_only_store_folder_is_named_as_read_only(workspace: Path, tmp_path: Path, mounts):
    done, queued = _store_with_runs(tmp_path, workspace)
    url = f"sqlite:///{workspace}/.swarmkit/store.db"
    _read_only(mounts, workspace / ".swarmkit")
    res = run_cmd(swarmkit_argv("stop", url, queued, str(workspace)), workspace)
    clear(res, 1, "read-only")
    # Looking needs no writes: status of a read-only store works (the console has a --read-only mode for a reason).
    res = run_cmd(swarmkit_argv("status", url, str(workspace)), workspace)
    assert res.returncode == 0 and done[:8] in res.stdout, res.stderr


def _full_disk(mounts, tmp_path: Path, size: str = "3m") -> Path:
    ws = tmp_path / "small"
    ws.mkdir()
    mounts(["-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs"], ws)
    return ws


def _fill(ws: Path, leave_kib: int) -> Path:
    st = os.statvfs(ws)
    free = st.f_bavail * st.f_frsize
    filler = ws / "filler"
    with open(filler, "wb") as f:
        left = max(0, free - leave_kib * 1024)
        chunk = b"\0" * (1 << 20)
        while left > 0:
            n = min(left, len(chunk))
            f.write(chunk[:n])
            left -= n
    return filler


def _talky(tmp_path: Path) -> Path:
    return write_flow(
        tmp_path, "talky",
        'name = "talky"\n[[agents]]\nname = "first"\ncommand = "echo first"\n'
        '[[agents]]\nname = "talk"\ncommand = "i=0; while [ $i -lt 40000 ]; do echo line $i padding-padding-padding-padding-padding; i=$((i+1)); done"\n',
    )


def test_a_store_on_a_full_disk_fails_the_run_and_keeps_the_store_whole(tmp_path: Path, mounts):
    ws = _full_disk(mounts, tmp_path)
    url = f"sqlite:///{ws}/.swarmkit/store.db"
    ok = write_flow(tmp_path, "ok", ONE)
    first = run_cmd(swarmkit_argv("run", url, str(ok), str(ws)), ws)
    assert first.returncode == 0, first.stderr
    filler = _fill(ws, leave_kib=700)
    res = run_cmd(swarmkit_argv("run", url, str(_talky(tmp_path)), str(ws)), ws, timeout=180)
    assert res.returncode == 1, (res.stdout[-500:], res.stderr[-1500:])
    assert "disk is full" in res.stderr or "no space left" in res.stderr.lower(), res.stderr[-1500:]
    # Completely full now: every verb fails with an exit code, not a hang or a crash.
    _fill(ws, leave_kib=0)
    # (A write may still fit in the space the store already holds: a run may even complete.)
    for verb, codes in ((["status"], (0, 1)), (["run", str(ok)], (0, 1)), (["stop", "abc"], (1, 2))):
        r = run_cmd(swarmkit_argv(verb[0], url, *verb[1:], str(ws)), ws)
        assert r.returncode in codes and "Traceback" not in r.stderr, (verb, r.returncode, r.stderr[-1500:])
    filler.unlink()
    for f in ws.glob("filler*"):
        f.unlink()
    # Space back: the store is whole, the first run intact, the one that hit the wall ended (or, its
    # host gone without a word, is marked lost by the next look) and says why.
    assert integrity_check(ws / ".swarmkit" / "store.db") == "ok"
    def looked_ended() -> bool:
        # `status` marks a silent host's run lost once its lease has passed.
        looked = run_cmd(swarmkit_argv("status", url, str(ws)), ws)
        assert looked.returncode == 0, looked.stderr
        return dict(sql(url, ws, "SELECT flow, status FROM jobs"))["talky"] != "running"

    wait_for(looked_ended, timeout=30, interval=0.3, what="the run that hit the wall to end or be marked lost")
    rows = dict(sql(url, ws, "SELECT flow, status FROM jobs"))
    assert rows["one"] == "completed"
    assert rows["talky"] in ("faulted", "lost"), rows
    if rows["talky"] == "faulted":
        errors = sql(url, ws, "SELECT error FROM jobs WHERE flow = 'talky'")[0][0] or ""
        assert "full" in errors or "space" in errors, errors
    n_first = sql(url, ws, "SELECT count(*) FROM events e JOIN jobs j ON e.job_id = j.id WHERE j.flow = 'talky' AND e.node = 'first'")[0][0]
    assert n_first >= 3, "the node that completed before the disk filled lost its events"
    again = run_cmd(swarmkit_argv("run", url, str(ok), str(ws)), ws)
    assert again.returncode == 0, again.stderr


def test_a_full_disk_is_reported_in_a_line_or_two(tmp_path: Path, mounts):
    ws = _full_disk(mounts, tmp_path)
    url = f"sqlite:///{ws}/.swarmkit/store.db"
    ok = write_flow(tmp_path, "ok", ONE)
    assert run_cmd(swarmkit_argv("run", url, str(ok), str(ws)), ws).returncode == 0
    _fill(ws, leave_kib=700)
    res = run_cmd(swarmkit_argv("run", url, str(_talky(tmp_path)), str(ws)), ws, timeout=180)
    clear(res, 1, "no space left", max_lines=4)


# --- concurrent runs on one store ------------------------------------------------------------------


def test_concurrent_swarmkit_runs_on_one_new_store(cli: Cli, tmp_path: Path):
    """Eight `swarmkit run`s started at once on a store that does not exist yet: one migration, eight runs,
    each with all of its own events and none of another's."""
    flow = write_flow(
        tmp_path, "pair",
        'name = "pair"\n[[agents]]\nname = "a"\ncommand = "echo a-$SWARMKIT_RUN_ID; sleep 0.3"\n[[agents]]\nname = "b"\ncommand = "echo b-$SWARMKIT_RUN_ID"\n',
    )
    procs = [cli.start("run", str(flow), str(cli.workspace), "--input", f"n={n}", env=ROOMY_LEASE) for n in range(8)]
    outs = []
    for p in procs:
        o, e = p.communicate(timeout=120)
        assert p.returncode == 0, e[-2000:]
        assert not has_traceback(e), e
        # A heartbeat that waited for the lock while the run's end was written is fenced by it: no news.
        assert "is gone" not in e, e
        outs.append(o)
    shorts = {o.split()[0] for o in outs}
    assert len(shorts) == 8
    for short in shorts:
        row = job(cli.store_url, cli.workspace, short)
        assert row.status == "completed" and row.epoch == 1
        lines = [e.text for e in events(cli.store_url, cli.workspace, row.id) if e.kind == "log"]
        assert lines == [f"a-{row.id}", f"b-{row.id}"]
    assert sql(cli.store_url, cli.workspace, "SELECT count(*) FROM alembic_version") == [(1,)]


def test_two_run_resumes_of_one_stopped_run_host_it_once(cli: Cli, tmp_path: Path):
    marks = tmp_path / "marks"
    marks.mkdir()
    flow = write_flow(
        tmp_path, "three",
        f'name = "three"\n[[agents]]\nname = "a"\ncommand = "echo a >> {marks}/a"\n'
        f'[[agents]]\nname = "b"\ncommand = "echo b >> {marks}/b; sleep 0.5"\n[[agents]]\nname = "c"\ncommand = "echo c >> {marks}/c"\n',
    )
    rid = cli.call("run", "--detach", str(flow), str(cli.workspace), check=True).stdout.strip()
    assert cli.call("stop", rid, str(cli.workspace)).returncode == 0
    racers = [cli.start("run", "--resume", rid[:12], str(cli.workspace), env={"SWARMKIT_ACTOR": f"racer{n}@ci"}) for n in range(4)]
    results = [(p.communicate(timeout=120), p.returncode) for p in racers]
    won = [r for r in results if r[1] == 0]
    lost = [r for r in results if r[1] != 0]
    assert len(won) == 1, [(r[1], r[0][0][-300:], r[0][1][-300:]) for r in results]
    for (o, e), code in lost:
        assert code == 1 and "cannot resume" in e and ("running" in e or "completed" in e), (code, o, e)
        assert not has_traceback(e)
    row = job(cli.store_url, cli.workspace, rid)
    assert row.status == "completed" and row.epoch == 1
    assert [(marks / n).read_text() for n in "abc"] == ["a\n", "b\n", "c\n"], "an agent ran twice"
    resumed = [a for a in audit(cli.store_url, cli.workspace, rid) if a.action == "run.resumed"]
    assert len(resumed) == 1
