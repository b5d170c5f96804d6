"""``toktok encode``: text -> token shards (``.npy``) and ``index.json``.

Reads files or folders with the same input kinds and document rules as a
config's sources (``toktoktok.sources``: ``.txt`` split after a blank line
followed by a non-space character, a ``.jsonl`` or ``.parquet`` row is one
document, ``.zst``/``.gz`` compressed text), encodes every document with
tiktoken's batch encoder on ``threads`` threads, and writes the tokens, in
input order, into ``DIR/shard-00000.npy``, ``shard-00001.npy``, ... of exactly
``shard_tokens`` tokens each (the last one shorter), then ``DIR/index.json``.

Decisions:

- Special tokens written in the text (``<|endoftext|>`` inside a document)
  are ordinary text by default (``encode_ordinary_batch``): a corpus cannot
  forge document boundaries or chat markup, and the only special ids in the
  shards are the separators. ``allow_special=True`` (``--allow-special``)
  encodes the tokenizer's special tokens in the text as their ids instead
  (as ``encode_batch(..., allowed_special="all")`` would, split at them by
  ``SpecialIndex``: linear in the text, not in the number of special tokens),
  as training cut them out.
- The separator must be one of the tokenizer's special tokens (else a usage
  error); its id follows every document, the last one included, so each
  document's tokens end with it.
- Shard dtype: ``uint16`` when every id (special ids included) is below
  65536, else ``uint32``. A document may continue from one shard into the
  next: shards are cut at exact token counts, as training loaders expect.
  Each shard entry of the index counts the documents that end in it.
- Bounded memory: documents are read in batches of a few MB of text (more
  threads, bigger batches, capped), and a shard is written as its tokens
  arrive: its ``.npy`` header is written with a fixed size first and
  rewritten with the final length when the shard is closed, so a shard is
  never held in memory. Reading the next batch overlaps encoding the
  current one. A document longer than 1 MiB is cut, for the default and
  cl100k patterns, at the places where no pre-tokenization piece can cross
  (``toktoktok.pretokenize.PartCutter``), so it encodes to exactly the same
  tokens in bounded parts; with other patterns it is encoded whole.
- Atomic output: ``index.json`` is deleted first and written last, every
  shard is written to a temporary file and renamed into place; a folder
  without ``index.json`` is an unfinished run. The output folder must be new,
  empty, or an earlier encode output (only ``shard-*.npy``, ``index.json``
  and temporary files): anything else is refused rather than overwritten.
  Shards of an earlier, longer run are removed.
- ``bytes`` are the UTF-8 bytes of the documents' text (after decoding, as
  training counts them); ``bytes_per_token`` divides them by the tokens of
  the text, separators not included.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import struct
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import tiktoken

from stages.artifacts import file_digest
from stages.progress import Progress
from stages.texts import (
    MAX_PIECE_CHARS,
    Reading,
    batch_chars,
    can_cut,
    input_files,
    iter_batches,
    iter_parts,
    load_tokenizer,
    pattern_name,
)
from stages.workdir import resolve_threads
from toktoktok.atomic import atomic_path, atomic_write_bytes
from toktoktok.config import ConfigError
from toktoktok.sources import file_format
from toktoktok.tiktoken_file import SpecialIndex

DEFAULT_SHARD_TOKENS = 100_000_000
INDEX = "index.json"
INDEX_FORMAT = "toktoktok-shards/1"
SHARD_NAME = "shard-{:05d}.npy"
_SHARD = re.compile(r"shard-\d{5,}\.npy")
_TEMP = re.compile(r"\..+\.[0-9a-f]{12}\.tmp")
_HEADER_BYTES = 128  # the fixed size of every shard's .npy header


# ---------------------------------------------------------------- tokenizer


def separator_id(enc: tiktoken.Encoding, separator: str | None) -> int | None:
    """The id of ``separator``, which must be one of the encoding's special tokens."""
    if separator is None:
        return None
    if separator not in enc.special_tokens_set:
        known = ", ".join(sorted(enc.special_tokens_set)) or "none"
        raise ConfigError(f"--separator {separator!r} is not a special token of {enc.name} (its special tokens: "
                          f"{known})")
    return enc.encode_single_token(separator)


def shard_dtype(enc: tiktoken.Encoding) -> np.dtype:
    """``uint16`` when every id fits, else ``uint32``."""
    return np.dtype(np.uint16) if enc.max_token_value < 1 << 16 else np.dtype(np.uint32)


# ---------------------------------------------------------------- reading


