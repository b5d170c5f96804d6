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
Python objects. The JSON itself is read by ``json_bytes``.

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
from toktoktok.sources.json_bytes import (
    COLON,
    COMMA,
    EVERY_NEWLINE,
    LBRACE,
    MAX_DEPTH,
    NEWLINE,
    NULL,
    QUOTE,
    RBRACE,
    decode_string,
    literal,
    skip_string,
    skip_value,
    ws,
    zero_bytes,
)
from toktoktok.sources.reads import ReadStats
from toktoktok.sources.rows import ESCAPED_SURROGATE, jsonl_text

NO_DOCUMENT, DOCUMENT, TO_PYTHON = 0, 1, 2
# a field name no raw key can equal (a raw key never holds an unescaped quote)
_NO_KEY = np.frombuffer(b'"', dtype=np.uint8)


@njit(cache=True, nogil=True)
def _scan_line(buf, words, i, end, field, out, o, stack):
    """The line from ``buf[i]``: (kind, end of its text in ``out``, its end: the
    index of its newline or ``end``; -1 when kind 2). The parse never passes a
    newline: it is no white space here, nor valid in a string."""
    i = ws(buf, i, end)
    if i == end or buf[i] == NEWLINE:
        return NO_DOCUMENT, o, i
    if buf[i] != LBRACE:
        return TO_PYTHON, o, -1
    i = ws(buf, i + 1, end)
    found = False
    null = False
    start = o
    while True:
        if i >= end or buf[i] != QUOTE:
            return TO_PYTHON, start, -1
        k = i + 1
        i = skip_string(buf, words, k, end, True)
        if i < 0:
            return TO_PYTHON, start, -1
        same = i - 1 - k == len(field)
        if same:
            for j in range(len(field)):
                if buf[k + j] != field[j]:
                    same = False
                    break
        i = ws(buf, i, end)
        if i >= end or buf[i] != COLON:
            return TO_PYTHON, start, -1
        i = ws(buf, i + 1, end)
        if same:
            if found:  # json.loads keeps the last: left to Python
                return TO_PYTHON, start, -1
            found = True
            if i < end and buf[i] == QUOTE:
                i, o = decode_string(buf, words, i + 1, end, out, o)
            elif literal(buf, i, end, NULL):
                null = True
                i += 4
            else:
                return TO_PYTHON, start, -1
        else:
            i = skip_value(buf, words, i, end, stack)
        if i < 0:
            return TO_PYTHON, start, -1
        i = ws(buf, i, end)
        if i >= end:
            return TO_PYTHON, start, -1
        if buf[i] == RBRACE:
            break
        if buf[i] != COMMA:
            return TO_PYTHON, start, -1
        i = ws(buf, i + 1, end)
    i = ws(buf, i + 1, end)
    if (i != end and buf[i] != NEWLINE) or not found:
        return TO_PYTHON, start, -1
    return (NO_DOCUMENT if null else DOCUMENT), o, i


@njit(cache=True, nogil=True, inline="always")
def _line_end(buf, words, i, n):
    """The index of the first newline from ``i``, else ``n``; 8 bytes at a time."""
    while i < n and i & 7:
        if buf[i] == NEWLINE:
            return i
        i += 1
    while i + 8 <= n:
        found = zero_bytes(words[i >> 3] ^ EVERY_NEWLINE)
        if found:
            return i + np.int64(trailing_zeros(found) >> np.uint64(3))
        i += 8
    while i < n and buf[i] != NEWLINE:
        i += 1
    return i


@njit(cache=True, nogil=True, inline="always")
def _grown(a, size):
    """``a`` copied into the start of a new array of ``size``."""
    b = np.empty(size, dtype=a.dtype)
    b[: len(a)] = a
    return b


@njit(cache=True, nogil=True)
def scan_jsonl(buf, field):
    """The documents of whole ``.jsonl`` lines ``buf`` (uint8; the last line may
    lack its ``\\n``), the document being the string field whose raw key bytes
    are ``field``: (data, offsets, line_starts, kind), see the module's docstring.
    Line ``i``'s text is ``data[offsets[i]:offsets[i + 1]]`` (empty unless
    kind 1); it starts at ``buf[line_starts[i]]``. ``data`` is a view of a
    buffer as long as ``buf`` (a copy would touch every byte once more)."""
    n = len(buf)
    room = 64  # lines the arrays hold, doubled as needed: counting them first cost a pass over every byte
    out = np.empty(n, dtype=np.uint8)  # a text is never longer than its JSON
    offsets = np.zeros(room + 1, dtype=np.int64)
    line_starts = np.empty(room, dtype=np.int64)
    kind = np.empty(room, dtype=np.int8)
    stack = np.empty(MAX_DEPTH, dtype=np.uint8)
    words = buf[: n // 8 * 8].view(np.uint64)
    i = np.int64(0)  # int64, not the literal 0: _scan_line compiles once (kernel_args)
    o = np.int64(0)
    line = 0
    while i < n:  # a line ends at its newline or at n, the last one may lack it
        if line == room:
            room *= 2
            offsets, line_starts, kind = _grown(offsets, room + 1), _grown(line_starts, room), _grown(kind, room)
        line_starts[line] = i
        k, o, end = _scan_line(buf, words, i, n, field, out, o, stack)
        if end < 0:
            end = _line_end(buf, words, i, n)
        kind[line] = k
        offsets[line + 1] = o
        i = end + 1
        line += 1
    return out[:o], offsets[: line + 1], line_starts[:line], kind[:line]


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
    array = np.ascontiguousarray(buf) if isinstance(buf, np.ndarray) else np.frombuffer(buf, dtype=np.uint8)
    data, offsets, line_starts, kind = scan_jsonl(array, _field_bytes(column))
    present = kind == DOCUMENT
    local = ReadStats()
    slow = np.flatnonzero(kind == TO_PYTHON)
    if len(slow):
        ends = np.append(line_starts[1:] - 1, len(array) - (array[-1] == NEWLINE))  # without their newline
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
