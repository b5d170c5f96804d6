"""Segmenting pieces as tiktoken does, with a bytes -> rank hash table in numba.

tiktoken encodes a piece by starting from its single bytes and repeatedly
joining the adjacent pair whose joined bytes have the lowest rank (leftmost
on ties) until no joined pair is a token. ``segment_reference`` is that rule
in plain Python, quadratic and obviously correct: the oracle of the tests.

    >>> ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"bc": 257, b"abc": 258}
    >>> segment_reference(b"abcd", ranks)
    [258, 100]

``segment_pieces`` does the same for a whole inventory of pieces in numba, in
parallel over pieces. A piece of up to ``SHORT_PIECE`` bytes finds its
lowest-ranked pair by scanning its parts, as tiktoken does; a longer one keeps
a min-heap, so that a piece of a million bytes costs n log n rather than n².
Its single bytes and byte pairs are read from an array (``short_ranks``).
Both cost less CPU than a heap for every piece and table look-ups. Because
parts are contiguous spans of the piece, "is the joined pair a token" is a
hash lookup of a span of the piece's own bytes: no pair table is needed, and
a vocabulary from anywhere (a warm start whose tokens were not built by our
merges) works the same way.
"""

from __future__ import annotations

from collections.abc import Mapping

import numba
import numpy as np
from numba import njit, prange

from toktoktok.kernel_args import int64s, readonly
from toktoktok.span_table import same_bytes, span_key
from toktoktok.vocab import Vocab

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
    """A hash of ``buf[start:end]``: ``span_table.span_key``'s, 8 bytes a step,
    where a byte at a time made segmenting slower."""
    return span_key(buf, start, end)[0]


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
        if tok_off[r + 1] - t0 == n and same_bytes(tok_buf, t0, buf, start, n):
            return np.int64(r)
        slot = (slot + np.uint64(1)) & mask


def table_capacity(n_tokens: int) -> int:
    """A power of two at least twice ``n_tokens`` (load factor <= 1/2)."""
    cap = 1024
    while cap < 2 * n_tokens:
        cap *= 2
    return cap


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
def short_ranks(table, tok_buf, tok_off) -> np.ndarray:
    """The ranks of every 1-byte and 2-byte span, looked up once: entry ``b`` is
    byte b's rank, entry ``256 + (b0 << 8 | b1)`` the rank of bytes b0 b1
    (``NO_TOKEN`` where the bytes are no token).

    A piece's first look-ups are all of single bytes and byte pairs: read from
    here, they cost an array read instead of a hash and a compare.
    """
    out = np.empty(256 + 65536, dtype=np.int64)
    span = np.empty(2, dtype=np.uint8)
    for b in range(256):
        span[0] = b
        out[b] = table_lookup(table, tok_buf, tok_off, span, np.int64(0), np.int64(1))  # as merge calls it: one compile
    for b in range(65536):
        span[0] = b >> 8
        span[1] = b & 0xFF
        out[256 + b] = table_lookup(table, tok_buf, tok_off, span, np.int64(0), np.int64(2))
    return out


