"""Widget styles live in `.tcss` files beside the code, loaded as each widget's DEFAULT_CSS."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).parent


def load_css(name: str) -> str:
    return (_HERE / name).read_text(encoding="utf-8")
