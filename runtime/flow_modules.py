"""Portable flows: the modules a flow's callables name travel with the run.

A `call = "mod.sub:fn"` agent whose module sits beside the flow file exists on
the submitting machine only. At submit its source is stored on the run's row
(`jobs.flow_modules`, JSON `{module_name: source}`), so any worker can run it:

- what is stored: each top-level module or package a callable names that the
  flow file's folder holds (for a package, every .py file in it), and, the
  same way, each top-level module or package of that folder that a stored
  module imports (`import helpers`, `from helpers import x`), transitively.
  Nothing else of the folder (data files, other modules) travels. At most
  MAX_MODULES_BYTES in all.
- what is not: installed packages and anything found on sys.path. A worker
  must have those itself (pip install, or PYTHONPATH).

A package's `__init__.py` is stored under the key `pkg.__init__`, so the keys
name both the module and its file.

At run time a host loads stored modules from a folder written once per content
(`.swarmkit/modules/<digest>/` in the workspace). A sync callable's process puts
that folder first on its sys.path. The host process, which may host many runs
of different versions of the same module, imports them under a private package
named for the content (`_swarmkit_flow_<digest>.mod.sub`); an absolute import of
one stored module by another is sent there too, and relative imports work as in
any package. `importlib.import_module("helpers")` from an agent is not
redirected: it finds only what is on sys.path.
"""

from __future__ import annotations

import ast
import builtins
import functools
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import sys
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from .errors import FlowError
from .flow import Flow, parse_flow, resolve_call

MAX_MODULES_BYTES = 1 << 20
INIT = "__init__"
_NAME_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_IDENT_RE = re.compile(r"^[A-Za-z_]\w*$")
_SPACE_PREFIX = "_swarmkit_flow_"


def call_specs(flow: Flow) -> list[tuple[str, str]]:
    """(agent name, `module:attr`) of every call agent."""
    return [(a.name, a.call) for a in flow.agents if a.call]


def _top(module_name: str) -> str:
    return module_name.partition(".")[0]


# --- at submit: what to store -------------------------------------------------


def _local_files(folder: Path, top: str, named: bool) -> list[tuple[str, Path]] | None:
    """The flow folder's own module or package `top`, as (key, file); None when the folder has none.

    Follows the order an import with the folder first on sys.path takes: a
    package, then a module. A folder without `__init__.py` (a namespace
    package) counts only when a callable names it: `import data` must not
    ship a data folder.
    """
    pkg = folder / top
    if (pkg / "__init__.py").is_file() or (named and pkg.is_dir() and not (folder / f"{top}.py").is_file()):
        files: list[tuple[str, Path]] = []
        for dirpath, dirnames, filenames in os.walk(pkg):
            dirnames[:] = sorted(d for d in dirnames if _IDENT_RE.match(d))
            rel = Path(dirpath).relative_to(folder).parts
            for name in sorted(filenames):
                stem, dot, ext = name.rpartition(".")
                if dot and ext == "py" and _IDENT_RE.match(stem):
                    files.append((".".join((*rel, stem)), Path(dirpath, name)))
        return files
    module = folder / f"{top}.py"
    if module.is_file():
        return [(top, module)]
    return None


