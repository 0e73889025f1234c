"""Every `type: ignore` in the product's code names its error code and says why (mypy must report no
error: tools/check_types.py; an ignore without a reason would hide an error without a word)."""

from __future__ import annotations

import re
from pathlib import Path

from clonemem.layout import SOURCES

ROOT = Path(__file__).parent.parent
EXPLAINED = re.compile(r"type: ignore\[[\w,-]+\]\s*#\s*\S")


def test_every_type_ignore_says_why() -> None:
    bare = [
        f"{p.relative_to(ROOT)}:{n}"
        for d in SOURCES
        for p in sorted((ROOT / d).rglob("*.py"))
        for n, line in enumerate(p.read_text("utf-8").splitlines(), 1)
        if "type: ignore" in line and not EXPLAINED.search(line)
    ]
    assert not bare, f"`type: ignore` without an error code and a reason: {bare}"
