"""A large merge made in parts on every thread learns exactly what one thread learns.

``train_phase(parts=..., parallel_nodes=...)`` chooses the route: a merge whose
pair's list holds at least ``parallel_nodes`` nodes goes in ``parts`` parts
(``merge_parallel``), also when ``parts`` is 1. Every route must give the same
merges, vocabulary, usage and counters as the plain one-thread loop (one part,
a bound above every merge), and the reference's merges where it is cheap
enough to run.
"""

from __future__ import annotations

import gzip
from base64 import b64decode

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import SHARED, as_inventory, piece_counts, stdlib_text
from toktoktok import merge_parallel
from toktoktok.merge import PARALLEL_NODES, train_phase, train_reference
from toktoktok.patterns import DEFAULT_PATTERN
from toktoktok.thread_pools import release_idle_pool
from toktoktok.vocab import Vocab

CL100K = SHARED / "data/reference/cl100k_base.tiktoken.gz"


def learned(pieces, vocab, **options):
    buf, off, counts = as_inventory(pieces)
    return train_phase(vocab, buf, off, counts, **options)


def assert_same(one, other):
    for name in ("rank", "left", "right", "count", "usage"):
        assert np.array_equal(getattr(one, name), getattr(other, name)), name
    assert one.vocab.ranks() == other.vocab.ranks()
    assert (one.made, one.differing_pieces, one.visited_pieces, one.scanned_symbols) == \
           (other.made, other.differing_pieces, other.visited_pieces, other.scanned_symbols)
    assert one.differing_pieces == 0


# Every merge on the route in parts (0), none of them (above any merge), and a
# bound between, where some of the same run's merges go each way; one part is
# the same route on one thread.
ROUTES = [(parts, bound) for parts in (1, 2, 3, 4) for bound in (0, 64)] + [(2, 1 << 62)]


def corpora():
    text = stdlib_text(120_000)
    return {
        "words": piece_counts(text, DEFAULT_PATTERN),
        "lines": piece_counts(text, r"[^\n]+|\n+"),  # long pieces, as a superword pattern cuts them
        "repeats": {b"a" * 300: 7, b"ab" * 150: 5, b"aab" * 90: 3, b" " * 64: 11},  # runs: overlapping pairs
    }


@pytest.mark.parametrize("corpus", ["words", "lines", "repeats"])
@pytest.mark.parametrize("hardcoded", [True, False])
def test_every_route_learns_what_one_thread_learns(corpus, hardcoded):
    pieces = corpora()[corpus]
    vocab = Vocab.initial(hardcoded=hardcoded)
    words = 4 if corpus == "lines" else None
    one = learned(pieces, vocab, merges=600, max_token_words=words, parts=1, parallel_nodes=1 << 62)
    for parts, bound in ROUTES:
        assert_same(learned(pieces, vocab, merges=600, max_token_words=words, parts=parts, parallel_nodes=bound),
                    one)


def test_the_reference_agrees_on_the_parallel_route():
    pieces = piece_counts(stdlib_text(30_000), DEFAULT_PATTERN)
    vocab = Vocab.initial(hardcoded=False)
    result = learned(pieces, vocab, merges=300, parts=3, parallel_nodes=0)
    ours = list(zip(result.rank.tolist(), result.left.tolist(), result.right.tolist(), result.merged_bytes(),
                    result.count.tolist()))
    assert ours == train_reference(pieces, vocab.ranks(), merges=300)


def test_a_later_phase_learns_the_same_on_every_route():
    """A phase that starts from an earlier one's vocabulary, on other text: its
    merges can make a token that exists already, whose pairs are in the table."""
    text = stdlib_text(160_000)
    first = learned(piece_counts(text[:80_000], DEFAULT_PATTERN), Vocab.initial(hardcoded=False), merges=400)
    pieces = piece_counts(text[80_000:], r"[^\n]+|\n+")
    one = learned(pieces, first.vocab, merges=500, parts=1, parallel_nodes=1 << 62)
    for parts, bound in ROUTES:
        assert_same(learned(pieces, first.vocab, merges=500, parts=parts, parallel_nodes=bound), one)


