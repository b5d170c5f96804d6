"""The numba segmenter equals tiktoken's rule: the plain reference and tiktoken itself."""

from __future__ import annotations

import base64
import gzip

import numpy as np
import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import SHARED, as_inventory, piece_counts, stdlib_text
from toktoktok.merge import check_segmentation, train_reference
from toktoktok.patterns import DEFAULT_PATTERN
from toktoktok.segment import (
    SHORT_PIECE,
    segment_into,
    segment_one,
    segment_pieces,
    segment_reference,
    segment_short,
    short_ranks,
    token_table,
)
from toktoktok.segment_words import segment_after, unlike_after, words_apart
from toktoktok.vocab import Vocab
from toktoktok.word_ids import distinct_words, word_starts


@pytest.fixture(scope="module")
def trained() -> tuple[Vocab, tiktoken.Encoding]:
    """A vocabulary of 1,417 + 300 tokens learned from real text."""
    base = Vocab.initial(hardcoded=True)
    merges = train_reference(piece_counts(stdlib_text(60_000), DEFAULT_PATTERN), base.ranks(), merges=300)
    vocab = base.extended(t for r, _, _, t, _ in merges if r >= len(base))
    enc = tiktoken.Encoding("t", pat_str=DEFAULT_PATTERN, mergeable_ranks=vocab.ranks(), special_tokens={})
    return vocab, enc


def _segment_all(vocab: Vocab, pieces: list[bytes]) -> list[list[int]]:
    buf, off, _ = as_inventory({p: 1 for p in pieces})
    order = sorted(set(pieces))
    sym, lens = segment_pieces(vocab, buf, off)
    by_piece = {p: sym[off[i] : off[i] + lens[i]].tolist() for i, p in enumerate(order)}
    return [by_piece[p] for p in pieces]


def test_real_pieces_match_reference_and_tiktoken(trained):
    vocab, enc = trained
    ranks = vocab.ranks()
    pieces = sorted(piece_counts(stdlib_text(), DEFAULT_PATTERN))
    ours = _segment_all(vocab, pieces)
    assert any(len(s) > 1 for s in ours) and any(len(s) == 1 and len(p) > 1 for s, p in zip(ours, pieces))
    for piece, seg in zip(pieces, ours):
        assert seg == enc._encode_single_piece(piece), piece
    for piece, seg in list(zip(pieces, ours))[::25]:
        assert seg == segment_reference(piece, ranks), piece


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=40) | st.text(max_size=30).map(str.encode), min_size=1, max_size=20))
def test_arbitrary_bytes_match_tiktoken(trained, pieces):
    vocab, enc = trained
    for piece, seg in zip(pieces, _segment_all(vocab, pieces)):
        assert seg == enc._encode_single_piece(piece) if piece else seg == []


def test_long_pieces_and_ties(trained):
    vocab, enc = trained
    pieces = [b"a" * 5001, b" " * 3000, b"\n" * 999, b"0" * 4000, b"ab" * 1500, b"..." * 700]
    for piece, seg in zip(pieces, _segment_all(vocab, pieces)):
        assert seg == enc._encode_single_piece(piece)


def test_vocabulary_with_gaps():
    ranks = {bytes([b]): b + 10 for b in range(256)} | {b"ab": 400, b"abc": 300, b"bc": 500}
    vocab = Vocab.from_ranks(ranks)
    assert _segment_all(vocab, [b"abc", b"xabcab"]) == [[300], [ord("x") + 10, 300, 400]]
    assert segment_reference(b"xabcab", ranks) == [ord("x") + 10, 300, 400]


@pytest.mark.skipif(not (SHARED / "data/reference/cl100k_base.tiktoken.gz").exists(), reason="needs ../shared")
def test_cl100k_matches_tiktoken():
    ranks = {}
    for line in gzip.open(SHARED / "data/reference/cl100k_base.tiktoken.gz").read().splitlines():
        token, rank = line.split()
        ranks[base64.b64decode(token)] = int(rank)
    vocab = Vocab.from_ranks(ranks)
    enc = tiktoken.Encoding("cl", pat_str=DEFAULT_PATTERN, mergeable_ranks=ranks, special_tokens={})
    text = "".join(p.read_text(errors="replace") for p in sorted((SHARED / "data/multilingual").iterdir()))
    pieces = sorted(piece_counts(text, DEFAULT_PATTERN))
    for piece, seg in zip(pieces, _segment_all(vocab, pieces)):
        assert seg == enc._encode_single_piece(piece), piece


