#!/usr/bin/env python3
"""The peer trainers, each run by the ``peers`` and ``scale`` sections as a whole process of its own.

    python benchmarks/sections/peer_trainers.py hf      --corpus train.txt --tokens 32768 --pattern REGEX --out hf.tiktoken
    python benchmarks/sections/peer_trainers.py rustbpe --corpus train.txt --tokens 32768 --pattern REGEX --out rustbpe.tiktoken

Both stream the same plain ``.txt`` that toktoktok trains on, fed as one of:

- ``--feed documents`` (default): split into documents the way toktoktok's
  reader does (docs/pretokenization.md: after a blank line that is followed by
  a character that is not white space), never lines, so the pattern sees the
  same newlines everywhere;
- ``--feed chunks``: pieces of about 1 MiB, each cut after its last line end,
  as a user hands a big file to ``train_from_iterator``. A run of white space
  across a cut is split there, so the pieces differ slightly from the
  documents'. rustbpe pulls 8,192 strings from the iterator before it counts
  them, so with 1 MiB strings it holds up to the whole text at once: this is
  the feed its memory is compared with in the scale section's targets.
Each writes its vocabulary as a ``.tiktoken`` file (standard base64 of the
token's bytes, a space, the rank) so the benchmark measures compression of
all trainers with the same code.

- ``hf``: Hugging Face ``tokenizers``: ``models.BPE()`` with the pre-tokenizer
  ``Split(pattern, "isolated")`` then ``ByteLevel(add_prefix_space=False,
  use_regex=False)``, ``BpeTrainer(vocab_size=tokens, min_frequency=2,
  initial_alphabet=ByteLevel.alphabet(), special_tokens=[])``, trained with
  ``train_from_iterator`` over the documents. The learned vocabulary (GPT-2
  byte-to-unicode strings) is mapped back to bytes; its ids are the ranks.
- ``rustbpe``: ``rustbpe.Tokenizer().train_from_iterator(documents,
  vocab_size=tokens, pattern=pattern)``; ``get_mergeable_ranks()`` gives the
  ranks. rustbpe has no minimum pair frequency: it merges pairs seen once.

The pattern comes on the command line (the sections pass toktoktok's default),
so this script imports nothing of toktoktok and its time and memory are its own.
"""

from __future__ import annotations

import argparse
import base64
from collections.abc import Iterable, Iterator
from pathlib import Path

import regex

# The document boundary of toktoktok.sources (docs/pretokenization.md), kept identical here.
DOC_BOUNDARY = regex.compile(r"(?:\n\n|\r\r|\n\r|[\r\n]\r\n)(?=\S)")


def iter_documents(path: Path, block_chars: int = 1 << 20) -> Iterator[str]:
    """The documents of a plain UTF-8 text file, streamed, each with its trailing blank line.

    Read in blocks (line ends kept as written, like toktoktok's byte reader);
    the text after the last boundary found waits for the next block, so the
    documents are the same as when the whole text is split at once.
    """
    buf = ""
    with path.open(encoding="utf-8", errors="replace", newline="") as fh:
        while block := fh.read(block_chars):
            buf += block
            start = 0
            for m in DOC_BOUNDARY.finditer(buf):
                yield buf[start:m.end()]
                start = m.end()
            buf = buf[start:]
    if buf:
        yield buf


def iter_chunks(path: Path, chunk_chars: int = 1 << 20) -> Iterator[str]:
    """A plain UTF-8 text file as pieces of about ``chunk_chars`` characters, each
    cut after its last line end (a piece without one is given whole): how a
    user hands a big text file to a trainer that wants an iterator of strings."""
    buf = ""
    with path.open(encoding="utf-8", errors="replace", newline="") as fh:
        while block := fh.read(chunk_chars):
            buf += block
            cut = buf.rfind("\n") + 1
            if cut > 0:
                yield buf[:cut]
                buf = buf[cut:]
    if buf:
        yield buf


FEEDS = {"documents": iter_documents, "chunks": iter_chunks}


def write_tiktoken(ranks: Iterable[tuple[bytes, int]], out: Path) -> int:
    """Write ``token rank`` lines sorted by rank; returns the number of ranks."""
    rows = sorted(ranks, key=lambda item: item[1])
    lines = [base64.b64encode(token) + b" " + str(rank).encode() + b"\n" for token, rank in rows]
    out.write_bytes(b"".join(lines))
    return len(rows)


def byte_decoder() -> dict[str, int]:
    """GPT-2's printable-unicode stand-in for each byte, inverted (char -> byte)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars)}


def train_hf(docs: Iterable[str], tokens: int, pattern: str) -> list[tuple[bytes, int]]:
    """Train Hugging Face's BpeTrainer; returns (token bytes, id) pairs."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    trainer = trainers.BpeTrainer(vocab_size=tokens, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tok.train_from_iterator(docs, trainer=trainer)
    decode = byte_decoder()
    return [(bytes(decode[c] for c in token), tid) for token, tid in tok.get_vocab().items()]


def train_rustbpe(docs: Iterable[str], tokens: int, pattern: str) -> list[tuple[bytes, int]]:
    """Train rustbpe; returns its (token bytes, rank) pairs."""
    import rustbpe

    tok = rustbpe.Tokenizer()
    tok.train_from_iterator(iter(docs), vocab_size=tokens, pattern=pattern)
    return [(bytes(token), int(rank)) for token, rank in tok.get_mergeable_ranks()]


TRAINERS = {"hf": train_hf, "rustbpe": train_rustbpe}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trainer", choices=sorted(TRAINERS))
    parser.add_argument("--corpus", type=Path, required=True, help="plain UTF-8 .txt to train on")
    parser.add_argument("--tokens", type=int, required=True, help="vocabulary size (256 bytes + merges)")
    parser.add_argument("--pattern", required=True, help="the pre-tokenization regex")
    parser.add_argument("--out", type=Path, required=True, help="the .tiktoken file to write")
    parser.add_argument("--feed", choices=sorted(FEEDS), default="documents",
                        help="strings handed to the trainer: whole documents, or 1 MiB chunks cut at a line end")
    args = parser.parse_args(argv)
    seen = 0

    def counted() -> Iterator[str]:
        nonlocal seen
        for doc in FEEDS[args.feed](args.corpus):
            seen += 1
            yield doc

    ranks = TRAINERS[args.trainer](counted(), args.tokens, args.pattern)
    count = write_tiktoken(ranks, args.out)
    print(f"{args.trainer}: {seen} {args.feed}, {count} ranks -> {args.out}")


if __name__ == "__main__":
    main()