def batch_encoder(enc: tiktoken.Encoding, threads: int, allow_special: bool) -> Callable[[list[str]], list[list[int]]]:
    """tiktoken's batch encoder: ordinary text, or with the special tokens as ids.

    With special tokens the texts are split at them here (``SpecialIndex``) and
    the stretches between encoded as ordinary text, which is what tiktoken's
    ``encode_batch(..., allowed_special="all")`` does, without its cost of
    copying every special token on every document (0.14 s a document with
    65,536 of them).
    """
    if not allow_special or not enc.special_tokens_set:
        return lambda texts: enc.encode_ordinary_batch(texts, num_threads=threads)
    index = SpecialIndex({tok: enc.encode_single_token(tok) for tok in enc.special_tokens_set})

    def encode(texts: list[str]) -> list[list[int]]:
        splits = [index.split(text) for text in texts]
        stretches = [part for parts in splits for part in parts if isinstance(part, str)]
        encoded = iter(enc.encode_ordinary_batch(stretches, num_threads=threads))
        out = []
        for parts in splits:
            ids: list[int] = []
            for part in parts:
                if isinstance(part, str):
                    ids.extend(next(encoded))
                else:
                    ids.append(part)
            out.append(ids)
        return out

    return encode


# ---------------------------------------------------------------- writing


