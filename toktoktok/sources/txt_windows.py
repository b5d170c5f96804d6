"""A ``.txt`` file read in windows of raw bytes, with the offsets where its documents end.

Ingest never decodes a ``.txt`` file to find its documents (the blank-line
rule of docs/pretokenization.md#documents): ``iter_txt_windows`` reads the
file's bytes (decompressed, a UTF-8 byte order mark dropped, UTF-16 or
UTF-32 recoded), a window at a time, and ``documents.doc_ends`` finds the
document ends in each, with 3 bytes of context carried between windows so
that every offset is judged once. The caller decodes the windows in order
with one ``Utf8Decoder``.

A plain local file is read into buffers with spare room before each read
(``ROOM_BYTES``): the reader of the windows may put the bytes it holds over
from the window before there (``units.Splitter.feed``) and have both in one
piece without copying the window.

    >>> import tempfile
    >>> f = Path(tempfile.mkdtemp()) / "a.txt"
    >>> _ = f.write_bytes(b"\\xef\\xbb\\xbfone\\n\\ntwo\\n\\nthree")
    >>> [(bytes(w.data), w.ends.tolist()) for w in iter_txt_windows(f)]
    [(b'one\\n\\ntwo\\n\\nth', [5, 10]), (b'ree', [])]
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

from toktoktok import documents
from toktoktok.interrupts import uninterrupted
from toktoktok.kernel_args import readonly
from toktoktok.sources.decoding import WIDE_BOMS, recoded
from toktoktok.sources.reads import READ_ERRORS, ReadStats, cannot_read
from toktoktok.sources.streams import as_path, file_format, raw_chunks, sniffed, span_chunks
from toktoktok.uris import is_remote


class TxtWindow(NamedTuple):
    """A stretch of a ``.txt`` file's bytes and the offsets where documents end in it.

    Read from a plain local file, the window lies in a buffer with spare room
    before it (``buffer[:at]``, ``data`` being ``buffer[at:]``), where a reader
    holding the bytes before the window may put them to have both in one
    piece without copying the window (``units.Splitter.feed``).
    """

    data: memoryview  # the file's bytes (decompressed, BOM dropped), in order
    ends: np.ndarray  # offsets e, 0 < e <= len(data): a document ends after data[:e]
    buffer: np.ndarray | None = None  # writable bytes holding data at ``at``; before it, spare room
    at: int = 0


class _Roomy(NamedTuple):
    """Bytes read into ``array[at : at + size]``, with ``array[:at]`` free to fill."""

    array: np.ndarray
    at: int
    size: int

    def tobytes(self) -> bytes:
        return self.array[self.at : self.at + self.size].tobytes()


# spare room before each read of a plain .txt file: the bytes a window's reader
# holds over from the window before (units.Splitter: the open document's tail and
# a few bytes of margin, usually far less) go there, not into a copy of the window
ROOM_BYTES = 1 << 16


def _roomy_chunks(path: Path, size: int, span: tuple[int, int] | None = None) -> Iterator[_Roomy]:
    """A local file's bytes (``span``: only ``start:end``), ``size`` at a time, each
    read into a buffer of its own after ``ROOM_BYTES`` of spare room (none before
    the first: nothing is held before it).

    A buffer is no larger than the rest of the file: a corpus of many small
    files allocates small buffers (16 KB files read in 1 MiB buffers cost more
    than the copies the room saves)."""
    pos, end = span if span is not None else (0, None)
    room = 0
    with open(path, "rb") as fh:
        fh.seek(pos)
        known = os.fstat(fh.fileno()).st_size if end is None else end
        while end is None or pos < end:
            want = min(size, max(known - pos, 1))  # past the size known: a read that finds the end
            array = np.empty(room + want, dtype=np.uint8)
            n = fh.readinto(memoryview(array)[room:])
            if not n:
                return
            pos += n
            yield _Roomy(array, room, n)
            room = ROOM_BYTES


def _plain_txt_chunks(path: Path, size: int, stats: ReadStats) -> Iterator[bytes | _Roomy]:
    """``raw_chunks`` of a plain local file, read into buffers with spare room;
    a file starting with a UTF-16 or UTF-32 byte order mark (or a first read of
    fewer than 4 bytes) goes through ``recoded`` as bytes instead."""
    chunks = _roomy_chunks(path, size)
    first = next(chunks, None)
    if first is None:
        return
    head = first.array[first.at : first.at + min(first.size, 4)].tobytes()
    if len(head) < 4 or any(head.startswith(bom) for bom, _ in WIDE_BOMS):
        yield from recoded(itertools.chain([first.tobytes()], (c.tobytes() for c in chunks)), stats)
        return
    yield first
    yield from chunks


_BOM = b"\xef\xbb\xbf"


@functools.cache
def _load_document_kernels_once() -> None:
    """``documents.load_document_kernels`` once in a process, with Ctrl-C held meanwhile:
    a command reading ``.txt`` files (``encode``, ``compare``) may start numba here."""
    uninterrupted(documents.load_document_kernels)


def windows(chunks: Iterable[bytes | _Roomy], stats: ReadStats, started: bool = False,
            ends: bool = True) -> Iterator[TxtWindow]:
    """A file's bytes (``chunks``, in order) as windows, with the document ends found
    by ``documents.doc_ends`` (each offset judged once, with 3 bytes of context
    on either side carried between windows). ``started``: the bytes are not the
    file's first (a span after its start: no byte order mark to look for).
    ``ends`` False: no document ends (the whole file is one document)."""
    _load_document_kernels_once()
    doc_ends = documents.doc_ends if ends else _no_ends
    ctx = b""  # the last 3 bytes already yielded: context before the next window
    pending = b""  # bytes read but not yet yielded (waiting for the bytes after them)
    for chunk in chunks:
        if isinstance(chunk, _Roomy) and not started and not pending and chunk.size >= len(_BOM):
            # the file's first read: its byte order mark, if any, joins the room
            skip = len(_BOM) if chunk.array[chunk.at : chunk.at + len(_BOM)].tobytes() == _BOM else 0
            stats.bytes_read += skip
            chunk, started = _Roomy(chunk.array, chunk.at + skip, chunk.size - skip), True
        if isinstance(chunk, _Roomy) and started and chunk.at >= len(ctx) + len(pending):
            # the held bytes go into the room before the bytes read: no copy of them
            stats.bytes_read += chunk.size
            start = chunk.at - len(ctx) - len(pending)
            if start < chunk.at:
                chunk.array[start : chunk.at] = np.frombuffer(ctx + pending, dtype=np.uint8)
            buf, buffer = chunk.array[start : chunk.at + chunk.size], chunk.array
        else:
            if isinstance(chunk, _Roomy):
                chunk = chunk.tobytes()
            stats.bytes_read += len(chunk)
            if not started:
                pending += chunk
                if len(pending) < len(_BOM) and _BOM.startswith(pending):
                    continue
                pending, chunk, started = b"", pending.removeprefix(_BOM), True
            buf, buffer, start = np.frombuffer(ctx + pending + chunk, dtype=np.uint8), None, 0
        lo, cut = len(ctx), len(buf) - 3
        if cut <= lo:
            ctx, pending = buf[:lo].tobytes(), buf[lo:].tobytes()
            continue
        yield TxtWindow(memoryview(buf)[lo:cut], doc_ends(readonly(buf), lo, cut, False) - lo, buffer, start + lo)
        ctx, pending = buf[max(0, cut - 3) : cut].tobytes(), buf[cut:].tobytes()
    if not started:
        pending = pending.removeprefix(_BOM)
    buf = ctx + pending
    lo = len(ctx)
    if len(buf) > lo:
        found = doc_ends(np.frombuffer(buf, dtype=np.uint8), lo, len(buf), True)
        yield TxtWindow(memoryview(buf)[lo:], found - lo)


def _no_ends(buf: np.ndarray, lo: int, hi: int, final: bool) -> np.ndarray:
    """``doc_ends`` of the ``file`` rule: none (offsets as ``doc_ends`` gives them, from 0)."""
    return np.zeros(0, dtype=np.int64) + lo


def iter_txt_windows(path: Path, *, block_bytes: int = 1 << 20, stats: ReadStats | None = None,
                     span: tuple[int, int] | None = None, ends: bool = True,
                     data: bytes | None = None) -> Iterator[TxtWindow]:
    """Stream a ``.txt`` file (plain or compressed) as ``TxtWindow``s, its bytes
    undecoded: decode them in order with one ``Utf8Decoder``. The caller counts
    documents (``stats.documents``); read failures raise SourceError naming the file.
    ``span``: only bytes ``start:end`` of a plain file, cut where a document
    starts (the Ray engine's byte ranges), read as they are. ``ends`` False:
    the whole text is one document (the ``file`` rule); a file of another
    suffix than ``.txt`` is read by ``raw_chunks`` (its first bytes checked).
    ``data``: the file's bytes, read whole by the caller (nothing is read here).

        >>> import tempfile
        >>> f = Path(tempfile.mkdtemp()) / "a.txt"
        >>> _ = f.write_bytes(b"one\\n\\ntwo\\n\\n three")
        >>> [(bytes(w.data), w.ends.tolist()) for w in iter_txt_windows(f)]
        [(b'one\\n\\ntwo\\n\\n th', [5]), (b'ree', [])]
    """
    path = as_path(path)
    stats = stats if stats is not None else ReadStats()
    try:
        if data is not None:  # the file's bytes, read whole by the caller
            chunks = recoded([data], stats) if file_format(path)[0] == "txt" else sniffed(path, recoded([data], stats))
        elif not is_remote(path) and file_format(path) == ("txt", None):
            chunks = _plain_txt_chunks(path, max(1, block_bytes), stats) if span is None else \
                _roomy_chunks(path, max(1, block_bytes), span)
        else:
            chunks = raw_chunks(path, max(1, block_bytes), stats) if span is None else \
                span_chunks(path, span, max(1, block_bytes))
        yield from windows(chunks, stats, span is not None and span[0] > 0, ends)
    except READ_ERRORS as exc:
        raise cannot_read(path, exc) from exc
    stats.files += 1
