"""Untrusted text and untrusted rows.

1. An injection corpus (Rich and Textual markup, click actions, links, `[/]`,
   bracketed words, nested brackets, ESC/CSI/OSC/OSC 8/OSC 52, C1 bytes, bidi
   overrides, NUL, very long lines) pushed through every field a run controls
   (flow name, node names, log lines, error messages, actor names, inputs, the
   gate's name) and read back through every surface that shows it, on a real
   pty: `swarmkit run`, `status`, `status RUN`, `status --json`, `logs`,
   `logs -f`, the act verbs' messages, `swarmkit worker`, `swarmkit-console
   --once [--json]` and the interactive console. Zero crashes, zero escape or
   C1 bytes, zero bidi controls reach the terminal, and the JSON keeps the text
   exactly.
2. Cancel never deletes outside the store's own runs folder, whatever a row's
   workspace path says and whatever a workspace holds.
3. The store file and its folder are created readable by their owner only.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

from tests.reliability import (
    console_argv,
    env_for_children,
    has_traceback,
    run_on_pty,
    sql,
    swarmkit_argv,
    swarmkit_in_process,
    terminal_hazards,
    wait_until,
)

from .conftest import Cli, write_flow
from .helpers import audit, events, job, workspaces

ESC = "\x1b"
CORPUS = [
    "[@click=app.quit]x[/]",
    "[link=https://evil.example/a]y[/link]",
    "[/]",
    "[TODO] fix [b]bold[/b]",
    "[[nested [deeper [deepest]]]] [red on white]r[/] [/b]",
    f"{ESC}[31mred{ESC}[0m {ESC}[2J{ESC}[H{ESC}[1;1H",
    f"{ESC}]0;pwned-title\x07",
    f"{ESC}]8;;https://evil.example/b{ESC}\\click-me{ESC}]8;;{ESC}\\",
    f"{ESC}]52;c;cHduZWQ=\x07",
    "\x9b31mC1-CSI \x9d0;c1-osc\x9c \x85nel",
    "abc\u202edcba\u202c \u2066iso\u2069 \u200fRLM",
    "bell\x07 back\x08space tab\there cr\rreturn del\x7f",
]
LONG = "L" * 100_000


def toml_str(s: str) -> str:
    """A TOML basic string holding exactly `s` (control characters as \\u escapes)."""
    out = []
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F or 0x80 <= ord(ch) <= 0x9F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def corpus_flow(tmp_path: Path, corpus_file: Path, *, gate: bool = False, fail_with: str | None = None) -> Path:
    """A flow whose name, node names, log lines (and optionally error) are the corpus."""
    name = " ".join(CORPUS[:6]) + " flow"
    body = f"name = {toml_str(name)}\n"
    # Node names: each a piece of the corpus (unique).
    nodes = [f"{c} #{i}" for i, c in enumerate(CORPUS)]
    body += f"\n[[agents]]\nname = {toml_str(nodes[0])}\ncommand = \"cat {corpus_file}; echo; printf '%s\\\\n' 'raw C1 byte:'; printf '\\\\233\\\\235\\\\n'\"\n"
    (tmp_path / "evilagents.py").write_text(
        "import json\n"
        f"CORPUS = json.loads({json.dumps(json.dumps(CORPUS))})\n"
        "def talk(ctx):\n"
        "    for line in CORPUS:\n"
        "        ctx.log(line)\n"
        f"    ctx.log('L' * 100000)\n"
        "    return {'echo': CORPUS}\n"
        "def fail(ctx):\n"
        "    raise RuntimeError(' | '.join(CORPUS))\n"
    )
    body += f"\n[[agents]]\nname = {toml_str(nodes[1])}\ncall = \"evilagents:talk\"\n"
    if gate:
        body += f"\n[[agents]]\nname = {toml_str(nodes[2])}\napprove = true\ncommand = \"echo after the gate\"\n"
    if fail_with:
        body += f"\n[[agents]]\nname = {toml_str(nodes[3])}\ncall = \"evilagents:fail\"\n"
    for i in range(4, 7):
        body += f"\n[[agents]]\nname = {toml_str(nodes[i])}\ncommand = \"echo {i}\"\n"
    return write_flow(tmp_path, "evil", body)


def corpus_file(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_bytes(("\n".join(CORPUS) + "\n" + LONG + "\n").encode("utf-8") + b"raw invalid utf-8: \xff\xfe \x9b\n")
    return path


def on_pty(cli: Cli, *args: str, env: dict | None = None, argv: list[str] | None = None, timeout: float = 90) -> tuple[int, str]:
    e = env_for_children(env)
    code, raw = run_on_pty(argv or swarmkit_argv(args[0], cli.store_url, *args[1:]), cwd=cli.workspace, env=e, timeout=timeout)
    hazards = terminal_hazards(raw)
    shown = raw.decode("utf-8", errors="replace")
    assert not hazards, f"{(argv or args)[:4]} let these reach the terminal: {hazards[:8]}"
    assert not has_traceback(shown), f"{(argv or args)[:4]} crashed:\n{shown[-3000:]}"
    return code, shown


EVIL_ACTOR = "[@click=app.quit]mallory[/] " + ESC + "]52;c;cHduZWQ=\x07 \u202eroot\x9b31m"


def test_the_corpus_reaches_no_terminal_through_any_surface(cli: Cli, tmp_path: Path):
    cf = corpus_file(tmp_path)
    flow = corpus_flow(tmp_path, cf, gate=True)
    # An input holding escape sequences is refused, and the refusal quotes it inert.
    code, out = on_pty(cli, "run", str(flow), str(cli.workspace), "--input", f"evil={CORPUS[5]}{CORPUS[8]}")
    assert code == 2 and "control character" in out, out[-2000:]
    inputs = ["--input", "markup=[@click=app.quit]x[/]"]
    # swarmkit run in the foreground: it echoes every line the agents print; it stops at the gate.
    code, out = on_pty(cli, "run", str(flow), str(cli.workspace), *inputs, env={"SWARMKIT_ACTOR": EVIL_ACTOR})
    assert code == 0, out[-2000:]
    assert "waiting for approval" in out
    assert "[@click=app.quit]x[/]" in out, "markup is shown as the text it is"
    short = out.split()[0]
    row = job(cli.store_url, cli.workspace, short)
    assert row.status == "deferred"
    # The act verbs, with an evil actor, and their messages naming gates and quoting earlier actors.
    evil = {"SWARMKIT_ACTOR": EVIL_ACTOR}
    on_pty(cli, "stop", short, str(cli.workspace), env=evil)  # deferred: nothing to stop, names the gate
    code, out = on_pty(cli, "approve", short, str(cli.workspace), env=evil)
    assert code == 0, out
    on_pty(cli, "stop", short, str(cli.workspace), env=evil)  # queued: stopped at once
    on_pty(cli, "stop", short, str(cli.workspace), env=evil)  # already stopped
    on_pty(cli, "resume", short, str(cli.workspace), env=evil)
    slow = write_flow(tmp_path, "slow", f"name = {toml_str(CORPUS[7])}\n[[agents]]\nname = {toml_str(CORPUS[9])}\ncommand = \"sleep 20\"\n")
    host = cli.start("run", str(slow), str(cli.workspace))
    other = host.stdout.readline().split()[0]
    try:
        wait_until(lambda: job(cli.store_url, cli.workspace, other).current_node, what="the slow agent")
        on_pty(cli, "stop", other, str(cli.workspace), env=evil)
        on_pty(cli, "stop", other, str(cli.workspace), env=evil)  # "already requested by <actor> at ..."
        on_pty(cli, "cancel", other, str(cli.workspace), "--keep", env=evil)
        on_pty(cli, "cancel", other, str(cli.workspace), env=evil)  # "already requested by <actor>"
        host.communicate(timeout=30)
    finally:
        if host.poll() is None:
            host.kill()
    on_pty(cli, "cancel", other, str(cli.workspace), env=evil)  # terminal: nothing to cancel
    # Every read surface.
    surfaces = [
        ("status", str(cli.workspace)),
        ("status", "--all", str(cli.workspace)),
        ("status", short, str(cli.workspace)),
        ("logs", short, str(cli.workspace)),
    ]
    for s in surfaces:
        on_pty(cli, *s)
    on_pty(cli, argv=console_argv(cli.store_url, "--once", str(cli.workspace)))
    # JSON: valid, nothing reaches the terminal, and the text is kept exactly.
    _, out = on_pty(cli, "status", short, "--json", str(cli.workspace))
    view = json.loads(out.replace("\r\n", "\n"))
    assert view["flow"] == " ".join(CORPUS[:6]) + " flow"
    assert view["inputs"]["markup"] == "[@click=app.quit]x[/]"
    _, out = on_pty(cli, argv=console_argv(cli.store_url, "--once", "--json", str(cli.workspace)))
    dump = json.loads(out.replace("\r\n", "\n"))
    assert any(r["flow"] == view["flow"] for r in dump["runs"])
    _, out = on_pty(cli, "status", "--json", str(cli.workspace))
    json.loads(out.replace("\r\n", "\n"))
    # A worker hosting the rest (it prints what it claims and how each run ends).
    worker = subprocess.Popen(swarmkit_argv("worker", cli.store_url, str(cli.workspace)), cwd=cli.workspace, env=env_for_children(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: job(cli.store_url, cli.workspace, short).status == "completed", timeout=60, what="the run to complete")
    finally:
        worker.send_signal(signal.SIGTERM)
        wout, _ = worker.communicate(timeout=30)
    assert not terminal_hazards(wout), terminal_hazards(wout)[:5]
    # The run's own trail keeps the lines exactly (the store holds what was printed; only display neutralises).
    texts = [e["text"] for e in _events(cli, row.id) if e["kind"] == "log"]
    for c in CORPUS:
        assert c in texts, f"the line {c!r} was lost or altered in the store"
    assert any(t.startswith("L" * 1000) for t in texts)
    code, out = on_pty(cli, "logs", short, str(cli.workspace), "-f")
    assert code == 0 and f"-- {short} is completed --" in out
    acts = {(a.action, a.actor) for a in audit(cli.store_url, cli.workspace, row.id)}
    assert ("gate.approved", EVIL_ACTOR) in acts, "the actor is recorded as given"
    on_pty(cli, "status", other, str(cli.workspace))
    on_pty(cli, "logs", other, str(cli.workspace))


def _events(cli: Cli, job_id: str) -> list[dict]:
    rows = sql(cli.store_url, cli.workspace, "SELECT kind, text FROM events WHERE job_id = :j ORDER BY id", {"j": job_id})
    return [{"kind": k, "text": t} for k, t in rows]


def test_a_failing_agents_error_is_shown_inert(cli: Cli, tmp_path: Path):
    cf = corpus_file(tmp_path)
    flow = corpus_flow(tmp_path, cf, fail_with="x")
    code, out = on_pty(cli, "run", str(flow), str(cli.workspace))
    assert code == 1
    short = out.split()[0]
    row = job(cli.store_url, cli.workspace, short)
    assert row.status == "failed", (row.status, row.error)
    for c in CORPUS[:3]:
        assert c in (row.error or ""), "the error keeps the agent's words"
    on_pty(cli, "status", short, str(cli.workspace))
    on_pty(cli, "status", str(cli.workspace))
    on_pty(cli, argv=console_argv(cli.store_url, "--once", str(cli.workspace)))


def test_a_nul_byte_in_an_agents_output_is_neutralised_not_fatal(cli: Cli, tmp_path: Path):
    """(B7, fixed: on PostgreSQL a NUL faulted the run and lost its lines.)"""
    flow = write_flow(
        tmp_path, "nul",
        'name = "nul"\n[[agents]]\nname = "a"\ncommand = "echo first; printf \\"before\\\\000after\\\\n\\"; echo last"\n'
        '[[agents]]\nname = "b"\ncall = "nulagent:go"\n',
    )
    (tmp_path / "nulagent.py").write_text("def go(ctx):\n    ctx.log('x\\x00y')\n    return {'k': 'v\\x00w'}\n")
    code, out = on_pty(cli, "run", str(flow), str(cli.workspace))
    short = out.split()[0]
    row = job(cli.store_url, cli.workspace, short)
    assert row.status == "completed", (row.status, (row.error or "")[:300])
    texts = [e["text"] for e in _events(cli, row.id) if e["kind"] == "log"]
    assert texts[0] == "first" and texts[2] == "last" and "before" in texts[1] and "after" in texts[1], texts


def test_the_interactive_console_shows_the_corpus_without_acting_on_it(sqlite_url: str, workspace: Path, tmp_path: Path):
    """The real console on a pty, a store full of the corpus: it draws (with its own escapes) but passes
    none of the corpus's through: no title change, no clipboard write, no injected link, no C1, no bidi;
    `[@click=app.quit]` does not quit it and `[/]` does not crash it; `q` does. (What it draws does not
    depend on the store: SQLite only; the corpus's trip through PostgreSQL is the test above.)"""
    cli = Cli(sqlite_url, workspace)
    cf = corpus_file(tmp_path)
    flow = corpus_flow(tmp_path, cf, gate=True)
    code, out = on_pty(cli, "run", str(flow), str(cli.workspace), env={"SWARMKIT_ACTOR": EVIL_ACTOR})
    short = out.split()[0]
    on_pty(cli, "stop", short, str(cli.workspace), env={"SWARMKIT_ACTOR": EVIL_ACTOR})
    import fcntl
    import select
    import struct
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    proc = subprocess.Popen(console_argv(cli.store_url, str(cli.workspace)), cwd=cli.workspace, env=env_for_children({"TERM": "xterm-256color"}), stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    seen = bytearray()

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            r, _, _ = select.select([master], [], [], 0.05)
            if r:
                try:
                    seen.extend(os.read(master, 65536))
                except OSError:
                    return

    try:
        pump(4)
        assert proc.poll() is None, f"the console exited on its own: {bytes(seen[-1500:])!r}"
        # The run's detail, its logs, help, the cancel dialog (which names what it would destroy), the filter.
        for keys in (b"\r", b"l", b"\x1b", b"?", b"\x1b", b"c", b"\x1b", b"/", b"[/]", b"\x1b"):
            os.write(master, keys)
            pump(1.0)
            assert proc.poll() is None, f"the console died on {keys!r}: {bytes(seen[-1500:])!r}"
        os.write(master, b"q")
        end = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < end:
            pump(0.2)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)
    raw = bytes(seen)
    text = raw.decode("utf-8", errors="replace")
    assert "Traceback" not in text
    assert job(cli.store_url, cli.workspace, short).status == "deferred", "looking acted on the run"
    for needle, what in (
        (b"\x1b]0;pwned", "a title change"),
        (b"\x1b]52;", "a clipboard write"),
        ("\u202e".encode(), "a bidi override"),
        (b"\xc2\x9b", "a C1 CSI"),
        (b"\xc2\x9d", "a C1 OSC"),
        (b"\x1b[2J\x1b[H\x1b[1;1H", "the corpus's own cursor moves"),
    ):
        assert needle not in raw, f"the console passed {what} to the terminal"
    import re

    # The link's text is shown as the text it is; it never becomes a live OSC 8 hyperlink.
    assert not re.search(rb"\x1b\]8;[^\x07\x1b]*evil", raw), "the console made the corpus's link live"
    assert b"[link=https://evil.example/a]y[/link]" in raw, "the markup is shown as plain text"


# --- workspaces: cancel never deletes outside the runs folder ---------------------------------------


def _victim(root: Path, name: str = "victim") -> Path:
    v = root / name
    v.mkdir(parents=True, exist_ok=True)
    (v / "precious.txt").write_text("keep me")
    return v


def _parked_run(cli: Cli, tmp_path: Path, name: str = "park") -> str:
    """A run hosted once (so it has a workspace), then parked at a gate: cancel applies the policy itself.

    Through `swarmkit run`'s entry point in this process (the same code, without a process start each time).
    """
    flow = write_flow(tmp_path, name, f'name = "{name}"\n[[agents]]\nname = "a"\ncommand = "echo a > a.txt"\n[[agents]]\nname = "b"\napprove = true\ncommand = "true"\n')
    res = swarmkit_in_process("run", cli.store_url, str(flow), str(cli.workspace), cwd=cli.workspace)
    assert res.returncode == 0, res.stderr
    return job(cli.store_url, cli.workspace, res.stdout.split()[0]).id


def _cancel(cli: Cli, run_id: str):
    return swarmkit_in_process("cancel", cli.store_url, run_id, str(cli.workspace), cwd=cli.workspace)


def _forge(cli: Cli, run_id: str, path: str) -> None:
    sql(cli.store_url, cli.workspace, "UPDATE workspaces SET path = :p WHERE job_id = :j", {"p": path, "j": run_id}, write=True)


def test_cancel_never_deletes_where_a_forged_workspace_row_points(cli: Cli, tmp_path: Path):
    runs_dir = cli.workspace / ".swarmkit" / "runs"
    outside = tmp_path / "outside"
    other = _parked_run(cli, tmp_path, "other")  # a second run whose workspace must survive the first's cancel
    cases = {
        "an absolute folder outside": lambda rid: str(_victim(outside, "plain")),
        "a folder outside named for the run": lambda rid: str(_victim(outside / "x", rid)),
        "another run's workspace": lambda rid: str(runs_dir / other),
        "a path climbing out with ..": lambda rid: str(runs_dir / "sub" / ".." / ".." / ".." / "outside" / "x" / rid),
        "a relative path": lambda rid: f"../../outside/{rid}",
        "the runs folder itself": lambda rid: str(runs_dir),
        "the store's folder": lambda rid: str(cli.workspace / ".swarmkit"),
        "the filesystem root": lambda rid: "/",
    }
    (runs_dir / other / "mine.txt").write_text("other run's file")
    for what, target in cases.items():
        rid = _parked_run(cli, tmp_path)
        own = Path(workspaces(cli.store_url, cli.workspace, rid)[0].path)
        path = target(rid)
        _forge(cli, rid, path)
        res = _cancel(cli, rid)
        assert res.returncode == 0 and "cancelled" in res.stdout, (what, res.stdout, res.stderr)
        assert job(cli.store_url, cli.workspace, rid).status == "cancelled", what
        assert (outside / "plain" / "precious.txt").exists() or what != "an absolute folder outside", what
        assert (runs_dir / other / "mine.txt").read_text() == "other run's file", f"{what}: another run's workspace was touched"
        assert cli.workspace.exists() and (cli.workspace / ".swarmkit").is_dir(), what
        assert not cli.store_url.startswith("sqlite") or (cli.workspace / ".swarmkit" / "store.db").exists(), what
        assert own.exists(), f"{what}: the run's real workspace was deleted although the row pointed elsewhere"
        # The cancel says so, and the run's trail records what was left, and why.
        assert "left " in res.stdout and "in place" in res.stdout, (what, res.stdout)
        left = [e.text for e in events(cli.store_url, cli.workspace, rid) if e.kind == "workspace"]
        assert left and all('"left"' in t for t in left), (what, left)
    for name in ("plain",):
        assert (outside / name / "precious.txt").read_text() == "keep me"
    assert job(cli.store_url, cli.workspace, other).status == "deferred"


def test_cancel_of_a_running_run_and_completion_obey_the_same_fence(cli: Cli, tmp_path: Path):
    """The host applies the policy itself when a running run is cancelled, and when a run completes."""
    outside = tmp_path / "outside"
    flow = write_flow(tmp_path, "slow", 'name = "slow"\n[[agents]]\nname = "a"\ncommand = "sleep 30"\n')
    proc = cli.start("run", str(flow), str(cli.workspace))
    short = proc.stdout.readline().split()[0]
    rid = job(cli.store_url, cli.workspace, short).id
    wait_until(lambda: workspaces(cli.store_url, cli.workspace, rid), what="its workspace")
    victim = _victim(outside / "a", rid)
    _forge(cli, rid, str(victim))
    assert cli.call("cancel", rid, str(cli.workspace)).returncode == 0
    proc.communicate(timeout=30)
    assert job(cli.store_url, cli.workspace, rid).status == "cancelled"
    assert (victim / "precious.txt").read_text() == "keep me"
    # Completion (the flow does not keep workspaces): the host destroys only what is its own.
    flow = write_flow(tmp_path, "quick", 'name = "quick"\n[[agents]]\nname = "a"\ncommand = "sleep 1"\n[[agents]]\nname = "b"\ncommand = "true"\n')
    proc = cli.start("run", str(flow), str(cli.workspace))
    short = proc.stdout.readline().split()[0]
    rid = job(cli.store_url, cli.workspace, short).id
    wait_until(lambda: workspaces(cli.store_url, cli.workspace, rid), what="its workspace")
    victim = _victim(outside / "b", rid)
    _forge(cli, rid, str(victim))
    proc.communicate(timeout=30)
    assert job(cli.store_url, cli.workspace, rid).status == "completed"
    assert (victim / "precious.txt").read_text() == "keep me"


def test_cancel_does_not_follow_symlinks_out_of_a_workspace(cli: Cli, tmp_path: Path):
    outside = tmp_path / "outside"
    victim_dir = _victim(outside, "dir")
    victim_file = outside / "file.txt"
    victim_file.write_text("keep me too")
    rid = _parked_run(cli, tmp_path)
    ws = Path(workspaces(cli.store_url, cli.workspace, rid)[0].path)
    (ws / "link-to-dir").symlink_to(victim_dir)
    (ws / "link-to-file").symlink_to(victim_file)
    (ws / "nested").mkdir()
    (ws / "nested" / "deep-link").symlink_to(victim_dir)
    (ws / "link-to-root").symlink_to("/")
    res = cli.run("cancel", rid, str(cli.workspace))  # as a real process once
    assert res.returncode == 0
    assert not ws.exists(), "the workspace itself is destroyed"
    assert (victim_dir / "precious.txt").read_text() == "keep me"
    assert victim_file.read_text() == "keep me too"
    # And a workspace that is itself a symlink pointing out is left alone.
    rid = _parked_run(cli, tmp_path)
    ws = Path(workspaces(cli.store_url, cli.workspace, rid)[0].path)
    import shutil

    shutil.rmtree(ws)
    target = _victim(outside / "swapped", rid)
    ws.symlink_to(target)
    res = _cancel(cli, rid)
    assert res.returncode == 0
    assert (target / "precious.txt").read_text() == "keep me"


def test_a_workspace_path_with_a_nul_byte_does_not_block_cancel(sqlite_url: str, workspace: Path, tmp_path: Path):
    cli = Cli(sqlite_url, workspace)  # PostgreSQL text cannot hold NUL: SQLite only
    rid = _parked_run(cli, tmp_path)
    _forge(cli, rid, f"{workspace}/.swarmkit/runs/{rid}\x00/../../..")
    res = cli.call("cancel", rid, str(workspace))
    assert res.returncode == 0 and not has_traceback(res.stderr), res.stderr[-2000:]
    assert job(sqlite_url, workspace, rid).status == "cancelled"


# --- permissions ---------------------------------------------------------------------------------------


def test_the_store_and_every_workspace_are_private_even_with_umask_0(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir(mode=0o777)
    flow = write_flow(tmp_path, "ok", 'name = "ok"\n[[agents]]\nname = "a"\ncommand = "echo hi > out.txt"\n[[agents]]\nname = "b"\napprove = true\ncommand = "true"\n')
    url = f"sqlite:///{ws}/.swarmkit/store.db"
    proc = subprocess.run(
        swarmkit_argv("run", url, str(flow), str(ws)), cwd=ws, env=env_for_children(), capture_output=True, text=True, timeout=60,
        preexec_fn=lambda: os.umask(0),
    )
    assert proc.returncode == 0, proc.stderr
    store_dir = ws / ".swarmkit"
    mode = lambda p: stat.S_IMODE(p.stat().st_mode)
    assert mode(store_dir) == 0o700
    for f in store_dir.iterdir():
        if f.is_file():
            assert mode(f) & 0o077 == 0, f"{f.name} is {oct(mode(f))}"
    runs = store_dir / "runs"
    assert mode(runs) == 0o700
    for run in runs.iterdir():
        assert mode(run) & 0o077 == 0, f"workspace {run.name} is {oct(mode(run))}"
    # A store named by path in a folder that does not exist yet (made by a verb that makes stores).
    deep = tmp_path / "new" / "place"
    proc = subprocess.run(
        swarmkit_argv("db", str(deep / "s.db"), "upgrade", str(ws)), cwd=ws, env=env_for_children(), capture_output=True, text=True, timeout=60,
        preexec_fn=lambda: os.umask(0),
    )
    assert proc.returncode == 0, proc.stderr
    assert mode(deep) == 0o700 and mode(deep / "s.db") == 0o600
