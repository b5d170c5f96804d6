"""``.jsonl`` documents out of raw bytes: a numba scanner, with Python for the rare line.

The rules are ``rows.jsonl_blocks``'s (docs/pretokenization.md#documents);
``rows`` stays the reference. ``scan_jsonl`` reads whole lines (split on
``b"\\n"``) and gives each line a kind: 0 no document (a line of JSON white
space, or a ``null`` value), 1 a document (its text decoded as ``json.loads``
would, into one byte array), 2 left to Python. It decides only what it is sure
of: a JSON object whose field of that name (its raw key bytes; a key with an
escape is left to Python) is a string or ``null`` and appears once, every byte
valid UTF-8, no lone surrogate escape in the text, nesting within
``MAX_DEPTH``. Everything else (invalid UTF-8, a BOM, a missing field,
malformed JSON, ``NaN``, other Unicode white space...) is kind 2, and
``jsonl_documents`` settles those lines with ``rows``'s own code, so results,
counts and error messages are the reference's. Only kind 2 lines become
Python objects.

    >>> import numpy as np
    >>> buf = np.frombuffer(b'{"text": "a\\\\u00e9"}\\n\\n{"id": 1, "text": null}\\n[1]', dtype=np.uint8)
    >>> data, offsets, starts, kind = scan_jsonl(buf, np.frombuffer(b"text", dtype=np.uint8))
    >>> bytes(data).decode(), offsets.tolist(), starts.tolist(), kind.tolist()
    ('aé', [0, 3, 3, 3, 3], [0, 20, 21, 45], [1, 0, 0, 2])
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from toktoktok.sources.decoding import decode_line, replace_surrogates
from toktoktok.sources.reads import ReadStats
from toktoktok.sources.rows import ESCAPED_SURROGATE, jsonl_text

MAX_DEPTH = 64  # nesting a skipped value may have; deeper lines go to Python (json.loads may recurse out)
MAX_NUMBER = 256  # a longer number goes to Python: json.loads refuses integers past sys.get_int_max_str_digits()
NO_DOCUMENT, DOCUMENT, TO_PYTHON = 0, 1, 2

_QUOTE, _BACKSLASH, _LBRACE, _RBRACE, _LBRACKET, _RBRACKET = 34, 92, 123, 125, 91, 93
_COMMA, _COLON, _MINUS, _ZERO, _NINE = 44, 58, 45, 48, 57
_NEWLINE = 10
# a field name no raw key can equal (a raw key never holds an unescaped quote)
_NO_KEY = np.frombuffer(b'"', dtype=np.uint8)
# the byte each one-letter escape stands for, by the letter (0: not an escape)
_UNESCAPED = np.zeros(256, dtype=np.uint8)
for _letter, _byte in zip(b'"\\/bfnrt', b'"\\/\b\f\n\r\t'):
    _UNESCAPED[_letter] = _byte
_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)
_HIGH, _LOW = np.uint64(0x8080808080808080), np.uint64(0x7F7F7F7F7F7F7F7F)  # each byte's top bit; the rest
_EVERY_QUOTE, _EVERY_BACKSLASH = np.uint64(0x2222222222222222), np.uint64(0x5C5C5C5C5C5C5C5C)
_EVERY_NEWLINE, _EVERY_0X60 = np.uint64(0x0A0A0A0A0A0A0A0A), np.uint64(0x6060606060606060)
_BLOCK = 8  # words tested at once for a stop in a string (as documents.doc_ends does for line breaks)
_HEX = np.full(256, -1, dtype=np.int64)  # each hex digit's value, by its byte
for _value, _digit in enumerate(b"0123456789abcdef"):
    _HEX[_digit] = _HEX[ord(chr(_digit).upper())] = _value


@njit(cache=True, nogil=True, inline="always")
def _ws(buf, i, end):
    """The first index from ``i`` that is not JSON white space within a line (space, \\t, \\r)."""
    while i < end:
        c = buf[i]
        if c != 32 and c != 9 and c != 13:
            break
        i += 1
    return i


@njit(cache=True, nogil=True, inline="always")
def _zero_bytes(x):
    """0x80 in each byte of ``x`` that is 0, else 0 (exact, no borrow between bytes)."""
    return ~(((x & _LOW) + _LOW) | x | _LOW)


@njit(cache=True, nogil=True, inline="always")
def _stops(c):
    """Whether byte ``c`` ends a run of plain text in a string: a quote, a
    backslash, a control, or a byte of a multi-byte character."""
    return c == _QUOTE or c == _BACKSLASH or c < 0x20 or c >= 0x80


@njit(cache=True, nogil=True, inline="always")
def _word_stops(w):
    """0x80 in each byte of word ``w`` that ``_stops``, else 0."""
    return (w | ~((w & _LOW) + _EVERY_0X60)) & _HIGH | _zero_bytes(w ^ _EVERY_QUOTE) | _zero_bytes(w ^ _EVERY_BACKSLASH)


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
def _skip_string(buf, words, i, end, keyish):
    """The index after the string whose opening quote is at ``i - 1``, else -1
    (malformed, a raw control character, invalid UTF-8; with ``keyish``, also
    any escape, since a key is compared on its raw bytes)."""
    while i < end:
        i = _plain_end(buf, words, i, end)
        if i >= end:
            break
        c = buf[i]
        if c == _QUOTE:
            return i + 1
        if c == _BACKSLASH:
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
def _decode_string(buf, words, i, end, out, o):
    """Decode the string whose opening quote is at ``i - 1`` into ``out`` from
    ``o``: (index after its closing quote, end of its text in ``out``), or
    (-1, o) when unsure (see ``_skip_string``; also a lone surrogate escape)."""
    while i < end:
        j = _plain_end(buf, words, i, end)
        if j - i > 16:
            out[o:o + j - i] = buf[i:j]
        else:  # a short run: a slice would cost more than the bytes
            for k in range(j - i):
                out[o + k] = buf[i + k]
        o += j - i
        i = j
        if i >= end:
            break
        c = buf[i]
        if c == _QUOTE:
            return i + 1, o
        elif c == _BACKSLASH:
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
                    if i + 1 >= end or buf[i] != _BACKSLASH or buf[i + 1] != 117:
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
        else:
            n = _utf8_len(buf, i, end)
            if n == 0:
                return -1, o
            for k in range(n):
                out[o + k] = buf[i + k]
            o += n
            i += n
    return -1, o


@njit(cache=True, nogil=True)
def _skip_number(buf, i, end):
    """The index after the JSON number at ``i``, else -1 (malformed, or longer than ``MAX_NUMBER``)."""
    start = i
    if i < end and buf[i] == _MINUS:
        i += 1
    if i >= end or not (_ZERO <= buf[i] <= _NINE):
        return -1
    if buf[i] == _ZERO:
        i += 1
    else:
        while i < end and _ZERO <= buf[i] <= _NINE:
            i += 1
    if i < end and buf[i] == 46:  # a fraction
        i += 1
        if i >= end or not (_ZERO <= buf[i] <= _NINE):
            return -1
        while i < end and _ZERO <= buf[i] <= _NINE:
            i += 1
    if i < end and (buf[i] == 101 or buf[i] == 69):  # an exponent
        i += 1
        if i < end and (buf[i] == 43 or buf[i] == _MINUS):
            i += 1
        if i >= end or not (_ZERO <= buf[i] <= _NINE):
            return -1
        while i < end and _ZERO <= buf[i] <= _NINE:
            i += 1
    if i - start > MAX_NUMBER:
        return -1
    return i


_TRUE = np.frombuffer(b"true", dtype=np.uint8)
_FALSE = np.frombuffer(b"false", dtype=np.uint8)
_NULL = np.frombuffer(b"null", dtype=np.uint8)


@njit(cache=True, nogil=True, inline="always")
def _literal(buf, i, end, word):
    """Whether the bytes at ``i`` spell ``word``."""
    if i + len(word) > end:
        return False
    for k in range(len(word)):
        if buf[i + k] != word[k]:
            return False
    return True


@njit(cache=True, nogil=True)
def _skip_value(buf, words, i, end, stack):
    """The index after the JSON value at ``i`` (white space before it skipped),
    else -1: malformed, nested deeper than ``len(stack)``, or anything
    ``_skip_string`` and ``_skip_number`` are unsure of. ``stack`` holds each
    open container's closing byte."""
    depth = 0
    while True:
        i = _ws(buf, i, end)  # a value is expected at i
        if i >= end:
            return -1
        c = buf[i]
        closed = False
        if c == _LBRACE or c == _LBRACKET:
            if depth == len(stack):
                return -1
            stack[depth] = _RBRACE if c == _LBRACE else _RBRACKET
            depth += 1
            i = _ws(buf, i + 1, end)
            if i < end and buf[i] == stack[depth - 1]:
                depth -= 1
                i += 1
                closed = True
            elif c == _LBRACE:  # a key and its colon, then the value
                if i >= end or buf[i] != _QUOTE:
                    return -1
                i = _skip_string(buf, words, i + 1, end, False)
                i = _ws(buf, i, end) if i >= 0 else end
                if i >= end or buf[i] != _COLON:
                    return -1
                i += 1
                continue
            else:
                continue
        elif c == _QUOTE:
            i = _skip_string(buf, words, i + 1, end, False)
        elif c == _MINUS or _ZERO <= c <= _NINE:
            i = _skip_number(buf, i, end)
        elif _literal(buf, i, end, _TRUE) or _literal(buf, i, end, _NULL):
            i += 4
        elif _literal(buf, i, end, _FALSE):
            i += 5
        else:
            return -1
        if i < 0:
            return -1
        # after a value: close containers, or a comma and the next member
        while depth > 0:
            i = _ws(buf, i, end)
            if i >= end:
                return -1
            c = buf[i]
            if c == stack[depth - 1]:
                depth -= 1
                i += 1
                continue
            if c != _COMMA:
                return -1
            i += 1
            if stack[depth - 1] == _RBRACE:
                i = _ws(buf, i, end)
                if i >= end or buf[i] != _QUOTE:
                    return -1
                i = _skip_string(buf, words, i + 1, end, False)
                i = _ws(buf, i, end) if i >= 0 else end
                if i >= end or buf[i] != _COLON:
                    return -1
                i += 1
            break
        if depth == 0:
            return i


