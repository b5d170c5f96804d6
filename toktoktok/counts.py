"""Piece-count tables: distinct pieces with their counts, as Arrow tables.

A count table has the columns ``piece: large_binary`` and ``count: uint64``;
every piece appears once. Ingest makes one per batch of text, sums them into
chunk files, and train sums the chunk files into the phase's inventory.

Summing runs in the numba hash table of ``toktoktok.span_table`` (``merge_kernel``),
so its memory is a few dozen bytes per row and no dataframe engine is loaded:
polars' ``group_by`` on binary keys took 170 MB of arena to sum 14 MB of
tables. Rows come out in order of first occurrence, which depends only on the
order of the input tables, never on timing.

    >>> a = from_lists([b"x", b" y"], [1, 2])
    >>> b = from_lists([b" y", b" z"], [3, 1])
    >>> sum_tables([a, b]).to_pylist()
    [{'piece': b'x', 'count': 1}, {'piece': b' y', 'count': 5}, {'piece': b' z', 'count': 1}]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from toktoktok.errors import CountOverflow
from toktoktok.patterns import Pattern
from toktoktok.pretokenize import count_with_regex, split_special

SCHEMA = pa.schema([("piece", pa.large_binary()), ("count", pa.uint64())])
_SAFE = 2.0**62  # below this total no sum of counts can pass 2**63


def from_arrays(buf: np.ndarray, off: np.ndarray, counts: np.ndarray) -> pa.Table:
    """A count table over flat arrays: piece p is ``buf[off[p]:off[p+1]]`` (no copy)."""
    pieces = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(counts), [None, pa.py_buffer(np.ascontiguousarray(off, np.int64)), pa.py_buffer(buf)]
    )
    return pa.table({"piece": pieces, "count": pa.array(np.asarray(counts).astype(np.uint64))}, schema=SCHEMA)


def from_lists(pieces: Sequence[bytes], counts: Sequence[int]) -> pa.Table:
    """A count table from Python lists (small tables and tests)."""
    return pa.table({"piece": pa.array(pieces, pa.large_binary()), "count": pa.array(counts, pa.uint64())},
                    schema=SCHEMA)


def binary_spans(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A binary column as one byte buffer and int64 offsets from 0 into it, without
    a Python object per value (a view of Arrow's buffers when the column is one
    chunk of ``large_binary``); a null is refused.

        >>> buf, off = binary_spans(pa.chunked_array([[b"ab"], [b"", b"c"]]))
        >>> bytes(buf), off.tolist()
        (b'abc', [0, 2, 2, 3])
    """
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if array.null_count:
        raise ValueError(f"a binary column with {array.null_count} nulls")
    array = array.cast(pa.large_binary())
    _, offsets, data = array.buffers()
    off = np.frombuffer(offsets, dtype=np.int64)[array.offset : array.offset + len(array) + 1]
    buf = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    buf = buf[off[0] : off[-1]] if len(off) else buf[:0]
    return buf, (off - off[0]) if len(off) else np.zeros(1, np.int64)


