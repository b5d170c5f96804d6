"""Which units a phase trains on: the held-out share and the sample.

A unit is a document, or a part of a large one (``toktoktok.units``). Both
choices are a seeded hash of the unit's place (seed, phase, file index and
where the unit starts: docs/training.md, Seeded choices) compared with a
share, so they depend neither on timing, threads or reads nor on how an
engine splits a file, and every unit has the same chance.

**The sample.** ``working_set_mb`` buys text: a phase keeps at most
``TEXT_PER_BUDGET_BYTE`` bytes of training text per byte of budget
(``capacity``). When a phase has more, each unit is kept with probability
``capacity / total`` (``share``), so the kept text is ``capacity`` on
average, and, units being small next to it, close to it.

A classic reservoir keeps the sample's text until the end, as it does not
know the total in advance. toktoktok holds no text, so it measures the total
first (``sources.text_bytes``) and decides each unit as it passes: the same
result as a reservoir whose priorities are the hashes, nothing held.

    >>> share(total=400 << 20, capacity=100 << 20)
    0.25
    >>> share(total=50 << 20, capacity=100 << 20)
    1.0
    >>> 2_300 < sum(chosen(0, "01-en", 0, 1000 * d, 0.25, salt="sample") for d in range(10_000)) < 2_700
    True
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

# bytes of training text a phase keeps per byte of working_set_mb: counting and training it
# fit the budget (0.5 went over it at 64 MiB; 0.4 stays within it in benchmarks/results/MEMORY.md,
# written by benchmarks/run.py --section memory)
TEXT_PER_BUDGET_BYTE = 0.4


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
CAP = "cap"  # a source's cap (``max_bytes``): a salt of its own, so independent of both
_GOLDEN, _M1, _M2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


@dataclass(frozen=True)
class Shares:
    """What ingest keeps of a phase whose sources set ``max_bytes``: the phase's
    sample share and each file's source cap share (by file index).

    A source's cap keeps each of its units with probability ``max_bytes / its
    text`` (``share`` again), by a hash of its own (salt ``CAP``): a unit trains
    when both the cap and the phase's sample keep it, and the phase's sample is
    measured on the text the caps keep. The held-out choice comes first, from
    the whole source: the cap thins training text only.

        >>> Shares(0.5, (1.0, 0.25)).of(1)
        (0.5, 0.25)
    """

    phase: float
    caps: tuple[float, ...]

    def of(self, index: int) -> tuple[float, float]:
        """File ``index``'s (sample share, cap share)."""
        return self.phase, self.caps[index]


def shares_of(share: float | Shares, index: int) -> tuple[float, float]:
    """File ``index``'s (sample share, cap share) from a phase's share or ``Shares``.

        >>> shares_of(0.5, 3)
        (0.5, 1.0)
    """
    return share.of(index) if isinstance(share, Shares) else (share, 1.0)


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


def chosen_many(key: int, first: int, count: int, share: float) -> np.ndarray:
    """Whether documents ``first .. first + count - 1`` of the file with ``key``
    fall in a share: each document's number mixed into the key with
    splitmix64's finalizer and compared with ``share`` of 2**64. Ingest's rule
    until units were keyed by offset (``chosen_at``); ``toktok encode``'s
    validation split still keys documents by number with it.

        >>> chosen_many(file_key(0, "01-en", 0, "sample"), 0, 8, 0.5).tolist()
        [False, True, True, True, True, False, False, True]
    """
    if share >= 1:
        return np.ones(count, dtype=bool)
    if share <= 0:
        return np.zeros(count, dtype=bool)
    with np.errstate(over="ignore"):
        x = np.arange(first + 1, first + count + 1, dtype=np.uint64) * _GOLDEN
        x += np.uint64(key)
        x = _mix(x)
    return x < np.uint64(min(int(share * 2.0**64), 2**64 - 1))


def chosen_at(key: int, offsets: np.ndarray, share: float, *, row: int | np.ndarray = 0) -> np.ndarray:
    """``chosen`` for the units starting at ``offsets`` (of row ``row``, or of each
    unit's row if an array) of the file with ``key`` (or of each unit's file, if
    an array of keys), at once: the row and then the offset are mixed into the
    key with splitmix64's finalizer, and the result compared with ``share`` of 2**64.
    A per-unit blake2b in Python took longer than counting the text on code,
    which has many short documents.

        >>> chosen_at(file_key(0, "01-en", 0, "sample"), np.arange(8, dtype=np.uint64) * 100, 0.5).tolist()
        [False, False, True, False, True, False, False, True]
        >>> keys = np.array([file_key(0, "01-en", i, "sample") for i in range(4)], dtype=np.uint64)
        >>> chosen_at(keys, np.zeros(4, np.uint64), 0.5).tolist() == [
        ...     bool(chosen_at(int(k), np.zeros(1, np.uint64), 0.5)[0]) for k in keys]
        True
    """
    count = len(offsets)
    if share >= 1:
        return np.ones(count, dtype=bool)
    if share <= 0:
        return np.zeros(count, dtype=bool)
    with np.errstate(over="ignore"):
        k = _mix((np.asarray(row, dtype=np.uint64).reshape(-1) + np.uint64(1)) * _GOLDEN + np.asarray(key, dtype=np.uint64))
        x = _mix((np.asarray(offsets, dtype=np.uint64) + np.uint64(1)) * _GOLDEN + k)
    return x < np.uint64(min(int(share * 2.0**64), 2**64 - 1))


