"""A running sum of count tables, kept in one numba hash table that grows.

Ingest sums the tables of its batches into one inventory. Summing a list of
tables at once (``counts.sum_tables``) holds every table, a copy of all of
them and a hash table sized for every row being new: on 1.2 GB of C source,
five times the tables summed. A running sum holds the distinct pieces seen
so far: its hash table (``span_table``'s entries, at most half full; a slot
comes from the entry's tag, the hash's high half, so growing reads no piece),
32 bytes a piece of bookkeeping and the pieces' bytes in an arena, each
doubling when it fills; a table added may be dropped at once.

Rows keep the order in which pieces were first added, so adding tables one by
one gives exactly ``counts.sum_tables`` of the same tables in the same order
(the tests compare them). The exception: the pieces of one or two bytes that
``count`` finds are counted in a plain array indexed by their bytes, and join
the rows, in byte order, when the sum is next read.

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

from toktoktok.errors import CountOverflow
from toktoktok.kernel_args import int64s, readonly
from toktoktok.prefetch import prefetch
from toktoktok.scanner import NO_NRT, piece_end
from toktoktok.span_table import W_COUNT, W_LEN, W_START, W_WORD, span_key

_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)  # a free slot (as in span_table's tables)
_LOW32 = np.uint64(0xFFFFFFFF)  # a slot holds (hash tag << 32) | piece id
_MAX = np.int64(0x7FFFFFFFFFFFFFFF)


@njit(cache=True, nogil=True, inline="always")
def _slot_of(table, meta, arena, src, i, e):
    """``(slot, tag, first word)`` of piece ``src[i:e]``: its own slot, or the free
    one where it goes (``table[slot]`` is then ``_EMPTY``)."""
    h, first = span_key(src, i, e)
    return _probe(table, meta, arena, src, i, e, h, first)


@njit(cache=True, nogil=True, inline="always")
def _probe(table, meta, arena, src, i, e, h, first):
    """``_slot_of`` for a piece whose ``span_key`` is ``(h, first)``."""
    size = e - i
    tag = h >> np.uint64(32)
    mask = np.uint64(len(table) - 1)
    slot = tag & mask
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
    return slot, tag, first


@njit(cache=True, nogil=True, inline="always")
def _insert(table, meta, arena, n, used, slot, tag, first, src, i, e, weight):
    """Piece ``src[i:e]`` as id ``n`` in free ``slot``, its bytes at ``arena[used:]``."""
    size = e - i
    for k in range(size):
        arena[used + k] = src[i + k]
    table[slot] = (tag << np.uint64(32)) | np.uint64(n)
    meta[n, W_WORD] = np.int64(first)
    meta[n, W_LEN] = size
    meta[n, W_START] = used
    meta[n, W_COUNT] = weight


_AHEAD_SLOT = 16  # rows ahead whose table slot _add_rows asks the cache for
_AHEAD_ROW = 8  # rows ahead whose row (the piece the slot names) it asks for
_RING = 32  # the hashes _add_rows keeps of the rows ahead (a power of 2 above _AHEAD_SLOT)


@njit(cache=True, nogil=True)
def _add_rows(table, meta, arena, n, used, src, off, weights, first_row):
    """Add rows ``first_row..`` of (``src``, ``off``, ``weights``); stop when a full part would overflow.

    Returns ``(next row, n, used, status)``: status 0 all added, 1 the hash table
    or the bookkeeping needs to grow, 2 the arena, 3 a count would pass 2**63 - 1
    (row ``next row`` not added). A new piece's bytes are copied to ``arena[used:]``.
    """
    # The rows' probes miss the caches twice each (the slot, then the row it
    # names), so the loop runs two steps ahead: it hashes the row
    # ``_AHEAD_SLOT`` rows on and asks for its slot, and reads the slot of the
    # row ``_AHEAD_ROW`` rows on, by then at hand, and asks for that row
    # (asking one step ahead, for the slot alone, gained much less).
    flat = meta.reshape(-1)
    mask = np.uint64(len(table) - 1)
    keys = np.empty(_RING, dtype=np.uint64)  # a ring: hash and first word of the rows ahead
    words = np.empty(_RING, dtype=np.uint64)
    ring = _RING - 1
    rows = len(weights)
    for p in range(first_row, min(rows, first_row + _AHEAD_SLOT)):
        keys[p & ring], words[p & ring] = span_key(src, off[p], off[p + 1])
        prefetch(table, (keys[p & ring] >> np.uint64(32)) & mask)
    for p in range(first_row, rows):
        ahead = p + _AHEAD_SLOT
        if ahead < rows:
            keys[ahead & ring], words[ahead & ring] = span_key(src, off[ahead], off[ahead + 1])
            prefetch(table, (keys[ahead & ring] >> np.uint64(32)) & mask)
        if p + _AHEAD_ROW < rows:
            entry = table[(keys[(p + _AHEAD_ROW) & ring] >> np.uint64(32)) & mask]
            if entry != _EMPTY:
                prefetch(flat, np.int64(entry & _LOW32) * meta.shape[1])
        i, e = off[p], off[p + 1]
        if 2 * (n + 1) > len(table) or n + 1 > len(meta):
            return p, n, used, 1
        slot, tag, first = _probe(table, meta, arena, src, i, e, keys[p & ring], words[p & ring])
        w = weights[p]
        if table[slot] != _EMPTY:
            q = table[slot] & _LOW32
            if meta[q, W_COUNT] > _MAX - w:
                return p, n, used, 3
            meta[q, W_COUNT] += w
            continue
        if used + (e - i) > len(arena):
            return p, n, used, 2
        _insert(table, meta, arena, n, used, slot, tag, first, src, i, e, w)
        n += 1
        used += e - i
    return len(weights), n, used, 0


@njit(cache=True, nogil=True, **NO_NRT)
def _count_text(table, meta, arena, n, used, buf, seg_off, s0, i0, weight, cls, contr, which, short):
    """Scan segments ``s0..`` of ``buf`` (from byte ``i0`` of segment ``s0``) and add
    ``weight`` to each piece as it is found: a piece of one or two bytes in
    ``short`` (``_short_key``), any other in the hash table.

    Stops before a piece that might not fit and returns ``(segment, byte, n,
    used, done)`` to resume from there after growing.
    """
    # Finding the pieces and counting them in one loop, compiled without
    # reference counting (it allocates nothing), is faster than span_table's
    # way (the ends of 4,096 pieces at a time, then a loop adding them). A loop
    # of its own per pattern gained a little more, but took far longer to
    # compile into an empty cache.
    s = s0
    i = i0
    while s < len(seg_off) - 1:
        end = seg_off[s + 1]
        if i < seg_off[s]:
            i = seg_off[s]
        i, n, used = _count_run(table, meta, arena, n, used, buf, i, end, weight, cls, contr, which, short)
        if i < end:
            return s, i, n, used, False
        s += 1
    return s, i, n, used, True


@njit(cache=True, nogil=True, inline="always")
def _count_run(table, meta, arena, n, used, buf, i, end, weight, cls, contr, which, short):
    """``_count_text``'s loop over one segment ``buf[i:end]``; returns ``(byte
    reached, n, used)``: ``end``, or the start of a piece that might not fit."""
    while i < end:
        if 2 * (n + 1) > len(table) or n + 1 > len(meta):
            break
        e = piece_end(buf, i, end, cls, contr, which)
        size = e - i
        if size <= 2:
            short[_short_key(buf, i, e)] += weight
            i = e
            continue
        slot, tag, word = _slot_of(table, meta, arena, buf, i, e)
        if table[slot] != _EMPTY:
            meta[table[slot] & _LOW32, W_COUNT] += weight
        else:
            if used + size > len(arena):
                break  # its bytes do not fit: grow, then find it again
            _insert(table, meta, arena, n, used, slot, tag, word, buf, i, e, weight)
            n += 1
            used += size
        i = e
    return i, n, used


@njit(cache=True, nogil=True, inline="always")
def _short_key(src, i, e):
    """Index in a ``RunningSum``'s short-piece counts of the 1 or 2 bytes ``src[i:e]``:
    b"a" -> 97, b"ab" -> 256 + 97 + 98 * 256 (``_short_pieces`` inverts it)."""
    if e - i == 1:
        return np.int64(src[i])
    return 256 + (np.int64(src[i]) | (np.int64(src[i + 1]) << 8))


def _short_pieces(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bytes, offsets) of the pieces with these short-piece indices (ascending).

        >>> buf, off = _short_pieces(np.array([97, 256 + 97 + 98 * 256]))
        >>> [buf[off[p]:off[p + 1]].tobytes() for p in range(2)]
        [b'a', b'ab']
    """
    sizes = np.where(keys < 256, 1, 2)
    off = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum(sizes, out=off[1:])
    buf = np.empty(int(off[-1]), dtype=np.uint8)
    pair = keys - 256
    buf[off[:-1]] = np.where(keys < 256, keys, pair & 0xFF)
    two = np.flatnonzero(sizes == 2)
    buf[off[two] + 1] = pair[two] >> 8
    return buf, off