@njit(cache=True, inline="always")
def join_parts(table, tok_buf, tok_off, buf, n, pos, pair_rank, part_rank, scratch, out) -> int:
    """tiktoken's rule from ``n`` parts: part i is ``buf[pos[i]:pos[i+1]]`` of rank
    ``part_rank[i]``, and ``pair_rank[i]`` is the rank of it joined with part i + 1
    (``NO_TOKEN``: no token). Joins the lowest-ranked pair (leftmost on ties)
    until none is a token; writes the parts' ranks to ``out``, returns their count.

    ``scratch`` holds at least ``5 * n + 2`` int64 entries: ``nxt`` (the next
    part, n at the end, -1 once absorbed), ``prv`` (the previous part, -1 at
    the front), and a heap of ``(rank << 32) | part`` (3n: n - 1 pairs at
    first, then at most two pushes a join).
    """
    nxt = scratch[0 : n + 1]
    prv = scratch[n + 1 : 2 * n + 2]
    heap = scratch[2 * n + 2 :]
    size = 0
    for i in range(n):
        nxt[i] = i + 1
        prv[i] = i - 1
    if n > 0:
        pair_rank[n - 1] = NO_TOKEN
    for i in range(n - 1):
        if pair_rank[i] != NO_TOKEN:
            size = _heap_push(heap, size, (pair_rank[i] << 32) | i)
    while size > 0:
        item = heap[0]
        size = _heap_pop(heap, size)
        i = item & 0xFFFFFFFF
        if nxt[i] < 0 or pair_rank[i] != (item >> 32):
            continue  # stale: i was absorbed, or its pair changed since
        part_rank[i] = pair_rank[i]  # the joined bytes' rank, found when the pair was looked up
        j = nxt[i]
        k = nxt[j]
        nxt[i] = k
        nxt[j] = -1
        if k < n:
            prv[k] = i
            r = table_lookup(table, tok_buf, tok_off, buf, pos[i], pos[nxt[k]])
            pair_rank[i] = r
            if r != NO_TOKEN:
                size = _heap_push(heap, size, (r << 32) | i)
        else:
            pair_rank[i] = NO_TOKEN
        p = prv[i]
        if p >= 0:
            r = table_lookup(table, tok_buf, tok_off, buf, pos[p], pos[k])
            pair_rank[p] = r
            if r != NO_TOKEN:
                size = _heap_push(heap, size, (r << 32) | p)
    count = 0
    i = 0
    while i < n:
        out[count] = part_rank[i]
        count += 1
        i = nxt[i]
    return count


@njit(cache=True)
def segment_one(table, tok_buf, tok_off, short, buf, start, end, out, scratch) -> int:
    """Segment ``buf[start:end]`` into ranks written to ``out``; returns their count.

    ``short`` is ``short_ranks`` of the same vocabulary. ``scratch`` is an
    int64 array of at least ``8 * (end - start) + 5`` entries: each byte's
    place, the rank of it joined with the next byte, its own rank, and
    ``join_parts``' scratch.
    """
    n = end - start
    pos = scratch[0 : n + 1]
    pair_rank = scratch[n + 1 : 2 * n + 2]
    part_rank = scratch[2 * n + 2 : 3 * n + 3]
    for i in range(n + 1):
        pos[i] = start + i
    for i in range(n):
        part_rank[i] = short[buf[start + i]]
    for i in range(n - 1):
        pair_rank[i] = short[256 + ((np.int64(buf[start + i]) << 8) | np.int64(buf[start + i + 1]))]
    return join_parts(table, tok_buf, tok_off, buf, n, pos, pair_rank, part_rank, scratch[3 * n + 3 :], out)


SHORT_PIECE = 32  # pieces up to this many bytes are segmented by scanning, not with a heap


@njit(cache=True)
def segment_short(table, tok_buf, tok_off, short, buf, start, end, out, scratch) -> int:
    """``segment_one`` for a short piece: the same rule, the lowest-ranked pair
    found by a scan of the parts (as tiktoken does) instead of a heap.

    ``scratch`` holds at least ``3 * (end - start) + 3`` int64 entries.
    """
    n = end - start
    pos = scratch[0 : n + 1]  # start of part k; pos[m] = n
    pair = scratch[n + 1 : 2 * n + 2]  # rank of parts k and k + 1 joined
    part = scratch[2 * n + 2 : 3 * n + 3]  # rank of part k
    for k in range(n):
        pos[k] = k
        part[k] = short[buf[start + k]]
    pos[n] = n
    for k in range(n - 1):
        pair[k] = short[256 + ((np.int64(buf[start + k]) << 8) | np.int64(buf[start + k + 1]))]
    m = n
    while m > 1:
        best = NO_TOKEN
        at = -1
        for k in range(m - 1):
            if pair[k] < best:
                best = pair[k]
                at = k
        if at < 0:
            break
        part[at] = best
        for k in range(at + 1, m - 1):
            pos[k] = pos[k + 1]
            pair[k] = pair[k + 1]
            part[k] = part[k + 1]
        pos[m - 1] = pos[m]
        m -= 1
        if at + 1 < m:
            pair[at] = table_lookup(table, tok_buf, tok_off, buf, start + pos[at], start + pos[at + 2])
        else:
            pair[at] = NO_TOKEN
        if at > 0:
            pair[at - 1] = table_lookup(table, tok_buf, tok_off, buf, start + pos[at - 1], start + pos[at + 1])
    for k in range(m):
        out[k] = part[k]
    return m


