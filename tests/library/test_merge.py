"""The numba merge loop learns exactly what the plain-Python reference learns."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import as_inventory, piece_counts, stdlib_text
from toktoktok.merge import train_phase, train_reference, words_reference
from toktoktok.patterns import DEFAULT_PATTERN
from toktoktok.vocab import Vocab


def fast(pieces, vocab, **options):
    buf, off, counts = as_inventory(pieces)
    result = train_phase(vocab, buf, off, counts, **options)
    merges = list(zip(result.rank.tolist(), result.left.tolist(), result.right.tolist(),
                      result.merged_bytes(), result.count.tolist()))
    return merges, result


@pytest.mark.parametrize("hardcoded", [True, False])
def test_real_text_equals_reference(hardcoded):
    pieces = piece_counts(stdlib_text(80_000), DEFAULT_PATTERN)
    vocab = Vocab.initial(hardcoded=hardcoded)
    ours, result = fast(pieces, vocab, merges=400)
    assert ours == train_reference(pieces, vocab.ranks(), merges=400)
    assert result.made == 400 and len(result.vocab) == len(vocab) + 400
    assert result.differing_pieces == 0


def test_min_frequency_and_max_token_bytes():
    pieces = piece_counts(stdlib_text(40_000), DEFAULT_PATTERN)
    vocab = Vocab.initial(hardcoded=False)
    for options in ({"min_frequency": 7}, {"max_token_bytes": 3}, {"min_frequency": 3, "max_token_bytes": 5}):
        ours, result = fast(pieces, vocab, merges=3000, **options)
        assert ours == train_reference(pieces, vocab.ranks(), merges=3000, **options)
        if "min_frequency" in options:
            assert result.made < 3000 and min(c for *_, c in ours) >= options["min_frequency"]
        if "max_token_bytes" in options:
            assert max(len(t) for _, _, _, t, _ in ours) <= options["max_token_bytes"]


@pytest.mark.parametrize("words", [1, 2, 4])
@pytest.mark.parametrize("hardcoded", [True, False])
def test_max_token_words_equals_reference(words, hardcoded):
    """Pieces that span spaces (whole lines, as a superword pattern cuts them): no token
    learned spans more than ``max_token_words`` words, and the merges are the reference's,
    from the 256 bytes and from the hardcoded merges (whose tokens hold spaces)."""
    text = stdlib_text(40_000)
    pieces = piece_counts(text, r"[^\n]+|\n+")
    vocab = Vocab.initial(hardcoded=hardcoded)
    ours, result = fast(pieces, vocab, merges=1500, max_token_words=words)
    assert ours == train_reference(pieces, vocab.ranks(), merges=1500, max_token_words=words)
    assert max(words_reference(t) for _, _, _, t, _ in ours) <= words
    assert max(words_reference(t) for _, _, _, t, _ in ours) == words  # the bound is reached, not just kept
    assert result.differing_pieces == 0


@settings(max_examples=60, deadline=None)
@given(tokens=st.lists(st.binary(min_size=1, max_size=6), min_size=1, max_size=30))
def test_token_words_counts_as_the_reference(tokens):
    import numpy as np

    from toktoktok.merge import token_words

    buf = np.frombuffer(b"".join(tokens), dtype=np.uint8)
    off = np.concatenate(([0], np.cumsum([len(t) for t in tokens]))).astype(np.int64)
    words, edges = np.zeros(len(tokens), np.int64), np.zeros(len(tokens), np.int64)
    token_words(buf, off, len(tokens), words, edges)
    assert words.tolist() == [words_reference(t) for t in tokens]
    for a, b, ea, eb, wa, wb in zip(tokens, tokens[1:], edges, edges[1:], words, words[1:]):
        assert words_reference(a + b) == wa + wb - ((ea >> 1) & eb & 1)


def test_pair_whose_bytes_are_a_token_makes_no_rank():
    # "abc" is a token but neither "ab" nor "bc" is: "abc" is segmented a|b|c.
    ranks = {bytes([b]): b for b in range(256)} | {b"abc": 256}
    vocab = Vocab.from_ranks(ranks)
    pieces = {b"abc": 10, b"abx": 3}
    ours, result = fast(pieces, vocab, merges=2)
    assert ours == train_reference(pieces, ranks, merges=2)
    assert [(r, t) for r, _, _, t, _ in ours] == [(257, b"ab"), (256, b"abc"), (258, b"abx")]
    assert result.made == 2 and len(result.vocab) == 259


def test_counts_are_64_bit():
    pieces = {b"ab": 3 * 2**40, b"cd": 2**41, b"abcd": 2**33}
    ours, _ = fast(pieces, Vocab.initial(hardcoded=False), merges=3)
    assert ours == train_reference(pieces, Vocab.initial(hardcoded=False).ranks(), merges=3)
    assert ours[0][4] == 3 * 2**40 + 2**33


@settings(max_examples=80, deadline=None)
@given(
    st.dictionaries(st.text("abc d", min_size=1, max_size=12).map(str.encode), st.integers(1, 50), max_size=30),
    st.integers(0, 40),
    st.booleans(),
)
def test_random_corpora_equal_reference(pieces, merges, hardcoded):
    vocab = Vocab.initial(hardcoded=hardcoded)
    ours, result = fast(pieces, vocab, merges=merges) if pieces else ([], None)
    assert ours == train_reference(pieces, vocab.ranks(), merges=merges, min_frequency=2)
    if result is not None:
        assert result.differing_pieces == 0


def test_progress_is_reported():
    pieces = piece_counts(stdlib_text(40_000), DEFAULT_PATTERN)
    seen: list[int] = []
    _, result = fast(pieces, Vocab.initial(hardcoded=False), merges=200, on_progress=seen.append)
    assert seen and seen[-1] == result.made == 200


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_heap_gives_pairs_by_count_then_key_through_stale_entries_and_compaction(seed):
    """The merge loop's heap (``pair_table``), used as the loop uses it: an entry whose
    count is no longer its pair's is stale (pushed again at the pair's count if
    that is lower); compacting drops the stale ones. Pairs come out by count,
    then by the smaller key, as sorting them gives."""
    import numpy as np

    from toktoktok.pair_table import COUNT, KEY, heap_compact, heap_pop, heap_push

    rng = np.random.default_rng(seed)
    n, min_freq = 400, 3
    P = np.zeros((n, 4), np.int64)
    P[:, KEY] = rng.permutation(10 * n)[:n]
    P[:, COUNT] = rng.integers(0, 30, n)
    h_count, h_pair = np.empty(3 * n, np.int64), np.empty(3 * n, np.int32)
    size = 0
    for p in range(n):
        heap_push(h_count, h_pair, P, size, P[p, COUNT], p)
        size += 1
    for p in rng.choice(n, n // 2, replace=False):  # counts that fall (stale entries) or rise (a fresh one)
        P[p, COUNT] = max(0, P[p, COUNT] + int(rng.integers(-10, 10)))
        heap_push(h_count, h_pair, P, size, P[p, COUNT], p)
        size += 1
    expected = sorted(((int(c), int(k)) for k, c in zip(P[:, KEY], P[:, COUNT]) if c >= min_freq),
                      key=lambda ck: (-ck[0], ck[1]))
    size = heap_compact(h_count, h_pair, size, P, min_freq)
    out = []
    while size > 0:
        p, c = int(h_pair[0]), int(h_count[0])
        heap_pop(h_count, h_pair, P, size)
        size -= 1
        if P[p, COUNT] != c:
            if min_freq <= P[p, COUNT] < c:
                heap_push(h_count, h_pair, P, size, P[p, COUNT], p)
                size += 1
            continue
        if c < min_freq:
            break
        out.append((c, int(P[p, KEY])))
        P[p, COUNT] = 0  # merged: its entries are stale from now on
    assert out == expected and len(out) > n // 2


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_pending_buckets_keep_the_heap_top_the_largest_of_all(seed):
    """The heap with its pending buckets (``pending``), used as the loop uses it:
    counts over many powers of two rise (filed again), fall (left stale), and
    the store fills up (compacted); after the due buckets are flushed, each
    valid top is the pair of largest count, then smallest key, over all pairs
    at ``min_freq`` or more, as a scan of every pair gives."""
    import numpy as np

    from toktoktok.pair_table import COUNT, KEY, heap_pop
    from toktoktok.pending import compact, due, file_pair, pending_store, settle

    rng = np.random.default_rng(seed)
    n, min_freq = 600, 2
    P = np.zeros((n, 4), np.int64)
    P[:, KEY] = rng.permutation(10 * n)[:n]
    P[:, COUNT] = (2 ** rng.integers(0, 20, n)) + rng.integers(0, 50, n)
    h_count, h_pair = np.empty(16, np.int64), np.empty(16, np.int32)  # small: settle grows it
    pend_pair, pend_next, heads, lens = pending_store(n // 4)  # small: compactions come soon
    h_size, n_pend, top = 0, 0, -1

    def file(q):
        nonlocal pend_pair, pend_next, n_pend, top, h_size, h_count, h_pair
        if h_size == len(h_count):  # room, as the loop makes it before filing
            h_count, h_pair = np.resize(h_count, 2 * h_size), np.resize(h_pair, 2 * h_size)
        if n_pend == len(pend_pair):
            pend_pair, pend_next, n_pend, top = compact(pend_pair, pend_next, heads, lens, P, n, min_freq, 1)
        h_size, n_pend, top = file_pair(h_count, h_pair, P, h_size, pend_pair, pend_next, heads, lens, n_pend, top,
                                        q, P[q, COUNT])

    for q in range(n):
        if P[q, COUNT] >= min_freq:
            file(q)
    merged = 0
    while True:
        if due(h_count, h_size, top):
            h_count, h_pair, h_size, top = settle(h_count, h_pair, P, h_size, pend_pair, pend_next, heads, lens, top,
                                                  min_freq)
        if h_size == 0:
            break
        p, c = int(h_pair[0]), int(h_count[0])
        heap_pop(h_count, h_pair, P, h_size)
        h_size -= 1
        if P[p, COUNT] != c:
            if min_freq <= P[p, COUNT] < c:
                file(p)
            continue
        live = [(int(P[q, COUNT]), -int(P[q, KEY]), q) for q in range(n) if P[q, COUNT] >= min_freq]
        assert (c, -int(P[p, KEY]), p) == max(live)
        P[p, COUNT] = 0  # merged
        merged += 1
        for q in rng.choice(n, 8, replace=False):  # the merge's neighbours: some rise, some fall
            if P[q, COUNT] == 0:
                continue
            if rng.random() < 0.5:
                P[q, COUNT] += int(rng.integers(1, min(c // 2 + 2, 1 << 20)))
                file(q)
            else:
                P[q, COUNT] = max(0, P[q, COUNT] - int(rng.integers(1, c // 2 + 2)))
    assert merged > n // 2 and all(P[q, COUNT] < min_freq for q in range(n))


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_growing_the_pair_table_in_parts_keeps_every_pair(parts):
    """``room_for_pairs`` copies the rows and ``rehash`` fills the new slots in parts:
    every row is copied, and every key is found again at its row."""
    import numpy as np

    from toktoktok.pair_table import KEY, find_slot, rehash, room_for_pairs, slot_capacity

    rng = np.random.default_rng(parts)
    n = 1000
    P = np.zeros((n, 4), np.int64)
    P[:, KEY] = rng.choice(1 << 40, n, replace=False)
    P[:, 1:] = rng.integers(0, 1 << 30, (n, 3))
    slots = np.full(8, -1, np.int32)
    bigger = room_for_pairs(P, n, 1, parts)
    size = slot_capacity(slots, n, 1)
    assert size >= 2 * (n + 1) and size & (size - 1) == 0 and slot_capacity(np.empty(size, np.int32), n, 1) == size
    slots = rehash(bigger, n, size, parts)
    assert len(bigger) > n and (bigger[:n] == P).all()
    assert all(slots[find_slot(slots, bigger, P[q, KEY])] == q for q in range(n))
    assert (slots >= 0).sum() == n
