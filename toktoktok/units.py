"""Sampling units: a document, or a part of a large one cut at the pattern's safe places.

The held-out choice and the sample (``toktoktok.sampling``) decide units,
not documents, so that a file with no blank line, or a JSON line of 100 MB,
is sampled like any other text. The rule (docs/training.md, Units) depends
only on a file's bytes and the budget, never on how the file is read or
split: a document of at most ``bound(working_set_mb)`` bytes is one unit; a
larger one is cut on a grid of ``grid(bound)`` bytes counted from the start
of the stream (a ``.txt`` file's first byte, a row's first byte of text), at
the last safe place ``p`` with ``max(start, g - grid) < p <= g`` for every
grid point ``g`` inside it. Where a grid step holds no safe place the unit
grows past the bound (``Splitter.over_bound`` counts such units).

Safe places are ``pretokenize``'s, read on UTF-8 bytes: for o200k and gpt2
only those before a space, for superword only those after a line break
(``Pattern.cut_rule``); never strictly inside a special token. Invalid bytes decode to U+FFFD, which is not white space,
and never swallow an ASCII byte, so the rule on bytes is the rule on the
decoded text.

    >>> data = b"aa bb\\ncc dd ee"
    >>> reference_safe(data, breaks=True)
    [2, 6, 8, 11]
    >>> reference_cuts(data, 0, len(data), grid=4, breaks=True, tokens=())
    [2, 8, 11]
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import regex
from numba import njit

from toktoktok import sampling
from toktoktok.documents import space_at

MAX_BOUND = 1 << 20  # a unit's bound never exceeds 1 MiB
BOUND_PER_CAPACITY = 256  # ... nor 1/256 of the capacity
# grid steps per bound: parts span less than two steps. The grid is finer than the bound
# asks because the kept text's spread is that of the units' sizes: with units of about
# capacity / 4096 the sample's size is within 1.6% of the capacity one time in three
# (standard deviation), so within 5% almost always; with units of capacity / 256 it
# would be 6%. A grid cut needs only the bytes around its grid point (about two grid
# steps and the document's start), which lets an engine that splits a file into byte
# ranges find the same units.
GRID_PER_BOUND = 16


def bound(working_set_mb: int) -> int:
    """The largest document kept whole as one unit.

        >>> bound(1), bound(64), bound(4096)
        (1638, 104857, 1048576)
    """
    return max(1, min(MAX_BOUND, sampling.capacity(working_set_mb) // BOUND_PER_CAPACITY))


def grid(unit_bound: int) -> int:
    """The step of the grid a large document is cut on."""
    return max(1, unit_bound // GRID_PER_BOUND)


# ------------------------------------------------------------- safe places

_WS = regex.compile(r"\s")


def char_offsets(data: bytes) -> tuple[str, list[int]]:
    """``data`` decoded as ``sources`` does (UTF-8, invalid bytes replaced by U+FFFD)
    and the byte offset where each character starts (and, last, ``len(data)``).

        >>> char_offsets(b"a\\xc3\\xa9\\xffb")
        ('aé\\ufffdb', [0, 1, 3, 4, 5])
    """
    spans: dict[int, int] = {}

    def record(exc: UnicodeDecodeError) -> tuple[str, int]:
        spans[exc.start] = exc.end
        return "\ufffd", exc.end

    import codecs

    codecs.register_error("toktoktok-units-reference", record)
    text = data.decode("utf-8", "toktoktok-units-reference")
    at, out = 0, []
    for ch in text:
        out.append(at)
        at = spans[at] if ch == "\ufffd" and at in spans else at + len(ch.encode("utf-8"))
    return text, [*out, at]


def reference_safe(data: bytes, *, breaks: bool, spaces: bool = True) -> list[int]:
    """Every safe place ``0 < p < len(data)`` of UTF-8 ``data`` (special tokens aside),
    judged on the decoded text: the plain reference of ``last_safe``."""
    text, at = char_offsets(data)
    out = []
    for i in range(1, len(text)):
        last, first = text[i - 1], text[i]
        if (breaks and last in "\r\n" and not _WS.match(first)) or (spaces and first == " " and not _WS.match(last)):
            out.append(at[i])
    return out


def reference_units(data: bytes, unit_bound: int, *, cut: bool, breaks: bool, spaces: bool = True,
                    tokens: Sequence[str] = ()) -> list[tuple[int, int]]:
    """A ``.txt`` file's units as ``(start, end)`` byte offsets, from the decoded
    text (``documents.reference_ends``) and ``reference_cuts``: the plain
    reference of ``Splitter``.

        >>> reference_units(b"aa bb cc\\n\\ndd", 4, cut=True, breaks=True)
        [(0, 2), (2, 5), (5, 10), (10, 12)]
    """
    from toktoktok.documents import reference_ends

    text, at = char_offsets(data)
    ends = [at[e] for e in reference_ends(text)]
    out = []
    safe = reference_safe(data, breaks=breaks, spaces=spaces) if cut else []
    for s, e in zip([0, *ends], [*ends, len(data)]):
        if s == e:
            continue
        cuts = _cuts_from(safe, data, s, e, grid(unit_bound), tokens) if cut and e - s > unit_bound else []
        bounds = [s, *cuts, e]
        out += list(zip(bounds, bounds[1:]))
    return out


def _cuts_from(safe: list[int], data: bytes, start: int, end: int, step: int, tokens: Sequence[str]) -> list[int]:
    toks = [t.encode() for t in tokens if t]
    inside = [p for p in safe if start < p < end and not _inside_token(data, p, toks)]
    cuts = []
    for g in range((start // step + 1) * step, end, step):
        k = bisect.bisect_right(inside, g)  # the safe places up to g
        if k and inside[k - 1] > max(start, g - step):
            cuts.append(inside[k - 1])
    return cuts


@njit(cache=True, nogil=True)
def _ws_before(buf, p):
    """Whether the character ending just before ``buf[p]`` is white space (``\\s``)."""
    c = buf[p - 1]
    if c < 0x80:
        return (9 <= c <= 13) or c == 32
    if p >= 2 and buf[p - 2] == 0xC2:
        return c == 0x85 or c == 0xA0
    if p >= 3 and buf[p - 3] >= 0xE1 and buf[p - 3] <= 0xE3:
        return space_at(buf, p - 3)
    return False


@njit(cache=True, nogil=True)
def last_safe(buf, lo, hi, breaks, spaces=True):
    """The last safe place ``p`` with ``lo < p <= hi`` (and ``0 < p < len(buf)``), else -1
    (``breaks``, ``spaces``: whether places after a line break, before a space, are safe).

    The character at ``p`` must lie whole in ``buf`` (or ``buf`` end the text).
    """
    p = min(hi, len(buf) - 1)
    while p > lo and p > 0:
        c = buf[p]
        if spaces and c == 32 and not _ws_before(buf, p):
            return p
        if breaks and (buf[p - 1] == 10 or buf[p - 1] == 13) and not space_at(buf, p):
            return p
        p -= 1
    return -1


def _inside_token(buf: bytes | memoryview, p: int, tokens: Sequence[bytes]) -> bool:
    """Whether an occurrence of a special token starts before ``p`` and ends after it."""
    for tok in tokens:
        n = len(tok)
        if n > 1 and tok in bytes(buf[max(0, p - n + 1) : p + n - 1]):
            return True
    return False


def cut_in(array: np.ndarray, raw: bytes | memoryview, lo: int, hi: int, breaks: bool,
           tokens: Sequence[bytes], spaces: bool = True) -> int:
    """The last safe place in ``(lo, hi]`` of the buffer, not inside a special token; -1 if none."""
    while hi > lo:
        p = last_safe(array, lo, hi, breaks, spaces)
        if p < 0 or not tokens or not _inside_token(raw, p, tokens):
            return p
        hi = p - 1
    return -1


def grid_cuts(array: np.ndarray, raw: bytes | memoryview, base: int, start: int, first_g: int, last_g: int,
              step: int, breaks: bool, tokens: Sequence[bytes], spaces: bool = True) -> list[int]:
    """The cuts (stream offsets) of grid points ``first_g <= g <= last_g`` of a
    document starting at ``start``; ``array[i]`` is the stream's byte ``base + i``."""
    cuts = []
    for g in range(first_g, last_g + 1, step):
        p = cut_in(array, raw, max(start, g - step) - base, g - base, breaks, tokens, spaces)
        if p >= 0:
            cuts.append(base + p)
    return cuts


