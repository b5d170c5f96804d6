"""Segmenting pieces of several words (a superword phase's) a word at a time.

tiktoken's rule only ever joins adjacent parts into a token, so no part
grows across a place that no token spans. When no token holds a space after
a byte that is not white space (``words_apart``: true of any vocabulary
learned with a pattern that cuts before spaces, as every named pattern but
superword does, and of cl100k_base), the place before such a space is one:
each word of a piece (a space and what follows it, up to the next such
place) is segmented as it would be alone, and the joins in one word never
change which pairs another word offers. Words repeat, so each distinct word
is segmented once (``segment.segment_into``) and the pieces are assembled
from them: a superword inventory is nearly the whole text, its distinct
words a small part of it. ``segment.segment_pieces`` takes this path by
itself when it holds and pays.

After a phase, ``segment_after`` gives the new vocabulary's segmentation
from the old one's (``Words``, which the trainer keeps for its check) by
going on with tiktoken's rule, instead of starting again from the bytes.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba import njit, prange

from toktoktok.kernel_args import int64s, readonly
from toktoktok.segment import (
    build_table,
    join_parts,
    segment_into,
    segment_pieces,
    table_capacity,
    table_lookup,
)
from toktoktok.vocab import Vocab
from toktoktok.word_ids import distinct_words, white, word_starts


@njit(cache=True, nogil=True)
def words_apart(tok_buf: np.ndarray, tok_off: np.ndarray) -> bool:
    """Whether no token holds a space right after a byte that is not white space.

        >>> words_apart(np.frombuffer(b"a b", np.uint8), np.array([0, 1, 2, 3])), \\
        ...     words_apart(np.frombuffer(b"a b", np.uint8), np.array([0, 3]))
        (True, False)
    """
    for t in range(len(tok_off) - 1):
        for i in range(tok_off[t] + 1, tok_off[t + 1]):
            if tok_buf[i] == 32 and not white(tok_buf[i - 1]):
                return False
    return True


@njit(cache=True, nogil=True)
def gather_spans(buf, starts, lengths):
    """The bytes of the given spans of ``buf``, one after another, and their offsets.

        >>> b, o = gather_spans(np.frombuffer(b"abcdef", np.uint8), np.array([4, 0]), np.array([2, 1]))
        >>> b.tobytes(), o.tolist()
        (b'efa', [0, 2, 3])
    """
    off2 = np.zeros(len(starts) + 1, dtype=np.int64)
    off2[1:] = np.cumsum(lengths)
    buf2 = np.empty(off2[-1], dtype=np.uint8)
    for d in range(len(starts)):
        buf2[off2[d] : off2[d + 1]] = buf[starts[d] : starts[d] + lengths[d]]
    return buf2, off2


@njit(cache=True, parallel=True, nogil=True)
def _assemble(off, starts, ids, off2, sym2, lens2, sym, lens):
    """Each piece's ranks: its words' ranks one after another."""
    for w in prange(len(off) - 1):
        pos = off[w]
        for k in range(starts[w], starts[w + 1]):
            d = ids[k]
            src = off2[d]
            for j in range(lens2[d]):
                sym[pos + j] = sym2[src + j]
            pos += lens2[d]
        lens[w] = pos - off[w]


class Words(NamedTuple):
    """An inventory's words, each distinct one segmented with a vocabulary: enough to
    give every piece's segmentation again (``assemble``) without segmenting anything."""

    starts: np.ndarray  # word_starts(buf, off)
    ids: np.ndarray  # each word's distinct id
    off2: np.ndarray  # distinct word d's ranks: sym2[off2[d] : off2[d] + lens2[d]]
    sym2: np.ndarray
    lens2: np.ndarray


def words_of(vocab: Vocab, buf: np.ndarray, off: np.ndarray) -> Words | None:
    """The inventory's words segmented with ``vocab``, or None where a word at a time
    is not the same (``words_apart``) or does not pay (pieces of fewer than two
    words on average)."""
    buf, off = readonly(buf), int64s(off)
    if len(off) < 2 or not words_apart(vocab.buf, vocab.off):
        return None
    starts = word_starts(buf, off)
    return segment_words(vocab, buf, off, starts) if starts[-1] >= 2 * (len(off) - 1) else None


