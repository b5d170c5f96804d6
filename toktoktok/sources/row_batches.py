"""Rows of a table file as Arrow's buffers: ``.parquet``, ``.arrow``, a saved ``datasets`` folder; JSON lines alike.

``iter_row_batches`` reads a file's text column a batch of rows at a time
and yields each batch as a ``RowBatch``: the column's value bytes and
offsets as numpy views of Arrow's own buffers (no Python string a row), the
rows that are not null, and the first row's number in the file (sampling's
key: a row's number, nulls counted).
A batch holds about ``batch_bytes`` of text; a parquet row group is read a
page at a time and an Arrow file is memory-mapped, so neither is held whole.

    >>> import tempfile, pyarrow as pa, pyarrow.parquet as pq
    >>> f = Path(tempfile.mkdtemp()) / "a.parquet"
    >>> pq.write_table(pa.table({"text": ["ab", None, "c"]}), f)
    >>> [(b.data[b.offsets[0]:b.offsets[-1]].tobytes(), b.present.tolist(), b.first_row)
    ...  for b in iter_row_batches(f, "text", ReadStats())]
    [(b'abc', [True, False, True], 0)]
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from toktoktok.sources.reads import READ_ERRORS, Block, ReadStats, SourceError, cannot_read
from toktoktok.sources.rows import document_blocks
from toktoktok.sources.streams import file_format, raw_chunks
from toktoktok.uris import is_remote

if TYPE_CHECKING:
    import pyarrow.parquet as pq

BATCH_BYTES = 2 << 20  # text per batch of rows, about: held until its last row is counted


@dataclass
class RowBatch:
    """Rows of a text column: row ``i``'s text is ``data[offsets[i]:offsets[i+1]]``
    (UTF-8, as Arrow holds it), a document where ``present[i]`` (else null)."""

    data: np.ndarray  # uint8
    offsets: np.ndarray  # int64, one more than the rows
    present: np.ndarray  # bool
    first_row: int = 0  # the first row's number in the file
    starts: np.ndarray | None = None  # jsonl: each line's byte offset in the file (then rows count 0)
    owner: Any = field(default=None, repr=False)  # what holds the buffers
    valid: bool = False  # True: ``data`` is valid UTF-8 for sure (JSON lines: decoded so); False: not known

    @property
    def rows(self) -> int:
        return len(self.present)

    def text_bytes(self) -> int:
        return int(self.offsets[-1] - self.offsets[0])


def string_buffers(array: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A string column's ``(data, offsets, present)`` as numpy views of its buffers.

        >>> d, o, p = string_buffers(pa.array(["xy", None, "z"]).slice(1))
        >>> d[o[0]:o[-1]].tobytes(), o.tolist(), p.tolist()
        (b'z', [2, 2, 3], [False, True])
    """
    array = _as_strings(array)
    if pa.types.is_string_view(array.type) if hasattr(pa.types, "is_string_view") else False:
        array = array.cast(pa.large_string())
    n, start = len(array), array.offset
    _, offsets_buf, data_buf = array.buffers()
    width = np.int32 if pa.types.is_string(array.type) else np.int64
    if offsets_buf is None or n == 0:
        return np.zeros(0, np.uint8), np.zeros(n + 1, np.int64), np.ones(n, np.bool_)
    offsets = np.frombuffer(offsets_buf, dtype=width, count=start + n + 1)[start:].astype(np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None and data_buf.size else np.zeros(0, np.uint8)
    if array.null_count:
        present = array.is_valid().to_numpy(zero_copy_only=False)
    else:
        present = np.ones(n, np.bool_)
    return data, offsets, present


def array_batches(array: pa.Array | pa.ChunkedArray, *, first_row: int = 0,
                  batch_bytes: int = BATCH_BYTES) -> Iterator[RowBatch]:
    """A string column (an Array or ChunkedArray) as ``RowBatch``es of about ``batch_bytes``."""
    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    row = first_row
    for chunk in chunks:
        data, offsets, present = string_buffers(chunk)
        for a, b in _cuts(offsets, batch_bytes):
            yield RowBatch(data, offsets[a : b + 1], present[a:b], row + a, owner=chunk)
        row += len(chunk)


def _cuts(offsets: np.ndarray, size: int) -> list[tuple[int, int]]:
    """Row ranges of about ``size`` text bytes each (a row is never cut)."""
    n = len(offsets) - 1
    if n <= 0:
        return []
    cuts = [0]
    while cuts[-1] < n:
        at = int(np.searchsorted(offsets, offsets[cuts[-1]] + size, side="left"))
        cuts.append(min(max(at, cuts[-1] + 1), n))
    return list(zip(cuts, cuts[1:]))


def iter_row_batches(path: Path, column: str, stats: ReadStats, *,
                     batch_bytes: int = BATCH_BYTES) -> Iterator[RowBatch]:
    """The text column of a ``.parquet`` or ``.arrow`` file as ``RowBatch``es,
    counting documents and text bytes into ``stats``."""
    kind = file_format(path)[0]
    batches = _parquet_batches(path, column, batch_bytes) if kind == "parquet" else _arrow_batches(path, column, batch_bytes)
    try:
        for batch in batches:
            stats.bytes_read += batch.text_bytes()
            stats.documents += int(np.count_nonzero(batch.present))
            yield batch
    except READ_ERRORS as exc:
        raise cannot_read(path, exc) from exc


def iter_jsonl_batches(path: Path, column: str, stats: ReadStats, *,
                       batch_bytes: int = BATCH_BYTES) -> Iterator[RowBatch]:
    """A ``.jsonl`` file (plain or compressed) as ``RowBatch``es of its lines, about
    ``batch_bytes`` of them at a time (``jsonl_scan.jsonl_documents``): each line's
    byte offset in the file is its key (``starts``), as ``rows.jsonl_blocks`` keys it;
    a blank line or a ``null`` is no document. A bad line raises SourceError naming it."""
    from toktoktok.sources.jsonl_scan import jsonl_documents

    carry: list[bytes | memoryview] = []  # the line carried over, in parts (joined once it ends)
    at = 0  # the file offset of carry's first byte
    line = 1  # the number of carry's first line
    try:
        for chunk in raw_chunks(path, batch_bytes, stats):
            stats.bytes_read += len(chunk)
            cut = chunk.rfind(b"\n")
            if cut < 0:  # a line longer than a chunk: its parts wait (adding each to the rest copied them again)
                if chunk:
                    carry.append(chunk)
                continue
            start = 0
            if carry:  # the line carried over ends here: a batch of its own, so the rest is not copied
                start = chunk.find(b"\n") + 1
                buf = b"".join([*carry, memoryview(chunk)[:start]])
                batch = _jsonl_batch(buf, column, path, at, line, stats, jsonl_documents)
                at, line = at + len(buf), line + len(batch.starts)
                yield batch
            if start <= cut:
                buf = memoryview(chunk)[start : cut + 1]  # a view: no copy
                batch = _jsonl_batch(buf, column, path, at, line, stats, jsonl_documents)
                at, line = at + len(buf), line + len(batch.starts)  # a line each, blank ones too: buf ends with one
                yield batch
            carry = [memoryview(chunk)[cut + 1 :]] if cut + 1 < len(chunk) else []
        if carry:
            yield _jsonl_batch(b"".join(carry), column, path, at, line, stats, jsonl_documents)
    except READ_ERRORS as exc:
        raise cannot_read(path, exc) from exc


def _jsonl_batch(buf: bytes | memoryview, column: str, path: Path, at: int, line: int, stats: ReadStats, read: Any) -> RowBatch:
    data, offsets, starts, present = read(buf, column, path=path, first_line=line, at_file_start=at == 0, stats=stats)
    # valid: decoded by the scanner, which checks every byte, or encoded by Python
    return RowBatch(data, offsets.astype(np.int64), present, starts=starts + at, owner=buf, valid=True)


def _parquet_batches(path: Path, column: str, batch_bytes: int) -> Iterator[RowBatch]:
    """The column's batches; after each, Arrow's allocator gives back the pages it
    keeps for reuse, which the pages and builders of a long row's batch made
    into tens of MB held for the rest of the read."""
    pool = pa.default_memory_pool()
    with _open_parquet(path) as pf:
        _text_field_type(path, pf.schema_arrow, column)
        meta, index = pf.metadata, pf.schema_arrow.get_field_index(column)
        row = 0
        for group in range(meta.num_row_groups):
            rg = meta.row_group(group)
            if not rg.num_rows:
                continue
            size = _column_bytes(rg, column, index)
            rows = max(1, min(rg.num_rows, int(batch_bytes * rg.num_rows / max(size, 1))))
            for batch in pf.iter_batches(batch_size=rows, row_groups=[group], columns=[column], use_threads=False):
                yield from array_batches(batch.column(0), first_row=row, batch_bytes=batch_bytes)
                row += batch.num_rows
                del batch
                pool.release_unused()


def _column_bytes(rg: Any, column: str, index: int) -> int:
    """The uncompressed size of the column's chunk in a row group (its row group's if not found)."""
    for i in range(rg.num_columns):
        chunk = rg.column(i)
        if chunk.path_in_schema == column:
            return int(chunk.total_uncompressed_size)
    return int(rg.total_byte_size)


def _arrow_batches(path: Path, column: str, batch_bytes: int, *, mapped: bool = False) -> Iterator[RowBatch]:
    """An Arrow IPC file (file or stream format: ``datasets`` writes streams), a record
    batch read at a time; ``mapped``: memory-mapped instead (for a look at its offsets
    alone: a mapped file's pages read count as the process's memory)."""
    if is_remote(path):
        fs, inner = path.inner()
        source = fs.open_input_file(inner)
    else:
        source = pa.memory_map(str(path)) if mapped else pa.OSFile(str(path))
    with source:
        try:
            reader = pa.ipc.open_file(source)
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
        except pa.ArrowInvalid:
            source.seek(0)
            reader = pa.ipc.open_stream(source)
            batches = iter(reader)
        _text_field_type(path, reader.schema, column)
        index = reader.schema.get_field_index(column)
        row = 0
        for batch in batches:
            yield from array_batches(batch.column(index), first_row=row, batch_bytes=batch_bytes)
            row += batch.num_rows


def table_blocks(path: Path, column: str, block_chars: int, stats: ReadStats) -> Iterator[Block]:
    """The non-null values of a table file's text column as document blocks (for
    readers that want strings: ingest takes the batches themselves)."""
    doc = 0
    for batch in iter_row_batches(path, column, stats):
        for i in np.flatnonzero(batch.present).tolist():
            yield from document_blocks(doc, row_text(batch, i, stats), block_chars, batch.first_row + i)
            doc += 1


def table_text_bytes(path: Path, column: str) -> int:
    """The UTF-8 length of a table file's text column, a batch at a time (an Arrow
    file's from its offsets alone, memory-mapped)."""
    if file_format(path)[0] == "arrow" and not is_remote(path):
        try:
            return sum(batch.text_bytes() for batch in _arrow_batches(path, column, BATCH_BYTES, mapped=True))
        except READ_ERRORS as exc:
            raise cannot_read(path, exc) from exc
    return sum(batch.text_bytes() for batch in iter_row_batches(path, column, ReadStats()))


def parquet_size_estimate(path: Path, column: str) -> int:
    """The text column's uncompressed size as the footer records it, over its row
    groups: about its text bytes (lengths and page headers add a little; a
    dictionary of repeated values counts them once)."""
    with _open_parquet(path) as pf:
        _text_field_type(path, pf.schema_arrow, column)
        index = pf.schema_arrow.get_field_index(column)
        meta = pf.metadata
        return sum(_column_bytes(meta.row_group(g), column, index) for g in range(meta.num_row_groups))


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


def row_text(batch: RowBatch, i: int, stats: ReadStats) -> str:
    """Row ``i``'s text as a string (invalid UTF-8 replaced and counted, as ``.jsonl`` lines are)."""
    raw = batch.data[batch.offsets[i] : batch.offsets[i + 1]].tobytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        from toktoktok.sources.decoding import decode_line

        return decode_line(raw, stats)


__all__ = ["BATCH_BYTES", "RowBatch", "SourceError", "array_batches", "iter_row_batches", "parquet_size_estimate",
           "iter_jsonl_batches", "row_text", "string_buffers",
           "table_blocks", "table_text_bytes"]
