"""``summing.RunningSum`` against ``counts.sum_tables`` (itself checked against a
Counter in test_exact_ingest): the same rows, in the same order, however the
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
