"""piece_order: the radix-and-ties sort of pieces equals Python's order of bytes
and Arrow's sort_indices, on pieces built to tie on their first 8 bytes."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import pytest

from toktoktok import counts, piece_order


def _flat(pieces: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    off = np.zeros(len(pieces) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in pieces], out=off[1:])
    return np.frombuffer(b"".join(pieces), dtype=np.uint8), off


def _tying(rng: np.random.Generator, n: int) -> list[bytes]:
    """Distinct pieces over a tiny alphabet (zero bytes and 0xFF among it), many
    sharing their first 8 bytes, some prefixes of others, a few long."""
    alphabet = np.array([0, 1, 0x61, 0xFF], dtype=np.uint8)
    heads = [bytes(alphabet[rng.integers(0, 4, 8)]) for _ in range(5)]
    out = set()
    while len(out) < n:
        size = int(rng.choice([0, 1, 2, 7, 8, 9, 12, 16, 17, 40]))
        tail = bytes(alphabet[rng.integers(0, 4, size)])
        out.add(heads[rng.integers(0, 5)] + tail if rng.random() < 0.7 else tail)
    return sorted(out, key=lambda _: rng.random())


@pytest.mark.parametrize("seed", range(4))
def test_order_is_byte_order(seed):
    rng = np.random.default_rng(seed)
    pieces = _tying(rng, 3000)
    buf, off = _flat(pieces)
    got = piece_order.order(buf, off).tolist()
    assert got == sorted(range(len(pieces)), key=lambda p: pieces[p])
    table = counts.from_lists(pieces, list(range(1, len(pieces) + 1)))
    arrow = table.take(pc.sort_indices(table, [("piece", "ascending")]))
    assert counts.from_arrays(*piece_order.sorted_arrays(*counts.to_arrays(table))).equals(arrow)
    assert piece_order.sorted_table(buf, off, np.arange(1, len(pieces) + 1)).equals(arrow)


def test_a_long_run_of_equal_first_words_is_merged():
    """More pieces sharing their first 8 bytes than insertion sorts (``_RUN``):
    runs sorted by insertion, then merged, some of them prefixes of others."""
    rng = np.random.default_rng(7)
    head = b"        "
    pieces = sorted({head + bytes(rng.integers(97, 100, int(rng.integers(0, 6)), dtype=np.uint8))
                     for _ in range(4000)}, key=lambda _: rng.random())
    assert len(pieces) > 20 * piece_order._RUN
    buf, off = _flat(pieces)
    order = piece_order.order(buf, off)
    assert [pieces[p] for p in order] == sorted(pieces)
    assert piece_order.pieces_sorted(*_flat([pieces[p] for p in order]))


@pytest.mark.parametrize("seed", range(3))
def test_runs_that_share_many_words_are_ordered_word_by_word(seed):
    """Runs far longer than ``_DEEP`` that share their first 8, 16, 24 bytes (as
    lines of prose do), with zero bytes and pieces that are prefixes of others at
    every depth: each level orders by its next 8 bytes, the short runs by comparison."""
    rng = np.random.default_rng(seed)
    alphabet = np.array([0, 1, 0x61, 0xFF], dtype=np.uint8)
    stems = [b"The following " * k for k in (1, 2)] + [b"\x00" * 16, b"ab" * 12]
    out = set()
    while len(out) < 6000:
        stem = stems[rng.integers(0, len(stems))]
        cut = int(rng.integers(len(stem) - 9, len(stem) + 1))  # some end inside the shared bytes
        out.add(stem[:cut] + bytes(alphabet[rng.integers(0, 4, int(rng.choice([0, 1, 3, 8, 9, 20])))]))
    pieces = sorted(out, key=lambda _: rng.random())
    assert len(pieces) > 20 * piece_order._DEEP
    order = piece_order.order(*_flat(pieces))
    assert [pieces[p] for p in order] == sorted(pieces)


def test_pieces_sorted_sees_one_pair_out_of_order():
    pieces = [bytes([b]) + b"x" * 9 for b in range(50)]
    assert piece_order.pieces_sorted(*_flat(pieces))
    for i in range(49):
        swapped = pieces.copy()
        swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
        assert not piece_order.pieces_sorted(*_flat(swapped))
    assert not piece_order.pieces_sorted(*_flat([b"ab", b"a"]))  # a prefix first
    assert piece_order.pieces_sorted(*_flat([b"a", b"a\x00"]))


def test_empty_and_single():
    assert piece_order.order(np.zeros(0, np.uint8), np.zeros(1, np.int64)).tolist() == []
    table = piece_order.sorted_table(np.zeros(0, np.uint8), np.zeros(1, np.int64), np.zeros(0, np.int64))
    assert table.num_rows == 0 and table.schema == counts.SCHEMA
    assert piece_order.order(*_flat([b"z"])).tolist() == [0]
