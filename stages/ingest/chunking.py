"""Ingest's chunk files: counted pieces summed, a chunk written whenever the
sums pass ``chunk_bytes`` (a 16th of ``working_set_mb``), its rows sorted by piece.

    >>> chunk_bytes.__doc__.splitlines()[0]
    'Count-table bytes per chunk file: a 16th of the budget (1 MiB to 1 GiB).'
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from toktoktok.config import Config
from toktoktok.piece_order import sorted_table
from toktoktok.summing import RunningSum

from ..workdir import artifacts

CHUNK_BYTES: int | None = None  # count-table bytes per chunk file; None: from working_set_mb
CHUNK_SCHEMA = pa.schema([("piece", pa.binary()), ("count", pa.uint64())])


def chunk_bytes(cfg: Config) -> int:
    """Count-table bytes per chunk file: a 16th of the budget (1 MiB to 1 GiB).

    The running sums hold about 60 bytes a distinct piece and its bytes besides.
    """
    if CHUNK_BYTES is not None:
        return CHUNK_BYTES
    return min(max(cfg.working_set_mb << 16, 1 << 20), 1 << 30)


class Chunker:
    """Sums counted pieces; writes a chunk file when the sums pass ``chunk_bytes``.

    Two running sums (``toktoktok.summing.RunningSum``): the file being read,
    and the finished files. They are kept apart so that the counts of a file
    that fails half way (``on_bad_file: skip``) can be dropped whole; a single
    file whose own sum passes ``chunk_bytes`` is written in the middle (checked
    each time counts are added), in chunk files of its own counts alone, which
    ``drop`` deletes: simpler than holding a file's counts unbounded until its
    end, and the result is the Ray engine's. A chunk's rows are sorted by piece, so a
    chunk depends only on what was counted before it was written, never on the
    order in which worker threads counted it (nor, then, on ``threads``).
    Group sums are added as they come, never held and summed at once: holding
    them costs many times the memory of the sum they make.

    ``separate_files=False`` (``on_bad_file: fail``, where a failing file stops
    the stage and no file's counts are ever dropped): one sum for all, and no
    file's sum is added into the others' at its end, which cost a pass over
    each file's distinct pieces (most of the time a folder of parquet files
    took beyond one such file).
    """

    def __init__(self, folder: Path, chunk_bytes: int, *, separate_files: bool = True) -> None:
        self.folder = folder
        self.limit = chunk_bytes
        self.separate_files = separate_files
        self._done = RunningSum()  # sum over the finished files
        self._file = RunningSum()  # sum of the file being read
        self.outputs: list[dict[str, Any]] = []
        self._file_start = 0  # the first output of the file being read (later ones hold its counts alone)
        self._file_pieces = 0  # weighted pieces in those
        self.pieces = 0  # weighted pieces in the written chunks

    @property
    def done(self) -> pa.Table | None:
        """The finished files' sum as a count table (None before any piece)."""
        return self._done.table() if self._done.rows else None

    def add(self, *tables: pa.Table | RunningSum, file_index: int) -> None:
        """Add counts of file ``file_index`` (count tables or running sums), then write
        the file's sum if it passed ``chunk_bytes`` (tables added together are one
        step: where the file is cut must not depend on how the counts were split)."""
        sums = [t for t in tables if isinstance(t, RunningSum)]
        if sums and not self._file.rows:
            # the largest sum is taken as the file's total so far, not copied, and the
            # others added to it (the rows' order changes: chunk files are sorted)
            self._file = max(sums, key=lambda t: t.hashed)
            tables = tuple(t for t in tables if t is not self._file)
        for table in tables:
            if isinstance(table, RunningSum):
                self._file.add_sum(table)
            else:
                self._file.add(table)
        if self._file.table_bytes > self.limit:
            self._file_pieces += self._write(self._file)
            self._file = RunningSum()

    def file_done(self) -> None:
        if not self.separate_files:  # the running sum goes on over the next file
            return
        if not self._done.rows:
            self._done, self._file = self._file, self._done  # the first file's sum is the total so far
        elif self._file.rows:
            self._done.add_sum(self._file)
            self._file = RunningSum()
        if self._done.table_bytes > self.limit:
            self.flush()
        self._file_start, self._file_pieces = len(self.outputs), 0

    def drop(self, file_index: int) -> bool:
        """Forget the current file's counts, deleting the chunk files written of
        them; True: nothing of the file stays (the batcher's contract)."""
        if not self.separate_files:
            raise RuntimeError("a file's counts cannot be dropped: they were summed with the others'")
        self._file = RunningSum()
        for output in self.outputs[self._file_start:]:
            (self.folder / output["name"]).unlink(missing_ok=True)
        del self.outputs[self._file_start:]
        self.pieces -= self._file_pieces
        self._file_pieces = 0
        return True

    def flush(self) -> None:
        if self._done.rows:
            self._write(self._done)
        self._done = RunningSum()
        if not self.separate_files and self._file.rows:
            self._write(self._file)
            self._file = RunningSum()

    def _write(self, total: RunningSum) -> int:
        """Write a chunk file of ``total``; returns its weighted pieces."""
        name = f"chunk-{len(self.outputs):05d}.arrow"
        table = sorted_table(*total.arrays())
        self.outputs.append(artifacts.write_ipc(self.folder / name, table.cast(CHUNK_SCHEMA)))
        pieces = int(pc.sum(table["count"]).as_py() or 0)
        self.pieces += pieces
        return pieces

