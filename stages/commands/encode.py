"""``toktok encode``: text -> token files a trainer reads.

Reads files or folders with the same input kinds as a config's sources, or
standard input (``-``, read as text), encodes every document with tiktoken's
batch encoder on ``threads`` threads, and writes the tokens, in input order,
as ``npy`` shards, nanoGPT's ``bin`` or Megatron-LM's indexed dataset
(``--format``, ``toktoktok.token_files``), then ``index.json``, last. The
layouts, ``--documents``, the separator and bos ids, the validation split,
``index.json`` and the order in which files are written: docs/outputs.md
(Token shards).

This module is the command (the tokenizer's special ids and the ids' dtype,
batches encoded, the seeded validation split, the index); the output folder,
locked and replaced as one set, is ``encode_out``'s. The decisions are in the
docstrings of ``encode_corpus``, ``batch_encoder``, ``ValSplit``,
``output_dtype``, ``loaded_tokenizer`` and ``encode_out``.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tiktoken

from toktoktok.atomic import atomic_write_bytes
from toktoktok.errors import Interrupted, TokenizerFileError, UsageError
from toktoktok.sampling import chosen_many, file_key
from toktoktok.sources import TXT_DOCUMENTS, file_format, is_document_rule
from toktoktok.tiktoken_file import SpecialIndex
from toktoktok.token_files import bin_dtype, megatron_dtype, megatron_index, nanogpt_meta, shard_dtype
from toktoktok.tuning import resolve_threads

from ..workdir.artifacts import file_digest
from ..workdir.progress import Progress
from .encode_out import INDEX, MEGATRON_PREFIXES, NANOGPT_META, OutFolder, split_writers
from .texts import (
    MAX_PIECE_CHARS,
    STDIN,
    Reading,
    can_cut,
    encode_batch_chars,
    input_files,
    iter_batches,
    iter_parts,
    load_tokenizer,
    pattern_name,
    strip_ends,
)

FORMATS = ("npy", "bin", "megatron")
DEFAULT_SHARD_TOKENS = 100_000_000
DEFAULT_BIN_VAL_SHARE = 0.0005  # nanoGPT reads a val.bin; its own OpenWebText preparation holds out this share
NANOGPT_BLOCK_SIZE = 1024  # nanoGPT's default context: a val.bin must hold more tokens than this
INDEX_FORMATS = {"npy": "toktoktok-shards/1", "bin": "toktoktok-bin/1", "megatron": "toktoktok-megatron/1"}
INDEX_FORMAT = INDEX_FORMATS["npy"]
SPLIT_RULE = "file-key+splitmix64"  # sampling.chosen_many on (seed, "encode", file index, "val"), document number
_SPLIT_SLUG, _SPLIT_SALT = "encode", "val"


# ---------------------------------------------------------------- tokenizer


def special_id(enc: tiktoken.Encoding, token: str | None, option: str = "--separator") -> int | None:
    """The id of ``token``, which must be one of the encoding's special tokens (else
    a usage error): the separator and the bos token are."""
    if token is None:
        return None
    if token not in enc.special_tokens_set:
        known = ", ".join(sorted(enc.special_tokens_set)) or "none"
        raise UsageError(f"{option} {token!r} is not a special token of {enc.name} (its special tokens: {known})")
    return enc.encode_single_token(token)


def separator_id(enc: tiktoken.Encoding, separator: str | None) -> int | None:
    """The id of ``separator``, which must be one of the encoding's special tokens."""
    return special_id(enc, separator, "--separator")


def loaded_tokenizer(path: Path, pattern: str | None, tries: int = 3) -> tuple[tiktoken.Encoding, str]:
    """The tokenizer (``texts.load_tokenizer``) and the sha256 of the very bytes it was made from.

    The file is digested before and after it is loaded: equal digests mean
    the ids come from those bytes, whatever is published there later (a
    re-export while encode runs). A file that keeps changing is refused.
    """
    for _ in range(tries):
        try:
            before = file_digest(Path(path))
        except OSError:
            before = None  # missing or unreadable: load_tokenizer says so, naming it
        enc = load_tokenizer(path, pattern, override=True)
        if before is not None and file_digest(Path(path)) == before:
            return enc, before
    raise TokenizerFileError(path, "changed while it was being read: run the command again once it is written")


