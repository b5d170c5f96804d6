"""The merge loop's phase times (``train_split_seconds``): the kernel reads the
time-stamp counter at its first pop and at its ``EARLY_MERGES``-th merge where
``clock.COUNTS``, and the caller turns the readings into seconds; elsewhere a
thread polls the loop's progress."""

from __future__ import annotations

import time

import pytest

from tests.helpers import as_inventory, piece_counts, stdlib_text
from toktoktok import clock, merge
from toktoktok.merge import EARLY_MERGES, train_phase
from toktoktok.patterns import DEFAULT_PATTERN
from toktoktok.vocab import Vocab


def timed_run(merges: int) -> tuple[dict[str, float], float, int]:
    buf, off, counts = as_inventory(piece_counts(stdlib_text(300_000), DEFAULT_PATTERN))
    began = time.perf_counter()
    result = train_phase(Vocab.initial(hardcoded=False), buf, off, counts, merges=merges)
    return result.seconds, time.perf_counter() - began, result.made


@pytest.mark.skipif(not clock.COUNTS, reason="no time-stamp counter read on this processor")
def test_the_counter_marks_the_first_pop_and_the_early_merges():
    seconds, whole, made = timed_run(EARLY_MERGES + 600)
    assert made > EARLY_MERGES
    # both marks were read: a missing early mark would leave the later merges no time
    assert seconds["pairs"] > 0 and seconds["early_merges"] > 0 and seconds["later_merges"] > 0
    assert sum(seconds.values()) <= whole + 0.005  # the phases lie within the call (rounded to ms)


def test_without_the_counter_the_progress_is_polled(monkeypatch):
    monkeypatch.setattr(merge, "COUNTS", False)

    def no_counter(*_):
        raise AssertionError("the counter's readings were used where COUNTS is off")

    monkeypatch.setattr(merge, "to_seconds", no_counter)
    seconds, whole, made = timed_run(EARLY_MERGES + 600)
    assert made > EARLY_MERGES
    assert min(seconds.values()) >= 0
    assert sum(seconds.values()) <= whole + 0.005


def test_the_counter_turns_into_seconds_on_the_line_through_two_readings():
    start, end = (1_000, 5.0), (3_000, 6.0)
    assert clock.to_seconds(1_000, start, end) == 5.0
    assert clock.to_seconds(2_500, start, end) == 5.75
    assert clock.to_seconds(3_000, start, end) == 6.0
    if clock.COUNTS:
        first = clock.now_cycles()
        time.sleep(0.01)
        assert clock.now_cycles() > first
    else:
        assert clock.now_cycles() == 0
