"""Small shared helpers for the tests: real text that every machine has, and inventories."""

from __future__ import annotations

import inspect
import json
from collections import Counter
from pathlib import Path

import numpy as np
import regex

ROOT = Path(__file__).resolve().parents[1]  # the project
SHARED = ROOT.parent / "shared"  # beside the checkout; tests that use it skip when absent


def stdlib_text(limit: int = 200_000) -> str:
    """Real English and code: docstrings and sources of a few stdlib modules."""
    import collections
    import email.message
    import textwrap

    parts = []
    for mod in (json, collections, textwrap, email.message, inspect):
        parts.append(inspect.getdoc(mod) or "")
        parts.append(inspect.getsource(mod))
    return "\n\n".join(parts)[:limit]


def stdlib_sources(limit: int) -> str:
    """``limit`` characters of real text where no corpus is shared: the standard
    library's Python sources in name order, blank lines between files."""
    import sysconfig
    from pathlib import Path

    parts, size = [], 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        if "test" in path.parts or "site-packages" in path.parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        parts.append(text)
        size += len(text) + 2
        if size >= limit:
            break
    return "\n\n".join(parts)[:limit]


def piece_counts(text: str, pattern: str) -> Counter[bytes]:
    return Counter(p.encode("utf-8", "surrogatepass") for p in regex.findall(pattern, text))


def as_inventory(pieces: dict[bytes, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A {piece: count} mapping as the flat arrays the kernels take (sorted by piece)."""
    items = sorted(pieces.items())
    off = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum([len(p) for p, _ in items], out=off[1:])
    buf = np.frombuffer(b"".join(p for p, _ in items), dtype=np.uint8).copy()
    return buf, off, np.array([c for _, c in items], dtype=np.int64)
