"""Reading source files into documents (docs/configuration.md and docs/pretokenization.md).

A source is a file or a directory scanned recursively for ``.txt``,
``.jsonl``, ``.parquet``, and ``.txt``/``.jsonl`` compressed as ``.zst`` or
``.gz``. ``iter_blocks`` streams one file as ``Block`` objects: pieces of
text tagged with the document they belong to, so that a caller never holds
more than a block or so of a file, whatever its size.

Documents:

- ``.txt``: split after a blank line that is followed by a character that is
  not white space (``regex``'s ``\\s``). A line break is ``\\r\\n``, ``\\n``
  or ``\\r``; a blank line is a line break immediately followed by another
  one. The boundary falls after the second line break, so the blank line
  stays at the end of the earlier document: ``"a\\n\\nb"`` gives ``"a\\n\\n"``
  and ``"b"``; ``"a\\n\\n b"`` is one document (the indented line continues
  it, as in code); ``"a\\r\\n\\r\\nb"`` gives ``"a\\r\\n\\r\\n"`` and ``"b"``.
  ``iter_blocks(documents=...)`` and ``iter_stream_blocks`` (standard
  input; ``toktok encode --documents``) may take another of
  ``TXT_DOCUMENTS``: ``line``, every non-empty line without its break, or
  ``file``, the whole text. A config's sources use the blank-line rule.
- ``.jsonl``: each non-blank line is a JSON object; its ``text_column`` value
  is the document. A ``null`` value is skipped and not counted (a row with
  no text is no document); an empty string is a document with no text.
- ``.parquet``: each non-null value of the text column is a document.

Decisions and trade-offs:

- Text is decoded as UTF-8 with invalid bytes replaced by U+FFFD (counted in
  ``ReadStats.replaced_chars``: U+FFFD in the output minus those spelled
  validly in the input). A UTF-8 byte order mark at the start is dropped.
  A lone surrogate from a JSON escape (half of a cut emoji) cannot be
  encoded as UTF-8: it becomes U+FFFD and is counted the same way.
- ``.zst`` is decompressed with a ``decompressobj`` fed small input slices,
  not with ``stream_reader``, because the reader ends silently on a
  truncated frame; a truncated or empty compressed file is an error. The
  slices bound memory for any sane compression ratio.
- Anything a library raises while reading (corrupt, truncated, unreadable)
  becomes a ``SourceError`` naming the file, chained with ``from``; the
  caller decides whether to fail or to skip the file (``on_bad_file``).
- A directory listing is sorted by path relative to the directory, skips
  hidden names, follows symlinked directories once (by real path, so loops
  end) and lists a file reached through several links once. A symbolic
  link that leads to no file (dangling, or a loop of links) is skipped by
  default; ``strict=True`` (the pipeline's check before work starts, with
  ``on_bad_file: fail``) reports it, and any listed file that cannot be
  opened, as a ``SourceError`` naming it. A sub-folder that cannot be
  listed is always an error: its files would silently be missing.
- A file that vanishes between listing and reading (deleted or moved while
  a run goes on) is a bad file like a corrupt one, named in the error.
"""

from __future__ import annotations

import codecs
import errno
import functools
import itertools
import gzip
import json
import os
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import regex
import zstandard

from toktoktok.config import Source
from toktoktok import documents
from toktoktok.documents import doc_ends
from toktoktok.fileset import uninterrupted
from toktoktok.uris import RemotePath, is_remote

if TYPE_CHECKING:
    import pyarrow.parquet as pq

SUFFIXES = (".txt", ".jsonl", ".parquet", ".txt.zst", ".jsonl.zst", ".txt.gz", ".jsonl.gz")

_READ_ERRORS = (OSError, EOFError, zlib.error, zstandard.ZstdError, pa.ArrowException)
_ZSTD_INPUT_SLICE = 1 << 13  # compressed bytes per decompress call
_PARQUET_BATCH_ROWS = 256
_REPLACEMENT = "\ufffd"
_REPLACEMENT_UTF8 = _REPLACEMENT.encode()
# A JSON escape that may decode to a lone surrogate, and such a surrogate.
_ESCAPED_SURROGATE = regex.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = regex.compile(r"[\ud800-\udfff]")


