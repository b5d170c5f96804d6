"""The words of an inventory's pieces, each occurrence given the id of its bytes.

A superword phase's pieces are nearly the whole text, and ``segment_words``
segments them a word at a time: each distinct word once. A word of a piece
runs from its start, or from a space that follows a byte that is not white
space, up to the next such space (``word_starts``); ``distinct_words`` gives
every occurrence the id of its bytes, ids in order of first occurrence.

Tens of millions of occurrences go through one hash table of about a million
words, so each probe would wait on a cache miss, then on another for the
word it finds. The words are cut a block at a time, their keys taken
(``span_table.span_key``: the hash and the first 8 bytes), and the loop asks
for the slot of a word a few places ahead, and for the row that slot names
once it is at hand. A row holds the word's first 8 bytes and length, so a
word of up to 8 bytes (most of them) is matched without reading the text.

    >>> buf, off = np.frombuffer(b"a b a c b a", np.uint8), np.array([0, 3, 7, 11])
    >>> starts = word_starts(buf, off)
    >>> ids = np.empty(starts[-1], np.int32)
    >>> start, length = distinct_words(buf, off, starts, ids)
    >>> ids.tolist(), [buf[a : a + m].tobytes() for a, m in zip(start, length)]
    ([0, 1, 2, 3, 1, 2], [b'a', b' b', b' a', b' c'])
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
from numba import njit, prange

from toktoktok.prefetch import prefetch
from toktoktok.span_table import span_key

_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)  # a free slot
_LOW32 = np.uint64(0xFFFFFFFF)  # a slot holds (hash tag << 32) | word id
FIRST, LENGTH, START, HASH = 0, 1, 2, 3  # columns of a row: first 8 bytes, length, start in buf, hash
_BLOCK = 2048  # words cut and keyed before their probes
_AHEAD_SLOT = 16  # words ahead whose slot is asked for
_AHEAD_ROW = 8  # words ahead whose row (the one its slot names) is asked for


@njit(cache=True, inline="always")
def white(b) -> bool:
    """An ASCII white space byte (tab, line feed, vertical tab, form feed, carriage return, space)."""
    return b == 32 or (b >= 9 and b <= 13)


@njit(cache=True, parallel=True, nogil=True)
def word_starts(buf: np.ndarray, off: np.ndarray) -> np.ndarray:
    """Where each piece's words start in the list of all words (the last entry:
    their number). A piece's words end before each space that follows a byte
    that is not white space.

        >>> word_starts(np.frombuffer(b"a b cd  e", np.uint8), np.array([0, 5, 5, 9])).tolist()
        [0, 3, 3, 5]
    """
    n = len(off) - 1
    count = np.empty(n + 1, dtype=np.int64)
    count[0] = 0
    for w in prange(n):
        c = 1 if off[w + 1] > off[w] else 0  # an empty piece has no word
        for p in range(off[w] + 1, off[w + 1]):
            if buf[p] == 32 and not white(buf[p - 1]):
                c += 1
        count[w + 1] = c
    return np.cumsum(count)


@njit(cache=True, nogil=True)
def _room(slots, rows, n, more):
    """``(slots, rows)`` with room for ``more`` words after ``n`` (slots at most half
    full): the same arrays, or twice (or more) the size, rehashed from the
    rows' hashes."""
    cap = len(slots)
    while 2 * (n + more) > cap:
        cap *= 2
    if cap == len(slots):
        return slots, rows
    grown = np.full(cap, _EMPTY, dtype=np.uint64)
    mask = np.uint64(cap - 1)
    for d in range(n):
        h = np.uint64(rows[d, HASH])
        s = h & mask
        while grown[s] != _EMPTY:
            s = (s + np.uint64(1)) & mask
        grown[s] = ((h >> np.uint64(32)) << np.uint64(32)) | np.uint64(d)
    wider = np.empty((cap // 2, 4), dtype=np.int64)
    wider[:n] = rows[:n]
    return grown, wider


@njit(cache=True, nogil=True)
def _intern(buf, ws, we, m, slots, rows, n, out):
    """Give words ``buf[ws[j]:we[j]]`` (j < m) their ids into ``out[:m]``, adding the
    new ones as rows ``n``, ``n + 1``, ...; the table has room for m more.
    Returns the number of rows."""
    mask = np.uint64(len(slots) - 1)
    flat = rows.reshape(-1)
    keys = np.empty(m, dtype=np.uint64)
    firsts = np.empty(m, dtype=np.uint64)
    for j in range(m):
        keys[j], firsts[j] = span_key(buf, ws[j], we[j])
    for j in range(min(m, _AHEAD_SLOT)):
        prefetch(slots, keys[j] & mask)
    for j in range(m):
        if j + _AHEAD_SLOT < m:
            prefetch(slots, keys[j + _AHEAD_SLOT] & mask)
        if j + _AHEAD_ROW < m:
            entry = slots[keys[j + _AHEAD_ROW] & mask]
            if entry != _EMPTY:
                prefetch(flat, np.int64(entry & _LOW32) * 4)
        h = keys[j]
        a = ws[j]
        size = we[j] - a
        tag = h >> np.uint64(32)
        s = h & mask
        found = np.int64(-1)
        while slots[s] != _EMPTY:
            q = np.int64(slots[s] & _LOW32)
            if (slots[s] >> np.uint64(32)) == tag and rows[q, FIRST] == np.int64(firsts[j]) and rows[q, LENGTH] == size:
                b = rows[q, START]
                k = 8
                while k < size and buf[b + k] == buf[a + k]:
                    k += 1
                if k >= size:
                    found = q
                    break
            s = (s + np.uint64(1)) & mask
        if found < 0:
            found = n
            rows[n, FIRST] = np.int64(firsts[j])
            rows[n, LENGTH] = size
            rows[n, START] = a
            rows[n, HASH] = np.int64(h)
            slots[s] = (tag << np.uint64(32)) | np.uint64(n)
            n += 1
        out[j] = found
    return n


@njit(cache=True, nogil=True)
def _distinct_words(buf, off, ids):
    """Give each word (``word_starts``' order) the id of its bytes in ``ids``; return
    the distinct words' ``(start, length)`` in ``buf``, in id order (that of
    their first occurrence)."""
    slots = np.full(1 << 16, _EMPTY, dtype=np.uint64)
    rows = np.empty((1 << 15, 4), dtype=np.int64)
    ws = np.empty(_BLOCK, dtype=np.int64)
    we = np.empty(_BLOCK, dtype=np.int64)
    got = np.empty(_BLOCK, dtype=np.int32)
    n = 0
    k = 0
    w = 0
    a = off[0] if len(off) else 0
    while True:
        m = 0
        while m < _BLOCK and w < len(off) - 1:
            e = off[w + 1]
            if a >= e:  # the piece is done (or empty): the next one
                w += 1
                if w < len(off) - 1:
                    a = off[w]
                continue
            p = a + 1
            while p < e and not (buf[p] == 32 and not white(buf[p - 1])):
                p += 1
            ws[m] = a
            we[m] = p
            m += 1
            a = p
        if m == 0:
            break
        slots, rows = _room(slots, rows, n, m)
        n = _intern(buf, ws, we, m, slots, rows, n, got)
        ids[k : k + m] = got[:m]
        k += m
    return rows[:n, START].copy(), rows[:n, LENGTH].copy()


@njit(cache=True, nogil=True)
def _join_words(buf, a_start, a_len, b_start, b_len, ids_b):
    """Join the distinct words of a later run of pieces (b) to those of an earlier
    one (a): b's words not in a get the next ids, in b's order, and ``ids_b``
    is renumbered so. Returns the joined ``(start, length)``: as if the two
    runs had been one (ids in order of first occurrence)."""
    slots = np.full(1 << 16, _EMPTY, dtype=np.uint64)
    rows = np.empty((1 << 15, 4), dtype=np.int64)
    slots, rows = _room(slots, rows, 0, len(a_start) + len(b_start))
    a_id = np.empty(len(a_start), dtype=np.int32)  # 0, 1, ...: a's words are distinct
    n = _intern(buf, a_start, a_start + a_len, len(a_start), slots, rows, 0, a_id)
    new_id = np.empty(len(b_start), dtype=np.int32)
    n = _intern(buf, b_start, b_start + b_len, len(b_start), slots, rows, n, new_id)
    for k in range(len(ids_b)):
        ids_b[k] = new_id[ids_b[k]]
    return rows[:n, START].copy(), rows[:n, LENGTH].copy()


def distinct_words(buf: np.ndarray, off: np.ndarray, starts: np.ndarray, ids: np.ndarray,
                   *, parts: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Each word's id into ``ids`` (``starts``: ``word_starts(buf, off)``), and the
    distinct words' ``(start, length)`` in ``buf`` in id order. Runs on
    ``parts`` runs of pieces of about equal bytes at once (default: numba's
    threads), joined in order (``_join_words``): the same ids and words as
    one run gives, in less time.

        >>> buf, off = np.frombuffer(b"a b a c b a", np.uint8), np.array([0, 3, 7, 11])
        >>> ids = np.empty(6, np.int32)
        >>> start, length = distinct_words(buf, off, word_starts(buf, off), ids, parts=3)
        >>> ids.tolist(), length.tolist()
        ([0, 1, 2, 3, 1, 2], [1, 2, 2, 2])
    """
    parts = max(1, min(parts or numba.get_num_threads(), len(off) - 1))
    cuts = np.unique(np.searchsorted(off, np.linspace(0, off[-1], parts + 1)[1:-1]).clip(1, len(off) - 2))
    bounds = [0, *cuts.tolist(), len(off) - 1] if len(off) > 2 else [0, len(off) - 1]
    runs = [(off[lo : hi + 1], ids[starts[lo] : starts[hi]]) for lo, hi in zip(bounds, bounds[1:])]
    if len(runs) == 1:
        return _distinct_words(buf, off, ids)
    with ThreadPoolExecutor(len(runs)) as pool:
        found = list(pool.map(lambda run: _distinct_words(buf, run[0], run[1]), runs))
    start, length = found[0]
    for (b_start, b_len), (_, ids_b) in zip(found[1:], runs[1:]):
        start, length = _join_words(buf, start, length, b_start, b_len, ids_b)
    return start, length
