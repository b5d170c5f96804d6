"""One large merge on every core, with exactly the result of one thread.

Why. The first merges of a phase each rewrite a large share of the pieces,
one thread at a time. A merge is independent across pieces; its bookkeeping
is not: each site changes the counts of the pairs around it, adds pieces to
their lists, and may create pairs.

How. The pieces go in batches (``EVENT_ROOM`` bounds their events), each in
three steps. 1. ``emit``, on parts of the batch cut at equal symbols: each
part rewrites its pieces as the one-thread loop does and writes an event,
``(key, piece)`` (``-(w + 1)``: a count that falls), per pair count that
changes, into the region of the pair's owner (``pair_table.owner``).
2. ``apply``, one thread an owner: its events of each part, in order, to the
counts, its own stretch of list nodes and the touched marks. A pair not in
the table (only read here) holds the new token r, (x, r) or (r, y): it gets
a row in the owner's small table, found by x or y without hashing.
3. ``settle``, on one thread: those new pairs enter the table.

Counts are sums; each list gets its pieces in one thread's order, since one
owner writes it in event order; the heap orders entries by (count, key),
never by row. So the merges are the same for any number of parts, threads
or batch size, and the same as ``merge``'s one-thread loop.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from toktoktok.pair_table import COUNT, HEAD, KEY, LOW, MARK, find_slot, mix, note_piece, owner, pair_row
from toktoktok.prefetch import prefetch

# the events of a batch, all parts' regions: a batch has EVENT_ROOM // (2 * parts) symbols
EVENT_ROOM = 1 << 20


@njit(cache=True, nogil=True, inline="always")
def ask_symbols(sym, W, w):
    """Ask the cache for every line of piece ``w``'s symbols (a superword piece's
    symbols span several lines: asking for the first alone left the others to
    miss in turn)."""
    s0 = W[w].off
    for k in range(0, W[w].len, 16):
        prefetch(sym, s0 + k)
    prefetch(sym, s0 + W[w].len - 1)


@njit(cache=True)
def batch_end(cum, t0, n_ws, most):
    """The end of the batch that starts at piece ``t0`` of the merge: as many pieces as
    hold at most ``most`` symbols (``cum``: the running total of their lengths),
    at least one."""
    lo, hi = t0 + 1, n_ws
    while lo < hi:  # the last t with cum[t] - cum[t0] <= most
        mid = (lo + hi + 1) >> 1
        if cum[mid] - cum[t0] <= most:
            lo = mid
        else:
            hi = mid - 1
    return lo


@njit(cache=True)
def part_starts(cum, t0, t1, parts):
    """Where each of ``parts`` parts of pieces ``t0:t1`` starts, at about equal symbol
    counts; ``starts[parts] == t1``."""
    starts = np.empty(parts + 1, dtype=np.int64)
    total = cum[t1] - cum[t0]
    t = t0
    for k in range(parts):
        want = cum[t0] + (total * k) // parts
        while t < t1 and cum[t] < want:
            t += 1
        starts[k] = t
    starts[parts] = t1
    return starts


@njit(cache=True)
def region_size(cum, starts):
    """Room for one (part, owner) region of events: two a symbol of the largest part."""
    most = 0
    for k in range(len(starts) - 1):
        most = max(most, cum[starts[k + 1]] - cum[starts[k]])
    return 2 * most


@njit(cache=True, nogil=True, parallel=True)
def emit(sym, W, ws, starts, a, b, r, size, ev_key, ev_w, ev_n, grows, lost):
    """Step 1: rewrite pair (a, b) as r in each part's pieces and write its events,
    part k's for owner o from ``(k * owners + o) * size`` on, ``ev_n[k, o]`` of
    them; ``grows[k, o]``: how many of those raise a count; ``lost[k]``: the
    occurrences of (a, b) the part removed."""
    parts = len(starts) - 1
    owners = ev_n.shape[1]
    for k in prange(parts):
        gone = 0
        # this part's own tallies (no cache line shared with another part)
        at = np.empty(owners, dtype=np.int64)
        rises = np.zeros(owners, dtype=np.int64)
        for o in range(owners):
            at[o] = (k * owners + o) * size
        end = starts[k + 1]
        for t in range(starts[k], end):
            if t + 16 < end:  # as in merge's one-thread loop: the pieces lie anywhere
                prefetch(W, ws[t + 16])
            if t + 8 < end:
                ask_symbols(sym, W, ws[t + 8])
            w = ws[t]
            s0 = W[w].off
            n = W[w].len
            cw = W[w].count
            i = 0
            j = 0
            while i < n:
                if i + 1 < n and sym[s0 + i] == a and sym[s0 + i + 1] == b:
                    gone += cw
                    for side in range(2):
                        if side == 0:  # (x, a) -> (x, r)
                            if j == 0:
                                continue
                            x = np.int64(sym[s0 + j - 1]) << 32
                            fall, rise = x | a, x | r
                        else:  # (b, y) -> (r, y)
                            if i + 2 >= n:
                                continue
                            y = np.int64(sym[s0 + i + 2])
                            fall, rise = (np.int64(b) << 32) | y, (np.int64(r) << 32) | y
                        o = owner(fall, owners)
                        ev_key[at[o]] = fall
                        ev_w[at[o]] = -(w + 1)
                        at[o] += 1
                        o = owner(rise, owners)
                        ev_key[at[o]] = rise
                        ev_w[at[o]] = w
                        at[o] += 1
                        rises[o] += 1
                    sym[s0 + j] = r
                    i += 2
                else:
                    sym[s0 + j] = sym[s0 + i]
                    i += 1
                j += 1
            W[w].len = j
        lost[k] = gone
        for o in range(owners):
            ev_n[k, o] = at[o] - (k * owners + o) * size
            grows[k, o] = rises[o]


@njit(cache=True, nogil=True, parallel=True)
def apply(P, slots, W, r, size, ev_key, ev_w, ev_n, node_start, occ_word, occ_next, touch_start, touched,
          n_touch, stamp, new_at, new_rows, n_new):
    """Step 2: owner o applies its events, part after part, in order: counts, list
    nodes from ``node_start[o]`` on, and each pair whose count grew noted once per
    merge in ``touched`` from ``touch_start[o]`` on (``n_touch[o]``: how many). A
    pair not in the table gets row ``n_new[o]`` of ``new_rows[o]``, found again
    through ``new_at[o]`` (x of (x, r), or ``len // 2`` + y of (r, y); -1: none)."""
    parts, owners = ev_n.shape
    half = new_at.shape[1] // 2
    mask = np.uint64(len(slots) - 1)
    flat = P.reshape(-1)  # rows as one run of int64, for the prefetches
    for o in prange(owners):
        node = node_start[o]
        tn = touch_start[o]
        mine = new_rows[o]
        made = 0
        for k in range(parts):
            first = (k * owners + o) * size
            last = first + ev_n[k, o]
            for e in range(first, last):
                # the slot of a pair 16 events on, and the row of the pair 8 on (its
                # slot came in 8 events ago): their cache misses overlap this event's work
                if e + 16 < last:
                    prefetch(slots, np.int64(mix(ev_key[e + 16]) & mask))
                if e + 8 < last:
                    ahead = slots[np.int64(mix(ev_key[e + 8]) & mask)]
                    if ahead >= 0:
                        prefetch(flat, 4 * np.int64(ahead))
                key = ev_key[e]
                w = ev_w[e]
                q = slots[find_slot(slots, P, key)]
                rows = P
                fresh = q < 0
                if fresh:  # a pair with r, new in this merge
                    right = key & LOW
                    at = (key >> 32) if right == r else half + right
                    q = new_at[o, at]
                    if q < 0:
                        q = made
                        made += 1
                        new_at[o, at] = q
                        mine[q, KEY] = key
                        mine[q, COUNT] = 0
                        mine[q, HEAD] = -1
                        mine[q, MARK] = 0
                    rows = mine
                if w < 0:
                    rows[q, COUNT] -= W[-w - 1].count
                    continue
                rows[q, COUNT] += W[w].count
                node = note_piece(rows, q, w, occ_word, occ_next, node)
                if (rows[q, MARK] >> 32) != stamp:
                    rows[q, MARK] = (np.int64(stamp) << 32) | (rows[q, MARK] & LOW)
                    if not fresh:  # a new pair is noted as it enters the table
                        touched[tn] = q
                        tn += 1
        n_touch[o] = tn - touch_start[o]
        n_new[o] = made


@njit(cache=True, nogil=True)
def settle(P, slots, n_pairs, r, new_at, new_rows, n_new, touched, n_touched):
    """Step 3: the owners' new pairs into the table (room reserved), each noted as
    touched; ``new_at`` cleared for the next batch. Returns ``(n_pairs, n_touched)``."""
    half = new_at.shape[1] // 2
    for o in range(len(n_new)):
        for i in range(n_new[o]):
            key = new_rows[o, i, KEY]
            q, n_pairs = pair_row(P, n_pairs, slots, key)
            for c in range(4):
                P[q, c] = new_rows[o, i, c]
            touched[n_touched] = q
            n_touched += 1
            right = key & LOW
            new_at[o, (key >> 32) if right == r else half + right] = -1
    return n_pairs, n_touched