class SourceError(Exception):
    """A source that cannot be read; the message names the file (and line)."""


def as_path(path: Path | RemotePath | str) -> Path | RemotePath:
    """A local ``Path``, or the ``RemotePath`` (``toktoktok.uris``) it is."""
    return path if is_remote(path) else Path(path)


def open_binary(path: Path | RemotePath) -> BinaryIO:
    """A source file opened to read bytes: locally, or through ``pyarrow.fs``."""
    return path.open("rb") if is_remote(path) else open(path, "rb")


@dataclass
class Block:
    """A piece of a document; a document's blocks concatenate to it."""

    doc: int  # 0-based document index within the file
    text: str
    end: bool  # True on the document's last block
    row: int = 0  # parquet: the document's row number (nulls counted)
    offset: int = 0  # jsonl: the byte offset of the document's line (sampling's key, with ``row``)


@dataclass
class ReadStats:
    bytes_read: int = 0  # raw (decompressed) bytes consumed
    documents: int = 0
    replaced_chars: int = 0  # U+FFFD inserted for invalid UTF-8
    files: int = 0  # files read to the end
    recoded_files: int = 0  # files whose byte order mark said UTF-16 or UTF-32: decoded as such


# ---------------------------------------------------------------- listing


def file_format(path: Path) -> tuple[str, str | None]:
    """(kind, compression) of a supported file name, else SourceError.

        >>> file_format(Path("a/b.jsonl.zst"))
        ('jsonl', 'zst')
    """
    name = path.name.lower()
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            kind, _, comp = suffix[1:].partition(".")
            return kind, comp or None
    raise SourceError(f"{path}: unsupported file type (expected one of {', '.join(SUFFIXES)})")


def _is_supported(name: str) -> bool:
    return name.lower().endswith(SUFFIXES)


def _walk_files(root: Path) -> Iterator[tuple[Path, bool]]:
    """(path, is a file) under root, skipping hidden names, visiting each real dir once.

    Entries that are neither a file nor a folder come with ``False`` only when
    they are symbolic links (dangling, or looping): the caller decides.
    """
    seen: set[str] = set()
    stack = [root]
    while stack:
        folder = stack.pop()
        real = os.path.realpath(folder)
        if real in seen:
            continue
        seen.add(real)
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            raise SourceError(f"{folder}: cannot list directory: {exc.strerror or exc}") from exc
        subdirs = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                is_dir, is_file = entry.is_dir(), entry.is_file()
            except OSError:  # a loop of symbolic links raises ELOOP here
                is_dir = is_file = False
            if is_dir:
                subdirs.append(Path(entry.path))
            elif is_file:
                yield Path(entry.path), True
            elif entry.is_symlink():
                yield Path(entry.path), False
        stack.extend(reversed(subdirs))


def _walk_remote(root: RemotePath) -> Iterator[tuple[RemotePath, bool]]:
    """(file, True) under a ``pyarrow.fs`` folder or prefix, hidden names (any part
    starting with ".") skipped, in no order (the caller sorts): no links there."""
    for file in root.walk():
        if not any(part.startswith(".") for part in file.relative_to(root).parts):
            yield file, True


def _selected(rel: str, include: tuple[str, ...], exclude: tuple[str, ...]) -> bool:
    """include (empty = all) and not exclude, globs on the relative posix path."""
    if include and not any(glob_match(rel, g) for g in include):
        return False
    return not any(glob_match(rel, g) for g in exclude)


