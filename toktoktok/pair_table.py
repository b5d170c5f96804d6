"""The merge loop's structures in numba: growable arrays, the pair table with
each pair's list of pieces, and the max-heap of pairs.

A pair is a row of ``P`` (``KEY, COUNT, HEAD, MARK``: one cache line read
per pair touched), found through ``slots``, an open-addressing table of row
numbers keyed by ``(left << 32) | right``. ``HEAD`` starts the pair's list
of pieces in ``occ_word``/``occ_next``; ``MARK`` holds the stamp of the last
merge that touched the pair and the last piece added to its list. The heap
holds (count, row) entries ordered by count, then by the smaller key; it is
4-ary (entry i's children are 4i+1 .. 4i+4), half the levels of a binary
heap, each a cache miss on a large one.

Nothing here grows an array behind the caller's back: the helpers called
for each merge site assume room was reserved (``reserve_room``, and
``slot_capacity`` for the slots), and only the reserving functions return
new arrays.

    >>> P = np.empty((4, 4), dtype=np.int64)
    >>> slots = np.full(8, -1, dtype=np.int32)
    >>> q, n = pair_row(P, 0, slots, (97 << 32) | 98)
    >>> pair_row(P, n, slots, (97 << 32) | 98) == (q, n), n
    (True, 1)
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from toktoktok.prefetch import prefetch


@njit(cache=True)
def grow(arr, need):
    """``arr`` itself if it holds ``need`` items, else a copy twice as large."""
    if need <= len(arr):
        return arr
    out = np.empty(max(need, 2 * len(arr)), dtype=arr.dtype)
    out[: len(arr)] = arr
    return out


@njit(cache=True)
def resized(arr, size):
    """A copy of ``arr`` with room for ``size`` items (at least its own)."""
    out = np.empty(max(size, len(arr)), dtype=arr.dtype)
    out[: len(arr)] = arr
    return out


@njit(cache=True, inline="always")
def mix(key):
    """A 64-bit finalizer (murmur3's) so that pair keys spread over the table."""
    x = np.uint64(key)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xFF51AFD7ED558CCD)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xC4CEB9FE1A85EC53)
    x ^= x >> np.uint64(33)
    return x


# A pair's record: one row of ``P`` (one cache line read per pair touched).
KEY, COUNT, HEAD, MARK = 0, 1, 2, 3  # MARK: (merge stamp << 32) | (last piece + 1)
LOW = 0xFFFFFFFF
# a piece's record in the merge loop: where its symbols start, its count, how many
# symbols it has, and the stamp of the last merge that listed it (24 bytes)
PIECE = np.dtype([("off", np.int64), ("count", np.int64), ("len", np.int32), ("stamp", np.int32)])


@njit(cache=True, inline="always")
def owner(key, owners):
    """Which of ``owners`` parts owns pair ``key`` when work on pairs is shared out
    (``pair_count``, ``merge_parallel``): a hash of the key, so the same for
    any order of work."""
    return np.int64((mix(key) >> np.uint64(40)) % np.uint64(owners))


@njit(cache=True, inline="always")
def find_slot(slots, P, key):
    """The slot of ``key`` in ``slots`` (row numbers of P, -1 empty): its own or the empty one to fill."""
    mask = np.uint64(len(slots) - 1)
    s = mix(key) & mask
    while True:
        q = slots[s]
        if q < 0 or P[q, KEY] == key:
            return s
        s = (s + np.uint64(1)) & mask


@njit(cache=True, parallel=True)
def copy_rows(P, bigger, n, parts):
    """``bigger[:n] = P[:n]`` in ``parts`` stretches on the numba threads (the new
    array's pages, most of a copy's time, come faster to threads that share them)."""
    for k in prange(parts):
        lo, hi = (n * k) // parts, (n * (k + 1)) // parts
        bigger[lo:hi] = P[lo:hi]


