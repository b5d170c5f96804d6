"""What a read of a source file gives besides its text, and how it fails.

A reader yields ``Block``s (pieces of documents) and adds to a ``ReadStats``.
Anything a library raises while reading (corrupt, truncated, unreadable:
``READ_ERRORS``) becomes a ``SourceError`` naming the file, chained with
``from``; the caller decides whether to fail or to skip the file
(``on_bad_file``). A file that vanishes between listing and reading (deleted
or moved while a run goes on) is a bad file like a corrupt one.

    >>> str(cannot_read("a.txt.gz", EOFError("Compressed file ended before the end-of-stream marker")))
    'a.txt.gz: cannot read: truncated (Compressed file ended before the end-of-stream marker)'
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import pyarrow as pa
import zstandard

from toktoktok.errors import SourceError

try:  # the gzip reader's own error for corrupt data (``streams.GZIP``)
    from isal.isal_zlib import error as IsalError
except ImportError:
    IsalError = zlib.error

READ_ERRORS = (OSError, EOFError, zlib.error, IsalError, zstandard.ZstdError, pa.ArrowException)


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

    def add(self, other: ReadStats) -> None:
        """Count ``other``'s too (a reader that ran in a thread of its own kept its own)."""
        self.bytes_read += other.bytes_read
        self.documents += other.documents
        self.replaced_chars += other.replaced_chars
        self.files += other.files
        self.recoded_files += other.recoded_files


def cannot_read(path: object, exc: BaseException) -> SourceError:
    """The ``SourceError`` a read failure of ``path`` becomes (raise it ``from exc``)."""
    return SourceError(f"{path}: cannot read: {reason(exc)}")


def reason(exc: BaseException) -> str:
    """A short, plain reason for a read failure (the exception's kind and text).

        >>> reason(FileNotFoundError(2, "No such file or directory", "/x.txt"))
        'the file no longer exists (deleted or moved since the run started?)'
        >>> reason(zlib.error("Error -3 while decompressing data: invalid distance"))
        'corrupt compressed data (Error -3 while decompressing data: invalid distance)'
    """
    if isinstance(exc, FileNotFoundError):
        return "the file no longer exists (deleted or moved since the run started?)"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, IsADirectoryError):
        return "it is a directory, not a file"
    if isinstance(exc, (zlib.error, IsalError)):
        return f"corrupt compressed data ({exc})"
    if isinstance(exc, EOFError):
        return f"truncated ({exc})"
    if isinstance(exc, (pa.ArrowException, zstandard.ZstdError)):
        return f"{type(exc).__name__}: {exc}"
    if type(exc) is OSError:  # e.g. pyarrow's "Couldn't deserialize thrift"
        return exc.strerror or str(exc)
    return f"{type(exc).__name__}: {exc}"