@njit(cache=True, nogil=True)
def _scan_line(buf, words, i, end, field, out, o, stack):
    """The line from ``buf[i]``: (kind, end of its text in ``out``, its end: the
    index of its newline or ``end``; -1 when kind 2). The parse never passes a
    newline: it is no white space here, nor valid in a string."""
    i = _ws(buf, i, end)
    if i == end or buf[i] == _NEWLINE:
        return NO_DOCUMENT, o, i
    if buf[i] != _LBRACE:
        return TO_PYTHON, o, -1
    i = _ws(buf, i + 1, end)
    found = False
    null = False
    start = o
    while True:
        if i >= end or buf[i] != _QUOTE:
            return TO_PYTHON, start, -1
        k = i + 1
        i = _skip_string(buf, words, k, end, True)
        if i < 0:
            return TO_PYTHON, start, -1
        same = i - 1 - k == len(field)
        if same:
            for j in range(len(field)):
                if buf[k + j] != field[j]:
                    same = False
                    break
        i = _ws(buf, i, end)
        if i >= end or buf[i] != _COLON:
            return TO_PYTHON, start, -1
        i = _ws(buf, i + 1, end)
        if same:
            if found:  # json.loads keeps the last: left to Python
                return TO_PYTHON, start, -1
            found = True
            if i < end and buf[i] == _QUOTE:
                i, o = _decode_string(buf, words, i + 1, end, out, o)
            elif _literal(buf, i, end, _NULL):
                null = True
                i += 4
            else:
                return TO_PYTHON, start, -1
        else:
            i = _skip_value(buf, words, i, end, stack)
        if i < 0:
            return TO_PYTHON, start, -1
        i = _ws(buf, i, end)
        if i >= end:
            return TO_PYTHON, start, -1
        if buf[i] == _RBRACE:
            break
        if buf[i] != _COMMA:
            return TO_PYTHON, start, -1
        i = _ws(buf, i + 1, end)
    i = _ws(buf, i + 1, end)
    if (i != end and buf[i] != _NEWLINE) or not found:
        return TO_PYTHON, start, -1
    return (NO_DOCUMENT if null else DOCUMENT), o, i


