"""``toktoktok.train``'s texts as a column of Arrow strings, counted with no Python string a row.

A ``pyarrow`` ``Table`` (its ``text_column``), ``ChunkedArray`` or ``Array``
of strings (``string``, ``large_string``, dictionary-encoded ones decoded; a
null is no document), or a ``datasets.Dataset`` (its Arrow table, rows in
the dataset's order after ``select`` or ``shuffle``). The rows are numbered
as the rows of one file, in order, nulls counted, from 0: the keys ingest
gives a parquet or Arrow file holding the column (``stages/ingest/table_rows``),
and the sample's share is measured against the column's text bytes as for
that file, so training on the column equals ``toktok run`` on such a file.

As ingest does, the ordinary rows (at most one unit and one part long, in
a batch of valid UTF-8 holding no special token, with a scanner pattern) are
decided by one vectorized hash a batch and go to the scanner as
``Segments``: views of Arrow's buffers. The rare rows (longer ones, a batch
with a special token or invalid UTF-8, a custom pattern) become strings,
as do held-out units (only the last one is kept: the last-unit rule).

    >>> import pyarrow as pa
    >>> col = column(pa.table({"text": ["ab", None, "cde"]}), "text")
    >>> col.total, col.rows
    (5, 3)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from toktoktok.errors import UsageError
from toktoktok.kernel_args import readonly

ROWS_PER_TAKE = 1 << 16  # a dataset's index mapping is applied this many rows at a time


def is_column(texts: Any) -> bool:
    """Whether ``texts`` is one of the Arrow forms (nothing is imported to tell)."""
    if isinstance(texts, (pa.Table, pa.ChunkedArray, pa.Array)):
        return True
    datasets = sys.modules.get("datasets")
    return datasets is not None and isinstance(texts, datasets.Dataset)


@dataclass
class Column:
    """A column of strings: ``chunks()`` gives its arrays in row order; ``total``
    its text bytes (``sources.text_bytes`` of a file holding it), ``rows`` its rows."""

    chunks: Callable[[], Iterator[pa.Array]]
    total: int
    rows: int


def column(texts: Any, text_column: str, where: str = "texts") -> Column:
    """The strings of a ``Table``, ``ChunkedArray``, ``Array`` or ``datasets.Dataset``."""
    from toktoktok.sources.row_batches import array_batches

    if isinstance(texts, pa.Table):
        _check_type(texts.schema, text_column, where)
        array = texts.column(text_column)
    elif isinstance(texts, (pa.ChunkedArray, pa.Array)):
        _check_values(texts.type, where)
        array = texts
    else:
        return _dataset(texts, text_column, where)
    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    total = sum(b.text_bytes() for chunk in chunks for b in array_batches(chunk, batch_bytes=1 << 62))
    return Column(lambda: iter(chunks), total, len(array))


def _dataset(ds: Any, text_column: str, where: str) -> Column:
    """A ``datasets.Dataset``'s column, read through its Arrow table; with an index
    mapping (after ``select``, ``shuffle``) its rows taken in the dataset's order."""
    import pyarrow.compute as pc

    table = ds.data.table
    _check_type(table.schema, text_column, where)
    array = table.column(text_column)
    indices = getattr(ds, "_indices", None)
    if indices is None:
        return column(array, text_column, where)
    order = indices.column(0).combine_chunks()
    if pa.types.is_dictionary(array.type):
        array = array.cast(array.type.value_type)
    lengths = pc.fill_null(pc.binary_length(array), 0).to_numpy(zero_copy_only=False)
    total = int(lengths[order.to_numpy(zero_copy_only=False)].sum()) if len(order) else 0

    def chunks() -> Iterator[pa.Array]:
        for start in range(0, len(order), ROWS_PER_TAKE):  # a slice at a time: the column is never copied whole
            yield array.take(order.slice(start, ROWS_PER_TAKE)).combine_chunks()

    return Column(chunks, total, len(order))


def _check_type(schema: pa.Schema, text_column: str, where: str) -> None:
    if schema.get_field_index(text_column) < 0:
        raise UsageError(f"train(): {where} has no column text_column={text_column!r} (columns: {', '.join(schema.names)})")
    _check_values(schema.field(text_column).type, f"{where} column {text_column!r}")


def _check_values(kind: pa.DataType, where: str) -> None:
    values = kind.value_type if pa.types.is_dictionary(kind) else kind
    if not (pa.types.is_string(values) or pa.types.is_large_string(values)):
        raise UsageError(f"train(): {where} is {kind}, expected strings (string or large_string)")


