"""Text to encode, shared by ``toktok encode`` and ``toktok compare``: the
tokenizer to encode with, the input files, their documents cut into parts
where no piece can cross, batches of parts, and tables as printed text.

    >>> encode_batch_chars(2) == 4 << 20
    True
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import tiktoken

from toktoktok.any_tokenizer import load_hf, load_stock, stock_of, tokenizer_file
from toktoktok.config import Source
from toktoktok.errors import UsageError
from toktoktok.loading import load, meta_path
from toktoktok.patterns import NAMED_PATTERNS
from toktoktok.pretokenize import PartCutter
from toktoktok.sources import Block, ReadStats, SourceError, iter_blocks, iter_stream_blocks, list_source_files

PART_CHARS = 1 << 20  # a longer document is cut into parts of about this many characters
MAX_PIECE_CHARS = 1 << 26  # a run with no safe place longer than this is cut anyway (counted)


CONFIG_SUFFIXES = (".yaml", ".yml")


def tokenizer_path(value: str | Path | None, config: Path | None = None, what: str = "-t TOKENIZER") -> Path:
    """The file a tokenizer argument names (exactly one of ``value`` and ``config``).

    ``value`` is read in this order: an existing folder (its ``tokenizer.json``)
    or file (a ``.yaml``/``.yml`` config: its output ``.tiktoken``; any other:
    itself), then a stock name in tiktoken's cache (``any_tokenizer``).
    """
    from .inspect import config_output, path_or_output

    if value is not None and config is None:
        path = tokenizer_file(value)
        return config_output(path) if path.is_file() and path.suffix in CONFIG_SUFFIXES else path
    return path_or_output(value, config, what)


def load_tokenizer(path: Path, pattern: str | None = None, *, override: bool = False) -> tiktoken.Encoding:
    """The tokenizer of a file ``tokenizer_path`` gave: a ``.tiktoken`` with its
    ``.meta.json``, a ``tokenizer.json`` (``any_tokenizer.load_hf``: its own
    pre-tokenizer's pattern), or a stock vocabulary from tiktoken's cache.

    ``pattern`` applies only to a tokenizer without a pattern of its own (a
    ``.tiktoken`` without a companion, a stock one; ``compare``: a pattern for
    the bare files among several), or, with ``override``, in place of its own
    as ``toktoktok.load(path, pattern=...)`` puts it (``show``, ``encode``,
    ``decode``: one tokenizer, the user's pattern). Without a companion and
    ``pattern``, ``load`` gives OpenAI's cl100k_base and o200k_base
    (recognised by content) their own pattern and special tokens, any other
    file the default pattern and none.
    """
    path = Path(path)
    if stock_of(path):
        return load_stock(path, pattern)
    if path.name.endswith(".json"):
        return load_hf(path, pattern, override=override)
    if meta_path(path).is_file() and not override:
        return load(path)
    return load(path, pattern=pattern)


def pattern_name(enc: tiktoken.Encoding) -> str:
    """The name of the encoding's pattern, or ``custom``."""
    for name, pat in NAMED_PATTERNS.items():
        if pat.tiktoken == enc._pat_str:
            return name
    return "custom"


def can_cut(enc: tiktoken.Encoding) -> bool:
    """May long documents be cut at docs/pretokenization.md's safe places for this encoding's pattern?"""
    return any(p.tiktoken == enc._pat_str and p.cut_at_safe_places for p in NAMED_PATTERNS.values())


STDIN = Path("-")  # the input ``-``: standard input, read as text


def input_files(inputs: Sequence[Path], text_column: str = "text") -> list[Path]:
    """The files of INPUTS (files, or folders scanned like a ``path:`` source), each once;
    ``-`` (``STDIN``, at most once) stands for standard input."""
    files: list[Path] = []
    seen: set[str] = set()
    for item in inputs:
        item = Path(item)
        if item == STDIN:
            if STDIN in files:
                raise UsageError("standard input (-) can be read only once")
            files.append(STDIN)
            continue
        try:
            found = list_source_files(Source(item.resolve(), item.is_dir(), text_column))
        except SourceError as exc:
            raise UsageError(str(exc)) from exc
        for f in found:
            real = os.path.realpath(f)
            if real not in seen:
                seen.add(real)
                files.append(f)
    if not files:
        raise UsageError("no input files")
    return files


@dataclass
class Reading:
    """What was read: per-file and total counts."""

    documents: int = 0
    bytes: int = 0
    raw_bytes: int = 0  # bytes read from the files (decompressed), for the progress line
    forced_cuts: int = 0
    files: list[dict[str, Any]] = field(default_factory=list)


def _blocks(path: Path, text_column: str, documents: str | None, stats: ReadStats) -> Iterator[Block]:
    """A file's document blocks; ``STDIN`` is standard input's bytes read as text."""
    if path == STDIN:
        return iter_stream_blocks(sys.stdin.buffer, documents=documents, stats=stats)
    return iter_blocks(path, text_column=text_column, stats=stats, documents=documents)


def iter_parts(files: Sequence[Path], *, text_column: str, cut: bool, special_tokens: Sequence[str] = (),
               reading: Reading, documents: str | None = None) -> Iterator[tuple[str, bool, int]]:
    """(text, ends a document, file index) for every part of every document, in order.

    A document comes as one part, or (``cut``) as several parts cut where no
    piece can cross; an empty document is one empty part. The parts of a
    document concatenate to it. ``documents`` is the rule that cuts text
    files (and standard input) into documents (``sources.is_document_rule``;
    None: each file's default, ``sources.document_rule``).
    """
    for index, path in enumerate(files):
        stats = ReadStats()
        entry = {"path": str(path), "documents": 0, "bytes": 0}
        reading.files.append(entry)
        cutter = PartCutter(cut=cut, special_tokens=special_tokens, part_chars=PART_CHARS,
                            max_piece_chars=MAX_PIECE_CHARS)
        raw_before = 0
        for block in _blocks(path, text_column, documents, stats):
            reading.raw_bytes += stats.bytes_read - raw_before
            raw_before = stats.bytes_read
            for part in cutter.feed(block.text):
                yield part, False, index
            if block.end:
                parts = cutter.finish() or [""]
                for i, part in enumerate(parts):
                    yield part, i == len(parts) - 1, index
                entry["documents"] += 1
                reading.documents += 1
        reading.raw_bytes += stats.bytes_read - raw_before
        reading.forced_cuts += cutter.forced_cuts


# the patterns' white space, the ``regex`` module's ``\s`` (Unicode White_Space); Python's
# str.isspace adds U+001C..U+001F, which the patterns take as punctuation, so a document
# ending in one ends in a token of its own that stripping keeps
WHITE_SPACE = ("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
               "\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def strip_ends(parts: Iterable[tuple[str, bool, int]]) -> Iterator[tuple[str, bool, int]]:
    """``iter_parts`` with each document's trailing white space (``WHITE_SPACE``) dropped.

    A document's parts are held from its last part with text on, until its
    end shows whether more text follows: then they go on as they were, or
    that part goes on without its trailing white space, ending the document,
    and the white-space parts after it are dropped. The other parts are
    untouched: every cut stays where ``PartCutter`` made it, with the same
    text before it, so the tokens are those of the stripped document whole.

        >>> parts = [("one  ", False, 0), (" \\n", False, 0), ("\\n", True, 0), ("two", False, 0), (" x\\n", True, 0)]
        >>> list(strip_ends(parts))
        [('one', True, 0), ('two', False, 0), (' x', True, 0)]
        >>> list(strip_ends([(" \\n", True, 1)]))  # a document of white space: an empty one
        [('', True, 1)]
    """
    held: list[tuple[str, bool, int]] = []  # the open document's parts from its last one with text
    for text, end, index in parts:
        kept = text.rstrip(WHITE_SPACE)
        has_text = bool(kept)
        if end:
            if has_text:
                yield from held
                yield kept, True, index
            elif held and held[0][0].strip(WHITE_SPACE):
                yield held[0][0].rstrip(WHITE_SPACE), True, index
            else:
                yield "", True, index
            held = []
        elif has_text:
            yield from held
            held = [(text, False, index)]
        else:
            held.append((text, False, index))


def encode_batch_chars(threads: int) -> int:
    """Characters of text per encoding batch: 1 MiB a thread, between 4 and 16 MiB."""
    return min(max(threads << 20, 4 << 20), 16 << 20)


def iter_batches(parts: Iterable[tuple[str, bool, int]], size: int) -> Iterator[list[tuple[str, bool, int]]]:
    batch: list[tuple[str, bool, int]] = []
    chars = 0
    for part in parts:
        batch.append(part)
        chars += len(part[0])
        if chars >= size:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


def table(df: pl.DataFrame) -> str:
    """A DataFrame as printed text: no shape, no dtypes, all given rows, long strings."""
    with pl.Config(
        tbl_hide_dataframe_shape=True,
        tbl_hide_column_data_types=True,
        tbl_rows=-1,
        tbl_cols=-1,
        fmt_str_lengths=120,
        tbl_width_chars=240,
        tbl_cell_numeric_alignment="RIGHT",
    ):
        return str(df)