@njit(cache=True, nogil=True)
def _rehash(table, old):
    """Place the entries of ``old`` into the larger empty ``table``: a slot comes from
    the entry's tag (its hash's high half), so no piece is read or hashed again."""
    mask = np.uint64(len(table) - 1)
    for entry in old:
        if entry == _EMPTY:
            continue
        s = (entry >> np.uint64(32)) & mask
        while table[s] != _EMPTY:
            s = (s + np.uint64(1)) & mask
        table[s] = entry


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
        self._rows = 0
        self._used = 0
        # counts of the pieces of 1 and 2 bytes ``count`` found (``_short_key``), kept
        # apart until the sum is read: no hash, no probe for nearly half the pieces of
        # C source
        self._short: np.ndarray | None = None

    @property
    def rows(self) -> int:
        self._settle()
        return self._rows

    @property
    def table_bytes(self) -> int:
        self._settle()
        return 16 * self._rows + self._used

    @property
    def hashed(self) -> tuple[int, int]:
        """(rows, piece bytes) in the hash table now: ``rows`` and ``table_bytes``
        without first adding the pieces of 1 or 2 bytes ``count`` set apart
        (the size a table of the next text of this kind starts at)."""
        return self._rows, self._used

    @property
    def nbytes(self) -> int:
        short = self._short.nbytes if self._short is not None else 0
        return self._table.nbytes + self._meta.nbytes + self._arena.nbytes + short

    def _settle(self) -> None:
        """Add the short pieces ``count`` set apart to the rows (in byte order)."""
        if self._short is None:
            return
        keys = np.flatnonzero(self._short)
        if len(keys):
            counts = self._short[keys]
            self._short[keys] = 0
            self.add_arrays(*_short_pieces(keys), counts)

    def add(self, table: pa.Table) -> None:
        """Add a count table's rows (``piece``, ``count``)."""
        from toktoktok.counts import to_arrays

        if not len(table):
            return
        buf, off, counts = to_arrays(table)
        self.add_arrays(buf, off, counts.view(np.int64))

    def add_arrays(self, buf: np.ndarray, off: np.ndarray, counts: np.ndarray) -> None:
        """Add rows: piece p is ``buf[off[p]:off[p+1]]`` (offsets from 0), counts int64."""
        buf, off, counts = readonly(buf), int64s(off), readonly(int64s(counts))
        row = 0
        while True:
            row, self._rows, self._used, status = _add_rows(
                self._table, self._meta, self._arena, self._rows, self._used, buf, off, counts, row)
            if status == 0:
                return
            if status == 1:
                self._grow_table()
            elif status == 2:
                self._grow_arena(self._used + int(off[row + 1] - off[row]))
            else:
                raise CountOverflow("a piece's count passes 2**63, more than 64-bit counts hold: "
                                    "lower the sources' weights")

    def count(self, buf: np.ndarray, seg_off: np.ndarray, which: int, weight: int = 1) -> None:
        """Scan each segment ``buf[seg_off[s]:seg_off[s+1]]`` with the scanner's pattern
        ``which`` and add ``weight`` to every piece: the pieces and counts of
        ``span_table.count_pieces`` of the segments, added here, without a table per
        call (rows of 1 or 2 bytes come in byte order). Releases the GIL.

            >>> import numpy as np
            >>> s = RunningSum()
            >>> s.count(np.frombuffer(b"a ab\\na ab", np.uint8), np.array([0, 5, 9]), 0)
            >>> s.table().to_pylist()
            [{'piece': b' ab', 'count': 2}, {'piece': b'\\n', 'count': 1}, {'piece': b'a', 'count': 2}]
        """
        from toktoktok.unicode_classes import unicode_tables

        cls = unicode_tables()
        if self._short is None:
            self._short = np.zeros(256 + 65536, dtype=np.int64)
        buf, seg_off = readonly(buf), int64s(seg_off)
        s, i = 0, 0
        while True:
            s, i, self._rows, self._used, done = _count_text(
                self._table, self._meta, self._arena, self._rows, self._used, buf, seg_off, s, i, np.int64(weight),
                cls[0], cls[1], which, self._short)
            if done:
                return
            if 2 * (self._rows + 1) > len(self._table) or self._rows + 1 > len(self._meta):
                self._grow_table()
            else:
                self._grow_arena(self._used + int(seg_off[s + 1] - i))  # room for the rest of the segment

    def _grow_arena(self, need: int, *, double: bool = True) -> None:
        arena = np.empty(max(2 * len(self._arena), need) if double else need, dtype=np.uint8)
        arena[: self._used] = self._arena[: self._used]
        self._arena = arena

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The sum as flat arrays (pieces' bytes, offsets, int64 counts), the bytes a view."""
        self._settle()
        off = _offsets(self._meta, self._rows)
        return self._arena[: self._used], off, self._meta[: self._rows, W_COUNT]

    def add_sum(self, other: RunningSum) -> None:
        """Add another running sum's rows (in its order)."""
        if other.rows:
            buf, off, counts = other.arrays()
            if self._used + len(buf) > len(self._arena):  # at most the bytes added: grown once, not doubled
                self._grow_arena(self._used + len(buf), double=False)
            self.add_arrays(buf, off, counts)

    def longest(self) -> int:
        """Bytes of the longest piece (0 for none), without adding the short pieces
        set apart to the rows (that is left to whoever reads the sum).

            >>> s = RunningSum()
            >>> s.count(np.frombuffer(b"a bc", np.uint8), np.array([0, 4]), 0)
            >>> s.longest(), s.hashed, s.rows
            (3, (1, 3), 2)
            >>> t = RunningSum()
            >>> t.count(np.frombuffer(b"ab", np.uint8), np.array([0, 2]), 0)
            >>> t.longest(), t.hashed
            (2, (0, 0))
        """
        hashed = int(self._meta[: self._rows, W_LEN].max()) if self._rows else 0
        if self._short is None or hashed >= 2:
            return hashed
        keys = np.flatnonzero(self._short)  # 0..255: one byte, from 256: two
        short = 0 if not len(keys) else 2 if keys[-1] >= 256 else 1
        return max(hashed, short)

    def _grow_table(self) -> None:
        slots = 2 * len(self._table)
        meta = np.empty((slots // 2, 4), dtype=np.int64)
        meta[: self._rows] = self._meta[: self._rows]
        self._meta = meta
        old, self._table = self._table, np.full(slots, _EMPTY, dtype=np.uint64)
        _rehash(self._table, old)

    def table(self) -> pa.Table:
        """The sum as a count table (a copy: adding more later does not change it)."""
        from toktoktok.counts import from_arrays

        buf, off, counts = self.arrays()
        return from_arrays(buf.copy(), off, counts.copy().view(np.uint64))
