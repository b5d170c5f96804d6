"""Row formats: a ``.jsonl`` line or a table's value is a document.

What a row's document is (``text_column``, ``null``, an empty string) is in
docs/pretokenization.md#documents. A ``.jsonl`` file (plain or compressed)
is read a line at a time (tables: ``row_batches``). A document longer than ``block_chars`` comes in several blocks; each
block carries the document's key for sampling: its line's byte offset.

    >>> import tempfile
    >>> f = Path(tempfile.mkdtemp()) / "a.jsonl"
    >>> _ = f.write_text('{"text": "hello"}\\n{"text": null}\\n{"text": "abc"}\\n')
    >>> [(b.doc, b.text, b.end, b.offset) for b in jsonl_blocks(f, "text", 2, ReadStats())]
    [(0, 'he', False, 0), (0, 'll', False, 0), (0, 'o', True, 0), (1, 'ab', False, 33), (1, 'c', True, 33)]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import regex

from toktoktok.sources.decoding import decode_line, replace_surrogates
from toktoktok.sources.reads import Block, ReadStats, SourceError
from toktoktok.sources.streams import raw_chunks

# A JSON escape that may decode to a lone surrogate.
ESCAPED_SURROGATE = regex.compile(rb"\\u[dD][89a-fA-F]")


def document_blocks(doc: int, text: str, block_chars: int, row: int = 0, offset: int = 0) -> Iterator[Block]:
    """One document as blocks of at most block_chars characters."""
    if len(text) <= block_chars:
        yield Block(doc, text, True, row, offset)
        return
    for i in range(0, len(text), block_chars):
        yield Block(doc, text[i : i + block_chars], i + block_chars >= len(text), row, offset)


def jsonl_text(path: Path, lineno: int, line: str, column: str) -> str | None:
    """The document of one JSON line (None for null), else SourceError."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise SourceError(f"{path}: line {lineno}: invalid JSON ({exc.msg}, column {exc.colno})") from exc
    except (ValueError, RecursionError) as exc:  # e.g. an integer too long, deep nesting
        raise SourceError(f"{path}: line {lineno}: invalid JSON ({exc})") from exc
    if not isinstance(obj, dict):
        raise SourceError(f"{path}: line {lineno}: expected a JSON object, got {type(obj).__name__}")
    if column not in obj:
        raise SourceError(f"{path}: line {lineno}: no {column!r} field")
    value = obj[column]
    if value is not None and not isinstance(value, str):
        kind = type(value).__name__
        raise SourceError(f"{path}: line {lineno}: {column!r} is {kind}, expected a string")
    return value


def jsonl_blocks(path: Path, column: str, block_chars: int, stats: ReadStats) -> Iterator[Block]:
    """The documents of a ``.jsonl`` file (plain or compressed) as blocks; a bad
    line raises SourceError naming the file and the line."""
    doc = at = 0
    for lineno, raw in enumerate(_iter_lines(_counted(raw_chunks(path, block_chars, stats), stats)), 1):
        offset, at = at, at + len(raw) + 1
        line = decode_line(raw, stats)
        if lineno == 1:
            line = line.removeprefix("\ufeff")
        if not line.strip():
            continue
        text = jsonl_text(path, lineno, line, column)
        if text is None:
            continue
        if ESCAPED_SURROGATE.search(raw):
            text = replace_surrogates(text, stats)
        stats.documents += 1
        yield from document_blocks(doc, text, block_chars, 0, offset)
        doc += 1


def _counted(chunks: Iterable[bytes], stats: ReadStats) -> Iterator[bytes]:
    for chunk in chunks:
        stats.bytes_read += len(chunk)
        yield chunk


def _iter_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Lines split on b"\\n" (without it), a line at a time."""
    pending: list[bytes] = []
    for chunk in chunks:
        lines = chunk.split(b"\n")
        if len(lines) == 1:
            pending.append(chunk)
            continue
        pending.append(lines[0])
        yield b"".join(pending)
        yield from lines[1:-1]
        pending = [lines[-1]] if lines[-1] else []
    if pending:
        yield b"".join(pending)
