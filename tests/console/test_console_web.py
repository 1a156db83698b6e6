"""`swarmkit-console serve`: the console in a browser, through textual-serve.

A real `swarmkit-console serve` subprocess on a free loopback port, on a real
SQLite store with a run in it, driven by aiohttp (textual-serve's own HTTP
stack) as the browser: the page, its websocket and the console session behind
it (textual-serve's protocol: the terminal's output arrives as binary frames,
keys go in as `["stdin", KEYS]`), read-only against --allow-acts, and the
guard (loopback only without a token; 401/403 without the right one).
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import psutil
import pytest
from console_helpers import init_store, job_of, kill_group, submit

from swarmkit.console.cli import main
from tests.conftest import await_for, child_env, write_flow

pytestmark = pytest.mark.timeout(60)

TOKEN = "web-console-test-token-0123456789"
FLOW_NAME = "browser-visible-flow"
# CSI and OSC sequences, and any other two-byte escape: what is left is the text on the screen.
ESCAPES = re.compile(r"\x1b\[[0-9;?<>=!]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "swarmkit.console.cli", "serve", *args]


class Served:
    def __init__(self, proc: subprocess.Popen, port: int) -> None:
        self.proc = proc
        self.port = port
        self.base = f"http://127.0.0.1:{port}"

    def consoles(self) -> list[psutil.Process]:
        """The console sessions textual-serve started (its children, not the shell between)."""
        out = []
        for child in psutil.Process(self.proc.pid).children(recursive=True):
            try:
                if "swarmkit.console.cli" in child.cmdline():
                    out.append(child)
            except psutil.Error:
                continue
        return out

    def console_cmdlines(self) -> list[list[str]]:
        out = []
        for proc in self.consoles():
            try:
                out.append(proc.cmdline())
            except psutil.Error:
                continue
        return out


@pytest.fixture
async def serve(workspace: Path, sqlite_url: str) -> AsyncIterator:
    """Starts `swarmkit-console serve` on the test's store, waits until it answers; all are killed at teardown."""
    procs: list[subprocess.Popen] = []

    async def start(*args: str, host: str = "127.0.0.1", env: dict[str, str] | None = None) -> Served:
        port = free_port()
        argv = serve_argv("--store", sqlite_url, "--host", host, "--port", str(port), "--poll", "0.2", *args, str(workspace))
        proc = subprocess.Popen(
            argv, cwd=workspace, env=child_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        procs.append(proc)
        served = Served(proc, port)

        async def answers() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"serve exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
            try:
                async with aiohttp.ClientSession() as s, s.get(served.base + "/static/css/xterm.css") as r:
                    return r.status > 0
            except aiohttp.ClientConnectionError:
                return False

        await await_for(answers, timeout=20, interval=0.1, what="serve to answer")
        return served

    yield start
    for proc in procs:
        kill_group(proc)


@pytest.fixture
async def queued_run(sqlite_url: str, workspace: Path) -> str:
    await init_store(sqlite_url, workspace)
    flow = write_flow(workspace, "visible", f"""
        name = "{FLOW_NAME}"
        [[agents]]
        name = "a"
        command = "true"
    """)
    (run_id,) = await submit(sqlite_url, workspace, flow)
    return run_id


class Session:
    """One browser session: the websocket, and the screen text it has brought so far."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.raw = b""

    def text(self) -> str:
        return ESCAPES.sub("", self.raw.decode("utf-8", "replace"))

    async def wait_for_text(self, needle: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.text():
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{needle!r} never reached the browser; the screen so far ends:\n{self.text()[-2000:]}")
            try:
                msg = await self.ws.receive(timeout=left)
            except TimeoutError:
                continue
            if msg.type == aiohttp.WSMsgType.BINARY:
                self.raw += msg.data
            elif msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                raise AssertionError(f"the session ended before {needle!r} arrived:\n{self.text()[-2000:]}")

    async def keys(self, keys: str) -> None:
        await self.ws.send_str(json.dumps(["stdin", keys]))


async def test_page_loads_the_client_and_its_websocket_names_this_server(serve, queued_run):
    served = await serve()
    async with aiohttp.ClientSession() as s:
        async with s.get(served.base + "/") as r:
            assert r.status == 200
            assert r.headers["Content-Type"].startswith("text/html")
            page = await r.text()
        assert f'src="{served.base}/static/js/textual.js"' in page
        assert f'data-session-websocket-url="ws://127.0.0.1:{served.port}/ws"' in page
        assert "swarmkit-console" in page
        async with s.get(served.base + "/static/js/textual.js") as r:
            assert r.status == 200
            assert len(await r.read()) > 10_000
    # No session runs until a browser opens the websocket.
    assert served.console_cmdlines() == []


@pytest.mark.parametrize("allow_acts", [False, True], ids=["read-only", "allow-acts"])
async def test_a_session_is_the_console_on_the_store_and_read_only_refuses_acts(serve, queued_run, sqlite_url, workspace, allow_acts):
    served = await serve(*(["--allow-acts"] if allow_acts else []))
    async with aiohttp.ClientSession() as s, s.ws_connect(served.base + "/ws?width=140&height=40") as ws:
        session = Session(ws)
        # The session starts: the console's screen arrives, with the store's run on it.
        await session.wait_for_text(FLOW_NAME)
        (cmd,) = served.console_cmdlines()
        assert cmd[cmd.index("swarmkit.console.cli") + 1:] == ["--poll", "0.2", *(["--read-only"] if not allow_acts else []), str(workspace)]
        # The store URL reaches the session through its environment, never its command line.
        assert sqlite_url not in " ".join(cmd)
        if not allow_acts:
            await session.wait_for_text("READ-ONLY")  # the header says so
        # `s` stops the selected run; `?` then opens the help screen, so once the help is on
        # the screen the app has read the `s` before it.
        await session.keys("s")
        if allow_acts:
            job = await await_for(lambda: _status_is(sqlite_url, workspace, queued_run, "stopped"), timeout=20, what="the stop")
            assert job.stop_requested_by
        else:
            await session.keys("?")
            await session.wait_for_text("read-only console: stop, resume, cancel and approve are off")
            job = await job_of(sqlite_url, workspace, queued_run)
            assert job is not None
            assert (job.status, job.stop_requested_at) == ("queued", None)
    # The browser went away: so does its console.
    await await_for(lambda: _none_left(served), timeout=15, what="the session's console to exit")


async def _status_is(sqlite_url, workspace, run_id, status):
    job = await job_of(sqlite_url, workspace, run_id)
    return job if job is not None and job.status == status else None


async def _none_left(served: Served) -> bool:
    return served.console_cmdlines() == []


async def test_a_websocket_from_another_site_or_a_rebound_name_is_refused(serve, queued_run):
    served = await serve()
    async with aiohttp.ClientSession() as s:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await s.ws_connect(served.base + "/ws", headers={"Origin": "http://evil.example"})
        assert refused.value.status == 403
        for origin in (f"http://localhost:{served.port + 1}", "null", f"http://evil.example:{served.port}"):
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await s.ws_connect(served.base + "/ws", headers={"Origin": origin})
            assert refused.value.status == 403, origin
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await s.ws_connect(served.base + "/ws", headers={"Sec-Fetch-Site": "cross-site"})
        assert refused.value.status == 403
        # DNS rebinding: a page on evil.example whose name now points at 127.0.0.1.
        for host in (f"evil.example:{served.port}", "evil.example", f"localhost.evil.example:{served.port}"):
            async with s.get(served.base + "/", headers={"Host": host}) as r:
                assert r.status == 400, host
        async with s.get(served.base + "/", headers={"Host": f"localhost:{served.port}"}) as r:
            assert r.status == 200
            assert f'data-session-websocket-url="ws://localhost:{served.port}/ws"' in await r.text()
    assert served.console_cmdlines() == []


def test_beyond_loopback_without_a_token_is_refused(workspace, sqlite_url, queued_run, monkeypatch, capsys):
    # Refused before anything listens, so in this process: `main` as the entry point calls it.
    monkeypatch.delenv("SWARMKIT_CONSOLE_TOKEN", raising=False)

    def serve_says(*args: str) -> tuple[int, str]:
        code = main(["serve", *args])
        return code, capsys.readouterr().err

    for host in ("0.0.0.0", "::", "192.0.2.7", "example.com"):
        code, said = serve_says("--store", sqlite_url, "--host", host, "--port", str(free_port()))
        assert code == 2, said
        assert f"--host {host} reaches beyond this machine, and no token is set" in said
        assert "SWARMKIT_CONSOLE_TOKEN" in said and "--token-file" in said
    # A token too short to be a secret is refused too, wherever it comes from.
    monkeypatch.setenv("SWARMKIT_CONSOLE_TOKEN", "short")
    code, said = serve_says("--store", sqlite_url, "--host", "0.0.0.0")
    assert code == 2 and "too short" in said
    monkeypatch.delenv("SWARMKIT_CONSOLE_TOKEN")
    (workspace / "token").write_text("\n")
    code, said = serve_says("--store", sqlite_url, "--token-file", str(workspace / "token"))
    assert code == 2 and "is empty" in said
    # No store there: said at once, not once per browser session.
    code, said = serve_says(str(workspace / "nowhere"))
    assert code == 2 and "no store at" in said


def test_without_textual_serve_it_says_to_install_the_web_extra(workspace, sqlite_url, queued_run):
    code = "import sys; sys.modules['textual_serve'] = None\nfrom swarmkit.console.cli import main\nsys.exit(main(sys.argv[1:]))"
    proc = subprocess.run([sys.executable, "-c", code, "serve", "--store", sqlite_url], cwd=workspace, env=child_env(), capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert "swarmkit-run-control[web]" in proc.stderr


def test_only_serve_imports_the_web_stack(tmp_path):
    code = (
        "import sys\n"
        "import swarmkit.console.cli, swarmkit.console.app\n"
        "print(sorted(m for m in ('textual_serve', 'aiohttp', 'aiohttp_jinja2', 'swarmkit.console.web') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


async def test_with_a_token_every_request_needs_it(serve, queued_run, workspace):
    # A token lets it listen beyond loopback; the test still comes in over loopback.
    served = await serve("--allowed-host", "console.test", host="0.0.0.0", env={"SWARMKIT_CONSOLE_TOKEN": TOKEN})
    base = served.base
    async with aiohttp.ClientSession() as s:
        # A token does not open the door to any name: a rebound one is refused before the token is asked for.
        async with s.get(base + "/", headers={"Host": f"evil.example:{served.port}", "Authorization": "Bearer " + TOKEN}) as r:
            assert r.status == 400
        async with s.get(base + "/", headers={"Host": f"console.test:{served.port}"}) as r:
            assert r.status == 401
        for path in ("/", "/static/js/textual.js", "/ws"):
            async with s.get(base + path) as r:
                assert r.status == 401, path
                assert r.headers["WWW-Authenticate"].startswith("Bearer")
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await s.ws_connect(base + "/ws")
        assert refused.value.status == 401
        async with s.get(base + "/?token=" + TOKEN[:-1] + "x") as r:
            assert r.status == 403
        async with s.get(base + "/", headers={"Authorization": "Bearer " + TOKEN.upper()}) as r:
            assert r.status == 403
        async with s.get(base + "/", headers={"Authorization": "Bearer " + TOKEN}) as r:
            assert r.status == 200 and "textual.js" in await r.text()
        async with s.get(base + "/", cookies={f"swarmkit_console_{served.port}": "forged"}) as r:
            assert r.status == 403
    assert served.console_cmdlines() == []

    # The browser's way in: the address with ?token=, which sets a cookie and drops the token from the address.
    jar = aiohttp.CookieJar(unsafe=True)  # unsafe: keep cookies from an IP address
    async with aiohttp.ClientSession(cookie_jar=jar) as s:
        async with s.get(base + "/?token=" + TOKEN + "&fontsize=14", allow_redirects=False) as r:
            assert r.status == 303
            assert r.headers["Location"] == "/?fontsize=14"
            set_cookie = r.headers["Set-Cookie"]
            assert "HttpOnly" in set_cookie and "SameSite=Lax" in set_cookie
            assert TOKEN not in set_cookie
        async with s.get(base + "/?fontsize=14") as r:
            assert r.status == 200 and "textual.js" in await r.text()
        async with s.ws_connect(base + "/ws?width=120&height=30") as ws:
            await Session(ws).wait_for_text(FLOW_NAME)
            # The session gets the store, not the token.
            (console,) = served.consoles()
            assert "SWARMKIT_CONSOLE_TOKEN" not in console.environ()
            assert "SWARMKIT_STORE" in console.environ()
    await await_for(lambda: _none_left(served), timeout=15, what="the session's console to exit")


async def test_the_token_is_read_from_a_file(serve, queued_run, workspace):
    (workspace / "token").write_text(TOKEN + "\n")
    served = await serve("--token-file", str(workspace / "token"))
    async with aiohttp.ClientSession() as s:
        async with s.get(served.base + "/") as r:
            assert r.status == 401
        async with s.get(served.base + "/", headers={"Authorization": "Bearer " + TOKEN}) as r:
            assert r.status == 200