def glob_match(rel: str, pattern: str) -> bool:
    """Whether the ``/``-separated relative path ``rel`` matches ``pattern``.

    ``*`` and ``?`` never cross ``/``; ``**/`` is zero or more folders (and a
    final ``**`` anything); ``[...]`` is a set of characters; a pattern
    without ``/`` matches a file's name at any depth.

        >>> [glob_match(p, "**/*.txt") for p in ("a.txt", "x/a.txt", "x/y/a.txt", "a.md")]
        [True, True, True, False]
        >>> [glob_match(p, "*.txt") for p in ("a.txt", "x/a.txt")], glob_match("x/a.txt", "x/*")
        ([True, True], True)
        >>> glob_match("x/y/a.txt", "x/*"), glob_match("x/y/a.txt", "x/**")
        (False, True)
    """
    if "/" not in pattern:
        rel = rel.rpartition("/")[2]
    return _glob_regex(pattern).fullmatch(rel) is not None


@functools.lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> regex.Pattern:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (end := pattern.find("]", i + 2)) > 0:
            body = pattern[i + 1 : end]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(regex.escape(pattern[i]))
            i += 1
    return regex.compile("".join(out), regex.DOTALL)


def list_source_files(source: Source, *, strict: bool = False,
                      skipped: list[dict[str, str]] | None = None) -> list[Path]:
    """The files a source reads, in a deterministic order.

    A ``file:`` source is itself; a ``path:`` directory is scanned
    recursively for supported files, filtered by the include/exclude globs
    (``glob_match`` on the path relative to the directory, ``/`` separated)
    and sorted by that relative path.

    ``strict``: a selected symbolic link that leads to no file, or a listed
    file that cannot be opened for reading, raises SourceError naming it
    (by default the first is skipped, and listed in ``skipped`` when given,
    and the second fails when read).
    """
    path = as_path(source.path)
    if not source.is_dir:
        if not path.is_file():
            raise SourceError(f"{path}: no such file")
        file_format(path)
        if strict:
            _check_openable(path)
        return [path]
    if not path.is_dir():
        raise SourceError(f"{path}: no such directory")
    found: list[tuple[str, Path]] = []
    for file, is_file in _walk_files(path) if not is_remote(path) else _walk_remote(path):
        rel = file.relative_to(path).as_posix()
        if _is_supported(file.name) and _selected(rel, source.include, source.exclude):
            if is_file:
                found.append((rel, file))
            elif strict:
                raise SourceError(f"{file}: {_broken_link(file)}")
            elif skipped is not None:
                skipped.append({"path": str(file), "error": _broken_link(file), "text_read_kept": False})
    files = _unique_real(sorted(found)) if not is_remote(path) else [file for _, file in sorted(found)]
    if not files:
        raise SourceError(f"{path}: no {'/'.join(SUFFIXES)} file found (after include/exclude)")
    if strict:
        for file in files:
            _check_openable(file)
    return files


def _broken_link(path: Path) -> str:
    """Why a symbolic link leads to no file."""
    try:
        path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a loop of symbolic links, not a file"
        try:
            target = f"to {os.readlink(path)}, "
        except OSError:
            target = ""
        return f"a broken symbolic link ({target}{exc.strerror or exc})"
    return "a symbolic link to something that is not a file"


def _check_openable(path: Path) -> None:
    """Open and close the file, or SourceError saying why it cannot be read."""
    try:
        with open_binary(path):
            pass
    except OSError as exc:
        raise SourceError(f"{path}: cannot read: {_reason(exc)}") from exc


def _unique_real(found: list[tuple[str, Path]]) -> list[Path]:
    """Drop files already listed under another name (symlinks)."""
    seen: set[str] = set()
    out = []
    for _, file in found:
        real = os.path.realpath(file)
        if real not in seen:
            seen.add(real)
            out.append(file)
    return out


# ------------------------------------------------------------ raw bytes


def _plain_chunks(path: Path, size: int) -> Iterator[bytes]:
    with open_binary(path) as fh:
        while chunk := fh.read(size):
            yield chunk


def _gzip_chunks(path: Path, size: int) -> Iterator[bytes]:
    if path.stat().st_size == 0:
        raise SourceError(f"{path}: empty file, not gzip data")
    with open_binary(path) as raw, gzip.open(raw, "rb") as fh:
        while chunk := fh.read(size):
            yield chunk


