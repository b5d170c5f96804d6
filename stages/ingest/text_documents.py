"""Ingest's text files cut by ``line`` or ``split-on:STRING`` (a source's ``documents:``),
and the warning for a file cut into very many tiny documents.

The documents come as rows (``toktoktok.sources.text_rows``: their bytes end
to end, each one's byte offset in the file its sampling key) and are counted
as a table's rows are (``table_rows.route_batch``), a window at a time: a
document never runs into the next, and the separator is not trained on.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from toktoktok.sources import ReadStats, raw_chunks
from toktoktok.sources.text_rows import document_batches

from ..workdir.progress import Progress
from .routing import TXT_READ_BYTES, Router
from .table_rows import route_batch

TINY_DOCUMENT_BYTES = 200  # a file averaging fewer text bytes a document than this is warned about
TINY_CHECK_BYTES = 1_000_000  # once it has at least this much text


def ingest_documents(path: Path, rule: str, route: Router, progress: Progress) -> None:
    """A text file cut into documents by ``rule`` (``line`` or ``split-on:STRING``)."""
    stats = ReadStats()

    def read() -> Iterator[bytes]:
        for chunk in raw_chunks(path, TXT_READ_BYTES, stats):
            progress.update(len(chunk))
            yield chunk

    try:
        for batch in document_batches(read(), rule, stats):
            route_batch(batch, route, stats)
    finally:
        route.tally.add_read(stats)


def tiny_documents(path: Path, rule: str, documents: int, text_bytes: int) -> str | None:
    """The warning for a text file its rule cut into very many tiny documents (more
    than one per ``TINY_DOCUMENT_BYTES`` over at least ``TINY_CHECK_BYTES``), or None.

        >>> print(tiny_documents(Path("a.c"), "line", 20_000, 2_000_000))
        a.c: documents: line cut its 2,000,000 bytes into 20,000 documents (100 bytes each on average): is that the rule meant for it? (documents: file keeps a file whole)
    """
    if text_bytes < TINY_CHECK_BYTES or documents * TINY_DOCUMENT_BYTES <= text_bytes:
        return None
    shown = "{split_on: " + repr(rule.partition(":")[2]) + "}" if rule.startswith("split-on:") else rule
    return (f"{path}: documents: {shown} cut its {text_bytes:,} bytes into {documents:,} documents "
            f"({text_bytes // documents} bytes each on average): is that the rule meant for it? "
            f"(documents: file keeps a file whole)")
