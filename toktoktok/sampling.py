"""Which units a phase trains on: the held-out share and the sample.

A unit is a document, or a part of a large one (``toktoktok.units``). Both
choices are a seeded hash of a unit's place, compared with a share: (seed,
phase, file index, and the unit's start) where the start is the byte offset
in the file's decompressed bytes (after a UTF-8 byte order mark; of the UTF-8
stream for a file recoded from UTF-16 or UTF-32) for ``.txt``; the line's byte
offset plus the unit's offset in the row's UTF-8 text for jsonl; the row
number and the unit's offset in its UTF-8 text for parquet. The choice
therefore depends neither on timing, threads, the order or size of reads, nor
on how an engine splits a file, and every unit has the same chance whatever
its file or position.

**The sample.** ``working_set_mb`` buys text: a phase keeps at most
``TEXT_PER_BUDGET_BYTE`` (0.4) bytes of training text per byte of budget, so
that counting and training it fit the budget (at 64 MiB, the tightest point
measured by ``benchmarks/bench_memory.py``, 26.6 MiB of text peaks 5 MiB
below the budget plus the overhead; at 0.5 it was 9 MiB above).
When a phase has more, each unit is kept with
probability ``capacity / total`` (``share``), so the kept text is
``capacity`` on average, and, units being small next to it, close to it.

A classic reservoir keeps the sample's text until the end, because it does
not know the total in advance. toktoktok holds no text: it counts pieces as
it streams. So it measures the total first (``sources.text_bytes``: a file
size, or a streaming decompression, about 1 GB/s for zstd) and then decides
each unit as it passes, with the same result as a reservoir whose
priorities are the hashes: every unit equally likely, nothing held.

    >>> share(total=400 << 20, capacity=100 << 20)
    0.25
    >>> share(total=50 << 20, capacity=100 << 20)
    1.0
    >>> 2_300 < sum(chosen(0, "01-en", 0, 1000 * d, 0.25, salt="sample") for d in range(10_000)) < 2_700
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


RULE = "unit-offset+splitmix64"  # how units are cut and ``chosen`` hashes: part of ingest's key, so a change redoes the choice
SAMPLE, HELDOUT = "sample", "heldout"  # the two choices' salts: independent of each other
_GOLDEN, _M1, _M2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def chosen(seed: int, slug: str, file_index: int, offset: int, share: float, *, salt: str, row: int = 0) -> bool:
    """Whether the unit starting at ``offset`` (of row ``row``, for parquet) falls in
    a share: a seeded hash below ``share`` (of 2**64). One unit of ``chosen_at``.

    ``salt`` keeps the held-out choice and the sample independent of each other.
    """
    return bool(chosen_at(file_key(seed, slug, file_index, salt), np.array([offset], dtype=np.uint64), share,
                          row=row)[0])


def file_key(seed: int, slug: str, file_index: int, salt: str) -> int:
    """A file's 64-bit key: blake2b of the seed, the phase, the file and ``salt``."""
    digest = hashlib.blake2b(f"{salt}/{seed}/{slug}/{file_index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, in place: every bit of the result depends on every bit of ``x``."""
    x ^= x >> np.uint64(30)
    x *= _M1
    x ^= x >> np.uint64(27)
    x *= _M2
    x ^= x >> np.uint64(31)
    return x


def chosen_at(key: int, offsets: np.ndarray, share: float, *, row: int = 0) -> np.ndarray:
    """``chosen`` for the units starting at ``offsets`` (of row ``row``) of the file
    with ``key``, at once: the row and then the offset are mixed into the key
    with splitmix64's finalizer, and the result compared with ``share`` of 2**64.
    A per-unit blake2b in Python took longer than counting the text on code
    (210,000 documents per 100 MB).

        >>> chosen_at(file_key(0, "01-en", 0, "sample"), np.arange(8, dtype=np.uint64) * 100, 0.5).tolist()
        [False, False, True, False, True, False, False, True]
    """
    count = len(offsets)
    if share >= 1:
        return np.ones(count, dtype=bool)
    if share <= 0:
        return np.zeros(count, dtype=bool)
    with np.errstate(over="ignore"):
        k = _mix(np.array([row + 1], dtype=np.uint64) * _GOLDEN + np.uint64(key))
        x = _mix((np.asarray(offsets, dtype=np.uint64) + np.uint64(1)) * _GOLDEN + k)
    return x < np.uint64(min(int(share * 2.0**64), 2**64 - 1))


def is_heldout(seed: int, slug: str, file_index: int, offset: int, share: float, *, row: int = 0) -> bool:
    """The held-out choice: ``chosen`` with its own salt, so that it is independent
    of the sample. (Until this version units were documents, keyed by their
    number in the file; ``RULE`` is in ingest's key, so a work folder made
    before is ingested again.)"""
    return chosen(seed, slug, file_index, offset, share, salt=HELDOUT, row=row)


def jsonl_offsets(texts: list[str]) -> list[int]:
    """The byte offset of each document's line in the jsonl file that
    ``toktoktok.train`` writes (``json.dumps({"text": d}, ensure_ascii=True)``
    a line): the key of an in-memory document, so that training on the texts
    and on that file choose alike.

        >>> jsonl_offsets(["ab", "c"])
        [0, 15]
    """
    import json

    out, at = [], 0
    for text in texts:
        out.append(at)
        at += len(json.dumps({"text": text}, ensure_ascii=True)) + 1
    return out