def _imported_tops(source: str) -> set[str]:
    """Top-level names of the absolute imports anywhere in `source` (function bodies too)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()  # it imported at submit; let the import itself say what is wrong
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(_top(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(_top(node.module))
    return found


def collect_modules(flow: Flow) -> dict[str, str]:
    """The sources to store with a run of `flow` (see the module's docstring for what and why)."""
    if not flow.path:
        return {}
    folder = Path(flow.path).parent
    out: dict[str, str] = {}
    total = 0
    todo = [(_top(spec.partition(":")[0]), True) for _, spec in call_specs(flow)]
    seen: set[str] = set()
    while todo:
        top, named = todo.pop(0)
        if top in seen:
            continue
        seen.add(top)
        for key, path in _local_files(folder, top, named) or []:
            try:
                source = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise FlowError(f"{flow.path}: cannot read {path} to store it with the run: {exc}") from None
            total += len(source.encode("utf-8", "surrogatepass"))
            if total > MAX_MODULES_BYTES:
                raise FlowError(
                    f"{flow.path}: the modules beside the flow that its agents need ({', '.join(sorted(seen))}) hold more than "
                    f"{MAX_MODULES_BYTES:,} bytes, too much to store with each run; install them as a package on every worker "
                    "instead (see \"Shipping agents to workers\" in the README)"
                )
            out[key] = source
            todo.extend((t, False) for t in sorted(_imported_tops(source)) if t not in seen)
    return out


def encode_modules(modules: dict[str, str]) -> str:
    return json.dumps(modules, sort_keys=True, ensure_ascii=False)


def decode_modules(text: str | None, where: str = "the run") -> dict[str, str] | None:
    """The stored modules of a row; None for a run submitted before they were stored.

    A row is written by any process: a key that is not a module name (and so
    could name a path outside the folder) makes the run unloadable.
    """
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise FlowError(f"{where}: its stored modules are not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise FlowError(f"{where}: its stored modules must be a JSON object, not {type(value).__name__}")
    for key, source in value.items():
        if not isinstance(key, str) or not _NAME_RE.match(key) or not isinstance(source, str):
            raise FlowError(f"{where}: its stored modules hold an entry that is not a module name and its source: {str(key)[:80]!r}")
    return value


# --- loading ------------------------------------------------------------------


def findable(module_name: str) -> bool:
    """Whether this interpreter can import `module_name` from what is installed, without importing it.

    Walks the dotted name through each package's search path; importing a
    parent to look would run code a worker has not decided to host.
    """
    parts = module_name.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])
    except (ImportError, ValueError):
        return False
    for i in range(1, len(parts)):
        where = spec.submodule_search_locations if spec is not None else None
        if where is None:
            return False
        name = ".".join(parts[: i + 1])
        loaded = sys.modules.get(name)
        if loaded is not None and getattr(loaded, "__spec__", None) is not None:
            spec = loaded.__spec__
            continue
        spec = importlib.machinery.PathFinder.find_spec(name, list(where))
    return spec is not None


class RunModules:
    """How one run's callables are loaded here: stored sources first, then what is installed.

    A run submitted before modules were stored (`modules` None) is looked up
    beside its flow file, as it always was.
    """

    def __init__(self, flow_path: str | None, modules: dict[str, str] | None, root: Path):
        self.flow_path = flow_path
        self.modules = modules
        self.root = root
        self.tops = {_top(k) for k in modules or {}}
        digest = hashlib.sha256(encode_modules(modules or {}).encode("utf-8", "surrogatepass")).hexdigest()[:20]
        self.digest = digest
        self._folder: Path | None = None

    def stored(self, module_name: str) -> bool:
        return _top(module_name) in self.tops

    def _has(self, module_name: str) -> bool:
        mods = self.modules or {}
        return module_name in mods or f"{module_name}.{INIT}" in mods or any(k.startswith(module_name + ".") for k in mods)

    def missing(self, specs: Iterable[tuple[str, str]]) -> list[str]:
        """What this host cannot load of `specs`, one phrase a module, for the operator."""
        out: dict[str, str] = {}
        for agent, spec in specs:
            name = spec.partition(":")[0]
            if name in out:
                continue
            if self.stored(name):
                if not self._has(name):
                    out[name] = f"module {name!r} (agent {agent!r}: not among the modules stored with the run)"
                continue
            if self.modules is None and self.flow_path and _local_files(Path(self.flow_path).parent, _top(name), True):
                continue
            if not findable(name):
                out[name] = f"module {name!r} (agent {agent!r}: not installed here, not stored with the run)"
        return list(out.values())

    def folder(self) -> Path:
        """The stored modules as files, written once per content and never changed after."""
        if self._folder is None:
            self._folder = materialise(self.modules or {}, self.root / self.digest)
        return self._folder

    def child_path(self) -> tuple[list[str], bool]:
        """(sys.path entries to put first, whether to look beside the flow file) for a sync callable's own process."""
        if self.modules is None:
            return [], True
        return ([str(self.folder())] if self.modules else []), False

    def resolve(self, spec: str) -> Callable[..., Any]:
        """The callable, imported once per process and content, not once per node."""
        key = (self.digest if self.modules is not None else self.flow_path, spec)
        fn = _CALLS.get(key)
        if fn is None:
            if self.modules is not None and self.stored(spec.partition(":")[0]):
                space = _space(self.digest, self.folder(), self.tops)
                fn = resolve_call(spec, self.flow_path, look_beside=False, import_module=lambda name: importlib.import_module(f"{space}.{name}"))
            else:
                fn = resolve_call(spec, self.flow_path, look_beside=self.modules is None)
            _CALLS[key] = fn
        return fn


_CALLS: dict[tuple[str | None, str], Callable[..., Any]] = {}


def for_run(flow: Flow, modules_text: str | None, runs_dir: Path) -> RunModules:
    """A run's loader; its stored modules are written beside the runs folder, `.swarmkit/modules/`."""
    return RunModules(flow.path, decode_modules(modules_text, flow.path or flow.name), runs_dir.parent / "modules")


