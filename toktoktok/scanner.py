"""The numba piece scanner: the pieces of the named patterns, as ``regex`` finds them.

A long module that stays whole: one state machine, whose per-pattern rules
share its class tests and byte loads and are inlined into one kernel.

For the named patterns (default, cl100k, o200k, gpt2; ``| DIGITS``: their
``-digits`` variants) a small state machine over the UTF-8 bytes decides each
piece from a character or two and a run or two of a class: no Python object
per piece, and the GIL released (docs/pretokenization.md, "Engines");
``tests/library/test_scanner.py`` proves it against ``regex.findall``.

API: ``scan`` (``scan_default``, ``scan_cl100k``) writes the pieces' end
offsets, ``split_text`` gives them as strings (tests, small inputs). numba
callers take ``scan_kernel`` or ``piece_end`` (one piece at a time) and pass
the two rows of ``unicode_classes.unicode_tables()`` themselves. Counting the
pieces found is ``toktoktok.span_table``'s.

    >>> split_text("it's 2024!\\n\\n  x")
    ['it', "'s", ' ', '202', '4', '!\\n\\n', ' ', ' x']
    >>> split_text("end \\n\\n ", CL100K), split_text("end \\n\\n ", DEFAULT)
    (['end', ' \\n\\n '], ['end', ' \\n\\n', ' '])
    >>> split_text("HTTPServer's x/\\n\\n//y", O200K)
    ["HTTPServer's", ' x', '/\\n\\n//', 'y']
    >>> split_text("it's 12345!! \\n x", GPT2), split_text(" 12", GPT2 | DIGITS)
    (['it', "'s", ' 12345', '!!', ' \\n', ' x'], [' 1', '2'])
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from toktoktok.patterns import (
    SCAN_CL100K,
    SCAN_DEFAULT,
    SCAN_GPT2,
    SCAN_O200K,
    SCAN_SINGLE_DIGITS,
    SCAN_SUPERWORD,
    SCANNER_RULES,
    SUPERWORD_RUN,
)
from toktoktok.unaligned import load8
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

# Which pattern a kernel runs (the ``which`` argument, a run-time value: a new
# named pattern adds no compiled kernel): a base rule, with DIGITS set for one
# number a piece. ``patterns.NAMED_PATTERNS`` lists the patterns, and
# ``PATTERN_IDS`` gives each its ``which``.
DEFAULT = SCAN_DEFAULT
CL100K = SCAN_CL100K
O200K = SCAN_O200K
GPT2 = SCAN_GPT2
SUPERWORD = SCAN_SUPERWORD
DIGITS = SCAN_SINGLE_DIGITS
PATTERN_IDS = SCANNER_RULES


# ---------------------------------------------------------------------------
# UTF-8 and the pieces' building blocks (all positions are byte offsets).
#
# The buffer always comes from ``str.encode`` (or was checked to be valid
# UTF-8), so the kernels decode it inline without checks, and look each
# character's class up in ``unicode_tables()``'s rows (``cls``, ``contr``).
#
# numba brackets every call that passes an array with atomic reference count
# updates, which LLVM removes only in simple cases; left in, they cost more
# than the scanning itself and make threads contend for a shared counter. So
# the hot kernels are compiled without reference counting (``NO_NRT``: they
# allocate nothing), the piece-level helpers are inlined by numba
# (``inline="always"``), and the loop-free character helpers are left to
# LLVM's inliner (inlining them in numba too only slows compilation).

_CASE = np.uint64(0x2020202020202020)
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_HIGH = np.uint64(0x8080808080808080)
_FROM_A = np.uint64(0x1F1F1F1F1F1F1F1F)  # a byte's high bit set iff it was >= 0x61
_PAST_Z = np.uint64(0x0505050505050505)  # ... iff it was >= 0x7B

END = 256  # the "class" of the position just past the text

# numba's private option for "compile without reference counting" (numba's own
# tests use it; kernels compiled so must not allocate). Kept in one place, for
# this module, span_table and summing: if a numba release drops it, deleting
# it costs speed, never correctness.
NO_NRT = {"_nrt": False}


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
    is 5.
    """
    # One load, a few adds and a count of trailing zeros per 8 bytes, instead
    # of a step and a table lookup per byte. (The same idea for whole pieces,
    # every kind decided on 8 bytes' class masks, was slower, with branches
    # or without; so was it for punctuation runs alone.)
    while j + 8 <= end:
        other = ~_ascii_letters(load8(buf, j)) & _HIGH
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
def _numbers(buf, j, end, cls, single):
    """End of ``\\p{N}{0,2}`` at ``j``: the rest of ``\\p{N}{1,3}``; with
    ``single`` (the ``-digits`` patterns' ``\\p{N}``), ``j`` itself."""
    if single:
        return j
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


