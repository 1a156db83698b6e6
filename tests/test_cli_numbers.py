"""Issue 29: no number or duration given to `swarmkit` or `swarmkit-console` ends in a traceback.

Every flag that takes a count, a port, seconds or a duration refuses an empty, non-finite, negative or
overflowing value as bad usage (exit 2): argparse's usage, then one line `PROG: error: argument --FLAG: ...`
(the shape of every usage error argparse finds, `--concurrency x` before this issue too), before any
store is opened. `swarmkit logs ID --since 99999999d` was an OverflowError traceback, exit 1.

The flags are found in the parsers (an action whose type is one of cli/quantities.py's, or a bare int
or float): a numeric flag with no row below fails `test_every_numeric_flag_has_a_row`. The environment
variables are driven in tests/test_bad_input.py (`NUMBER_VARS`); the last test here checks that none
read through the rule is missing there.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.reliability import has_traceback

from .conftest import Cli, child_env, write_flow
from .helpers import ROOT
from .test_bad_input import NUMBER_VARS

# What every numeric flag refuses.
COMMON_BAD = ("nan", "inf", "-inf", "-1", "", "1e309", "soon", "NaN", " ")


@dataclass(frozen=True)
class Flag:
    prog: str  # swarmkit, or swarmkit-console
    verb: str  # the words that name the parser: "logs", "notifications list", "" for swarmkit-console's own
    flag: str  # the option, or a positional's metavar (what argparse's error names)
    bad: tuple[str, ...]  # refused, beyond COMMON_BAD
    good: tuple[str, ...]  # taken (at the bounds where there are some)
    run_id: bool = False  # the verb takes a run id first: one that names no run (the flag is judged first)
    positional: bool = False
    # Also refused by a real process (test_the_real_commands_...): a flag the same rule already shows so in
    # another verb (the acts' filters, status's) is judged in this process only.
    process: bool = True

    def argv(self, value: str) -> list[str]:
        """The words after the program, the value in one word with its flag (`--tail=-inf`: argparse would read
        `-inf` alone as an option), or after `--` for a positional."""
        words = [*self.verb.split(), *(["deadbeef0"] if self.run_id else [])]
        return [*words, "--", value] if self.positional else [*words, f"{self.flag}={value}"]


COUNT_BAD = ("-0", "+3", "1.5", "1e3", "0x10", "99999999999999999999", "9" * 5000)
SECONDS_BAD = ("0", "-0", "0.0", "1e-400", "1e400", "86401", "-1e-3", "9" * 400, "5s")
POLL_BAD = ("1e-300", "0.01", "0.049")
DURATION_BAD = ("0s", "0", "-1d", "1e3s", "99999999d", "99999999999999999999d", "36501d", "5", "1y", "s", "5 m")

FLAGS = (
    Flag("swarmkit", "logs", "--tail", COUNT_BAD + ("1000000001",), ("0", "20", "1000000000"), run_id=True),
    Flag("swarmkit", "logs", "--since", DURATION_BAD, ("30s", "1h30m", "1.5d", "36500d"), run_id=True),
    Flag("swarmkit", "status", "--since", DURATION_BAD, ("5m", "2w")),
    Flag("swarmkit", "status", "--older-than", DURATION_BAD, ("5m", "36500d")),
    # The acts by filter take status's filters (cli/common.py add_run_filters).
    *(Flag("swarmkit", verb, flag, DURATION_BAD, ("1h",), process=False) for verb in ("stop", "approve", "resume", "cancel") for flag in ("--since", "--older-than")),
    Flag("swarmkit", "audit", "--since", DURATION_BAD, ("1d",)),
    Flag("swarmkit", "worker", "--concurrency", COUNT_BAD + ("0", "10001"), ("1", "10000")),
    Flag("swarmkit", "serve", "--concurrency", COUNT_BAD + ("0", "10001"), ("1", "64")),
    Flag("swarmkit", "serve", "--port", COUNT_BAD + ("65536", "70000"), ("0", "8765", "65535")),
    Flag("swarmkit", "notifications list", "--limit", COUNT_BAD + ("0", "100001"), ("1", "100000")),
    Flag("swarmkit", "notifications retry", "ID", COUNT_BAD + ("0", str(2**62 + 1)), ("1", str(2**62)), positional=True),
    # A poll more often than MIN_POLL_S (0.05 s) would spend a core: `1e-300` was taken.
    Flag("swarmkit-console", "", "--poll", SECONDS_BAD + POLL_BAD, ("0.05", "0.2", "1", "86400")),
    Flag("swarmkit-console", "serve", "--poll", SECONDS_BAD + POLL_BAD, ("0.05", "86400")),
    Flag("swarmkit-console", "serve", "--port", COUNT_BAD + ("0", "65536", "70000"), ("1", "8766", "65535")),
)


def _row_id(f: Flag) -> str:
    return " ".join(w for w in (f.prog, f.verb, f.flag) if w)


# --- the parsers -----------------------------------------------------------------------------


def _parsers() -> dict[str, argparse.ArgumentParser]:
    from swarmkit.cli import build_parser
    from swarmkit.console.cli import build_demo_parser
    from swarmkit.console.cli import build_parser as console_parser
    from swarmkit.console.web import build_serve_parser

    return {"swarmkit": build_parser(), "swarmkit-console": console_parser(), "swarmkit-console demo": build_demo_parser(), "swarmkit-console serve": build_serve_parser()}


def _numeric_flags() -> dict[tuple[str, str, str], argparse.Action]:
    """(program, verb, flag) of every option or positional whose value is a number or a duration, in every
    parser and subparser (a positional by its metavar, as argparse's errors name it)."""
    from swarmkit.cli.quantities import FlagType

    found: dict[tuple[str, str, str], argparse.Action] = {}

    def walk(parser: argparse.ArgumentParser, prog: str, verb: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, prog, f"{verb} {name}".strip())
            elif isinstance(action.type, FlagType) or action.type in (int, float, complex):
                name = max(action.option_strings, key=len) if action.option_strings else str(action.metavar or action.dest)
                found[(prog, verb, name)] = action

    for whole, parser in _parsers().items():
        prog, _, verb = whole.partition(" ")
        walk(parser, prog, verb)
    return found


def test_every_numeric_flag_has_a_row():
    """A new numeric flag needs a row above, and one of cli/quantities.py's types (a bare int or float
    takes nan, inf, -5 or 1e400 and fails later, in a timer or a store)."""
    from swarmkit.cli.quantities import FlagType

    found = _numeric_flags()
    bare = sorted(" ".join(k) for k, a in found.items() if not isinstance(a.type, FlagType))
    assert bare == [], f"numeric flags with a bare type (use swarmkit.cli.quantities): {bare}"
    rows = {(f.prog, f.verb, f.flag) for f in FLAGS}
    assert len(rows) == len(FLAGS), "two rows for one flag"
    assert sorted(set(found) - rows) == [], "numeric flags without a row in FLAGS"
    assert sorted(rows - set(found)) == [], "rows for flags that are gone (or no longer numeric)"


@pytest.mark.parametrize("row", FLAGS, ids=_row_id)
def test_each_numeric_flag_takes_what_it_should(row: Flag):
    """The good values parse (at the bounds): the rule refuses nothing anyone meant."""
    action = _numeric_flags()[(row.prog, row.verb, row.flag)]
    argv_of = row.argv
    parser = _parsers()[row.prog]
    if row.prog == "swarmkit-console" and row.verb:
        parser = _parsers()[f"{row.prog} {row.verb}"]
        argv_of = lambda value: row.argv(value)[len(row.verb.split()):]
    for value in row.good:
        got = getattr(parser.parse_args(argv_of(value)), action.dest)
        assert got is not None and got != [] and (not hasattr(got, "total_seconds") or got.total_seconds() > 0), (row.flag, value, got)


# --- bad values, in this process: every row, every value -------------------------------------


def _main_of(prog: str):
    if prog == "swarmkit":
        from swarmkit.cli import main

        return main
    from swarmkit.console.cli import main as console_main

    return console_main


def _one_error_line(stderr: str, prog: str, flag: str, value: str) -> str:
    """argparse's usage (a line and its indented continuations), then one error line naming the flag; no traceback."""
    assert not has_traceback(stderr), f"a traceback for {flag}={value!r}:\n{stderr[-3000:]}"
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines, f"nothing said for {flag}={value!r}"
    *usage, error = lines
    assert usage and usage[0].startswith("usage: ") and all(line.startswith(" ") for line in usage[1:]), (flag, value, stderr)
    assert re.match(rf"{re.escape(prog)}( \w+)*: error: argument {re.escape(flag)}: ", error), (flag, value, stderr)
    assert len(error) < 200, error
    return error


@pytest.mark.parametrize("row", FLAGS, ids=_row_id)
def test_each_numeric_flag_refuses_bad_values_in_one_line(row: Flag, capsys, tmp_path: Path, monkeypatch):
    """Through the same main() the installed scripts run, in a folder with no store: the value is judged
    as it is parsed, before any store is looked for (else the error would be "no store at ...")."""
    monkeypatch.chdir(tmp_path)
    main = _main_of(row.prog)
    for value in COMMON_BAD + row.bad:
        with pytest.raises(SystemExit) as exited:
            main(row.argv(value))
        out, err = capsys.readouterr()
        assert exited.value.code == 2, (row.flag, value, err)
        assert out == "", (row.flag, value, out)
        _one_error_line(err, row.prog, row.flag, value)


# --- the real processes --------------------------------------------------------------------------

SCRIPTS = {"swarmkit": [sys.executable, "-m", "swarmkit.cli"], "swarmkit-console": [sys.executable, "-m", "swarmkit.console.cli"]}


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=child_env(env), capture_output=True, text=True, timeout=120)


