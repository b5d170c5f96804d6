"""Segmenting pieces as tiktoken does, with a bytes -> rank hash table in numba.

tiktoken encodes a piece by starting from its single bytes and repeatedly
joining the adjacent pair whose joined bytes have the lowest rank (leftmost
on ties) until no joined pair is a token. ``segment_reference`` is that rule
in plain Python, quadratic and obviously correct: the oracle of the tests.

    >>> ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"bc": 257, b"abc": 258}
    >>> segment_reference(b"abcd", ranks)
    [258, 100]

``segment_pieces`` does the same for a whole inventory of pieces in numba, in
parallel over pieces, with a min-heap per piece so that a piece of a million
bytes costs n log n rather than n². Because parts are contiguous spans of the
piece, "is the joined pair a token" is a hash lookup of a span of the piece's
own bytes: no pair table is needed, and a vocabulary from anywhere (a warm
start whose tokens were not built by our merges) works the same way.
"""

from __future__ import annotations

from collections.abc import Mapping

import numba
import numpy as np
from numba import njit, prange

from toktoktok.vocab import Vocab

_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)
NO_TOKEN = np.int64(1) << np.int64(62)  # "no token": larger than any rank


def segment_reference(piece: bytes, ranks: Mapping[bytes, int]) -> list[int]:
    """tiktoken's rule in plain Python: join the lowest-ranked adjacent pair first."""
    parts = [piece[i : i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        joined = [ranks.get(parts[i] + parts[i + 1]) for i in range(len(parts) - 1)]
        candidates = [(r, i) for i, r in enumerate(joined) if r is not None]
        if not candidates:
            break
        _, i = min(candidates)
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return [ranks[p] for p in parts]


# ---------------------------------------------------------------------------
# The token table: open addressing over token bytes, keyed by rank.


@njit(cache=True, inline="always")
def span_hash(buf: np.ndarray, start: int, end: int) -> np.uint64:
    """FNV-1a hash of ``buf[start:end]``."""
    h = _FNV_OFFSET
    for k in range(start, end):
        h = (h ^ np.uint64(buf[k])) * _FNV_PRIME
    return h


@njit(cache=True)
def table_insert(table: np.ndarray, tok_buf: np.ndarray, tok_off: np.ndarray, rank: int) -> None:
    """Insert ``rank`` (its bytes are ``tok_buf[tok_off[rank]:tok_off[rank+1]]``)."""
    mask = np.uint64(len(table) - 1)
    slot = span_hash(tok_buf, tok_off[rank], tok_off[rank + 1]) & mask
    while table[slot] >= 0:
        slot = (slot + np.uint64(1)) & mask
    table[slot] = rank


@njit(cache=True)
def table_lookup(
    table: np.ndarray, tok_buf: np.ndarray, tok_off: np.ndarray, buf: np.ndarray, start: int, end: int
) -> np.int64:
    """The rank whose bytes equal ``buf[start:end]``, or ``NO_TOKEN``."""
    n = end - start
    mask = np.uint64(len(table) - 1)
    slot = span_hash(buf, start, end) & mask
    while True:
        r = table[slot]
        if r < 0:
            return NO_TOKEN
        t0 = tok_off[r]
        if tok_off[r + 1] - t0 == n:
            same = True
            for k in range(n):
                if tok_buf[t0 + k] != buf[start + k]:
                    same = False
                    break
            if same:
                return np.int64(r)
        slot = (slot + np.uint64(1)) & mask


def table_capacity(n_tokens: int) -> int:
    """A power of two at least twice ``n_tokens`` (load factor <= 1/2)."""
    cap = 1024
    while cap < 2 * n_tokens:
        cap *= 2
    return cap


@njit(cache=True)
def build_table(tok_buf: np.ndarray, tok_off: np.ndarray, capacity: int) -> np.ndarray:
    """A hash table of every non-gap rank of the vocabulary."""
    table = np.full(capacity, -1, dtype=np.int32)
    for r in range(len(tok_off) - 1):
        if tok_off[r + 1] > tok_off[r]:
            table_insert(table, tok_buf, tok_off, r)
    return table


# ---------------------------------------------------------------------------
# One piece: linked parts and a min-heap of (rank << 32 | position).


@njit(cache=True, inline="always")
def _heap_push(heap: np.ndarray, size: int, item: np.int64) -> int:
    i = size
    heap[i] = item
    while i > 0:
        parent = (i - 1) >> 1
        if heap[parent] <= heap[i]:
            break
        heap[parent], heap[i] = heap[i], heap[parent]
        i = parent
    return size + 1


@njit(cache=True, inline="always")
def _heap_pop(heap: np.ndarray, size: int) -> int:
    """Remove the smallest item (the caller read ``heap[0]`` first)."""
    size -= 1
    heap[0] = heap[size]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= size:
            break
        child = left
        if left + 1 < size and heap[left + 1] < heap[left]:
            child = left + 1
        if heap[i] <= heap[child]:
            break
        heap[i], heap[child] = heap[child], heap[i]
        i = child
    return size


@njit(cache=True)
def segment_one(table, tok_buf, tok_off, buf, start, end, out, scratch) -> int:
    """Segment ``buf[start:end]`` into ranks written to ``out``; returns their count.

    ``scratch`` is an int64 array of at least ``6 * (end - start) + 4`` entries,
    used as: ``nxt`` (start of the next part, n at the end, -1 once absorbed),
    ``prv`` (start of the previous part, -1 at the front), ``pair_rank`` (rank
    of the part joined with its successor), and the heap (3n: n - 1 initial
    pairs plus at most two pushes a join).
    """
    n = end - start
    nxt = scratch[0 : n + 1]
    prv = scratch[n + 1 : 2 * n + 2]
    pair_rank = scratch[2 * n + 2 : 3 * n + 3]
    heap = scratch[3 * n + 3 :]
    size = 0
    for i in range(n):
        nxt[i] = i + 1
        prv[i] = i - 1
        pair_rank[i] = NO_TOKEN
    for i in range(n - 1):
        r = table_lookup(table, tok_buf, tok_off, buf, start + i, start + i + 2)
        pair_rank[i] = r
        if r != NO_TOKEN:
            size = _heap_push(heap, size, (r << 32) | i)
    while size > 0:
        item = heap[0]
        size = _heap_pop(heap, size)
        i = item & 0xFFFFFFFF
        if nxt[i] < 0 or pair_rank[i] != (item >> 32):
            continue  # stale: i was absorbed, or its pair changed since
        j = nxt[i]
        k = nxt[j]
        nxt[i] = k
        nxt[j] = -1
        if k < n:
            prv[k] = i
            r = table_lookup(table, tok_buf, tok_off, buf, start + i, start + nxt[k])
            pair_rank[i] = r
            if r != NO_TOKEN:
                size = _heap_push(heap, size, (r << 32) | i)
        else:
            pair_rank[i] = NO_TOKEN
        p = prv[i]
        if p >= 0:
            r = table_lookup(table, tok_buf, tok_off, buf, start + p, start + k)
            pair_rank[p] = r
            if r != NO_TOKEN:
                size = _heap_push(heap, size, (r << 32) | p)
    count = 0
    i = 0
    while i < n:
        out[count] = table_lookup(table, tok_buf, tok_off, buf, start + i, start + nxt[i])
        count += 1
        i = nxt[i]
    return count


@njit(cache=True, parallel=True)
def _segment_all(table, tok_buf, tok_off, buf, off, sym, lens, n_blocks):
    """Segment every piece ``buf[off[w]:off[w+1]]`` into ``sym[off[w]:]``, ``lens[w]``."""
    n_words = len(off) - 1
    per_block = (n_words + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        lo = b * per_block
        hi = min(n_words, lo + per_block)
        longest = 0
        for w in range(lo, hi):
            longest = max(longest, off[w + 1] - off[w])
        scratch = np.empty(6 * longest + 4, dtype=np.int64)
        out = np.empty(longest + 1, dtype=np.int64)
        for w in range(lo, hi):
            c = segment_one(table, tok_buf, tok_off, buf, off[w], off[w + 1], out, scratch)
            for k in range(c):
                sym[off[w] + k] = out[k]
            lens[w] = c


def token_table(vocab: Vocab) -> np.ndarray:
    """The bytes -> rank hash table of ``vocab`` (int32, -1 = empty slot)."""
    return build_table(vocab.buf, vocab.off, table_capacity(len(vocab)))


def segment_pieces(vocab: Vocab, buf: np.ndarray, off: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Segment every piece of a flat inventory as tiktoken would with ``vocab``.

    Piece ``w`` is ``buf[off[w]:off[w+1]]``. Returns ``(sym, lens)``: piece
    w's ranks are ``sym[off[w] : off[w] + lens[w]]`` (int32; a piece never has
    more parts than bytes, so the words share the pieces' offsets).
    """
    sym = np.zeros(len(buf), dtype=np.int32)
    lens = np.zeros(len(off) - 1, dtype=np.int32)
    if len(off) > 1:
        blocks = max(1, min(len(off) - 1, 64 * numba.get_num_threads()))
        _segment_all(token_table(vocab), vocab.buf, vocab.off, buf, off, sym, lens, blocks)
    return sym, lens