def _zstd_chunks(path: Path, size: int) -> Iterator[bytes]:
    """Decompressed chunks of at most ``size`` bytes; all frames; truncation fails."""
    out = bytearray()
    with open_binary(path) as fh:
        for data in _zstd_outputs(path, fh):
            out += data
            while len(out) >= size:
                yield bytes(out[:size])
                del out[:size]
    if out:
        yield bytes(out)


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
    whose byte order mark says UTF-16 or UTF-32 comes as UTF-8 (``recoded``)."""
    compression = file_format(path)[1]
    if compression == "zst":
        chunks = _zstd_chunks(path, size)
    elif compression == "gz":
        chunks = _gzip_chunks(path, size)
    else:
        chunks = _plain_chunks(path, size)
    return recoded(chunks, stats)


# UTF-32 first: its little-endian mark begins with UTF-16's
_WIDE_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
              (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def recoded(chunks: Iterable[bytes], stats: ReadStats | None = None) -> Iterator[bytes]:
    """``chunks`` as they are, or, when they begin with a UTF-16 or UTF-32 byte
    order mark, decoded as that encoding (invalid units replaced) and given as
    UTF-8: such a text must never be trained on as bytes (every other byte 0).

        >>> b"".join(recoded([b"\\xff\\xfeh\\x00", b"i\\x00"]))
        b'hi'
        >>> b"".join(recoded([b"plain"]))
        b'plain'
    """
    chunks = iter(chunks)
    head = b""
    for chunk in chunks:
        head += chunk
        if len(head) >= 4:
            break
    encoding = next((enc for bom, enc in _WIDE_BOMS if head.startswith(bom)), None)
    if encoding is None:
        if head:
            yield head
        yield from chunks
        return
    if stats is not None:
        stats.recoded_files += 1
    decoder = codecs.getincrementaldecoder(encoding)("replace")  # it drops the mark itself
    for chunk in itertools.chain([head], chunks):
        text = decoder.decode(chunk)
        if text:
            yield text.encode("utf-8", "surrogatepass")
    rest = decoder.decode(b"", final=True)
    if rest:
        yield rest.encode("utf-8", "surrogatepass")


# ------------------------------------------------------------ decoding


def _decode_line(raw: bytes, stats: ReadStats) -> str:
    """UTF-8 with replacement; replacements counted."""
    text = raw.decode("utf-8", "replace")
    if _REPLACEMENT in text:
        stats.replaced_chars += text.count(_REPLACEMENT) - raw.count(_REPLACEMENT_UTF8)
    return text


class Utf8Decoder:
    """Incremental UTF-8 decoding with replacement, counting what was replaced.

    Feed it a file's bytes in order, in slices cut anywhere; the texts
    concatenate to the file decoded whole.

        >>> d = Utf8Decoder(ReadStats())
        >>> d.decode(b"caf\\xc3") + d.decode(b"\\xa9 \\xff") + d.decode(b"", final=True) == "café \\ufffd"
        True
    """

    def __init__(self, stats: ReadStats) -> None:
        self.stats = stats
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._tail = b""  # the last 2 bytes fed, to find a valid U+FFFD across slices

    def decode(self, data: bytes | memoryview, final: bool = False) -> str:
        return self.decode_sized(data, final)[0]

    def skip(self, data: bytes | memoryview) -> None:
        """Pass over bytes that are valid UTF-8, whole characters, not needed as
        text (nothing in them is replaced); the decoder must hold nothing."""
        self._remember(data)

    def _remember(self, data: bytes | memoryview) -> None:
        """Keep the last 2 bytes fed (a valid U+FFFD may begin in them)."""
        if len(data) >= 2:
            self._tail = bytes(data[-2:])
        elif data:
            self._tail = (self._tail + bytes(data))[-2:]

    def take_pending(self) -> bytes:
        """The bytes of an incomplete character held back, which the caller now
        owns; the decoder starts afresh (as at the start of a file)."""
        pending = self._decoder.getstate()[0]
        self._decoder.reset()
        self._tail = b""
        return pending

    def decode_sized(self, data: bytes | memoryview, final: bool = False) -> tuple[str, int]:
        """The text and its length in UTF-8 bytes (from the bytes consumed when
        nothing was replaced, so the text need not be encoded again)."""
        held = len(self._decoder.getstate()[0])
        text = self._decoder.decode(data, final)
        replaced = 0
        if _REPLACEMENT in text:
            data = bytes(data)
            legit = data.count(_REPLACEMENT_UTF8) + (self._tail + data[:2]).count(_REPLACEMENT_UTF8)
            replaced = text.count(_REPLACEMENT) - legit
            self.stats.replaced_chars += replaced
        self._remember(data)
        if replaced:
            return text, len(text.encode("utf-8"))
        return text, held + len(data) - len(self._decoder.getstate()[0])


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


# ------------------------------------------------------------ documents


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
# (1.2 GB of C source: the main thread took 1.99-2.06 s of CPU with the copies, 1.84-1.93 without)
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
    if len(head) < 4 or any(head.startswith(bom) for bom, _ in _WIDE_BOMS):
        yield from recoded(itertools.chain([first.tobytes()], (c.tobytes() for c in chunks)), stats)
        return
    yield first
    yield from chunks


_BOM = b"\xef\xbb\xbf"


def span_chunks(path: Path, span: tuple[int, int], size: int) -> Iterator[bytes]:
    """Bytes ``span[0]:span[1]`` of a plain file, ``size`` at a time (as read:
    no byte order mark is looked for: a span is part of a file)."""
    start, end = span
    with open_binary(path) as fh:
        fh.seek(start)
        while start < end and (chunk := fh.read(min(size, end - start))):
            start += len(chunk)
            yield chunk


@functools.cache
def _load_kernels() -> None:
    """``documents.load_kernels`` once in a process, with Ctrl-C held meanwhile:
    a command reading ``.txt`` files (``encode``, ``compare``) may start numba here."""
    uninterrupted(documents.load_kernels)


def _txt_windows(chunks: Iterable[bytes | _Roomy], stats: ReadStats, started: bool = False) -> Iterator[TxtWindow]:
    """A file's bytes (``chunks``, in order) as windows, with the document ends found
    by ``documents.doc_ends`` (each offset judged once, with 3 bytes of context
    on either side carried between windows). ``started``: the bytes are not the
    file's first (a span after its start: no byte order mark to look for)."""
    _load_kernels()
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
        yield TxtWindow(memoryview(buf)[lo:cut], doc_ends(buf, lo, cut, False) - lo, buffer, start + lo)
        ctx, pending = buf[max(0, cut - 3) : cut].tobytes(), buf[cut:].tobytes()
    if not started:
        pending = pending.removeprefix(_BOM)
    buf = ctx + pending
    lo = len(ctx)
    if len(buf) > lo:
        ends = doc_ends(np.frombuffer(buf, dtype=np.uint8), lo, len(buf), True)
        yield TxtWindow(memoryview(buf)[lo:], ends - lo)


