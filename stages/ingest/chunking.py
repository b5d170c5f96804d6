"""Ingest's chunk files: counted batches summed, a chunk written whenever the
sums pass ``chunk_bytes`` (a 16th of ``working_set_mb``).

    >>> chunk_bytes.__doc__.splitlines()[0]
    'Count-table bytes per chunk file: a 16th of the budget (1 MiB to 1 GiB).'
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa

from stages import artifacts
from toktoktok import counts
from toktoktok.config import Config

CHUNK_BYTES: int | None = None  # count-table bytes per chunk file; None: from working_set_mb
SUM_GROUP = 16  # counted batches summed together as a file is read
CHUNK_SCHEMA = pa.schema([("piece", pa.binary()), ("count", pa.uint64())])


def chunk_bytes(cfg: Config) -> int:
    """Count-table bytes per chunk file: a 16th of the budget (1 MiB to 1 GiB).

    Summing a chunk's tables takes about five times its size for a moment.
    """
    if CHUNK_BYTES is not None:
        return CHUNK_BYTES
    return min(max(cfg.working_set_mb << 16, 1 << 20), 1 << 30)



class Chunker:
    """Sums counted batches; writes a chunk file when the sums pass ``chunk_bytes``.

    Batches of the file being read are kept apart from the finished files'
    sum, so the counts of a file that fails half way (``on_bad_file: skip``)
    can be dropped. The batches of one file are summed whenever they pass a
    quarter of ``chunk_bytes``; only a single file whose own sum passes
    ``chunk_bytes`` is written in the middle, and such a file that then fails
    keeps what was written (the manifest says so). Memory: at most about two
    sums of ``chunk_bytes`` and the batches in flight.

    Every ``SUM_GROUP`` batches are summed as the file is read, in order, by
    a worker when there are worker threads (``pool``): the sum at the end of
    a file is short, and the main thread does not do it alone (100 MB of
    English: 0.065 s of summing at the end, most of it moved to the workers),
    and fewer batch tables are held. The sums are the same, rows in the same
    order. When a group is sent, the earlier groups' sums are waited for
    (normally done by then) and their own sizes replace their batches' in
    ``current_bytes``: counted by their batches, the groups had passed the
    quarter about half way through 100 MB of English, and the main thread had
    summed everything while the workers waited (0.026 s). The waits come at
    fixed batches, so the chunks are the same for any ``threads``.
    """

    def __init__(self, folder: Path, chunk_bytes: int) -> None:
        self.folder = folder
        self.limit = chunk_bytes
        self.done: pa.Table | None = None  # sum over the finished files
        # batches of the file being read, in order; a Future: a worker's sum of SUM_GROUP of them
        self.current: list[pa.Table | Future[pa.Table]] = []
        self.current_bytes = 0  # for the newest Future, its batches' bytes
        self.fresh = 0  # tables at the end of current not yet in a worker's sum
        self.pool: ThreadPoolExecutor | None = None
        self.outputs: list[dict[str, Any]] = []
        self.flushed_files: set[int] = set()
        self.pieces = 0  # weighted pieces in the written chunks

    def _tables(self) -> list[pa.Table]:
        return [t.result() if isinstance(t, Future) else t for t in self.current]

    def add(self, table: pa.Table, file_index: int) -> None:
        self.current.append(table)
        self.current_bytes += counts.table_bytes(table)
        self.fresh += 1
        if self.fresh >= SUM_GROUP:
            self._settle()
            group = self.current[-self.fresh:]
            self.current[-self.fresh:] = [self.pool.submit(counts.sum_tables, group) if self.pool
                                          else counts.sum_tables(group)]
            self.fresh = 0
        if self.current_bytes > self.limit // 4:
            self.current, self.fresh = [counts.sum_tables(self._tables())], 0
            self.current_bytes = counts.table_bytes(self.current[0])
            if self.current_bytes > self.limit:
                self._write(self.current[0])
                self.flushed_files.add(file_index)
                self.current, self.current_bytes = [], 0

    def _settle(self) -> None:
        """Wait for the sums of the groups sent so far; count them by their own sizes."""
        self.current = self._tables()
        self.current_bytes = sum(counts.table_bytes(t) for t in self.current)

    def file_done(self) -> None:
        self.done = counts.sum_tables(([self.done] if self.done is not None else []) + self._tables())
        self.current, self.current_bytes, self.fresh = [], 0, 0
        if counts.table_bytes(self.done) > self.limit:
            self.flush()

    def drop(self, file_index: int) -> bool:
        """Forget the current file's counts; False if some were already written."""
        self._tables()  # no worker still summing them
        self.current, self.current_bytes, self.fresh = [], 0, 0
        return file_index not in self.flushed_files

    def flush(self) -> None:
        if self.done is not None and len(self.done):
            self._write(self.done)
        self.done = None

    def _write(self, table: pa.Table) -> None:
        name = f"chunk-{len(self.outputs):05d}.arrow"
        self.outputs.append(artifacts.write_ipc(self.folder / name, table.cast(CHUNK_SCHEMA)))
        self.pieces += int(pa.compute.sum(table["count"]).as_py() or 0)