def npy_header(dtype: np.dtype, length: int) -> bytes:
    """A ``.npy`` (format 1.0) header of a 1-d array, always ``_HEADER_BYTES`` long."""
    text = "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }" % (dtype.str, length)
    text = text.ljust(_HEADER_BYTES - 10 - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode("latin1")


class ShardWriter:
    """Writes a stream of tokens into shards of exactly ``shard_tokens`` tokens."""

    def __init__(self, folder: Path, dtype: np.dtype, shard_tokens: int) -> None:
        self.folder, self.dtype, self.cap = folder, dtype, shard_tokens
        self.shards: list[dict[str, Any]] = []
        self._stack: contextlib.ExitStack | None = None
        self._fh: Any = None
        self._filled = 0
        self._documents = 0  # documents ended in the open shard (or before any shard)

    def write(self, tokens: np.ndarray, ends: Sequence[int]) -> None:
        """Append ``tokens``; ``ends`` are the offsets in it just after each document's last token."""
        pos = e = 0
        while True:
            while e < len(ends) and ends[e] <= pos:
                self._documents += 1
                e += 1
            if pos == len(tokens):
                return
            if self._fh is None or self._filled == self.cap:
                self._next()
            n = min(self.cap - self._filled, len(tokens) - pos)
            self._fh.write(memoryview(np.ascontiguousarray(tokens[pos : pos + n], dtype=self.dtype)))
            self._filled += n
            pos += n

    def _next(self) -> None:
        self._close()
        name = SHARD_NAME.format(len(self.shards))
        self._stack = contextlib.ExitStack()
        tmp = self._stack.enter_context(atomic_path(self.folder / name))
        self._fh = self._stack.enter_context(open(tmp, "wb"))
        self._fh.write(npy_header(self.dtype, 0))
        self.shards.append({"file": name, "tokens": 0, "documents": 0})

    def _close(self) -> None:
        if self._fh is None:
            return
        self._fh.seek(0)
        self._fh.write(npy_header(self.dtype, self._filled))
        self.shards[-1].update(tokens=self._filled, documents=self._documents)
        self._documents = self._filled = 0
        stack, self._stack, self._fh = self._stack, None, None
        stack.close()  # closes the file, then fsyncs and renames it into place

    def finish(self) -> list[dict[str, Any]]:
        """Close the last shard; returns every shard's entry (file, tokens, documents)."""
        self._close()
        return self.shards

    def abort(self) -> None:
        """Drop the open shard's temporary file (the finished shards stay)."""
        if self._stack is not None:
            stack, self._stack, self._fh = self._stack, None, None
            with contextlib.suppress(Exception):
                stack.__exit__(RuntimeError, RuntimeError("aborted"), None)


def prepare_out(folder: Path) -> None:
    """Make ``folder`` ready: new, empty, or an earlier encode output (its index goes first)."""
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--out {folder}: exists and is not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    foreign = sorted(e.name for e in folder.iterdir()
                     if not (e.is_file() and (e.name == INDEX or _SHARD.fullmatch(e.name) or _TEMP.fullmatch(e.name))))
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise ConfigError(f"--out {folder}: holds files that are not `toktok encode` output ({shown}); "
                          f"choose a new or empty folder")
    (folder / INDEX).unlink(missing_ok=True)
    for e in folder.iterdir():
        if _TEMP.fullmatch(e.name):
            e.unlink(missing_ok=True)


def _remove_stale_shards(folder: Path, keep: int) -> None:
    names = {SHARD_NAME.format(i) for i in range(keep)}
    for e in folder.iterdir():
        if _SHARD.fullmatch(e.name) and e.name not in names:
            e.unlink()


# ---------------------------------------------------------------- the command


def encode_corpus(
    tokenizer: Path,
    inputs: Sequence[Path],
    out: Path,
    *,
    separator: str | None = None,
    shard_tokens: int = DEFAULT_SHARD_TOKENS,
    text_column: str = "text",
    threads: int = -1,
    allow_special: bool = False,
    pattern: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Encode ``inputs`` into shards under ``out``; returns the index (also written as ``out/index.json``)."""
    started = time.perf_counter()
    progress = progress or Progress()
    if shard_tokens < 1:
        raise ConfigError(f"--shard-tokens must be at least 1, got {shard_tokens}")
    if threads == 0 or threads < -1:
        raise ConfigError(f"--threads must be -1 (all cores) or at least 1, got {threads}")
    enc = load_tokenizer(tokenizer, pattern)
    sep = separator_id(enc, separator)
    files = input_files(inputs, text_column)
    out = Path(out)
    prepare_out(out)
    workers = resolve_threads(threads)
    dtype = shard_dtype(enc)
    encode = batch_encoder(enc, workers, allow_special)
    reading = Reading()
    parts = iter_parts(files, text_column=text_column, cut=can_cut(enc),
                       special_tokens=sorted(enc.special_tokens_set) if allow_special else (), reading=reading)
    plain = all(file_format(f)[1] is None and file_format(f)[0] != "parquet" for f in files)
    progress.start("encode", total=sum(f.stat().st_size for f in files) if plain else 0, unit="B")
    writer = ShardWriter(out, dtype, shard_tokens)
    totals = {"tokens": 0, "text_tokens": 0, "bytes": 0}

    def store(batch: list[tuple[str, bool, int]], encoded: list[list[int]]) -> None:
        pieces: list[list[int]] = []
        ends: list[int] = []
        size = 0
        for (text, end, index), toks in zip(batch, encoded):
            pieces.append(toks)
            size += len(toks)
            nbytes = len(text.encode("utf-8", "surrogatepass"))
            totals["bytes"] += nbytes
            reading.files[index]["bytes"] += nbytes
            if end:
                if sep is not None:
                    pieces.append([sep])
                    size += 1
                ends.append(size)
        totals["text_tokens"] += size - (len(ends) if sep is not None else 0)
        totals["tokens"] += size
        tokens = np.fromiter(itertools.chain.from_iterable(pieces), dtype=dtype, count=size)
        writer.write(tokens, ends)
        progress.set(reading.raw_bytes)

    try:
        with ThreadPoolExecutor(1) as background:
            pending = None
            for batch in iter_batches(parts, batch_chars(workers)):
                job = background.submit(encode, [p[0] for p in batch])
                if pending is not None:
                    store(pending[0], pending[1].result())
                pending = (batch, job)
            if pending is not None:
                store(pending[0], pending[1].result())
        shards = writer.finish()
    except KeyboardInterrupt:
        writer.abort()
        raise KeyboardInterrupt(f"{out} is unfinished (it has no index.json): run the command again") from None
    except BaseException:
        writer.abort()
        raise
    _remove_stale_shards(out, len(shards))
    progress.done(f"{totals['tokens']} tokens")
    index = {
        "format": INDEX_FORMAT,
        "tokenizer": str(Path(tokenizer).resolve()),
        "tokenizer_sha256": file_digest(Path(tokenizer)),
        "vocab_size": enc.n_vocab,
        "max_token_id": enc.max_token_value,
        "pattern": pattern_name(enc),
        "dtype": dtype.name,
        "separator": separator,
        "separator_id": sep,
        "special_tokens_in_text": "ids" if allow_special else "ordinary text",
        "shard_tokens": shard_tokens,
        "text_column": text_column,
        "inputs": reading.files,
        "shards": shards,
        "documents": reading.documents,
        "tokens": totals["tokens"],
        "text_tokens": totals["text_tokens"],
        "bytes": totals["bytes"],
        "bytes_per_token": round(totals["bytes"] / totals["text_tokens"], 4) if totals["text_tokens"] else None,
        "forced_cuts": reading.forced_cuts,
        "seconds": round(time.perf_counter() - started, 3),
    }
    atomic_write_bytes(out / INDEX, (json.dumps(index, indent=2, ensure_ascii=False) + "\n").encode())
    return index


def summary(index: dict[str, Any], out: Path) -> str:
    """What the command prints."""
    seps = index["tokens"] - index["text_tokens"]
    shards = len(index["shards"])
    files = len(index["inputs"])
    lines = [
        f"encoded {index['documents']} documents from {files} file{'s' if files != 1 else ''} into {shards} "
        f"shard{'s' if shards != 1 else ''} ({index['dtype']}) in {out}",
        f"tokens: {index['tokens']}" + (f" ({index['text_tokens']} of text + {seps} separators)" if seps else ""),
        f"bytes: {index['bytes']}",
        "bytes/token: " + (f"{index['bytes'] / index['text_tokens']:.3f}" if index["text_tokens"] else "n/a"),
        f"time: {index['seconds']:.1f} s"
        + (f" ({index['seconds'] / (index['bytes'] / 2**20):.3f} s/MiB)" if index["bytes"] else ""),
    ]
    if index["forced_cuts"]:
        lines.append(f"warning: {index['forced_cuts']} runs of over {MAX_PIECE_CHARS} characters with no safe place "
                     f"were cut: their tokens may differ from encoding the document whole")
    return "\n".join(lines)
