"""Pieces in byte order: the order of every chunk file and of the trainer's inventory.

Order is that of ``bytes`` (unsigned bytes compared one by one, a prefix
before what extends it), as Arrow's ``sort_indices`` on a binary column
gives it and as ``pieces_sorted`` checks it. ``order`` sorts in two steps:

1. a stable radix sort (16 bits a pass) of each piece's first 8 bytes read
   as one big-endian integer, padded with zeros: after it, pieces are in
   order except where two share their first 8 bytes (padding included:
   b"ab" and b"ab\\x00" share theirs);
2. each run of pieces with equal keys sorted by the next 8 bytes the same
   way, run within run, until a run is short (or its pieces end): that one
   by comparing their bytes (insertion for short runs, merging for longer
   ones). Lines of prose (a superword phase's pieces) share long prefixes,
   runs of thousands of pieces: comparing them byte by byte from the start
   cost several times more. The runs are sorted in parallel.

The sort runs at the end of ingest, while the other core waits, hence a
sort of its own rather than Arrow's ``sort_indices`` (see ``order``).

    >>> buf = np.frombuffer(b"bab\\x00ab", np.uint8)
    >>> order(buf, np.array([0, 1, 2, 4, 6])).tolist()  # b"b", b"a", b"b\\x00", b"ab"
    [1, 3, 0, 2]
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numba import njit, prange

from toktoktok.kernel_args import int64s, readonly

_RUN = 16  # runs of equal keys up to this long are sorted by insertion
_DEEP = 64  # longer runs are ordered by their next 8 bytes before any comparison


@njit(cache=True, nogil=True, parallel=True)
def _prefix_keys(buf, off):
    """Each piece's first 8 bytes as a big-endian integer, zeros after its end."""
    n = len(off) - 1
    keys = np.empty(n, dtype=np.uint64)
    for p in prange(n):
        i = off[p]
        m = min(off[p + 1] - i, 8)
        k = np.uint64(0)
        for j in range(8):
            k = k << np.uint64(8)
            if j < m:
                k |= np.uint64(buf[i + j])
        keys[p] = k
    return keys


@njit(cache=True, nogil=True)
def _radix_order(keys):
    """A stable order of ``keys``, and the keys in that order: 16 bits a pass, least significant first, each
    pass reading the keys in the last pass's order (sequential reads: reading
    ``keys[order[t]]`` instead took twice as long); a pass where every key has
    the same digit is skipped."""
    n = len(keys)
    order = np.arange(n, dtype=np.int64)
    spare = np.empty(n, dtype=np.int64)
    cur = keys.copy()
    nxt = np.empty(n, dtype=np.uint64)
    start = np.empty(65537, dtype=np.int64)
    for pass_ in range(4):
        shift = np.uint64(16 * pass_)
        start[:] = 0
        for t in range(n):
            start[((cur[t] >> shift) & np.uint64(0xFFFF)) + np.uint64(1)] += 1
        if start.max() == n:
            continue
        for d in range(65536):
            start[d + 1] += start[d]
        for t in range(n):
            k = cur[t]
            d = (k >> shift) & np.uint64(0xFFFF)
            at = start[d]
            nxt[at] = k
            spare[at] = order[t]
            start[d] = at + 1
        order, spare = spare, order
        cur, nxt = nxt, cur
    return order, cur


@njit(cache=True, nogil=True, inline="always")
def _less(buf, off, a, b):
    """Whether piece ``a`` comes before piece ``b`` in byte order."""
    i, j = off[a], off[b]
    n, m = off[a + 1] - i, off[b + 1] - j
    k = 0
    while k < n and k < m:
        if buf[i + k] != buf[j + k]:
            return buf[i + k] < buf[j + k]
        k += 1
    return n < m


@njit(cache=True, nogil=True)
def _sort_run(buf, off, order, lo, hi, spare):
    """Sort ``order[lo:hi]`` by the pieces' bytes: insertion up to ``_RUN`` pieces,
    else merging runs of ``_RUN`` sorted by insertion (``spare``: room for them)."""
    for a in range(lo, hi, _RUN):
        b = min(a + _RUN, hi)
        for t in range(a + 1, b):
            p = order[t]
            u = t
            while u > a and _less(buf, off, p, order[u - 1]):
                order[u] = order[u - 1]
                u -= 1
            order[u] = p
    width = _RUN
    while width < hi - lo:
        for a in range(lo, hi, 2 * width):
            mid = min(a + width, hi)
            b = min(a + 2 * width, hi)
            x, y, t = a, mid, a
            while x < mid and y < b:
                if _less(buf, off, order[y], order[x]):
                    spare[t] = order[y]
                    y += 1
                else:
                    spare[t] = order[x]
                    x += 1
                t += 1
            spare[t : t + mid - x] = order[x:mid]  # what is left of one side (the other is spent)
            t += mid - x
            spare[t : t + b - y] = order[y:b]
            order[a:b] = spare[a:b]
        width *= 2


@njit(cache=True, nogil=True, inline="always")
def _key_at(buf, off, p, depth):
    """Bytes ``depth`` to ``depth + 8`` of piece ``p`` as a big-endian integer, zeros past its end."""
    i = off[p] + depth
    m = min(max(off[p + 1] - i, 0), 8)
    k = np.uint64(0)
    for j in range(8):
        k = k << np.uint64(8)
        if j < m:
            k |= np.uint64(buf[i + j])
    return k