@njit(cache=True, parallel=True, nogil=True)
def _segment_all(table, tok_buf, tok_off, short, buf, off, sym, lens, n_blocks):
    """Segment every piece ``buf[off[w]:off[w+1]]`` into ``sym[off[w]:]``, ``lens[w]``."""
    n_words = len(off) - 1
    per_block = (n_words + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        lo = b * per_block
        hi = min(n_words, lo + per_block)
        longest = 0
        for w in range(lo, hi):
            longest = max(longest, off[w + 1] - off[w])
        scratch = np.empty(8 * longest + 5, dtype=np.int64)
        out = np.empty(longest + 1, dtype=np.int64)
        _segment_block(table, tok_buf, tok_off, short, buf, off, sym, lens, lo, hi, out, scratch)


@njit(cache=True, _nrt=False)
def _segment_block(table, tok_buf, tok_off, short, buf, off, sym, lens, lo, hi, out, scratch):
    """``_segment_all``'s work on pieces ``lo..hi-1``, compiled without reference
    counting: with it, each call of a piece's segmenter counted its 7 arrays in and out."""
    for w in range(lo, hi):
        if off[w + 1] - off[w] <= SHORT_PIECE:
            c = segment_short(table, tok_buf, tok_off, short, buf, off[w], off[w + 1], out, scratch)
        else:
            c = segment_one(table, tok_buf, tok_off, short, buf, off[w], off[w + 1], out, scratch)
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
    more parts than bytes, so the words share the pieces' offsets). Pieces of
    several words (a superword phase's) are segmented a word at a time where
    the vocabulary allows it (``segment_words.words_of``).
    """
    from toktoktok.segment_words import assemble, words_of  # it builds on this module

    buf, off = readonly(buf), int64s(off)  # one signature whatever the caller's arrays (kernel_args)
    words = words_of(vocab, buf, off)
    if words is not None:
        return assemble(words, off, len(buf))
    return segment_plain(vocab, buf, off)


def segment_plain(vocab: Vocab, buf: np.ndarray, off: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``segment_pieces`` from every piece's bytes, for a caller that knows the pieces
    do not go a word at a time (``segment_words.words_of`` gave None)."""
    buf, off = readonly(buf), int64s(off)
    sym = np.zeros(len(buf), dtype=np.int32)
    lens = np.zeros(len(off) - 1, dtype=np.int32)
    if len(off) > 1:
        segment_into(vocab, buf, off, sym, lens)
    return sym, lens


def segment_into(vocab: Vocab, buf: np.ndarray, off: np.ndarray, sym: np.ndarray, lens: np.ndarray) -> None:
    """``segment_pieces``' plain path, into the caller's ``sym`` and ``lens``: every piece from its bytes."""
    blocks = max(1, min(len(off) - 1, 64 * numba.get_num_threads()))
    table = token_table(vocab)
    short = short_ranks(table, vocab.buf, vocab.off)
    _segment_all(table, vocab.buf, vocab.off, short, buf, off, sym, lens, blocks)


def load_segment_kernels() -> None:
    """Load (or compile) the segmenter's kernels on a two-piece inventory (see
    ``documents.load_document_kernels`` for why a caller holds Ctrl-C around it).

        >>> load_segment_kernels()
    """
    from toktoktok.segment_words import segment_after  # it builds on this module

    vocab = Vocab.initial(hardcoded=False)
    segment_pieces(vocab, np.frombuffer(b"abc", dtype=np.uint8), np.array([0, 1, 3]))
    segment_pieces(vocab, np.frombuffer(b"a b c", dtype=np.uint8), np.array([0, 5]))  # a word at a time
    segment_after(vocab, vocab.extended([b"a b"]), np.frombuffer(b"a b c", dtype=np.uint8), np.array([0, 5]))
