"""JSON in raw UTF-8 bytes, for numba kernels: white space, strings (skipped or
decoded), numbers, literals, whole values skipped.

Each function takes the bytes ``buf``, their ``words`` (``buf``'s whole
8-byte words as uint64, so that ``skip_string`` passes over plain text a
word at a time; ``decode_string`` copies it a word at a time from any index),
a position and ``end``, and gives the position after what it read, or
-1 when it is not sure the bytes are what ``json.loads`` reads them as:
malformed JSON, invalid UTF-8, a raw control character in a string, an
escaped key (``skip_string`` with ``keyish``), a lone surrogate escape in a
decoded string, a number longer than ``MAX_NUMBER``, nesting deeper than the
stack. White space here is JSON's within a line (no newline), so a reader of
lines never reads past a line's end. ``jsonl_scan`` is their user.

    >>> import numpy as np
    >>> buf = np.frombuffer(b'[1, {"a": "b\\\\u00e9"}] x', dtype=np.uint8)
    >>> words = buf[: len(buf) // 8 * 8].view(np.uint64)
    >>> skip_value(buf, words, 0, len(buf), np.empty(MAX_DEPTH, dtype=np.uint8))
    21
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from toktoktok.unaligned import load8, store8

MAX_DEPTH = 64  # nesting a skipped value may have; deeper lines go to Python (json.loads may recurse out)
MAX_NUMBER = 256  # a longer number goes to Python: json.loads refuses integers past sys.get_int_max_str_digits()

QUOTE, BACKSLASH, LBRACE, RBRACE, LBRACKET, RBRACKET = 34, 92, 123, 125, 91, 93
COMMA, COLON, MINUS, ZERO, NINE = 44, 58, 45, 48, 57
NEWLINE = 10
# the byte each one-letter escape stands for, by the letter (0: not an escape)
_UNESCAPED = np.zeros(256, dtype=np.uint8)
for _letter, _byte in zip(b'"\\/bfnrt', b'"\\/\b\f\n\r\t'):
    _UNESCAPED[_letter] = _byte
_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)
_HIGH, _LOW = np.uint64(0x8080808080808080), np.uint64(0x7F7F7F7F7F7F7F7F)  # each byte's top bit; the rest
_EVERY_QUOTE, _EVERY_BACKSLASH = np.uint64(0x2222222222222222), np.uint64(0x5C5C5C5C5C5C5C5C)
EVERY_NEWLINE, _EVERY_0X60 = np.uint64(0x0A0A0A0A0A0A0A0A), np.uint64(0x6060606060606060)
_BLOCK = 8  # words tested at once for a stop in a string (as documents.doc_ends does for line breaks)
_HEX = np.full(256, -1, dtype=np.int64)  # each hex digit's value, by its byte
for _value, _digit in enumerate(b"0123456789abcdef"):
    _HEX[_digit] = _HEX[ord(chr(_digit).upper())] = _value


@njit(cache=True, nogil=True, inline="always")
def ws(buf, i, end):
    """The first index from ``i`` that is not JSON white space within a line (space, \\t, \\r)."""
    while i < end:
        c = buf[i]
        if c != 32 and c != 9 and c != 13:
            break
        i += 1
    return i


@njit(cache=True, nogil=True, inline="always")
def zero_bytes(x):
    """0x80 in each byte of ``x`` that is 0, else 0 (exact, no borrow between bytes)."""
    return ~(((x & _LOW) + _LOW) | x | _LOW)


@njit(cache=True, nogil=True, inline="always")
def _stops(c):
    """Whether byte ``c`` ends a run of plain text in a string: a quote, a
    backslash, a control, or a byte of a multi-byte character."""
    return c == QUOTE or c == BACKSLASH or c < 0x20 or c >= 0x80


@njit(cache=True, nogil=True, inline="always")
def _word_stops(w):
    """0x80 in each byte of word ``w`` that ``_stops``, else 0."""
    return (w | ~((w & _LOW) + _EVERY_0X60)) & _HIGH | zero_bytes(w ^ _EVERY_QUOTE) | zero_bytes(w ^ _EVERY_BACKSLASH)


@njit(cache=True, nogil=True, inline="always")
def _plain_end(buf, words, i, end):
    """The first index from ``i`` of a byte that ``_stops`` (``end`` if none).

    Tested a word at a time (the bytes of ``i``'s word before it masked off),
    and past a few words ``_BLOCK`` words at a time (SIMD): short runs end in
    their first word, long ones are skipped fast."""
    q = i >> 3
    whole = min(len(words), end >> 3)  # the words that end by ``end``
    if q < whole:
        stops = _word_stops(words[q]) & (_ONES << np.uint64((i & 7) << 3))
        first = q
        while not stops:
            q += 1
            if q >= whole:
                break
            if q - first >= 4 and q + _BLOCK <= whole:
                found = np.uint64(0)
                for r in range(q, q + _BLOCK):
                    found |= _word_stops(words[r])
                if not found:
                    q += _BLOCK - 1
                    continue
            stops = _word_stops(words[q])
        if stops:
            return (q << 3) + np.int64(trailing_zeros(stops) >> np.uint64(3))
        i = q << 3
    while i < end and not _stops(buf[i]):
        i += 1
    return i


@njit(cache=True, nogil=True, inline="always")
def _hex4(buf, i, end):
    """The code unit of the 4 hex digits at ``buf[i:i+4]``, else -1."""
    if i + 4 > end:
        return np.int64(-1)
    v = np.int64(0)
    for k in range(4):
        d = _HEX[buf[i + k]]
        if d < 0:
            return np.int64(-1)
        v = v * 16 + d
    return v


@njit(cache=True, nogil=True, inline="always")
def _utf8_len(buf, i, end):
    """The length of the valid UTF-8 character (not ASCII) at ``buf[i]``, else 0:
    what Python's strict decoder accepts (no overlong forms, surrogates, past U+10FFFF)."""
    c = buf[i]
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
        return 0
    if i + need >= end:
        return 0
    if not (lo <= buf[i + 1] <= hi):
        return 0
    for k in range(2, need + 1):
        if not (0x80 <= buf[i + k] <= 0xBF):
            return 0
    return need + 1


@njit(cache=True, nogil=True)
def skip_string(buf, words, i, end, keyish):
    """The index after the string whose opening quote is at ``i - 1``, else -1
    (malformed, a raw control character, invalid UTF-8; with ``keyish``, also
    any escape, since a key is compared on its raw bytes)."""
    while i < end:
        i = _plain_end(buf, words, i, end)
        if i >= end:
            break
        c = buf[i]
        if c == QUOTE:
            return i + 1
        if c == BACKSLASH:
            if keyish or i + 1 >= end:
                return -1
            e = buf[i + 1]
            if e == 117:  # \uXXXX: a lone surrogate outside the text changes nothing
                if _hex4(buf, i + 2, end) < 0:
                    return -1
                i += 6
            elif _UNESCAPED[e] != 0:
                i += 2
            else:
                return -1
        elif c < 0x20:
            return -1
        else:
            n = _utf8_len(buf, i, end)
            if n == 0:
                return -1
            i += n
    return -1


@njit(cache=True, nogil=True, inline="always")
def _put_utf8(out, o, cp):
    """Write code point ``cp`` as UTF-8 at ``out[o]``; the index after it."""
    if cp < 0x80:
        out[o] = cp
        return o + 1
    if cp < 0x800:
        out[o] = 0xC0 | (cp >> 6)
        out[o + 1] = 0x80 | (cp & 0x3F)
        return o + 2
    if cp < 0x10000:
        out[o] = 0xE0 | (cp >> 12)
        out[o + 1] = 0x80 | ((cp >> 6) & 0x3F)
        out[o + 2] = 0x80 | (cp & 0x3F)
        return o + 3
    out[o] = 0xF0 | (cp >> 18)
    out[o + 1] = 0x80 | ((cp >> 12) & 0x3F)
    out[o + 2] = 0x80 | ((cp >> 6) & 0x3F)
    out[o + 3] = 0x80 | (cp & 0x3F)
    return o + 4


@njit(cache=True, nogil=True)
def decode_string(buf, words, i, end, out, o):
    """Decode the string whose opening quote is at ``i - 1`` into ``out`` from
    ``o``: (index after its closing quote, end of its text in ``out``), or
    (-1, o) when unsure (see ``skip_string``; also a lone surrogate escape).

    Plain text goes 8 bytes at a time from any index (``unaligned``): each
    word is stored whole at ``o`` and the output moves on by its bytes before
    the first that ``_stops``, so a run of any length costs a load and a
    store a word, without finding its end first. The stored bytes past the
    stop are overwritten by what follows: ``o`` never passes ``i`` (text is
    never longer than its JSON), so ``out`` as long as ``buf`` has the room.
    ``words`` is not used: every reader of ``json_bytes`` takes the same arguments."""
    while i < end:
        if i + 8 <= end:
            word = load8(buf, i)
            store8(out, o, word)
            stops = _word_stops(word)
            if not stops:
                i += 8
                o += 8
                continue
            plain = np.int64(trailing_zeros(stops) >> np.uint64(3))
            i += plain
            o += plain
        c = buf[i]
        if c == QUOTE:
            return i + 1, o
        elif c == BACKSLASH:
            if i + 1 >= end:
                return -1, o
            e = buf[i + 1]
            i += 2
            if e == 117:
                cp = _hex4(buf, i, end)
                if cp < 0 or 0xDC00 <= cp <= 0xDFFF:
                    return -1, o
                i += 4
                if 0xD800 <= cp <= 0xDBFF:  # a high surrogate: a low one must follow
                    if i + 1 >= end or buf[i] != BACKSLASH or buf[i + 1] != 117:
                        return -1, o
                    low = _hex4(buf, i + 2, end)
                    if not (0xDC00 <= low <= 0xDFFF):
                        return -1, o
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
                o = _put_utf8(out, o, cp)
            else:
                v = _UNESCAPED[e]
                if v == 0:
                    return -1, o
                out[o] = v
                o += 1
        elif c < 0x20:
            return -1, o
        elif c >= 0x80:
            n = _utf8_len(buf, i, end)
            if n == 0:
                return -1, o
            for k in range(n):
                out[o + k] = buf[i + k]
            o += n
            i += n
        else:  # plain, in the last 7 bytes
            out[o] = c
            o += 1
            i += 1
    return -1, o


@njit(cache=True, nogil=True)
def _skip_number(buf, i, end):
    """The index after the JSON number at ``i``, else -1 (malformed, or longer than ``MAX_NUMBER``)."""
    start = i
    if i < end and buf[i] == MINUS:
        i += 1
    if i >= end or not (ZERO <= buf[i] <= NINE):
        return -1
    if buf[i] == ZERO:
        i += 1
    else:
        while i < end and ZERO <= buf[i] <= NINE:
            i += 1
    if i < end and buf[i] == 46:  # a fraction
        i += 1
        if i >= end or not (ZERO <= buf[i] <= NINE):
            return -1
        while i < end and ZERO <= buf[i] <= NINE:
            i += 1
    if i < end and (buf[i] == 101 or buf[i] == 69):  # an exponent
        i += 1
        if i < end and (buf[i] == 43 or buf[i] == MINUS):
            i += 1
        if i >= end or not (ZERO <= buf[i] <= NINE):
            return -1
        while i < end and ZERO <= buf[i] <= NINE:
            i += 1
    if i - start > MAX_NUMBER:
        return -1
    return i


TRUE = np.frombuffer(b"true", dtype=np.uint8)
FALSE = np.frombuffer(b"false", dtype=np.uint8)
NULL = np.frombuffer(b"null", dtype=np.uint8)


@njit(cache=True, nogil=True, inline="always")
def literal(buf, i, end, word):
    """Whether the bytes at ``i`` spell ``word``."""
    if i + len(word) > end:
        return False
    for k in range(len(word)):
        if buf[i + k] != word[k]:
            return False
    return True


@njit(cache=True, nogil=True)
def skip_value(buf, words, i, end, stack):
    """The index after the JSON value at ``i`` (white space before it skipped),
    else -1: malformed, nested deeper than ``len(stack)``, or anything
    ``skip_string`` and ``_skip_number`` are unsure of. ``stack`` holds each
    open container's closing byte."""
    depth = 0
    while True:
        i = ws(buf, i, end)  # a value is expected at i
        if i >= end:
            return -1
        c = buf[i]
        if c == LBRACE or c == LBRACKET:
            if depth == len(stack):
                return -1
            stack[depth] = RBRACE if c == LBRACE else RBRACKET
            depth += 1
            i = ws(buf, i + 1, end)
            if i < end and buf[i] == stack[depth - 1]:
                depth -= 1
                i += 1
            elif c == LBRACE:  # a key and its colon, then the value
                if i >= end or buf[i] != QUOTE:
                    return -1
                i = skip_string(buf, words, i + 1, end, False)
                i = ws(buf, i, end) if i >= 0 else end
                if i >= end or buf[i] != COLON:
                    return -1
                i += 1
                continue
            else:
                continue
        elif c == QUOTE:
            i = skip_string(buf, words, i + 1, end, False)
        elif c == MINUS or ZERO <= c <= NINE:
            i = _skip_number(buf, i, end)
        elif literal(buf, i, end, TRUE) or literal(buf, i, end, NULL):
            i += 4
        elif literal(buf, i, end, FALSE):
            i += 5
        else:
            return -1
        if i < 0:
            return -1
        # after a value: close containers, or a comma and the next member
        while depth > 0:
            i = ws(buf, i, end)
            if i >= end:
                return -1
            c = buf[i]
            if c == stack[depth - 1]:
                depth -= 1
                i += 1
                continue
            if c != COMMA:
                return -1
            i += 1
            if stack[depth - 1] == RBRACE:
                i = ws(buf, i, end)
                if i >= end or buf[i] != QUOTE:
                    return -1
                i = skip_string(buf, words, i + 1, end, False)
                i = ws(buf, i, end) if i >= 0 else end
                if i >= end or buf[i] != COLON:
                    return -1
                i += 1
            break
        if depth == 0:
            return i
