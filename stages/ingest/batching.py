"""Ingest's workers: batches of text parts counted in order, by threads running
the numba scanner (named patterns) or by processes running ``regex`` (a
custom pattern), and the count tables handed to the chunker in order.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from multiprocessing import get_context
from typing import Any

import numpy as np
import pyarrow as pa

from toktoktok import counts, documents, piece_order, scanner, unicode_classes
from toktoktok.config import Config
from toktoktok.errors import PatternMiss, PatternTimeout
from toktoktok.interrupts import set_handler
from toktoktok.patterns import Pattern
from toktoktok.pretokenize import special_occurrences
from toktoktok.sources.jsonl_scan import load_jsonl_kernels
from toktoktok.summing import RunningSum
from toktoktok.text_segments import Segments, gather
from toktoktok.tuning import count_batch_chars, resolve_threads

from .chunking import Chunker
from .regex_worker import count_in_worker, ignore_sigint

BATCH_TEXT_CHARS: int | None = None  # text per worker task; None: ``tuning.count_batch_chars``



JOIN_TEXTS = 8  # a batch of more texts (many small files) is joined and scanned in one call, not one a text
SUMS_AHEAD = 2  # group sums waiting for the summing thread, at most (each holds its group's tables)
GROUP_BATCHES = 64  # batches a worker thread counts into one table before the summing thread adds it up
# batches in flight per counting thread: 3 in all starved the threads while the main thread summed a group;
# with 6 a thread, memory in flight stays a few batches of text
IN_FLIGHT_PER_THREAD = 6


class GroupTables:
    """The scanner's count tables: one per group of batches and worker thread.

    A worker thread counts each batch of a group into its own table of that
    group (``table``), so no batch makes a table of its own and nothing is
    handed between threads while the group is read; once every batch of the
    group is counted, the main thread takes the group's tables (``take``) and
    sums them into the chunker. Which thread counted which batch depends on
    timing; the sum does not.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tables: dict[int, dict[int, RunningSum]] = {}  # group -> thread -> its table
        # the size a thread's last table of a group reached (rows, piece bytes): the
        # next one starts there rather than doubling up to it again (the doubling cost
        # CPU time, though no wall time)
        self._sizes: dict[int, tuple[int, int]] = {}

    def table(self, group: int) -> RunningSum:
        thread = threading.get_ident()
        with self._lock:
            tables = self._tables.setdefault(group, {})
            if thread not in tables:
                rows, used = self._sizes.get(thread, (0, 0))
                tables[thread] = RunningSum(rows=max(rows, 1 << 14), arena_bytes=max(used, 1 << 20))
            return tables[thread]

    def take(self, group: int) -> list[RunningSum]:
        with self._lock:
            tables = self._tables.pop(group, {})
            for thread, table in tables.items():
                # the size the counting filled (not ``rows``: adding the short pieces is the
                # summing thread's work, and sizing for it cost this thread time)
                self._sizes[thread] = table.hashed
            return list(tables.values())


def count_into(texts: list, which: int, special_tokens: tuple[str, ...], tables: GroupTables, group: int,
               weight: int) -> dict[str, int]:
    """Count the pieces of ``texts`` (strings, UTF-8 bytes and views of them, ``Segments``) into
    this thread's table of ``group``, each ``weight`` times, with the numba scanner
    (pattern id ``which``), special tokens cut out first; returns how often each
    special token occurs (``pretokenize.special_occurrences``). Runs in a worker
    thread: the scanner releases the GIL.

        >>> t = GroupTables()
        >>> count_into(["a a a"], 0, (), t, 0, 1)
        {}
        >>> [s.table().to_pylist() for s in t.take(0)]
        [[{'piece': b'a', 'count': 1}, {'piece': b' a', 'count': 2}]]
    """
    found: dict[str, int] = {}
    table = tables.table(group)
    if any(isinstance(t, Segments) for t in texts):
        for segments in texts:  # rows of a table: the reader let through none with a special token
            if isinstance(segments, Segments) and segments.count:
                table.count(segments.data, segments.bounds, which, weight)
        texts = [t for t in texts if not isinstance(t, Segments)]
    if special_tokens:
        texts = [bytes(t) if isinstance(t, memoryview) else t for t in texts]  # a view of a .txt window, as bytes
        found = special_occurrences(texts, special_tokens)
    if not special_tokens and all(not isinstance(t, str) for t in texts) and len(texts) <= JOIN_TEXTS:
        for text in texts:  # each its own segment, scanned where it lies (joining large windows cost a copy)
            if len(text):
                table.count(np.frombuffer(text, dtype=np.uint8), np.array([0, len(text)]), which, weight)
        return found
    buf, seg_off = counts.joined_segments(texts, special_tokens)
    if len(seg_off) > 1:
        table.count(buf, seg_off, which, weight)
    return found


