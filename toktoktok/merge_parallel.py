"""One large merge in parts, on every core, with exactly the result of one thread.

Why. A large merge rewrites many pieces, and each site changes the counts of
the pairs beside it: looking each up in the hash table, site by site, was most
of its time, and threads cannot share the table's writes.

How. Merging (a, b) into r, a site's left neighbour x moves a count from (x, a)
to (x, r), its right neighbour y from (b, y) to (r, y): one symbol names both
pairs. The merge reads its pair's list into ``ws``, then goes in rounds:
1. ``scan``: each part, owning a range of piece numbers (``piece_bounds``: a
   piece listed twice goes to one part), rewrites its pieces and tallies each
   site in a record per side and symbol, without hashing, and writes a list
   node per pair a piece gains; it stops when its node buffer is full.
2. ``gather``, on one thread: each tallied symbol's two pairs are looked up
   once, gains first (a later loss can name a pair a gain made, as (r, a) in
   "abab"); each gain gets a block of nodes at the head of its list.
3. ``fill``: each part writes its nodes into its blocks.
Counts are sums and the heap orders entries by (count, key), never by row or
list, so the merges are the same for any number of parts or threads, and the
same as ``merge``'s one-thread loop.

    >>> piece_bounds(np.array([5, 1, 9, 3], dtype=np.int32), 4, 2, 10).tolist()
    [0, 5, 10]
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from toktoktok.pair_table import COUNT, HEAD, LOW, MARK, find_slot, pair_row
from toktoktok.pending import file_pairs
from toktoktok.prefetch import prefetch

# a symbol's record in a part's tallies, by side (0: left neighbour x, 1: right y),
# half a cache line: the count the site's pieces carry, the last piece + 1 given a
# node, how many nodes, and the first piece given one with the symbol's place in
# the round's list of symbols tallied (``codes``), as ``(first << 32) | place``
ACC, LAST, NODES, HERE = 0, 1, 2, 3
# a tallied symbol's block, by side and place in ``codes``: where the part's next
# node of the round goes, where the block ends, and the node after the block
AT, END, TAIL = 0, 1, 2
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
def tallies(parts, tokens, room):
    """Each part's tallies for symbols ``0..tokens-1`` (``tab``: a record a side and
    symbol; ``codes``, ``n_codes``: the symbols tallied in a round, by side;
    ``blocks``: their blocks, by side and place in ``codes``) and its node
    buffer of ``room`` nodes (``node_code``: a node's place in ``codes``,
    ~place on the right side; ``node_w``: its piece), and the rows ``gather``
    found in a round (shared), in the order the steps take them. Each part
    writes only its own tallies but for ``blocks``, which ``gather`` writes
    packed, so that the other cores read few lines of it: a part's two counts
    of symbols have a cache line of their own (columns 2-7 stay 0), and each
    part empties its own records (in ``fill``): counted up at each new
    symbol, or written by ``gather`` on its own core, they made the cores
    pass lines back and forth.

    ``tab`` and ``rows`` are not cleared: ``clear_tallies`` readies the symbols
    in use, so the pages of the rest are never touched (made for every rank a
    phase can reach, their pages cost memory only as the ranks come)."""
    return (np.empty((parts, 2, tokens, 4), dtype=np.int64), np.empty((parts, 2, tokens), dtype=np.int32),
            np.zeros((parts, 8), dtype=np.int64), np.empty((parts, 2, tokens, 4), dtype=np.int64),
            np.empty((parts, room), dtype=np.int32), np.empty((parts, room), dtype=np.int32),
            np.empty((2, tokens, 2), dtype=np.int64))


@njit(cache=True, nogil=True)
def clear_tallies(tab, rows, lo, hi):
    """Ready the tallies of symbols ``lo..hi-1`` (empty records, no rows); returns ``hi``."""
    for k in range(tab.shape[0]):
        for side in range(2):
            tab[k, side, lo:hi] = 0
    rows[:, lo:hi] = 0
    return hi


@njit(cache=True, nogil=True)
def piece_bounds(ws, n, parts, n_words):
    """Part k merges the pieces from ``bounds[k]`` up to ``bounds[k + 1]``: ranges of
    piece numbers cut at quantiles of an even sample of the list ``ws[:n]``, so
    that parts get about equal shares, a piece listed twice goes to one part,
    and a part's pieces are mostly runs of the list (which is mostly in
    ascending order), so the test of whose piece it is seldom mispredicts and
    two parts seldom write the same cache line."""
    bounds = np.empty(parts + 1, dtype=np.int64)
    bounds[0] = 0
    bounds[parts] = n_words
    size = min(n, 64 * parts)
    sample = np.empty(size, dtype=np.int64)
    for i in range(size):
        sample[i] = ws[(i * n) // size]
    sample.sort()
    for k in range(1, parts):
        bounds[k] = sample[(k * size) // parts] if size > 0 else n_words
    return bounds


@njit(cache=True, nogil=True, inline="always")
def _site(tab, side, c, w, cw, codes, n_codes, node_code, node_w, nn):
    """A site of piece ``w`` (count ``cw``) has symbol ``c`` on ``side``: the count
    moves, and the piece gets a node unless it has one there already (its
    sites come one after another); ``c`` is listed with its first node, and
    a node names its place in the list."""
    tab[side, c, ACC] += cw
    if tab[side, c, LAST] == w + 1:
        return nn
    if tab[side, c, NODES] == 0:
        tab[side, c, HERE] = (np.int64(w) << 32) | n_codes[side]
        codes[side, n_codes[side]] = c
        n_codes[side] += 1
    tab[side, c, LAST] = w + 1
    tab[side, c, NODES] += 1
    place = tab[side, c, HERE] & LOW
    node_code[nn] = place if side == 0 else ~place
    node_w[nn] = w
    return nn + 1


@njit(cache=True, nogil=True)
def scan_part(sym, W, ws, t, end, lo, hi, stamp, a, b, r, tab, codes, n_codes, node_code, node_w, out):
    """Step 1 for one part: merge (a, b) into r in its pieces of ``ws[t:end]``, those
    numbered ``lo`` up to ``hi``, each once (a piece on the list twice is
    stamped), tallying the pairs that change. Stops before a piece that might
    not fit the node buffer (a site gives at most two nodes, a piece of n
    symbols at most n). ``out``: where it stopped, nodes written, occurrences
    of (a, b) gone, pieces, symbols."""
    room = len(node_w)
    nn = 0
    gone = 0
    pieces = 0
    symbols = 0
    while t < end:
        # the pieces lie anywhere: this part's records and symbols are asked for ahead
        if t + 16 < end and lo <= ws[t + 16] < hi:
            prefetch(W, ws[t + 16])
        if t + 8 < end and lo <= ws[t + 8] < hi:
            ask_symbols(sym, W, ws[t + 8])
        w = ws[t]
        if w < lo or w >= hi or W[w].stamp == stamp:
            t += 1
            continue
        s0 = W[w].off
        n = W[w].len
        if nn + n > room:
            break
        W[w].stamp = stamp
        pieces += 1
        symbols += n
        cw = W[w].count
        i = 0
        j = 0
        while i < n:
            if i + 1 < n and sym[s0 + i] == a and sym[s0 + i + 1] == b:
                gone += cw
                if j > 0:  # (x, a) -> (x, r), x as already rewritten
                    nn = _site(tab, 0, sym[s0 + j - 1], w, cw, codes, n_codes, node_code, node_w, nn)
                if i + 2 < n:  # (b, y) -> (r, y)
                    nn = _site(tab, 1, sym[s0 + i + 2], w, cw, codes, n_codes, node_code, node_w, nn)
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
    out[3] = pieces
    out[4] = symbols


@njit(cache=True, nogil=True, parallel=True)
def scan(sym, W, ws, at, end, bounds, stamp, a, b, r, tab, codes, n_codes, node_code, node_w, outs):
    """Step 1 on every part at once: part k from ``at[k]`` on, its pieces those from
    ``bounds[k]`` up to ``bounds[k + 1]``."""
    for k in prange(len(at)):
        scan_part(sym, W, ws, at[k], end, bounds[k], bounds[k + 1], stamp, a, b, r, tab[k], codes[k], n_codes[k], node_code[k],
                  node_w[k], outs[k])


@njit(cache=True, nogil=True)
def gather(P, slots, n_pairs, n_occ, a, b, r, stamp, tab, codes, n_codes, blocks, rows, gen, touched, n_touched):
    """Step 2: each symbol a part tallied gives two pairs: (x, r) or (r, y) gains
    its count and a block for the part's nodes at the head of its list (from
    ``n_occ`` on, in ``blocks``), and is noted once per merge in ``touched``;
    (x, a) or (b, y) loses the count. It only reads the tallies. The caller has made
    room for a new pair per symbol listed and for the nodes. A pair two parts
    tallied is looked up once: ``rows[side, symbol]`` keeps its rows, as
    ``(gen << 32) | row`` (``gen``: this round's number, never 0). Returns
    ``(n_pairs, n_occ, n_touched)``."""
    parts = len(n_codes)
    for side in range(2):  # the gains first: a loss can name a pair a gain made
        for k in range(parts):
            for i in range(n_codes[k, side]):
                c = codes[k, side, i]
                e = tab[k, side, c]
                if (rows[side, c, 0] >> 32) == gen:
                    q = rows[side, c, 0] & LOW
                else:
                    key = (np.int64(c) << 32) | r if side == 0 else (np.int64(r) << 32) | c
                    q, n_pairs = pair_row(P, n_pairs, slots, key)
                    rows[side, c, 0] = (gen << 32) | q
                P[q, COUNT] += e[ACC]
                block = blocks[k, side, i]
                block[AT] = n_occ
                block[END] = n_occ + e[NODES]
                block[TAIL] = P[q, HEAD]
                P[q, HEAD] = n_occ
                n_occ += e[NODES]
                # the list's head now holds the block's first piece (note_piece's rule)
                mark = (P[q, MARK] & ~np.int64(LOW)) | ((e[HERE] >> 32) + 1)
                if (mark >> 32) != stamp:
                    mark = (np.int64(stamp) << 32) | (mark & LOW)
                    touched[n_touched] = q
                    n_touched += 1
                P[q, MARK] = mark
    for side in range(2):
        for k in range(parts):
            for i in range(n_codes[k, side]):
                c = codes[k, side, i]
                e = tab[k, side, c]
                if (rows[side, c, 1] >> 32) == gen:
                    q = rows[side, c, 1] & LOW
                else:
                    key = (np.int64(c) << 32) | a if side == 0 else (np.int64(b) << 32) | c
                    q = np.int64(slots[find_slot(slots, P, key)])
                    rows[side, c, 1] = (gen << 32) | q
                P[q, COUNT] -= e[ACC]
    return n_pairs, n_occ, n_touched


@njit(cache=True, nogil=True)
def fill_part(node_code, node_w, nn, blocks, tab, codes, n_codes, occ_word, occ_next):
    """Step 3 for one part: its ``nn`` nodes into its blocks, in order (a block's
    last node leads on to the rest of the list); then its tallies emptied."""
    for i in range(nn):
        j = node_code[i]
        side = 0
        if j < 0:
            j = ~j
            side = 1
        o = blocks[side, j, AT]
        blocks[side, j, AT] = o + 1
        occ_word[o] = node_w[i]
        occ_next[o] = o + 1 if o + 1 < blocks[side, j, END] else blocks[side, j, TAIL]
    for side in range(2):
        for i in range(n_codes[side]):
            e = tab[side, codes[side, i]]
            e[ACC] = 0
            e[LAST] = 0
            e[NODES] = 0
        n_codes[side] = 0


@njit(cache=True, nogil=True, parallel=True)
def fill(node_code, node_w, outs, blocks, tab, codes, n_codes, occ_word, occ_next):
    """Step 3 on every part at once."""
    for k in prange(len(outs)):
        fill_part(node_code[k], node_w[k], outs[k, 1], blocks[k], tab[k], codes[k], n_codes[k], occ_word, occ_next)


@njit(cache=True, nogil=True, parallel=True)
def fill_and_file(node_code, node_w, outs, blocks, tab, codes, n_codes, occ_word, occ_next, touched, n_touched,
                  h_count, h_pair, P, pend_pair, pend_next, heads, lens, filed, min_freq):
    """A merge's last step 3, and its fresh entries (``file_pairs``, ``filed``: h_size,
    n_pend, top, read and written) on the first part's thread once its nodes
    are in: they read counts and write the heap, the nodes only the lists, so
    the filing takes the time the first part would wait for the others."""
    for k in prange(len(outs)):
        fill_part(node_code[k], node_w[k], outs[k, 1], blocks[k], tab[k], codes[k], n_codes[k], occ_word, occ_next)
        if k == 0:
            h_size, n_pend, top = file_pairs(touched, n_touched, h_count, h_pair, P, filed[0], pend_pair, pend_next,
                                             heads, lens, filed[1], filed[2], min_freq)
            filed[0] = h_size
            filed[1] = n_pend
            filed[2] = top
