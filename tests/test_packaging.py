"""Swarmkit installs beside anything: one `swarmkit` import package, nothing else at the top of the wheel.

PyPI holds distributions that own the top-level names `console`, `store` and
`runtime`; one of them once overwrote Swarmkit's files in the same virtualenv.
These tests build the wheel from the checkout, install it into a fresh
virtualenv beside stand-ins that own those names, and use it from an unrelated
folder. No network: the wheel is built without build isolation, and the
dependencies come from the test's own environment through a `.pth` line.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

from .helpers import ROOT

DIST = "swarmkit_run_control"
STAND_INS = ("console", "store", "runtime", "widgets", "cli", "api")
SKIP = {".venv", ".git", "build", "dist", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".import_linter_cache", ".swarmkit"}


def _copy_source(dest: Path) -> Path:
    def ignore(_folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n in SKIP or n.endswith(".egg-info")}

    shutil.copytree(ROOT, dest, ignore=ignore)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    src = _copy_source(work / "src")
    out = work / "dist"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(out), str(src)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (found,) = out.glob(f"{DIST}-*.whl")
    return found


def test_the_wheel_holds_only_swarmkit_and_its_dist_info(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    dist_info = {t for t in tops if t.endswith(".dist-info")}
    assert tops - dist_info == {"swarmkit"}, sorted(tops)
    assert len(dist_info) == 1 and next(iter(dist_info)).startswith(f"{DIST}-")
    # The parts, their data and their type marker are all there.
    for must in (
        "swarmkit/store/__init__.py",
        "swarmkit/store/migrations/versions/0001_initial_tables.py",
        "swarmkit/store/migrations/script.py.mako",
        "swarmkit/cli/__init__.py",
        "swarmkit/cli/__main__.py",
        "swarmkit/api/app.py",
        "swarmkit/runtime/schemas/run_list.schema.json",
        "swarmkit/runtime/agent_supervisor.py",
        "swarmkit/console/console.tcss",
        "swarmkit/console/demo/release.toml",
        "swarmkit/console/demo/swarmkit_demo_agents.py",
        "swarmkit/widgets/run_table.tcss",
        "swarmkit/store/py.typed",
        "swarmkit/runtime/py.typed",
    ):
        assert must in names, must
    # No test code ships: the sample store lives under tests/.
    assert not [n for n in names if "sample_store" in n or n.startswith("swarmkit/tests")]
    assert any(n.endswith("dist-info/licenses/LICENSE") or n.endswith("dist-info/LICENSE") for n in names)


def _fake_distribution(site: Path, name: str) -> dict[Path, str]:
    """A distribution that owns the top-level package `name`, as PyPI's `console` does."""
    pkg = site / name
    pkg.mkdir()
    files = {
        pkg / "__init__.py": f"# the stand-in {name} package\ndef main():\n    return {name!r}\n",
        pkg / "cli.py": "def main():\n    raise SystemExit('not swarmkit')\n",
    }
    info = site / f"{name}-9.9.9.dist-info"
    info.mkdir()
    files[info / "METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: 9.9.9\n"
    files[info / "INSTALLER"] = "pip\n"
    files[info / "RECORD"] = "".join(f"{p.relative_to(site)},,\n" for p in (pkg / "__init__.py", pkg / "cli.py", info / "METADATA", info / "INSTALLER")) + f"{name}-9.9.9.dist-info/RECORD,,\n"
    for path, text in files.items():
        path.write_text(text)
    return {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in files}


def test_the_wheel_installs_beside_packages_that_own_console_store_runtime_and_widgets(wheel, tmp_path):
    venv = tmp_path / "venv"
    # Without pip of its own (ensurepip costs ~10 s): this test's pip installs into it with --python.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True).stdout.strip())
    hashes: dict[Path, str] = {}
    for name in STAND_INS:
        hashes.update(_fake_distribution(site, name))
    # Swarmkit's dependencies (SQLAlchemy, Textual, ...) from this test's own
    # environment, after the venv's own packages: its .pth files are not read,
    # so the checkout's editable install stays out of the way.
    (site / "zz_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWARMKIT_", "PYTHON"))}
    env.update(SWARMKIT_HEARTBEAT="0.2", SWARMKIT_LEASE="5")

    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)

    where = run(str(py), "-c", "import swarmkit.store, swarmkit.console, console, store; print(swarmkit.store.__file__); print(console.main())")
    assert where.returncode == 0, where.stderr
    installed, stand_in = where.stdout.split()
    assert installed.startswith(str(site)) and stand_in == "console"

    helped = run(str(venv / "bin" / "swarmkit"), "--help")
    assert helped.returncode == 0 and "stop" in helped.stdout, helped.stderr

    flow = elsewhere / "two.toml"
    flow.write_text(textwrap.dedent("""
        name = "two"
        [[agents]]
        name = "one"
        command = "echo first"
        [[agents]]
        name = "two"
        command = "echo second"
    """))
    ran = run(str(venv / "bin" / "swarmkit"), "run", str(flow))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "first" in ran.stdout and "second" in ran.stdout and "completed (2/2 agents" in ran.stdout

    once = run(str(venv / "bin" / "swarmkit-console"), "--once")
    assert once.returncode == 0, once.stdout + once.stderr
    assert "two" in once.stdout and "completed" in once.stdout

    for path, digest in hashes.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{path} was changed by installing Swarmkit"
    assert not (site / "console" / "app.py").exists()


def test_both_commands_say_their_version():
    import subprocess
    import sys
    from importlib.metadata import version

    from swarmkit.store.schema import head_revision

    # The version, and the schema revision this code wants (what `swarmkit db status` compares a store with).
    for module, name in (("swarmkit.cli", "swarmkit"), ("swarmkit.console.cli", "swarmkit-console")):
        r = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.strip() == f"{name} {version('swarmkit-run-control')} (store schema revision {head_revision()})", (r.stdout, r.stderr)
