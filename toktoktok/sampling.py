"""Which documents a phase trains on: the held-out share and the sample.

Both choices are a seeded hash of a document's place (phase, file index,
document number), compared with a share. The choice therefore does not
depend on timing, threads or the order of reading, and every document has
the same chance whatever its file or position.

**The sample.** ``working_set_mb`` buys text: a phase keeps at most
``TEXT_PER_BUDGET_BYTE`` (0.4) bytes of training text per byte of budget, so
that counting and training it fit the budget (at 64 MiB, the tightest point
measured by ``benchmarks/bench_memory.py``, 26.6 MiB of text peaks 5 MiB
below the budget plus the overhead; at 0.5 it was 9 MiB above).
When a phase has more, each document is kept with
probability ``capacity / total`` (``share``), so the kept text is
``capacity`` on average.

A classic reservoir keeps the sample's text until the end, because it does
not know the total in advance. toktoktok holds no text: it counts pieces as
it streams. So it measures the total first (``sources.text_bytes``: a file
size, or a streaming decompression, about 1 GB/s for zstd) and then decides
each document as it passes, with the same result as a reservoir whose
priorities are the hashes: every document equally likely, nothing held.
A document larger than a read block is decided at its first block and its
blocks are streamed (or skipped) like any other.

    >>> share(total=400 << 20, capacity=100 << 20)
    0.25
    >>> share(total=50 << 20, capacity=100 << 20)
    1.0
    >>> 2_300 < sum(chosen(0, "01-en", 0, d, 0.25, salt="sample") for d in range(10_000)) < 2_700
    True
"""

from __future__ import annotations

import hashlib

import numpy as np

TEXT_PER_BUDGET_BYTE = 0.4  # bytes of training text a phase keeps per byte of working_set_mb (0.5 left 64 MiB 9 MiB over)


def capacity(working_set_mb: int) -> int:
    """Bytes of training text a phase keeps before it is sampled."""
    return int((working_set_mb << 20) * TEXT_PER_BUDGET_BYTE)


def share(*, total: int, capacity: int) -> float:
    """The share of documents kept: 1.0 when everything fits."""
    if total <= capacity or total <= 0:
        return 1.0
    return capacity / total


RULE = "file-key+splitmix64"  # how ``chosen`` hashes: part of ingest's key, so a change redoes the choice
SAMPLE, HELDOUT = "sample", "heldout"  # the two choices' salts: independent of each other


def chosen(seed: int, slug: str, file_index: int, doc: int, share: float, *, salt: str) -> bool:
    """Whether a document falls in a share: a seeded hash below ``share`` (of 2**64).

    ``salt`` keeps the held-out choice and the sample independent of each other.
    One document of ``chosen_many``.
    """
    return bool(chosen_many(file_key(seed, slug, file_index, salt), doc, 1, share)[0])


def file_key(seed: int, slug: str, file_index: int, salt: str) -> int:
    """A file's 64-bit key: blake2b of the seed, the phase, the file and ``salt``."""
    digest = hashlib.blake2b(f"{salt}/{seed}/{slug}/{file_index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def chosen_many(key: int, first: int, count: int, share: float) -> np.ndarray:
    """``chosen`` for documents ``first .. first + count - 1`` of the file with ``key``,
    at once: the documents' numbers are mixed into the key with splitmix64's
    finalizer (every bit of the result depends on every bit of both), and the
    result compared with ``share`` of 2**64. A per-document blake2b in Python
    took longer than counting the text on code (210,000 documents per 100 MB).

        >>> chosen_many(file_key(0, "01-en", 0, "sample"), 0, 8, 0.5).tolist()
        [False, True, True, True, True, False, False, True]
    """
    if share >= 1:
        return np.ones(count, dtype=bool)
    if share <= 0:
        return np.zeros(count, dtype=bool)
    x = np.arange(first + 1, first + count + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    x += np.uint64(key)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x < np.uint64(min(int(share * 2.0**64), 2**64 - 1))


def is_heldout(seed: int, slug: str, file_index: int, doc: int, share: float) -> bool:
    """The held-out choice: ``chosen`` with its own salt, so that it is independent
    of the sample. (Until this version it was a blake2b of each document's place;
    ``RULE`` is in ingest's key, so a work folder made before is ingested again.)"""
    return chosen(seed, slug, file_index, doc, share, salt=HELDOUT)


HELDOUT_CAP_BYTES = 8 << 20  # held-out text per phase, at most (the document that crosses it is cut)
TRAIN, HELD, LEFT_OUT = 0, 1, 2  # a document's fate (``document_fates``)


def document_fates(
    sizes: np.ndarray | list[int],
    *,
    seed: int,
    slug: str,
    file_index: int = 0,
    first: int = 0,
    heldout_share: float,
    sample_share: float = 1.0,
    heldout_cap: int = HELDOUT_CAP_BYTES,
    heldout_bytes: int = 0,
) -> tuple[np.ndarray, int]:
    """Each document's fate, in reading order: ``HELD`` (held out), ``TRAIN`` or
    ``LEFT_OUT`` (not in the sample); and the phase's held-out bytes after them.

    ``sizes``: the UTF-8 bytes of documents ``first, first + 1, ...`` of file
    ``file_index`` of the phase ``slug``; ``heldout_bytes``: what the phase
    held out before them (earlier files, earlier calls). A document is held
    out if its held-out hash falls in ``heldout_share`` while the phase has
    held out less than ``heldout_cap`` bytes; the one that crosses the cap is
    still held out (cut at the cap, so the phase never holds more). Every
    other document is trained on if its sample hash falls in ``sample_share``.
    This is the rule ingest applies as it reads; the choice needs the sizes
    only for the cap.

    Since the held-out bytes only grow, the held-out documents are the
    candidates up to the one that reaches the cap: one cumulative sum, no
    loop over documents.

        >>> fates, held = document_fates([500, 2000, 700, 300, 900, 100], seed=0, slug="01-train",
        ...                              heldout_share=0.5, sample_share=0.5, heldout_cap=2400)
        >>> fates.tolist(), held
        ([1, 1, 0, 2, 0, 2], 2400)

    Documents 0, 1, 3 and 4 are held-out candidates: 0 and 1 are held out (1
    crosses the cap: ingest keeps its first 1,900 bytes), and by 3 the cap is
    reached, so 3 and 4 go to the sample like the others, where 3 and 5 are
    left out.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    count = len(sizes)
    candidate = chosen_many(file_key(seed, slug, file_index, HELDOUT), first, count, heldout_share)
    sampled = chosen_many(file_key(seed, slug, file_index, SAMPLE), first, count, sample_share)
    fates = np.where(sampled, TRAIN, LEFT_OUT).astype(np.uint8)
    where = np.flatnonzero(candidate)
    before = heldout_bytes + np.cumsum(sizes[where]) - sizes[where]  # held out before each candidate
    held = where[before < heldout_cap]
    fates[held] = HELD
    return fates, min(heldout_cap, heldout_bytes + int(sizes[held].sum()))
