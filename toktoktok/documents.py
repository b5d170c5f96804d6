"""Where ``.txt`` documents end: a numba kernel on UTF-8 bytes and its regex reference.

The rule is in docs/pretokenization.md#documents (white space there is
``regex``'s ``\\s``). The reference is that rule as a regular expression on
decoded text:

    >>> reference_ends("a\\n\\nb\\n\\n c\\r\\n\\r\\nd")
    [3, 12]

The kernel applies the same rule to the raw bytes, so that a file's
documents are found without decoding it or touching a Python object per
document (code has many short documents). It can work on bytes as read
because the rule only looks at line breaks (ASCII, never inside a multi-byte
character) and at the one character after them: that character is white
space exactly when its bytes spell one of the 25 code points of ``\\s``; any
other bytes, invalid ones included (U+FFFD once decoded), are not white space.

A document ends at byte ``e`` when the bytes just before ``e`` are
``\\n\\n``, ``\\r\\r``, ``\\n\\r``, ``\\r\\r\\n`` or ``\\n\\r\\n`` and the character
at ``e`` is not white space.

    >>> import numpy as np
    >>> data = np.frombuffer("a\\n\\nb\\n\\n c\\r\\n\\r\\nd".encode(), dtype=np.uint8)
    >>> doc_ends(data, 0, len(data), True).tolist()
    [3, 12]
"""

from __future__ import annotations

import numpy as np
import regex
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

# regex's left-to-right, non-overlapping search finds exactly the ends ``doc_ends``
# finds: an earlier match would have to end on a line break, which is white space
_BOUNDARY = regex.compile(r"(?:\n\n|\r\r|\n\r|[\r\n]\r\n)(?=\S)")


def reference_ends(text: str) -> list[int]:
    """Character offsets where the documents of ``text`` end (all but the last)."""
    return [m.end() for m in _BOUNDARY.finditer(text)]


_HIGH_BITS = np.uint64(0x8080808080808080)  # the top bit of each byte of a word
_LOW_BITS = np.uint64(0x7F7F7F7F7F7F7F7F)
_EVERY_LF = np.uint64(0x0A0A0A0A0A0A0A0A)
_EVERY_CR = np.uint64(0x0D0D0D0D0D0D0D0D)
_BLOCK = 16  # words doc_ends tests at once for a line break after another (32 ran as fast, 8 and 64 slower)


@njit(cache=True, nogil=True, inline="always")
def _is_break(byte):
    return byte == 10 or byte == 13


@njit(cache=True, nogil=True, inline="always")
def space_at(buf, e):
    """Whether the character starting at ``buf[e]`` is one of ``\\s``'s code points."""
    n = len(buf)
    c = buf[e]
    if c < 0x80:
        return (9 <= c <= 13) or c == 32
    if c == 0xC2:  # U+0085, U+00A0
        return e + 1 < n and (buf[e + 1] == 0x85 or buf[e + 1] == 0xA0)
    if e + 2 >= n:
        return False
    c1 = buf[e + 1]
    c2 = buf[e + 2]
    if c == 0xE1:  # U+1680
        return c1 == 0x9A and c2 == 0x80
    if c == 0xE2:  # U+2000-U+200A, U+2028, U+2029, U+202F, U+205F
        if c1 == 0x80:
            return 0x80 <= c2 <= 0x8A or c2 == 0xA8 or c2 == 0xA9 or c2 == 0xAF
        return c1 == 0x81 and c2 == 0x9F
    if c == 0xE3:  # U+3000
        return c1 == 0x80 and c2 == 0x80
    return False


@njit(cache=True, nogil=True, inline="always")
def _ends_at(buf, e):
    """Whether a document ends at byte ``e`` (0 < e < len(buf)).

    Inlined, as ``space_at`` is: called, each would count ``buf`` in and out
    (numba's reference counting) at every pair of line breaks."""
    if not _is_break(buf[e - 1]) or e < 2:
        return False
    a = buf[e - 2]
    b = buf[e - 1]
    blank = (a == 10 and b == 10) or (a == 13 and b == 13) or (a == 10 and b == 13)
    if not blank and e >= 3 and a == 13 and b == 10:
        blank = _is_break(buf[e - 3])  # \r\r\n or \n\r\n
    return blank and not space_at(buf, e)


