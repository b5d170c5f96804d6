"""Row formats: a ``.jsonl`` line or a ``.parquet`` value is a document.

What a row's document is (``text_column``, ``null``, an empty string) is in
docs/pretokenization.md#documents. A ``.jsonl`` file (plain or compressed)
is read a line at a time; a ``.parquet`` file a batch of rows, a page at a
time. A document longer than ``block_chars`` comes in several blocks; each
block carries the document's key for sampling: its line's byte offset
(jsonl) or its row number, nulls counted (parquet).

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
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import regex

from toktoktok.sources.decoding import decode_line, replace_surrogates
from toktoktok.sources.reads import Block, ReadStats, SourceError
from toktoktok.sources.streams import raw_chunks
from toktoktok.uris import is_remote

if TYPE_CHECKING:
    import pyarrow.parquet as pq

_PARQUET_BATCH_ROWS = 256
# A JSON escape that may decode to a lone surrogate.
ESCAPED_SURROGATE = regex.compile(rb"\\u[dD][89a-fA-F]")


def _document_blocks(doc: int, text: str, block_chars: int, row: int = 0, offset: int = 0) -> Iterator[Block]:
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
        yield from _document_blocks(doc, text, block_chars, 0, offset)
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


def _text_field_type(path: Path, schema: pa.Schema, column: str) -> pa.DataType:
    """The column's type, checked to hold strings, else SourceError."""
    index = schema.get_field_index(column)
    if index < 0:
        names = ", ".join(schema.names)
        raise SourceError(f"{path}: no column {column!r} (columns: {names})")
    kind = schema.field(index).type
    values = kind.value_type if pa.types.is_dictionary(kind) else kind
    if not (pa.types.is_string(values) or pa.types.is_large_string(values)):
        raise SourceError(f"{path}: column {column!r} is {kind}, expected string")
    return kind


def _as_strings(array: pa.Array) -> pa.Array:
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    return array


def _open_parquet(path: Path) -> pq.ParquetFile:
    """A parquet file read page by page (``buffer_size``, and one thread:
    ``use_threads=False`` at each read), so a row group is never held whole.

    ``pyarrow.parquet`` is imported here, when a parquet file is read: it holds
    9 MB of every process that imports it."""
    import pyarrow.parquet as pq

    if is_remote(path):
        fs, inner = path.inner()
        return pq.ParquetFile(inner, filesystem=fs, buffer_size=1 << 16, pre_buffer=False)
    return pq.ParquetFile(path, buffer_size=1 << 16, pre_buffer=False)


def parquet_blocks(path: Path, column: str, block_chars: int, stats: ReadStats) -> Iterator[Block]:
    """The non-null values of a ``.parquet`` file's text column as document blocks."""
    doc = row = 0
    with _open_parquet(path) as pf:
        _text_field_type(path, pf.schema_arrow, column)
        for batch in pf.iter_batches(batch_size=_PARQUET_BATCH_ROWS, columns=[column], use_threads=False):
            array = _as_strings(batch.column(0))
            stats.bytes_read += pc.sum(pc.binary_length(array)).as_py() or 0
            for text in array.to_pylist():
                row += 1
                if text is None:
                    continue
                stats.documents += 1
                yield from _document_blocks(doc, text, block_chars, row - 1)
                doc += 1


def parquet_text_bytes(path: Path, column: str) -> int:
    """The UTF-8 length of a ``.parquet`` file's text column, a batch at a time."""
    total = 0
    with _open_parquet(path) as pf:
        _text_field_type(path, pf.schema_arrow, column)
        for batch in pf.iter_batches(batch_size=_PARQUET_BATCH_ROWS, columns=[column], use_threads=False):
            total += pc.sum(pc.binary_length(_as_strings(batch.column(0)))).as_py() or 0
    return total
