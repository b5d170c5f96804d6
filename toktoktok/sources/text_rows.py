"""A text file cut into documents by ``line`` or ``split-on:STRING``, as rows of Arrow's layout.

``document_batches`` turns a file's bytes (decompressed, recoded: ``raw_chunks``)
into ``RowBatch``es, a window at a time: the documents' bytes end to end in
one buffer, their bounds as offsets, and each document's byte offset in the
file (after a UTF-8 byte order mark) in ``starts``: sampling's key, as a
JSON line's. Ingest counts them as it counts a table's rows, so a document
never runs into the next and no separator is trained on.

- ``line``: a document is a maximal run of bytes that are neither ``\\r`` nor
  ``\\n`` (every non-empty line without its break, as ``blocks`` cuts it).
- ``split-on:STRING``: the occurrences of STRING's UTF-8 bytes, found left to
  right without overlap, are cut out; the text between them is a document.
- An empty document is no document. One not finished at a window's end is
  held over to the next window (whole: a document is held in memory as a
  JSON line is), and only the new bytes are searched.

    >>> batches = document_batches([b"one\\r\\ntw", b"o\\n\\nthree"], "line", ReadStats())
    >>> [(b.data.tobytes(), b.offsets.tolist(), b.starts.tolist()) for b in batches]
    [(b'one', [0, 3], [0]), (b'two', [0, 3], [5]), (b'three', [0, 5], [10])]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from toktoktok.sources.blocks import SPLIT_ON
from toktoktok.sources.reads import ReadStats
from toktoktok.sources.row_batches import RowBatch

_BOM = b"\xef\xbb\xbf"


def document_batches(chunks: Iterable[bytes], rule: str, stats: ReadStats) -> Iterator[RowBatch]:
    """The documents of a file's bytes (``chunks``, in order) by ``rule`` (``line``
    or ``split-on:STRING``), a ``RowBatch`` for each window that ends one; raw
    bytes and documents are counted into ``stats``."""
    separator = None if rule == "line" else rule[len(SPLIT_ON):].encode("utf-8", "surrogatepass")
    if separator is not None and not separator:
        raise ValueError(f"document rule {rule!r}: an empty separator")
    carry = bytearray()
    base = scan = 0  # the stream offset of carry[0]; carry[:scan] starts no separator
    started = False
    for chunk in chunks:
        stats.bytes_read += len(chunk)
        carry += chunk
        if not started:
            if len(carry) < len(_BOM) and _BOM.startswith(carry):
                continue
            if carry.startswith(_BOM):
                del carry[: len(_BOM)]
            started = True
        batch, cut, scan = _cut(carry, scan, base, separator, final=False)
        if cut:
            del carry[:cut]
            base += cut
        if batch is not None:
            stats.documents += batch.rows
            yield batch
    if not started and carry.startswith(_BOM):
        del carry[: len(_BOM)]
    batch, _, _ = _cut(carry, scan, base, separator, final=True)
    if batch is not None:
        stats.documents += batch.rows
        yield batch


def _matches(a: np.ndarray, scan: int, separator: bytes | None) -> np.ndarray:
    """Where separators start in ``a`` at or after ``scan``, left to right, not overlapping."""
    if separator is None:
        return np.flatnonzero((a[scan:] == 10) | (a[scan:] == 13)) + scan
    size = len(separator)
    if len(a) - scan < size:
        return np.zeros(0, dtype=np.int64)
    found = np.flatnonzero(a[scan : len(a) - size + 1] == separator[0]) + scan
    for j in range(1, size):
        found = found[a[found + j] == separator[j]]
    if size > 1 and len(found) > 1 and bool(np.any(np.diff(found) < size)):
        kept, after = [], -1  # overlapping candidates (a separator like "aa"): the leftmost wins
        for at in found.tolist():
            if at >= after:
                kept.append(at)
                after = at + size
        found = np.asarray(kept, dtype=np.int64)
    return found


def _cut(carry: bytearray, scan: int, base: int, separator: bytes | None,
         final: bool) -> tuple[RowBatch | None, int, int]:
    """The documents ended in ``carry`` (all of them when ``final``) as a batch, the
    bytes of ``carry`` they used, and where the next search of what is left starts.
    Every view of ``carry`` is gone when this returns (the caller resizes it)."""
    a = np.frombuffer(carry, dtype=np.uint8)
    size = 1 if separator is None else len(separator)
    found = _matches(a, scan, separator)
    n = len(a)
    if not len(found) and not final:
        return None, 0, max(0, n - size + 1)
    cut = n if final else int(found[-1]) + size
    begins = np.concatenate([[0], found + size])
    ends = np.concatenate([found, [n]])
    if not final:
        begins, ends = begins[:-1], ends[:-1]
    mark = np.zeros(cut + 1, dtype=np.int8)  # +1 at a separator's first byte, -1 after its last
    np.add.at(mark, found, 1)
    np.add.at(mark, found + size, -1)
    keep = np.cumsum(mark[:cut]) == 0
    data = a[:cut][keep]  # a copy: the documents end to end
    prefix = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])
    present = ends > begins
    if not present.any():
        return None, cut, 0
    begins, ends = begins[present], ends[present]
    offsets = np.concatenate([prefix[begins], prefix[ends[-1:]]]).astype(np.int64)
    rows = len(begins)
    batch = RowBatch(data, offsets, np.ones(rows, dtype=np.bool_), 0, starts=(begins + base).astype(np.uint64))
    return batch, cut, 0