def test_the_real_commands_refuse_a_bad_number_in_one_line(tmp_path: Path):
    """One real process a row, the value as its own word where argparse lets it be (`--tail -5`; `--poll -inf`
    is read as an option, and still named); in an empty folder: no store is looked for, none is made."""
    spaced = {"--tail": "-5", "--since": "99999999999999999999d", "--older-than": "0s", "--concurrency": "0", "--port": "70000", "--poll": "-inf", "--limit": "nan", "ID": "-1"}
    for row in (r for r in FLAGS if r.process):
        value = spaced[row.flag]
        words = [*row.verb.split(), *(["deadbeef0"] if row.run_id else []), *([] if row.positional else [row.flag]), value]
        proc = _run([*SCRIPTS[row.prog], *words], tmp_path)
        assert proc.returncode == 2, (row, proc.stdout, proc.stderr)
        error = _one_error_line(proc.stderr, row.prog, row.flag, value)
        assert "no store" not in proc.stderr, proc.stderr
        if value == "-inf":
            assert "expected one argument" in error  # argparse reads -inf as an option: it still names the flag
    assert not (tmp_path / ".swarmkit").exists(), "a refused flag made a store"


@pytest.fixture
def sqlite_cli(sqlite_url: str, workspace: Path) -> Cli:
    return Cli(sqlite_url, workspace)


