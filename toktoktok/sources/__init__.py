"""Reading source files into documents (docs/configuration.md, docs/pretokenization.md).

A source is a file, or a folder scanned recursively for ``.txt``, ``.jsonl``,
``.parquet`` and ``.arrow`` files, ``.txt`` and ``.jsonl`` also compressed as
``.zst`` or ``.gz`` (with ``include:``, any file; one of another suffix is
read as plain text). One idea a module:

- ``listing``: the files a source reads (globs, symbolic links);
- ``streams``: a file's format, and its bytes, decompressed, local or remote;
- ``decoding``: byte order marks, UTF-8 with invalid bytes replaced;
- ``txt_windows``: a ``.txt`` file in windows of raw bytes, with its document ends;
- ``file_packs``: many small files read into one buffer by one numba call, checked there;
- ``rows``: ``.jsonl`` documents a line at a time (the reference of ``jsonl_scan``);
- ``row_batches``: tables (``.parquet``, ``.arrow``) and JSON lines as batches of rows in Arrow's layout;
- ``jsonl_scan``: ``.jsonl`` documents out of raw bytes by a numba scanner, Python for the rare line;
- ``json_bytes``: JSON read in raw bytes by numba (strings, numbers, values), for ``jsonl_scan``;
- ``text_rows``: a text file cut by ``line`` or ``split-on:STRING``, as rows;
- ``blocks``: any file as document blocks (``.txt`` by a document rule); its text's size;
- ``reads``: what a read gives (``Block``, ``ReadStats``) and how it fails (``SourceError``).

Here: the names the rest of the project uses.
"""

from toktoktok.sources.blocks import (
    SPLIT_ON,
    TXT_DOCUMENTS,
    document_rule,
    is_document_rule,
    iter_blocks,
    iter_stream_blocks,
    text_bytes,
    text_bytes_estimate,
)
from toktoktok.sources.decoding import Utf8Decoder
from toktoktok.sources.jsonl_scan import jsonl_documents
from toktoktok.sources.listing import glob_match, list_source_files
from toktoktok.sources.reads import Block, ReadStats, SourceError
from toktoktok.sources.streams import ROW_KINDS, TEXT, file_format, open_binary, raw_chunks
from toktoktok.sources.txt_windows import TxtWindow, iter_txt_windows

__all__ = [
    "ROW_KINDS", "SPLIT_ON", "TEXT", "TXT_DOCUMENTS", "Block", "ReadStats", "SourceError", "TxtWindow", "Utf8Decoder",
    "document_rule", "file_format", "glob_match", "is_document_rule", "iter_blocks", "iter_stream_blocks",
    "iter_txt_windows", "jsonl_documents", "list_source_files", "open_binary", "raw_chunks", "text_bytes",
    "text_bytes_estimate",
]
