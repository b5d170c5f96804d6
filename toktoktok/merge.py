"""Learning merges: the plain-Python reference and the numba merge loop.

A long module that stays whole: the kernel is one routine in numbered phases
(segment, count pairs, merge, check) over structures that only it uses, with
the reference it is tested against beside it.

Both apply the merge rule of docs/training.md (The merge rule) to the
distinct pieces of a phase with their counts, first segmented as tiktoken
would with the vocabulary the phase starts from, until ``merges`` new ranks
exist or no pair is left.

    >>> base = {bytes([b]): b for b in range(256)}
    >>> [(r, bytes(t)) for r, _, _, t, _ in train_reference({b"abab": 3, b"ab": 1}, base, merges=2)]
    [(256, b'ab'), (257, b'abab')]

``train_reference`` recounts every pair after every merge: quadratic, short,
obviously correct, and used only by the tests. ``train_phase`` is the same
rule on flat arrays: each distinct piece is a run of int32 symbols; a hash
table maps each pair to its count and to a linked list of the pieces it
occurs in; a max-heap orders pairs with lazy deletion (an entry whose count
is no longer the pair's count is stale; every count increase files a fresh
entry), holding only counts in the top count's power of two (``pending``).
A merge visits only the pieces on its pair's list and updates only the pairs
next to each merge site, so its cost follows the merge, not the corpus.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numba
import numpy as np
from numba import njit, prange

from toktoktok import merge_parallel
from toktoktok.clock import COUNTS, cycles, now_cycles, to_seconds
from toktoktok.kernel_args import int64s
from toktoktok.merge_parallel import (
    ask_symbols,
    clear_tallies,
    fill,
    fill_and_file,
    gather,
    piece_bounds,
    scan,
    tallies,
)
from toktoktok.pair_table import (
    COUNT,
    HEAD,
    KEY,
    LOW,
    MARK,
    PIECE,
    grow,
    heap_compact,
    heap_pop,
    mix,
    node_bounds,
    note_piece,
    pair_row,
    rehash,
    reserve_room,
    resized,
    room_fits,
    room_for_nodes,
    room_for_pairs,
    room_for_rows,
    slot_capacity,
)
from toktoktok.pending import compact, due, file_pair, file_pairs, settle, start
from toktoktok.piece_order import pieces_sorted, sorted_arrays
from toktoktok.prefetch import prefetch
from toktoktok.segment import (
    NO_TOKEN,
    build_table,
    segment_pieces,
    segment_plain,
    segment_reference,
    table_capacity,
    table_insert,
    table_lookup,
)
from toktoktok.segment_words import Words, gather_spans, packed, unlike_after, words_of
from toktoktok.thread_pools import release_idle_pool
from toktoktok.vocab import Vocab

Merge = tuple[int, int, int, bytes, int]  # rank, left rank, right rank, bytes, count
EARLY_MERGES = 1000  # the merges timed apart: the first ones touch the most pieces
# how often the merge loop's progress is looked at: to report it, and, where the
# kernel cannot read the time-stamp counter (clock.COUNTS), to time its phases
REPORT_SECONDS = 0.1
POLL_SECONDS = 0.002
# a merge whose pair's list holds this many nodes is made in parts (merge_parallel):
# below it, the rounds' own steps and starting the threads cost more than they save
PARALLEL_NODES = 1 << 8
# how far ahead counting asks the cache for a pair's slot, and for its row (in
# symbols; listing the pieces asks for the row _AHEAD_SLOT sites ahead)
_AHEAD_SLOT = 16
_AHEAD_ROW = 8


def train_reference(
    pieces: Mapping[bytes, int],
    ranks: Mapping[bytes, int],
    *,
    merges: int,
    min_frequency: int = 2,
    max_token_bytes: int | None = None,
    max_token_words: int | None = None,
    next_rank: int | None = None,
) -> list[Merge]:
    """The training rule in plain Python (docs/training.md, The merge rule); new
    ranks from ``next_rank`` (default: just after the highest of ``ranks``)."""
    ranks = dict(ranks)
    by_rank = {r: t for t, r in ranks.items()}
    words = [(segment_reference(p, ranks), c) for p, c in pieces.items()]
    banned: set[tuple[int, int]] = set()
    learned: list[Merge] = []
    next_rank = max(ranks.values()) + 1 if next_rank is None else next_rank
    made = 0
    while made < merges:
        counts: Counter[tuple[int, int]] = Counter()
        for syms, c in words:
            for pair in zip(syms, syms[1:]):
                if pair not in banned:
                    counts[pair] += c
        if not counts:
            break
        (a, b), best = min(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        if best < min_frequency:
            break
        joined = by_rank[a] + by_rank[b]
        if (max_token_bytes is not None and len(joined) > max_token_bytes
                or max_token_words is not None and words_reference(joined) > max_token_words):
            banned.add((a, b))
            continue
        if joined in ranks:
            rank = ranks[joined]
        else:
            rank, next_rank, made = next_rank, next_rank + 1, made + 1
            ranks[joined], by_rank[rank] = rank, joined
        learned.append((rank, a, b, joined, best))
        words = [(_replace_pair(syms, a, b, rank), c) for syms, c in words]
    return learned


def words_reference(token: bytes) -> int:
    """The words ``token`` spans: its runs of bytes that are not ASCII white space
    (space, tab, line feed, carriage return, vertical tab, form feed).

        >>> words_reference(b" by the way"), words_reference(b"  "), words_reference(b"way\\n")
        (3, 0, 1)
    """
    return len(token.split())


def _replace_pair(syms: list[int], a: int, b: int, rank: int) -> list[int]:
    """Replace each (a, b) in ``syms``, left to right, by ``rank``."""
    out: list[int] = []
    i = 0
    while i < len(syms):
        if i + 1 < len(syms) and syms[i] == a and syms[i + 1] == b:
            out.append(rank)
            i += 2
        else:
            out.append(syms[i])
            i += 1
    return out



@njit(cache=True, nogil=True)
def _count_pairs(sym, W, w0, P, slots, state, site_pair):
    """Phase 1a from piece ``w0`` on: count each adjacent pair, and in ``P[q, HEAD]``
    (from -1) how many pieces it occurs in; note each site's pair in ``site_pair``
    (sites in piece order), so that ``_list_pieces`` need not look them up again.

    Stops before a piece that might not fit the arrays; returns where it
    stopped. It never replaces an array (the caller grows them): numba counts
    references on every pass of a loop that reassigns an array variable (a
    byte scan written so ran many times slower).
    ``state`` holds ``n_pairs`` and the sites noted so far.
    """
    n_pairs = state[0]
    site = state[3]
    w = w0
    mask = np.uint64(len(slots) - 1)
    rows = P.reshape(-1)
    last = len(sym) - 1
    while w < len(W):
        if n_pairs + W[w].len > len(P) or 2 * (n_pairs + W[w].len) > len(slots):
            break
        s0 = W[w].off
        for i in range(W[w].len - 1):
            # ask for the slot of the pair a few symbols on, and for the row of the
            # one nearer, whose slot is at hand by now: each probe misses the caches
            # twice on an inventory of millions of pairs (the pair may lie across
            # two pieces: a wasted hint, never a wrong count)
            g = s0 + i
            if g + _AHEAD_SLOT < last:
                prefetch(slots, mix((np.int64(sym[g + _AHEAD_SLOT]) << 32) | np.int64(sym[g + _AHEAD_SLOT + 1]))
                         & mask)
            if g + _AHEAD_ROW < last:
                ahead = slots[mix((np.int64(sym[g + _AHEAD_ROW]) << 32) | np.int64(sym[g + _AHEAD_ROW + 1])) & mask]
                if ahead >= 0:
                    prefetch(rows, np.int64(ahead) * 4)
            key = (np.int64(sym[s0 + i]) << 32) | np.int64(sym[s0 + i + 1])
            q, n_pairs = pair_row(P, n_pairs, slots, key)
            site_pair[site] = q
            site += 1
            P[q, COUNT] += W[w].count
            if (P[q, MARK] & LOW) != w + 1:
                P[q, MARK] = w + 1
                P[q, HEAD] += 1
        w += 1
    state[0] = n_pairs
    state[3] = site
    return w


@njit(cache=True, nogil=True, parallel=True)
def _list_pieces(W, P, n_pairs, site_pair, slack, parts):
    """Phase 1b: every pair's list of pieces, each list contiguous (ascending piece),
    in arrays with room for ``slack`` times the nodes; ``site_pair``: each
    site's pair, as ``_count_pairs`` noted them. Returns ``(occ_word,
    occ_next, n_occ)``; ``P[q, HEAD]`` then heads pair q's list and
    ``P[q, MARK]`` holds its last piece + 1, as ``note_piece`` leaves them.

    Built in place rather than noted node by node: a list per pair filled in
    piece order lay scattered, and making the lists contiguous afterwards
    (``compact_lists``) cost more than counting first and then placing. Each
    site's pair is read from ``site_pair`` rather than looked up again: a
    hash look-up per site cost more than the array's four bytes a site.
    The pairs are shared out in ``parts`` ranges of about equal nodes, one a
    numba thread: each reads every site and places the pieces of its own
    pairs, so every list is filled by one thread in piece order, the same
    lists for any ``parts``.
    """
    start = np.empty(n_pairs + 1, dtype=np.int64)
    start[0] = 0
    for q in range(n_pairs):
        start[q + 1] = start[q] + P[q, HEAD] + 1
        P[q, HEAD] = start[q]  # the next free place of q's list
        P[q, MARK] = 0
    total = start[n_pairs]
    size = max(1024, np.int64(total * slack) + 1)
    occ_word = np.empty(size, dtype=np.int32)
    occ_next = np.empty(size, dtype=np.int32)
    bounds = node_bounds(start, n_pairs, parts)
    rows = P.reshape(-1)
    for k in prange(parts):
        lo, hi = bounds[k], bounds[k + 1]
        site = 0
        for w in range(len(W)):
            for i in range(W[w].len - 1):
                if site + _AHEAD_SLOT < len(site_pair):
                    ahead = site_pair[site + _AHEAD_SLOT]
                    if lo <= ahead < hi:
                        prefetch(rows, np.int64(ahead) * 4)
                q = site_pair[site]
                site += 1
                if q < lo or q >= hi:
                    continue
                if (P[q, MARK] & LOW) != w + 1:
                    P[q, MARK] = w + 1
                    o = P[q, HEAD]
                    occ_word[o] = w
                    occ_next[o] = o + 1
                    P[q, HEAD] = o + 1
        for q in range(lo, hi):
            if start[q + 1] > start[q]:
                occ_next[start[q + 1] - 1] = -1
                P[q, HEAD] = start[q]
            else:
                P[q, HEAD] = -1
    return occ_word, occ_next, total


@njit(cache=True, nogil=True)
def _read_list(occ_word, occ_next, o, ws, n):
    """The pieces of a list from node ``o`` on into ``ws`` from ``n`` on, as far as it
    has room. Returns the next node to read (-1: the list is read) and the new n.

    A list is mostly runs of nodes side by side (a merge's block, a list laid
    out by a compaction): each run is found, then copied whole, so that the
    next node's address never waits for the last node's read."""
    while o >= 0 and n < len(ws):
        e = o
        room = len(ws) - n - 1
        while e - o < room and occ_next[e] == e + 1:
            e += 1
        ws[n : n + e - o + 1] = occ_word[o : e + 1]
        n += e - o + 1
        o = occ_next[e]
    return o, n


@njit(cache=True, nogil=True)
def _distinct(W, ws, n, stamp):
    """Keep each piece of ``ws[:n]`` once, in order, stamping it; returns how many."""
    kept = 0
    for i in range(n):
        if i + 16 < n:  # the pieces lie anywhere
            prefetch(W, ws[i + 16])
        w = ws[i]
        if W[w].stamp != stamp:
            W[w].stamp = stamp
            ws[kept] = w
            kept += 1
    return kept


@njit(cache=True, nogil=True)
def _room_for_entries(h_count, h_pair, h_size, pend_pair, pend_next, heads, lens, n_pend, top, P, n_pairs, min_freq,
                      more):
    """Room for ``more`` fresh entries in the heap (compacted, then grown by half
    if still mostly live) and in the pending store. Returns ``(h_count, h_pair,
    h_size, pend_pair, pend_next, n_pend, top)``."""
    if h_size + more > len(h_count):
        h_size = heap_compact(h_count, h_pair, h_size, P, min_freq)
        if 4 * (h_size + more) >= 3 * len(h_count):  # mostly live: grow by half
            bigger = max(len(h_count) + len(h_count) // 2, h_size + more)
            h_count = resized(h_count, bigger)
            h_pair = resized(h_pair, bigger)
    if n_pend + more > len(pend_pair):
        pend_pair, pend_next, n_pend, top = compact(pend_pair, pend_next, heads, lens, P, n_pairs, min_freq, more)
    return h_count, h_pair, h_size, pend_pair, pend_next, n_pend, top


@njit(cache=True, nogil=True)
def _rewrite(sym, W, ws, t0, n_ws, p, r, stamp, P, slots, occ_word, occ_next, touched,
             state, progress):
    """Replace pair ``p`` by ``r`` in the pieces ``ws[t0:n_ws]``, updating the pair
    counts and lists; note in ``touched`` each pair whose count grew.

    Stops before a piece that might not fit the arrays (returns where it
    stopped); like ``_count_pairs`` it never replaces an array.
    ``state`` holds ``n_pairs, n_occ, n_touched``.
    """
    n_pairs, n_occ, n_touched = state[0], state[1], state[2]
    a = P[p, KEY] >> 32
    b = P[p, KEY] & LOW
    t = t0
    while t < n_ws:
        # each piece lies at a random place in memory: its record and symbols are
        # prefetched 16 and 8 pieces ahead, so that the cache misses of the pieces
        # to come overlap the work on this one
        if t + 16 < n_ws:
            prefetch(W, ws[t + 16])
        if t + 8 < n_ws:
            ask_symbols(sym, W, ws[t + 8])
        w = ws[t]
        s0 = W[w].off
        n = W[w].len
        if not room_fits(P, slots, occ_word, n_pairs, n_occ, 2 * n) or n_touched + 2 * n > len(touched):
            break
        progress[1] += 1
        progress[2] += n
        cw = W[w].count
        i = 0
        j = 0
        while i < n:
            if i + 1 < n and sym[s0 + i] == a and sym[s0 + i + 1] == b:
                P[p, COUNT] -= cw
                for side in range(4):
                    # the pairs a merge site changes: (x,a)->(x,r) and (b,y)->(r,y)
                    if side < 2:
                        if j == 0:
                            continue
                        left = np.int64(sym[s0 + j - 1])
                        right = np.int64(a) if side == 0 else np.int64(r)
                    else:
                        if i + 2 >= n:
                            continue
                        left = np.int64(b) if side == 2 else np.int64(r)
                        right = np.int64(sym[s0 + i + 2])
                    q, n_pairs = pair_row(P, n_pairs, slots, (left << 32) | right)
                    if side % 2 == 0:
                        P[q, COUNT] -= cw
                        continue
                    P[q, COUNT] += cw
                    n_occ = note_piece(P, q, w, occ_word, occ_next, n_occ)
                    if (P[q, MARK] >> 32) != stamp:
                        P[q, MARK] = (np.int64(stamp) << 32) | (P[q, MARK] & LOW)
                        touched[n_touched] = q
                        n_touched += 1
                sym[s0 + j] = r
                i += 2
            else:
                sym[s0 + j] = sym[s0 + i]
                i += 1
            j += 1
        W[w].len = j
        t += 1
    state[0], state[1], state[2] = n_pairs, n_occ, n_touched
    return t


@njit(cache=True, nogil=True)
def _train_kernel(
    sym, woff, wlen, wcount, tok_buf, tok_off, table, first_rank, n_merges, min_freq, max_bytes, progress,
    max_words, t_words, t_edges, parts, parallel_nodes, node_room
):
    """The merge loop on flat arrays. Returns the merges and the grown vocabulary.

    ``tok_off`` has room for ``first_rank + n_merges + 1`` offsets and ``table``
    for as many tokens. ``progress`` (6 entries) is kept at: new ranks made,
    pieces visited, symbols scanned, heap entries popped, and the counter
    (``clock.cycles``) at the first pop and at the ``EARLY_MERGES``-th new
    rank. ``t_words`` and
    ``t_edges`` (``token_words``, as long as ``tok_off`` less one) hold each
    token's words and edges, filled for the ranks below ``first_rank`` and
    here for new ones; a merge whose token would span more than ``max_words``
    words is never made (0: no bound). A merge whose pair's list holds at
    least ``parallel_nodes`` nodes is made in ``parts`` parts on the numba
    threads (``merge_parallel``; same result, also for one part), in rounds
    of at most ``node_room`` list nodes a part.
    """
    n_words = len(wlen)
    # each piece's offset, count, length and last merge stamp in one record
    # (``PIECE``): a merge reads them for every piece on its list, and the stamp
    # it checks first brings the rest into the cache (a little more memory at the
    # peak than four arrays, for a faster loop: the prefetches in ``_rewrite``)
    W = np.empty(n_words, dtype=PIECE)
    for w in range(n_words):
        W[w].off = woff[w]
        W[w].len = wlen[w]
        W[w].count = wcount[w]
        W[w].stamp = 0
    # -- 1. count every adjacent pair, and note the pieces it occurs in ------
    P = np.empty((1024, 4), dtype=np.int64)
    slots = np.full(4096, -1, dtype=np.int32)
    state = np.zeros(4, dtype=np.int64)  # n_pairs, n_occ, n_touched; sites noted while counting
    sites = 0
    for w in range(n_words):
        sites += max(W[w].len - 1, 0)
    site_pair = np.empty(sites, dtype=np.int32)
    w = np.int64(0)  # int64, not the literal 0: the callee compiles once (kernel_args)
    while w < n_words:
        w = _count_pairs(sym, W, w, P, slots, state, site_pair)
        if w < n_words:
            # a table short of slots is let go before the new one is filled from the rows
            # (slot_capacity), in a block of its own: replaced in the block that rehashed,
            # the old table stayed resident through the rehash (measured at the loop's peak)
            P = room_for_pairs(P, state[0], np.int64(W[w].len), parts)
            size = slot_capacity(slots, state[0], np.int64(W[w].len))
            if size > len(slots):
                slots = np.empty(0, dtype=np.int32)  # freed here, before rehash fills the new one
            if len(slots) == 0:
                slots = rehash(P, state[0], size, parts)
    n_pairs = state[0]
    # rows for the pairs the merges will make (a quarter of the sites: more than
    # seen), and room for half as many nodes again: room never written costs
    # address space, not memory, and arrays grown in the loop held their old and
    # new copies at once, at the loop's peak
    P = room_for_rows(P, n_pairs, n_pairs + sites // 4, parts)
    occ_word, occ_next, state[1] = _list_pieces(W, P, n_pairs, site_pair, 1.5, parts)
    site_pair = np.empty(0, dtype=np.int32)  # freed before the heap and the lists grow
    # -- 2. a heap of the pairs in the top count's bucket, the rest waiting ----
    # (pending: a heap entry per pair that could be merged cost a sift each,
    # and every pop sifted past pairs the merges never reach)
    h_count, h_pair, h_size, pend_pair, pend_next, heads, lens, n_pend, top = start(P, n_pairs, min_freq)
    # -- 3. merge until the budget is spent or no pair is frequent enough -----
    m_rank = np.empty(max(16, n_merges), dtype=np.int32)
    m_left = np.empty(max(16, n_merges), dtype=np.int32)
    m_right = np.empty(max(16, n_merges), dtype=np.int32)
    m_count = np.empty(max(16, n_merges), dtype=np.int64)
    n_learned = 0
    made = 0
    next_rank = first_rank
    tok_end = tok_off[first_rank]
    ws = np.empty(n_words, dtype=np.int32)  # the pieces of the pair being merged, as its list gives them
    touched = np.empty(1024, dtype=np.int32)
    # a large merge's tallies, one set a part (merge_parallel.tallies), made at the first
    # large merge for every rank the phase can reach and readied for twice the ranks
    # made so far (they are empty between merges): made anew as the ranks grew, they
    # left their old copies as holes in the C heap, and readied at once, they took ms
    tab, codes, n_codes, blocks, node_code, node_w, rows = tallies(parts, 0, 0)
    ready = np.int64(0)  # symbols whose tallies are readied
    rounds = np.int64(0)
    outs = np.zeros((parts, 5), dtype=np.int64)
    filed = np.zeros(3, dtype=np.int64)  # h_size, n_pend, top, through fill_and_file
    cursor = np.zeros(parts, dtype=np.int64)
    stamp = 0
    spent = np.int64(0)  # nodes in the lists merges consumed (room_for_nodes)
    while made < n_merges:
        if due(h_count, h_size, top):  # the top must be the largest of every entry
            h_count, h_pair, h_size, top = settle(h_count, h_pair, P, h_size, pend_pair, pend_next, heads, lens, top,
                                                  min_freq)
        if h_size == 0:
            break
        if progress[3] == 0:
            progress[4] = cycles()  # the loop proper starts (train_split_seconds)
        progress[3] += 1
        p = h_pair[0]
        c = h_count[0]
        heap_pop(h_count, h_pair, P, h_size)
        h_size -= 1
        if P[p, COUNT] != c:  # stale entry
            if P[p, COUNT] < c and P[p, COUNT] >= min_freq:
                if n_pend == len(pend_pair):
                    pend_pair, pend_next, n_pend, top = compact(pend_pair, pend_next, heads, lens, P, n_pairs,
                                                                min_freq, 1)
                h_size, n_pend, top = file_pair(h_count, h_pair, P, h_size, pend_pair, pend_next, heads, lens, n_pend,
                                                top, p, P[p, COUNT])
            continue
        if c < min_freq:
            break
        a = P[p, KEY] >> 32
        b = P[p, KEY] & LOW
        la = tok_off[a + 1] - tok_off[a]
        lb = tok_off[b + 1] - tok_off[b]
        if max_bytes > 0 and la + lb > max_bytes:
            continue
        joined_words = t_words[a] + t_words[b] - ((t_edges[a] >> 1) & t_edges[b] & 1)  # one word across the join
        if max_words > 0 and joined_words > max_words:
            continue
        # -- 3a. the token: an existing one with these bytes, or a new rank --
        tok_buf = grow(tok_buf, tok_end + la + lb)
        tok_buf[tok_end : tok_end + la] = tok_buf[tok_off[a] : tok_off[a] + la]
        tok_buf[tok_end + la : tok_end + la + lb] = tok_buf[tok_off[b] : tok_off[b] + lb]
        r = table_lookup(table, tok_buf, tok_off, tok_buf, tok_end, tok_end + la + lb)
        if r == NO_TOKEN:
            r = next_rank
            tok_off[r + 1] = tok_end + la + lb
            tok_end += la + lb
            table_insert(table, tok_buf, tok_off, r)
            t_words[r] = joined_words
            t_edges[r] = (t_edges[a] & 1) | (t_edges[b] & 2)
            next_rank += 1
            made += 1
            progress[0] = made
            if made == EARLY_MERGES:
                progress[5] = cycles()
        if n_learned == len(m_rank):
            m_rank = grow(m_rank, n_learned + 1)
            m_left = grow(m_left, n_learned + 1)
            m_right = grow(m_right, n_learned + 1)
            m_count = grow(m_count, n_learned + 1)
        m_rank[n_learned] = r
        m_left[n_learned] = a
        m_right[n_learned] = b
        m_count[n_learned] = c
        n_learned += 1
        # -- 3b. replace the pair in every piece on its list ------------------
        # The list is read first, so growing or compacting the lists below
        # never pulls a node from under the loop.
        stamp += 1
        o = P[p, HEAD]
        P[p, HEAD] = -1
        n_nodes = np.int64(0)
        while True:
            o, n_nodes = _read_list(occ_word, occ_next, o, ws, n_nodes)
            if o < 0:
                break
            ws = grow(ws, 2 * len(ws))  # a piece can be on a list more than once
        spent += n_nodes
        state[2] = 0
        t = np.int64(0)
        n_ws = np.int64(0)
        if n_nodes >= parallel_nodes:
            # -- 3b'. a large merge: in rounds, in parts (merge_parallel) ------
            n_pairs, n_occ, n_touched = state[0], state[1], np.int64(0)
            if ready < next_rank:  # every symbol is a rank made so far
                if tab.shape[2] == 0:
                    tab, codes, n_codes, blocks, node_code, node_w, rows = tallies(
                        parts, len(tok_off), max(node_room, node_w.shape[1]))
                ready = clear_tallies(tab, rows, ready, min(2 * next_rank, tab.shape[2]))
            cursor[:] = 0
            bounds = piece_bounds(ws, n_nodes, parts, n_words)
            while True:
                scan(sym, W, ws, cursor, n_nodes, bounds, stamp, a, b, r, tab, codes, n_codes, node_code, node_w, outs)
                more = n_codes.sum()  # at most as many new pairs
                P = room_for_pairs(P, n_pairs, more, parts)
                size = slot_capacity(slots, n_pairs, more)
                if size > len(slots):
                    slots = np.empty(0, dtype=np.int32)  # freed here, before rehash fills the new one
                if len(slots) == 0:
                    slots = rehash(P, n_pairs, size, parts)
                occ_word, occ_next, n_occ, spent = room_for_nodes(P, n_pairs, occ_word, occ_next, n_occ, spent,
                                                                  outs[:, 1].sum(), parts)
                touched = grow(touched, n_touched + more)
                rounds += 1
                n_pairs, n_occ, n_touched = gather(P, slots, n_pairs, n_occ, a, b, r, stamp, tab, codes, n_codes,
                                                   blocks, rows, rounds, touched, n_touched)
                P[p, COUNT] -= outs[:, 2].sum()
                progress[1] += outs[:, 3].sum()
                progress[2] += outs[:, 4].sum()
                longest = 0  # a part stopped at a piece longer than its whole buffer
                left = False
                for k in range(parts):
                    if outs[k, 0] < n_nodes:
                        left = True
                        if outs[k, 1] == 0:
                            longest = max(longest, W[ws[outs[k, 0]]].len)
                    cursor[k] = outs[k, 0]
                if left:
                    fill(node_code, node_w, outs, blocks, tab, codes, n_codes, occ_word, occ_next)
                else:
                    # -- 3c, on the first part's thread while the others fill --
                    h_count, h_pair, h_size, pend_pair, pend_next, n_pend, top = _room_for_entries(
                        h_count, h_pair, h_size, pend_pair, pend_next, heads, lens, n_pend, top, P, n_pairs, min_freq,
                        n_touched)
                    filed[0], filed[1], filed[2] = h_size, n_pend, top
                    fill_and_file(node_code, node_w, outs, blocks, tab, codes, n_codes, occ_word, occ_next, touched,
                                  n_touched, h_count, h_pair, P, pend_pair, pend_next, heads, lens, filed, min_freq)
                    h_size, n_pend, top = filed[0], filed[1], filed[2]
                    break
                if longest > node_w.shape[1]:
                    node_code = np.empty((parts, longest), dtype=np.int32)
                    node_w = np.empty((parts, longest), dtype=np.int32)
            state[0], state[1], state[2] = n_pairs, n_occ, 0
            continue
        else:
            n_ws = _distinct(W, ws, n_nodes, stamp)
        # the loops over pieces never replace an array (numba counts references on
        # every pass of a loop that reassigns one, even in a branch never taken):
        # they stop before a piece that might not fit, and the arrays grow here
        while t < n_ws:
            t = _rewrite(sym, W, ws, t, n_ws, p, r, stamp, P, slots, occ_word, occ_next,
                         touched, state, progress)
            if t == n_ws:
                break
            more = 2 * W[ws[t]].len
            P, occ_word, occ_next, state[1], spent = reserve_room(P, occ_word, occ_next, state[0], state[1], spent,
                                                                  more, parts)
            size = slot_capacity(slots, state[0], more)
            if size > len(slots):
                slots = np.empty(0, dtype=np.int32)  # freed here, before rehash fills the new one
            if len(slots) == 0:
                slots = rehash(P, state[0], size, parts)
            touched = grow(touched, state[2] + more)
        n_pairs = state[0]
        # -- 3c. fresh entries for every pair whose count grew ----------------
        # (a large merge files them in its last round, above)
        n_touched = state[2]
        h_count, h_pair, h_size, pend_pair, pend_next, n_pend, top = _room_for_entries(
            h_count, h_pair, h_size, pend_pair, pend_next, heads, lens, n_pend, top, P, n_pairs, min_freq, n_touched)
        h_size, n_pend, top = file_pairs(touched, n_touched, h_count, h_pair, P, h_size, pend_pair, pend_next, heads,
                                         lens, n_pend, top, min_freq)
    for w in range(n_words):
        wlen[w] = W[w].len
    return m_rank[:n_learned], m_left[:n_learned], m_right[:n_learned], m_count[:n_learned], tok_buf[:tok_end], made


@njit(cache=True)
def token_words(tok_buf, tok_off, n, t_words, t_edges):
    """Each of the first ``n`` tokens' words (``words_reference``) into ``t_words``,
    and its edges into ``t_edges``: 1 if its first byte is not white space, 2 if
    its last is not (two tokens joined there make one word of two)."""
    for r in range(n):
        words = 0
        space = True
        for i in range(tok_off[r], tok_off[r + 1]):
            c = tok_buf[i]
            now = c == 32 or 9 <= c <= 13
            if space and not now:
                words += 1
            space = now
        t_words[r] = words
        lo, hi = tok_off[r], tok_off[r + 1]
        edges = 0
        if hi > lo:
            first, last = tok_buf[lo], tok_buf[hi - 1]
            edges = (0 if first == 32 or 9 <= first <= 13 else 1) | (0 if last == 32 or 9 <= last <= 13 else 2)
        t_edges[r] = edges


@njit(cache=True)
def _usage(sym, lens, off, counts, size):
    """Occurrences of each id in the segmented pieces, each piece times its count.

    Piece w's ids are ``sym[off[w] : off[w] + lens[w]]``.
    """
    used = np.zeros(size, dtype=np.int64)
    for w in range(len(lens)):
        for k in range(off[w], off[w] + lens[w]):
            used[sym[k]] += counts[w]
    return used


def check_segmentation(before: Vocab, after: Vocab, buf: np.ndarray, off: np.ndarray, counts: np.ndarray,
                       sym: np.ndarray, sym_off: np.ndarray, lens: np.ndarray, *, words: Words | None = None
                       ) -> tuple[int, int, np.ndarray]:
    """The phase's check: how many pieces (and occurrences) the trainer's final
    segmentation gives unlike tiktoken's rule with ``after`` (piece w's ranks:
    ``sym[sym_off[w] : sym_off[w] + lens[w]]``), and each id's occurrences
    under that rule (``_usage``).

    The pieces that agree count with the trainer's ranks; only the ones that
    differ (none, when all is well) are segmented again from their bytes.

        >>> before = Vocab.initial(hardcoded=False)
        >>> after = before.extended([b"ab"])
        >>> buf, off = np.frombuffer(b"abab", np.uint8), np.array([0, 2, 4])
        >>> sym, lens = np.array([256, 0, 97, 98], np.int32), np.array([1, 2], np.int32)
        >>> pieces, weight, usage = check_segmentation(before, after, buf, off, np.array([3, 5]), sym, off, lens)
        >>> pieces, weight, int(usage[256]), int(usage[97])
        (1, 5, 8, 0)
    """
    unlike = unlike_after(before, after, buf, off, sym, sym_off, lens, words=words)
    counts = np.ascontiguousarray(counts, dtype=np.int64)
    usage = _usage(sym, lens, int64s(sym_off), np.where(unlike, 0, counts), len(after))
    bad = np.flatnonzero(unlike)
    if len(bad):
        sub_buf, sub_off = gather_spans(buf, off[bad], off[bad + 1] - off[bad])
        sub_sym, sub_lens = segment_pieces(after, sub_buf, sub_off)
        usage += _usage(sub_sym, sub_lens, sub_off, counts[bad], len(after))
    return len(bad), int(counts[bad].sum()), usage


@dataclass(frozen=True)
class PhaseResult:
    """What one phase learned.

    ``rank``, ``left``, ``right``, ``count`` are the merges in the order
    learned (a merge into an existing token repeats that token's rank);
    ``vocab`` is the vocabulary after the phase; ``made`` the number of new
    ranks; ``differing_pieces`` / ``differing_weight`` count the pieces whose
    trainer segmentation differs from tiktoken's rule with the final
    vocabulary (expected 0).
    """

    rank: np.ndarray
    left: np.ndarray
    right: np.ndarray
    count: np.ndarray
    vocab: Vocab
    made: int
    differing_pieces: int
    differing_weight: int
    visited_pieces: int = 0  # pieces the merge loop rewrote, summed over merges
    scanned_symbols: int = 0  # symbols it read doing so
    # how often each id of ``vocab`` occurs in the pieces segmented with it, times their counts
    usage: np.ndarray | None = None
    # where the time went (s): segmenting the pieces, counting their pairs and
    # building the heap, the first ``EARLY_MERGES`` merges, the rest, the check
    seconds: dict[str, float] | None = None

    def merged_bytes(self) -> list[bytes]:
        return [self.vocab.token(int(r)) for r in self.rank]


def train_phase(
    vocab: Vocab,
    buf: np.ndarray,
    off: np.ndarray,
    counts: np.ndarray,
    *,
    merges: int,
    min_frequency: int = 2,
    max_token_bytes: int | None = None,
    max_token_words: int | None = None,
    on_progress: Callable[[int], None] | None = None,
    parts: int | None = None,
    parallel_nodes: int = PARALLEL_NODES,
) -> PhaseResult:
    """Learn up to ``merges`` new ranks on top of ``vocab`` from a piece inventory.

    Piece ``w`` is ``buf[off[w]:off[w+1]]`` and occurs ``counts[w]`` times.
    ``max_token_words``: no token learned spans more words (``words_reference``).
    ``on_progress(made)`` is called about ten times a second while the loop runs.
    A merge whose pair's list holds at least ``parallel_nodes`` nodes (pieces,
    some listed twice) is made in ``parts`` parts (default: numba's threads in
    this thread), on that many threads; the merges are the same for any of these.
    """
    t0 = time.perf_counter()
    counts = np.ascontiguousarray(counts, dtype=np.int64)
    words = words_of(vocab, buf, off)  # kept for the check, which starts from this segmentation
    if words is not None:
        sym, sym_off, lens = packed(words)
    else:  # not a word at a time: from the bytes (segment_pieces would look for the words again)
        sym, lens = segment_plain(vocab, buf, off)
        sym_off = int64s(off)
    # every merge removes a symbol somewhere: never size for more than can happen
    merges = min(merges, int(np.maximum(lens.astype(np.int64) - 1, 0).sum()))
    first = len(vocab)
    tok_off = np.zeros(first + merges + 1, dtype=np.int64)
    tok_off[: first + 1] = vocab.off
    table = build_table(vocab.buf, vocab.off, table_capacity(first + merges))
    # new ranks, pieces visited, symbols scanned, heap pops, and the counter (clock.cycles)
    # at the first pop and at the EARLY_MERGES-th new rank
    progress = np.zeros(6, dtype=np.int64)
    t_words = np.zeros(first + merges, dtype=np.int64)
    t_edges = np.zeros(first + merges, dtype=np.int64)
    token_words(vocab.buf, vocab.off, first, t_words, t_edges)
    threads = numba.get_num_threads()
    args = (sym, sym_off[:-1], lens, counts, vocab.buf.copy(), tok_off, table, first, merges,
            min_frequency, max_token_bytes or 0, progress, max_token_words or 0, t_words, t_edges,
            max(1, parts or threads), parallel_nodes, merge_parallel.NODE_ROOM)
    t1 = time.perf_counter()
    out, marks = _run_reporting(_train_kernel, args, progress, on_progress, threads)
    t2 = time.perf_counter()
    m_rank, m_left, m_right, m_count, tok_buf, made = out
    new_vocab = Vocab(tok_buf, tok_off[: first + made + 1])
    pieces, weight, usage = check_segmentation(vocab, new_vocab, buf, off, counts, sym, sym_off, lens, words=words)
    loop_start = marks.get("loop", t2)
    early_end = marks.get("early", t2)
    seconds = {"segment": t1 - t0, "pairs": loop_start - t1, "early_merges": early_end - loop_start,
               "later_merges": t2 - early_end, "check": time.perf_counter() - t2}
    return PhaseResult(m_rank, m_left, m_right, m_count, new_vocab, int(made), int(pieces), int(weight),
                       int(progress[1]), int(progress[2]), usage, {k: round(v, 3) for k, v in seconds.items()})


def load_merge_kernels() -> None:
    """Load (or compile) the numba code ``train_phase`` runs, on a two-piece inventory,
    so that a caller can time the merge loop apart from loading its code; and the
    code that puts an inventory in byte order first (``piece_order``)."""
    buf = np.frombuffer(b"abab", dtype=np.uint8)
    pieces_sorted(buf, np.array([0, 2, 4]))
    sorted_arrays(buf, np.array([0, 2, 4]), np.array([2, 1]))
    train_phase(Vocab.initial(hardcoded=False), buf, np.array([0, 2, 4]), np.array([2, 1]), merges=1)
    words = np.frombuffer(b"a ba b", dtype=np.uint8)  # pieces of two words: segmented and checked a word at a time
    train_phase(Vocab.initial(hardcoded=False), words, np.array([0, 3, 6]), np.array([2, 1]), merges=1)


def _run_reporting(kernel, args, progress, on_progress, threads):
    """Run the nogil merge kernel in a thread (on ``threads`` numba threads), reporting ``progress[0]`` about ten
    times a second; returns its result and the times (``perf_counter``) at which
    it started merging (``"loop"``: its first heap pop) and made its
    ``EARLY_MERGES``-th merge (``"early"``): from the counter readings the
    kernel left in ``progress[4:6]`` (``clock``), or, where it cannot read the
    counter, seen by polling every few ms (which takes time slices from the
    kernel's threads when they use every core)."""
    result: list = []
    errors: list[BaseException] = []
    marks: dict[str, float] = {}

    def target() -> None:
        try:
            numba.set_num_threads(threads)  # a new thread starts at numba's default
            result.append(kernel(*args))
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    if threads > 1:
        release_idle_pool()  # the kernel thread's parallel regions then start without a wake-up
    thread = threading.Thread(target=target, daemon=True)
    start = (now_cycles(), time.perf_counter())
    thread.start()
    reported = start[1]
    while thread.is_alive():
        thread.join(REPORT_SECONDS if COUNTS else POLL_SECONDS)
        now = time.perf_counter()
        if not COUNTS and "loop" not in marks and progress[3] > 0:
            marks["loop"] = now
        if not COUNTS and "early" not in marks and progress[0] >= EARLY_MERGES:
            marks["early"] = now
        if on_progress is not None and now - reported >= REPORT_SECONDS:
            on_progress(int(progress[0]))
            reported = now
    end = (now_cycles(), time.perf_counter())
    if COUNTS and end[0] > start[0]:
        for name, slot in (("loop", 4), ("early", 5)):
            if progress[slot] > 0:
                marks[name] = to_seconds(int(progress[slot]), start, end)
    if errors:
        raise errors[0]
    if on_progress is not None:
        on_progress(int(progress[0]))
    return result[0], marks