def load_ingest_kernels(cfg: Config) -> None:
    """Load (or compile) the numba code ingest runs, on a few bytes, so that the
    stage can time its work apart: from the cache, this is nearly all numba
    setting up its compiler context at its first call in a process (each
    kernel then loads quickly)."""
    data = np.frombuffer(b"a b\n\nc\n d", dtype=np.uint8)
    documents.load_document_kernels()
    piece_order.sorted_table(data, np.array([0, 2, 3]), np.array([1, 1]))  # the chunk files' sort
    gather(Segments(data, np.array([0, 1, 2])), np.array([True, False]))  # a table's rows, where some train
    load_jsonl_kernels()
    if has_scanner(cfg.pattern):
        tables = GroupTables()
        count_into([b"a b", "c"], scanner.PATTERN_IDS[cfg.pattern.name], (), tables, 0, 1)
        total = RunningSum()
        for table in tables.take(0):
            total.add_sum(table)
        total.add(total.table())


MANAGER_JOIN_SECONDS = 10  # the most a failed ingest waits for its killed worker pool to wind down


def has_scanner(pattern: Pattern) -> bool:
    """Whether the numba scanner implements this pattern (else the ``regex`` path)."""
    return pattern.name in scanner.PATTERN_IDS


class Batcher:
    """Sends batches of parts to the workers (or counts them here) in order.

    A batch spans files only when they were read whole before any of their
    text was sent (``file_start``); any other file's batches, groups and chunker
    steps are its own (``file_done`` sends the last one), so its counts stay
    separable until its chunk is written.

    Named patterns (the scanner, in threads): batches are counted into the
    workers' tables of their group (``GroupTables``); every ``GROUP_BATCHES``
    batches, at the end of a file and when the weight changes, a marker goes
    into the queue, and when the main thread reaches it (every batch before it
    counted) it sums the group's tables into the chunker. A custom pattern
    (``regex``, in processes): each batch comes back as a count table.
    """

    def __init__(self, cfg: Config, chunker: Chunker, pool: Executor | None) -> None:
        self.cfg, self.chunker, self.pool = cfg, chunker, pool
        # workers are threads for the scanner; processes (which import only regex) otherwise
        self.fast = has_scanner(cfg.pattern)
        self.tables = GroupTables()
        self.group = 0  # the group the next batch goes into
        self.group_batches = 0  # batches sent into it
        self.worker_peaks_kb: dict[int, int] = {}  # worker process id -> its peak RSS
        self.chars_per_batch = (BATCH_TEXT_CHARS if BATCH_TEXT_CHARS is not None
                                else count_batch_chars(cfg.working_set_mb))  # text per worker task
        self.texts: list[str] = []
        self.chars = 0
        self.weight = 1.0
        self.file_index = 0
        # (job, weight, file index, offset of its first text in the file's trained text, its texts' lengths);
        # job None: the end of a file; an int: the end of that group
        self.inflight: list[tuple[Future | pa.Table | dict | int | None, float, int, int, list[int]]] = []
        self.sent_chars: dict[int, int] = {}  # characters of each file sent so far
        self.forced_cuts = 0  # cuts of pieces longer than max_piece_bytes
        self.batches_sent = 0
        self.whole_open = False  # whole files' text waits in the open batch (``file_start``)
        self.text_bytes: dict[int, int | None] = {}  # each file's text bytes as read (None: skipped as bad)
        self.specials_found: dict[str, int] = dict.fromkeys(cfg.special_tokens, 0)  # occurrences in the text
        # with workers, the chunker's sums run in a thread of their own, in order, so that
        # this thread goes on reading and the workers never wait while it sums; at most
        # SUMS_AHEAD sums wait their turn
        self.summer = ThreadPoolExecutor(1, thread_name_prefix="toktoktok-sum") if pool is not None else None
        self.sums: list[Future] = []

    def file_start(self, *, whole: bool) -> None:
        """A file begins; ``whole``: read whole already, so it cannot fail once its text
        is sent (``local.whole_file``). The text of whole files in a row may share
        batches and groups; a file read as it goes begins a batch, a group and a
        step of the chunker of its own, so its counts can be dropped if it fails."""
        if not whole:
            self.close_whole()

    def close_whole(self) -> None:
        """The whole files in a row end here: their last batch and group are sent, and
        the chunker takes their counts as one file's."""
        if self.whole_open:
            self.whole_open = False
            self.file_done()

    def sent(self) -> tuple[int, int]:
        """How much text the batcher has taken (batches sent, texts waiting): the same
        before and after a file that added none."""
        return self.batches_sent, len(self.texts)

    def add(self, parts: list[str], weight: float, file_index: int) -> None:
        if weight != self.weight:
            self.close_whole()
        if weight != self.weight or (file_index != self.file_index and not self.whole_open):
            self.send()
            self.end_group()
            self.weight = weight
        self.file_index = file_index
        for part in parts:
            self.texts.append(part)
            self.chars += len(part)
        if self.chars >= self.chars_per_batch:
            self.send()

    def send(self) -> None:
        if not self.texts:
            return
        if self.fast:
            whole = float(self.weight).is_integer()  # a fractional weight is applied to the group's sum
            count, args = count_into, (self.texts, scanner.PATTERN_IDS[self.cfg.pattern.name],
                                       self.cfg.special_tokens, self.tables, self.group,
                                       int(self.weight) if whole else 1)
        else:
            count, args = count_in_worker, (self.texts, self.cfg.pattern, self.cfg.special_tokens,
                                            self.cfg.pattern_timeout_s)
        lengths = [len(t) for t in self.texts]
        first = self.sent_chars.get(self.file_index, 0)
        self.sent_chars[self.file_index] = first + sum(lengths)
        if self.pool is None:
            job = self._counted(lambda: count(*args), self.file_index, first, lengths)
        else:
            blocked = sigint_blocked() if isinstance(self.pool, ProcessPoolExecutor) else contextlib.nullcontext()
            with blocked:  # a worker process spawned now holds Ctrl-C off until it ignores it
                job = self.pool.submit(count, *args)
        self.inflight.append((job, self.weight, self.file_index, first, lengths))
        self.texts, self.chars = [], 0
        self.batches_sent += 1
        if self.fast:
            self.group_batches += 1
            if self.group_batches >= GROUP_BATCHES:
                self.end_group()
        limit = self.pool._max_workers * IN_FLIGHT_PER_THREAD if self.pool else 0  # bounded memory in flight
        while sum(1 for job in self.inflight if not isinstance(job[0], int)) > limit:
            self._collect_one()

    def end_group(self) -> None:
        """Close the group being sent (if any batch went into it)."""
        if self.group_batches:
            self.inflight.append((self.group, self.weight, self.file_index, 0, []))
            self.group, self.group_batches = self.group + 1, 0
            if self.pool is None:
                while self.inflight:
                    self._collect_one()

    def _collect_one(self) -> None:
        job, weight, file_index, first, lengths = self.inflight.pop(0)
        if job is None:  # a file ended here: chunk boundaries follow the data, not the timing
            self._chunk(self.chunker.file_done)
            return
        if isinstance(job, int):  # every batch of group ``job`` is counted
            self._sum_group(job, weight, file_index)
            return
        result = self._counted(job.result, file_index, first, lengths) if isinstance(job, Future) else job
        if isinstance(result, dict):  # the scanner counted into its group's tables
            self._found(result)
            return
        pieces, numbers, pid, peak, found = result  # the regex path, from a worker process
        if self.pool is not None:
            self.worker_peaks_kb[pid] = max(peak, self.worker_peaks_kb.get(pid, 0))
        self._found(found)
        self._to_chunker(counts.from_lists(pieces, numbers), weight, file_index)

    def _sum_group(self, group: int, weight: float, file_index: int) -> None:
        """The group's tables into the chunker: as they are, unless a piece is too
        long or the weight is fractional (then summed first, cut, weighted)."""
        tables = self.tables.take(group)
        plain = float(weight).is_integer() and all(t.longest() <= self.cfg.max_piece_bytes for t in tables)
        if plain:
            self._chunk(self.chunker.add, *tables, file_index=file_index)
            return
        total = RunningSum()
        for table in tables:
            total.add_sum(table)
        self._to_chunker(total.table(), weight if not float(weight).is_integer() else 1.0, file_index)

    def _to_chunker(self, table: pa.Table, weight: float, file_index: int) -> None:
        table, cuts = counts.cut_long_pieces(table, self.cfg.max_piece_bytes)
        self.forced_cuts += cuts
        self._chunk(self.chunker.add, counts.weighted(table, weight), file_index=file_index)

    def _chunk(self, step: Callable[..., None], *args: Any, **kwargs: Any) -> None:
        """A step of the chunker: in the summing thread after the steps before it, or here."""
        if self.summer is None:
            step(*args, **kwargs)
            return
        self.sums.append(self.summer.submit(step, *args, **kwargs))
        while len(self.sums) > SUMS_AHEAD:
            self.sums.pop(0).result()

    def _summed(self) -> None:
        """Wait until the chunker has taken every step sent (raising what one raised)."""
        while self.sums:
            self.sums.pop(0).result()

    def _found(self, found: dict[str, int]) -> None:
        for tok, n in found.items():
            self.specials_found[tok] = self.specials_found.get(tok, 0) + n

    @staticmethod
    def _counted(result: Any, file_index: int, first: int, lengths: list[int]) -> Any:
        """``result()``; a ``PatternTimeout`` or ``PatternMiss`` raised again with the
        file (its index among the phase's files) and the character offset in
        what the file trains on."""
        try:
            return result()
        except PatternTimeout as exc:
            raise PatternTimeout(exc.seconds, file=file_index, offset=first + sum(lengths[: exc.index])) from None
        except PatternMiss as exc:  # the pattern matched empty or left text unmatched
            raise PatternMiss(exc.words, file=file_index,
                              offset=first + sum(lengths[: exc.index]) + exc.offset) from None

    def file_done(self, *, whole: bool = False) -> None:
        """The file's text is all added. A whole file's may wait in the open batch
        (``file_start``); any other's is sent and its end marked for the chunker."""
        if whole and self.fast and float(self.weight).is_integer():  # a fractional weight rounds each file's sums
            self.whole_open = True
            return
        self.whole_open = False
        self.send()
        self.end_group()
        self.inflight.append((None, 1.0, self.file_index, 0, []))
        if self.pool is None:
            while self.inflight:
                self._collect_one()

    def discard(self, file_index: int) -> bool:
        """Forget what a failed file sent; False if part of it was already written."""
        self.texts, self.chars = [], 0
        self.drain()
        return self.chunker.drop(file_index)  # drain waited for the summing thread

    def close(self) -> None:
        """Stop the summing thread (a step not started yet is dropped, a running one
        ends first), so that nothing is summed or written after the stage stops."""
        if self.summer is not None:
            self.summer.shutdown(wait=True, cancel_futures=True)

    def drain(self) -> None:
        """Count and sum everything sent; the chunker is then up to date."""
        self.close_whole()
        self.send()
        self.end_group()
        while self.inflight:
            self._collect_one()
        self._summed()



