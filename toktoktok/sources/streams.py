"""A source file as a stream of bytes: its format, opened where it lies, decompressed.

A file's name says what it holds (``file_format``: ``.txt``, ``.jsonl``,
``.parquet`` or ``.arrow``, else ``text``: any other file, read as plain
UTF-8 text) and how it is compressed (``.zst``, ``.gz``, or not). A ``text``
file whose first bytes are not text (``decoding.not_text``) fails to read. It is
opened locally or, for a URI, through ``pyarrow.fs`` (``toktoktok.uris``), and
``raw_chunks`` gives its bytes decompressed, a chunk at a time, never whole.

``.zst`` is decompressed with a ``decompressobj`` fed small input slices, not
with ``stream_reader``, because the reader ends silently on a truncated
frame; a truncated or empty compressed file is an error. The slices bound
memory for any sane compression ratio.

    >>> import tempfile, zstandard
    >>> f = Path(tempfile.mkdtemp()) / "a.txt.zst"
    >>> _ = f.write_bytes(zstandard.ZstdCompressor().compress(b"hello world"))
    >>> file_format(f), list(raw_chunks(f, 4))
    (('txt', 'zst'), [b'hell', b'o wo', b'rld'])
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import zstandard

from toktoktok.sources.ahead import read_ahead
from toktoktok.sources.decoding import SNIFF_BYTES, not_text, recoded
from toktoktok.sources.reads import ReadStats, SourceError
from toktoktok.uris import RemotePath, is_remote

SUFFIXES = (".txt", ".jsonl", ".parquet", ".arrow", ".txt.zst", ".jsonl.zst", ".txt.gz", ".jsonl.gz")
TEXT = "text"  # the kind of any file not named by SUFFIXES: plain UTF-8 text, never decompressed
ROW_KINDS = ("jsonl", "parquet", "arrow")  # files of rows: each row (or JSON line's field) is a document

try:  # ISA-L's gzip reader: the same format and errors as the standard library's, about three times as fast
    from isal import igzip as GZIP
except ImportError:  # installed without its wheel (``--no-deps``): the standard library's
    GZIP = gzip

DECOMPRESS_AHEAD = 2  # chunks decompressed ahead of the caller (``ahead.read_ahead``)
_ZSTD_INPUT_SLICE = 1 << 16  # compressed bytes per decompress call (smaller slices cost a call each)


def file_format(path: Path) -> tuple[str, str | None]:
    """(kind, compression) of a file name: one of ``SUFFIXES``, else ``(TEXT, None)``.

        >>> file_format(Path("a/b.jsonl.zst")), file_format(Path("a/main.c"))
        (('jsonl', 'zst'), ('text', None))
    """
    name = path.name.lower()
    if not name.endswith(SUFFIXES):  # most files of a source tree: one test, not one a suffix
        return TEXT, None
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            kind, _, comp = suffix[1:].partition(".")
            return kind, comp or None
    return TEXT, None


def as_path(path: Path | RemotePath | str) -> Path | RemotePath:
    """A local ``Path``, or the ``RemotePath`` (``toktoktok.uris``) it is."""
    return path if isinstance(path, Path) or is_remote(path) else Path(path)  # a Path is parsed anew otherwise


def open_binary(path: Path | RemotePath) -> BinaryIO:
    """A source file opened to read bytes: locally, or through ``pyarrow.fs``."""
    return path.open("rb") if is_remote(path) else open(path, "rb")


def _plain_chunks(path: Path, size: int) -> Iterator[bytes]:
    with open_binary(path) as fh:
        while chunk := fh.read(size):
            yield chunk


def _gzip_chunks(path: Path, size: int) -> Iterator[bytes]:
    if path.stat().st_size == 0:
        raise SourceError(f"{path}: empty file, not gzip data")
    with open_binary(path) as raw, GZIP.open(raw, "rb") as fh:
        while chunk := fh.read(size):
            yield chunk


def _zstd_chunks(path: Path, size: int) -> Iterator[bytes]:
    """Decompressed chunks of about ``size`` bytes (whole outputs of the decompressor
    joined, at most twice ``size``); all frames; truncation fails. Joined once, not
    gathered in a buffer and sliced out of it: that copied every byte four times."""
    parts: list[bytes] = []
    held = 0
    with open_binary(path) as fh:
        for data in _zstd_outputs(path, fh):
            parts.append(data)
            held += len(data)
            if held >= size:
                yield from _sized(parts[0] if len(parts) == 1 else b"".join(parts), size)
                parts, held = [], 0
    if held:
        yield from _sized(b"".join(parts), size)


def _sized(data: bytes, size: int) -> Iterator[bytes]:
    """``data`` whole if at most twice ``size``, else cut into ``size`` bytes (a very
    compressible input gives large outputs)."""
    if len(data) <= 2 * size:
        yield data
        return
    for at in range(0, len(data), size):
        yield data[at : at + size]


def _zstd_outputs(path: Path, fh: BinaryIO) -> Iterator[bytes]:
    """Decompress frame after frame, checking the last one is complete."""
    dobj = zstandard.ZstdDecompressor().decompressobj()
    fed = False  # has the current frame been given any input?
    while data := fh.read(_ZSTD_INPUT_SLICE):
        while data:
            fed = True
            yield dobj.decompress(data)
            data = b""
            if dobj.eof:
                data = dobj.unused_data
                dobj = zstandard.ZstdDecompressor().decompressobj()
                fed = False
    if fed or fh.tell() == 0:
        raise SourceError(f"{path}: truncated or empty zstd data (the last frame is incomplete)")


def raw_chunks(path: Path, size: int, stats: ReadStats | None = None) -> Iterator[bytes]:
    """The file's bytes, decompressed, in chunks of about ``size`` bytes; a file
    whose byte order mark says UTF-16 or UTF-32 comes as UTF-8 (``recoded``); a
    ``TEXT`` file whose first bytes are not text raises SourceError (``sniffed``)."""
    kind, compression = file_format(path)
    if compression == "zst":  # decompressed in a thread of its own, overlapping with what the caller does
        chunks = read_ahead(_zstd_chunks(path, size), depth=DECOMPRESS_AHEAD)
    elif compression == "gz":
        chunks = read_ahead(_gzip_chunks(path, size), depth=DECOMPRESS_AHEAD)
    else:
        chunks = _plain_chunks(path, size)
    return sniffed(path, recoded(chunks, stats)) if kind == TEXT else recoded(chunks, stats)


def sniffed(path: Path, chunks: Iterator[bytes]) -> Iterator[bytes]:
    """``chunks`` as they are, once their first ``SNIFF_BYTES`` are found to be text
    (``decoding.not_text``); else SourceError naming the file and why."""
    head: list[bytes] = []
    held = 0
    for chunk in chunks:
        head.append(chunk)
        held += len(chunk)
        if held >= SNIFF_BYTES:
            break
    first = b"".join(head)
    why = not_text(first[:SNIFF_BYTES])
    if why:
        raise SourceError(f"{path}: not a text file ({why})")
    if first:
        yield first
    yield from chunks


def span_chunks(path: Path, span: tuple[int, int], size: int) -> Iterator[bytes]:
    """Bytes ``span[0]:span[1]`` of a plain file, ``size`` at a time (as read:
    no byte order mark is looked for: a span is part of a file)."""
    start, end = span
    with open_binary(path) as fh:
        fh.seek(start)
        while start < end and (chunk := fh.read(min(size, end - start))):
            start += len(chunk)
            yield chunk