def output_dtype(enc: tiktoken.Encoding, fmt: str, dtype: str | None) -> np.dtype:
    """The ids' dtype of a format: ``--dtype`` (npy, bin) or Megatron-LM's rule.

    Without ``--dtype``: npy ``uint16`` when every id (special ids included) is
    below 65536, else ``uint32``; bin ``uint16``, refused when an id does not
    fit; megatron ``uint16`` below 65,500 ids, else ``int32``.
    """
    if fmt == "megatron":
        if dtype is not None:
            raise UsageError("--dtype does not apply to --format megatron: its dtype follows the vocabulary "
                              "(uint16 below 65,500 ids, else int32, as Megatron-LM decides)")
        return megatron_dtype(enc.max_token_value + 1)
    if dtype is None:
        return shard_dtype(enc.max_token_value) if fmt == "npy" else bin_dtype("uint16", enc.max_token_value)
    return bin_dtype(dtype, enc.max_token_value)


# ---------------------------------------------------------------- reading


def batch_encoder(enc: tiktoken.Encoding, threads: int, allow_special: bool) -> Callable[[list[str]], list[list[int]]]:
    """tiktoken's batch encoder: ordinary text, or with the special tokens as ids.

    Special tokens written in the text (``<|endoftext|>`` inside a document)
    are ordinary text by default (``encode_ordinary_batch``): a corpus cannot
    forge document boundaries or chat markup, and the only special ids in the
    output are the separators and bos tokens. ``allow_special`` encodes the
    tokenizer's special tokens in the text as their ids, as training cut them
    out.

    With special tokens the texts are split at them here (``SpecialIndex``) and
    the stretches between encoded as ordinary text, which is what tiktoken's
    ``encode_batch(..., allowed_special="all")`` does, without its cost of
    copying every special token on every document (slow with many special
    tokens).
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


class ValSplit:
    """Which documents go to validation: a seeded hash of (file index, document number).

    Decided per document by its place, as ``toktoktok.sampling`` decides the
    held-out share: the same inputs and seed give the same split whatever the
    threads or batches, and adding a file after the others does not move
    their documents. Train and validation keep input order.

    Fed the parts of ``iter_parts`` batch by batch, in order; a document's
    parts all get its document's answer.

        >>> parts = [("a", True, 0), ("b", False, 0), ("c", True, 0), ("d", True, 1)]
        >>> whole = ValSplit(seed=0, share=0.5).flags(parts)
        >>> whole[1] == whole[2]  # "b" and "c" are one document
        True
        >>> cut = ValSplit(seed=0, share=0.5)  # batches cut anywhere: the same answers
        >>> cut.flags(parts[:2]) + cut.flags(parts[2:]) == whole
        True
    """

    def __init__(self, seed: int, share: float) -> None:
        self.seed, self.share = seed, share
        self._file, self._doc = -1, 0  # the file being read and its open document's number

    def flags(self, batch: Sequence[tuple[str, bool, int]]) -> list[bool]:
        file_of, doc_of = [], []
        for _, end, index in batch:
            if index != self._file:
                self._file, self._doc = index, 0
            file_of.append(index)
            doc_of.append(self._doc)
            self._doc += end
        files, docs = np.array(file_of, dtype=np.int64), np.array(doc_of, dtype=np.int64)
        out = np.zeros(len(batch), dtype=bool)
        if self.share <= 0 or not len(batch):
            return out.tolist()
        for index in np.unique(files).tolist():
            mask = files == index
            lo = int(docs[mask].min())
            key = file_key(self.seed, _SPLIT_SLUG, index, _SPLIT_SALT)
            out[mask] = chosen_many(key, lo, int(docs[mask].max()) - lo + 1, self.share)[docs[mask] - lo]
        return out.tolist()


# ---------------------------------------------------------------- writing


@dataclass
class Split:
    """One output split (train or val) and what went into it."""

    name: str
    writer: Any  # ShardWriter or FlatWriter (encode_out.split_writers)
    documents: int = 0
    tokens: int = 0
    pieces: list[list[int]] = field(default_factory=list)  # the batch being gathered
    ends: list[int] = field(default_factory=list)
    size: int = 0

    def add(self, tokens: list[int]) -> None:
        self.pieces.append(tokens)
        self.size += len(tokens)

    def end(self) -> None:
        self.ends.append(self.size)
        self.documents += 1

    def flush(self, dtype: np.dtype) -> None:
        if self.size or self.ends:
            tokens = np.fromiter(itertools.chain.from_iterable(self.pieces), dtype=dtype, count=self.size)
            self.writer.write(tokens, self.ends)
        self.tokens += self.size
        self.pieces, self.ends, self.size = [], [], 0


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
    fmt: str = "npy",
    dtype: str | None = None,
    bos: str | None = None,
    val_share: float | None = None,
    seed: int = 0,
    documents: str | None = None,
    strip: bool = False,
) -> dict[str, Any]:
    """Encode ``inputs`` into token files under ``out``; returns the index (also written as ``out/index.json``).

    - Documents of text inputs (and of standard input) follow ``documents``:
      ``blank-line`` (a config's rule), ``line`` (every non-empty line, the
      separator marking its end), ``file`` or ``split-on:STRING``
      (docs/outputs.md); None: ``blank-line`` for ``.txt`` and standard
      input, ``file`` for text files of other suffixes.
    - The bos id starts every document and the separator id ends it (the last
      one included), inside the token stream: a Megatron sequence, or the
      stretch of a flat file, of a document holds both.
    - ``val_share`` defaults to ``DEFAULT_BIN_VAL_SHARE`` for bin, else 0.
    - ``strip`` drops each document's trailing white space (``texts.strip_ends``)
      before its separator; off, the text is encoded as read.
    - Bounded memory: documents are read in batches of a few MB of text (more
      threads, bigger batches, capped); every file is written as its tokens
      arrive (``toktoktok.token_files``) and only a Megatron index's one
      length per document is held. A document longer than 1 MiB is cut, for the default
      and cl100k patterns, where no pre-tokenization piece can cross
      (``toktoktok.pretokenize.PartCutter``): the same tokens, in bounded
      parts; with other patterns it is encoded whole.
    - Atomic output: the trainer's indexes come after the data they describe
      (the validation ``.idx``, then the training one; bin's ``meta.pkl``), ``index.json`` last: a
      folder without it is an unfinished run. The earlier run's files are
      deleted just before the first new one goes in place (``encode_out``).
    - A split that would leave training empty is refused (``--val-share``,
      exit 2) before the training files go in place; an empty validation side is
      only warned about (``summary``): the training files are sound.
    """
    started = time.perf_counter()
    progress = progress or Progress()
    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if documents is not None and not is_document_rule(documents):
        raise UsageError(f"--documents must be one of {', '.join(TXT_DOCUMENTS)} or split-on:STRING, got {documents!r}")
    if shard_tokens < 1:
        raise UsageError(f"--shard-tokens must be at least 1, got {shard_tokens}")
    if threads == 0 or threads < -1:
        raise UsageError(f"--threads must be -1 (all cores) or at least 1, got {threads}")
    if val_share is None:
        val_share = DEFAULT_BIN_VAL_SHARE if fmt == "bin" else 0.0
    if not 0 <= val_share < 1:
        raise UsageError(f"--val-share must be at least 0 and below 1, got {val_share}")
    enc, digest = loaded_tokenizer(tokenizer, pattern)
    sep = special_id(enc, separator, "--separator")
    bos_id = special_id(enc, bos, "--bos")
    ids = output_dtype(enc, fmt, dtype)
    files = input_files(inputs, text_column)
    out = Path(out)
    with OutFolder(out) as folder:  # locked until index.json is in place
        workers = resolve_threads(threads)
        encode = batch_encoder(enc, workers, allow_special)
        reading = Reading()
        parts = iter_parts(files, text_column=text_column, cut=can_cut(enc), documents=documents,
                           special_tokens=sorted(enc.special_tokens_set) if allow_special else (), reading=reading)
        if strip:
            parts = strip_ends(parts)
        plain = all(f != STDIN and file_format(f)[1] is None and file_format(f)[0] != "parquet" for f in files)
        progress.start("encode", total=sum(f.stat().st_size for f in files) if plain else 0, unit="B")
        writers = split_writers(fmt, folder, ids, shard_tokens, val_share > 0)
        splits = {name: Split(name, w) for name, w in writers.items()}
        train, val = splits["train"], splits.get("val")
        chooser = ValSplit(seed, val_share)
        totals = {"text_tokens": 0, "bytes": 0}
        at_start = [True]

        def store(batch: list[tuple[str, bool, int]], encoded: list[list[int]]) -> None:
            for (text, end, index), toks, to_val in zip(batch, encoded, chooser.flags(batch)):
                split = val if to_val and val is not None else train
                if at_start[0] and bos_id is not None:
                    split.add([bos_id])
                split.add(toks)
                totals["text_tokens"] += len(toks)
                # bytes: the UTF-8 bytes of the text after decoding, as training counts them;
                # bytes_per_token divides them by the text's tokens (no separators or bos)
                nbytes = len(text.encode("utf-8", "surrogatepass"))
                totals["bytes"] += nbytes
                reading.files[index]["bytes"] += nbytes
                if end:
                    if sep is not None:
                        split.add([sep])
                    split.end()
                at_start[0] = end
            for split in splits.values():
                split.flush(ids)
            progress.set(reading.raw_bytes)

        try:
            with ThreadPoolExecutor(1) as background:  # reading the next batch overlaps encoding this one
                pending = None
                for batch in iter_batches(parts, encode_batch_chars(workers)):
                    job = background.submit(encode, [p[0] for p in batch])
                    if pending is not None:
                        store(pending[0], pending[1].result())
                    pending = (batch, job)
                if pending is not None:
                    store(pending[0], pending[1].result())
            if val is not None and val.documents and not train.documents:
                kept = f"; {out} is unfinished (it has no {INDEX})" if folder.cleared else ""  # val shards in place
                raise UsageError(f"--val-share {val_share:g} sent all {val.documents} documents to validation, "
                                 f"leaving training empty: lower --val-share, or cut the text into more documents "
                                 f"(--documents line){kept}")
            results = {name: w.finish() for name, w in writers.items()}  # the data, renamed into place
        except KeyboardInterrupt:
            for w in writers.values():
                w.abort()
            raise Interrupted(folder.state()) from None
        except BaseException:
            for w in writers.values():
                w.abort()
            raise
        folder.clear()  # when no data file was written (no document): the earlier set goes all the same
        written = set()
        for name in ("val", "train"):  # each trainer index after its data; the training one last
            if name not in results:
                continue
            entries = results[name] if isinstance(results[name], list) else [results[name]]
            written |= {e["file"] for e in entries}
            if fmt == "megatron":
                idx = out / f"{MEGATRON_PREFIXES[name]}.idx"
                atomic_write_bytes(idx, megatron_index(writers[name].lengths(), ids))
                written.add(idx.name)
        if fmt == "bin":  # nanoGPT's train.py sizes the model's embedding by it
            atomic_write_bytes(out / NANOGPT_META, nanogpt_meta(enc.n_vocab))
            written.add(NANOGPT_META)
        tokens = sum(s.tokens for s in splits.values())
        progress.done(f"{tokens} tokens")
        index: dict[str, Any] = {
            "format": INDEX_FORMATS[fmt],
            "tokenizer": str(Path(tokenizer).resolve()),
            "tokenizer_sha256": digest,
            "vocab_size": enc.n_vocab,
            "max_token_id": enc.max_token_value,
            "pattern": pattern_name(enc),
            "dtype": ids.name,
            "separator": separator,
            "separator_id": sep,
            "bos": bos,
            "bos_id": bos_id,
            "special_tokens_in_text": "ids" if allow_special else "ordinary text",
            "documents_rule": documents if documents is not None else "blank-line",
            "strip": strip,
            "text_column": text_column,
            "val_share": val_share,
            "seed": seed,
            "split_rule": SPLIT_RULE,
            "inputs": reading.files,
        }
        if fmt == "npy":
            index["shard_tokens"] = shard_tokens
            index["shards"] = results["train"]
            index["val_shards"] = results.get("val", [])
        else:
            index["files"] = {name: results[name] for name in ("train", "val") if name in results}
            if fmt == "bin":
                index["nanogpt_meta"] = NANOGPT_META
            if fmt == "megatron":
                index["megatron_prefixes"] = {name: MEGATRON_PREFIXES[name] for name in results}
        index |= {
            "documents": reading.documents,
            "train_documents": train.documents,
            "val_documents": val.documents if val is not None else 0,
            "tokens": tokens,
            "train_tokens": train.tokens,
            "val_tokens": val.tokens if val is not None else 0,
            "text_tokens": totals["text_tokens"],
            "bytes": totals["bytes"],
            "bytes_per_token": round(totals["bytes"] / totals["text_tokens"], 4) if totals["text_tokens"] else None,
            "forced_cuts": reading.forced_cuts,
            "removed": folder.removed(written),
            "seconds": round(time.perf_counter() - started, 3),
        }
        atomic_write_bytes(out / INDEX, (json.dumps(index, indent=2, ensure_ascii=False) + "\n").encode())
    return index


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def summary(index: dict[str, Any], out: Path) -> str:
    """What the command prints."""
    extra = index["tokens"] - index["text_tokens"]
    files = len(index["inputs"])
    if "shards" in index:
        written = _plural(len(index["shards"]), "shard")
        if index.get("val_shards"):
            written += f" + {_plural(len(index['val_shards']), 'validation shard')}"
    else:
        names = [e["file"] for e in index["files"].values()]
        if index["format"] == INDEX_FORMATS["megatron"]:
            names += [f"{p}.idx" for p in index["megatron_prefixes"].values()]
        if index.get("nanogpt_meta"):
            names.append(index["nanogpt_meta"])
        written = ", ".join(names)
    marks = " + ".join(m for m, on in (("bos", index.get("bos")), ("separators", index.get("separator"))) if on)
    lines = [
        f"encoded {_plural(index['documents'], 'document')} from {_plural(files, 'file')} into {written} "
        f"({index['dtype']}) in {out}",
        f"tokens: {index['tokens']}" + (f" ({index['text_tokens']} of text + {extra} {marks})" if extra else ""),
    ]
    if index.get("val_share"):
        lines.append(f"validation: {index['val_documents']} documents, {index['val_tokens']} tokens "
                     f"(--val-share {index['val_share']:g}, --seed {index['seed']})")
    lines += [
        f"bytes: {index['bytes']}",
        "bytes/token: " + (f"{index['bytes'] / index['text_tokens']:.3f}" if index["text_tokens"] else "n/a"),
        f"time: {index['seconds']:.1f} s"
        + (f" ({index['seconds'] / (index['bytes'] / 2**20):.3f} s/MiB)" if index["bytes"] else ""),
    ]
    if index.get("val_share") and not index["val_documents"]:
        lines.append(f"warning: no document fell in the validation split ({index['documents']} documents at "
                     f"--val-share {index['val_share']:g}): raise --val-share, or cut the text into more "
                     f"documents (--documents line)")
    elif index["format"] == INDEX_FORMATS["bin"] and index["val_tokens"] <= NANOGPT_BLOCK_SIZE:
        lines.append(f"warning: val.bin holds {index['val_tokens']} tokens; nanoGPT draws windows of block_size + 1 "
                     f"tokens from it ({NANOGPT_BLOCK_SIZE} + 1 by default) and fails on a shorter file: raise "
                     f"--val-share")
    if index.get("removed"):
        lines.append(f"removed {len(index['removed'])} files of an earlier encode: {', '.join(index['removed'][:4])}"
                     + (", ..." if len(index["removed"]) > 4 else ""))
    if index["forced_cuts"]:
        lines.append(f"warning: {index['forced_cuts']} runs of over {MAX_PIECE_CHARS} characters with no safe place "
                     f"were cut: their tokens may differ from encoding the document whole")
    return "\n".join(lines)
