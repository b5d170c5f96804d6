"""A running sum of count tables, kept in one numba hash table that grows.

Why. Ingest counts text in batches and must sum the batches' tables into one
inventory. Summing a list of tables at once (``counts.sum_tables``) needs every
table held until the sum, a copy of all of them side by side, and a hash table
sized for the case where every row is new: on 1.2 GB of C source its peak was
five times the tables it summed (about 500 MB over a 30 MB result). A running
sum holds only the distinct pieces seen so far: its hash table (8 bytes a slot,
at most half full), 32 bytes of bookkeeping a piece, and the pieces' bytes in
an arena of its own, each part doubling when it fills. A table added is
copied in row by row and may be dropped at once.

Rows keep the order in which pieces were first added, so adding tables one by
one gives exactly ``counts.sum_tables`` of the same tables in the same order
(the tests compare them), and the result does not depend on when the sums
were made.

    >>> from toktoktok.counts import from_lists
    >>> s = RunningSum()
    >>> s.add(from_lists([b"x", b" y"], [1, 2]))
    >>> s.add(from_lists([b" y", b" z"], [3, 1]))
    >>> s.table().to_pylist()
    [{'piece': b'x', 'count': 1}, {'piece': b' y', 'count': 5}, {'piece': b' z', 'count': 1}]
    >>> s.rows, s.table_bytes
    (3, 53)
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numba import njit

from toktoktok.scanner import W_COUNT, W_LEN, W_START, W_WORD, span_key

_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)  # a free slot (as in the scanner's tables)
_LOW32 = np.uint64(0xFFFFFFFF)  # a slot holds (hash tag << 32) | piece id
_MAX = np.int64(0x7FFFFFFFFFFFFFFF)


@njit(cache=True, nogil=True)
def _add_rows(table, meta, arena, n, used, src, off, weights, first_row):
    """Add rows ``first_row..`` of (``src``, ``off``, ``weights``); stop when a full part would overflow.

    Returns ``(next row, n, used, status)``: status 0 all added, 1 the hash table
    or the bookkeeping needs to grow, 2 the arena, 3 a count would pass 2**63 - 1
    (row ``next row`` not added). A new piece's bytes are copied to ``arena[used:]``.
    """
    mask = np.uint64(len(table) - 1)
    for p in range(first_row, len(weights)):
        i, e = off[p], off[p + 1]
        size = e - i
        if 2 * (n + 1) > len(table) or n + 1 > len(meta):
            return p, n, used, 1
        h, first = span_key(src, i, e)
        tag = h >> np.uint64(32)
        slot = h & mask
        entry = table[slot]
        while entry != _EMPTY:
            q = entry & _LOW32
            if (entry >> np.uint64(32)) == tag and meta[q, W_WORD] == np.int64(first) and meta[q, W_LEN] == size:
                a = meta[q, W_START]
                same = True
                for k in range(8, size):
                    if arena[a + k] != src[i + k]:
                        same = False
                        break
                if same:
                    break
            slot = (slot + np.uint64(1)) & mask
            entry = table[slot]
        w = weights[p]
        if entry != _EMPTY:
            q = entry & _LOW32
            if meta[q, W_COUNT] > _MAX - w:
                return p, n, used, 3
            meta[q, W_COUNT] += w
            continue
        if used + size > len(arena):
            return p, n, used, 2
        arena[used:used + size] = src[i:e]
        table[slot] = (tag << np.uint64(32)) | np.uint64(n)
        meta[n, W_WORD] = np.int64(first)
        meta[n, W_LEN] = size
        meta[n, W_START] = used
        meta[n, W_COUNT] = w
        n += 1
        used += size
    return len(weights), n, used, 0


@njit(cache=True, nogil=True)
def _rehash(table, meta, n, arena):
    """Place pieces 0..n-1 into the empty ``table`` by their hashes."""
    mask = np.uint64(len(table) - 1)
    for p in range(n):
        a = meta[p, W_START]
        h, _ = span_key(arena, a, a + meta[p, W_LEN])
        s = h & mask
        while table[s] != _EMPTY:
            s = (s + np.uint64(1)) & mask
        table[s] = ((h >> np.uint64(32)) << np.uint64(32)) | np.uint64(p)


@njit(cache=True, nogil=True)
def _offsets(meta, n):
    """Offsets of the first ``n`` pieces in the arena, which holds them in order."""
    off = np.empty(n + 1, dtype=np.int64)
    off[0] = 0
    for p in range(n):
        off[p + 1] = off[p] + meta[p, W_LEN]
    return off


class RunningSum:
    """Count tables added one by one; ``table()`` is their sum (first-added order).

    ``rows`` and ``table_bytes`` (``counts.table_bytes`` of the sum: 16 bytes a
    row and the pieces' bytes) are known at any time; ``nbytes`` is the memory
    it holds.
    """

    def __init__(self, rows: int = 1 << 12, arena_bytes: int = 1 << 16) -> None:
        slots = 1 << max(4, (2 * rows - 1).bit_length())
        self._table = np.full(slots, _EMPTY, dtype=np.uint64)
        self._meta = np.empty((slots // 2, 4), dtype=np.int64)
        self._arena = np.empty(max(arena_bytes, 16), dtype=np.uint8)
        self.rows = 0
        self._used = 0

    @property
    def table_bytes(self) -> int:
        return 16 * self.rows + self._used

    @property
    def nbytes(self) -> int:
        return self._table.nbytes + self._meta.nbytes + self._arena.nbytes

    def add(self, table: pa.Table) -> None:
        """Add a count table's rows (``piece``, ``count``)."""
        from toktoktok.counts import to_arrays

        if not len(table):
            return
        buf, off, counts = to_arrays(table)
        self.add_arrays(buf, off, counts.view(np.int64))

    def add_arrays(self, buf: np.ndarray, off: np.ndarray, counts: np.ndarray) -> None:
        """Add rows: piece p is ``buf[off[p]:off[p+1]]`` (offsets from 0), counts int64."""
        row = 0
        while True:
            row, self.rows, self._used, status = _add_rows(
                self._table, self._meta, self._arena, self.rows, self._used, buf, off, counts, row)
            if status == 0:
                return
            if status == 1:
                self._grow_table()
            elif status == 2:
                need = self._used + int(off[row + 1] - off[row])
                arena = np.empty(max(2 * len(self._arena), need), dtype=np.uint8)
                arena[: self._used] = self._arena[: self._used]
                self._arena = arena
            else:
                raise OverflowError("a piece's count passes 2**63, more than 64-bit counts hold: "
                                    "lower the sources' weights")

    def _grow_table(self) -> None:
        slots = 2 * len(self._table)
        meta = np.empty((slots // 2, 4), dtype=np.int64)
        meta[: self.rows] = self._meta[: self.rows]
        self._meta = meta
        self._table = np.full(slots, _EMPTY, dtype=np.uint64)
        _rehash(self._table, self._meta, self.rows, self._arena)

    def table(self) -> pa.Table:
        """The sum as a count table (a copy: adding more later does not change it)."""
        from toktoktok.counts import from_arrays

        off = _offsets(self._meta, self.rows)
        return from_arrays(self._arena[: self._used].copy(), off,
                           self._meta[: self.rows, W_COUNT].copy().view(np.uint64))
