"""Reading source files into documents (docs/configuration.md, docs/pretokenization.md).

A source is a file, or a folder scanned recursively for ``.txt``, ``.jsonl``
and ``.parquet`` files, ``.txt`` and ``.jsonl`` also compressed as ``.zst``
or ``.gz``. One idea a module:

- ``listing``: the files a source reads (globs, symbolic links);
- ``streams``: a file's format, and its bytes, decompressed, local or remote;
- ``decoding``: byte order marks, UTF-8 with invalid bytes replaced;
- ``txt_windows``: a ``.txt`` file in windows of raw bytes, with its document ends;
- ``rows``: ``.jsonl`` and ``.parquet`` documents;
- ``jsonl_scan``: ``.jsonl`` documents out of raw bytes by a numba scanner, Python for the rare line;
- ``json_bytes``: JSON read in raw bytes by numba (strings, numbers, values), for ``jsonl_scan``;
- ``blocks``: any file as document blocks (``.txt`` by a document rule); its text's size;
- ``reads``: what a read gives (``Block``, ``ReadStats``) and how it fails (``SourceError``).

Here: the names the rest of the project uses.
"""

from toktoktok.sources.blocks import TXT_DOCUMENTS, iter_blocks, iter_stream_blocks, text_bytes, text_bytes_estimate
from toktoktok.sources.decoding import Utf8Decoder
from toktoktok.sources.jsonl_scan import jsonl_documents
from toktoktok.sources.listing import glob_match, list_source_files
from toktoktok.sources.reads import Block, ReadStats, SourceError
from toktoktok.sources.streams import file_format, open_binary, raw_chunks
from toktoktok.sources.txt_windows import TxtWindow, iter_txt_windows

__all__ = [
    "TXT_DOCUMENTS", "Block", "ReadStats", "SourceError", "TxtWindow", "Utf8Decoder", "file_format", "glob_match",
    "iter_blocks", "iter_stream_blocks", "iter_txt_windows", "jsonl_documents", "list_source_files", "open_binary",
    "raw_chunks", "text_bytes", "text_bytes_estimate",
]