def segment_words(vocab: Vocab, buf: np.ndarray, off: np.ndarray, starts: np.ndarray) -> Words:
    """Each distinct word segmented with ``vocab`` (``words_apart(vocab)`` must hold;
    ``starts``: ``word_starts(buf, off)``)."""
    ids = np.empty(int(starts[-1]), dtype=np.int32)
    d_start, d_len = distinct_words(buf, off, starts, ids)
    buf2, off2 = gather_spans(buf, d_start, d_len)
    sym2 = np.zeros(len(buf2), dtype=np.int32)
    lens2 = np.zeros(len(off2) - 1, dtype=np.int32)
    segment_into(vocab, buf2, off2, sym2, lens2)
    return Words(starts, ids, off2, sym2, lens2)


@njit(cache=True, parallel=True)
def _piece_parts(starts, ids, lens2, out):
    """Each piece's number of parts: the sum of its words'."""
    for w in prange(len(starts) - 1):
        n = 0
        for k in range(starts[w], starts[w + 1]):
            n += lens2[ids[k]]
        out[w] = n


def packed(words: Words) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pieces' ranks one piece after another, with no room between them:
    ``(sym, sym_off, lens)``, piece w's ranks ``sym[sym_off[w] : sym_off[w] +
    lens[w]]``. A superword inventory's pieces have several bytes a part: this
    holds a fraction of ``assemble``'s array of one rank a byte.

        >>> v = Vocab.initial(hardcoded=False).extended([b"in", b"th", b" th", b" the"])
        >>> buf, off = np.frombuffer(b"in the in the", np.uint8), np.array([0, 6, 13])
        >>> sym, sym_off, lens = packed(words_of(v, buf, off))
        >>> sym.tolist(), sym_off.tolist(), lens.tolist()
        ([256, 259, 220, 256, 259], [0, 2, 5], [2, 3])
    """
    n = len(words.starts) - 1
    lens = np.empty(n, dtype=np.int32)
    _piece_parts(words.starts, words.ids, words.lens2, lens)
    sym_off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=sym_off[1:])
    sym = np.empty(int(sym_off[-1]), dtype=np.int32)
    _assemble(sym_off, words.starts, words.ids, words.off2, words.sym2, words.lens2, sym, lens)
    return sym, sym_off, lens


def assemble(words: Words, off: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """``segment_pieces``' ``(sym, lens)`` for the inventory of ``size`` bytes whose words these are.

        >>> v = Vocab.initial(hardcoded=False).extended([b"in", b"th", b" th", b" the"])
        >>> buf, off = np.frombuffer(b"in the in the", np.uint8), np.array([0, 6, 13])
        >>> by_words = assemble(words_of(v, buf, off), off, len(buf))
        >>> sym, lens = np.zeros(13, np.int32), np.zeros(2, np.int32)
        >>> segment_into(v, buf, off, sym, lens)
        >>> np.array_equal(by_words[0], sym) and np.array_equal(by_words[1], lens), lens.tolist()
        (True, [2, 3])
    """
    off = int64s(off)
    sym = np.zeros(size, dtype=np.int32)
    lens = np.zeros(len(off) - 1, dtype=np.int32)
    _assemble(off, words.starts, words.ids, words.off2, words.sym2, words.lens2, sym, lens)
    return sym, lens


# ---------------------------------------------------------------------------
# After a phase: the new vocabulary's segmentation, continued from the old one's.
#
# tiktoken's rule joins the lowest-ranked joinable pair first, and every old
# rank is below every new one: while an old token can be made, one is, as
# with the old vocabulary alone. So the rule with the new vocabulary passes
# through the old vocabulary's segmentation, and goes on from there by the
# same rule (new tokens, and old ones that a new token next to its neighbour
# makes joinable). A superword phase's pieces are segmented with the old
# vocabulary a word at a time, which is fast, and continued.


@njit(cache=True)
def _continue_one(table, tok_buf, tok_off, buf, start, parts, n_parts, out, scratch) -> int:
    """tiktoken's rule on ``buf[start:]`` from the given parts (ranks, in order)
    instead of its bytes; writes the ranks to ``out``, returns their count.
    ``scratch``: at least ``8 * n_parts + 5`` int64 entries."""
    n = n_parts
    pos = scratch[0 : n + 1]  # byte offset of part i; pos[n]: the piece's end
    pair_rank = scratch[n + 1 : 2 * n + 2]
    part_rank = scratch[2 * n + 2 : 3 * n + 3]
    at = start
    for i in range(n):
        r = np.int64(parts[i])
        pos[i] = at
        at += tok_off[r + 1] - tok_off[r]
        part_rank[i] = r
    pos[n] = at
    for i in range(n - 1):
        pair_rank[i] = table_lookup(table, tok_buf, tok_off, buf, pos[i], pos[i + 2])
    return join_parts(table, tok_buf, tok_off, buf, n, pos, pair_rank, part_rank, scratch[3 * n + 3 :], out)


@njit(cache=True)
def _parts_of(w, starts, ids, off2, sym2, lens2, parts) -> int:
    """Piece ``w``'s ranks as its words' segmentations give them, into ``parts``; returns their count."""
    n = 0
    for k in range(starts[w], starts[w + 1]):
        d = ids[k]
        for j in range(lens2[d]):
            parts[n + j] = sym2[off2[d] + j]
        n += lens2[d]
    return n


@njit(cache=True, parallel=True, nogil=True)
def _continue_all(table, tok_buf, tok_off, buf, off, starts, ids, off2, sym2, lens2, sym, sym_off, lens, unlike,
                  n_blocks):
    """Each piece continued by tiktoken's rule from its words' segmentation. With
    ``unlike`` empty, written to ``sym``/``lens`` (piece w's at ``sym_off[w]``);
    else compared with them (left as they are): ``unlike[w]`` is 1 where piece
    w's differs. Each piece's parts are gathered in a small buffer of the
    block's, so no inventory-sized array of the words' segmentation is made."""
    n_words = len(off) - 1
    per_block = (n_words + n_blocks - 1) // n_blocks
    compare = len(unlike) > 0
    for b in prange(n_blocks):
        lo = b * per_block
        hi = min(n_words, lo + per_block)
        longest = 1
        for w in range(lo, hi):
            longest = max(longest, off[w + 1] - off[w])  # a piece has at most a part a byte
        scratch = np.empty(8 * longest + 5, dtype=np.int64)
        parts = np.empty(longest + 1, dtype=np.int32)
        out = np.empty(longest + 1, dtype=np.int64)
        for w in range(lo, hi):
            n = _parts_of(w, starts, ids, off2, sym2, lens2, parts)
            c = _continue_one(table, tok_buf, tok_off, buf, off[w], parts, n, out, scratch)
            if compare:
                same = c == lens[w]
                k = 0
                while same and k < c:
                    same = sym[sym_off[w] + k] == out[k]
                    k += 1
                unlike[w] = 0 if same else 1
            else:
                for k in range(c):
                    sym[sym_off[w] + k] = out[k]
                lens[w] = c


def _has_every_byte(vocab: Vocab) -> bool:
    """Whether each of the 256 bytes is a token (else a part may have no rank to go on from)."""
    singles = np.flatnonzero(np.diff(vocab.off) == 1)
    return len(np.unique(vocab.buf[vocab.off[singles]])) == 256


def segment_after(before: Vocab, after: Vocab, buf: np.ndarray, off: np.ndarray, *,
                  words: Words | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``segment_pieces(after, buf, off)`` where ``after`` extends ``before`` by
    ranks above all of its own: where ``before`` segments the pieces a word at
    a time (``words``: ``words_of(before, buf, off)``, if known), they are
    segmented so and continued by tiktoken's rule with ``after``; else from
    their bytes.

        >>> before = Vocab.initial(hardcoded=False).extended([b"in", b"th", b" th", b" the"])
        >>> after = before.extended([b"in the", b" in the"])
        >>> buf, off = np.frombuffer(b"in the in the", np.uint8), np.array([0, 6, 13])
        >>> [a.tolist() for a in segment_after(before, after, buf, off)][1]
        [1, 1]
    """
    buf, off = readonly(buf), int64s(off)
    words = _continuable(before, buf, off, words)
    if words is None:
        return segment_pieces(after, buf, off)
    sym = np.zeros(len(buf), dtype=np.int32)
    lens = np.zeros(len(off) - 1, dtype=np.int32)
    _continue(after, buf, off, words, sym, off, lens, np.zeros(0, dtype=np.uint8))
    return sym, lens


def unlike_after(before: Vocab, after: Vocab, buf: np.ndarray, off: np.ndarray, sym: np.ndarray,
                 sym_off: np.ndarray, lens: np.ndarray, *, words: Words | None = None) -> np.ndarray:
    """Which pieces ``sym`` (piece w's ranks: ``sym[sym_off[w] : sym_off[w] + lens[w]]``,
    as ``packed`` or, with ``sym_off = off``, ``segment_pieces`` lay them out)
    segments unlike ``segment_after(before, after, buf, off, words=words)``: a
    bool a piece. Where the pieces go a word at a time, each is compared as
    it is continued, without an inventory-sized array of the other segmentation.

        >>> before = Vocab.initial(hardcoded=False).extended([b"in", b"th", b" th", b" the"])
        >>> after = before.extended([b"in the", b" in the"])
        >>> buf, off = np.frombuffer(b"in the in the", np.uint8), np.array([0, 6, 13])
        >>> sym, lens = segment_after(before, after, buf, off)
        >>> sym[0] = 105  # piece 0 now begins with b"i" instead of b"in the"
        >>> unlike_after(before, after, buf, off, sym, off, lens).tolist()
        [True, False]
    """
    buf, off, sym_off = readonly(buf), int64s(off), int64s(sym_off)
    words = _continuable(before, buf, off, words)
    if words is None:
        theirs, their_lens = segment_pieces(after, buf, off)
        return _unlike(sym, sym_off, lens, theirs, off, their_lens)
    unlike = np.zeros(len(off) - 1, dtype=np.uint8)
    if len(unlike):
        _continue(after, buf, off, words, sym, sym_off, lens, unlike)
    return unlike.view(np.bool_)


def _continuable(before: Vocab, buf: np.ndarray, off: np.ndarray, words: Words | None) -> Words | None:
    """``before``'s words of the pieces where tiktoken's rule can go on from them, else None."""
    if not _has_every_byte(before):
        return None
    return words if words is not None else words_of(before, buf, off)


def _continue(after: Vocab, buf: np.ndarray, off: np.ndarray, words: Words, sym: np.ndarray,
              sym_off: np.ndarray, lens: np.ndarray, unlike: np.ndarray) -> None:
    table = build_table(after.buf, after.off, table_capacity(len(after)))
    blocks = max(1, min(len(off) - 1, 64 * numba.get_num_threads()))
    _continue_all(table, after.buf, after.off, buf, off, words.starts, words.ids, words.off2, words.sym2,
                  words.lens2, sym, sym_off, lens, unlike, blocks)


@njit(cache=True, nogil=True)
def _unlike(sym_a, off_a, lens_a, sym_b, off_b, lens_b):
    """Whether each piece's ranks differ between two segmentations (piece w's:
    ``sym_a[off_a[w]:][:lens_a[w]]`` and the same of b)."""
    out = np.zeros(len(lens_a), dtype=np.bool_)
    for w in range(len(lens_a)):
        same = lens_a[w] == lens_b[w]
        k = 0
        while same and k < lens_a[w]:
            same = sym_a[off_a[w] + k] == sym_b[off_b[w] + k]
            k += 1
        out[w] = not same
    return out
