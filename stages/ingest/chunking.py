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
from toktoktok.summing import RunningSum

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

    Two running sums (``toktoktok.summing.RunningSum``): the file being read,
    and the finished files. They are kept apart so that the counts of a file
    that fails half way (``on_bad_file: skip``) can be dropped; a single file
    whose own sum passes ``chunk_bytes`` is written in the middle, and such a
    file that then fails keeps what was written (the manifest says so).

    Every ``SUM_GROUP`` batches are summed in order by a worker when there are
    worker threads (``pool``), so the main thread does not sum every batch
    alone; when the next group is sent, the earlier groups' sums (normally done
    by then) go into the file's running sum and are dropped. Memory: the two
    running sums (about 60 bytes a distinct piece and its bytes), two groups
    and the batches in flight. (Before, a file's group sums were held until
    they passed a quarter of ``chunk_bytes`` and then summed all at once: on
    1.2 GB of C source, 500 MB at peak for a 30 MB sum.) The folds come at
    fixed batches and rows keep the order pieces first came in, so the chunks
    are the same for any ``threads``.
    """

    def __init__(self, folder: Path, chunk_bytes: int) -> None:
        self.folder = folder
        self.limit = chunk_bytes
        self._done = RunningSum()  # sum over the finished files
        self._file = RunningSum()  # sum of the file being read (settled groups)
        # batches of the file being read not yet in ``_file``, in order; a Future: a worker's sum of a group
        self.current: list[pa.Table | Future[pa.Table]] = []
        self.fresh = 0  # tables at the end of current not yet in a worker's sum
        self.pool: ThreadPoolExecutor | None = None
        self.outputs: list[dict[str, Any]] = []
        self.flushed_files: set[int] = set()
        self.pieces = 0  # weighted pieces in the written chunks

    @property
    def done(self) -> pa.Table | None:
        """The finished files' sum as a count table (None before any piece)."""
        return self._done.table() if self._done.rows else None

    def add(self, table: pa.Table, file_index: int) -> None:
        self.current.append(table)
        self.fresh += 1
        if self.fresh >= SUM_GROUP:
            self._fold(keep=self.fresh)  # earlier groups into the file's sum
            group = self.current
            self.current = [self.pool.submit(counts.sum_tables, group) if self.pool else counts.sum_tables(group)]
            self.fresh = 0
            if self._file.table_bytes > self.limit:
                self._write(self._file.table())
                self.flushed_files.add(file_index)
                self._file = RunningSum()

    def _fold(self, keep: int = 0) -> None:
        """Add the current file's tables (but the last ``keep``) to its running sum, in order."""
        cut = len(self.current) - keep
        for item in self.current[:cut]:
            self._file.add(item.result() if isinstance(item, Future) else item)
        del self.current[:cut]

    def file_done(self) -> None:
        self._fold()
        self.fresh = 0
        if not self._done.rows:
            self._done, self._file = self._file, self._done  # the first file's sum is the total so far
        elif self._file.rows:
            self._done.add(self._file.table())
            self._file = RunningSum()
        if self._done.table_bytes > self.limit:
            self.flush()

    def drop(self, file_index: int) -> bool:
        """Forget the current file's counts; False if some were already written."""
        for item in self.current:
            if isinstance(item, Future):
                item.result()  # no worker still summing them
        self.current, self.fresh = [], 0
        self._file = RunningSum()
        return file_index not in self.flushed_files

    def flush(self) -> None:
        if self._done.rows:
            self._write(self._done.table())
        self._done = RunningSum()

    def _write(self, table: pa.Table) -> None:
        name = f"chunk-{len(self.outputs):05d}.arrow"
        self.outputs.append(artifacts.write_ipc(self.folder / name, table.cast(CHUNK_SCHEMA)))
        self.pieces += int(pa.compute.sum(table["count"]).as_py() or 0)

