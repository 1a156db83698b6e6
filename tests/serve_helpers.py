"""A real `swarmkit serve` process on a free loopback port, and flows to drive it with."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from .conftest import Cli, child_env, hold, write_flow
from .helpers import ABORTED, stuck_report

TOKENS = {
    "ops": ("operate", "ops-secret-0123456789abcdef"),
    "viewer": ("read", "viewer-secret-0123456789abcdef"),
}


def token_file(folder: Path) -> Path:
    path = folder / "tokens"
    path.write_text("# name scope token\n" + "".join(f"{n} {s} {t}\n" for n, (s, t) in TOKENS.items()), encoding="utf-8")
    return path


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name][1]}"}


class Served:
    """`swarmkit serve --port 0 ...` with its output in a file; `url` once it listens."""

    def __init__(self, cli: Cli, *args: str, env: dict[str, str] | None = None, timeout: float = 30):
        self.log = cli.workspace.parent / f"serve-{time.monotonic_ns()}.out"
        self.proc = subprocess.Popen(
            cli.argv("serve", "--store", cli.store_url, "--port", "0", *args), cwd=cli.workspace, env=child_env(env),
            stdout=self.log.open("w"), stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(r"listening on (http://\S+)", self.output())
            if found:
                # A wildcard bind is reached over loopback: 0.0.0.0 is no name a client sends as its Host.
                self.url = found.group(1).replace("://0.0.0.0:", "://127.0.0.1:")
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"swarmkit serve did not start (exit {self.proc.returncode}):\n{self.output()}")
            time.sleep(0.05)
        # A JSON API's client says so on every request: an act without it is refused (415).
        self.client = httpx.Client(base_url=self.url, timeout=30, headers={"Content-Type": "application/json"})

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, timeout: float = 20) -> int:
        """SIGTERM, and SIGKILL after `timeout`: never in silence. What a serve that outstays its SIGTERM
        is doing (/proc State and wchan, its stacks: py-spy's, or faulthandler's in its output after a
        SIGABRT) is printed to stderr, which the test's report shows."""
        if hasattr(self, "client"):
            self.client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                report = stuck_report(self.proc.pid, f"swarmkit serve, {timeout:g} s after SIGTERM", abort=True)
                if ABORTED in report:
                    try:
                        self.proc.wait(10)  # a SIGABRT ends it once faulthandler has written the stacks
                    except subprocess.TimeoutExpired:
                        pass
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)  # and whatever of its group is left
                except ProcessLookupError:
                    pass
                self.proc.wait(10)
                print(f"{report}\n--- its output (the end):\n{self.output()[-8000:]}", file=sys.stderr, flush=True)
        return self.proc.returncode

    def stream(self, job_id: str, headers: dict[str, str] | None = None, timeout: float = 60) -> list[dict]:
        """Read a run's stream to its end: a list of {id, event, data, comment} frames."""
        frames: list[dict] = []
        frame: dict = {}
        with self.client.stream("GET", f"/jobs/{job_id}/stream", headers=headers, timeout=timeout) as resp:
            assert resp.status_code == 200, resp.read()
            assert resp.headers["content-type"].startswith("text/event-stream")
            for line in resp.iter_lines():
                if line == "":
                    if frame:
                        frames.append(frame)
                    frame = {}
                    continue
                key, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if key == "":
                    frame.setdefault("comment", []).append(value)
                elif key == "data":
                    frame["data"] = json.loads(value)
                else:
                    frame[key] = value
        return frames


def flows(folder: Path, gates: Path) -> Path:
    """The flows the tests submit by name: quick, held (waits on a gate file), gated, failing, faulting."""
    folder.mkdir(exist_ok=True)
    write_flow(folder, "quick", 'name = "quick"\n[[agents]]\nname = "a"\ncommand = "echo hello"\n[[agents]]\nname = "b"\ncommand = "echo there"\n')
    write_flow(folder, "held", f'name = "held"\n[[agents]]\nname = "wait"\ncommand = "echo waiting; {hold(gates, "go")}"\n[[agents]]\nname = "after"\ncommand = "echo after"\n')
    write_flow(folder, "gated", 'name = "gated"\n[[agents]]\nname = "prep"\ncommand = "echo prep"\n[[agents]]\nname = "ship"\napprove = true\ncommand = "echo shipped"\n')
    write_flow(folder, "failing", 'name = "failing"\n[[agents]]\nname = "boom"\ncommand = "echo about to fail; exit 3"\n')
    # The host refuses an output file that is not a regular file: a runtime fault, not the flow's choice.
    write_flow(folder, "faulting", 'name = "faulting"\n[[agents]]\nname = "odd"\ncommand = "rm -f $SWARMKIT_OUTPUT; mkfifo $SWARMKIT_OUTPUT"\n')
    (folder / "broken.toml").write_text('name = "broken"\n[[agents]]\nname = "x"\n', encoding="utf-8")
    return folder