def iter_txt_windows(path: Path, *, block_bytes: int = 1 << 20, stats: ReadStats | None = None,
                     span: tuple[int, int] | None = None) -> Iterator[TxtWindow]:
    """Stream a ``.txt`` file (plain or compressed) as ``TxtWindow``s, its bytes
    undecoded: decode them in order with one ``Utf8Decoder``. The caller counts
    documents (``stats.documents``); read failures raise SourceError naming the file.
    ``span``: only bytes ``start:end`` of a plain file, cut where a document
    starts (the Ray engine's byte ranges), read as they are.

        >>> import tempfile
        >>> f = Path(tempfile.mkdtemp()) / "a.txt"
        >>> _ = f.write_bytes(b"one\\n\\ntwo\\n\\n three")
        >>> [(bytes(w.data), w.ends.tolist()) for w in iter_txt_windows(f)]
        [(b'one\\n\\ntwo\\n\\n th', [5]), (b'ree', [])]
    """
    path = as_path(path)
    stats = stats if stats is not None else ReadStats()
    try:
        if not is_remote(path) and file_format(path) == ("txt", None):
            chunks = _plain_txt_chunks(path, max(1, block_bytes), stats) if span is None else \
                _roomy_chunks(path, max(1, block_bytes), span)
        else:
            chunks = raw_chunks(path, max(1, block_bytes), stats) if span is None else \
                span_chunks(path, span, max(1, block_bytes))
        yield from _txt_windows(chunks, stats, span is not None and span[0] > 0)
    except _READ_ERRORS as exc:
        raise SourceError(f"{path}: cannot read: {_reason(exc)}") from exc
    stats.files += 1


