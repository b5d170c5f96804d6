"""Pairs the merge loop's heap need not order yet, kept by the bucket of their count.

Why. The loop pops the most frequent pair from a lazy max-heap and files an
entry each time a pair's count grows. Most pairs never come near the top:
pushing each (a sift, each level a cache miss on a large heap) and sifting
past them at every pop was time spent on pairs the merges never reach.

How. An entry whose count lies in a lower power-of-two bucket than the
heap's top count waits in that bucket's chain (``file_pair``: an append).
Before each pop the loop flushes every bucket that could hold a count as
high as the top (``due``, ``settle``), so the top is still the largest (count, key) of
all entries: the merges are those of one heap. A flushed entry stands for
its pair at its count now: pushed if that is still in the bucket, moved to
its lower bucket if the count fell, dropped under ``min_freq`` or if the
count rose (the rise was filed then, in a higher bucket, already flushed).

    >>> bucket(1), bucket(2), bucket(3), bucket(1 << 40)
    (0, 1, 1, 40)
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from toktoktok.pair_table import COUNT, heap_push, resized

BUCKETS = 64  # one a power of two of an int64 count


@intrinsic
def _leading_zeros(typingctx, x):
    """LLVM's ``ctlz`` of an int64: one instruction, where a search by halves takes six tests."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        value = context.cast(builder, args[0], signature.args[0], types.int64)
        ctlz = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [i64, ir.IntType(1)]),
                                              "llvm.ctlz.i64")
        return builder.call(ctlz, [value, ir.IntType(1)(0)])

    return types.int64(x), codegen


@njit(cache=True, nogil=True, inline="always")
def bucket(x):
    """``floor(log2(x))`` for ``x >= 1``: the bucket of a count."""
    return 63 - _leading_zeros(x)


@njit(cache=True, nogil=True, inline="always")
def top_bucket(h_count, h_size):
    """The bucket of the heap's top count, -1 for an empty heap (then everything goes to the heap)."""
    return bucket(h_count[0]) if h_size > 0 else -1


@njit(cache=True)
def pending_store(capacity):
    """An empty store of ``capacity`` entries: ``(pend_pair, pend_next, heads, lens)``;
    bucket b's chain starts at ``heads[b]`` (-1: empty) and holds ``lens[b]`` entries."""
    return (np.empty(max(16, capacity), dtype=np.int32), np.empty(max(16, capacity), dtype=np.int32),
            np.full(BUCKETS, -1, dtype=np.int64), np.zeros(BUCKETS, dtype=np.int64))


@njit(cache=True, nogil=True, inline="always")
def wait(pend_pair, pend_next, heads, lens, n_pend, top, q, b):
    """Append pair ``q`` to bucket ``b`` (the caller has made room). Returns ``(n_pend, top)``."""
    pend_pair[n_pend] = q
    pend_next[n_pend] = heads[b]
    heads[b] = n_pend
    lens[b] += 1
    return n_pend + 1, max(top, b)


@njit(cache=True, nogil=True, inline="always")
def file_pair(h_count, h_pair, P, h_size, pend_pair, pend_next, heads, lens, n_pend, top, q, x):
    """An entry for pair ``q`` at count ``x``: into the heap if ``x``'s bucket is the
    top's or above, else appended to its bucket. The caller has made room in
    both. Returns ``(h_size, n_pend, top)``, ``top``: the highest bucket held."""
    b = bucket(x)
    if b >= top_bucket(h_count, h_size):
        heap_push(h_count, h_pair, P, h_size, x, q)
        return h_size + 1, n_pend, top
    n_pend, top = wait(pend_pair, pend_next, heads, lens, n_pend, top, q, b)
    return h_size, n_pend, top


@njit(cache=True, nogil=True)
def file_pairs(touched, n_touched, h_count, h_pair, P, h_size, pend_pair, pend_next, heads, lens, n_pend, top,
               min_freq):
    """``file_pair`` for each pair of ``touched[:n_touched]`` at ``min_freq`` or more, at
    its count now: first the appends, keeping the pairs for the heap at the
    front of ``touched``, then their pushes (a loop with a push in it ran
    several times slower, even where it never pushed). Returns ``(h_size,
    n_pend, top)``."""
    floor = top_bucket(h_count, h_size)  # pushes only raise the top: what waits stays below it
    high = 0
    for t in range(n_touched):
        q = touched[t]
        x = P[q, COUNT]
        if x < min_freq:
            continue
        b = bucket(x)
        if b >= floor:
            touched[high] = q
            high += 1
        else:
            n_pend, top = wait(pend_pair, pend_next, heads, lens, n_pend, top, q, b)
    for t in range(high):
        q = touched[t]
        heap_push(h_count, h_pair, P, h_size, P[q, COUNT], q)
        h_size += 1
    return h_size, n_pend, top


