"""Write store/compiled_sqlite.py: every statement of store/statements.py compiled for the SQLite dialect.

    python scripts/compile_sqlite.py [--check]

Run it after changing a statement there (or the tables under it);
tests/test_compiled_sqlite.py fails while the written module and the
statements differ. `--check` only says whether they do (exit 1 when they do).
"""

from __future__ import annotations

import argparse
import pprint
import sys
from pathlib import Path

from swarmkit.store import statements

TARGET = Path(statements.__file__).with_name("compiled_sqlite.py")

HEADER = '''"""Written by scripts/compile_sqlite.py from store/statements.py: do not edit.

Each statement compiled once for the SQLite dialect, by name: (SQL with `:name`
bound parameters, the statement's own constant parameters, the parameters
store/named.py converts and how, the result columns, and how each is converted).
A lite SQLite store runs these with sqlite3, without SQLAlchemy (issue 13).
"""

# fmt: off
STATEMENTS = '''


def render() -> str:
    return HEADER + pprint.pformat(statements.compiled(), width=140, sort_dicts=True) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="only compare; exit 1 when the module is out of date")
    args = ap.parse_args()
    text = render()
    current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
    if args.check:
        if current != text:
            print(f"{TARGET} is out of date: run python scripts/compile_sqlite.py", file=sys.stderr)
            return 1
        return 0
    if current != text:
        TARGET.write_text(text, encoding="utf-8")
        print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