def _text_blocks(chunks: Iterable[bytes], stats: ReadStats) -> Iterator[Block]:
    """Documents as blocks (the blank-line rule); the newest text of the open
    document is held back until more arrives, so the last block of every
    document holds text and carries ``end=True``."""
    decoder = Utf8Decoder(stats)
    doc, open_text = 0, ""
    for window in _txt_windows(chunks, stats):
        start = 0
        for end in window.ends.tolist():
            yield Block(doc, open_text + decoder.decode(window.data[start:end]), True)
            stats.documents += 1
            doc, open_text, start = doc + 1, "", end
        text = decoder.decode(window.data[start:])
        if text:
            if open_text:
                yield Block(doc, open_text, False)
            open_text = text
    text = open_text + decoder.decode(b"", final=True)
    if text:
        stats.documents += 1
        yield Block(doc, text, True)


def _decoded(chunks: Iterable[bytes], stats: ReadStats) -> Iterator[str]:
    """A file's bytes decoded in order (BOM dropped, replacements counted), one
    text per chunk (empty texts left out)."""
    decoder = Utf8Decoder(stats)
    first = True
    for chunk in chunks:
        stats.bytes_read += len(chunk)
        text = decoder.decode(chunk)
        if first and text:
            text, first = text.removeprefix("\ufeff"), False
        if text:
            yield text
    text = decoder.decode(b"", final=True)
    if first:
        text = text.removeprefix("\ufeff")
    if text:
        yield text


def _file_blocks(chunks: Iterable[bytes], stats: ReadStats) -> Iterator[Block]:
    """The ``file`` rule: the whole text is one document (none when it is empty).
    One text is held back, so the last block carries ``end=True``."""
    held: str | None = None
    for text in _decoded(chunks, stats):
        if held is not None:
            yield Block(0, held, False)
        held = text
    if held is not None:
        stats.documents += 1
        yield Block(0, held, True)


_LINE_BREAK = regex.compile(r"\r\n|\r|\n")


def _line_blocks(chunks: Iterable[bytes], block_chars: int, stats: ReadStats) -> Iterator[Block]:
    """The ``line`` rule: every line is a document, its line break (``\\r\\n``,
    ``\\n`` or ``\\r``) left out; an empty line is no document.

    The open line's text is held until its break arrives; a line longer than
    ``block_chars`` is passed on in blocks, keeping its last two characters
    back (one of them is not a break), so its last block holds text. A
    ``\\r`` at the end of the text read so far waits for the next text (it
    may be the start of ``\\r\\n``).
    """
    doc, held = 0, ""
    for text in _decoded(chunks, stats):
        lines = _LINE_BREAK.split(held + text)
        held = lines.pop()
        if not held and lines and text.endswith("\r"):
            held = lines.pop() + "\r"  # the \r may be half of \r\n: judged with the next text
        for line in lines:
            if line:
                yield Block(doc, line, True)
                stats.documents += 1
                doc += 1
        if len(held) > block_chars:
            yield Block(doc, held[:-2], False)
            held = held[-2:]
    for line in _LINE_BREAK.split(held):
        if line:
            yield Block(doc, line, True)
            stats.documents += 1
            doc += 1


TXT_DOCUMENTS = ("blank-line", "line", "file")  # the rules that cut a .txt into documents


