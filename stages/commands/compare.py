"""``toktok compare``: several tokenizers' compression on the same texts.

Compression is UTF-8 bytes per token (higher is better): the bytes of the
documents' text over the tokens each tokenizer makes of them. Texts are read
with the same input kinds and document rules as a config's sources; every
document is encoded on its own, special tokens in the text as ordinary text
(``encode_ordinary_batch``), so the numbers are what ``toktok encode`` would
produce without separators.

Each tokenizer is a file ``texts.tokenizer_path`` found: a ``tokenizer.json``
or a stock vocabulary is loaded as ``texts.load_tokenizer`` says. A
``.tiktoken`` (or ``.tiktoken.gz``, ``.tiktoken.zst``) takes its pattern and
special tokens from its ``NAME.meta.json`` when there is one; a file without one takes ``--pattern`` (a name such as
``cl100k`` or a regex), else its own when it is OpenAI's ``cl100k_base`` or
``o200k_base`` (recognised by content, ``toktoktok.known_bases``: o200k
counted with the default pattern understates its compression of the
multilingual reference texts by 3.6%), else the default pattern (docs/pretokenization.md).

Decisions: one row per ``--text`` argument (a file, or a folder summed over
its files) and a row ``all``; one column per tokenizer, named by its name
(``any_tokenizer.tokenizer_name``, made unique). Every document is read once and encoded by every
tokenizer in turn; memory is bounded by the batch, as in ``toktok encode``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from toktoktok.any_tokenizer import tokenizer_name
from toktoktok.errors import UsageError
from toktoktok.tuning import resolve_threads

from ..workdir.progress import Progress
from .texts import (
    Reading,
    can_cut,
    encode_batch_chars,
    input_files,
    iter_batches,
    iter_parts,
    load_tokenizer,
    pattern_name,
    table,
)


def _column_names(paths: Sequence[Path]) -> list[str]:
    names: list[str] = []
    for p in paths:
        name = tokenizer_name(p)
        if name in names or name in ("text", "documents", "bytes"):
            k = 2
            while f"{name} ({k})" in names:
                k += 1
            name = f"{name} ({k})"
        names.append(name)
    return names


def compare(
    tokenizers: Sequence[Path],
    texts: Sequence[Path],
    *,
    pattern: str | None = None,
    text_column: str = "text",
    threads: int = -1,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Count every tokenizer's tokens on every text; returns the counts.

    ``{"tokenizers": [{name, path, vocab_size, pattern}], "texts": [{text,
    documents, bytes, tokens: {name: n}}]}`` with the last text ``all``.
    """
    progress = progress or Progress()
    if not tokenizers:
        raise UsageError("give at least one tokenizer to compare (a .tiktoken, a tokenizer.json, a stock name or -c CONFIG)")
    if not texts:
        raise UsageError("give the texts to compare on with --text FILE_OR_FOLDER")
    if threads == 0 or threads < -1:
        raise UsageError(f"--threads must be -1 (all cores) or at least 1, got {threads}")
    encs = [load_tokenizer(Path(t), pattern) for t in tokenizers]
    names = _column_names([Path(t) for t in tokenizers])
    workers = resolve_threads(threads)
    cut = all(can_cut(e) for e in encs)
    rows = []
    progress.start("compare", unit="B")
    for text in texts:
        files = input_files([Path(text)], text_column)
        row = {"text": str(text), "documents": 0, "bytes": 0, "tokens": dict.fromkeys(names, 0)}
        reading = Reading()
        for batch in iter_batches(iter_parts(files, text_column=text_column, cut=cut, reading=reading),
                                  encode_batch_chars(workers)):
            docs = [p[0] for p in batch]
            nbytes = sum(len(d.encode("utf-8", "surrogatepass")) for d in docs)
            row["bytes"] += nbytes
            for name, enc in zip(names, encs):
                row["tokens"][name] += sum(len(t) for t in enc.encode_ordinary_batch(docs, num_threads=workers))
            progress.update(nbytes)
        row["documents"] = reading.documents
        rows.append(row)
    progress.done()
    total = {"text": "all", "documents": sum(r["documents"] for r in rows), "bytes": sum(r["bytes"] for r in rows),
             "tokens": {n: sum(r["tokens"][n] for r in rows) for n in names}}
    return {
        "tokenizers": [{"name": n, "path": str(t), "vocab_size": e.n_vocab, "pattern": pattern_name(e)}
                       for n, t, e in zip(names, tokenizers, encs)],
        "texts": rows + [total],
    }


def bytes_per_token(nbytes: int, tokens: int) -> str:
    """The printed figure: three decimals (``n/a`` without tokens)."""
    return f"{nbytes / tokens:.3f}" if tokens else "n/a"


def render(result: dict[str, Any]) -> str:
    """The two tables the command prints."""
    names = [t["name"] for t in result["tokenizers"]]
    data: dict[str, list[Any]] = {
        "text": [r["text"] for r in result["texts"]],
        "documents": [r["documents"] for r in result["texts"]],
        "bytes": [r["bytes"] for r in result["texts"]],
    }
    for n in names:
        data[n] = [bytes_per_token(r["bytes"], r["tokens"][n]) for r in result["texts"]]
    total = result["texts"][-1]
    tokenizers = pl.DataFrame({
        "tokenizer": names,
        "vocab size": [t["vocab_size"] for t in result["tokenizers"]],
        "pattern": [t["pattern"] for t in result["tokenizers"]],
        "tokens": [total["tokens"][n] for n in names],
        "bytes/token": [bytes_per_token(total["bytes"], total["tokens"][n]) for n in names],
    })
    return "\n".join([
        "bytes per token (UTF-8 bytes of the text / tokens; higher is better):",
        table(pl.DataFrame(data)),
        "tokenizers:",
        table(tokenizers),
    ])