class Workers:
    """Workers when ``threads`` > 1 (None otherwise): threads for the numba
    scanner, which releases the GIL; spawned processes for the ``regex`` path,
    which does not."""

    def __init__(self, cfg: Config) -> None:
        self.workers = resolve_threads(cfg.threads)
        self.fast = has_scanner(cfg.pattern)
        self.pool: Executor | None = None

    def __enter__(self) -> Executor | None:
        if self.workers > 1 and self.fast:
            unicode_classes.unicode_tables()  # build or load the tables once, before the threads
            self.pool = ThreadPoolExecutor(self.workers)
        elif self.workers > 1:
            self.pool = ProcessPoolExecutor(self.workers, mp_context=get_context("spawn"), initializer=ignore_sigint)
        return self.pool

    def __exit__(self, *exc: object) -> None:
        if self.pool is None:
            return
        if exc[0] is not None and isinstance(self.pool, ProcessPoolExecutor):
            # a worker may be stuck in a pattern that backtracks without end: it is
            # killed, not waited for (else Ctrl-C would print "interrupted" and hang)
            for process in list((getattr(self.pool, "_processes", None) or {}).values()):
                process.kill()
        manager = getattr(self.pool, "_executor_manager_thread", None)
        self.pool.shutdown(wait=exc[0] is None, cancel_futures=True)
        if manager is not None:
            # the pool's own thread closes its wake-up pipe as it ends; Python's exit writes to that
            # pipe unlocked, and one that races the close prints a traceback under the error line
            manager.join(timeout=MANAGER_JOIN_SECONDS)


@contextlib.contextmanager
def sigint_blocked() -> Iterator[None]:
    """Start worker processes with Ctrl-C held off, without losing it here.

    SIGINT is blocked in this thread while it submits (and so spawns): a worker
    process inherits the blocked mask, keeps a Ctrl-C pending through its
    imports, and drops it when its initializer ignores SIGINT and unblocks it
    (``ingest_worker.ignore_sigint``): no worker prints a traceback of its own.
    Here, a Ctrl-C that comes meanwhile (another thread may take the signal:
    Python then runs its handler in this thread anyway) is only recorded, and
    raised as KeyboardInterrupt once the submit is done: raised in the middle of
    a spawn, it left a worker reading from a closed pipe (a traceback of
    ``EOFError``); ignored, it was lost (2 of 36 tries ran on to exit 0).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    previous = set_handler(signal.SIGINT, lambda signum, frame: came.append(signum))  # ignored: stays so
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        if previous is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, previous)
    if came:
        raise KeyboardInterrupt