def _both_paths(vocab: Vocab, piece: bytes) -> tuple[list[int], list[int]]:
    """A piece segmented by the heap (``segment_one``) and by the scan (``segment_short``)."""
    table = token_table(vocab)
    short = short_ranks(table, vocab.buf, vocab.off)
    buf = np.frombuffer(piece, dtype=np.uint8)
    out = np.empty(len(piece) + 1, dtype=np.int64)
    scratch = np.empty(8 * len(piece) + 5, dtype=np.int64)
    n = segment_one(table, vocab.buf, vocab.off, short, buf, 0, len(piece), out, scratch)
    heap = out[:n].tolist()
    n = segment_short(table, vocab.buf, vocab.off, short, buf, 0, len(piece), out, scratch)
    return heap, out[:n].tolist()


def test_scan_and_heap_agree(trained):
    """Short pieces take the scan, long ones the heap: both give tiktoken's parts,
    here on the same pieces, on either side of ``SHORT_PIECE``."""
    vocab, enc = trained
    pieces = sorted(piece_counts(stdlib_text(), DEFAULT_PATTERN))[::7]
    pieces += [b"a" * (SHORT_PIECE + 1), b" " * SHORT_PIECE, b"\n" * 3 + b" " * 40, b"ab" * 20]
    for piece in pieces:
        heap, scan = _both_paths(vocab, piece)
        assert heap == scan == enc._encode_single_piece(piece), piece


def test_vocabulary_without_some_bytes():
    """A vocabulary missing a byte: neither path invents a rank for it, and the
    pairs around it still join as tiktoken's rule says."""
    ranks = {bytes([b]): b for b in range(256) if b != ord("q")} | {b"ab": 300, b"qa": 301}
    vocab = Vocab.from_ranks(ranks)
    heap, scan = _both_paths(vocab, b"qab")
    assert heap == scan
    assert scan[1:] == [300] and scan[0] not in ranks.values()


# -------------------------------------------------------------- a word at a time

WORDS = ["the", " the", " of", " in", "tion", " Exception", "Except", " ion", ",", ".", "  ", "\t", "\n", "é", "中文",
         " 12", "x", " a", "'s", "-", " (", ")"]


def _encoding(vocab: Vocab) -> tiktoken.Encoding:
    return tiktoken.Encoding("v", pat_str=r"[\s\S]+", mergeable_ranks=vocab.ranks(), special_tokens={})


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=40).map(lambda w: ("x " + " ".join(w)).encode()),
                min_size=1, max_size=30))
def test_pieces_of_several_words_are_segmented_a_word_at_a_time_as_tiktoken_does(trained, pieces):
    """The default pattern's tokens never hold a space after a non-space, so pieces of
    several words take the word-at-a-time path: their parts are tiktoken's (and an
    empty piece among them has no word and no part)."""
    vocab, enc = trained
    assert words_apart(vocab.buf, vocab.off)
    pieces = pieces + [b"", ("x " + " ".join(WORDS[:4])).encode()]  # the long one keeps two words a piece
    buf, off, _ = as_inventory({p: 1 for p in pieces})
    assert word_starts(buf, off)[-1] >= 2 * (len(off) - 1)  # the path is taken
    for piece, seg in zip(pieces, _segment_all(vocab, pieces)):
        assert seg == (enc._encode_single_piece(piece) if piece else []), piece


@pytest.mark.parametrize("parts", [2, 3, 7])
def test_words_found_in_parts_are_those_of_one_pass(parts):
    """``distinct_words`` over several runs of pieces at once, joined, gives the ids
    and distinct words of one pass over all of them (empty pieces among them)."""
    pieces = sorted(piece_counts(stdlib_text(40_000), r"[^\n]+|\n+")) + [b"", b" the the"]
    buf, off, _ = as_inventory({p: 1 for p in pieces})
    starts = word_starts(buf, off)
    one = np.empty(starts[-1], np.int32)
    want = distinct_words(buf, off, starts, one, parts=1)
    many = np.empty(starts[-1], np.int32)
    got = distinct_words(buf, off, starts, many, parts=parts)
    assert np.array_equal(one, many)
    assert all(np.array_equal(a, b) for a, b in zip(want, got))
    words = [buf[a : a + m].tobytes() for a, m in zip(*got)]
    assert len(set(words)) == len(words) and b" the" in words


def test_a_token_across_a_space_keeps_the_pieces_whole(trained):
    """A token holding a space after a non-space could join across the place a word
    ends: such a vocabulary segments each piece from its bytes."""
    vocab, _ = trained
    across = vocab.extended([b"e o", b"e of"])
    assert not words_apart(across.buf, across.off)
    pieces = [b"the of the of", b" the of", b"e o e of"]
    segs = _segment_all(across, pieces)
    assert segs == [_encoding(across)._encode_single_piece(p) for p in pieces]
    assert any(across.token(r) == b"e of" for r in segs[0])


def _superword_extension(vocab: Vocab, text: str, merges: int) -> Vocab:
    from toktoktok.patterns import NAMED_PATTERNS

    pieces = piece_counts(text, NAMED_PATTERNS["superword"].python)
    rows = train_reference(pieces, vocab.ranks(), merges=merges)
    return vocab.extended(t for r, _, _, t, _ in rows if r >= len(vocab))


