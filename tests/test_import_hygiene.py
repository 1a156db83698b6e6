"""The layering rule: widgets never import store or runtime; store and runtime never import a door
(cli, api, console) or its libraries (argparse, the web stacks, Textual); no import cycle.

The layers and the cycles are import-linter's contracts (pyproject's [tool.importlinter]), run here
as CI runs them; the rest is checked by reading every module's imports, and by importing each
package in a fresh interpreter and looking at what ended up in sys.modules.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

DOORS = {"swarmkit.cli", "swarmkit.api", "swarmkit.console"}
# The web stacks and the parser are the doors' (cli/, api/, console/): the domain serves all of them.
DOOR_LIBRARIES = {"textual", "fastapi", "starlette", "uvicorn"}
FORBIDDEN = {
    "widgets": {"swarmkit.store", "swarmkit.runtime"} | DOORS,
    "store": {"swarmkit.widgets", "swarmkit.runtime"} | DOORS | DOOR_LIBRARIES,
    "runtime": {"swarmkit.widgets"} | DOORS | DOOR_LIBRARIES,
}


def root_of(module: str) -> str:
    """`textual.widgets` -> `textual`; `swarmkit.store.queries` -> `swarmkit.store`."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "swarmkit" else parts[0]


def modules_of(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).rglob("*.py") if "__pycache__" not in p.parts)


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(root_of(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(root_of(node.module))
    return roots


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_forbidden_import_in_the_source(package):
    bad = {str(p.relative_to(ROOT)): sorted(imported_roots(p) & FORBIDDEN[package]) for p in modules_of(package)}
    assert not {k: v for k, v in bad.items() if v}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_forbidden_module_after_import(package, tmp_path):
    names = [
        "swarmkit." + ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for p in modules_of(package)
        if "migrations" not in p.parts and p.name != "__main__.py"  # importing `python -m`'s module runs the command
    ]
    code = (
        "import importlib, json, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted({'.'.join(m.split('.')[:2]) if m.startswith('swarmkit.') else m.split('.')[0] for m in sys.modules})))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert not loaded & FORBIDDEN[package]


OLD_NAMES = re.compile(r"""(?:^[ \t]*|["';][ \t]*)(?:from|import)[ \t]+(?:store|runtime|console|widgets)(?:\.|[ \t]|$)|-m["', \t]+(?:store|runtime|console|widgets)\.""", re.M)


def test_nothing_names_the_parts_by_their_folder():
    """The parts are `swarmkit.store` and so on. A test or benchmark run from the checkout could
    still import `runtime` as a folder of the current directory and hide a wrong name."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if {".venv", ".git", "build"} & set(path.relative_to(ROOT).parts):
            continue
        for m in OLD_NAMES.finditer(path.read_text(encoding="utf-8")):
            found.append(f"{path.relative_to(ROOT)}: {m.group(0).strip()}")
    assert not found


def test_each_query_is_written_once():
    """One read path: every query in `store/queries.py` is a plain function of a sync `Connection`,
    run through `Store.run_read` or `AsyncConnection.run_sync`; never an async twin or a `_sync` one."""
    path = ROOT / "store" / "queries.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    coroutines = [f"{n.name} (line {n.lineno})" for n in ast.walk(tree) if isinstance(n, ast.AsyncFunctionDef)]
    assert not coroutines, f"async def in store/queries.py: {coroutines}"
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.append(node.id)
        elif isinstance(node, ast.alias):
            names.append(node.asname or node.name.split(".")[-1])
    assert not [n for n in names if n.endswith("_sync")], "a `_sync` twin in store/queries.py"

    import inspect

    from swarmkit.store import queries

    assert not [n for n, v in vars(queries).items() if inspect.iscoroutinefunction(v) or n.endswith("_sync")]


# The HTTP stack is the `serve` verb's alone: every other verb starts as fast as before it existed.
HTTP_STACK = {"fastapi", "starlette", "uvicorn", "pydantic", "httpx", "anyio"}


@pytest.mark.parametrize("module", ["swarmkit.cli", "swarmkit.runtime", "swarmkit.console.cli"])
def test_only_serve_loads_the_http_stack(module, tmp_path):
    code = f"import json, sys, {module}\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))\n"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert not set(json.loads(proc.stdout.strip().splitlines()[-1])) & HTTP_STACK


def test_nothing_but_the_serve_verb_imports_the_api_package():
    """The browser console takes the one Host and Origin rule of both HTTP doors, api/http_trust.py (stdlib only), and nothing else of it."""
    importers = []
    for package in ("runtime", "store", "console", "widgets", "cli"):
        for path in modules_of(package):
            text = path.read_text(encoding="utf-8")
            if re.search(r"^\s*(from|import) swarmkit\.api\b(?!\.http_trust import)", text, re.M):
                importers.append(str(path.relative_to(ROOT)))
    assert importers == ["cli/serve.py"]


def test_runtime_parses_no_arguments():
    """argparse is the doors' (cli/, and the console's parsers): no module of runtime imports it."""
    assert [str(p.relative_to(ROOT)) for p in modules_of("runtime") if "argparse" in imported_roots(p)] == []


def test_the_import_contracts_hold():
    """pyproject's [tool.importlinter]: the doors over runtime over store, the widgets alone, SQLAlchemy and
    its drivers imported by the store alone, and no import cycle among the modules of any package (imports
    inside functions and for the type checker count; none is excepted)."""
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


# The doors' start-up (issue 30): a module of cli/, console/, api/ or widgets/ imports at its top. An import
# inside a function stays only where start-up needs it (`swarmkit --help` loads no verb's work, a one-shot verb
# on SQLite no SQLAlchemy, the console's first frame neither), and says why on its line or the one before.
LATE_REASON = re.compile(r"#\s*late:\s*\S")


def late_imports_without_a_reason(path: Path, root: Path = ROOT) -> list[str]:
    """`file:line import` for each import inside a function of `path` with no `# late: <reason>` on its line or the one before."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source, str(path))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        up = parents.get(node)
        while up is not None and not isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef)):
            up = parents.get(up)
        if up is None:
            continue  # at module level, or under `if TYPE_CHECKING:`
        near = lines[node.lineno - 1] + "\n" + (lines[node.lineno - 2] if node.lineno > 1 else "")
        if not LATE_REASON.search(near):
            found.append(f"{path.relative_to(root)}:{node.lineno} {lines[node.lineno - 1].strip()}")
    return found