@dataclass
class ColumnUnits:
    """The units of a column and their fates, as ingest decides them for the rows
    of one file (file index 0 of phase ``slug``), and the jobs that count the
    trained ones: ``Segments`` of ordinary rows, lists of strings for the rest.
    After ``jobs()``: ``tally`` (units trained, held out, left out) and ``held``."""

    settings: dict[str, Any]
    slug: str
    share: float
    cutter: Any
    chars_per_batch: int
    tally: np.ndarray = field(default_factory=lambda: np.zeros(3, np.int64))
    held: int = 0  # held-out bytes so far (the cap counts them)
    last_held: str | None = None  # the last held-out unit, as kept (cut at the cap)

    def jobs(self, col: Column) -> Iterator[Any]:
        from toktoktok import sampling
        from toktoktok.sources import ReadStats
        from toktoktok.sources.row_batches import array_batches

        stats, row = ReadStats(), 0
        for chunk in col.chunks():
            for batch in array_batches(chunk, first_row=row):
                yield from self._batch(batch, stats)
            row += len(chunk)
        if not self.tally[sampling.TRAIN] and self.last_held is not None:  # nothing trains: the last held-out unit does
            self.tally[sampling.TRAIN] += 1
            self.tally[sampling.HELD] -= 1
            yield from self._texts([self.last_held])

    def _batch(self, batch: Any, stats: Any) -> Iterator[Any]:
        from toktoktok import sampling
        from toktoktok.sources.row_batches import row_text
        from toktoktok.text_segments import Segments, gather, split

        settings, n = self.settings, batch.rows
        lengths, present = np.diff(batch.offsets), batch.present
        simple = present & (lengths <= self._limit()) if self._plain(batch) else np.zeros(n, np.bool_)
        others = np.flatnonzero(present & ~simple).tolist()
        rows = np.flatnonzero(simple)
        found = [(i, at, part) for i in others for at, part in self._parts_of(row_text(batch, i, stats))]
        unit_rows = np.concatenate([rows, np.array([i for i, _, _ in found], np.int64)]).astype(np.int64)
        offsets = np.concatenate([np.zeros(len(rows), np.int64), np.array([at for _, at, _ in found], np.int64)])
        sizes = np.concatenate([lengths[rows], np.array([_size(p) for _, _, p in found], np.int64)])
        order = np.lexsort((offsets, unit_rows))  # the units in key order: the cap is applied in it
        before = self.held
        fates_sorted, self.held = sampling.unit_fates(
            sizes[order], offsets[order], rows=unit_rows[order] + batch.first_row, seed=settings["seed"],
            slug=self.slug, heldout_share=settings["heldout_share"], sample_share=self.share, heldout_bytes=before)
        fates = np.empty_like(fates_sorted)
        fates[order] = fates_sorted
        self.tally += np.bincount(fates, minlength=3)[:3]
        held = np.flatnonzero(fates_sorted == sampling.HELD)
        if len(held):
            last = int(order[held[-1]])
            text = row_text(batch, int(unit_rows[last]), stats) if last < len(rows) else found[last - len(rows)][2]
            room = sampling.HELDOUT_CAP_BYTES - (before + int(sizes[order][held[:-1]].sum()))
            if sizes[last] > room:
                text = text.encode("utf-8")[: max(room, 0)].decode("utf-8", "ignore")
            self.last_held = text
        keep = np.zeros(n, np.bool_)
        keep[rows[fates[: len(rows)] == sampling.TRAIN]] = True
        if keep.any():
            segments = gather(Segments.of(batch.data, batch.offsets), keep)
            yield from (s for s in split(segments, self.chars_per_batch) if len(s))
        trained = [found[k][2] for k in np.flatnonzero(fates[len(rows):] == sampling.TRAIN).tolist()]
        yield from self._texts(trained)

    def _texts(self, texts: list[str]) -> Iterator[list[str]]:
        """Units as strings, cut as ingest cuts them, in batches."""
        from toktoktok.api import ingest_parts

        batch: list[str] = []
        chars = 0
        for text in texts:
            for part in ingest_parts(text, self.cutter):
                batch.append(part)
                chars += len(part)
            if chars >= self.chars_per_batch:
                yield batch
                batch, chars = [], 0
        if batch:
            yield batch

    def _parts_of(self, text: str) -> list[tuple[int, str]]:
        from toktoktok import units

        pattern = self.settings["pattern"]
        return units.row_parts(text, units.bound(self.settings["working_set_mb"]),
                               **pattern.cut_rule(), special_tokens=self.settings["special_tokens"])[0]

    def _limit(self) -> int:
        """The longest row that is one unit and one part of the cutter for sure (ingest's ``row_limit``)."""
        from toktoktok import units

        bound = units.bound(self.settings["working_set_mb"])
        return min(bound, self.cutter.part_chars) if self.cutter is not None else bound

    def _plain(self, batch: Any) -> bool:
        """A scanner pattern, valid UTF-8, and no special token in the batch's text."""
        from toktoktok import documents, scanner

        if self.settings["pattern"].name not in scanner.PATTERN_IDS:
            return False
        text = batch.data[batch.offsets[0] : batch.offsets[-1]]
        if not documents.valid_utf8(readonly(text)):
            return False
        specials = [t.encode("utf-8") for t in self.settings["special_tokens"] if t]
        if specials:
            raw = text.tobytes()
            return not any(token in raw for token in specials)
        return True


def _size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