def test_after_a_phase_the_segmentation_goes_on_from_the_one_before(trained):
    """``segment_after`` (the train check's) equals segmenting from the bytes with the
    new vocabulary, tiktoken's parts: with superword tokens, and where new joins
    (``ept``, ``Except``) make an old token (``Exception``) joinable that the old
    vocabulary alone left in four parts."""
    vocab, _ = trained
    text = stdlib_text(30_000)
    after = _superword_extension(vocab, text, 120)
    assert any(len(after.token(r).split()) > 1 for r in range(len(vocab), len(after)))
    old = Vocab.initial(hardcoded=False).extended([b"io", b"ion", b"Ex", b"Exc", b"ep", b"Exception"])
    new = old.extended([b"ept", b"Except"])
    old_parts = [old.token(r) for r in _encoding(old)._encode_single_piece(b"Exceptions")]
    assert old_parts == [b"Exc", b"ep", b"t", b"ion", b"s"]
    assert _encoding(new)._encode_single_piece(b"Exceptions")[0] == len(old) - 1  # an old rank, after two new joins
    extra = " Exception Exceptional Except ion Exce ption Exceptions"
    for before, new in ((vocab, after), (old, new)):
        pieces = sorted(piece_counts(text + extra, r"[^\n]+|\n+"))
        buf, off, _ = as_inventory({p: 1 for p in pieces})
        got = segment_after(before, new, buf, off)
        sym, lens = np.zeros(len(buf), np.int32), np.zeros(len(off) - 1, np.int32)
        segment_into(new, buf, off, sym, lens)
        assert np.array_equal(got[1], lens) and np.array_equal(got[0], sym)
        enc = _encoding(new)
        for k in range(0, len(pieces), 40):
            assert sym[off[k] : off[k] + lens[k]].tolist() == enc._encode_single_piece(pieces[k])


def test_the_check_finds_exactly_the_pieces_segmented_otherwise(trained):
    """``unlike_after`` (which compares as it continues, a word at a time) and the
    train check built on it flag exactly the pieces whose ranks were altered, and
    count each id's use as tiktoken's rule segments every piece."""
    vocab, _ = trained
    text = stdlib_text(30_000)
    after = _superword_extension(vocab, text, 120)
    counted = piece_counts(text, r"[^\n]+|\n+")
    buf, off, counts = as_inventory(counted)
    want_sym, want_lens = segment_pieces(after, buf, off)
    assert not unlike_after(vocab, after, buf, off, want_sym, off, want_lens).any()
    sym, lens = want_sym.copy(), want_lens.copy()
    rng = np.random.default_rng(0)
    split = rng.choice(np.flatnonzero(want_lens >= 2), 25, replace=False)  # a part made longer: one fewer
    lens[split] -= 1
    swapped = rng.choice(np.setdiff1d(np.arange(len(lens)), split), 25, replace=False)
    sym[off[swapped]] = (sym[off[swapped]] + 1) % len(after)  # a first rank changed
    flagged = unlike_after(vocab, after, buf, off, sym, off, lens)
    assert set(np.flatnonzero(flagged)) == set(split) | set(swapped)
    assert np.array_equal(flagged, unlike_after(Vocab.initial(hardcoded=False), after, buf, off, sym, off, lens))
    missing = Vocab.from_ranks({bytes([b]): b for b in range(255)})  # no byte 255: compared from the bytes
    assert np.array_equal(flagged, unlike_after(missing, after, buf, off, sym, off, lens))
    packed_off = np.concatenate([[0], np.cumsum(lens)])  # the same ranks with no room between pieces
    packed_sym = np.concatenate([sym[off[w] : off[w] + lens[w]] for w in range(len(lens))])
    assert np.array_equal(flagged, unlike_after(vocab, after, buf, off, packed_sym, packed_off, lens))
    pieces, weight, usage = check_segmentation(vocab, after, buf, off, counts, sym, off, lens)
    assert (pieces, weight) == (50, int(counts[split].sum() + counts[swapped].sum()))
    want_usage = np.zeros(len(after), np.int64)
    for w in range(len(lens)):
        np.add.at(want_usage, want_sym[off[w] : off[w] + want_lens[w]], counts[w])
    assert np.array_equal(usage, want_usage)


def test_after_a_phase_without_every_byte_segments_from_the_bytes():
    ranks = {bytes([b]): b for b in range(256) if b != ord("q")} | {b"ab": 300, b" ab": 301}
    before = Vocab.from_ranks(ranks)
    after = before.extended([b"ab ab"])
    buf, off, _ = as_inventory({b"ab ab q ab": 1, b"x ab ab": 1})
    got = segment_after(before, after, buf, off)
    want = segment_pieces(after, buf, off)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
