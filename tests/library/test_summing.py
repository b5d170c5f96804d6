"""``summing.RunningSum`` against ``counts.sum_tables`` (itself checked against a
Counter in tests/stages/test_ingest_exact.py): the same rows, in the same order, however the
tables are cut and added."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toktoktok import counts
from toktoktok.summing import RunningSum

pieces = st.binary(min_size=1, max_size=24)
rows = st.lists(st.tuples(pieces, st.integers(1, 1000)), max_size=60)


def table(pairs: list[tuple[bytes, int]]):
    merged: dict[bytes, int] = {}
    for piece, n in pairs:  # a count table holds each piece once
        merged[piece] = merged.get(piece, 0) + n
    return counts.from_lists(list(merged), list(merged.values()))


@settings(max_examples=150, deadline=None)
@given(st.lists(rows, max_size=8))
def test_adding_tables_one_by_one_is_sum_tables_of_them(groups):
    tables = [table(g) for g in groups]
    s = RunningSum(rows=1, arena_bytes=1)  # grows from nothing: every part doubles many times
    for t in tables:
        s.add(t)
    want = counts.sum_tables(tables)
    got = s.table()
    assert got.to_pylist() == want.to_pylist()
    assert s.rows == len(want)
    assert s.table_bytes == counts.table_bytes(want) if len(want) else s.table_bytes == 0


def test_the_sum_is_a_counter_of_every_row_and_later_adds_leave_a_taken_table_alone():
    rng = np.random.default_rng(0)
    words = [bytes(rng.integers(0, 256, rng.integers(1, 40)).astype(np.uint8)) for _ in range(3000)]
    s, expected = RunningSum(), collections.Counter()
    first = None
    for round_ in range(20):
        picks = rng.choice(len(words), 800, replace=False)
        pairs = [(words[i], int(rng.integers(1, 50))) for i in picks]
        s.add(table(pairs))
        for piece, n in pairs:
            expected[piece] += n
        if round_ == 0:
            first = s.table()
            first_rows = first.to_pylist()
    assert dict(zip(*(s.table().column(c).to_pylist() for c in ("piece", "count")))) == dict(expected)
    assert first.to_pylist() == first_rows  # a table taken before is a copy


def test_a_count_past_2_63_stops_with_overflow_error():
    s = RunningSum()
    s.add(counts.from_lists([b"a"], [2**62]))
    s.add(counts.from_lists([b"a"], [2**62 - 1]))  # 2**63 - 1: still fits
    with pytest.raises(OverflowError, match="2\\*\\*63"):
        s.add(counts.from_lists([b"b", b"a"], [1, 1]))


def test_a_piece_larger_than_the_arena_and_empty_tables():
    s = RunningSum(arena_bytes=16)
    s.add(counts.SCHEMA.empty_table())
    s.add(counts.from_lists([b"x" * 100_000, b"y"], [2, 3]))
    s.add(counts.from_lists([b"y", b"x" * 100_000], [1, 1]))
    assert s.table().to_pylist() == [{"piece": b"x" * 100_000, "count": 3}, {"piece": b"y", "count": 4}]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="ab é\n\t1'", max_size=200), min_size=1, max_size=6), st.integers(1, 3))
def test_count_is_count_pieces_of_the_same_segments(texts, weight):
    from toktoktok import scanner, span_table

    segments = [t.encode() for t in texts if t]
    if not segments:
        return
    buf = np.frombuffer(b"".join(segments), np.uint8)
    seg_off = np.cumsum([0] + [len(x) for x in segments])
    for which in scanner.PATTERN_IDS.values():
        s = RunningSum(rows=1, arena_bytes=1)
        s.count(buf, seg_off, which, weight)
        pb, po, c = span_table.count_pieces(buf, seg_off, which)
        want = [{"piece": pb[po[p]:po[p + 1]].tobytes(), "count": int(c[p]) * weight} for p in range(len(c))]
        got = s.table().to_pylist()  # pieces of 1 or 2 bytes come last, in byte order
        assert sorted(got, key=lambda r: r["piece"]) == sorted(want, key=lambda r: r["piece"])
        assert s.rows == len(want) and s.table_bytes == counts.table_bytes(s.table())


def test_count_grows_over_a_big_text_and_keeps_adding():
    from toktoktok import scanner, span_table

    rng = np.random.default_rng(1)
    words = [bytes(rng.integers(97, 123, rng.integers(1, 12)).astype(np.uint8)) for _ in range(20000)]
    text = b" ".join(words[i] for i in rng.integers(0, len(words), 200000))
    buf = np.frombuffer(text, np.uint8)
    s = RunningSum(rows=1, arena_bytes=1)
    s.count(buf, np.array([0, len(text) // 2, len(text)]), scanner.DEFAULT)
    s.count(buf, np.array([0, len(text)]), scanner.DEFAULT, 2)
    pb, po, c = span_table.count_pieces(buf, np.array([0, len(text) // 2, len(text)]), scanner.DEFAULT)
    pb2, po2, c2 = span_table.count_pieces(buf, np.array([0, len(text)]), scanner.DEFAULT)
    want = collections.Counter()
    for p in range(len(c)):
        want[pb[po[p]:po[p + 1]].tobytes()] += int(c[p])
    for p in range(len(c2)):
        want[pb2[po2[p]:po2[p + 1]].tobytes()] += 2 * int(c2[p])
    got = s.table()
    assert dict(zip(got["piece"].to_pylist(), got["count"].to_pylist())) == dict(want)


def test_short_pieces_counted_apart_join_the_rows_whenever_the_sum_is_read():
    """``count`` keeps pieces of 1 and 2 bytes apart until the sum is read (rows,
    table_bytes, arrays, a sum into another): reads in between, tables added in
    between and every byte value give the same sum as counting them one by one."""
    from toktoktok import scanner, span_table

    text = b"\n".join(bytes([a, b]) for a in range(97, 123) for b in range(65, 91))  # 2-byte words
    text += bytes(range(128)) + "é中 ab a\n\n\t1 12 123 ".encode() * 3
    buf = np.frombuffer(text, np.uint8)
    pb, po, c = span_table.count_pieces(buf, np.array([0, len(buf)]), scanner.DEFAULT)
    one = collections.Counter({pb[po[p]:po[p + 1]].tobytes(): int(c[p]) for p in range(len(c))})
    assert sum(1 for piece in one if len(piece) <= 2) > 300  # most of them short
    s = RunningSum(rows=1, arena_bytes=1)
    s.count(buf, np.array([0, len(buf)]), scanner.DEFAULT)
    assert s.rows == len(one)  # read: the short ones join
    s.add(counts.from_lists([b"a", b"zz", b"\xff\xfe"], [5, 1, 2]))
    s.count(buf, np.array([0, len(buf)]), scanner.DEFAULT, 3)
    total = RunningSum()
    total.add_sum(s)  # read through arrays()
    want = collections.Counter({piece: 4 * n for piece, n in one.items()})
    want.update({b"a": 5, b"zz": 1, b"\xff\xfe": 2})
    got = {r["piece"]: r["count"] for r in total.table().to_pylist()}
    assert got == dict(want)
    assert s.table_bytes == total.table_bytes == counts.table_bytes(total.table())