def reference_cuts(data: bytes, start: int, end: int, *, grid: int, breaks: bool,
                   tokens: Sequence[str], spaces: bool = True) -> list[int]:
    """The cuts of the document ``data[start:end]`` (the stream's origin at 0), from
    ``reference_safe``: the plain reference of the rule."""
    return _cuts_from(reference_safe(data[:end], breaks=breaks, spaces=spaces), data, start, end, grid, tokens)


# --------------------------------------------------------------- streams


class UnitWindow(NamedTuple):
    """A stretch of a ``.txt`` file's bytes and the offsets where units end in it."""

    data: memoryview
    ends: np.ndarray  # offsets e, 0 < e <= len(data): a unit ends after data[:e]
    start: int  # the stream offset of data[0]
    documents: int  # documents that start in the window


class Splitter:
    """Turns a ``.txt`` file's windows (``sources.TxtWindow``: bytes and document
    ends) into ``UnitWindow``s whose ends are the units' ends.

    It holds back the bytes whose unit is not known yet: an open document up
    to ``bound`` (it may still end and stay whole), and in a large document
    the bytes after the last grid point resolved (a grid point needs
    ``margin`` bytes after it). ``cut=False`` (a pattern with no safe places):
    units are documents, nothing is held.
    """

    def __init__(self, unit_bound: int, *, cut: bool, breaks: bool, spaces: bool = True,
                 special_tokens: Sequence[str] = (), origin: int = 0) -> None:
        self.bound, self.step, self.cut, self.breaks, self.spaces = unit_bound, grid(unit_bound), cut, breaks, spaces
        self.tokens = tuple(t.encode("utf-8", "surrogatepass") for t in special_tokens if t)
        self.margin = max([4, *(len(t) for t in self.tokens)])
        self.buf = b""
        self.base = origin  # stream offset of buf[0]
        self.done = origin  # bytes before it were handed out
        self.doc = origin  # where the open document starts
        self.unit = origin  # where the open unit starts
        self.resolved = origin  # grid points up to here are resolved (in the open document)
        self.doc_ends = np.zeros(0, dtype=np.int64)  # known document ends not handed out yet
        self.documents = self.units = self.over_bound = 0
        self.started = False  # whether the open document has a byte

    def feed(self, data: memoryview | bytes, ends: np.ndarray, final: bool = False, *,
             buffer: np.ndarray | None = None, at: int = 0) -> UnitWindow:
        """The next window of the file (``final``: its last; ``data`` may be empty).

        The windows' bytes concatenate to the file's; a window's ``documents``
        are the documents that end in it (the last one at the final window).
        ``buffer``: writable bytes holding ``data`` at ``at``, whose room before
        it (``sources.TxtWindow``) may take the bytes held back."""
        if not self.cut:
            return self._pass(data, ends, final)
        if len(ends):  # numpy throughout, never a Python int per document (source code has millions)
            fresh = np.asarray(ends, dtype=np.int64) + (self.base + len(self.buf))
            self.doc_ends = np.concatenate((self.doc_ends, fresh)) if len(self.doc_ends) else fresh
        keep = max(self.base, self.done - self.margin)
        held = memoryview(self.buf)[keep - self.base :]
        if buffer is not None and len(held) <= at:  # the held bytes before the window, in its room: no copy of it
            if len(held):
                buffer[at - len(held) : at] = np.frombuffer(held, dtype=np.uint8)
            self.buf = memoryview(buffer)[at - len(held) : at + len(data)]
        else:
            self.buf = b"".join((held, data))
        self.base = keep
        avail = self.base + len(self.buf)
        array = np.frombuffer(self.buf, dtype=np.uint8)
        out: list[np.ndarray] = []
        documents = self._small_documents(out)
        while True:
            e = int(self.doc_ends[0]) if len(self.doc_ends) else None
            top = e if e is not None else avail
            if top - self.doc > self.bound:  # a large document: resolve its grid points
                if e is not None and e + self.margin > avail and not final:
                    break  # a special token may straddle its end: wait for the bytes after it
                limit = e - 1 if e is not None else (avail if final else avail - self.margin)
                first = (self.resolved // self.step + 1) * self.step
                last = (limit // self.step) * self.step
                if last >= first:
                    for c in grid_cuts(array, self.buf, self.base, self.doc, first, last, self.step,
                                       self.breaks, self.tokens, self.spaces):
                        self._end_unit(c, out)
                    self.resolved = last
            if e is None:
                break
            self.doc_ends = self.doc_ends[1:]
            self._end_unit(e, out)
            documents += 1
            self.doc = self.resolved = e
            documents += self._small_documents(out)
        hand = max(self.done, self.resolved)
        if final:
            hand = avail
            if avail > self.doc:
                documents += 1
            if avail > self.unit:
                self._end_unit(avail, [])  # counted; the caller closes the file's last unit
        unit_ends = np.concatenate(out) if out else np.zeros(0, dtype=np.int64)
        window = UnitWindow(memoryview(self.buf)[self.done - self.base : hand - self.base],
                            unit_ends - self.done, self.done, documents)
        self.documents += documents
        self.done = hand
        return window

    def _small_documents(self, out: list[np.ndarray]) -> int:
        """The known documents up to the first larger than the bound, ended at once
        (a Python step per document is slow on code, which has many); how many."""
        if not len(self.doc_ends) or self.resolved != self.doc:
            return 0
        ends = self.doc_ends
        sizes = np.diff(ends, prepend=self.doc)
        large = np.flatnonzero(sizes > self.bound)
        k = int(large[0]) if len(large) else len(ends)
        if k:
            out.append(ends[:k])
            self.units += k
            self.unit = self.doc = self.resolved = int(ends[k - 1])
            self.doc_ends = ends[k:]
        return k

    def _end_unit(self, end: int, out: list[np.ndarray]) -> None:
        self.units += 1
        self.over_bound += end - self.unit > self.bound
        out.append(np.array([end], dtype=np.int64))
        self.unit = end

    def _pass(self, data: memoryview | bytes, ends: np.ndarray, final: bool) -> UnitWindow:
        """No cuts: the window as it is, its document ends (``ends``, in the
        window) the unit ends; counted with numpy, not a call per document (source
        code has millions)."""
        start, n = self.done, len(data)
        ends = np.asarray(ends, dtype=np.int64)
        if len(ends):
            bounds = np.concatenate(([self.unit], ends + start))
            self.over_bound += int(np.count_nonzero(np.diff(bounds) > self.bound))
            self.units += len(ends)
            self.unit = self.doc = start + int(ends[-1])
        documents = len(ends)
        self.done = self.base = start + n
        if final and self.done > self.doc:
            documents += 1
            self._end_unit(self.done, [])
        self.documents += documents
        return UnitWindow(memoryview(data), ends, start, documents)


def row_bounds(data: bytes | memoryview, unit_bound: int, *, cut: bool, breaks: bool, spaces: bool = True,
               special_tokens: Sequence[str] = ()) -> list[int]:
    """Where a row's units (``row_parts``) start and end, in its UTF-8 bytes:
    ``[0, ..., len(data)]``.

        >>> row_bounds(b"aa bb cc", 4, cut=True, breaks=True), row_bounds(b"short", 1024, cut=True, breaks=True)
        ([0, 2, 5, 8], [0, 5])
    """
    if len(data) <= unit_bound:
        return [0, len(data)]
    step = grid(unit_bound)
    cuts: list[int] = []
    if cut:
        tokens = tuple(t.encode("utf-8", "surrogatepass") for t in special_tokens if t)
        array = np.frombuffer(data, dtype=np.uint8)
        cuts = grid_cuts(array, data, 0, 0, step, ((len(data) - 1) // step) * step, step, breaks, tokens, spaces)
    return [0, *cuts, len(data)]


def row_parts(text: str, unit_bound: int, *, cut: bool, breaks: bool, spaces: bool = True,
              special_tokens: Sequence[str] = ()) -> tuple[list[tuple[int, str]], int]:
    """A row's units: ``(offset of the unit's first byte in the row's UTF-8 text,
    its text)``, and how many are over the bound.

        >>> row_parts("aa bb cc", 4, cut=True, breaks=True)
        ([(0, 'aa'), (2, ' bb'), (5, ' cc')], 0)
        >>> row_parts("short", 1024, cut=True, breaks=True)
        ([(0, 'short')], 0)
    """
    if len(text) <= unit_bound // 4:
        return [(0, text)], 0
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= unit_bound:
        return [(0, text)], 0
    bounds = row_bounds(data, unit_bound, cut=cut, breaks=breaks, spaces=spaces, special_tokens=special_tokens)
    parts = [(a, data[a:b].decode("utf-8", "surrogatepass")) for a, b in zip(bounds, bounds[1:])]
    return parts, sum(b - a > unit_bound for a, b in zip(bounds, bounds[1:]))