def is_heldout(seed: int, slug: str, file_index: int, offset: int, share: float, *, row: int = 0) -> bool:
    """The held-out choice: ``chosen`` with its own salt, so that it is independent
    of the sample. (Until this version units were documents, keyed by their
    number in the file; ``RULE`` is in ingest's key, so a work folder made
    before is ingested again.)"""
    return chosen(seed, slug, file_index, offset, share, salt=HELDOUT, row=row)


def jsonl_offsets(texts: list[str]) -> np.ndarray:
    """The byte offset of each document's line in the jsonl file that
    ``toktoktok_stages.pipeline.train_texts`` writes (``json.dumps({"text": d},
    ensure_ascii=True)`` and a line break each), and last the file's size:
    the keys of documents in memory (``toktoktok.train``), and the total its
    sample's share is measured against, so that training on the texts and
    ``toktok run`` on that file choose alike.

        >>> jsonl_offsets(["ab", "c"]).tolist()
        [0, 15, 29]
    """
    import json

    sizes = np.fromiter((len(json.dumps({"text": t}, ensure_ascii=True)) + 1 for t in texts), dtype=np.int64,
                        count=len(texts))
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


HELDOUT_CAP_BYTES = 8 << 20  # held-out text per phase, at most (the unit that crosses it is cut)
TRAIN, HELD, LEFT_OUT = 0, 1, 2  # a unit's fate (``unit_fates``)


def unit_fates(
    sizes: np.ndarray | list[int],
    offsets: np.ndarray | list[int],
    *,
    seed: int,
    slug: str,
    rows: np.ndarray | list[int] | int = 0,
    file_index: int = 0,
    heldout_share: float,
    sample_share: float = 1.0,
    cap_share: float = 1.0,
    heldout_cap: int = HELDOUT_CAP_BYTES,
    heldout_bytes: int = 0,
) -> tuple[np.ndarray, int]:
    """Each unit's fate, in key order: ``HELD`` (held out), ``TRAIN`` or
    ``LEFT_OUT`` (not in the sample); and the phase's held-out bytes after them.

    ``sizes``: the UTF-8 bytes of units of file ``file_index`` of the phase
    ``slug``, starting at ``offsets`` (of ``rows``, for rows of a parquet
    file or documents in memory), in key order; ``heldout_bytes``: what the
    phase held out before them. A unit is held out if its held-out hash falls
    in ``heldout_share`` while the phase has held out less than
    ``heldout_cap`` bytes; the one that crosses the cap is still held out
    (cut at the cap, so the phase never holds more). Every other unit is
    trained on if its sample hash falls in ``sample_share`` and its cap hash
    in ``cap_share`` (its source's ``max_bytes``). This is the rule
    ingest applies as it reads (the last-unit rule aside: see ``ingest``);
    the choice needs the sizes only for the cap.

    Since the held-out bytes only grow, the held-out units are the
    candidates up to the one that reaches the cap: one cumulative sum, no
    loop over units.

        >>> fates, held = unit_fates([500, 2000, 700, 300, 900, 100], [0, 500, 2500, 3200, 3500, 4400],
        ...                          seed=0, slug="01-train", heldout_share=0.5, sample_share=0.5,
        ...                          heldout_cap=2400)
        >>> fates.tolist(), held
        ([1, 1, 0, 2, 2, 0], 2400)
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.uint64)
    rows = np.asarray(rows, dtype=np.uint64)
    candidate = chosen_at(file_key(seed, slug, file_index, HELDOUT), offsets, heldout_share, row=rows)
    sampled = chosen_at(file_key(seed, slug, file_index, SAMPLE), offsets, sample_share, row=rows)
    if cap_share < 1:
        sampled &= chosen_at(file_key(seed, slug, file_index, CAP), offsets, cap_share, row=rows)
    fates = np.where(sampled, TRAIN, LEFT_OUT).astype(np.uint8)
    where = np.flatnonzero(candidate)
    before = heldout_bytes + np.cumsum(sizes[where]) - sizes[where]  # held out before each candidate
    held = where[before < heldout_cap]
    fates[held] = HELD
    return fates, min(heldout_cap, heldout_bytes + int(sizes[held].sum()))