@pytest.mark.skipif(not CL100K.exists(), reason="needs ../shared")
def test_a_cl100k_warm_start_learns_the_same_on_every_route():
    ranks = {}
    for line in gzip.open(CL100K).read().splitlines():
        token, rank = line.split()
        ranks[b64decode(token)] = int(rank)
    vocab = Vocab.from_ranks(ranks)
    pieces = piece_counts(stdlib_text(60_000), r"[^\n]+|\n+")
    one = learned(pieces, vocab, merges=300, max_token_words=4, parts=1, parallel_nodes=1 << 62)
    for parts, bound in [(1, 0), (2, 0), (4, 64)]:
        assert_same(learned(pieces, vocab, merges=300, max_token_words=4, parts=parts, parallel_nodes=bound), one)


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(st.text("ab c", min_size=1, max_size=40).map(str.encode), st.integers(1, 9), max_size=40),
    st.integers(1, 30),
    st.integers(2, 5),
)
def test_random_corpora_learn_the_same_on_the_parallel_route(pieces, merges, parts):
    if not pieces:
        return
    vocab = Vocab.initial(hardcoded=False)
    assert_same(learned(pieces, vocab, merges=merges, parts=parts, parallel_nodes=0),
                learned(pieces, vocab, merges=merges, parts=1, parallel_nodes=1 << 62))


@pytest.mark.parametrize("room", [1, 8, 64])
def test_rounds_split_a_merge_without_changing_it(monkeypatch, room):
    """Node buffers far smaller than a merge's pieces (many rounds a merge, and
    pieces longer than the whole buffer, which then grows) give the same merges."""
    pieces = corpora()["lines"]
    vocab = Vocab.initial(hardcoded=False)
    one = learned(pieces, vocab, merges=300, parts=1, parallel_nodes=1 << 62)
    monkeypatch.setattr(merge_parallel, "NODE_ROOM", room)
    for parts in (1, 2, 3):
        assert_same(learned(pieces, vocab, merges=300, parts=parts, parallel_nodes=0), one)


def test_tallies_are_readied_for_the_symbols_asked_only():
    tab, codes, n_codes, blocks, node_code, node_w, rows = merge_parallel.tallies(2, 10, 4)
    assert tab.shape == (2, 2, 10, 4) and rows.shape == (2, 10, 2) and node_w.shape == (2, 4)
    tab[:] = 7
    rows[:] = 7
    assert merge_parallel.clear_tallies(tab, rows, 3, 6) == 6
    for k in range(2):
        for side in range(2):
            assert (tab[k, side, 3:6] == 0).all()
            assert (tab[k, side, :3] == 7).all() and (tab[k, side, 6:] == 7).all()
    assert (rows[:, 3:6] == 0).all() and (rows[:, :3] == 7).all() and (rows[:, 6:] == 7).all()


def test_parts_own_ranges_of_pieces_cut_at_the_lists_quantiles():
    """Each piece goes to the one part whose range holds it, so a piece listed twice
    is merged once; ranges cut at quantiles of the list give parts about equal
    shares of it, whatever its order."""
    rng = np.random.default_rng(3)
    n_words = 1_000_000
    for parts in (2, 3, 8):
        ws = rng.choice(n_words, 50_000).astype(np.int32)  # with repeats
        bounds = merge_parallel.piece_bounds(ws, len(ws), parts, n_words)
        assert bounds[0] == 0 and bounds[-1] == n_words and np.all(np.diff(bounds) >= 0)
        shares = np.bincount(np.searchsorted(bounds, ws, side="right") - 1, minlength=parts) / len(ws)
        assert shares.max() < 1.5 / parts
    ws = np.sort(rng.choice(n_words, 1000)).astype(np.int32)  # ascending, as a list mostly is
    bounds = merge_parallel.piece_bounds(ws, len(ws), 4, n_words)
    assert np.bincount(np.searchsorted(bounds, ws, side="right") - 1, minlength=4).min() > 200


def test_the_default_route_is_by_size():
    """At the default bound, on whole lines and on words, two parts and one learn
    what the one-thread loop learns."""
    assert 0 < PARALLEL_NODES < 1 << 20
    text = stdlib_text(60_000)
    vocab = Vocab.initial(hardcoded=False)
    for pattern in (r"[^\n]+|\n+", DEFAULT_PATTERN):
        pieces = piece_counts(text, pattern)
        plain = learned(pieces, vocab, merges=200, parts=1, parallel_nodes=1 << 62)
        for parts in (1, 2):
            assert_same(learned(pieces, vocab, merges=200, parts=parts), plain)


def test_the_idle_pool_is_let_go_only_under_openmp():
    learned({b"abab": 3}, Vocab.initial(hardcoded=False), merges=1, parts=2, parallel_nodes=0)
    assert release_idle_pool() == (numba.threading_layer() == "omp")


