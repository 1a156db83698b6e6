"""Which schema revisions this code knows, and its head: read from the migration files' own lines.

Loads neither SQLAlchemy nor Alembic: `--version` names the revision (issue 13:
start-up), and only a migration loads Alembic (its import and its script
folder cost a one-shot verb more than its work). tests/test_start_up.py checks
that Alembic reads the same.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

MIGRATIONS = Path(__file__).with_name("migrations")

_REVISION_LINE = re.compile(r"""^(revision|down_revision)\s*(?::[^=\n]*)?=\s*(?:['"]([^'"]+)['"]|None)\s*$""", re.M)


@cache
def known_revisions() -> dict[str, str | None]:
    """Each revision of migrations/versions and the one it follows."""
    found: dict[str, str | None] = {}
    for path in sorted((MIGRATIONS / "versions").glob("*.py")):
        names = dict((m[1], m[2]) for m in _REVISION_LINE.finditer(path.read_text(encoding="utf-8")))
        if names.get("revision"):
            found[names["revision"]] = names.get("down_revision")
    return found


def head_revision() -> str:
    """The revision no other follows: the schema this code wants."""
    revisions = known_revisions()
    heads = set(revisions) - {down for down in revisions.values() if down}
    if len(heads) != 1:
        raise RuntimeError(f"the migrations in {MIGRATIONS} have {len(heads)} heads ({', '.join(sorted(heads))}); expected one")
    return heads.pop()