# How a white space run ``[i, e)`` resolves (default and cl100k). cl100k
# only: if ``e`` is the end of the text, the whole run (``\s++$``). Else if
# the run holds a CR or LF, the run up to and including its last one
# (``\s*[\r\n]+`` backtracks to the last line break, and the ``+`` cannot
# extend past it; cl100k's ``\s*[\r\n]`` ends at the same place). Else if
# ``e`` is the end, the whole run (``\s+(?!\S)``). Else if the run has two
# characters or more, all but its last (``(?!\S)`` fails before ``\S``, so
# ``\s+`` gives back one character). Else the one character.
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


# How the alternation resolves (default and cl100k; ``c`` is the character at
# ``i``, ``d`` the one after it). The pattern covers every character, so the
# matches tile the text and each piece is the first alternative that matches
# at ``i``:
# - ``c`` is ``'`` and ``d`` (and the one after it) spell s, t, m, d, re, ve
#   or ll in any case ``regex`` accepts under ``(?i)``: the contraction;
# - ``c`` is a letter: the letter run;
# - ``c`` is not a letter, number, CR or LF and ``d`` is a letter: ``c`` and
#   the letter run (backtracking the optional ``[^\r\n\p{L}\p{N}]?`` cannot
#   help, since ``c`` itself is not a letter);
# - ``c`` is a number: one to three numbers (just ``c`` for ``\p{N}``, the
#   ``-digits`` variants, whose ``\p{N}`` is the same alternative in the
#   same place, so the rest of the order is untouched);
# - ``c`` is neither white space, letter nor number, or ``c`` is a space and
#   ``d`` is such a character: the run of such characters, then any CR/LF run;
# - otherwise ``c`` starts a white space run (``_space_run``).
# cl100k's possessive quantifiers change none of this (none is followed by
# anything that could make it give back), so the two patterns differ only in
# ``\s++$`` (``$``: the end of the text, ``\Z`` in ``regex``'s spelling).
@njit(cache=True, inline="always")
def _piece_end(buf, i, end, cls, contr, cl100k, single):
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
        return _numbers(buf, j, end, cls, single)
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
def _piece_end_o200k(buf, i, end, cls, contr, single):
    """End of the o200k piece starting at ``i``: the first alternative that matches.

    Alternatives in order: ``P?U*L+S?``, ``P?U+L*S?`` (P: one character
    that is not CR, LF, letter or number; S: a contraction), ``\\p{N}{1,3}``
    (``\\p{N}`` with ``single``),
    `` ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*``, then white space as in the default
    pattern. Each word alternative is tried with P before without it. For
    "!Ab'S x": "!Ab'S" (P, U, L, S), then " x".
    """
    c, w = _cw(buf, i, end, cls)
    if c & LETTER:  # no P: the word alternatives at i, the first that matches
        first, second = _cased(buf, i, end, cls)
        return _with_suffix(buf, first if first >= 0 else second, end, contr)
    if c & NUMBER:
        return _numbers(buf, i + w, end, cls, single)
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
def _piece_end_gpt2(buf, i, end, cls, single):
    """End of the gpt2 piece starting at ``i``: the first alternative that matches.

    Alternatives in order: ``'(?:[sdmt]|ll|ve|re)`` (lower case, ASCII only),
    `` ?\\p{L}++``, `` ?\\p{N}++`` (no limit on digits; `` ?\\p{N}`` with ``single``:
    the space joins the first digit only), `` ?[^\\s\\p{L}\\p{N}]++``
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
        return j + w if single else _run_of(buf, j + w, end, cls, NUMBER, True)
    if not c & SPACE:
        return _run_of(buf, j + w, end, cls, LETTER | NUMBER | SPACE, False)
    # white space has no line-break rule here: the run to the end of the text,
    # else all but its last character (``\s+(?!\S)``), else the one character
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
def _punct(c):
    """Whether class ``c`` is ``[^\\s\\p{L}\\p{N}]`` (not the end of the text)."""
    return not c & (LETTER | NUMBER | SPACE | END)


@njit(cache=True, inline="always")
def _piece_end_superword(buf, i, end, cls, single):
    """End of the superword piece starting at ``i``: the first alternative that matches.

    Alternatives in order: ``\\p{N}{1,3}`` (``\\p{N}`` with ``single``),
    `` ?P{2,}[\\r\\n]*`` (P: ``[^\\s\\p{L}\\p{N}]``), `` +(?!\\S)``, the run
    of at most ``SUPERWORD_RUN`` characters, none a line break, at none of
    which another alternative starts, then ``[\\r\\n]*``; and ``[\\r\\n]+``.
    For "by the way, 20 ...": "by the way, ", "20", " ...".
    """
    c, w = _cw(buf, i, end, cls)
    if c & NUMBER:
        return _numbers(buf, i + w, end, cls, single)
    b = buf[i]
    if b == 10 or b == 13:
        return _line_breaks(buf, i, end)
    j = i + 1 if b == 32 else i  # where `` ?P{2,}``'s run would start
    c1, w1 = _cw(buf, j, end, cls)
    if _punct(c1) and _punct(_cw(buf, j + w1, end, cls)[0]):
        return _punct_tail(buf, j + w1, end, cls, False)
    if b == 32:  # `` +(?!\\S)``: the spaces, all before white space or the end, else all but the last
        k = i + 1
        while k < end and buf[k] == 32:
            k += 1
        after = _cw(buf, k, end, cls)[0]
        if after & (SPACE | END):
            return k
        if k - i >= 2:
            return k - 1
    k = i
    n = 0
    c, w = _cw(buf, k, end, cls)  # the class of the character at k, carried from one step to the next
    known = True  # whether c, w are the character at k's
    while k < end and n < SUPERWORD_RUN:
        b = buf[k]
        if 97 <= (b | 32) <= 122:  # an ASCII letter, most of prose: no alternative starts at one
            k += 1
            n += 1
            known = False
            continue
        if b == 10 or b == 13:
            break
        if not known:
            c, w = _cw(buf, k, end, cls)
        if c & NUMBER:
            break
        c1, w1 = _cw(buf, k + w, end, cls)
        if _punct(c) and _punct(c1):
            break
        if b == 32 and (c1 & (SPACE | END) or (_punct(c1) and _punct(_cw(buf, k + w + w1, end, cls)[0]))):
            break
        k += w
        n += 1
        c, w, known = c1, w1, True
    return _line_breaks(buf, k, end)


@njit(cache=True, inline="always")
def _line_breaks(buf, j, end):
    """End of ``[\\r\\n]*`` at ``j``."""
    while j < end and (buf[j] == 10 or buf[j] == 13):
        j += 1
    return j


@njit(cache=True, inline="always")
def piece_end(buf, i, end, cls, contr, which):
    """End of the piece of pattern ``which`` that starts at ``i`` (``i < end``):
    one step of ``scan_kernel``, for a caller that handles each piece as it is
    found (``summing.RunningSum.count``)."""
    base = which & ~DIGITS
    single = (which & DIGITS) != 0
    if base == O200K:
        return _piece_end_o200k(buf, i, end, cls, contr, single)
    if base == GPT2:
        return _piece_end_gpt2(buf, i, end, cls, single)
    if base == SUPERWORD:
        return _piece_end_superword(buf, i, end, cls, single)
    return _piece_end(buf, i, end, cls, contr, base == CL100K, single)


@njit(cache=True, nogil=True, **NO_NRT)
def scan_kernel(buf, start, end, out_ends, cls, contr, which):
    """Write the end offsets of the pieces of ``buf[start:end]``; return their count.

    Stops early when ``out_ends`` is full: a piece end is a place where the
    scan can resume, so calling again from ``out_ends[n - 1]`` (same ``end``)
    finds the remaining pieces. ``which``: one of ``PATTERN_IDS``. For
    ``b"ab cd"`` and an ``out_ends`` of length 1: 1 piece, ending at 2; again
    from 2: the piece ending at 5.
    """
    n = 0
    i = start
    cap = len(out_ends)
    base = which & ~DIGITS
    single = (which & DIGITS) != 0
    cl100k = base == CL100K
    if base == O200K:
        while i < end and n < cap:
            i = _piece_end_o200k(buf, i, end, cls, contr, single)
            out_ends[n] = i
            n += 1
        return n
    if base == GPT2:
        while i < end and n < cap:
            i = _piece_end_gpt2(buf, i, end, cls, single)
            out_ends[n] = i
            n += 1
        return n
    if base == SUPERWORD:
        while i < end and n < cap:
            i = _piece_end_superword(buf, i, end, cls, single)
            out_ends[n] = i
            n += 1
        return n
    while i < end and n < cap:
        i = _piece_end(buf, i, end, cls, contr, cl100k, single)
        out_ends[n] = i
        n += 1
    return n


def check_which(which: int) -> None:
    """ValueError unless ``which`` is a pattern id the kernels run (one of ``PATTERN_IDS``)."""
    if which not in PATTERN_IDS.values():
        known = ", ".join(f"{name} ({rule})" for name, rule in PATTERN_IDS.items())
        raise ValueError(f"which must be the id of a named pattern, one of {known}; not {which!r}")


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
    check_which(which)
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
