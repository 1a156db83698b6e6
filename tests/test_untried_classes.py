"""Issue 29, "every door shut to strangers": the classes not tried before, each tried against the real product.

1. Symlinks at every cleanup: a link inside a workspace pointing out (to a file, a folder, `/`), the
   workspace itself swapped for a link, and the runs folder above it swapped for one; at completion,
   failure, cancel (parked and running) and the owning host's sweep of a destroy another host recorded.
   (tests/test_security.py already covers the cancel of a parked run with links inside and a workspace
   swapped for a link, and forged workspace rows; this extends it to every other cleanup and to a link
   in a parent.)
2. Names and ids with `../`, absolute paths, newlines and terminal escapes through the CLI and the API:
   nothing is written outside `<workspace>/.swarmkit/`, and no raw ESC, C1 or BEL byte reaches the
   terminal from `status`, `logs`, `audit` (tables and `-o json`) or from a usage error.
3. A truncated or damaged SQLite store (and its -wal): every verb says so in a line, exits 1 or 2, and
   leaves the files byte-identical (tests/test_bad_input.py covers a junk file with no WAL).
4. `kill -9` of `swarmkit db upgrade` in the middle of a migration, on SQLite and PostgreSQL: the rerun
   finishes it and the store works.
5. A disk that fills while a run writes its logs (tests/test_bad_input.py covers the store's own disk
   filling; here the run's workspace and store share a small tmpfs and space comes back afterwards).
6. A timed-out or cancelled agent whose child ignores SIGTERM, for a command agent and a call agent's
   subprocess: gone within the grace periods (tests/test_containment.py covers strays left by a command
   that exits, and a cancelled sync call agent itself).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.reliability import (
    console_argv,
    console_in_process,
    env_for_children,
    has_traceback,
    sql,
    swarmkit_argv,
    swarmkit_in_process,
    terminal_hazards,
    try_mount,
    umount,
)

from .conftest import Cli, hold, wait_for, write_flow
from .helpers import FAST_ENV, events, job, workspaces

TERM_GRACE_S = float(FAST_ENV["SWARMKIT_TERM_GRACE"])
INTERRUPT_GRACE_S = float(FAST_ENV["SWARMKIT_INTERRUPT_GRACE"])


# --- shared --------------------------------------------------------------------------------------


def tree(root: Path) -> dict[str, object]:
    """Everything under `root` as a user would compare it: each entry's kind and bytes (or link target)."""
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir",)
            else:
                out[rel] = ("file", hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def outside_things(root: Path) -> tuple[Path, Path, dict[str, object]]:
    """A folder (with a file and a subfolder) and a file outside every workspace, and their fingerprint."""
    victim_dir = root / "victim"
    (victim_dir / "sub").mkdir(parents=True)
    (victim_dir / "precious.txt").write_bytes(b"keep me\x00\xff")
    (victim_dir / "sub" / "deeper.txt").write_text("keep me too")
    victim_file = root / "victim-file.txt"
    victim_file.write_text("a file outside")
    return victim_dir, victim_file, tree(root)


def link_everything(victim_dir: Path, victim_file: Path) -> str:
    """Shell lines that fill the agent's workspace with links pointing out of it (and a hard link)."""
    return (
        f"ln -s {victim_dir} link-dir; ln -s {victim_file} link-file; ln -s / link-root; "
        f"mkdir -p nested/deeper; ln -s {victim_dir} nested/deeper/link-dir; ln -s {victim_dir}/precious.txt nested/link-precious; "
        f"ln {victim_file} hard-link 2>/dev/null || true; ln -s ../../.. link-up; echo mine > own.txt"
    )


def run_id(cli: Cli, short: str) -> str:
    row = job(cli.store_url, cli.workspace, short)
    assert row is not None, short
    return row.id


def run_folder(cli: Cli, rid: str) -> Path:
    return cli.workspace / ".swarmkit" / "runs" / rid


# --- 1. symlinks at every cleanup ------------------------------------------------------------------


def test_no_cleanup_follows_a_link_out_of_a_workspace(cli: Cli, tmp_path: Path):
    """Each path that deletes a workspace, with the workspace full of links pointing out (made by the
    agent itself): completion, failure, cancel of a running run, and the owning host's worker sweeping
    the destroy that a cancel from another host recorded. The workspace goes; what the links point at
    stays byte-identical."""
    outside = tmp_path / "outside"
    victim_dir, victim_file, before = outside_things(outside)
    links = link_everything(victim_dir, victim_file)
    gates = tmp_path / "gates"
    done: dict[str, str] = {}
    # Completion and failure, hosted by `swarmkit run`.
    for end, tail in (("completed", "true"), ("failed", "exit 3")):
        flow = write_flow(tmp_path, end, f'name = "{end}"\n[[agents]]\nname = "links"\ncommand = "{links}; {tail}"\n')
        res = cli.run("run", str(flow), str(cli.workspace))
        assert res.returncode == (0 if end == "completed" else 1), res.stderr[-2000:]
        rid = run_id(cli, res.stdout.split()[0])
        assert job(cli.store_url, cli.workspace, rid).status == end
        done[end] = rid
    # Cancel of a running run: the agent made its links and waits.
    flow = write_flow(tmp_path, "held", f'name = "held"\n[[agents]]\nname = "links"\ncommand = "{links}; touch linked; {hold(gates, "never")}"\n')
    host = cli.start("run", str(flow), str(cli.workspace))
    try:
        rid = run_id(cli, host.stdout.readline().split()[0])
        wait_for(lambda: (run_folder(cli, rid) / "linked").exists(), what="the agent to make its links")
        assert cli.call("cancel", rid, str(cli.workspace)).returncode == 0
        host.communicate(timeout=60)
    finally:
        if host.poll() is None:
            os.killpg(host.pid, signal.SIGKILL)
            host.wait()
    assert job(cli.store_url, cli.workspace, rid).status == "cancelled"
    done["cancelled while running"] = rid
    # The owning host's sweep: hosted on "alpha", cancelled from "beta" (destroy pending), swept by alpha's worker.
    alpha, beta = {"SWARMKIT_HOST": "alpha"}, {"SWARMKIT_HOST": "beta"}
    flow = write_flow(tmp_path, "gated", f'name = "gated"\n[[agents]]\nname = "links"\ncommand = "{links}"\n[[agents]]\nname = "ship"\napprove = true\ncommand = "true"\n')
    res = cli.run("run", str(flow), str(cli.workspace), env=alpha)
    assert res.returncode == 0, res.stderr
    rid = run_id(cli, res.stdout.split()[0])
    res = cli.run("cancel", rid, str(cli.workspace), env=beta)
    assert res.returncode == 0 and "destroy pending there" in res.stdout, res.stdout + res.stderr
    assert (run_folder(cli, rid) / "link-dir").is_symlink(), "another host deleted alpha's workspace"
    worker = cli.start("worker", str(cli.workspace), env=alpha)
    try:
        wait_for(lambda: [w.state for w in workspaces(cli.store_url, cli.workspace, rid)] == ["destroyed"], what="alpha's worker to sweep the pending destroy")
    finally:
        worker.terminate()
        worker.communicate(timeout=60)
    done["swept by the owning host"] = rid
    for what, rid in done.items():
        assert not run_folder(cli, rid).exists(), f"{what}: the workspace was not destroyed"
        assert [w.state for w in workspaces(cli.store_url, cli.workspace, rid)] == ["destroyed"], what
        assert tree(outside) == before, f"{what}: something outside the workspace changed"
    assert victim_file.read_text() == "a file outside" and (victim_dir / "precious.txt").read_bytes() == b"keep me\x00\xff"


def test_a_workspace_or_runs_folder_swapped_for_a_link_is_left_and_its_target_kept(cli: Cli, tmp_path: Path):
    """A link in the workspace's place (the agent swaps its own folder for a link to a folder outside
    named like it) and a link in the runs folder's place (a folder outside holding a folder named for
    the run): completion, cancel and the owning host's sweep leave the target alone, say so, and record
    the workspace as left (kept), not destroyed.

    Used to (the runs folder case): the check resolved the runs folder through the link, found the
    run's folder "inside" it and deleted the folder outside."""
    outside = tmp_path / "outside"
    outside.mkdir()
    # 1. The agent replaces its own workspace with a link to a folder outside, then the run completes.
    flow = write_flow(
        tmp_path, "swap",
        'name = "swap"\n[[agents]]\nname = "swap"\n'
        f'command = "d=$(pwd); mkdir -p {outside}/$SWARMKIT_RUN_ID; echo keep > {outside}/$SWARMKIT_RUN_ID/precious.txt; '
        f'cd ..; mv \\"$d\\" \\"$d.moved\\"; ln -s {outside}/$SWARMKIT_RUN_ID \\"$d\\""\n',
    )
    res = cli.run("run", str(flow), str(cli.workspace))
    assert res.returncode == 0, res.stderr[-2000:]
    rid = run_id(cli, res.stdout.split()[0])
    assert (outside / rid / "precious.txt").read_text() == "keep\n", "completion deleted through a link in the workspace's place"
    assert [w.state for w in workspaces(cli.store_url, cli.workspace, rid)] == ["kept"]
    assert any("symbolic link" in e.text for e in events(cli.store_url, cli.workspace, rid) if e.kind == "workspace")
    # 2. The runs folder swapped for a link to a folder outside that holds a folder named for a parked run.
    gated = write_flow(tmp_path, "gated", 'name = "gated"\n[[agents]]\nname = "a"\ncommand = "echo a > a.txt"\n[[agents]]\nname = "ship"\napprove = true\ncommand = "true"\n')
    parked = []
    for env in ({}, {"SWARMKIT_HOST": "alpha"}):
        res = cli.run("run", str(gated), str(cli.workspace), env=env)
        assert res.returncode == 0, res.stderr
        parked.append(run_id(cli, res.stdout.split()[0]))
    runs = cli.workspace / ".swarmkit" / "runs"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for rid in parked:
        (elsewhere / rid).mkdir()
        (elsewhere / rid / "precious.txt").write_text("not the run's")
    before = tree(elsewhere)
    runs.rename(tmp_path / "runs.moved")
    runs.symlink_to(elsewhere)
    try:
        res = cli.run("cancel", parked[0], str(cli.workspace))
        assert res.returncode == 0 and "left " in res.stdout and "symbolic link" in res.stdout, res.stdout + res.stderr
        res = cli.run("cancel", parked[1], str(cli.workspace), env={"SWARMKIT_HOST": "beta"})
        assert res.returncode == 0 and "destroy pending there" in res.stdout, res.stdout + res.stderr
        worker = cli.start("worker", str(cli.workspace), env={"SWARMKIT_HOST": "alpha"})
        try:
            wait_for(lambda: [w.state for w in workspaces(cli.store_url, cli.workspace, parked[1])] == ["kept"], what="alpha's worker to judge the pending destroy")
        finally:
            worker.terminate()
            worker.communicate(timeout=60)
        assert tree(elsewhere) == before, "a cleanup deleted through a link in the runs folder's place"
        for rid in parked:
            assert job(cli.store_url, cli.workspace, rid).status == "cancelled"
            assert [w.state for w in workspaces(cli.store_url, cli.workspace, rid)] == ["kept"]
    finally:
        runs.unlink()
        (tmp_path / "runs.moved").rename(runs)
    for rid in parked:
        assert (runs / rid / "a.txt").exists(), "the real workspace is left for the operator"


# --- 3. a truncated or damaged store file ----------------------------------------------------------

ONE = 'name = "one"\n[[agents]]\nname = "only"\ncommand = "echo hi"\n'


def files_of(folder: Path) -> dict[str, str]:
    """The store folder's files (the store, its -wal, -shm and id) by name, with their sha256."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def store_with_a_wal(sqlite_url: str, workspace: Path, tmp_path: Path, lines: int = 5) -> tuple[str, str]:
    """A real store holding a completed run (in the store file) and a running one whose host was
    killed -9 mid-node (its last writes in the -wal); returns the two run ids."""
    cli = Cli(sqlite_url, workspace)
    res = cli.run("run", str(write_flow(tmp_path, "one", ONE)), str(workspace))
    assert res.returncode == 0, res.stderr
    done = run_id(cli, res.stdout.split()[0])
    gates = tmp_path / "gates"
    flow = write_flow(tmp_path, "talk", f'name = "talk"\n[[agents]]\nname = "talk"\ncommand = "i=0; while [ $i -lt {lines} ]; do echo line $i; i=$((i+1)); done; touch {gates}/talked; {hold(gates, "never")}"\n')
    host = cli.start("run", str(flow), str(workspace))
    try:
        running = run_id(cli, host.stdout.readline().split()[0])
        wait_for(lambda: (gates / "talked").exists() and len([e for e in events(sqlite_url, workspace, running) if e.kind == "log"]) == lines, what="the agent's lines in the store")
    finally:
        os.killpg(host.pid, signal.SIGKILL)
        host.wait()
    wal = workspace / ".swarmkit" / "store.db-wal"
    assert wal.exists() and wal.stat().st_size > 0, "the killed host left no WAL: nothing of the WAL is tried"
    return done, running


def cut(path: Path, how: str) -> None:
    size = path.stat().st_size
    if how == "half":
        os.truncate(path, size // 2)
    elif how == "100 bytes":
        os.truncate(path, 100)
    elif how == "0 bytes":
        os.truncate(path, 0)
    elif how == "garbage header":
        with open(path, "r+b") as f:
            f.write(b"GARBAGE-GARBAGE!")
    else:
        raise AssertionError(how)


def _store_and_its_copy(sqlite_url: str, workspace: Path, tmp_path: Path) -> tuple[str, str, Path, Path]:
    """A store with a WAL (a done run and a running one), and a copy of its files to put back between tries."""
    done, running = store_with_a_wal(sqlite_url, workspace, tmp_path)
    folder = workspace / ".swarmkit"
    base = tmp_path / "base"
    base.mkdir()
    for p in folder.iterdir():
        if p.is_file():
            shutil.copy2(p, base / p.name)
    return done, running, folder, base


def test_a_cut_short_or_garbled_store_is_refused_in_a_line_and_left_byte_identical(sqlite_url: str, workspace: Path, tmp_path: Path):
    """A SQLite store cut to half, to 100 bytes, to 0 bytes, or with a garbage header, with the -wal and
    -shm a killed host left beside it and without them: `status`, `logs`, `stop`, `run`, `run --detach`,
    `worker`, `db upgrade` and `swarmkit-console --once` each say so in one line, exit 1 or 2, print no
    traceback, and leave every file of the store folder byte-identical (`cancel` and `audit` too). (A file
    and its WAL: SQLite only.)

    Used to: with a WAL beside a cut-short store, `status` said "database disk image is malformed" and,
    closing, checkpointed the WAL into the damaged file and deleted the WAL and -shm; a 0-byte store whose
    id said a store had been there read as "no store", and `run` made a new, empty store in its place."""
    done, running, folder, base = _store_and_its_copy(sqlite_url, workspace, tmp_path)
    flow = write_flow(tmp_path, "one", ONE)
    env = env_for_children()  # read here: the in-process verbs below change this process's environment while they run
    cases = [(with_wal, how) for with_wal in (True, False) for how in ("half", "100 bytes", "0 bytes", "garbage header")]
    copies: dict[tuple[bool, str], tuple[Path, dict[str, str]]] = {}

    def verbs_for(ws: Path, url: str) -> list[tuple[str, ...]]:
        """(door, verb words...): door "swarmkit" or "console"."""
        return [
            ("swarmkit", "status", str(ws)),
            ("swarmkit", "logs", done[:8], str(ws)),
            ("swarmkit", "stop", running[:8], str(ws)),
            ("swarmkit", "cancel", running[:8], str(ws)),
            ("swarmkit", "audit", str(ws)),
            ("swarmkit", "run", str(flow), str(ws)),
            ("swarmkit", "run", "--detach", str(flow), str(ws)),
            ("swarmkit", "worker", str(ws)),
            ("swarmkit", "db", "upgrade", str(ws)),
            ("console", "--once", str(ws)),
        ]

    def damaged_copy(with_wal: bool, how: str) -> tuple[Path, str]:
        """A damaged copy of the store in a workspace of its own."""
        ws = tmp_path / f"{how.replace(' ', '-')}-{'wal' if with_wal else 'nowal'}"
        here = ws / ".swarmkit"
        here.mkdir(parents=True)
        for p in base.iterdir():
            if with_wal or not p.name.endswith(("-wal", "-shm")):
                shutil.copy2(p, here / p.name)
        cut(here / "store.db", how)
        copies[(with_wal, how)] = (here, files_of(here))
        return ws, f"sqlite:///{here / 'store.db'}"

    def check(res, what: str, here: Path, before: dict[str, str]) -> None:
        lines = [line for line in res.stderr.splitlines() if line.strip()]
        assert res.returncode in (1, 2), f"{what}: exit {res.returncode}\n{res.stdout[-500:]}\n{res.stderr[-1500:]}"
        assert not has_traceback(res.stderr), f"{what}: a traceback:\n{res.stderr[-3000:]}"
        assert len(lines) == 1, f"{what}: {len(lines)} lines for one fault:\n{res.stderr[-1500:]}"
        assert "store" in lines[0] and any(w in lines[0] for w in ("damaged", "malformed", "empty", "not a database")), f"{what}: {lines[0]}"
        assert files_of(here) == before, f"{what}: the store's files changed"

    def as_process(ws: Path, url: str, verb: tuple[str, ...]):
        argv = console_argv(url, *verb[1:]) if verb[0] == "console" else swarmkit_argv(verb[1], url, *verb[2:])
        return subprocess.run(argv, cwd=ws, env=env, capture_output=True, text=True, timeout=120)

    def in_this_process(ws: Path, url: str, verb: tuple[str, ...]):
        return console_in_process(url, *verb[1:], cwd=ws) if verb[0] == "console" else swarmkit_in_process(verb[1], url, *verb[2:], cwd=ws)

    # Every verb on every damage: 80 tries, which were 80 processes that mostly started up. A process of
    # its own adds only its start-up and its exit to the verb's main(): so each verb runs once as a real
    # process (each on another damage, every damage getting one or two; three at a time), and the other
    # 70 tries run through the same main() in this process, one after the other, never beside a process
    # on the same copy (a lock per copy). A connection an in-process verb left open would be closed (and
    # might checkpoint the WAL into the damaged file) only when collected: every copy is compared again
    # after a collection, below.
    import gc
    import threading
    from concurrent.futures import ThreadPoolExecutor

    planned = []
    locks = {case: threading.Lock() for case in cases}
    for k, (with_wal, how) in enumerate(cases):
        ws, url = damaged_copy(with_wal, how)
        verbs = verbs_for(ws, url)
        own = {i for i in range(len(verbs)) if i % len(cases) == k}
        planned.append((with_wal, how, ws, url, verbs, own))

    def what(with_wal: bool, how: str, verb: tuple[str, ...], door: str) -> str:
        return f"{how}, {'with' if with_wal else 'without'} its WAL: {door} {' '.join(verb[:3])}"

    def processes_of(with_wal: bool, how: str, ws: Path, url: str, verbs, own) -> None:
        here, before = copies[(with_wal, how)]
        with locks[(with_wal, how)]:
            for i in sorted(own):
                check(as_process(ws, url, verbs[i]), what(with_wal, how, verbs[i], "a process:"), here, before)

    with ThreadPoolExecutor(max_workers=3) as pool:
        started = [pool.submit(processes_of, *plan) for plan in planned]
        for with_wal, how, ws, url, verbs, own in planned:
            here, before = copies[(with_wal, how)]
            with locks[(with_wal, how)]:
                for i, verb in enumerate(verbs):
                    if i not in own:
                        check(in_this_process(ws, url, verb), what(with_wal, how, verb, "in-process:"), here, before)
        for f in started:
            f.result()
    gc.collect()
    for (with_wal, how), (here, before) in copies.items():
        assert files_of(here) == before, f"{how}, {'with' if with_wal else 'without'} its WAL: the store's files changed after the verbs ended"
    # The store the copies came from was never touched: the verbs ran on the copies.
    assert files_of(folder) == files_of(base)
    # Put back whole, the store works, with the runs it held.
    for p in folder.iterdir():
        if p.is_file():
            p.unlink()
    for p in base.iterdir():
        shutil.copy2(p, folder / p.name)
    res = subprocess.run(swarmkit_argv("status", sqlite_url, "--all", str(workspace)), cwd=workspace, env=env_for_children(), capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and done[:8] in res.stdout and running[:8] in res.stdout, res.stdout + res.stderr


def test_a_torn_wal_is_crash_recovery_and_the_store_works(sqlite_url: str, workspace: Path, tmp_path: Path):
    """The -wal (not the store) cut to half, to 100 bytes, to 0 bytes, or garbled: that is what a crash
    mid-write leaves, and SQLite recovers from it (frames after the first bad checksum are dropped). Each
    verb works on it, the runs the store file holds are all there, and the store passes an integrity check."""
    from tests.reliability import integrity_check

    done, running, folder, base = _store_and_its_copy(sqlite_url, workspace, tmp_path)
    flow = write_flow(tmp_path, "one", ONE)
    for how in ("half", "100 bytes", "0 bytes", "garbage header"):
        for p in folder.iterdir():
            if p.is_file():
                p.unlink()
        for p in base.iterdir():
            shutil.copy2(p, folder / p.name)
        cut(folder / "store.db-wal", how)
        res = subprocess.run(swarmkit_argv("status", sqlite_url, "--all", str(workspace)), cwd=workspace, env=env_for_children(), capture_output=True, text=True, timeout=60)
        assert res.returncode == 0 and done[:8] in res.stdout, f"{how}: {res.stdout}{res.stderr}"
        res = subprocess.run(swarmkit_argv("run", sqlite_url, str(flow), str(workspace)), cwd=workspace, env=env_for_children(), capture_output=True, text=True, timeout=60)
        assert res.returncode == 0 and "completed" in res.stdout, f"{how}: {res.stdout}{res.stderr}"
        assert integrity_check(folder / "store.db") == "ok", how


# --- 2. names and ids that look like paths or hold terminal escapes -------------------------------

ESC = "\x1b"
EVIL_TEXT = [
    f"{ESC}[2J{ESC}[H cleared",
    f"{ESC}]8;;https://evil.example/{ESC}\\click-me{ESC}]8;;{ESC}\\",
    f"{ESC}]0;title\x07 bell\x07",
    "\x9b31m C1 CSI \x9d0;osc\x9c",
    "../../../../etc/passwd",
    "/etc/shadow",
]
EVIL_ACTOR = f"../../mallory {ESC}]52;c;cHduZWQ=\x07 {ESC}[2J \x9b31m\nforged-line root@host"
EVIL_REFS = ["../../x", "/etc/passwd", "../" * 10, f"{ESC}[2J", f"{ESC}]8;;http://e{ESC}\\x{ESC}]8;;{ESC}\\", "a\x9bb", "\x07", "a\nb", ESC]


def _raw_hazards(data: bytes) -> list[str]:
    """Bytes a terminal acts on: ESC, C1, BEL and the other C0 but tab and line breaks, bidi controls, and
    bytes that are not UTF-8 (a raw 0x9b is a C1 CSI to a terminal that reads Latin-1)."""
    return terminal_hazards(data)


def paths_under(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("*")}


def test_names_ids_and_actors_that_look_like_paths_or_escapes_stay_inert(cli: Cli, tmp_path: Path):
    """A flow named `../../../escape`, nodes named `../../x`, `/etc/passwd-node` and a name with a line
    break, log lines full of CSI, OSC 8 links, OSC titles, BEL and C1 bytes, inputs whose key and value
    are paths, an actor full of escapes, and run ids given to every verb that are paths or escapes.
    Nothing is written outside `<workspace>/.swarmkit/` (a run's folder is its id, nothing else), and
    not one raw ESC, C1 or BEL byte reaches stdout or stderr of `run`, `status` (table, wide, JSON, one
    run), `logs` (text, JSON, follow), `audit` (table, JSON, one run) or the act verbs; the JSON keeps
    the text exactly. (A name the flow loader refuses is refused in a line, exit 2: also inert.)"""
    flows = tmp_path / "flows"
    flows.mkdir()
    script = flows / "talk.sh"
    script.write_bytes(b"".join(b"printf '%s\\n' '" + t.encode("utf-8") + b"'\n" for t in EVIL_TEXT) + b"printf 'raw C1 \\233 and \\302\\233\\n'\n")
    body = (
        'name = "../../../escape"\n'
        f'[[agents]]\nname = "../../x"\ncommand = "sh {script}"\n'
        '[[agents]]\nname = "/etc/passwd-node"\ncall = "evilmod:talk"\n'
        '[[agents]]\nname = "line\\nbreak"\ncommand = "true"\n'
        '[[agents]]\nname = "gate"\napprove = true\ncommand = "true"\n'
    )
    (flows / "evilmod.py").write_text(
        "import json\n"
        f"TEXT = json.loads({json.dumps(json.dumps(EVIL_TEXT))})\n"
        "def talk(ctx):\n"
        "    for t in TEXT:\n"
        "        ctx.log(t)\n"
        "    return {'paths': TEXT}\n"
    )
    flow = write_flow(flows, "evil", body)
    before = paths_under(tmp_path)
    env = {"SWARMKIT_ACTOR": EVIL_ACTOR}
    # Read once, here: the in-process verbs below change this process's environment while they run,
    # and the child processes started beside them must not see that.
    evil_env = env_for_children(env)

    def sk(*args: str, ok: tuple[int, ...] = (0,)) -> bytes:
        proc = subprocess.run(
            swarmkit_argv(args[0], cli.store_url, *args[1:]), cwd=cli.workspace, env=evil_env, capture_output=True, timeout=120
        )
        out = proc.stdout + proc.stderr
        assert proc.returncode in ok, f"{args[:3]}: exit {proc.returncode}\n{out[-2000:]!r}"
        assert not has_traceback(out.decode("utf-8", "replace")), out[-3000:]
        hazards = _raw_hazards(out)
        assert not hazards, f"swarmkit {' '.join(a.encode('unicode_escape').decode() for a in args[:3])} let these reach the terminal: {hazards[:5]}"
        return proc.stdout

    out = sk("run", str(flow), str(cli.workspace), "--input", "../../key=/etc/passwd", "--input", "/abs/key=../../v", ok=(0, 2))
    if not out:
        pytest.skip("the flow loader refuses these names (inertly): nothing more to show")
    rid = run_id(cli, out.split()[0].decode())
    assert job(cli.store_url, cli.workspace, rid).status == "deferred"
    def ik(*args: str, ok: tuple[int, ...] = (0,)) -> str:
        """As sk, through the same main() in this process: for the acts after the first, whose words are
        what is checked (the first, a real process, shows how a process writes them)."""
        res = cli.call(*args, env=env)
        said = res.stdout + res.stderr
        assert res.returncode in ok, f"{args[:3]}: exit {res.returncode}\n{said[-2000:]!r}"
        assert not has_traceback(said), said[-3000:]
        hazards = _raw_hazards(said.encode("utf-8", "surrogateescape"))
        assert not hazards, f"swarmkit {' '.join(a.encode('unicode_escape').decode() for a in args[:3])} let these reach the terminal: {hazards[:5]}"
        return res.stdout

    # The act verbs, with the evil actor, on a real run: approve, stop (queued: at once), stop again (its
    # words quote the earlier actor), resume, stop again.
    sk("approve", rid[:10], str(cli.workspace))
    for act in (("stop",), ("stop",), ("resume",), ("stop",)):
        ik(act[0], rid[:10], str(cli.workspace))
    # Every read surface and the usage errors only read the store: they run side by side, four at a
    # time (each is a process that mostly starts up), each checked as sk checks one, while this process
    # tries the ids that are paths or escapes in-process (below).
    from concurrent.futures import ThreadPoolExecutor

    surfaces = [
        ("status", str(cli.workspace)), ("status", "--all", "-o", "wide", str(cli.workspace)), ("status", rid[:8], str(cli.workspace)),
        ("logs", rid[:8], str(cli.workspace)), ("logs", rid[:8], "--timestamps", str(cli.workspace)),
        ("audit", str(cli.workspace)), ("audit", rid[:8], str(cli.workspace)),
        ("status", rid[:8], "-o", "json", str(cli.workspace)), ("status", "--all", "-o", "json", str(cli.workspace)),
        ("logs", rid[:8], "-o", "json", str(cli.workspace)), ("audit", "-o", "json", str(cli.workspace)),
    ]
    # A word given that is no option, and ambiguous options: argparse quotes them (used to: raw).
    usage_errors = [("status", f"--{ESC}[2J", str(cli.workspace)), ("logs", rid[:8], f"--x{ESC}]0;t\x07", str(cli.workspace)), ("status", f"--s={ESC}[2J")]
    with ThreadPoolExecutor(max_workers=4) as pool:
        looked = [pool.submit(sk, *s) for s in surfaces]
        refused = [pool.submit(sk, *words, ok=(2,)) for words in usage_errors]
        console = pool.submit(
            subprocess.run, console_argv(cli.store_url, "--once", f"--{ESC}[2J\x9b"), cwd=cli.workspace, env=evil_env, capture_output=True, timeout=60
        )
        # Ids that are paths or escapes, given to every verb: "no run matches", inertly, exit 2.
        for ref in EVIL_REFS:
            for verb in (("status",), ("logs",), ("audit",), ("stop",), ("stop", "--now"), ("cancel",), ("cancel", "--keep"), ("resume",), ("approve",), ("status", "-o", "json"), ("logs", "-f")):
                res = cli.call(verb[0], ref, str(cli.workspace), *verb[1:])
                said = res.stdout + res.stderr
                assert res.returncode == 2, (verb, ref, res.returncode, said[-500:])
                assert not has_traceback(said) and not _raw_hazards(said.encode("utf-8", "surrogateescape")), (verb, ref, said[-500:])
        seen = {s: f.result() for s, f in zip(surfaces, looked)}
        for f in refused:
            f.result()
        proc = console.result()
    assert proc.returncode == 2 and not _raw_hazards(proc.stdout + proc.stderr), proc.stderr
    view = json.loads(seen[("status", rid[:8], "-o", "json", str(cli.workspace))])
    assert view["flow"] == "../../../escape" and view["inputs"] == {"../../key": "/etc/passwd", "/abs/key": "../../v"}
    json.loads(seen[("status", "--all", "-o", "json", str(cli.workspace))])
    log_json = seen[("logs", rid[:8], "-o", "json", str(cli.workspace))].decode()
    texts = [json.loads(line).get("text") for line in log_json.splitlines() if line.strip().startswith("{")]
    if not texts:  # one JSON document rather than one per line
        doc = json.loads(log_json)
        texts = [e.get("text") for e in (doc.get("events") if isinstance(doc, dict) else doc)]
    for t in EVIL_TEXT:
        assert t in texts, f"the line {t!r} was not kept exactly in the JSON"
    acts = json.loads(seen[("audit", "-o", "json", str(cli.workspace))])["audit"]
    assert {a["actor"] for a in acts if a["action"] != "run.submitted"} == {EVIL_ACTOR}, "the actor is recorded as given"
    # Run the rest: a worker hosts it to its end. Nothing was made outside the store's folder, and each
    # run folder is named for its run.
    ik("resume", rid[:10], str(cli.workspace))
    worker = cli.start("worker", str(cli.workspace), env=env)
    try:
        wait_for(lambda: job(cli.store_url, cli.workspace, rid).status == "completed", what="the run to complete")
    finally:
        worker.terminate()
        wout, werr = worker.communicate(timeout=60)
    assert not _raw_hazards((wout + werr).encode("utf-8", "surrogateescape")), (wout + werr)[-2000:]
    sk("logs", rid[:8], "-f", str(cli.workspace))
    store_folder = str(cli.workspace / ".swarmkit")
    made = sorted(p for p in paths_under(tmp_path) - before if p != store_folder and not p.startswith(store_folder + os.sep))
    assert not made, f"written outside the store's folder: {made[:10]}"
    runs = cli.workspace / ".swarmkit" / "runs"
    assert all(len(p.name) == 32 and all(c in "0123456789abcdef" for c in p.name) for p in runs.iterdir()), list(runs.iterdir())


def test_the_api_answers_ids_that_are_paths_or_escapes_with_a_clean_404(cli: Cli, serving):
    """`GET /jobs/{id}`, its events, and each act, with ids that are paths (percent-encoded) or hold
    escapes: 404 (or 422), never a 5xx, and no raw ESC or C1 byte in the body. (Flow names with `../`
    or `/` are test_serve.py's test_routes_answer_with_their_codes.)"""
    from urllib.parse import quote

    serve, _folder, _gates = serving
    s = serve()
    for ref in EVIL_REFS:
        path = quote(ref, safe="")
        for method, route in (("GET", ""), ("GET", "/events"), ("POST", "/stop"), ("POST", "/cancel"), ("POST", "/resume"), ("POST", "/approve")):
            resp = s.client.request(method, f"/jobs/{path}{route}", json={} if method == "POST" else None)
            assert resp.status_code in (404, 422), (ref, route, resp.status_code, resp.text[:300])
            assert not _raw_hazards(resp.content), (ref, route, resp.content[:300])
    assert s.proc.poll() is None



def test_a_checkpoint_cut_off_mid_way_is_not_taken_for_a_damaged_store(sqlite_url: str, workspace: Path, tmp_path: Path):
    """What a checkpoint cut off by a full disk or a kill leaves: the store file's first page (its header,
    counting the pages the store now has) already written from the WAL, the pages after the file's end
    not yet. The WAL still holds them, so the store is whole: every verb opens it (SQLite finishes the
    checkpoint) and it passes an integrity check. (The damage check of the test above must not refuse it.)"""
    from tests.reliability import integrity_check

    done, running = store_with_a_wal(sqlite_url, workspace, tmp_path, lines=3000)
    db = workspace / ".swarmkit" / "store.db"
    wal = Path(f"{db}-wal").read_bytes()
    page = int.from_bytes(wal[8:12], "big")
    salts, at, first_page = wal[16:24], 32, None
    while at + 24 + page <= len(wal) and wal[at + 8 : at + 16] == salts:
        if int.from_bytes(wal[at : at + 4], "big") == 1:
            first_page = wal[at + 24 : at + 24 + page]
        at += 24 + page
    assert first_page is not None, "the WAL holds no new first page: the store did not grow"
    with open(db, "r+b") as f:
        f.write(first_page)
    pages = int.from_bytes(first_page[28:32], "big")
    assert pages * page > db.stat().st_size, "the header does not count more pages than the file holds: nothing cut off"
    res = subprocess.run(swarmkit_argv("status", sqlite_url, "--all", str(workspace)), cwd=workspace, env=env_for_children(), capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and done[:8] in res.stdout and running[:8] in res.stdout, res.stdout + res.stderr
    assert integrity_check(db) == "ok"


# --- 4. kill -9 of `swarmkit db upgrade` in the middle of a migration ------------------------------

# Put first on the PYTHONPATH of the `db upgrade` it is meant for: when that process is about to record
# revision SWARMKIT_TEST_HALT_AT in alembic_version (the migration's DDL done, inside its transaction),
# it says so in SWARMKIT_TEST_HALT_MARK and waits there for the test's SIGKILL.
HALT_HOOK = '''
import os
_target = os.environ.get("SWARMKIT_TEST_HALT_AT")
if _target:
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    def _halt(conn, cursor, statement, parameters, context, executemany):
        s = statement.lstrip().upper()
        if "ALEMBIC_VERSION" in s and s.startswith(("UPDATE", "INSERT")) and ("'" + _target) in statement:
            with open(os.environ["SWARMKIT_TEST_HALT_MARK"] + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(os.environ["SWARMKIT_TEST_HALT_MARK"] + ".tmp", os.environ["SWARMKIT_TEST_HALT_MARK"])
            import signal
            while True:
                signal.pause()

    event.listen(Engine, "before_cursor_execute", _halt)
'''


def upgrade_killed_at(cli: Cli, tmp_path: Path, revision: str) -> None:
    """`swarmkit db upgrade`, SIGKILLed while it migrates, the moment it is about to record `revision`."""
    hook = tmp_path / f"halt-{revision}"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HALT_HOOK)
    mark = tmp_path / f"halted-{revision}"
    env = env_for_children({"SWARMKIT_TEST_HALT_AT": revision, "SWARMKIT_TEST_HALT_MARK": str(mark)})
    env["PYTHONPATH"] = str(hook) + os.pathsep + env["PYTHONPATH"]
    proc = subprocess.Popen(
        swarmkit_argv("db", cli.store_url, "upgrade", str(cli.workspace)), cwd=cli.workspace, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )
    try:
        wait_for(lambda: mark.exists() or proc.poll() is not None, timeout=120, what=f"db upgrade to reach revision {revision} mid-migration")
        assert mark.exists(), f"db upgrade ended (exit {proc.returncode}) before reaching {revision}: {proc.communicate()}"
        assert int(mark.read_text()) == proc.pid
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def revision_of(cli: Cli) -> str | None:
    try:
        rows = sql(cli.store_url, cli.workspace, "SELECT version_num FROM alembic_version")
    except Exception:
        return None  # no table: nothing was committed
    return rows[0][0] if rows else None


def test_kill_9_of_db_upgrade_mid_migration_is_finished_by_the_rerun(cli: Cli, tmp_path: Path):
    """`swarmkit db upgrade` killed -9 in the middle of its migration, twice: on a fresh store (a fresh
    PostgreSQL schema, a new SQLite file), after migration 0002 of 0001..head; and on a store of an older
    revision (0002, holding a completed run), after migration 0003. Each time the migration is one
    transaction: nothing of it is left (the revision is what it was), the rerun finishes it, and the
    store works: the old run is there and a new one completes."""
    from swarmkit.store.schema import head_revision

    from .test_schema_and_open import _downgrade_to_0002

    flow = write_flow(tmp_path, "one", ONE)
    # A fresh store, killed between migrations 0002 and 0003 of its first upgrade.
    upgrade_killed_at(cli, tmp_path, "0003")
    assert revision_of(cli) is None, "a killed first migration left a revision"
    res = cli.run("db", "upgrade", str(cli.workspace))
    assert res.returncode == 0 and not has_traceback(res.stderr), res.stdout + res.stderr
    assert revision_of(cli) == head_revision()
    res = cli.run("run", str(flow), str(cli.workspace))
    assert res.returncode == 0 and "completed" in res.stdout, res.stdout + res.stderr
    done = run_id(cli, res.stdout.split()[0])
    # The store as an older release left it, killed between migrations 0003 and 0004 of its upgrade.
    _downgrade_to_0002(cli.store_url, cli.workspace)
    assert revision_of(cli) == "0002"
    upgrade_killed_at(cli, tmp_path, "0004")
    assert revision_of(cli) == "0002", "a killed migration left part of itself"
    res = cli.run("db", "status", "--json", str(cli.workspace))
    assert res.returncode == 0 and json.loads(res.stdout)["current"] == "0002", res.stdout + res.stderr
    res = cli.run("db", "upgrade", str(cli.workspace))
    assert res.returncode == 0 and f"from schema revision 0002 to {head_revision()}" in res.stdout, res.stdout + res.stderr
    assert revision_of(cli) == head_revision()
    res = cli.run("status", done[:8], "--json", str(cli.workspace))
    assert res.returncode == 0 and json.loads(res.stdout)["status"] == "completed", res.stdout + res.stderr
    res = cli.run("run", str(flow), str(cli.workspace))
    assert res.returncode == 0 and "completed" in res.stdout, res.stdout + res.stderr
    if cli.store_url.startswith("sqlite"):
        from tests.reliability import integrity_check

        assert integrity_check(cli.workspace / ".swarmkit" / "store.db") == "ok"


# --- 6. a timed-out or cancelled agent whose child ignores SIGTERM ----------------------------------

# A child that ignores SIGINT and SIGTERM, in the agent's process group and (setsid) in a session of its
# own; each records its pid and start time (field 22 of /proc/PID/stat), so a reused pid is never taken
# for it, then becomes `sleep 1000` (SIG_IGN survives exec).
STUBBORN = "trap '' TERM INT; echo \"$$ $(cut -d' ' -f22 /proc/$$/stat)\" >> {pids}; exec sleep 1000"


def _alive(pid: int, start: str) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[0] not in ("Z", "X") and fields[19] == start


def _recorded(pids: Path) -> list[tuple[int, str]]:
    if not pids.exists():
        return []
    out = []
    for line in pids.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit():
            out.append((int(parts[0]), parts[1]))
    return out


@pytest.fixture
def stubborn_pids(tmp_path: Path):
    """The ledger of stubborn children; whatever of them the product left alive is killed afterwards."""
    pids = tmp_path / "pids"
    yield pids
    for pid, start in _recorded(pids):
        if _alive(pid, start):
            os.kill(pid, signal.SIGKILL)


def _sq(text: str) -> str:
    """`text` as one single-quoted shell word."""
    return "'" + text.replace("'", "'\\''") + "'"


def _stubborn_flow(tmp_path: Path, pids: Path, kind: str, timeout: str | None) -> Path:
    line = STUBBORN.format(pids=pids)
    (tmp_path / "stubbornmod.py").write_text(
        "import subprocess, time\n"
        "def go(ctx):\n"
        f"    subprocess.Popen(['sh', '-c', {line!r}])\n"
        f"    subprocess.Popen(['setsid', 'sh', '-c', {line!r}])\n"
        "    time.sleep(1000)\n"
    )
    if kind == "command":
        (tmp_path / "stubborn.sh").write_text(f"sh -c {_sq(line)} &\nsetsid sh -c {_sq(line)} &\nsleep 1000\n")
        how = f'command = "sh {tmp_path}/stubborn.sh"'
    else:
        how = 'call = "stubbornmod:go"'
    limit = f'timeout = "{timeout}"\n' if timeout else ""
    return write_flow(tmp_path, f"stubborn-{kind}", f'name = "stubborn"\n[[agents]]\nname = "stubborn"\n{limit}{how}\n')


@pytest.mark.parametrize("kind", ["command", "sync-call"])
@pytest.mark.parametrize("end", ["cancel", "timeout"])
def test_an_agents_child_that_ignores_sigterm_is_gone_within_the_graces(cli: Cli, tmp_path: Path, stubborn_pids: Path, kind: str, end: str):
    """A command agent, or a sync call agent, starts two children that ignore SIGTERM and SIGINT (one in
    its process group, one in a session of its own), then waits. Cancelled, or past its node timeout, the
    run ends (cancelled, or failed naming the timeout) and both children are dead within the interrupt
    grace plus the term grace (asserted with 3x that, from the cancel or from the timeout's moment).
    (tests/test_containment.py covers strays a command leaves when it exits, and a cancelled sync call
    agent itself.)"""
    timeout_s = 1.0
    flow = _stubborn_flow(tmp_path, stubborn_pids, kind, f"{timeout_s:g}s" if end == "timeout" else None)
    graces = INTERRUPT_GRACE_S + TERM_GRACE_S
    host = cli.start("run", str(flow), str(cli.workspace))
    try:
        rid = run_id(cli, host.stdout.readline().split()[0])
        wait_for(lambda: len(_recorded(stubborn_pids)) == 2, what="both stubborn children to start")
        children = _recorded(stubborn_pids)
        t0 = time.monotonic()
        if end == "cancel":
            res = cli.call("cancel", rid, str(cli.workspace))
            assert res.returncode == 0, res.stdout + res.stderr
            bound = 3 * graces
        else:
            bound = timeout_s + 3 * graces  # from the children's start, which is about the node's
        wait_for(lambda: not any(_alive(p, s) for p, s in children), timeout=bound, interval=0.02,
                 what=f"the stubborn children to be gone ({end}; graces {graces:g}s)")
        took = time.monotonic() - t0
        out, errs = host.communicate(timeout=60)
    finally:
        if host.poll() is None:
            os.killpg(host.pid, signal.SIGKILL)
            host.wait()
    row = job(cli.store_url, cli.workspace, rid)
    if end == "cancel":
        assert row.status == "cancelled", (row.status, row.error)
    else:
        assert row.status == "failed" and "timed out" in (row.error or ""), (row.status, row.error)
    assert not has_traceback(errs), errs[-3000:]
    print(f"{kind} {end}: children gone {took:.2f}s after the {end}")


# --- 5. a disk that fills while a run writes its logs ------------------------------------------------


def _need(why: str | None) -> None:
    """Skip for a missing capability, except under CI (CI set), where it fails the test."""
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {why}")
        pytest.skip(why)


def _tmpfs(folder: Path, size: str) -> None:
    _need(try_mount(["-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(folder)]))


@pytest.fixture(params=["sqlite", "postgresql"])
def small_disk(request, tmp_path: Path):
    """(store URL, workspace, the folder whose file system the store writes to) with that file system a
    small tmpfs: SQLite, the workspace and its store on an 8 MB tmpfs; PostgreSQL, a server of the test's
    own (tests/pg_instance.py; the shared one is never touched) whose data folder is an 80 MB tmpfs.
    Unmounted and removed afterwards."""
    if request.param == "sqlite":
        ws = tmp_path / "small"
        ws.mkdir()
        _tmpfs(ws, "8m")
        try:
            yield f"sqlite:///{ws}/.swarmkit/store.db", ws, ws
        finally:
            umount(ws)
        return
    from .pg_instance import PgInstance, pg_bin

    _need(None if pg_bin() else "no initdb/pg_ctl here for a PostgreSQL server of the test's own")
    inst = PgInstance()
    inst.data.mkdir()
    try:
        _tmpfs(inst.data, "80m")
        if os.geteuid() == 0:
            shutil.chown(inst.data, "postgres")  # PostgreSQL runs as postgres (see PgInstance)
        inst.start()
        ws = tmp_path / "ws"
        ws.mkdir()
        yield inst.url, ws, inst.data
    finally:
        try:
            inst._ctl("stop", "-m", "immediate")
        except Exception:
            pass
        umount(inst.data)
        inst.stop()


def _fill(folder: Path, leave_kib: int) -> Path:
    """A file that takes all the free space of `folder`'s file system but `leave_kib` KiB."""
    st = os.statvfs(folder)
    left = max(0, st.f_bavail * st.f_frsize - leave_kib * 1024)
    filler = folder / "filler"
    with open(filler, "wb") as f:
        while left > 0:
            n = min(left, 1 << 20)
            f.write(b"\0" * n)
            left -= n
    return filler


def test_a_disk_that_fills_while_a_run_logs_fails_it_clearly_keeps_its_work_and_it_resumes(tmp_path: Path, small_disk: tuple[str, Path, Path]):
    """The store's disk (SQLite: the workspace and its store on an 8 MB tmpfs; PostgreSQL: its server's
    data folder on an 80 MB tmpfs) filled but for a little; a run's first node records a mark and
    completes, its second prints 12,000 lines. The disk fills under the second: the host says so
    ("no space left", "disk is full"), no traceback. Space comes back (what the test waited for: that
    message): either the host rode it out (the lines waited in memory) and the run completes, or its
    lease had lapsed, it exited 1 in a few lines, and the run reads lost (resumable, never faulted:
    nobody's fault but the disk's) and completes resumed. Either way from its checkpoint: the first
    node ran once, and every line of the second is in the store; an earlier run is intact and a SQLite
    store whole (not taken for a damaged one: its WAL holds what a cut-off checkpoint did not write).
    (tests/test_bad_input.py covers a SQLite store's disk filling; this adds PostgreSQL and the recovery.)"""
    from tests.reliability import integrity_check

    url, ws, disk = small_disk
    cli = Cli(url, ws)
    marks = tmp_path / "marks"
    res = cli.run("run", str(write_flow(tmp_path, "one", ONE)), str(ws))
    assert res.returncode == 0, res.stderr
    earlier = run_id(cli, res.stdout.split()[0])
    talky = write_flow(
        tmp_path, "talky",
        f'name = "talky"\n[[agents]]\nname = "first"\ncommand = "echo first >> {marks}; echo first"\n'
        '[[agents]]\nname = "talk"\ncommand = "i=0; while [ $i -lt 12000 ]; do echo line $i padding-padding-padding-padding-padding; i=$((i+1)); done"\n'
        '[[agents]]\nname = "last"\ncommand = "echo last"\n',
    )
    filler = _fill(disk, leave_kib=600 if url.startswith("sqlite") else 500)
    said = tmp_path / "run.log"
    host = cli.start("run", str(talky), str(ws), log=said)
    try:
        wait_for(lambda: any(w in said.read_text().lower() for w in ("no space left", "disk is full")) or host.poll() is not None,
                 timeout=120, what="the host to say the disk is full")
        text = said.read_text()
        assert any(w in text.lower() for w in ("no space left", "disk is full")), text[-3000:]
        assert "writing events failed" in text, f"the disk filled before the run wrote its logs:\n{text[-3000:]}"
        assert not has_traceback(text), text[-3000:]
        rid = run_id(cli, text.split()[0])
        # Space comes back. The host either rides it out (the lines waited in memory, the run goes on) or
        # had let its lease lapse (it exits 1, the run reads lost, resumable).
        filler.unlink()
        host.wait(timeout=180)
    finally:
        if host.poll() is None:
            os.killpg(host.pid, signal.SIGKILL)
            host.wait()
    text = said.read_text()
    assert not has_traceback(text), text[-3000:]
    if url.startswith("sqlite"):
        assert integrity_check(ws / ".swarmkit" / "store.db") == "ok"
    assert job(url, ws, earlier).status == "completed"
    if host.returncode != 0:
        assert len([line for line in text.splitlines() if line.strip() and " | " not in line and not line.startswith(rid[:8])]) <= 4, text[-3000:]

        def looked() -> str:
            shown = cli.run("status", rid, "--json", str(ws))
            assert shown.returncode == 0 and not has_traceback(shown.stderr), shown.stderr
            return json.loads(shown.stdout)["status"]

        wait_for(lambda: looked() == "lost", what="the run that hit the full disk to read lost once its lease passed")
        res = cli.run("run", "--resume", rid, str(ws), timeout=180)
        assert res.returncode == 0, res.stdout[-500:] + res.stderr[-1500:]
    assert job(url, ws, rid).status == "completed"
    assert marks.read_text() == "first\n", "the first node, checkpointed before the disk filled, ran again"
    texts = [e.text for e in events(url, ws, rid) if e.kind == "log" and e.node == "talk"]
    assert "line 11999 padding-padding-padding-padding-padding" in texts
    if url.startswith("sqlite"):
        assert integrity_check(ws / ".swarmkit" / "store.db") == "ok"


def test_an_empty_file_with_no_trace_of_a_store_is_where_a_new_store_is_made(tmp_path: Path):
    """`touch store.db` (no id beside it, no WAL): not a damaged store but no store yet; `status` says
    so (exit 2) and `run` makes a store in it. The same empty file beside a WAL is a store cut to
    nothing, and is refused like the cases above."""
    ws = tmp_path / "ws"
    (ws / ".swarmkit").mkdir(parents=True)
    db = ws / ".swarmkit" / "store.db"
    db.touch()
    url = f"sqlite:///{db}"
    env = env_for_children()
    res = subprocess.run(swarmkit_argv("status", url, str(ws)), cwd=ws, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "no store at" in res.stderr, res.stderr
    res = subprocess.run(swarmkit_argv("run", url, str(write_flow(tmp_path, "one", ONE)), str(ws)), cwd=ws, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "completed" in res.stdout, res.stdout + res.stderr
    other = tmp_path / "other"
    (other / ".swarmkit").mkdir(parents=True)
    (other / ".swarmkit" / "store.db").touch()
    (other / ".swarmkit" / "store.db-wal").write_bytes(b"\x37\x7f\x06\x82" + b"\0" * 4000)
    before = files_of(other / ".swarmkit")
    res = subprocess.run(swarmkit_argv("run", f"sqlite:///{other}/.swarmkit/store.db", str(tmp_path / "one.toml"), str(other)), cwd=other, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "is empty (0 bytes)" in res.stderr and not has_traceback(res.stderr), res.stderr
    assert files_of(other / ".swarmkit") == before


def test_checking_a_store_never_drops_this_processs_own_locks(tmp_path: Path):
    """POSIX locks belong to the process: closing any descriptor of a file drops all of them. The damage
    check reads the store and its -shm without SQLite, so it runs once per file and process, before
    the process opens it; run again while a connection of this process reads, it let another process
    truncate the WAL under that reader (under load a console's act was written, then lost, and its
    polls read "disk I/O error")."""
    import sqlite3

    from swarmkit.store import identity
    from swarmkit.store.store_location import resolve_store

    db = tmp_path / "store.db"
    loc = resolve_store(str(db), tmp_path)
    identity.check_whole(loc)  # as a process's first open does, before it holds any lock
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE t (x)")
    writer.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(50)])
    reader = sqlite3.connect(db, isolation_level=None)
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM t").fetchone() == (50,)
    writer.execute("INSERT INTO t VALUES (50)")  # a frame the reader's snapshot does not hold
    # A file that looks cut short (as one mid-checkpoint does under load), so that the check looks at the
    # -shm's locks; made by another process, since this one's own open and close would drop its locks.
    grow = "import sys; open(sys.argv[1], 'ab').write(bytes(2 * 65536 + 100))"  # pages in neither the file's count nor the WAL
    subprocess.run([os.sys.executable, "-c", grow, str(db)], timeout=60, check=True)
    checkpoint = "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)').fetchone()[0])"

    def blocked() -> bool:
        out = subprocess.run([os.sys.executable, "-c", checkpoint, str(db)], capture_output=True, text=True, timeout=60, check=True).stdout
        return out.strip() == "1"  # busy: a reader of this process still holds its place in the WAL

    assert blocked(), "the reader's lock does not hold even before the check"
    try:
        identity.check_whole(loc)  # another Store.open in this process, as a console's act makes
    except identity.StoreDamaged:
        pass  # what it says of the grown file is not the point: what it did to this process's locks is
    assert blocked(), "the check dropped this process's locks: another process could truncate the WAL under its reader"
    reader.execute("COMMIT")