def _txt_blocks(chunks: Iterable[bytes], documents: str, block_chars: int, stats: ReadStats) -> Iterator[Block]:
    if documents == "line":
        return _line_blocks(chunks, block_chars, stats)
    if documents == "file":
        return _file_blocks(chunks, stats)
    if documents != "blank-line":
        raise ValueError(f"unknown document rule {documents!r} (one of {', '.join(TXT_DOCUMENTS)})")
    return _text_blocks(chunks, stats)


def iter_stream_blocks(stream: BinaryIO, *, documents: str = "blank-line", block_chars: int = 1 << 20,
                       stats: ReadStats | None = None) -> Iterator[Block]:
    """Text from a binary stream (standard input) as document blocks, cut into
    documents like a ``.txt`` by the ``documents`` rule.

        >>> import io
        >>> [(b.doc, b.text) for b in iter_stream_blocks(io.BytesIO(b"a\\r\\nb\\n\\nc"), documents="line")]
        [(0, 'a'), (1, 'b'), (2, 'c')]
    """
    stats = stats if stats is not None else ReadStats()
    size = max(1, block_chars)
    yield from _txt_blocks(recoded(iter(lambda: stream.read(size), b""), stats), documents, size, stats)
    stats.files += 1


def _document_blocks(doc: int, text: str, block_chars: int, row: int = 0, offset: int = 0) -> Iterator[Block]:
    """One document as blocks of at most block_chars characters."""
    if len(text) <= block_chars:
        yield Block(doc, text, True, row, offset)
        return
    for i in range(0, len(text), block_chars):
        yield Block(doc, text[i : i + block_chars], i + block_chars >= len(text), row, offset)


def _jsonl_text(path: Path, lineno: int, line: str, column: str) -> str | None:
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


def _jsonl_blocks(path: Path, column: str, block_chars: int, stats: ReadStats) -> Iterator[Block]:
    doc = at = 0
    for lineno, raw in enumerate(_iter_lines(_counted(raw_chunks(path, block_chars, stats), stats)), 1):
        offset, at = at, at + len(raw) + 1
        line = _decode_line(raw, stats)
        if lineno == 1:
            line = line.removeprefix("\ufeff")
        if not line.strip():
            continue
        text = _jsonl_text(path, lineno, line, column)
        if text is None:
            continue
        if _ESCAPED_SURROGATE.search(raw):
            text = _replace_surrogates(text, stats)
        stats.documents += 1
        yield from _document_blocks(doc, text, block_chars, 0, offset)
        doc += 1


def _replace_surrogates(text: str, stats: ReadStats) -> str:
    """Lone surrogates (JSON escapes like "\\ud83d" of a cut emoji) -> U+FFFD, counted.

    They cannot be encoded as UTF-8, so they would break every later step.
    """
    fixed, count = _SURROGATE.subn(_REPLACEMENT, text)
    stats.replaced_chars += count
    return fixed