@njit(cache=True, nogil=True, inline="always")
def due(h_count, h_size, top):
    """Whether bucket ``top`` may hold a count as high as the heap's top (or the heap is empty)."""
    return top >= 0 and top >= top_bucket(h_count, h_size)


@njit(cache=True, nogil=True)
def flush(h_count, h_pair, P, h_size, pend_pair, pend_next, heads, lens, top, min_freq):
    """Empty bucket ``top``, the highest held: each entry's pair at its count now
    goes to the heap (the caller has made room for ``lens[top]`` entries) or,
    fallen below the heap's top bucket, to its own bucket (the same entry,
    relinked). Returns ``(h_size, top)``, the new highest bucket held."""
    b = top
    e = heads[b]
    heads[b] = -1
    lens[b] = 0
    while e >= 0:
        after = pend_next[e]
        q = pend_pair[e]
        x = P[q, COUNT]
        if x >= min_freq:
            bx = bucket(x)
            if bx == b or (bx < b and bx >= top_bucket(h_count, h_size)):
                heap_push(h_count, h_pair, P, h_size, x, q)
                h_size += 1
            elif bx < b:
                pend_next[e] = heads[bx]
                heads[bx] = e
                lens[bx] += 1
        e = after
    top = b - 1
    while top >= 0 and heads[top] < 0:
        top -= 1
    return h_size, top


@njit(cache=True)
def compact(pend_pair, pend_next, heads, lens, P, n_pairs, min_freq, room):
    """The store again with each pair held once, in the bucket of its count now
    (pairs under ``min_freq`` dropped), at most half full with ``room`` more
    entries. Returns ``(pend_pair, pend_next, n_pend, top)``."""
    seen = np.zeros(n_pairs, dtype=np.bool_)
    kept = np.empty(int(lens.sum()), dtype=np.int32)
    n = 0
    for b in range(BUCKETS):
        e = heads[b]
        while e >= 0:
            q = pend_pair[e]
            x = P[q, COUNT]
            if x >= min_freq and not seen[q]:
                seen[q] = True
                kept[n] = q
                n += 1
            e = pend_next[e]
    size = max(len(pend_pair), 2 * (n + room))  # half free: a compaction reads every entry's pair, at random
    words = np.empty(size, dtype=np.int32)
    nexts = np.empty(size, dtype=np.int32)
    heads[:] = -1
    lens[:] = 0
    top = -1
    for i in range(n):
        b = bucket(P[kept[i], COUNT])
        words[i] = kept[i]
        nexts[i] = heads[b]
        heads[b] = i
        lens[b] += 1
        top = max(top, b)
    return words, nexts, n, top


@njit(cache=True)
def start(P, n_pairs, min_freq):
    """The heap of every pair at ``min_freq`` or more whose count shares the top
    count's bucket, and a store of the others. Returns ``(h_count, h_pair,
    h_size, pend_pair, pend_next, heads, lens, n_pend, top)``."""
    floor = -1
    eligible = 0
    for q in range(n_pairs):
        if P[q, COUNT] >= min_freq:
            floor = max(floor, bucket(P[q, COUNT]))
            eligible += 1
    pend_pair, pend_next, heads, lens = pending_store(2 * eligible)
    n_pend = 0
    top = -1
    h_count = np.empty(1024, dtype=np.int64)
    h_pair = np.empty(1024, dtype=np.int32)
    h_size = 0
    for q in range(n_pairs):
        x = P[q, COUNT]
        if x < min_freq:
            continue
        if bucket(x) < floor:
            n_pend, top = wait(pend_pair, pend_next, heads, lens, n_pend, top, q, bucket(x))
            continue
        if h_size == len(h_count):
            h_count = resized(h_count, 2 * h_size)
            h_pair = resized(h_pair, 2 * h_size)
        heap_push(h_count, h_pair, P, h_size, x, q)
        h_size += 1
    return h_count, h_pair, h_size, pend_pair, pend_next, heads, lens, n_pend, top


@njit(cache=True)
def settle(h_count, h_pair, P, h_size, pend_pair, pend_next, heads, lens, top, min_freq):
    """Flush every due bucket, growing the heap as needed, so that its top is the
    largest of all entries. Returns ``(h_count, h_pair, h_size, top)``."""
    while due(h_count, h_size, top):
        if h_size + lens[top] > len(h_count):
            bigger = max(len(h_count) + len(h_count) // 2, h_size + lens[top])
            h_count = resized(h_count, bigger)
            h_pair = resized(h_pair, bigger)
        h_size, top = flush(h_count, h_pair, P, h_size, pend_pair, pend_next, heads, lens, top, min_freq)
    return h_count, h_pair, h_size, top
