"""The CLI's conventions where the process is the point: help, version, streams and exit codes, watch, completion, worker lines."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from swarmkit.cli import build_parser
from swarmkit.runtime.exit_code import ExitCode

from .conftest import Cli, child_env, write_flow
from .helpers import need


def _argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "swarmkit.cli", *args]


def _verbs() -> dict[str, object]:
    sub = next(a for a in build_parser()._actions if a.dest == "verb")
    return dict(sub.choices)  # type: ignore[attr-defined]


def test_help_and_version_of_both_commands():
    top = subprocess.run(_argv("--help"), capture_output=True, text=True, timeout=60, env=child_env())
    assert top.returncode == 0 and "examples:" in top.stdout and "exit codes:" in top.stdout
    for name in ("run", "status", "audit", "completion", "logs", "stop"):
        assert name in top.stdout
    ver = subprocess.run(_argv("--version"), capture_output=True, text=True, timeout=60, env=child_env())
    assert ver.returncode == 0 and ver.stdout.startswith("swarmkit ") and "store schema revision 000" in ver.stdout
    console = subprocess.run([sys.executable, "-m", "swarmkit.console.cli", "--version"], capture_output=True, text=True, timeout=60, env=child_env())
    assert console.returncode == 0 and console.stdout.startswith("swarmkit-console ") and "store schema revision" in console.stdout
    assert console.stdout.split("(")[1] == ver.stdout.split("(")[1]


def test_every_verb_has_a_description_an_example_and_help_for_each_argument():
    for name, parser in _verbs().items():
        text = parser.format_help()  # type: ignore[attr-defined]
        assert parser.description and "examples:" in text and f"swarmkit {name}" in text.split("examples:")[1], name  # type: ignore[attr-defined]
        for action in parser._actions:  # type: ignore[attr-defined]
            if action.dest not in ("help", "db_store", "db_verb"):
                assert action.help, f"{name}: {action.dest} has no help text"


def test_results_on_stdout_refusals_and_usage_errors_on_stderr_once(cli: Cli):
    flow = write_flow(cli.workspace, "quick", """
        name = "quick"
        [[agents]]
        name = "a"
        command = "echo hi"
    """)
    done = cli.run("run", str(flow), str(cli.workspace), check=True)
    sid = done.stdout.split()[0]
    # A refusal: exit 1, said once on stderr, nothing on stdout.
    refused = cli.run("approve", sid, str(cli.workspace))
    assert refused.returncode == ExitCode.FAILED and refused.stdout == ""
    assert refused.stderr.count("swarmkit: ") == 1 and "cannot approve" in refused.stderr, refused.stderr
    # A no-op is no failure, and it is a result.
    noop = cli.run("stop", sid, str(cli.workspace))
    assert noop.returncode == ExitCode.OK and "nothing to stop" in noop.stdout and noop.stderr == ""
    # An unknown run: a usage error, exit 2.
    unknown = cli.run("stop", "ffffffff", str(cli.workspace))
    assert unknown.returncode == ExitCode.USAGE and unknown.stdout == "" and unknown.stderr.count("no run matches") == 1
    # A folder that is not there is not a run id.
    missing = cli.run("status", "/no/such/folder")
    assert missing.returncode == ExitCode.USAGE and "the store folder /no/such/folder does not exist" in missing.stderr and "no run matches" not in missing.stderr
    # `run --resume ID flow.toml`: a usage error, before any store folder is made.
    slip = cli.run("run", "--resume", sid, str(flow))
    assert slip.returncode == ExitCode.USAGE and "takes no flow file" in slip.stderr and not (flow.parent / "quick.toml" / ".swarmkit").exists()
    # A result: stdout only.
    ok = cli.run("status", sid, "-o", "name", str(cli.workspace))
    assert ok.returncode == 0 and ok.stderr == "" and len(ok.stdout.split()) == 1


def test_status_watch_prints_each_change_until_interrupted(cli: Cli):
    flow = write_flow(cli.workspace, "held", """
        name = "held"
        [[agents]]
        name = "a"
        command = "true"
    """)
    rid = cli.run("run", "--detach", str(flow), str(cli.workspace), check=True).stdout.strip()
    # Filtered to queued runs: a watched run is still told about when it changes out of the filter.
    watch = cli.start("status", "-w", "--status", "queued", str(cli.workspace))
    try:
        header = watch.stdout.readline()
        first = watch.stdout.readline()
        assert header.split()[:3] == ["ID", "FLOW", "STATUS"] and rid[:8] in first and "queued" in first
        # The run goes through its statuses with no worker: stopped, queued again, cancelled.
        cli.call("stop", rid, str(cli.workspace), check=True)
        assert "stopped" in watch.stdout.readline()
        cli.call("resume", rid, str(cli.workspace), check=True)
        assert "queued" in watch.stdout.readline()
        cli.call("cancel", rid, str(cli.workspace), check=True)
        assert "cancelled" in watch.stdout.readline()
        watch.send_signal(signal.SIGINT)
        assert watch.wait(timeout=30) == ExitCode.INTERRUPTED
        assert "Traceback" not in watch.stderr.read()
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()


def test_a_real_bash_sources_the_completion_and_completes(tmp_path: Path):
    need(shutil.which("bash"), "no bash here")
    script = tmp_path / "swarmkit.bash"
    made = subprocess.run(_argv("completion", "bash"), capture_output=True, text=True, timeout=60, env=child_env())
    assert made.returncode == 0 and made.stderr == ""
    script.write_text(made.stdout)
    probe = f"""
        set -e
        source {script}
        complete -p swarmkit
        COMP_WORDS=(swarmkit st); COMP_CWORD=1; _swarmkit; echo "verbs: ${{COMPREPLY[*]}}"
        COMP_WORDS=(swarmkit status -o ''); COMP_CWORD=3; _swarmkit; echo "outputs: ${{COMPREPLY[*]}}"
        COMP_WORDS=(swarmkit logs --t); COMP_CWORD=2; _swarmkit; echo "options: ${{COMPREPLY[*]}}"
        COMP_WORDS=(swarmkit db ''); COMP_CWORD=2; _swarmkit; echo "db: ${{COMPREPLY[*]}}"
    """
    ran = subprocess.run(["bash", "--norc", "--noprofile", "-c", probe], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and ran.stderr == "", ran.stderr
    out = dict(line.split(": ", 1) for line in ran.stdout.splitlines() if ": " in line)
    assert set(out["verbs"].split()) == {"status", "stop"}
    assert set(out["outputs"].split()) == {"table", "wide", "name", "json"}
    assert set(out["options"].split()) == {"--tail", "--timestamps"}
    assert set(out["db"].split()) == {"status", "upgrade"}


# zsh runs the bash function through bashcompinit, whose compgen is sh-emulated (0-based arrays).
ZSH_PROBE = 'source {script}; setopt ksharrays; COMP_WORDS=(swarmkit status -o ""); COMP_CWORD=3; _swarmkit; echo "${{COMPREPLY[*]}}"'
FISH_PROBE = 'source {script}; and complete -C"swarmkit status -o "; and complete -C"swarmkit db "'


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_load_their_completion_and_complete(shell: str, tmp_path: Path):
    made = subprocess.run(_argv("completion", shell), capture_output=True, text=True, timeout=60, env=child_env())
    assert made.returncode == 0 and made.stderr == "" and "swarmkit" in made.stdout
    need(shutil.which(shell), f"no {shell} here (apt-get install {shell}; .ci/run installs it); the script was made")
    script = tmp_path / f"swarmkit.{shell}"
    script.write_text(made.stdout)
    probe = (ZSH_PROBE if shell == "zsh" else FISH_PROBE).format(script=script)
    ran = subprocess.run([shell, "-f" if shell == "zsh" else "--no-config", "-c", probe], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert ran.returncode == 0 and ran.stderr == "", ran.stderr
    # fish prints `value<TAB>description` a line; zsh the words.
    words = {line.split("\t")[0] for line in ran.stdout.splitlines() if line} if shell == "fish" else set(ran.stdout.split())
    assert {"table", "wide", "name", "json"} <= words
    if shell == "fish":
        assert {"status", "upgrade"} <= words and "swarmkit.fish" not in words, "a value, not a file name"


def test_worker_lines_carry_their_time_and_json_on_request(cli: Cli):
    for fmt in ("text", "json"):
        worker = cli.start("worker", "--log-format", fmt, str(cli.workspace))
        try:
            line = worker.stdout.readline().strip()
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=30)
        if fmt == "json":
            doc = json.loads(line)
            assert doc["at"].endswith("Z") and doc["level"] == "info" and "hosting up to" in doc["msg"]
        else:
            stamp, rest = line.split(" ", 1)
            assert stamp.endswith("Z") and time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S") and rest.startswith("worker ")
