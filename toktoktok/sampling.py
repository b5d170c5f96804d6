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
