"""One large merge in parts, on every core, with exactly the result of one thread.

Why. The first merges of a phase each rewrite a large share of the pieces. A
merge is independent across pieces; its bookkeeping is not: each site changes
the counts of the pairs beside it and adds the piece to the lists of the pairs
it makes. Looking each of those pairs up in the hash table, site by site, is
most of a large merge's time, and threads cannot share that table's writes.

How. Merging (a, b) into r, the pairs a site changes are named by one symbol
each: the left neighbour x loses (x, a) and gains (x, r); the right neighbour
y loses (b, y) and gains (r, y). So each part tallies them in four dense
arrays indexed by that symbol (``LEFT_FALL``, ``RIGHT_FALL``, ``LEFT_RISE``,
``RIGHT_RISE``), without hashing, and writes a list node ``(symbol, piece)``
per pair a piece gains. A merge goes in rounds of three steps:

1. ``scan``: each part rewrites its pieces (``part_starts`` cuts them at equal
   symbols) as the one-thread loop does, and tallies; it stops before a piece
   whose nodes might not fit its buffer.
2. ``gather``, on one thread: each symbol a part tallied becomes one pair,
   looked up once (a gain may make a new pair: gains go first, since a later
   site's loss can name a pair an earlier site made, as (r, a) in "abab"),
   its count changed by the tally, and a block of nodes reserved for the
   part's pieces, put at the head of the pair's list.
3. ``fill``: each part writes its nodes into its blocks.

Counts are sums, each block holds one part's pieces in their order, and the
heap orders entries by (count, key), never by row or list. So the merges are
the same for any number of parts or threads, and the same as ``merge``'s
one-thread loop.

    >>> part_starts(np.array([0, 3, 6, 9, 12]), 0, 4, 2).tolist()
    [0, 2, 4]
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from toktoktok.pair_table import COUNT, HEAD, LOW, MARK, find_slot, pair_row
from toktoktok.prefetch import prefetch

LEFT_FALL, RIGHT_FALL, LEFT_RISE, RIGHT_RISE = 0, 1, 2, 3
# list nodes a part writes in one round (8 bytes each): it stops before a piece
# that might not fit, and a round's gather and fill follow
NODE_ROOM = 1 << 18


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
def part_starts(cum, t0, t1, parts):
    """Where each of ``parts`` parts of pieces ``t0:t1`` starts, at about equal symbol
    counts (``cum``: the running total of the pieces' lengths); ``starts[parts] == t1``."""
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
def tallies(parts, tokens, room):
    """Each part's tallies for tokens ``0..tokens-1`` and its node buffer of ``room``
    nodes, all empty, in the order ``scan``, ``gather`` and ``fill`` take them."""
    return (np.zeros((parts, 4, tokens), dtype=np.int64),  # acc: count changes, by kind and symbol
            np.empty((parts, 4, tokens), dtype=np.int32),  # codes: the symbols tallied, by kind
            np.zeros((parts, 4), dtype=np.int64),  # n_codes
            np.zeros((parts, 2, tokens), dtype=np.int32),  # last: the last piece + 1 given a node, by side
            np.zeros((parts, 2, tokens), dtype=np.int32),  # nodes: how many, by side and symbol
            np.empty((parts, 2, tokens), dtype=np.int32),  # first: the first piece given a node
            np.empty((parts, 2, tokens), dtype=np.int64),  # at: where the part's next node of a block goes
            np.empty((parts, 2, tokens), dtype=np.int64),  # end: where that block ends
            np.empty((parts, 2, tokens), dtype=np.int64),  # tail: the node after the block (the list's old head)
            np.empty((parts, room), dtype=np.int32),  # node_code: a node's symbol (~symbol: the right side)
            np.empty((parts, room), dtype=np.int32))  # node_w: its piece


@njit(cache=True, nogil=True, inline="always")
def _tally(acc, codes, n_codes, kind, c, delta):
    """Add ``delta`` to a loss, ``acc[kind, c]``, listing ``c`` under ``kind`` on its first
    change (a loss only falls; a gain is listed with its first node)."""
    if acc[kind, c] == 0:
        codes[kind, n_codes[kind]] = c
        n_codes[kind] += 1
    acc[kind, c] += delta


@njit(cache=True, nogil=True, inline="always")
def _node(side, c, w, codes, n_codes, last, nodes, first, node_code, node_w, nn):
    """Piece ``w`` gains the pair of ``c`` on ``side``: a node unless it has one there
    already (its sites come one after another); the symbol listed on its first node."""
    if last[side, c] == w + 1:
        return nn
    if nodes[side, c] == 0:
        codes[LEFT_RISE + side, n_codes[LEFT_RISE + side]] = c
        n_codes[LEFT_RISE + side] += 1
        first[side, c] = w
    last[side, c] = w + 1
    nodes[side, c] += 1
    node_code[nn] = c if side == 0 else ~c
    node_w[nn] = w
    return nn + 1


@njit(cache=True, nogil=True)
def scan_part(sym, W, ws, t, end, a, b, r, acc, codes, n_codes, last, nodes, first, node_code, node_w, out):
    """Step 1 for one part: merge (a, b) into r in pieces ``ws[t:end]``, tallying
    the pairs that change. Stops before a piece that might not fit the node
    buffer (a site gives at most two nodes, a piece of n symbols at most n).
    ``out``: where it stopped, the nodes written, the occurrences of (a, b) gone."""
    room = len(node_w)
    nn = 0
    gone = 0
    while t < end:
        if t + 16 < end:  # the pieces lie anywhere: their records and symbols are asked for ahead
            prefetch(W, ws[t + 16])
        if t + 8 < end:
            ask_symbols(sym, W, ws[t + 8])
        w = ws[t]
        s0 = W[w].off
        n = W[w].len
        if nn + n > room:
            break
        cw = W[w].count
        i = 0
        j = 0
        while i < n:
            if i + 1 < n and sym[s0 + i] == a and sym[s0 + i + 1] == b:
                gone += cw
                if j > 0:  # (x, a) -> (x, r), x as already rewritten
                    x = sym[s0 + j - 1]
                    if cw != 0:
                        _tally(acc, codes, n_codes, LEFT_FALL, x, -cw)
                        acc[LEFT_RISE, x] += cw  # listed with its node
                    nn = _node(0, x, w, codes, n_codes, last, nodes, first, node_code, node_w, nn)
                if i + 2 < n:  # (b, y) -> (r, y)
                    y = sym[s0 + i + 2]
                    if cw != 0:
                        _tally(acc, codes, n_codes, RIGHT_FALL, y, -cw)
                        acc[RIGHT_RISE, y] += cw
                    nn = _node(1, y, w, codes, n_codes, last, nodes, first, node_code, node_w, nn)
                sym[s0 + j] = r
                i += 2
            else:
                sym[s0 + j] = sym[s0 + i]
                i += 1
            j += 1
        W[w].len = j
        t += 1
    out[0] = t
    out[1] = nn
    out[2] = gone


@njit(cache=True, nogil=True, parallel=True)
def scan(sym, W, ws, at, ends, a, b, r, acc, codes, n_codes, last, nodes, first, node_code, node_w, outs):
    """Step 1 on every part at once: part k from ``at[k]`` to ``ends[k]``."""
    for k in prange(len(at)):
        scan_part(sym, W, ws, at[k], ends[k], a, b, r, acc[k], codes[k], n_codes[k], last[k], nodes[k], first[k],
                  node_code[k], node_w[k], outs[k])


@njit(cache=True, nogil=True)
def gather(P, slots, n_pairs, n_occ, a, b, r, stamp, acc, codes, n_codes, last, nodes, first, at, end, tail,
           touched, n_touched):
    """Step 2: each tallied symbol's pair gets its change of count; each pair a part
    gave nodes gets a block for them at the head of its list (from ``n_occ``
    on), and is noted once per merge in ``touched``. The tallies are left empty.
    The caller has made room for a new pair per gain listed and for the
    nodes. Returns ``(n_pairs, n_occ, n_touched)``."""
    parts = len(n_codes)
    for side in range(2):  # the gains first: a loss can name a pair a gain made
        kind = LEFT_RISE + side
        for k in range(parts):
            for i in range(n_codes[k, kind]):
                c = codes[k, kind, i]
                key = (np.int64(c) << 32) | r if side == 0 else (np.int64(r) << 32) | c
                q, n_pairs = pair_row(P, n_pairs, slots, key)
                P[q, COUNT] += acc[k, kind, c]
                acc[k, kind, c] = 0
                m = nodes[k, side, c]
                nodes[k, side, c] = 0
                last[k, side, c] = 0
                at[k, side, c] = n_occ
                end[k, side, c] = n_occ + m
                tail[k, side, c] = P[q, HEAD]
                P[q, HEAD] = n_occ
                n_occ += m
                # the list's head now holds the block's first piece (note_piece's rule)
                mark = P[q, MARK] & ~np.int64(LOW) | (first[k, side, c] + 1)
                if (mark >> 32) != stamp:
                    mark = (np.int64(stamp) << 32) | (mark & LOW)
                    touched[n_touched] = q
                    n_touched += 1
                P[q, MARK] = mark
            n_codes[k, kind] = 0
    for side in range(2):
        kind = LEFT_FALL + side
        for k in range(parts):
            for i in range(n_codes[k, kind]):
                c = codes[k, kind, i]
                key = (np.int64(c) << 32) | a if side == 0 else (np.int64(b) << 32) | c
                P[slots[find_slot(slots, P, key)], COUNT] += acc[k, kind, c]
                acc[k, kind, c] = 0
            n_codes[k, kind] = 0
    return n_pairs, n_occ, n_touched


@njit(cache=True, nogil=True)
def fill_part(node_code, node_w, nn, at, end, tail, occ_word, occ_next):
    """Step 3 for one part: its ``nn`` nodes into its blocks, in order; a block's
    last node leads on to the rest of the list."""
    for i in range(nn):
        c = node_code[i]
        side = 0
        if c < 0:
            c = ~c
            side = 1
        o = at[side, c]
        at[side, c] = o + 1
        occ_word[o] = node_w[i]
        occ_next[o] = o + 1 if o + 1 < end[side, c] else tail[side, c]


@njit(cache=True, nogil=True, parallel=True)
def fill(node_code, node_w, outs, at, end, tail, occ_word, occ_next):
    """Step 3 on every part at once."""
    for k in prange(len(outs)):
        fill_part(node_code[k], node_w[k], outs[k, 1], at[k], end[k], tail[k], occ_word, occ_next)