@njit(cache=True, nogil=True, inline="always")
def _zero_bytes(x):
    """0x80 in each byte of ``x`` that is 0, else 0 (exact, no borrow between bytes)."""
    return ~(((x & _LOW_BITS) + _LOW_BITS) | x | _LOW_BITS)


@njit(cache=True, nogil=True, inline="always")
def _breaks(x):
    """0x80 in each byte of the word ``x`` that is a line break (``\\n``, ``\\r``)."""
    return _zero_bytes(x ^ _EVERY_LF) | _zero_bytes(x ^ _EVERY_CR)


@njit(cache=True, nogil=True, inline="always")
def _pairs(b, before):
    """0x80 in each byte that is a line break just after another one, for a word
    whose line breaks are ``b`` (``_breaks``) after a word whose are ``before``."""
    return b & ((b << np.uint64(8)) | (before >> np.uint64(56)))


@njit(cache=True, nogil=True, inline="always")
def _ends_after_pair(buf, j):
    """Whether a document ends at ``j + 1``, found one byte at a time (``j >= 1``)."""
    return _is_break(buf[j]) and _is_break(buf[j - 1]) and _ends_at(buf, j + 1)


@njit(cache=True, nogil=True)
def doc_ends(buf, lo, hi, final):
    """The offsets ``e`` with ``lo < e <= hi`` where a document of ``buf`` ends.

    Judging ``e`` needs the 3 bytes before it and the (up to 3) bytes of the
    character at ``e``: unless ``final`` (``buf`` ends the file), only
    offsets ``e <= len(buf) - 3`` are judged. ``e == len(buf)`` never ends a
    document (no character follows).

    Every end follows two line breaks in a row, so only those places are
    judged: found 8 bytes at a time (a word's line breaks as bit flags), and
    skipped ``_BLOCK`` words at a time where there are none. The test of a
    block reads each word's line breaks and its predecessor's afresh, with no
    value carried from one word to the next, so that the compiler does it for
    many words at once (SIMD), which is faster than a test of 8 words carrying
    each word's breaks to the next, and than a loop over every other byte.
    """
    n = len(buf)
    top = min(hi, n - 1 if final else n - 3)
    first = max(lo + 1, 2)
    # ends are at least 3 bytes apart; an array sized once (growing it inside the
    # loop made numba count references on every byte)
    out = np.empty(max(0, top - first) // 3 + 1, dtype=np.int64)
    words = buf[: n // 8 * 8].view(np.uint64)
    k = 0
    # an end e = j + 1 has line breaks at j - 1 and j, for j from first - 1 to top - 1:
    # bytes before word q0 and from word q1 on one by one, whole words between
    j0 = first - 1
    q0 = max(1, (j0 + 7) >> 3)
    q1 = max(q0, top >> 3)
    for j in range(j0, min(top, q0 << 3)):
        if _ends_after_pair(buf, j):
            out[k] = j + 1
            k += 1
    q = q0
    while q < q1:
        stop = min(q + _BLOCK, q1)  # a block of words: skipped whole, or judged word by word
        if stop == q + _BLOCK:
            found = np.uint64(0)
            for r in range(q, stop):
                found |= _pairs(_breaks(words[r]), _breaks(words[r - 1]))
            if found == 0:
                q = stop
                continue
        last = _breaks(words[q - 1])  # the line breaks of word q - 1
        while q < stop:
            b = _breaks(words[q])
            pairs = _pairs(b, last)
            last = b
            while pairs:
                j = (q << 3) + np.int64(trailing_zeros(pairs) >> np.uint64(3))
                pairs &= pairs - np.uint64(1)
                if _ends_at(buf, j + 1):
                    out[k] = j + 1
                    k += 1
            q += 1
    for j in range(max(j0, q1 << 3), top):
        if _ends_after_pair(buf, j):
            out[k] = j + 1
            k += 1
    return out[:k]


@njit(cache=True, nogil=True)
def last_break_cut(buf, lo, hi):
    """The last ``p`` with ``lo < p <= hi`` just after a line break (``\\r``, ``\\n``)
    and before a character that is not white space, else -1.

    This is ``pretokenize``'s line-break rule for safe places, on bytes: the
    default and cl100k patterns end a piece there whatever follows, so text
    cut there gives the pieces of the whole. The character at ``p`` must lie
    in ``buf`` (``p < len(buf)``).

        >>> import numpy as np
        >>> last_break_cut(np.frombuffer(b"a\\nb\\n c\\nd", dtype=np.uint8), 0, 8)
        7
    """
    p = min(hi, len(buf) - 1)
    while p > lo:
        if _is_break(buf[p - 1]) and not space_at(buf, p):
            return p
        p -= 1
    return -1


@njit(cache=True, nogil=True)
def first_break_cut(buf, lo, hi):
    """The first ``p`` with ``lo < p <= hi`` just after a line break and before a
    character that is not white space (``last_break_cut``'s places), else -1.

        >>> import numpy as np
        >>> first_break_cut(np.frombuffer(b"a\\n b\\nc\\nd", dtype=np.uint8), 0, 8)
        5
    """
    hi = min(hi, len(buf) - 1)
    p = lo + 1
    while p <= hi:
        if _is_break(buf[p - 1]) and not space_at(buf, p):
            return p
        p += 1
    return -1


@njit(cache=True, nogil=True)
def valid_utf8(buf):
    """Whether ``buf`` is UTF-8 that Python's strict decoder accepts (no
    overlong forms, surrogates or code points past U+10FFFF)."""
    n = len(buf)
    # ASCII skipped 8 bytes at a time, and 128 where it can: code is mostly ASCII
    words = buf[: n // 8 * 8].view(np.uint64)
    i = 0
    while i < n:
        c = buf[i]
        if c < 0x80:
            i += 1
            if i & 7 == 0:
                while i + 8 * _BLOCK <= n:  # ASCII skipped _BLOCK words at a time (SIMD, as doc_ends)
                    high = np.uint64(0)
                    for r in range(i >> 3, (i >> 3) + _BLOCK):
                        high |= words[r]
                    if high & _HIGH_BITS:
                        break
                    i += 8 * _BLOCK
                while i + 8 <= n and (words[i >> 3] & _HIGH_BITS) == 0:
                    i += 8
            continue
        if 0xC2 <= c <= 0xDF:
            need, lo, hi = 1, 0x80, 0xBF
        elif 0xE0 <= c <= 0xEF:
            need = 2
            lo = 0xA0 if c == 0xE0 else 0x80
            hi = 0x9F if c == 0xED else 0xBF
        elif 0xF0 <= c <= 0xF4:
            need = 3
            lo = 0x90 if c == 0xF0 else 0x80
            hi = 0x8F if c == 0xF4 else 0xBF
        else:
            return False
        if i + need >= n:
            return False
        if not (lo <= buf[i + 1] <= hi):
            return False
        for k in range(2, need + 1):
            if not (0x80 <= buf[i + k] <= 0xBF):
                return False
        i += need + 1
    return True


def load_document_kernels() -> None:
    """Load (or compile) this module's kernels, on a few bytes: a caller holds
    Ctrl-C around it (``interrupts.uninterrupted``), as numba's first call in a
    process sets up its compiler, and a Ctrl-C inside llvmlite leaves
    an object whose destructor prints a traceback at exit.

        >>> load_document_kernels()
    """
    data = np.frombuffer(b"a b\n\nc\n d", dtype=np.uint8)
    doc_ends(data, 0, len(data), True)
    last_break_cut(data, 0, len(data) - 3)
    first_break_cut(data, 0, len(data) - 3)
    valid_utf8(data)
