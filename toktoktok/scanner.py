"""A hand-written pre-tokenizer in numba that agrees with ``regex`` piece for piece.

Why a hand-written scanner. ``regex.findall`` with the docs/pretokenization.md pattern runs at
10-20 MB/s on one core, creates a Python string per piece and holds the GIL;
counting its pieces in a ``Counter`` halves that again. The named patterns
(default, cl100k, o200k, gpt2) are simple enough to be decided by looking at
one or two characters and a run or two of a class, so a small state machine
over the UTF-8 bytes does the same work at hundreds of MB/s, without the GIL,
and feeds a hash table of distinct pieces directly (``count_pieces``): no
Python object per piece.

How the alternation resolves (default and cl100k; ``i`` is the position, ``c`` the
character there, ``d`` the one after it). The pattern covers every character
(letters, numbers, white space, everything else), so the matches tile the
text and each piece is "the first alternative that matches at ``i``":

- ``c`` is ``'`` and ``d`` (and the char after it) spell s, t, m, d, re, ve
  or ll in any case ``regex`` accepts under ``(?i)``: the contraction.
- ``c`` is a letter: the letter run.
- ``c`` is not a letter, number, CR or LF and ``d`` is a letter:
  ``c`` plus the letter run (``[^\\r\\n\\p{L}\\p{N}]?\\p{L}+``; backtracking the
  optional character cannot help, since ``c`` itself is not a letter).
- ``c`` is a number: one to three numbers.
- ``c`` is neither white space, letter nor number, or ``c`` is a space and
  ``d`` is such a character: the run of such characters, then any CR/LF run.
- otherwise ``c`` starts a white space run ``[i, e)``:
  cl100k only: if ``e`` is the end of the text, the whole run (``\\s++$``);
  else if the run holds a CR or LF, the run up to and including its last
  one (``\\s*[\\r\\n]+`` backtracks to the last line break, and the ``+`` cannot
  extend past it; cl100k's ``\\s*[\\r\\n]`` ends at the same place);
  else if ``e`` is the end, the whole run (``\\s+(?!\\S)``);
  else if the run has two characters or more, all but its last
  (``(?!\\S)`` fails before ``\\S``, so ``\\s+`` gives back one character);
  else the one character (``\\s+`` or ``\\s``).

Possessive quantifiers in cl100k change nothing above: none of them is
followed by anything that could make it give back. So the two patterns differ
only in ``\\s++$`` (``$`` is end of text, ``\\Z`` in ``regex`` spelling).

o200k (``_piece_end_o200k``) splits words by case: its first two
alternatives are ``P?U*L+S?`` and ``P?U+L*S?``, where U is
``[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]``, L is ``[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]``,
P one character that is not CR, LF, letter or number, and S an optional
contraction (no contraction stands alone). ``regex`` tries the first with P,
then without, then the second likewise. Within one, ``U*`` backtracks: if
the upper run does not stop at a lowercase letter, ``L+`` can only begin
at the run's last character that is in both classes (Lm, Lo or a mark), and
the piece ends just after it (``_cased``). A mark is P, U and L at once, so
a mark that cannot begin P-then-word is a word of its own. Its punctuation
alternative also takes ``/`` with the line breaks after the run. Numbers and
white space are as in the default pattern.

gpt2 (``_piece_end_gpt2``) is simpler still: its contractions are ASCII and
lower case only; an optional space joins the letter, number (any count) or
other run after it; and white space has no line-break rule: the run to the
end of the text, else all but its last character, else the one character.

How the classes are derived: ``toktoktok.unicode_classes`` runs ``regex``
over every code point once and caches the table on disk (its docstring says
how); the kernels here take its two rows as arguments, so numba's compile
cache never freezes an old table.

How it is fast. The kernels decode UTF-8 inline (the buffer always comes
from ``str.encode``, so it is valid) and look classes up in the table; runs
of ASCII letters are taken 8 bytes at a time (``_letters``); every
loop has one exit; the hot kernels are compiled without numba's reference
counting (see the note above ``_NO_NRT``). ``count_pieces`` scans
``_BATCH`` pieces at a time, then counts them in an open-addressing table
whose keys are spans of the input (hash: 8 bytes per step; pieces of at most 8
bytes compare as one word). Measured on this project's 2-core machine, one
thread, english / code: ``regex.findall`` 21 / 13 MB/s, ``scan_default``
~410 / ~370 MB/s, ``count_pieces`` ~140-160 / ~125 MB/s (per CPU-second; see
``benchmarks/bench_scanner.py``). The kernels release the GIL and share
nothing writable, so threads on different batches do not slow each other.

API: ``scan`` / ``scan_default`` / ``scan_cl100k`` (piece end offsets; ``scan``
with ``O200K`` or ``GPT2`` for those patterns), ``count_pieces`` (distinct
pieces and counts), ``merge_counts``,
``count_pieces_threads``, ``split_text`` (strings, for tests), and the raw
kernels ``scan_kernel`` / ``count_kernel`` for numba callers, which pass the
two rows of ``unicode_tables()`` themselves.

How it is proven. ``tests/test_scanner.py`` compares every piece with
``regex.findall`` of ``Pattern.python``: hypothesis over arbitrary Unicode and
over text biased to the delicate places (every Unicode space, CR/LF mixes,
white space at the end of text, digits of many scripts, combining marks,
contractions in every case), every code point in several contexts, the
multilingual samples and 5 MB of each shared corpus.

    >>> text = "it's 2024!\\n\\n  x"
    >>> split_text(text)
    ['it', "'s", ' ', '202', '4', '!\\n\\n', ' ', ' x']
    >>> split_text("end \\n\\n ", CL100K), split_text("end \\n\\n ", DEFAULT)
    (['end', ' \\n\\n '], ['end', ' \\n\\n', ' '])
    >>> split_text("HTTPServer's x/\\n\\n//y", O200K)
    ["HTTPServer's", ' x', '/\\n\\n//', 'y']
    >>> split_text("it's 12345!! \\n x", GPT2)
    ['it', "'s", ' 12345', '!!', ' \\n', ' x']
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic

from toktoktok.unicode_classes import (
    C_D,
    C_E,
    C_L,
    C_M,
    C_R,
    C_S,
    C_T,
    C_V,
    LETTER,
    LOWER,
    MARK,
    MODIFIER_OR_OTHER,
    NUMBER,
    SPACE,
    TITLE,
    UPPER,
    unicode_tables,
)

# Re-exported: tests/test_scanner.py still reaches the table's cache through
# this module (``scanner.table_path``, ``scanner._store``, ...); their home is
# ``toktoktok.unicode_classes``, where new code should import them from.
from toktoktok.unicode_classes import CLASS_RECIPE as _CLASS_RECIPE  # noqa: F401
from toktoktok.unicode_classes import CONTRACTION_LETTERS as _CONTRACTION_LETTERS  # noqa: F401
from toktoktok.unicode_classes import load_cached as _load_cached  # noqa: F401
from toktoktok.unicode_classes import store_cached as _store  # noqa: F401
from toktoktok.unicode_classes import table_path  # noqa: F401

# Which pattern a kernel runs (the ``which`` argument).
DEFAULT = 0
CL100K = 1
O200K = 2
GPT2 = 3
PATTERN_IDS = {"default": DEFAULT, "cl100k": CL100K, "o200k": O200K, "gpt2": GPT2}


# ---------------------------------------------------------------------------
# UTF-8 and the pieces' building blocks (all positions are byte offsets).
#
# Speed notes (measured, english text, one core): numba brackets every call
# that passes an array with atomic reference count updates, which LLVM removes
# only in simple cases; left in, they cost more than the scanning (150 MB/s
# instead of 420) and make threads contend for the shared table's counter.
# So the hot kernels are compiled without reference counting (``_NO_NRT``:
# they allocate nothing), the piece-level helpers are inlined by numba
# (``inline="always"``), and the loop-free character helpers are left to
# LLVM's inliner (inlining them in numba too only slows compilation).

_CASE = np.uint64(0x2020202020202020)
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_HIGH = np.uint64(0x8080808080808080)
_FROM_A = np.uint64(0x1F1F1F1F1F1F1F1F)  # a byte's high bit set iff it was >= 0x61
_PAST_Z = np.uint64(0x0505050505050505)  # ... iff it was >= 0x7B

END = 256  # the "class" of the position just past the text

# numba's private option for "compile without reference counting" (numba's own
# tests use it; kernels compiled so must not allocate). Kept in one place: if
# a numba release drops it, deleting it costs speed, never correctness.
_NO_NRT = {"_nrt": False}


@njit(cache=True)
def _width(b):
    """Byte length of the UTF-8 character whose first byte is ``b``."""
    return 1 + np.int64(b >= 0xC0) + np.int64(b >= 0xE0) + np.int64(b >= 0xF0)


@njit(cache=True)
def _code_point(buf, i):
    """The code point of the UTF-8 character at ``buf[i]``."""
    b = np.int64(buf[i])
    if b < 0x80:
        return b
    if b < 0xE0:
        return ((b & 0x1F) << 6) | (np.int64(buf[i + 1]) & 0x3F)
    if b < 0xF0:
        return ((b & 0x0F) << 12) | ((np.int64(buf[i + 1]) & 0x3F) << 6) | (np.int64(buf[i + 2]) & 0x3F)
    return (
        ((b & 0x07) << 18)
        | ((np.int64(buf[i + 1]) & 0x3F) << 12)
        | ((np.int64(buf[i + 2]) & 0x3F) << 6)
        | (np.int64(buf[i + 3]) & 0x3F)
    )


@njit(cache=True)
def _cw(buf, i, end, cls):
    """(class bits, byte length) of the character at ``i``; ``(END, 0)`` at the end.

    For ``buf = "aé".encode()``: ``_cw(buf, 1, 3, cls)`` is ``(cls[0xE9], 2)``.
    """
    if i >= end:
        return END, 0
    b = np.int64(buf[i])
    if b < 0x80:
        return np.int64(cls[b]), 1
    return np.int64(cls[_code_point(buf, i)]), _width(b)


@njit(cache=True)
def _ascii_letters(x):
    """The high bit of each byte of the word ``x`` that is an ASCII letter, the
    rest 0: for b"aZ1_" (0x5F315A61), 0x00008080 in the low 4 bytes.

    A byte is a letter when, bit 5 set (lower case) and bit 7 cleared, it lies
    in 0x61..0x7A and its own bit 7 was clear; the two range tests are adds
    that set bit 7, and no byte's add can carry into the next.
    """
    t = (x | _CASE) & _LOW7
    return (t + _FROM_A) & ~(t + _PAST_Z) & ~x & _HIGH


@njit(cache=True, inline="always")
def _letters(buf, j, end, cls):
    """End of the letter run starting at ``j`` (``\\p{L}*``).

    ASCII letters are taken 8 bytes at a time (``_ascii_letters``) until a byte
    that is not one; an ASCII byte there ends the run, any other goes on a
    character at a time. With ``buf = b"Hello, w"``, ``_letters(buf, 0, 8, cls)``
    is 5. One load, a few adds and a count of trailing zeros per 8 bytes,
    instead of a step and a table lookup per byte: counting 100 MB of C
    source in 512 KiB batches on one core went from 197 to 248 MB/s. (The
    same idea for whole pieces, every kind decided on 8 bytes' class masks,
    was slower: 220 -> 160 MB/s branch-free, no change with branches; and
    for punctuation runs alone, 238 -> 218.)
    """
    while j + 8 <= end:
        other = ~_ascii_letters(_load8(buf, j)) & _HIGH
        if other == 0:
            j += 8
            continue
        j += np.int64(trailing_zeros(other) >> np.uint64(3))
        if buf[j] < 0x80:
            return j
        break
    c, w = _cw(buf, j, end, cls)
    while c & LETTER:
        j += w
        c, w = _cw(buf, j, end, cls)
    return j


@njit(cache=True, inline="always")
def _numbers(buf, j, end, cls):
    """End of ``\\p{N}{0,2}`` at ``j``: the rest of ``\\p{N}{1,3}``."""
    c, w = _cw(buf, j, end, cls)
    if c & NUMBER:
        j += w
        c, w = _cw(buf, j, end, cls)
        if c & NUMBER:
            j += w
    return j


@njit(cache=True, inline="always")
def _punct_tail(buf, j, end, cls, slash):
    """End of ``[^\\s\\p{L}\\p{N}]*[\\r\\n]*`` at ``j`` (with ``slash``: o200k's
    ``[\\r\\n/]*``, which takes slashes along with the line breaks)."""
    c, w = _cw(buf, j, end, cls)
    while not c & (LETTER | NUMBER | SPACE | END):
        j += w
        c, w = _cw(buf, j, end, cls)
    while j < end and (buf[j] == 10 or buf[j] == 13 or (slash and buf[j] == 47)):
        j += 1
    return j


@njit(cache=True, inline="always")
def _contraction(buf, j, end, contr):
    """End of ``(?i:s|t|re|ve|m|ll|d)`` at ``j`` (just after an apostrophe), or -1.

    With ``buf = b"'Ll"`` and ``j = 1``: ``L`` is the contraction letter l and
    so is ``l``, so 3 is returned; for ``b"'Lx"`` -1.
    """
    if j >= end:
        return -1
    code = contr[_code_point(buf, j)]
    k = j + _width(buf[j])
    if code == C_S or code == C_T or code == C_M or code == C_D:
        return k
    if (code == C_R or code == C_V or code == C_L) and k < end:
        second = contr[_code_point(buf, k)]
        if (code == C_L and second == C_L) or (code != C_L and second == C_E):
            return k + _width(buf[k])
    return -1


@njit(cache=True, inline="always")
def _space_run(buf, i, c, w, end, cls, cl100k):
    """End of the white space piece starting at ``i`` (first char: class ``c``, ``w`` bytes).

    Alternatives ``\\s++$`` (cl100k), ``\\s*[\\r\\n]+``, ``\\s+(?!\\S)``, ``\\s+``.
    With ``buf = b"\\n  x"`` and ``i = 0`` the run is ``"\\n  "`` and its last
    line break ends at 1; at ``i = 1`` the run ``"  "`` precedes ``x`` and
    gives back its last space: 2.
    """
    k = i
    last_break_end = -1
    last_start = i
    while c & SPACE:
        b = buf[k]
        last_start = k
        k += w
        if b == 10 or b == 13:
            last_break_end = k
        c, w = _cw(buf, k, end, cls)
    if k == end and cl100k:
        return end
    if last_break_end >= 0:
        return last_break_end
    if k == end:
        return end
    if last_start > i:
        return last_start
    return i + _width(buf[i])


@njit(cache=True, inline="always")
def _piece_end(buf, i, end, cls, contr, cl100k):
    """End of the piece starting at ``i``: the first alternative that matches.

    For ``buf = b"x'Re 'Re"``: at ``i = 1`` the contraction ``'Re`` ends at 4;
    at ``i = 4`` the space comes first, and a space before punctuation joins
    it (`` ?[^\\s\\p{L}\\p{N}]+``), so the piece is ``" '"``, ending at 6, and
    ``Re`` is a piece of its own, as ``regex`` finds.
    """
    c, w = _cw(buf, i, end, cls)
    j = i + w
    if c & LETTER:
        return _letters(buf, j, end, cls)
    if c & NUMBER:
        return _numbers(buf, j, end, cls)
    b = buf[i]
    if b == 39:  # the apostrophe: a contraction comes first
        k = _contraction(buf, j, end, contr)
        if k >= 0:
            return k
    c2, w2 = _cw(buf, j, end, cls)
    if c2 & LETTER and b != 10 and b != 13:  # [^\r\n\p{L}\p{N}]?\p{L}+
        return _letters(buf, j + w2, end, cls)
    if b == 32 and not c2 & (LETTER | NUMBER | SPACE | END):  # " " before punctuation
        return _punct_tail(buf, j + w2, end, cls, False)
    if c & SPACE:
        return _space_run(buf, i, c, w, end, cls, cl100k)
    return _punct_tail(buf, j, end, cls, False)


# o200k's classes: [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] ("upper") and [\p{Ll}\p{Lm}\p{Lo}\p{M}] ("lower").
_UPPERISH = UPPER | TITLE | MODIFIER_OR_OTHER | MARK
_LOWERISH = LOWER | MODIFIER_OR_OTHER | MARK


@njit(cache=True, inline="always")
def _cased(buf, j, end, cls):
    """Ends of o200k's two word alternatives without their first character,
    ``U*L+`` and ``U+L*`` (U, L: the upper and lower classes), at ``j``: -1 where
    one does not match.

    ``U*`` takes the run of upper characters ``[j, k)``. If the character at
    ``k`` is lower (then it is ``Ll``), ``L+`` runs on from it, and both
    alternatives end where the lower run ends. Otherwise ``U*`` gives back
    characters until one is lower as well (``Lm``, ``Lo``, ``M`` are in both
    classes): ``U*L+`` ends just after the last such character of the run;
    ``U+L*`` ends at ``k``. For "ABc" both end at 3; for "AB!" ``U*L+``
    fails and ``U+L*`` ends at 2.
    """
    k = j
    last_both = -1
    c, w = _cw(buf, k, end, cls)
    while c & _UPPERISH:
        k += w
        if c & _LOWERISH:
            last_both = k
        c, w = _cw(buf, k, end, cls)
    if c & LOWER:
        while c & _LOWERISH:
            k += w
            c, w = _cw(buf, k, end, cls)
        return k, k
    return last_both, (k if k > j else -1)


@njit(cache=True, inline="always")
def _with_suffix(buf, e, end, contr):
    """``e`` extended by o200k's optional ``(?i:'s|'t|'re|'ve|'m|'ll|'d)``."""
    if e < end and buf[e] == 39:
        k = _contraction(buf, e + 1, end, contr)
        if k >= 0:
            return k
    return e


@njit(cache=True, inline="always")
def _piece_end_o200k(buf, i, end, cls, contr):
    """End of the o200k piece starting at ``i``: the first alternative that matches.

    Alternatives in order: ``P?U*L+S?``, ``P?U+L*S?`` (P: one character
    that is not CR, LF, letter or number; S: a contraction), ``\\p{N}{1,3}``,
    `` ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*``, then white space as in the default
    pattern. Each word alternative is tried with P before without it. For
    "!Ab'S x": "!Ab'S" (P, U, L, S), then " x".
    """
    c, w = _cw(buf, i, end, cls)
    if c & LETTER:  # no P: the word alternatives at i, the first that matches
        first, second = _cased(buf, i, end, cls)
        return _with_suffix(buf, first if first >= 0 else second, end, contr)
    if c & NUMBER:
        return _numbers(buf, i + w, end, cls)
    b = buf[i]
    if b != 10 and b != 13:  # the character at i can be P
        first, second = _cased(buf, i + w, end, cls)
        if first >= 0:
            return _with_suffix(buf, first, end, contr)
        if c & MARK:  # a mark is upper and lower too: U*L+ matches without P
            first, second = _cased(buf, i, end, cls)
            return _with_suffix(buf, first, end, contr)
        if second >= 0:
            return _with_suffix(buf, second, end, contr)
    c2, w2 = _cw(buf, i + w, end, cls)
    if b == 32 and not c2 & (LETTER | NUMBER | SPACE | END):  # " " before punctuation
        return _punct_tail(buf, i + w + w2, end, cls, True)
    if c & SPACE:
        return _space_run(buf, i, c, w, end, cls, False)
    return _punct_tail(buf, i + w, end, cls, True)


@njit(cache=True, inline="always")
def _run_of(buf, j, end, cls, bits, within):
    """End of the run at ``j`` of characters whose class has (``within``) or has
    none (not ``within``) of ``bits``; the end of the text stops either."""
    c, w = _cw(buf, j, end, cls)
    while c != END and ((c & bits) != 0) == within:
        j += w
        c, w = _cw(buf, j, end, cls)
    return j


@njit(cache=True, inline="always")
def _piece_end_gpt2(buf, i, end, cls):
    """End of the gpt2 piece starting at ``i``: the first alternative that matches.

    Alternatives in order: ``'(?:[sdmt]|ll|ve|re)`` (lower case, ASCII only),
    `` ?\\p{L}++``, `` ?\\p{N}++`` (no limit on digits), `` ?[^\\s\\p{L}\\p{N}]++``
    (no line breaks after it), ``\\s++$``, ``\\s+(?!\\S)``, ``\\s``. For
    "it's 12345!! \\n x": "it", "'s", " 12345", "!!", " \\n", " x".
    """
    b = buf[i]
    if b == 39 and i + 1 < end:  # the contractions: bytes, since they are ASCII
        d = buf[i + 1]
        if d == 115 or d == 100 or d == 109 or d == 116:  # s d m t
            return i + 2
        if i + 2 < end and ((d == 108 and buf[i + 2] == 108) or (d == 118 and buf[i + 2] == 101)
                            or (d == 114 and buf[i + 2] == 101)):  # ll ve re
            return i + 3
    c, w = _cw(buf, i, end, cls)
    j = i
    if b == 32:  # the optional space: it joins a letter, number or other run after it
        c2, w2 = _cw(buf, i + 1, end, cls)
        if c2 != END and not c2 & SPACE:
            c, w, j = c2, w2, i + 1
    if c & LETTER:
        return _run_of(buf, j + w, end, cls, LETTER, True)
    if c & NUMBER:
        return _run_of(buf, j + w, end, cls, NUMBER, True)
    if not c & SPACE:
        return _run_of(buf, j + w, end, cls, LETTER | NUMBER | SPACE, False)
    k = i
    last_start = i
    while c & SPACE:  # the white space run [i, k); last_start: its last character
        last_start = k
        k += w
        c, w = _cw(buf, k, end, cls)
    if k == end:
        return end
    if last_start > i:
        return last_start
    return i + _width(buf[i])


@njit(cache=True, inline="always")
def piece_end(buf, i, end, cls, contr, which):
    """End of the piece of pattern ``which`` that starts at ``i`` (``i < end``):
    one step of ``scan_kernel``, for a caller that handles each piece as it is
    found (``summing.RunningSum.count``)."""
    if which == O200K:
        return _piece_end_o200k(buf, i, end, cls, contr)
    if which == GPT2:
        return _piece_end_gpt2(buf, i, end, cls)
    return _piece_end(buf, i, end, cls, contr, which == CL100K)


@njit(cache=True, nogil=True, **_NO_NRT)
def scan_kernel(buf, start, end, out_ends, cls, contr, which):
    """Write the end offsets of the pieces of ``buf[start:end]``; return their count.

    Stops early when ``out_ends`` is full: a piece end is a place where the
    scan can resume, so calling again from ``out_ends[n - 1]`` (same ``end``)
    finds the remaining pieces. ``which`` is ``DEFAULT`` or ``CL100K``. For
    ``b"ab cd"`` and an ``out_ends`` of length 1: 1 piece, ending at 2; again
    from 2: the piece ending at 5.
    """
    n = 0
    i = start
    cap = len(out_ends)
    cl100k = which == CL100K
    if which == O200K:
        while i < end and n < cap:
            i = _piece_end_o200k(buf, i, end, cls, contr)
            out_ends[n] = i
            n += 1
        return n
    if which == GPT2:
        while i < end and n < cap:
            i = _piece_end_gpt2(buf, i, end, cls)
            out_ends[n] = i
            n += 1
        return n
    while i < end and n < cap:
        i = _piece_end(buf, i, end, cls, contr, cl100k)
        out_ends[n] = i
        n += 1
    return n


def _check_which(which: int) -> None:
    if which not in (DEFAULT, CL100K, O200K, GPT2):
        raise ValueError(f"which must be DEFAULT (0), CL100K (1), O200K (2) or GPT2 (3), not {which!r}")


def scan(buf: np.ndarray, start: int, end: int, out_ends: np.ndarray, which: int) -> int:
    """Pieces of valid UTF-8 ``buf[start:end]`` under pattern ``which``: their end offsets.

    The GIL is released while the kernel runs.

        >>> buf = np.frombuffer("Hi  there\\n".encode(), np.uint8)
        >>> ends = np.empty(len(buf), np.int64)
        >>> n = scan(buf, 0, len(buf), ends, DEFAULT)
        >>> ends[:n].tolist()     # "Hi", " ", " there", "\\n"
        [2, 3, 9, 10]
    """
    t = unicode_tables()
    _check_which(which)
    if len(out_ends) < end - start:
        raise ValueError("out_ends needs room for end - start pieces")
    return scan_kernel(buf, start, end, out_ends, t[0], t[1], which)


def scan_default(buf: np.ndarray, start: int, end: int, out_ends: np.ndarray) -> int:
    """``scan`` with the docs/pretokenization.md default pattern.

        >>> buf = np.frombuffer("we'LL go".encode(), np.uint8)
        >>> ends = np.empty(len(buf), np.int64)
        >>> ends[: scan_default(buf, 0, len(buf), ends)].tolist()   # "we", "'LL", " go"
        [2, 5, 8]
    """
    return scan(buf, start, end, out_ends, DEFAULT)


def scan_cl100k(buf: np.ndarray, start: int, end: int, out_ends: np.ndarray) -> int:
    """``scan`` with tiktoken's cl100k pattern (white space at the end is one piece).

        >>> buf = np.frombuffer("a \\n ".encode(), np.uint8)
        >>> ends = np.empty(len(buf), np.int64)
        >>> ends[: scan_cl100k(buf, 0, len(buf), ends)].tolist()   # "a", " \\n "
        [1, 4]
    """
    return scan(buf, start, end, out_ends, CL100K)


def split_text(text: str, which: int = DEFAULT) -> list[str]:
    """The pieces of ``text`` as strings (for tests and small inputs).

        >>> split_text("x  1234")
        ['x', ' ', ' ', '123', '4']
    """
    buf = np.frombuffer(text.encode(), dtype=np.uint8)
    ends = np.empty(len(buf), dtype=np.int64)
    n = scan(buf, 0, len(buf), ends, which)
    raw = buf.tobytes()
    out, prev = [], 0
    for e in ends[:n].tolist():
        out.append(raw[prev:e].decode())
        prev = e
    return out


# ---------------------------------------------------------------------------
# Counting distinct pieces: open addressing over byte spans, growable.
#
# A slot holds ``tag << 32 | id`` (``tag``: the hash's high 32 bits; an empty
# slot is all ones; ids stay below 2**32), so a probe rarely leaves the table. Per id, one row of
# ``meta``: the span's first 8 bytes as a little-endian word, its length, its
# first occurrence and its count; spans of at most 8 bytes (most pieces)
# compare by word and length alone. The table is kept at most half full.

_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)
_K1 = np.uint64(0x9E3779B97F4A7C15)
_K2 = np.uint64(0xFF51AFD7ED558CCD)
_LOW32 = np.uint64(0xFFFFFFFF)
W_WORD, W_LEN, W_START, W_COUNT = 0, 1, 2, 3  # columns of meta


@intrinsic
def _load8(typingctx, src, i):
    """The 8 bytes ``src[i:i+8]`` of a uint8 array as a little-endian integer:
    one unaligned load (the caller keeps ``i + 8 <= len(src)``). Eight byte
    loads shifted and or-ed together, which LLVM was meant to fuse, were not
    fused: 6 times slower, and counting 100 MB of C source in 512 KiB
    batches went from 174 to 182 MB/s on one core with this load."""
    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        at = builder.gep(array.data, [args[1]])
        return builder.load(builder.bitcast(at, ir.IntType(64).as_pointer()), align=1)

    return types.uint64(src, types.intp), codegen


@njit(cache=True, inline="always")
def _word(src, i, n):
    """``src[i:i+n]`` (0 <= n <= 8) as a little-endian integer: b"ab" -> 0x6261.

    Away from the end of ``src`` one 8-byte load and a mask, without a loop
    whose length varies piece by piece (a mispredicted branch costs more).
    Inlined by numba, as ``_mix`` is: with both as plain calls from
    ``span_key``, counting 100 MB of C source in 512 KiB batches took
    0.494-0.498 s of CPU against 0.455-0.464 inlined (the two trees run
    side by side, one a core, four times). Inlining the scanner's character
    helpers (``_cw``, ``_code_point``, ``_width``, ``_ascii_letters``) too
    gained nothing more and made the first ingest of 100 MB, compiling into an
    empty cache, take 272 s instead of 39.
    """
    if n <= 0:
        return np.uint64(0)
    if i + 8 <= len(src):
        return _load8(src, i) & (_EMPTY >> np.uint64(64 - 8 * n))
    w = np.uint64(0)
    for k in range(n):
        w |= np.uint64(src[i + k]) << np.uint64(8 * k)
    return w


@njit(cache=True, inline="always")
def _mix(h):
    h = (h ^ (h >> np.uint64(33))) * _K2
    return h ^ (h >> np.uint64(29))


@njit(cache=True, inline="always")
def span_key(src, i, e):
    """(hash, first word) of ``src[i:e]``: 8 bytes at a time, then a final mix.

    A piece of at most 8 bytes (96% of them in C source) takes one multiply and
    a fold of the high half into the low (the table's slot comes from the low
    bits, its tag from the high): counting went from 171 to 183 MB/s on one
    core (512 KiB batches of kernel source).
    """
    n = e - i
    first = _word(src, i, min(n, 8))
    if n <= 8:
        h = ((np.uint64(n) * _K1) ^ first) * _K2
        return h ^ (h >> np.uint64(32)), first
    h = _mix((np.uint64(n) * _K1) ^ first)
    k = i + 8
    while k < e:
        h = _mix(h ^ _word(src, k, min(e - k, 8)))
        k += 8
    return _mix(h * _K1), first


@njit(cache=True, inline="always")
def _same_tail(src, a, b, n):
    """Whether ``src[a+8:a+n] == src[b+8:b+n]`` (the bytes after the first word)."""
    k = 8
    while k < n and src[a + k] == src[b + k]:
        k += 1
    return k >= n


@njit(cache=True, inline="always")
def _find_or_add(table, meta, n, src, i, e, weight):
    """Add ``weight`` to span ``src[i:e]``'s count, inserting it as id ``n`` if new.

    Returns the new number of distinct spans. Linear probing: for ids 0 and 1
    in slots 5 and 6, a new span hashing to slot 5 goes to slot 7 as id 2.
    """
    h, first = span_key(src, i, e)
    size = e - i
    tag = h >> np.uint64(32)
    mask = np.uint64(len(table) - 1)
    slot = h & mask
    entry = table[slot]
    while entry != _EMPTY and not (
        (entry >> np.uint64(32)) == tag
        and meta[entry & _LOW32, W_WORD] == np.int64(first)
        and meta[entry & _LOW32, W_LEN] == size
        and (size <= 8 or _same_tail(src, meta[entry & _LOW32, W_START], i, size))
    ):
        slot = (slot + np.uint64(1)) & mask
        entry = table[slot]
    if entry != _EMPTY:
        meta[entry & _LOW32, W_COUNT] += weight
        return n
    table[slot] = (tag << np.uint64(32)) | np.uint64(n)
    meta[n, W_WORD] = np.int64(first)
    meta[n, W_LEN] = size
    meta[n, W_START] = i
    meta[n, W_COUNT] = weight
    return n + 1


@njit(cache=True, nogil=True, **_NO_NRT)
def _add_pieces(table, meta, n, buf, first, ends, k):
    """Count the ``k`` pieces ``buf[first:ends[0]]``, ``buf[ends[0]:ends[1]]``, ..."""
    prev = first
    for t in range(k):
        n = _find_or_add(table, meta, n, buf, prev, ends[t], 1)
        prev = ends[t]
    return n


@njit(cache=True, nogil=True, **_NO_NRT)
def _add_weighted(table, meta, n, src, off, weights):
    """Add ``weights[p]`` to span ``src[off[p]:off[p+1]]`` for every p."""
    for p in range(len(weights)):
        n = _find_or_add(table, meta, n, src, off[p], off[p + 1], weights[p])
    return n


@njit(cache=True)
def _grow(table, meta, n, src):
    """Double the table (and ``meta``), re-placing ids 0..n-1 by their spans' hashes."""
    cap = 2 * len(table)
    new_table = np.full(cap, _EMPTY, dtype=np.uint64)
    mask = np.uint64(cap - 1)
    for slot in range(len(table)):
        entry = table[slot]
        if entry != _EMPTY:
            p = entry & _LOW32
            h, _ = span_key(src, meta[p, W_START], meta[p, W_START] + meta[p, W_LEN])
            s = h & mask
            while new_table[s] != _EMPTY:
                s = (s + np.uint64(1)) & mask
            new_table[s] = entry
    new_meta = np.empty((cap // 2, 4), dtype=np.int64)
    new_meta[:n] = meta[:n]
    return new_table, new_meta


@njit(cache=True)
def _flatten(src, meta, n):
    """The first ``n`` spans as (piece_buf, piece_off, counts)."""
    off = np.empty(n + 1, dtype=np.int64)
    off[0] = 0
    for p in range(n):
        off[p + 1] = off[p] + meta[p, W_LEN]
    out = np.empty(off[n], dtype=np.uint8)
    for p in range(n):
        out[off[p] : off[p + 1]] = src[meta[p, W_START] : meta[p, W_START] + meta[p, W_LEN]]
    return out, off, meta[:n, W_COUNT].copy()


_BATCH = 1 << 12  # pieces scanned, then counted, at a time


@njit(cache=True, nogil=True)
def count_kernel(buf, seg_off, cls, contr, which):
    """Scan every segment ``buf[seg_off[s]:seg_off[s+1]]``; count distinct pieces.

    Pieces are scanned ``_BATCH`` at a time into a scratch array, then counted;
    the table doubles before a batch could fill it past half. Returns
    ``(piece_buf, piece_off, counts)`` in order of first occurrence.
    """
    table = np.full(1 << 14, _EMPTY, dtype=np.uint64)
    meta = np.empty((1 << 13, 4), dtype=np.int64)
    ends = np.empty(_BATCH, dtype=np.int64)
    n = 0
    for s in range(len(seg_off) - 1):
        i = seg_off[s]
        end = seg_off[s + 1]
        while i < end:
            k = scan_kernel(buf, i, end, ends, cls, contr, which)
            while 2 * (n + k) > len(table):
                table, meta = _grow(table, meta, n, buf)
            n = _add_pieces(table, meta, n, buf, i, ends, k)
            i = ends[k - 1]
    return _flatten(buf, meta, n)


@njit(cache=True, nogil=True)
def merge_kernel(piece_buf, piece_off, weights):
    """Sum the weights of equal spans ``piece_buf[piece_off[p]:piece_off[p+1]]``."""
    cap = 1 << 14
    while cap < 2 * len(weights) + 2:
        cap *= 2
    table = np.full(cap, _EMPTY, dtype=np.uint64)
    meta = np.empty((cap // 2, 4), dtype=np.int64)
    n = _add_weighted(table, meta, 0, piece_buf, piece_off, weights)
    return _flatten(piece_buf, meta, n)


def count_pieces(buf: np.ndarray, seg_off: np.ndarray, which: int = DEFAULT):
    """Distinct pieces of every segment and their counts, as flat arrays.

    Segment ``s`` is ``buf[seg_off[s]:seg_off[s+1]]`` (valid UTF-8, matched
    on its own, as ``regex.findall`` over each segment). Returns
    ``(piece_buf uint8, piece_off int64, counts int64)``: piece ``p`` is
    ``piece_buf[piece_off[p]:piece_off[p+1]]``, in order of first occurrence.
    The GIL is released while it runs, so threads may count batches at once.

        >>> buf = np.frombuffer(b"a a\\na a", np.uint8)
        >>> pb, po, c = count_pieces(buf, np.array([0, 4, 7], np.int64))
        >>> [(pb[po[p]:po[p + 1]].tobytes(), int(c[p])) for p in range(len(c))]
        [(b'a', 2), (b' a', 2), (b'\\n', 1)]
    """
    t = unicode_tables()
    _check_which(which)
    seg_off = np.asarray(seg_off, dtype=np.int64)
    return count_kernel(buf, seg_off, t[0], t[1], which)


def merge_counts(results):
    """Merge several ``count_pieces`` results into one (order: first occurrence).

        >>> a = count_pieces(np.frombuffer(b"x y", np.uint8), np.array([0, 3]))
        >>> b = count_pieces(np.frombuffer(b" y z", np.uint8), np.array([0, 4]))
        >>> pb, po, c = merge_counts([a, b])
        >>> [(pb[po[p]:po[p + 1]].tobytes(), int(c[p])) for p in range(len(c))]
        [(b'x', 1), (b' y', 2), (b' z', 1)]
    """
    results = list(results)
    bufs = [r[0] for r in results]
    offs = [r[1][1:] + base for r, base in zip(results, np.cumsum([0] + [len(b) for b in bufs[:-1]]))]
    piece_buf = np.concatenate(bufs) if bufs else np.zeros(0, np.uint8)
    piece_off = np.concatenate([np.zeros(1, np.int64)] + offs)
    weights = np.concatenate([r[2] for r in results]) if results else np.zeros(0, np.int64)
    return merge_kernel(piece_buf, piece_off, weights)


def count_pieces_threads(buf: np.ndarray, seg_off: np.ndarray, which: int = DEFAULT, threads: int = 2):
    """``count_pieces`` over ``threads`` batches of segments at once, merged.

    Batches are contiguous runs of segments of about equal bytes; each thread
    counts its own batch (nogil) and ``merge_counts`` joins the tables.

        >>> buf = np.frombuffer(b"a b a b", np.uint8)
        >>> pb, po, c = count_pieces_threads(buf, np.array([0, 1, 3, 5, 7]))
        >>> sorted((pb[po[p]:po[p + 1]].tobytes(), int(c[p])) for p in range(len(c)))
        [(b' a', 1), (b' b', 2), (b'a', 1)]
    """
    seg_off = np.asarray(seg_off, dtype=np.int64)
    n_seg = len(seg_off) - 1
    if threads <= 1 or n_seg < 2:
        return count_pieces(buf, seg_off, which)
    targets = seg_off[0] + (seg_off[-1] - seg_off[0]) * np.arange(1, threads) // threads
    cuts = np.unique(np.concatenate([[0], np.searchsorted(seg_off, targets), [n_seg]]))
    batches = [seg_off[a : b + 1] for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
    unicode_tables()  # load once, before the threads race for it
    with ThreadPoolExecutor(max_workers=threads) as pool:
        results = list(pool.map(lambda off: count_pieces(buf, off, which), batches))
    return merge_counts(results)
