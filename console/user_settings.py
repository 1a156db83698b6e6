"""What the operator chose last, kept in their config folder: the theme.

`$XDG_CONFIG_HOME/swarmkit/console.json` (else `~/.config/swarmkit/console.json`).
A file that cannot be read or written is no reason to stop the console: it
starts with the default theme, and a choice that cannot be kept is logged.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger("swarmkit.console")


def settings_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or ""
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".config"
    return root / "swarmkit" / "console.json"


def _load() -> dict[str, Any]:
    try:
        value = json.loads(settings_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def saved_theme() -> str | None:
    theme = _load().get("theme")
    return theme if isinstance(theme, str) else None


def save_theme(name: str) -> None:
    path = settings_path()
    doc = _load()
    doc["theme"] = name
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("cannot keep the theme in %s: %s", path, exc)
