"""The Unicode class table the scanner's kernels look characters up in.

Why apart from ``scanner``: this is the data the kernels read, not the
kernels. It is made with ``regex`` and numpy alone (no numba), cached on disk
and loaded once per process; ``scanner`` passes its two rows to every kernel
as arguments, so numba's compile cache never freezes an old table.

What it holds: the class bits (``LETTER`` ... ``MODIFIER_OR_OTHER``) of row 0,
the contraction letter codes (``C_S`` ... ``C_E``) of row 1, the recipe that
derives both from ``regex`` (``derive_tables``; never by hand), and the cache
(``unicode_tables``). The ids are compiled into the kernels of ``scanner.py``
as constants; numba's cache of every kernel of the package is keyed by all
its sources (``jit_cache``), so changing an id here compiles them again.

    >>> t = unicode_tables()
    >>> t.shape, bool(t[0, ord("7")] & NUMBER), int(t[1, ord("T")]) == C_T
    ((2, 1114112), True, True)
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np

# Bit flags of the class row.
LETTER = 1  # \p{L}
NUMBER = 2  # \p{N}
SPACE = 4  # regex's \s
MARK = 8  # \p{M}
UPPER = 16  # \p{Lu}
LOWER = 32  # \p{Ll}
TITLE = 64  # \p{Lt}
MODIFIER_OR_OTHER = 128  # \p{Lm} or \p{Lo}

CLASS_RECIPE = (
    (LETTER, r"\p{L}"),
    (NUMBER, r"\p{N}"),
    (SPACE, r"\s"),
    (MARK, r"\p{M}"),
    (UPPER, r"\p{Lu}"),
    (LOWER, r"\p{Ll}"),
    (TITLE, r"\p{Lt}"),
    (MODIFIER_OR_OTHER, r"[\p{Lm}\p{Lo}]"),
)

# Codes of the contraction row: the letters after the apostrophe.
C_S, C_T, C_M, C_D, C_R, C_V, C_L, C_E = 1, 2, 3, 4, 5, 6, 7, 8
CONTRACTION_LETTERS = ((C_S, "s"), (C_T, "t"), (C_M, "m"), (C_D, "d"), (C_R, "r"), (C_V, "v"), (C_L, "l"), (C_E, "e"))

RECIPE = 1  # bump when the tables' layout or derivation changes
N_CODE_POINTS = 0x110000


# ---------------------------------------------------------------------------
# The tables, derived from the regex module and cached on disk.


def _all_code_points() -> tuple[str, np.ndarray]:
    """One string of every code point but the surrogates, and their values."""
    cps = np.concatenate([np.arange(0, 0xD800), np.arange(0xE000, N_CODE_POINTS)]).astype(np.int64)
    return cps.astype(np.uint32).tobytes().decode("utf-32-le"), cps


def derive_tables() -> np.ndarray:
    """Run ``regex`` over every code point; return the (2, 0x110000) uint8 table.

    Row 0 holds the class bits, row 1 the contraction letter code (0: none).
    ``regex`` runs over one string holding every code point (surrogates
    excepted: they cannot occur in UTF-8) and, per code point, sets the bit of
    each class of ``CLASS_RECIPE`` it matches (``\\p{M}`` and the four after
    it for o200k, which only ever uses Lm and Lo together). The second row
    records which contraction letter (s t m d r v l e) a code point is under
    ``(?i)``: each letter's set is what ``(?i:x)`` matches anywhere in that
    string, e.g. ``s`` matches ``S``, ``s`` and U+017F LATIN SMALL LETTER LONG S.

        >>> t = derive_tables()
        >>> bool(t[0, ord("a")] & LETTER), bool(t[0, 0x3000] & SPACE), int(t[1, 0x17F]) == C_S
        (True, True, True)
    """
    import regex

    text, cps = _all_code_points()
    table = np.zeros((2, N_CODE_POINTS), dtype=np.uint8)
    for bit, cls in CLASS_RECIPE:
        for m in regex.finditer(cls + "+", text):
            table[0, cps[m.start() : m.end()]] |= bit
    for code, letter in CONTRACTION_LETTERS:
        for m in regex.finditer(f"(?i:{letter})", text):
            if m.end() - m.start() != 1:
                raise RuntimeError(f"(?i:{letter}) matched {m.group()!r}: more than one character")
            cp = cps[m.start()]
            if table[1, cp]:
                raise RuntimeError(f"U+{cp:04X} matches two contraction letters")
            table[1, cp] = code
    return table


def cache_dir() -> Path:
    """``$TOKTOKTOK_CACHE`` if set, else ``~/.cache/toktoktok``."""
    env = os.environ.get("TOKTOKTOK_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "toktoktok"


def table_path() -> Path:
    """Where the table for the installed ``regex`` and this recipe is cached."""
    import regex

    return cache_dir() / f"unicode-classes-regex{regex.__version__}-recipe{RECIPE}.npy"


def load_cached(path: Path) -> np.ndarray | None:
    """The table cached at ``path``; None if it is missing, unreadable or not a table."""
    try:
        table = np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None
    if table.dtype != np.uint8 or table.shape != (2, N_CODE_POINTS):
        return None
    return table


def store_cached(path: Path, table: np.ndarray) -> None:
    """Write the cache atomically; an unwritable cache folder is not an error."""
    from toktoktok.atomic import atomic_path

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as f:
                np.save(f, table, allow_pickle=False)
    except OSError:
        pass


_lock = threading.Lock()
_tables: np.ndarray | None = None


def unicode_tables() -> np.ndarray:
    """The (2, 0x110000) class table: cached in memory, on disk, else derived.

    The disk cache is a ``.npy`` file in ``cache_dir()``, keyed by
    ``regex.__version__`` and ``RECIPE``, and written atomically.
    """
    global _tables
    with _lock:
        if _tables is None:
            path = table_path()
            table = load_cached(path)
            if table is None:
                table = derive_tables()
                store_cached(path, table)
            _tables = np.ascontiguousarray(table)
            _tables.setflags(write=False)
        return _tables