def test_the_reported_overflows_on_a_real_run(sqlite_cli: Cli, tmp_path: Path):
    """What the issue saw, on a store with a run: `logs ID --since 99999999d` ("OverflowError: date value out
    of range", exit 1), the same through `status` and `audit`, and a tail past SQLite's integers
    ("Python int too large to convert to SQLite INTEGER")."""
    cli = sqlite_cli
    flow = write_flow(tmp_path, "one", 'name = "one"\n[[agents]]\nname = "only"\ncommand = "echo hi"\n')
    run_id = cli.run("run", str(flow), "--detach", check=True).stdout.strip()
    for argv, flag in (
        (("logs", run_id, "--since", "99999999d"), "--since"),
        (("status", "--since", "99999999d"), "--since"),
        (("audit", "--since", "999999999999999d"), "--since"),
        (("logs", run_id, "--tail", "100000000000000000000"), "--tail"),
    ):
        proc = cli.run(*argv)
        assert proc.returncode == 2, (argv, proc.stdout, proc.stderr[-2000:])
        _one_error_line(proc.stderr, "swarmkit", flag, argv[-1])
    # The longest look back the rule takes still reads the run's log.
    ok = cli.run("logs", run_id, "--since", "36500d")
    assert ok.returncode == 0 and "run.submitted" in ok.stdout, ok.stderr


# --- environment variables -----------------------------------------------------------------------


def test_every_number_variable_is_driven_with_bad_values():
    """Each variable read through the one rule (settings.env_number, or a count by quantities.Count) has a row in
    test_bad_input.NUMBER_VARS, and none is parsed by hand beside it (SWARMKIT_SSE_KEEPALIVE was, taking nan and inf)."""
    read: set[str] = set()
    by_hand: list[str] = []
    for folder in ("runtime", "cli", "api", "console", "store", "widgets"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            names = dict(re.findall(r'^(\w+)\s*=\s*"(SWARMKIT_\w+)"', text, re.M))
            for arg in re.findall(r'(?<!def )\b(?:env_number|_count_env)\(\s*("SWARMKIT_\w+"|\w+)', text):
                read.add(arg.strip('"') if arg.startswith('"') else names.get(arg, f"{path.relative_to(ROOT)}: {arg}"))
            by_hand += [f"{path.relative_to(ROOT)}: {m}" for m in re.findall(r"(?:float|int)\(\s*os\.environ[^)]*\)", text)]
    assert sorted(read) == sorted(NUMBER_VARS)
    assert by_hand == [], by_hand


def test_a_bad_variable_in_a_real_process_is_one_line(tmp_path: Path):
    """The in-process matrix (test_bad_input) through a real `swarmkit serve`: the keep-alive is read before any store."""
    for value in ("nan", "inf"):
        proc = _run([*SCRIPTS["swarmkit"], "serve", "--port", "0"], tmp_path, env={"SWARMKIT_SSE_KEEPALIVE": value})
        assert proc.returncode == 2, (proc.stdout, proc.stderr[-2000:])
        assert not has_traceback(proc.stderr)
        assert proc.stderr.strip() == f"swarmkit: SWARMKIT_SSE_KEEPALIVE={value!r} must be a finite number, more than zero", proc.stderr
    assert not (tmp_path / ".swarmkit").exists(), "a refused variable made a store"
