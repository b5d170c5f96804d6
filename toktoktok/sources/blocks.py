"""A source file as document blocks, whatever its format; a ``.txt`` cut by a document rule.

``iter_blocks`` streams one file as ``Block``s: pieces of text tagged with
the document they belong to, so that a caller never holds more than a block
or so of a file, whatever its size. A ``.jsonl`` or ``.parquet`` file is
read by ``rows``; a ``.txt`` file (plain or compressed) is cut into
documents by one of ``TXT_DOCUMENTS``: ``blank-line`` (the default of a
``.txt``; the rule of docs/pretokenization.md#documents, found in
``txt_windows``), ``line`` (every non-empty line without its break) or
``file`` (the whole text, the default of a file of any other suffix), or by
``split-on:STRING`` (the text between occurrences of STRING). ``iter_stream_blocks`` cuts standard input the same way (``toktok
encode --documents``). ``text_bytes`` measures a file's text for sampling.

    >>> import io
    >>> [(b.doc, b.text, b.end) for b in iter_stream_blocks(io.BytesIO(b"a\\n\\nb\\n\\n c"))]
    [(0, 'a\\n\\n', True), (1, 'b\\n', False), (1, '\\n c', True)]
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

import regex
import zstandard

from toktoktok.sources.decoding import SNIFF_BYTES, WIDE_BOMS, Utf8Decoder, recoded
from toktoktok.sources.reads import READ_ERRORS, Block, ReadStats, cannot_read
from toktoktok.sources.row_batches import parquet_size_estimate, table_blocks, table_text_bytes
from toktoktok.sources.rows import jsonl_blocks
from toktoktok.sources.streams import TEXT, as_path, file_format, open_binary, raw_chunks
from toktoktok.sources.txt_windows import windows
from toktoktok.uris import is_remote


def _text_blocks(chunks: Iterable[bytes], stats: ReadStats) -> Iterator[Block]:
    """Documents as blocks (the blank-line rule); the newest text of the open
    document is held back until more arrives, so the last block of every
    document holds text and carries ``end=True``."""
    decoder = Utf8Decoder(stats)
    doc, open_text = 0, ""
    for window in windows(chunks, stats):
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


def _split_blocks(chunks: Iterable[bytes], separator: str, block_chars: int, stats: ReadStats) -> Iterator[Block]:
    """The ``split-on:STRING`` rule: the text between occurrences of ``separator``
    (found left to right, not overlapping) is a document, the separator left
    out; an empty one is no document. A long document is passed on in blocks,
    keeping its last ``len(separator)`` characters back: no separator can start
    in what is passed on, so its last block holds text."""
    doc, held, keep = 0, "", len(separator)
    for text in _decoded(chunks, stats):
        found = (held + text).split(separator)
        held = found.pop()
        for part in found:
            if part:
                yield Block(doc, part, True)
                stats.documents += 1
                doc += 1
        if len(held) > block_chars + keep:
            yield Block(doc, held[:-keep], False)
            held = held[-keep:]
    if held:
        yield Block(doc, held, True)
        stats.documents += 1


TXT_DOCUMENTS = ("blank-line", "line", "file")  # the rules that cut a text file into documents
SPLIT_ON = "split-on:"  # and this followed by a string: the text between its occurrences


def is_document_rule(documents: str) -> bool:
    """Whether ``documents`` names a rule: one of ``TXT_DOCUMENTS``, or ``split-on:STRING``.

        >>> is_document_rule("line"), is_document_rule("split-on:<|doc|>"), is_document_rule("split-on:")
        (True, True, False)
    """
    return documents in TXT_DOCUMENTS or (documents.startswith(SPLIT_ON) and len(documents) > len(SPLIT_ON))


def document_rule(kind: str, documents: str | None) -> str:
    """The rule a text file of ``kind`` (``file_format``) is cut by: ``documents``
    when given, else ``blank-line`` for ``.txt`` and ``file`` for any other."""
    return documents if documents is not None else ("blank-line" if kind == "txt" else "file")


def _txt_blocks(chunks: Iterable[bytes], documents: str, block_chars: int, stats: ReadStats) -> Iterator[Block]:
    if documents == "line":
        return _line_blocks(chunks, block_chars, stats)
    if documents == "file":
        return _file_blocks(chunks, stats)
    if is_document_rule(documents) and documents.startswith(SPLIT_ON):
        return _split_blocks(chunks, documents[len(SPLIT_ON):], block_chars, stats)
    if documents != "blank-line":
        raise ValueError(f"unknown document rule {documents!r} (one of {', '.join(TXT_DOCUMENTS)}, split-on:STRING)")
    return _text_blocks(chunks, stats)


def iter_stream_blocks(stream: BinaryIO, *, documents: str | None = "blank-line", block_chars: int = 1 << 20,
                       stats: ReadStats | None = None) -> Iterator[Block]:
    """Text from a binary stream (standard input) as document blocks, cut into
    documents like a ``.txt`` by the ``documents`` rule.

        >>> import io
        >>> [(b.doc, b.text) for b in iter_stream_blocks(io.BytesIO(b"a\\r\\nb\\n\\nc"), documents="line")]
        [(0, 'a'), (1, 'b'), (2, 'c')]
    """
    stats = stats if stats is not None else ReadStats()
    size = max(1, block_chars)
    rule = documents or "blank-line"
    yield from _txt_blocks(recoded(iter(lambda: stream.read(size), b""), stats), rule, size, stats)
    stats.files += 1


def iter_blocks(
    path: Path,
    *,
    text_column: str = "text",
    block_chars: int = 1 << 20,
    stats: ReadStats | None = None,
    documents: str | None = None,
) -> Iterator[Block]:
    """Stream one file as document blocks (never reading it whole).

    Text (``.txt`` or a file of any other suffix) is read in blocks of about
    ``block_chars`` bytes and cut into documents by the ``documents`` rule
    (``is_document_rule``; None: ``document_rule``'s default, ``blank-line``
    for ``.txt``, docs/pretokenization.md#documents, ``file`` for others);
    jsonl and parquet documents longer than ``block_chars`` come in several blocks.
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
        if kind in ("parquet", "arrow"):
            yield from table_blocks(path, text_column, block_chars, stats)
        elif kind == "jsonl":
            yield from jsonl_blocks(path, text_column, block_chars, stats)
        else:
            rule = document_rule(kind, documents)
            yield from _txt_blocks(raw_chunks(path, block_chars, stats), rule, block_chars, stats)
    except READ_ERRORS as exc:
        raise cannot_read(path, exc) from exc
    stats.files += 1


def text_bytes(path: Path, *, text_column: str = "text") -> int:
    """The size of a file's text in bytes, without holding it: what sampling measures.

    A plain ``.txt`` or ``.jsonl`` is its size on disk (a file of another
    suffix too, once its first bytes are found to be text); a compressed one is
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
        if kind in ("parquet", "arrow"):
            return table_text_bytes(path, text_column)
        if kind == TEXT:
            next(iter(raw_chunks(path, SNIFF_BYTES)), None)  # SourceError if it is not text
        if compression is None and not _wide_bom(path):
            return path.stat().st_size
        return sum(len(chunk) for chunk in raw_chunks(path, 1 << 22))
    except READ_ERRORS as exc:
        raise cannot_read(path, exc) from exc


def text_bytes_estimate(path: Path, *, text_column: str = "text", size: int | None = None) -> tuple[int, bool]:
    """A file's text bytes without reading its text: ``(size, exact)``.

    Exact where the file says it at no cost (an ``.arrow`` file: its column's
    buffers, memory-mapped); else a guess for ingest to check against what it
    reads (a plain file: its size, exact but for a UTF-16 or UTF-32 byte order
    mark, not looked for; ``.zst``: the frame's declared size, or
    ``ZSTD_GUESS_RATIO`` times the file's size without one; ``.gz``: the size
    its trailer records, modulo 2**32; ``.parquet``: the column's uncompressed
    size in the footer). A remote file is measured (``text_bytes``). ``size``:
    the file's size, when the caller has it (a plain file is then not asked again).

        >>> import tempfile
        >>> f = Path(tempfile.mkdtemp()) / "a.txt"
        >>> text_bytes_estimate(f, text_column="text") if f.write_text("héllo") else None
        (6, False)
    """
    path = as_path(path)
    kind, compression = file_format(path)
    if is_remote(path):
        return text_bytes(path, text_column=text_column), True
    try:
        if kind == "parquet":
            return parquet_size_estimate(path, text_column), False
        if kind == "arrow":
            return table_text_bytes(path, text_column), True
        if compression is None:  # its size, unless a UTF-16 or UTF-32 mark makes it recoded: not opened to see
            return size if size is not None else path.stat().st_size, False
        guess = _declared_size(path, compression)
        return (guess, False) if guess is not None else (text_bytes(path), True)
    except READ_ERRORS as exc:
        raise cannot_read(path, exc) from exc


ZSTD_GUESS_RATIO = 8  # a zstd file that declares no size is guessed to hold this many times its size


def _declared_size(path: Path, compression: str) -> int | None:
    """The size a compressed file declares of its text (None: none, or not readable as such:
    measuring it then says what is wrong)."""
    try:
        with open(path, "rb") as fh:
            if compression == "zst":
                declared = zstandard.frame_content_size(fh.read(18))
                # no size declared (streamed compression): a ratio text rarely passes
                return declared if declared >= 0 else fh.seek(0, os.SEEK_END) * ZSTD_GUESS_RATIO
            if fh.seek(0, os.SEEK_END) < 18:  # no gzip member is shorter
                return None
            fh.seek(-4, os.SEEK_END)
            return int.from_bytes(fh.read(4), "little")
    except (OSError, zstandard.ZstdError):
        return None


def _wide_bom(path: Path) -> bool:
    """Whether a plain file starts with a UTF-16 or UTF-32 byte order mark."""
    with open_binary(path) as fh:
        head = fh.read(4)
    return any(head.startswith(bom) for bom, _ in WIDE_BOMS)