def to_arrays(table: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A count table as flat arrays (bytes, int64 offsets from 0, uint64 counts)."""
    buf, off = binary_spans(table["piece"])
    counts = table["count"].combine_chunks().to_numpy(zero_copy_only=False).astype(np.uint64, copy=False)
    return buf, off, counts


def inventory(table: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A count table as the trainer's flat arrays: bytes, int64 offsets, int64 counts.

    A pair's count is at most the sum over pieces of count x (bytes - 1): it
    must fit in int64, else OverflowError (lower the sources' weights).

        >>> buf, off, n = inventory(from_lists([b"ab", b"c"], [3, 1]))
        >>> buf.tobytes(), off.tolist(), n.tolist()
        (b'abc', [0, 2, 3], [3, 1])
    """
    buf, off, counts = to_arrays(table)
    sites = np.maximum(np.diff(off) - 1, 1)
    most = float(np.dot(counts.astype(np.float64), sites))  # exact enough far below 2**63
    if most >= 2**62:
        most = sum(int(c) * int(n) for c, n in zip(counts.tolist(), sites.tolist()))
    if most >= 2**63:
        raise CountOverflow(f"pair counts could reach {most:.3g}, more than 64-bit counts hold (2**63): "
                            "lower the sources' weights")
    return buf, off, counts.astype(np.int64)


def cut_long_pieces(table: pa.Table, limit: int) -> tuple[pa.Table, int]:
    """Cut every piece longer than ``limit`` bytes into parts of at most ``limit``
    bytes, each cut at the last UTF-8 character boundary at or below it; returns
    the table (parts summed in) and the number of cuts (weighted by count).

    This is ``max_piece_bytes``: the one place where a memory bound wins over
    exactness (a run of one letter a megabyte long is one piece to the pattern).

        >>> t, cuts = cut_long_pieces(from_lists([b"ab", "ééé".encode()], [1, 2]), 4)
        >>> t.to_pylist(), cuts
        ([{'piece': b'ab', 'count': 1}, {'piece': b'\\xc3\\xa9\\xc3\\xa9', 'count': 2}, {'piece': b'\\xc3\\xa9', 'count': 2}], 2)
    """
    import pyarrow.compute as pc

    if longest_piece(table) <= limit:  # nearly always: a look at the offsets
        return table, 0
    longer = pc.greater(pc.binary_length(table["piece"]), limit)
    pieces: list[bytes] = []
    numbers: list[int] = []
    cuts = 0
    long_rows = table.filter(longer)
    for piece, count in zip(long_rows["piece"].to_pylist(), long_rows["count"].to_pylist()):
        parts = utf8_parts(piece, limit)
        cuts += (len(parts) - 1) * count
        pieces += parts
        numbers += [count] * len(parts)
    return sum_tables([table.filter(pc.invert(longer)), from_lists(pieces, numbers)]), cuts


def longest_piece(table: pa.Table) -> int:
    """Bytes of the table's longest piece (0 for none), from the offsets alone.

        >>> longest_piece(from_lists([b"ab", b"cde"], [1, 1]))
        3
    """
    longest = 0
    for chunk in table["piece"].chunks:
        if len(chunk):
            width = np.int64 if pa.types.is_large_binary(chunk.type) else np.int32
            off = np.frombuffer(chunk.buffers()[1], dtype=width)[chunk.offset : chunk.offset + len(chunk) + 1]
            longest = max(longest, int(np.diff(off).max()))
    return longest


def utf8_parts(data: bytes, limit: int) -> list[bytes]:
    """``data`` in parts of at most ``limit`` bytes, cut before a UTF-8 lead byte.

        >>> utf8_parts("aé€".encode(), 3)
        [b'a\\xc3\\xa9', b'\\xe2\\x82\\xac']
    """
    parts, start = [], 0
    while len(data) - start > limit:
        end = start + limit
        while end > start + 1 and data[end] & 0xC0 == 0x80:  # a continuation byte: not a boundary
            end -= 1
        parts.append(data[start:end])
        start = end
    parts.append(data[start:])
    return parts


def sum_tables(tables: Sequence[pa.Table]) -> pa.Table:
    """Sum counts by piece over ``tables`` (order of first occurrence).

    A piece whose total would pass 2**63 stops with OverflowError: 64-bit
    counts cannot hold it, and a wrapped count must never be stored.
    """
    tables = [t for t in tables if len(t)]
    if not tables:
        return SCHEMA.empty_table()
    if len(tables) == 1:
        return tables[0].cast(SCHEMA)
    from toktoktok.span_table import merge_kernel  # numba: loaded only when there is work

    parts = [to_arrays(t) for t in tables]
    buf = np.concatenate([p[0] for p in parts])
    starts = np.cumsum([0] + [len(p[0]) for p in parts[:-1]])
    off = np.concatenate([np.zeros(1, np.int64)] + [p[1][1:] + s for p, s in zip(parts, starts)])
    counts = np.concatenate([p[2] for p in parts])
    del parts
    if float(counts.sum(dtype=np.float64)) >= _SAFE:
        _check_sums(buf, off, counts)
    out_buf, out_off, out_counts = merge_kernel(buf, off, counts.view(np.int64))
    return from_arrays(out_buf, out_off, out_counts.view(np.uint64))


def _check_sums(buf: np.ndarray, off: np.ndarray, counts: np.ndarray) -> None:
    """OverflowError if some piece's summed count could reach 2**63.

    Sums counts rounded up to multiples of 2**16 (an upper bound that cannot
    itself wrap), so it errs only when a sum is within a hair of the limit.
    """
    from toktoktok.span_table import merge_kernel

    coarse = (counts >> np.uint64(16)) + np.uint64(1)
    _, _, bound = merge_kernel(buf, off, coarse.view(np.int64))
    if len(bound) and float(bound.max()) * 2.0**16 >= 2.0**63:
        raise CountOverflow("a piece's count passes 2**63, more than 64-bit counts hold: lower the sources' weights")


def weighted(table: pa.Table, weight: float) -> pa.Table:
    """Counts times a source's weight (rounded, at least 1 for a piece seen).

    A count that would pass 2**63 stops the run (OverflowError) instead of wrapping.

        >>> weighted(from_lists([b"a", b"b"], [3, 1]), 0.5)["count"].to_pylist()
        [2, 1]
    """
    if weight == 1 or not len(table):
        return table
    counts = table["count"].combine_chunks().to_numpy(zero_copy_only=False)
    top = int(counts.max())
    if top * weight >= 2**63:
        raise CountOverflow(f"a piece seen {top} times with weight {weight} counts {top * weight:.3g} times, "
                            "more than 64-bit counts hold (2**63): lower the source's weight")
    if float(weight).is_integer():
        scaled = counts * np.uint64(int(weight))
    else:
        scaled = np.maximum(np.rint(counts.astype(np.float64) * weight), 1).astype(np.uint64)
    return table.set_column(1, "count", pa.array(scaled, pa.uint64()))


def table_bytes(table: pa.Table) -> int:
    """Memory a count table holds: 16 bytes a row (offset, count) plus the pieces' bytes."""
    pieces = table["piece"]
    return 16 * table.num_rows + sum(chunk.buffers()[2].size for chunk in pieces.chunks if chunk.buffers()[2])


def count_texts(texts: Sequence[str | bytes | memoryview], pattern: Pattern,
                special_tokens: Sequence[str] = ()) -> pa.Table:
    """Distinct pieces of ``texts`` (strings, or UTF-8 bytes) with their counts.

    Special tokens are cut out first (``pretokenize.split_special``), then
    the pattern runs over each segment: the numba scanner for the named
    patterns (``toktoktok.scanner``, proven piece for piece against
    ``regex``), its pieces counted by ``count_segments`` as ingest counts
    them (it releases the GIL, so threads may count batches side by side); ``regex``
    for a custom one (``pretokenize.count_with_regex``). One text of bytes is
    scanned where it lies, without a copy.

        >>> from toktoktok.patterns import resolve_pattern
        >>> count_texts(["a a a"], resolve_pattern(None)).to_pylist()
        [{'piece': b'a', 'count': 1}, {'piece': b' a', 'count': 2}]
        >>> count_texts([b"x<|e|>x"], resolve_pattern("[a-z]|[^a-z]"), ["<|e|>"]).to_pylist()
        [{'piece': b'x', 'count': 2}]
    """
    from toktoktok.scanner import PATTERN_IDS  # numba: loaded only when there is work

    if pattern.name not in PATTERN_IDS:
        found, numbers = count_with_regex([t if isinstance(t, str) else bytes(t).decode("utf-8") for t in texts],
                                           pattern, special_tokens)
        return from_lists(found, numbers)
    buf, seg_off = joined_segments(texts, special_tokens)
    if len(seg_off) == 1:
        return SCHEMA.empty_table()
    return count_segments(buf, seg_off, PATTERN_IDS[pattern.name])


def count_segments(buf: np.ndarray, seg_off: np.ndarray, which: int) -> pa.Table:
    """The pieces of segments ``buf[seg_off[s]:seg_off[s+1]]`` under scanner pattern
    ``which``, counted by the kernel ingest counts with (``summing.RunningSum.count``):
    one compiled kernel serves both (rows of 1 or 2 bytes come last, in byte order).

        >>> count_segments(np.frombuffer(b"ab ab", np.uint8), np.array([0, 5]), 0).to_pylist()
        [{'piece': b' ab', 'count': 1}, {'piece': b'ab', 'count': 1}]
    """
    from toktoktok.summing import RunningSum

    summed = RunningSum()
    summed.count(buf, seg_off, which)
    return summed.table()


def joined_segments(texts: Sequence[str | bytes | memoryview],
                    special_tokens: Sequence[str] = ()) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 segments of ``texts`` between special tokens, end to end: ``(buf,
    seg_off)``, segment s being ``buf[seg_off[s]:seg_off[s+1]]``. One text of bytes
    (or a view) without special tokens is used where it lies, without a copy.

        >>> buf, off = joined_segments(["ab<|e|>c", b"d"], ["<|e|>"])
        >>> buf.tobytes(), off.tolist()
        (b'abcd', [0, 2, 3, 4])
    """
    if special_tokens:  # a view is split as bytes
        texts = [bytes(t) if isinstance(t, memoryview) else t for t in texts]
    segments = [seg if isinstance(seg, (bytes, memoryview)) else seg.encode("utf-8")
                for text in texts for seg in split_special(text, special_tokens)]
    seg_off = np.zeros(len(segments) + 1, dtype=np.int64)
    if not segments:
        return np.zeros(0, np.uint8), seg_off
    np.cumsum([len(seg) for seg in segments], out=seg_off[1:])
    joined = segments[0] if len(segments) == 1 else b"".join(segments)  # one part: no copy
    return np.frombuffer(joined, dtype=np.uint8), seg_off