@njit(cache=True, nogil=True, inline="always")
def _line_end(buf, words, i, n):
    """The index of the first newline from ``i``, else ``n``; 8 bytes at a time."""
    while i < n and i & 7:
        if buf[i] == _NEWLINE:
            return i
        i += 1
    while i + 8 <= n:
        found = _zero_bytes(words[i >> 3] ^ _EVERY_NEWLINE)
        if found:
            return i + np.int64(trailing_zeros(found) >> np.uint64(3))
        i += 8
    while i < n and buf[i] != _NEWLINE:
        i += 1
    return i


@njit(cache=True, nogil=True)
def scan_jsonl(buf, field):
    """The documents of whole ``.jsonl`` lines ``buf`` (uint8; the last line may
    lack its ``\\n``), the document being the string field whose raw key bytes
    are ``field``: (data, offsets, line_starts, kind), see the module's docstring.
    Line ``i``'s text is ``data[offsets[i]:offsets[i + 1]]`` (empty unless
    kind 1); it starts at ``buf[line_starts[i]]``."""
    n = len(buf)
    lines = 0
    for j in range(n):
        lines += buf[j] == _NEWLINE
    if n > 0 and buf[n - 1] != _NEWLINE:
        lines += 1
    out = np.empty(n, dtype=np.uint8)  # a text is never longer than its JSON
    offsets = np.zeros(lines + 1, dtype=np.int64)
    line_starts = np.empty(lines, dtype=np.int64)
    kind = np.empty(lines, dtype=np.int8)
    stack = np.empty(MAX_DEPTH, dtype=np.uint8)
    words = buf[: n // 8 * 8].view(np.uint64)
    i = 0
    o = 0
    for line in range(lines):
        line_starts[line] = i
        k, o, end = _scan_line(buf, words, i, n, field, out, o, stack)
        if end < 0:
            end = _line_end(buf, words, i, n)
        kind[line] = k
        offsets[line + 1] = o
        i = end + 1
    return out[:o], offsets, line_starts, kind


def load_jsonl_kernels() -> None:
    """Load (or compile) ``scan_jsonl`` on a few bytes; as for
    ``documents.load_document_kernels``, a caller holds Ctrl-C around it.

        >>> load_jsonl_kernels()
    """
    scan_jsonl(np.frombuffer(b'{"a": [1, {"b": -2.5e3}], "text": "x\\n"}', dtype=np.uint8), _field_bytes("text"))


def _field_bytes(column: str) -> np.ndarray:
    """``column``'s UTF-8 as the kernel compares keys; a name that cannot be
    encoded matches no raw key, so every line goes to Python and fails there."""
    try:
        return np.frombuffer(column.encode("utf-8"), dtype=np.uint8)
    except UnicodeEncodeError:
        return _NO_KEY


def _python_text(raw: bytes, lineno: int, bom: bool, path: Path, column: str, stats: ReadStats) -> str | None:
    """One line's document exactly as ``rows.jsonl_blocks`` reads it (None: none)."""
    line = decode_line(raw, stats)
    if bom:
        line = line.removeprefix("\ufeff")
    if not line.strip():
        return None
    text = jsonl_text(path, lineno, line, column)
    if text is not None and ESCAPED_SURROGATE.search(raw):
        text = replace_surrogates(text, stats)
    return text


def jsonl_documents(buf: bytes | bytearray | memoryview | np.ndarray, column: str, *, path: Path,
                    first_line: int, at_file_start: bool,
                    stats: ReadStats) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The documents of whole ``.jsonl`` lines: (data, offsets, line_starts, present).

    Line ``i`` (number ``first_line + i`` in ``path``) starts at byte
    ``line_starts[i]`` of ``buf``; its document, when ``present[i]``, is
    ``data[offsets[i]:offsets[i + 1]]`` (UTF-8). ``scan_jsonl`` reads the
    lines; those it leaves (kind 2) are read as ``rows.jsonl_blocks`` reads
    them (a bad line raises its SourceError, naming ``path`` and the line).
    ``at_file_start``: the first line is the file's, a UTF-8 BOM before it is
    dropped. Documents and replaced characters are added to ``stats`` (not
    ``bytes_read``: the caller counts what it reads), only once every line is
    read.

        >>> data, offsets, starts, present = jsonl_documents(
        ...     b'{"text": "hi"}\\n  \\n{"text": "\\\\ud83d"}\\n', "text", path=Path("a.jsonl"),
        ...     first_line=1, at_file_start=True, stats=(stats := ReadStats()))
        >>> bytes(data), offsets.tolist(), starts.tolist(), present.tolist()
        (b'hi\\xef\\xbf\\xbd', [0, 2, 2, 5], [0, 15, 18], [True, False, True])
        >>> stats.documents, stats.replaced_chars
        (2, 1)
    """
    array = buf if isinstance(buf, np.ndarray) else np.frombuffer(buf, dtype=np.uint8)
    data, offsets, line_starts, kind = scan_jsonl(array, _field_bytes(column))
    present = kind == DOCUMENT
    local = ReadStats()
    slow = np.flatnonzero(kind == TO_PYTHON)
    if len(slow):
        ends = np.append(line_starts[1:] - 1, len(array) - (array[-1] == _NEWLINE))  # without their newline
        pieces, at = [], 0
        lengths = np.diff(offsets)
        for i in slow.tolist():
            raw = array[line_starts[i]:ends[i]].tobytes()
            text = _python_text(raw, first_line + i, at_file_start and i == 0, path, column, local)
            pieces.append(data[at:offsets[i]])
            at = offsets[i]
            if text is not None:
                encoded = text.encode("utf-8")
                pieces.append(np.frombuffer(encoded, dtype=np.uint8))
                lengths[i] = len(encoded)
                present[i] = True
        pieces.append(data[at:])
        data = np.concatenate(pieces)
        offsets = np.concatenate(([0], np.cumsum(lengths)))
    stats.documents += int(np.count_nonzero(present))
    stats.replaced_chars += local.replaced_chars
    return data, offsets, line_starts, present