def missing_for_row(flow_source: str, flow_path: str | None, modules_text: str | None) -> list[str]:
    """What a host here could not load of a run's callables; [] also for a flow that does not parse
    (its host faults it with the parser's message, as before)."""
    loading = _loading(flow_source, flow_path, modules_text)
    if isinstance(loading, str):
        return [loading]
    if loading is None:
        return []
    loader, specs = loading
    # Asked each time: what is installed here may change while the worker runs.
    return loader.missing(specs)


@functools.lru_cache(maxsize=32)
def _loading(flow_source: str, flow_path: str | None, modules_text: str | None) -> tuple[RunModules, tuple[tuple[str, str], ...]] | str | None:
    """A queued row's loader and callables, made once per content: a worker with room checks every
    candidate at every claim, and a fleet's workers check the same runs (one flow's runs share it).
    None for a flow that does not parse; the error's text for modules that cannot be read."""
    try:
        flow = parse_flow(flow_source, flow_path)
    except FlowError:
        return None
    try:
        return for_run(flow, modules_text, Path()), tuple(call_specs(flow))
    except FlowError as exc:
        return str(exc)


def _file_of(folder: Path, key: str) -> Path:
    parts = key.split(".")
    if parts[-1] == INIT:
        return folder.joinpath(*parts[:-1], "__init__.py")
    return folder.joinpath(*parts[:-1], parts[-1] + ".py")


def materialise(modules: dict[str, str], folder: Path) -> Path:
    """Write `modules` into `folder` unless it is there: built aside, then renamed into place,
    so a folder that exists is complete (two hosts of one workspace may race)."""
    if folder.is_dir():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = folder.parent / f".{folder.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    try:
        tmp.mkdir(mode=0o700)
        for key, source in modules.items():
            path = _file_of(tmp, key)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(source, encoding="utf-8", errors="surrogatepass")
        try:
            os.rename(tmp, folder)
        except OSError:
            if not folder.is_dir():
                raise
    except OSError as exc:
        raise FlowError(f"cannot write the run's stored modules to {folder}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


# --- the host process's private packages --------------------------------------


class _Space:
    """One content's stored modules, importable as `<name>.<module>` and sending absolute imports of each other there."""

    def __init__(self, name: str, folder: Path, tops: set[str]):
        self.name = name
        self.folder = folder
        self.tops = frozenset(tops)
        self.builtins = dict(builtins.__dict__)
        self.builtins["__import__"] = self._import

    def _import(self, name: str, globals: Any = None, locals: Any = None, fromlist: Sequence[str] | None = (), level: int = 0) -> Any:
        if level == 0 and _top(name) in self.tops:
            module = builtins.__import__(f"{self.name}.{name}", globals, locals, fromlist, 0)
            # `import a.b` binds `a`: this space's `a`, not the space itself.
            return module if fromlist else sys.modules[f"{self.name}.{_top(name)}"]
        return builtins.__import__(name, globals, locals, fromlist or (), level)

    def spec(self, fullname: str, rest: str) -> importlib.machinery.ModuleSpec | None:
        base = self.folder.joinpath(*rest.split(".")) if rest else self.folder
        if rest and (base / "__init__.py").is_file():
            init = base / "__init__.py"
            return importlib.util.spec_from_file_location(fullname, init, loader=_Loader(fullname, str(init), self.builtins), submodule_search_locations=[str(base)])
        module = base.with_name(base.name + ".py")
        if rest and module.is_file():
            return importlib.util.spec_from_file_location(fullname, module, loader=_Loader(fullname, str(module), self.builtins))
        if base.is_dir():
            spec = importlib.machinery.ModuleSpec(fullname, None, is_package=True)
            spec.submodule_search_locations = [str(base)]
            return spec
        return None


class _Loader(importlib.machinery.SourceFileLoader):
    def __init__(self, fullname: str, path: str, space_builtins: dict[str, Any]):
        super().__init__(fullname, path)
        self._builtins = space_builtins

    def exec_module(self, module: Any) -> None:
        # Every function defined in the module takes its builtins from here,
        # so imports inside them are redirected too.
        module.__dict__["__builtins__"] = self._builtins
        super().exec_module(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        head, _, rest = fullname.partition(".")
        space = _SPACES.get(head)
        return space.spec(fullname, rest) if space is not None else None


_SPACES: dict[str, _Space] = {}
_FINDER = _Finder()


def _space(digest: str, folder: Path, tops: set[str]) -> str:
    name = _SPACE_PREFIX + digest
    if name not in _SPACES:
        _SPACES[name] = _Space(name, folder, tops)
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    return name
