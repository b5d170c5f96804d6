"""Text as segments of one buffer: what the scanner counts, with no object per segment.

A ``Segments`` is a byte buffer and the bounds of the segments in it (Arrow's
layout of a string column: segment ``s`` is ``data[bounds[s]:bounds[s+1]]``).
The scanner counts each segment on its own, so a segment boundary is a
boundary between pieces: a row of a table, a file of a folder, a document
that must not run into the next. A column of rows goes to the counting
threads as one ``Segments`` (a view of Arrow's buffers), not one Python
string a row; ``gather`` keeps a subset of the rows, ``split`` cuts a long
run into batches.

    >>> import numpy as np
    >>> s = Segments(np.frombuffer(b"onetwothree", np.uint8), np.array([0, 3, 6, 11]))
    >>> len(s), s.count, [bytes(x) for x in s.texts()]
    (11, 3, [b'one', b'two', b'three'])
    >>> [bytes(x) for x in gather(s, np.array([True, False, True])).texts()]
    [b'one', b'three']
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numba import njit

from toktoktok.kernel_args import int64s, readonly


@dataclass(frozen=True)
class Segments:
    """Segments of UTF-8 text in one buffer; ``bounds`` starts at 0 and ends at ``len(data)``."""

    data: np.ndarray  # uint8
    bounds: np.ndarray  # int64, one more than the segments

    @classmethod
    def of(cls, data: np.ndarray, offsets: np.ndarray) -> Segments:
        """The segments ``offsets`` marks in ``data`` (any start: rebased, the buffer sliced, no copy)."""
        offsets = np.asarray(offsets, dtype=np.int64)
        first, last = int(offsets[0]), int(offsets[-1])
        return cls(data[first:last], offsets - first)

    def __len__(self) -> int:
        return int(self.bounds[-1])

    @property
    def count(self) -> int:
        return len(self.bounds) - 1

    def texts(self) -> Iterator[memoryview]:
        """Each segment as a view (for the rare paths that need one object each)."""
        view = memoryview(self.data)
        bounds = self.bounds.tolist()
        for a, b in zip(bounds, bounds[1:]):
            yield view[a:b]


def gather(segments: Segments, keep: np.ndarray) -> Segments:
    """The segments where ``keep`` is true, copied end to end (all of them: no copy)."""
    keep = np.asarray(keep, dtype=np.bool_)
    if keep.all():
        return segments
    data, bounds = _gather(readonly(segments.data), int64s(segments.bounds), keep)
    return Segments(data, bounds)


def split(segments: Segments, size: int) -> list[Segments]:
    """``segments`` cut between segments into runs of about ``size`` bytes or more
    (a segment is never cut).

        >>> s = Segments(np.zeros(10, np.uint8), np.array([0, 2, 4, 6, 8, 10]))
        >>> [x.count for x in split(s, 3)]
        [2, 2, 1]
    """
    bounds = segments.bounds
    if len(segments) <= size or segments.count <= 1:
        return [segments]
    cuts = [0]
    while cuts[-1] < segments.count:
        at = int(np.searchsorted(bounds, bounds[cuts[-1]] + size, side="left"))
        cuts.append(min(max(at, cuts[-1] + 1), segments.count))
    return [Segments.of(segments.data, bounds[a : b + 1]) for a, b in zip(cuts, cuts[1:])]


@njit(cache=True, nogil=True)
def _gather(data, bounds, keep):
    total = 0
    kept = 0
    for s in range(len(keep)):
        if keep[s]:
            total += bounds[s + 1] - bounds[s]
            kept += 1
    out = np.empty(total, dtype=np.uint8)
    out_bounds = np.zeros(kept + 1, dtype=np.int64)
    at = 0
    k = 0
    for s in range(len(keep)):
        if keep[s]:
            a, b = bounds[s], bounds[s + 1]
            out[at : at + b - a] = data[a:b]
            at += b - a
            k += 1
            out_bounds[k] = at
    return out, out_bounds