@njit(cache=True, nogil=True)
def _sort_equal_keys(buf, off, order, lo, hi, spare, keys):
    """Sort ``order[lo:hi]``, pieces whose first 8 bytes are equal, by their bytes:
    a run longer than ``_DEEP`` whose pieces go on is ordered by its next 8
    bytes and each run of equal ones again so; the others by comparison.
    ``spare`` and ``keys`` are scratch, used at ``lo:hi`` only."""
    # (lo, hi, depth) of the runs still to sort: disjoint, two pieces or more each
    stack = np.empty(((hi - lo) // 2 + 1, 3), dtype=np.int64)
    stack[0, 0], stack[0, 1], stack[0, 2] = lo, hi, 8
    top = 1
    while top > 0:
        top -= 1
        a, b, depth = stack[top, 0], stack[top, 1], stack[top, 2]
        longest = 0
        for t in range(a, b):
            longest = max(longest, off[order[t] + 1] - off[order[t]])
        if b - a <= _DEEP or longest <= depth:
            _sort_run(buf, off, order, a, b, spare)
            continue
        for t in range(a, b):
            keys[t] = _key_at(buf, off, order[t], depth)
        by_key = np.argsort(keys[a:b], kind="mergesort")
        in_order = keys[a:b][by_key]
        for t in range(b - a):
            spare[a + t] = order[a + by_key[t]]
        order[a:b] = spare[a:b]
        keys[a:b] = in_order
        runs = _equal_runs(keys[a:b])
        for r in range(len(runs)):
            stack[top, 0], stack[top, 1], stack[top, 2] = a + runs[r, 0], a + runs[r, 1], depth + 8
            top += 1


@njit(cache=True, nogil=True, parallel=True)
def _sort_runs(buf, off, order, runs, spare, keys):
    """Each run ``runs[r, 0] : runs[r, 1]`` of ``order`` sorted by the pieces' bytes, runs in parallel."""
    for r in prange(len(runs)):
        _sort_equal_keys(buf, off, order, runs[r, 0], runs[r, 1], spare, keys)


@njit(cache=True, nogil=True)
def _equal_runs(keys):
    """The runs of equal keys longer than one: (start, end) rows."""
    n = len(keys)
    runs = np.empty((n // 2 + 1, 2), dtype=np.int64)
    r = 0
    t = 0
    while t < n:
        u = t + 1
        while u < n and keys[u] == keys[t]:
            u += 1
        if u - t > 1:
            runs[r, 0], runs[r, 1] = t, u
            r += 1
        t = u
    return runs[:r]


@njit(cache=True, nogil=True)
def _order(buf, off):
    order, keys = _radix_order(_prefix_keys(buf, off))
    spare = np.empty(len(order), dtype=np.int64)
    scratch = np.empty(len(order), dtype=np.uint64)
    _sort_runs(buf, off, order, _equal_runs(keys), spare, scratch)
    return order


def order(buf: np.ndarray, off: np.ndarray) -> np.ndarray:
    """The permutation that puts pieces ``buf[off[p]:off[p+1]]`` in byte order (int64).

    Faster than Arrow's ``sort_indices`` on a count table's pieces, and
    ``sorted_table``, which gathers the bytes too, faster than Arrow's sort
    and ``take``.
    """
    return _order(readonly(buf), int64s(off))


@njit(cache=True, nogil=True, parallel=True)
def _gather(buf, off, order):
    """The pieces' bytes and offsets in the order ``order``."""
    n = len(order)
    out_off = np.empty(n + 1, dtype=np.int64)
    out_off[0] = 0
    for t in range(n):
        p = order[t]
        out_off[t + 1] = out_off[t] + off[p + 1] - off[p]
    out = np.empty(out_off[n], dtype=np.uint8)
    for t in prange(n):  # a slice copy is a memcpy, far faster than a loop over the bytes
        p = order[t]
        out[out_off[t] : out_off[t + 1]] = buf[off[p] : off[p + 1]]
    return out, out_off


def sorted_arrays(buf: np.ndarray, off: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pieces ``buf[off[p]:off[p+1]]`` and their counts in byte order of the pieces,
    as new arrays (bytes, int64 offsets from 0, counts of the same dtype).

        >>> buf, off, n = sorted_arrays(np.frombuffer(b"ba", np.uint8), np.array([0, 1, 2]), np.array([3, 4]))
        >>> buf.tobytes(), off.tolist(), n.tolist()
        (b'ab', [0, 1, 2], [4, 3])
    """
    buf, off = readonly(buf), int64s(off)
    perm = _order(buf, off)
    out, out_off = _gather(buf, off, perm)
    return out, out_off, np.asarray(counts)[perm]


def sorted_table(buf: np.ndarray, off: np.ndarray, counts: np.ndarray) -> pa.Table:
    """A count table (``counts.SCHEMA``) of these pieces and counts, rows in byte order
    of the pieces (the arrays are not changed; the table holds copies).

        >>> sorted_table(np.frombuffer(b"ba", np.uint8), np.array([0, 1, 2]), np.array([3, 4])).to_pylist()
        [{'piece': b'a', 'count': 4}, {'piece': b'b', 'count': 3}]
    """
    from toktoktok.counts import from_arrays

    out, out_off, ordered = sorted_arrays(buf, off, counts)
    return from_arrays(out, out_off, ordered.astype(np.uint64, copy=False))


@njit(cache=True)
def _in_order(buf, off):
    for p in range(len(off) - 2):
        if _less(buf, off, p + 1, p):
            return False
    return True


def pieces_sorted(buf: np.ndarray, off: np.ndarray) -> bool:
    """Whether pieces ``buf[off[p]:off[p+1]]`` are in ascending byte order (one pass, no sort).

        >>> ab, ba = np.frombuffer(b"aab", np.uint8), np.frombuffer(b"ba", np.uint8)
        >>> pieces_sorted(ab, np.array([0, 1, 3])), pieces_sorted(ba, np.array([0, 1, 2]))
        (True, False)
    """
    return bool(_in_order(readonly(buf), int64s(off)))