@njit(cache=True, parallel=True)
def empty_slots(capacity, parts):
    """``capacity`` slots of -1, filled in ``parts`` stretches on the numba threads."""
    slots = np.empty(capacity, dtype=np.int32)
    for k in prange(parts):
        slots[(capacity * k) // parts : (capacity * (k + 1)) // parts] = -1
    return slots


@njit(cache=True)
def rehash(P, n_pairs, capacity, parts):
    """A table of ``capacity`` slots holding rows ``0..n_pairs-1``. Their keys are
    distinct, so each goes to the first empty slot from its own without a row
    read; the slot of the row 16 on is asked for ahead (the rows come in order,
    their slots anywhere)."""
    slots = empty_slots(capacity, parts)
    mask = np.uint64(capacity - 1)
    for q in range(n_pairs):
        if q + 16 < n_pairs:
            prefetch(slots, np.int64(mix(P[q + 16, KEY]) & mask))
        s = mix(P[q, KEY]) & mask
        while slots[s] >= 0:
            s = (s + np.uint64(1)) & mask
        slots[s] = q
    return slots


@njit(cache=True)
def room_for_rows(P, n_pairs, rows, parts):
    """``P`` itself if it has ``rows`` rows, else a copy of its first ``n_pairs``
    rows in an array of ``rows`` (the rest unwritten)."""
    if rows <= len(P):
        return P
    bigger = np.empty((rows, 4), dtype=np.int64)
    copy_rows(P, bigger, n_pairs, parts)
    return bigger


@njit(cache=True)
def room_for_pairs(P, n_pairs, more, parts):
    """``P`` with room for ``more`` new pairs (grown by half, copied in ``parts`` on
    the numba threads, when it has not)."""
    if n_pairs + more > len(P):
        P = room_for_rows(P, n_pairs, max(len(P) + len(P) // 2, n_pairs + more), parts)
    return P


@njit(cache=True)
def slot_capacity(slots, n_pairs, more):
    """The slots ``more`` new pairs need: ``len(slots)`` if it keeps them at most half
    full, else the power of two that does. A caller that needs more lets go of
    ``slots`` before it calls ``rehash``, which rebuilds the table from the rows
    alone: the old and new tables side by side set the merge loop's peak.

        >>> slot_capacity(np.full(8, -1, dtype=np.int32), 3, 2)
        16
    """
    size = len(slots)
    while 2 * (n_pairs + more) > size:
        size *= 2
    return size


@njit(cache=True)
def reserve_room(P, occ_word, occ_next, n_pairs, n_occ, spent, more, parts):
    """Room for ``more`` new pairs' rows and occurrences, so the hot helpers never grow
    (the slots: ``slot_capacity``).

    Growing is the one place that returns new arrays; keeping it out of the
    per-site helpers keeps them free of reference-count traffic. The lists'
    nodes get room as ``room_for_nodes`` gives it. Returns ``(P, occ_word,
    occ_next, n_occ, spent)``.
    """
    P = room_for_pairs(P, n_pairs, more, parts)
    occ_word, occ_next, n_occ, spent = room_for_nodes(P, n_pairs, occ_word, occ_next, n_occ, spent, more, parts)
    return P, occ_word, occ_next, n_occ, spent


@njit(cache=True)
def room_for_nodes(P, n_pairs, occ_word, occ_next, n_occ, spent, more, parts):
    """Room for ``more`` list nodes past ``n_occ``, of which ``spent`` lie in lists
    that merges consumed. Full arrays with a quarter or more of their nodes
    spent are compacted (``compact_lists``, in ``parts`` parts: the spent nodes
    dropped, each live list made contiguous), which makes the loop faster and
    its peak lower; with fewer, they are copied into arrays half as large again,
    since a compaction walks every list and would free little. Returns
    ``(occ_word, occ_next, n_occ, spent)``.
    """
    if n_occ + more <= len(occ_word):
        return occ_word, occ_next, n_occ, spent
    if 4 * spent >= n_occ:
        occ_word, occ_next, n_occ = compact_lists(P, n_pairs, occ_word, occ_next, more, parts)
        return occ_word, occ_next, n_occ, 0
    size = max(n_occ + more, len(occ_word) + len(occ_word) // 2)
    words = np.empty(size, dtype=occ_word.dtype)
    nexts = np.empty(size, dtype=occ_next.dtype)
    copy_nodes(occ_word, occ_next, words, nexts, n_occ, parts)
    return words, nexts, n_occ, spent


@njit(cache=True, parallel=True)
def copy_nodes(occ_word, occ_next, words, nexts, n, parts):
    """The first ``n`` nodes into the new arrays, in ``parts`` stretches on the numba
    threads: most of a copy's time is the kernel giving the new arrays pages,
    which threads can share."""
    for k in prange(parts):
        lo, hi = (n * k) // parts, (n * (k + 1)) // parts
        words[lo:hi] = occ_word[lo:hi]
        nexts[lo:hi] = occ_next[lo:hi]


@njit(cache=True)
def node_bounds(first, n_pairs, parts):
    """Pair ranges of about equal nodes, one a part (``first``: each pair's first node)."""
    bounds = np.empty(parts + 1, dtype=np.int64)
    q = 0
    for k in range(parts):
        want = (first[n_pairs] * k) // parts
        while q < n_pairs and first[q] < want:
            q += 1
        bounds[k] = q
    bounds[parts] = n_pairs
    return bounds


# a compaction's first walk, before the lists' lengths are known, gives the parts
# every ``parts``-th stretch of this many pairs (the long lists cluster among
# rows near one another), and asks for the list ``AHEAD`` pairs on: most lists
# are one run of nodes, each somewhere else, so a walk waited on every first read
STRETCH = 256
AHEAD = 8


@njit(cache=True, nogil=True, inline="always")
def run_end(occ_next, o):
    """The last node of the run of side-by-side nodes from node ``o`` on (a run's
    reads do not wait on one another: its addresses are known ahead).

        >>> int(run_end(np.array([1, 2, -1, 0], dtype=np.int32), 0))
        2
    """
    e = o
    while occ_next[e] == e + 1:
        e += 1
    return e


@njit(cache=True, parallel=True)
def compact_lists(P, n_pairs, occ_word, occ_next, more, parts):
    """Make every pair's list contiguous, in order, dropping the nodes of lists
    consumed by merges, with room for a quarter more than the live nodes (and
    ``more``). Where the arrays already hold that much, the lists are laid out
    again in them, through a copy of the live nodes' pieces only (4 bytes a
    node, instead of two new arrays of 5 bytes a node each: the merge loop's
    peak can come while a compaction holds its old and new arrays side by
    side). The lists are walked a run of nodes at a time, in ``parts`` ranges
    of pairs on the numba threads; the result is the same for any ``parts``.
    Returns ``(occ_word, occ_next, live nodes)``."""
    lengths = np.zeros(n_pairs, dtype=np.int32)
    stretches = (n_pairs + STRETCH - 1) // STRETCH
    for k in prange(parts):
        for t in range(k, stretches, parts):
            end = min(n_pairs, (t + 1) * STRETCH)
            for q in range(t * STRETCH, end):
                if q + AHEAD < end:
                    prefetch(occ_next, P[q + AHEAD, HEAD])
                n = 0
                o = P[q, HEAD]
                while o >= 0:
                    e = run_end(occ_next, o)
                    n += e - o + 1
                    o = occ_next[e]
                lengths[q] = n
    first = np.empty(n_pairs + 1, dtype=np.int64)
    first[0] = 0
    for q in range(n_pairs):
        first[q + 1] = first[q] + lengths[q]
    live = first[n_pairs]
    bounds = node_bounds(first, n_pairs, parts)
    size = max(1024, (5 * (live + more)) // 4)
    in_place = size <= len(occ_word)
    words = np.empty(live if in_place else size, dtype=np.int32)
    for k in prange(parts):
        for q in range(bounds[k], bounds[k + 1]):
            if q + AHEAD < bounds[k + 1]:
                prefetch(occ_next, P[q + AHEAD, HEAD])
                prefetch(occ_word, P[q + AHEAD, HEAD])
            o = P[q, HEAD]
            j = first[q]
            while o >= 0:
                e = run_end(occ_next, o)
                words[j : j + e - o + 1] = occ_word[o : e + 1]
                j += e - o + 1
                o = occ_next[e]
    if in_place:
        for k in prange(parts):
            lo, hi = first[bounds[k]], first[bounds[k + 1]]
            occ_word[lo:hi] = words[lo:hi]
        words, nexts = occ_word, occ_next
    else:
        nexts = np.empty(size, dtype=np.int32)
    for k in prange(parts):
        for q in range(bounds[k], bounds[k + 1]):
            n = lengths[q]
            if n == 0:
                P[q, HEAD] = -1
                continue
            P[q, HEAD] = first[q]
            for j in range(first[q], first[q] + n - 1):
                nexts[j] = j + 1
            nexts[first[q] + n - 1] = -1
    return words, nexts, live


@njit(cache=True, inline="always")
def pair_row(P, n_pairs, slots, key):
    """The row of pair ``key`` and the new pair count; a new pair starts at count 0.

    The caller has reserved room (``reserve_room``, ``slot_capacity``).
    """
    s = find_slot(slots, P, key)
    q = slots[s]
    if q >= 0:
        return q, n_pairs
    q = n_pairs
    P[q, KEY] = key
    P[q, COUNT] = 0
    P[q, HEAD] = -1
    P[q, MARK] = 0
    slots[s] = q
    return q, n_pairs + 1


@njit(cache=True, inline="always")
def note_piece(P, q, w, occ_word, occ_next, n_occ):
    """Add piece ``w`` to pair q's list unless it was the last one added; new n_occ."""
    if (P[q, MARK] & LOW) == w + 1:
        return n_occ
    P[q, MARK] = (P[q, MARK] & ~np.int64(LOW)) | (w + 1)
    occ_word[n_occ] = w
    occ_next[n_occ] = P[q, HEAD]
    P[q, HEAD] = n_occ
    return n_occ + 1


@njit(cache=True, inline="always")
def heap_before(h_count, h_pair, P, i, j):
    """Heap order of entries i and j: higher count first; on equal counts the
    smaller (left, right), read from the pairs' rows only then (the heap holds
    no keys: 8 bytes an entry less)."""
    return h_count[i] > h_count[j] or (h_count[i] == h_count[j] and P[h_pair[i], KEY] < P[h_pair[j], KEY])


@njit(cache=True, inline="always")
def heap_swap(h_count, h_pair, i, j):
    h_count[i], h_count[j] = h_count[j], h_count[i]
    h_pair[i], h_pair[j] = h_pair[j], h_pair[i]


@njit(cache=True, inline="always")
def heap_push(h_count, h_pair, P, size, count, p):
    """Add an entry for pair ``p`` at ``count``."""
    i = size
    h_count[i] = count
    h_pair[i] = p
    while i > 0:
        up = (i - 1) >> 2
        if not heap_before(h_count, h_pair, P, i, up):
            break
        heap_swap(h_count, h_pair, i, up)
        i = up


@njit(cache=True, inline="always")
def heap_sift_down(h_count, h_pair, P, size, i):
    while True:
        first = 4 * i + 1
        if first >= size:
            break
        best = first
        for c in range(first + 1, min(first + 4, size)):
            if heap_before(h_count, h_pair, P, c, best):
                best = c
        if not heap_before(h_count, h_pair, P, best, i):
            break
        heap_swap(h_count, h_pair, i, best)
        i = best


@njit(cache=True, inline="always")
def heap_pop(h_count, h_pair, P, size):
    """Remove the top entry (read it first); ``size`` is the size before."""
    size -= 1
    h_count[0] = h_count[size]
    h_pair[0] = h_pair[size]
    heap_sift_down(h_count, h_pair, P, size, 0)


@njit(cache=True)
def heap_compact(h_count, h_pair, size, P, min_freq):
    """Drop the heap's stale entries and heapify again; returns the new size.

    An entry whose count is above its pair's count now stands for that pair
    (its count only fell since): it is kept, at the pair's count, as popping
    it would re-push it; one below (a fresher entry exists) or under
    ``min_freq`` is dropped. The merges are the same.
    """
    k = 0
    for i in range(size):
        p = h_pair[i]
        c = P[p, COUNT]
        if h_count[i] >= c and c >= min_freq:
            h_count[k] = c
            h_pair[k] = p
            k += 1
    for i in range((k - 2) // 4, -1, -1):  # Floyd: sift each parent down
        heap_sift_down(h_count, h_pair, P, k, i)
    return k


@njit(cache=True)
def room_fits(P, slots, occ_word, n_pairs, n_occ, more):
    """Whether ``more`` new pairs and occurrences fit the rows, slots and nodes as they are."""
    return n_pairs + more <= len(P) and 2 * (n_pairs + more) <= len(slots) and n_occ + more <= len(occ_word)
