"""A numba hash table over byte spans: counting distinct pieces, or summing rows.

Keys are spans of the input itself (no Python object per piece), each with a
count; rows come out in order of first occurrence, so the result depends on
the order of the input alone. It serves three ways: ``count_pieces`` counts
the pieces ``toktoktok.scanner`` finds in text; ``merge_kernel`` sums count
rows (``counts.sum_tables``, ``merge_counts``); ``summing.RunningSum`` keeps
a table of the same layout across batches, with this module's ``span_key``
and ``meta`` columns (``W_WORD`` ...).

API: ``count_pieces`` (the distinct pieces of segments of text, with
counts), ``count_pieces_threads`` (batches of segments on threads, merged),
``merge_counts`` (several results as one); ``count_kernel`` and
``merge_kernel`` for numba callers. Results are flat arrays ``(piece_buf,
piece_off, counts)``: piece ``p`` is ``piece_buf[piece_off[p]:piece_off[p+1]]``.

    >>> buf = np.frombuffer(b"to be or not to be", np.uint8)
    >>> pb, po, c = count_pieces(buf, np.array([0, len(buf)]))
    >>> [(pb[po[p]:po[p + 1]].tobytes(), int(c[p])) for p in range(len(c))]
    [(b'to', 1), (b' be', 2), (b' or', 1), (b' not', 1), (b' to', 1)]
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from toktoktok.scanner import DEFAULT, NO_NRT, check_which, scan_kernel
from toktoktok.unaligned import load8
from toktoktok.unicode_classes import unicode_tables

# Open addressing, linear probing, kept at most half full, growing by doubling.
# A slot holds ``tag << 32 | id`` (``tag``: the hash's high 32 bits; an empty
# slot is all ones; ids stay below 2**32), so a probe rarely leaves the table.
# Per id, one row of ``meta``: the span's first 8 bytes as a little-endian
# word, its length, its first occurrence and its count; spans of at most 8
# bytes (most pieces) compare by word and length alone.

_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)
_K1 = np.uint64(0x9E3779B97F4A7C15)
_K2 = np.uint64(0xFF51AFD7ED558CCD)
_LOW32 = np.uint64(0xFFFFFFFF)
W_WORD, W_LEN, W_START, W_COUNT = 0, 1, 2, 3  # columns of meta


@njit(cache=True, inline="always")
def _word(src, i, n):
    """``src[i:i+n]`` (0 <= n <= 8) as a little-endian integer: b"ab" -> 0x6261."""
    # Away from the end of ``src`` one 8-byte load and a mask, without a loop
    # whose length varies piece by piece (a mispredicted branch costs more).
    # Inlined by numba, as ``_mix`` is, because as plain calls from
    # ``span_key`` both were slower; inlining the scanner's character helpers
    # too gained nothing more and made compiling into an empty cache take
    # several times as long.
    if n <= 0:
        return np.uint64(0)
    if i + 8 <= len(src):
        return load8(src, i) & (_EMPTY >> np.uint64(64 - 8 * n))
    w = np.uint64(0)
    for k in range(n):
        w |= np.uint64(src[i + k]) << np.uint64(8 * k)
    return w


@njit(cache=True, inline="always")
def _mix(h):
    h = (h ^ (h >> np.uint64(33))) * _K2
    return h ^ (h >> np.uint64(29))


@njit(cache=True, inline="always")
def span_key(src, i, e):
    """(hash, first word) of ``src[i:e]``: 8 bytes at a time, then a final mix.

    Equal spans have equal keys wherever they lie:

        >>> src = np.frombuffer(b"abc abc", np.uint8)
        >>> h, first = span_key(src, 0, 3)
        >>> (h, first) == span_key(src, 4, 7), hex(first)
        (True, '0x636261')
    """
    # A span of at most 8 bytes (most pieces: 96% of them in C source) takes
    # one multiply and a fold of the high half into the low, since the table's
    # slot comes from the low bits and its tag from the high.
    n = e - i
    first = _word(src, i, min(n, 8))
    if n <= 8:
        h = ((np.uint64(n) * _K1) ^ first) * _K2
        return h ^ (h >> np.uint64(32)), first
    h = _mix((np.uint64(n) * _K1) ^ first)
    k = i + 8
    while k < e:
        h = _mix(h ^ _word(src, k, min(e - k, 8)))
        k += 8
    return _mix(h * _K1), first


@njit(cache=True, inline="always")
def same_bytes(a, i, b, j, n):
    """Whether ``a[i:i+n] == b[j:j+n]``, compared 8 bytes a step.

        >>> same_bytes(np.frombuffer(b"xabcdefghij", np.uint8), 1, np.frombuffer(b"abcdefghij", np.uint8), 0, 10)
        True
    """
    k = 0
    while k < n:
        m = min(n - k, 8)
        if _word(a, i + k, m) != _word(b, j + k, m):
            return False
        k += 8
    return True


@njit(cache=True, inline="always")
def _same_tail(src, a, b, n):
    """Whether ``src[a+8:a+n] == src[b+8:b+n]`` (the bytes after the first word)."""
    k = 8
    while k < n and src[a + k] == src[b + k]:
        k += 1
    return k >= n


@njit(cache=True, inline="always")
def _find_or_add(table, meta, n, src, i, e, weight):
    """Add ``weight`` to span ``src[i:e]``'s count, inserting it as id ``n`` if new.

    Returns the new number of distinct spans. Linear probing: for ids 0 and 1
    in slots 5 and 6, a new span hashing to slot 5 goes to slot 7 as id 2.
    """
    h, first = span_key(src, i, e)
    size = e - i
    tag = h >> np.uint64(32)
    mask = np.uint64(len(table) - 1)
    slot = h & mask
    entry = table[slot]
    while entry != _EMPTY and not (
        (entry >> np.uint64(32)) == tag
        and meta[entry & _LOW32, W_WORD] == np.int64(first)
        and meta[entry & _LOW32, W_LEN] == size
        and (size <= 8 or _same_tail(src, meta[entry & _LOW32, W_START], i, size))
    ):
        slot = (slot + np.uint64(1)) & mask
        entry = table[slot]
    if entry != _EMPTY:
        meta[entry & _LOW32, W_COUNT] += weight
        return n
    table[slot] = (tag << np.uint64(32)) | np.uint64(n)
    meta[n, W_WORD] = np.int64(first)
    meta[n, W_LEN] = size
    meta[n, W_START] = i
    meta[n, W_COUNT] = weight
    return n + 1


@njit(cache=True, nogil=True, **NO_NRT)
def _add_pieces(table, meta, n, buf, first, ends, k):
    """Count the ``k`` pieces ``buf[first:ends[0]]``, ``buf[ends[0]:ends[1]]``, ..."""
    prev = first
    for t in range(k):
        n = _find_or_add(table, meta, n, buf, prev, ends[t], 1)
        prev = ends[t]
    return n


@njit(cache=True, nogil=True, **NO_NRT)
def _add_weighted(table, meta, n, src, off, weights):
    """Add ``weights[p]`` to span ``src[off[p]:off[p+1]]`` for every p."""
    for p in range(len(weights)):
        n = _find_or_add(table, meta, n, src, off[p], off[p + 1], weights[p])
    return n


@njit(cache=True)
def _grow(table, meta, n, src):
    """Double the table (and ``meta``), re-placing ids 0..n-1 by their spans' hashes."""
    cap = 2 * len(table)
    new_table = np.full(cap, _EMPTY, dtype=np.uint64)
    mask = np.uint64(cap - 1)
    for slot in range(len(table)):
        entry = table[slot]
        if entry != _EMPTY:
            p = entry & _LOW32
            h, _ = span_key(src, meta[p, W_START], meta[p, W_START] + meta[p, W_LEN])
            s = h & mask
            while new_table[s] != _EMPTY:
                s = (s + np.uint64(1)) & mask
            new_table[s] = entry
    new_meta = np.empty((cap // 2, 4), dtype=np.int64)
    new_meta[:n] = meta[:n]
    return new_table, new_meta


@njit(cache=True)
def _flatten(src, meta, n):
    """The first ``n`` spans as (piece_buf, piece_off, counts)."""
    off = np.empty(n + 1, dtype=np.int64)
    off[0] = 0
    for p in range(n):
        off[p + 1] = off[p] + meta[p, W_LEN]
    out = np.empty(off[n], dtype=np.uint8)
    for p in range(n):
        out[off[p] : off[p + 1]] = src[meta[p, W_START] : meta[p, W_START] + meta[p, W_LEN]]
    return out, off, meta[:n, W_COUNT].copy()


_BATCH = 1 << 12  # pieces scanned, then counted, at a time


@njit(cache=True, nogil=True)
def count_kernel(buf, seg_off, cls, contr, which):
    """Scan every segment ``buf[seg_off[s]:seg_off[s+1]]``; count distinct pieces.

    Pieces are scanned ``_BATCH`` at a time into a scratch array, then counted;
    the table doubles before a batch could fill it past half. Returns
    ``(piece_buf, piece_off, counts)`` in order of first occurrence.
    """
    table = np.full(1 << 14, _EMPTY, dtype=np.uint64)
    meta = np.empty((1 << 13, 4), dtype=np.int64)
    ends = np.empty(_BATCH, dtype=np.int64)
    n = 0
    for s in range(len(seg_off) - 1):
        i = seg_off[s]
        end = seg_off[s + 1]
        while i < end:
            k = scan_kernel(buf, i, end, ends, cls, contr, which)
            while 2 * (n + k) > len(table):
                table, meta = _grow(table, meta, n, buf)
            n = _add_pieces(table, meta, n, buf, i, ends, k)
            i = ends[k - 1]
    return _flatten(buf, meta, n)


@njit(cache=True, nogil=True)
def merge_kernel(piece_buf, piece_off, weights):
    """Sum the weights of equal spans ``piece_buf[piece_off[p]:piece_off[p+1]]``."""
    cap = 1 << 14
    while cap < 2 * len(weights) + 2:
        cap *= 2
    table = np.full(cap, _EMPTY, dtype=np.uint64)
    meta = np.empty((cap // 2, 4), dtype=np.int64)
    n = _add_weighted(table, meta, 0, piece_buf, piece_off, weights)
    return _flatten(piece_buf, meta, n)


def count_pieces(buf: np.ndarray, seg_off: np.ndarray, which: int = DEFAULT):
    """Distinct pieces of every segment and their counts, as flat arrays.

    Segment ``s`` is ``buf[seg_off[s]:seg_off[s+1]]`` (valid UTF-8, matched
    on its own, as ``regex.findall`` over each segment). Returns
    ``(piece_buf uint8, piece_off int64, counts int64)``: piece ``p`` is
    ``piece_buf[piece_off[p]:piece_off[p+1]]``, in order of first occurrence.
    The GIL is released while it runs, so threads may count batches at once.

        >>> buf = np.frombuffer(b"a a\\na a", np.uint8)
        >>> pb, po, c = count_pieces(buf, np.array([0, 4, 7], np.int64))
        >>> [(pb[po[p]:po[p + 1]].tobytes(), int(c[p])) for p in range(len(c))]
        [(b'a', 2), (b' a', 2), (b'\\n', 1)]
    """
    t = unicode_tables()
    check_which(which)
    seg_off = np.asarray(seg_off, dtype=np.int64)
    return count_kernel(buf, seg_off, t[0], t[1], which)


def merge_counts(results):
    """Merge several ``count_pieces`` results into one (order: first occurrence).

        >>> a = count_pieces(np.frombuffer(b"x y", np.uint8), np.array([0, 3]))
        >>> b = count_pieces(np.frombuffer(b" y z", np.uint8), np.array([0, 4]))
        >>> pb, po, c = merge_counts([a, b])
        >>> [(pb[po[p]:po[p + 1]].tobytes(), int(c[p])) for p in range(len(c))]
        [(b'x', 1), (b' y', 2), (b' z', 1)]
    """
    results = list(results)
    bufs = [r[0] for r in results]
    offs = [r[1][1:] + base for r, base in zip(results, np.cumsum([0] + [len(b) for b in bufs[:-1]]))]
    piece_buf = np.concatenate(bufs) if bufs else np.zeros(0, np.uint8)
    piece_off = np.concatenate([np.zeros(1, np.int64)] + offs)
    weights = np.concatenate([r[2] for r in results]) if results else np.zeros(0, np.int64)
    return merge_kernel(piece_buf, piece_off, weights)


def count_pieces_threads(buf: np.ndarray, seg_off: np.ndarray, which: int = DEFAULT, threads: int = 2):
    """``count_pieces`` over ``threads`` batches of segments at once, merged.

    Batches are contiguous runs of segments of about equal bytes; each thread
    counts its own batch (nogil) and ``merge_counts`` joins the tables.

        >>> buf = np.frombuffer(b"a b a b", np.uint8)
        >>> pb, po, c = count_pieces_threads(buf, np.array([0, 1, 3, 5, 7]))
        >>> sorted((pb[po[p]:po[p + 1]].tobytes(), int(c[p])) for p in range(len(c)))
        [(b' a', 1), (b' b', 2), (b'a', 1)]
    """
    seg_off = np.asarray(seg_off, dtype=np.int64)
    n_seg = len(seg_off) - 1
    if threads <= 1 or n_seg < 2:
        return count_pieces(buf, seg_off, which)
    targets = seg_off[0] + (seg_off[-1] - seg_off[0]) * np.arange(1, threads) // threads
    cuts = np.unique(np.concatenate([[0], np.searchsorted(seg_off, targets), [n_seg]]))
    batches = [seg_off[a : b + 1] for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
    unicode_tables()  # load once, before the threads race for it
    with ThreadPoolExecutor(max_workers=threads) as pool:
        results = list(pool.map(lambda off: count_pieces(buf, off, which), batches))
    return merge_counts(results)