def test_every_late_import_says_why():
    found = [hit for package in ("store", "runtime", "cli", "console", "api", "widgets") for path in modules_of(package) for hit in late_imports_without_a_reason(path)]
    assert not found, "an import inside a function with no `# late: <reason>` (import it at the module's top, or say why not):\n" + "\n".join(found)


def test_the_late_import_check_finds_what_it_should(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os\n"
        "if os.name:\n"
        "    import json\n"
        "def f():\n"
        "    import sys\n"
        "    # late: only f's callers need it\n"
        "    import re\n"
        "    import csv  # late: rare\n"
        "    class C:\n"
        "        def g(self):\n"
        "            from json import dumps  # late\n",
        encoding="utf-8",
    )
    assert late_imports_without_a_reason(sample, tmp_path) == ["sample.py:5 import sys", "sample.py:11 from json import dumps  # late"]


def test_no_import_cycle_is_excepted():
    # An `ignore_imports` entry is a cycle let back in: the acyclic contract holds without any.
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert "ignore_imports" not in text


def test_no_hand_written_module_is_past_its_seams():
    # A module past 400 lines is asking to be split along its seams; store/compiled_sqlite.py is
    # written by scripts/compile_sqlite.py, not by hand.
    long = {
        str(path.relative_to(ROOT)): n
        for package in ("store", "runtime", "cli", "api", "console", "widgets")
        for path in modules_of(package)
        if path.name != "compiled_sqlite.py" and (n := len(path.read_text(encoding="utf-8").splitlines())) > 400
    }
    assert not long, f"modules over 400 lines (split them along their seams): {long}"