def scattered_lists(rng, n_pairs, room, runs=False):
    """Lists of pieces for ``n_pairs`` pairs (one of them consumed, empty), their nodes
    scattered over arrays of ``room`` nodes as merges leave them (with ``runs``:
    in runs of 1 to 9 nodes side by side, as merges' blocks lie); returns the
    lists, the rows (``HEAD`` set) and the two node arrays."""
    from toktoktok.pair_table import HEAD

    lists = [rng.integers(0, 1000, rng.integers(0, 40)).astype(np.int32) for _ in range(n_pairs)]
    lists[7] = np.zeros(0, np.int32)  # a consumed list
    occ_word = np.full(room, -7, np.int32)
    occ_next = np.full(room, -7, np.int32)
    P = np.zeros((n_pairs, 4), np.int64)
    if runs:  # runs of nodes in a shuffled order, each run's nodes side by side
        total = sum(len(w) for w in lists)
        cuts = np.unique(np.concatenate([[0, total], np.cumsum(rng.integers(1, 10, total))]))
        cuts = cuts[cuts <= total]
        spans = [np.arange(lo, hi) for lo, hi in zip(cuts[:-1], cuts[1:])]
        order = rng.permutation(len(spans))
        starts = np.cumsum([0] + [len(spans[i]) + 3 for i in order])  # a gap after each run
        assert starts[-1] <= room
        places = np.empty(total, np.int64)
        for at, i in zip(starts, order):
            places[spans[i]] = at + np.arange(len(spans[i]))
    else:
        places = rng.permutation(room)
    used = 0
    for q, words in enumerate(lists):
        nodes = places[used : used + len(words)]
        used += len(words)
        P[q, HEAD] = nodes[0] if len(words) else -1
        for node, nxt, w in zip(nodes, list(nodes[1:]) + [-1], words):
            occ_word[node], occ_next[node] = w, nxt
    return lists, P, occ_word, occ_next


def read_lists(P, words, nexts):
    from toktoktok.pair_table import HEAD

    out = []
    for q in range(len(P)):
        got, o = [], P[q, HEAD]
        while o >= 0:
            got.append(int(words[o]))
            o = nexts[o]
        out.append(got)
    return out


@pytest.mark.parametrize("in_place", [True, False])
@pytest.mark.parametrize("runs", [False, True])
def test_lists_compact_alike_in_any_number_of_parts(in_place, runs):
    """``compact_lists`` keeps each pair's pieces, in order, and lays them out the
    same whether it walks the pairs in 1, 2, 3 or 7 parts: nodes scattered one
    by one, or in runs, for more pairs than a part's stretch of its first walk."""
    from toktoktok.pair_table import STRETCH, compact_lists

    n_pairs, room = (50, 4000) if not runs else (3 * STRETCH + 17, 120 * STRETCH)
    lists, P, occ_word, occ_next = scattered_lists(np.random.default_rng(5), n_pairs, room, runs)
    more = 0 if in_place else room  # room for this many more: the arrays must grow
    results = []
    for parts in (1, 2, 3, 7):
        p = P.copy()
        words, nexts, live = compact_lists(p, n_pairs, occ_word.copy(), occ_next.copy(), more, parts)
        assert live == sum(len(w) for w in lists) and (len(words) == room) == in_place
        assert read_lists(p, words, nexts) == [w.tolist() for w in lists]
        results.append((p, words[:live], nexts[:live]))
    for p, words, nexts in results[1:]:
        assert np.array_equal(p, results[0][0])
        assert np.array_equal(words, results[0][1]) and np.array_equal(nexts, results[0][2])


@pytest.mark.parametrize("spent_share", [0.0, 0.2, 0.25, 0.6])
def test_full_lists_grow_or_compact_by_what_merges_spent(spent_share):
    """``room_for_nodes`` on full arrays: below a quarter of the nodes spent it copies
    them into arrays half as large again (nodes where they were); from a
    quarter on it compacts (the spent nodes dropped). Either way every list
    reads the same, and there is room for what was asked."""
    from toktoktok.pair_table import room_for_nodes

    n_pairs, room = 50, 1200
    lists, P, occ_word, occ_next = scattered_lists(np.random.default_rng(8), n_pairs, room)
    live = sum(len(w) for w in lists)
    n_occ = room  # the arrays are full: the nodes past the lists' stand for consumed lists
    spent = int(spent_share * n_occ)
    more = 10
    p = P.copy()
    words, nexts, n_after, spent_after = room_for_nodes(p, n_pairs, occ_word.copy(), occ_next.copy(), n_occ,
                                                        spent, more, 2)
    assert read_lists(p, words, nexts) == [w.tolist() for w in lists]
    assert n_after + more <= len(words) == len(nexts)
    if 4 * spent >= n_occ:
        assert (n_after, spent_after) == (live, 0)
    else:
        assert (n_after, spent_after, len(words)) == (n_occ, spent, room + room // 2)
        assert np.array_equal(words[:n_occ], occ_word) and np.array_equal(p, P)
