"""Ingest's rows of a table (``.parquet``, ``.arrow``) or JSON lines, a batch of rows at a time.

A batch comes as Arrow's buffers (``toktoktok.sources.row_batches``), and
what ``routing.route_row`` does a row at a time is done here for the whole
batch at once: each row short enough to be one unit and one part (at most
``limit`` bytes) is decided by one vectorized hash of the batch's keys, and
the runs of rows that train go to the batcher as ``Segments`` (each row a
segment: rows never run into each other), views of the buffers where the
batch trains whole; a longer row that trains whole goes as its bytes, cut
at safe places (``_long_row``). The rows left to ``route_row``, one by one in
their place, are the rare ones: longer rows while units are being decided
(or with no safe place for long stretches), held-out candidates, a batch
holding a special token or invalid UTF-8, and every row of a pattern that
needs the text decoded. The result is the row path's, count for count.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from toktoktok import documents, sampling, units
from toktoktok.config import Config, Source
from toktoktok.kernel_args import readonly
from toktoktok.sampling import HELDOUT_CAP_BYTES
from toktoktok.sources import ReadStats, file_format
from toktoktok.sources.ahead import read_ahead
from toktoktok.sources.row_batches import RowBatch, iter_jsonl_batches, iter_row_batches, row_text
from toktoktok.text_segments import Segments, gather, split

from ..workdir.progress import Progress
from .batching import has_scanner
from .routing import TRAIN, Router, route_row

READ_AHEAD_BATCHES = 2  # batches of JSON lines decoded ahead of the one being sent (2 MiB of text each)


def ingest_table(path: Path, src: Source, route: Router, progress: Progress) -> None:
    """A table file's text column, or a ``.jsonl`` file's field, a batch of rows at a time."""
    stats, reading = ReadStats(), ReadStats()  # this thread's counts, and the reader's
    if file_format(path)[0] == "jsonl":  # decompressing, scanning and checking overlap with sending (``read_ahead``)
        batches = read_ahead(with_plain(iter_jsonl_batches(path, src.text_column, reading), route.cfg),
                             depth=READ_AHEAD_BATCHES)
    else:
        batches = with_plain(iter_row_batches(path, src.text_column, reading), route.cfg)
    try:
        with contextlib.closing(batches):  # the reader stopped before its counts are taken
            for batch, plain in batches:
                progress.update(batch.text_bytes())
                route_batch(batch, route, stats, plain=plain)
    finally:
        stats.add(reading)
        route.tally.add_read(stats)


def row_limit(route: Router) -> int:
    """The longest row (bytes) that is one unit and one part of the cutter for sure."""
    return min(units.bound(route.cfg.working_set_mb), route.cutter.part_chars)


def with_plain(batches: Iterator[RowBatch], cfg: Config) -> Iterator[tuple[RowBatch, bool]]:
    """Each batch, and whether it is plain (``is_plain``): found by the thread that reads the
    batches (``read_ahead``), where checking its UTF-8 cost the sending thread
    a pass over every byte."""
    with contextlib.closing(batches):  # closed with this one: the reader's counts are final then
        for batch in batches:
            yield batch, is_plain(batch, cfg)


def route_batch(batch: RowBatch, route: Router, stats: ReadStats, *, plain: bool | None = None) -> None:
    """Every row of ``batch``, in order: the ordinary ones a run at a time, the rest by ``route_row``.
    ``plain``: ``is_plain(batch, route.cfg)``, if the caller has it."""
    cfg, n = route.cfg, batch.rows
    if not n:
        return
    lengths = np.diff(batch.offsets)
    special = batch.present & (lengths > row_limit(route))
    if plain is None:
        plain = is_plain(batch, cfg)
    if not plain:
        special = batch.present.copy()
    rows = np.arange(batch.first_row, batch.first_row + n, dtype=np.uint64)
    starts = np.zeros(n, dtype=np.uint64)
    if batch.starts is not None:
        rows, starts = np.zeros(n, dtype=np.uint64), batch.starts.astype(np.uint64)
    sample = np.ones(n, dtype=np.bool_)
    if route.deciding():
        sample = route.keep(starts, rows)  # the phase's sample and the source's cap
        if cfg.heldout_share > 0 and route.tally.heldout_bytes < HELDOUT_CAP_BYTES:
            special |= batch.present & sampling.chosen_at(route.heldout_key, starts, cfg.heldout_share, row=rows)
    as_bytes = plain and route.bytes_ok and not route.deciding()  # a long row's bytes may go as they are
    start = 0
    for k in [*np.flatnonzero(special).tolist(), n]:
        if k > start:
            _run(batch, start, k, sample[start:k], lengths[start:k], route)
        if k < n and not (as_bytes and _long_row(batch, k, route)):
            route_row(route, row_text(batch, k, stats), int(starts[k]), int(rows[k]))
        start = k + 1


def _long_row(batch: RowBatch, k: int, route: Router) -> bool:
    """A row too long to be one unit and one part, trained whole, sent as its bytes
    cut at safe places (``documents.last_break_cut``) where ``route_row`` would
    decode it, cut it into units and feed the cutter; counted as it counts. False
    (nothing sent): a stretch of it longer than the cutter's part has no such
    place, where the cutter may force a cut wherever its blocks end: ``route_row``
    then sends it, blocks and all."""
    row = batch.data[batch.offsets[k] : batch.offsets[k + 1]]
    part = route.cutter.part_chars  # bytes: never more characters than the cutter's part
    cuts, at = [0], 0
    while len(row) - at > part:
        at = documents.last_break_cut(row, at, at + part)
        if at < 0:
            return False
        cuts.append(at)
    cfg = route.cfg
    bound = units.bound(cfg.working_set_mb)
    bounds = units.row_bounds(row, bound, **cfg.pattern.cut_rule(), special_tokens=cfg.special_tokens)
    tally = route.tally
    tally.units += len(bounds) - 1
    tally.kept_documents += len(bounds) - 1
    tally.units_over_bound += sum(b - a > bound for a, b in zip(bounds, bounds[1:]))
    tally.kept_bytes += len(row)
    route.break_stream()  # the cutter is empty between rows: this only keeps the order
    view = memoryview(row)
    route.batcher.add([view[a:b] for a, b in zip(cuts, [*cuts[1:], len(row)])], route.weight, route.index)
    return True


def is_plain(batch: RowBatch, cfg: Config) -> bool:
    """Whether the batch's rows may go to the scanner as bytes: a scanner pattern,
    valid UTF-8, and no special token anywhere in the batch's text."""
    if not has_scanner(cfg.pattern):
        return False
    text = batch.data[batch.offsets[0] : batch.offsets[-1]]
    if not batch.valid and not documents.valid_utf8(readonly(text)):
        return False
    if cfg.special_tokens:
        raw = text.tobytes()
        return not any(token.encode("utf-8") in raw for token in cfg.special_tokens if token)
    return True


def _run(batch: RowBatch, a: int, b: int, sample: np.ndarray, lengths: np.ndarray, route: Router) -> None:
    """Rows ``a`` to ``b`` of the batch, each one unit whose fate the sample gives."""
    present = batch.present[a:b]
    train = present & sample
    documents_ = int(np.count_nonzero(present))
    trained = int(np.count_nonzero(train))
    tally = route.tally
    tally.units += documents_
    tally.kept_documents += trained
    tally.sampled_out_documents += documents_ - trained
    if not trained:
        return
    route.break_stream()  # the cutter is empty between rows: this only keeps the order
    keep = train | (~present & (lengths == 0))  # an empty null row may stay: no copy
    segments = gather(Segments.of(batch.data, batch.offsets[a : b + 1]), keep)
    tally.kept_bytes += len(segments)
    route.fate = TRAIN
    for part in split(segments, route.batcher.chars_per_batch):
        route.batcher.add([part], route.weight, route.index)
    route.fate = None