def _counted(chunks: Iterable[bytes], stats: ReadStats) -> Iterator[bytes]:
    for chunk in chunks:
        stats.bytes_read += len(chunk)
        yield chunk


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
    Reading 1 GiB of text held 240 MB at peak with pyarrow's defaults, 160 MB so.

    ``pyarrow.parquet`` is imported here, when a parquet file is read: it holds
    9 MB of every process that imports it."""
    import pyarrow.parquet as pq

    if is_remote(path):
        fs, inner = path.inner()
        return pq.ParquetFile(inner, filesystem=fs, buffer_size=1 << 16, pre_buffer=False)
    return pq.ParquetFile(path, buffer_size=1 << 16, pre_buffer=False)


def _parquet_blocks(path: Path, column: str, block_chars: int, stats: ReadStats) -> Iterator[Block]:
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


def iter_blocks(
    path: Path,
    *,
    text_column: str = "text",
    block_chars: int = 1 << 20,
    stats: ReadStats | None = None,
    documents: str = "blank-line",
) -> Iterator[Block]:
    """Stream one file as document blocks (never reading it whole).

    ``.txt`` text is read in blocks of about ``block_chars`` bytes and cut
    into documents by the ``documents`` rule (``TXT_DOCUMENTS``:
    ``blank-line``, the default described above; ``line``, every non-empty
    line without its break; ``file``, the whole file); jsonl and parquet
    documents longer than ``block_chars`` come in several blocks.
    Any failure to read the file raises SourceError naming it.

        >>> import tempfile
        >>> f = Path(tempfile.mkdtemp()) / "a.txt"
        >>> _ = f.write_text("one\\n\\ntwo")
        >>> [(b.doc, b.text, b.end) for b in iter_blocks(f)]
        [(0, 'one\\n\\n', True), (1, 'two', True)]
    """
    path = as_path(path)
    stats = stats if stats is not None else ReadStats()
    kind = file_format(path)[0]
    block_chars = max(1, block_chars)
    try:
        if kind == "parquet":
            yield from _parquet_blocks(path, text_column, block_chars, stats)
        elif kind == "jsonl":
            yield from _jsonl_blocks(path, text_column, block_chars, stats)
        else:
            yield from _txt_blocks(raw_chunks(path, block_chars, stats), documents, block_chars, stats)
    except _READ_ERRORS as exc:
        raise SourceError(f"{path}: cannot read: {_reason(exc)}") from exc
    stats.files += 1


def text_bytes(path: Path, *, text_column: str = "text") -> int:
    """The size of a file's text in bytes, without holding it: what sampling measures.

    A plain ``.txt`` or ``.jsonl`` is its size on disk; a compressed one is
    decompressed as a stream and counted; for parquet it is the UTF-8 length
    of the text column. For jsonl this counts whole lines (keys and quoting
    too), a little more than the text: sampling then keeps a little less.

        >>> import tempfile
        >>> f = Path(tempfile.mkdtemp()) / "a.txt"
        >>> text_bytes(f) if f.write_text("héllo") else None
        6
    """
    path = as_path(path)
    kind, compression = file_format(path)
    try:
        if kind == "parquet":
            total = 0
            with _open_parquet(path) as pf:
                _text_field_type(path, pf.schema_arrow, text_column)
                for batch in pf.iter_batches(batch_size=_PARQUET_BATCH_ROWS, columns=[text_column], use_threads=False):
                    total += pc.sum(pc.binary_length(_as_strings(batch.column(0)))).as_py() or 0
            return total
        if compression is None and not _wide_bom(path):
            return path.stat().st_size
        return sum(len(chunk) for chunk in raw_chunks(path, 1 << 22))
    except _READ_ERRORS as exc:
        raise SourceError(f"{path}: cannot read: {_reason(exc)}") from exc


def _wide_bom(path: Path) -> bool:
    """Whether a plain file starts with a UTF-16 or UTF-32 byte order mark."""
    with open_binary(path) as fh:
        head = fh.read(4)
    return any(head.startswith(bom) for bom, _ in _WIDE_BOMS)


def _reason(exc: BaseException) -> str:
    """A short, plain reason for a read failure (the exception's kind and text).

        >>> _reason(FileNotFoundError(2, "No such file or directory", "/x.txt"))
        'the file no longer exists (deleted or moved since the run started?)'
        >>> _reason(zlib.error("Error -3 while decompressing data: invalid distance"))
        'corrupt compressed data (Error -3 while decompressing data: invalid distance)'
    """
    if isinstance(exc, FileNotFoundError):
        return "the file no longer exists (deleted or moved since the run started?)"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, IsADirectoryError):
        return "it is a directory, not a file"
    if isinstance(exc, zlib.error):
        return f"corrupt compressed data ({exc})"
    if isinstance(exc, EOFError):
        return f"truncated ({exc})"
    if isinstance(exc, (pa.ArrowException, zstandard.ZstdError)):
        return f"{type(exc).__name__}: {exc}"
    if type(exc) is OSError:  # e.g. pyarrow's "Couldn't deserialize thrift"
        return exc.strerror or str(exc)
    return f"{type(exc).__name__}: {exc}"
