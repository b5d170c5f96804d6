"""Ingest's workers: batches of text parts counted in order, by threads running
the numba scanner (named patterns) or by processes running ``regex`` (a
custom pattern), and the count tables handed to the chunker in order.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from multiprocessing import get_context
from typing import Any

import numpy as np
import pyarrow as pa

from stages.ingest.chunking import Chunker
from stages.ingest_worker import PatternTimeout, count_in_worker, ignore_sigint
from stages.workdir import resolve_threads
from toktoktok import counts, documents, scanner
from toktoktok.config import Config
from toktoktok.config import batch_chars as config_batch_chars
from toktoktok.patterns import Pattern
from toktoktok.pretokenize import PatternMiss, special_occurrences

BATCH_TEXT_CHARS: int | None = None  # text per worker task; None: from working_set_mb


class PatternTooSlow(RuntimeError):
    """A custom pattern ran past ``pattern_timeout_s`` on a document; the stage
    names the file (``file_index``) and where its text starts."""

    def __init__(self, file_index: int, offset: int, seconds: float) -> None:
        super().__init__(file_index, offset, seconds)
        self.file_index, self.offset, self.seconds = file_index, offset, seconds


class PatternMissAt(ValueError):
    """A custom pattern matched the empty string or left text unmatched
    (``PatternMiss``) at character ``offset`` of what file ``file_index`` trains
    on; the stage names the file."""

    def __init__(self, file_index: int, offset: int, words: str) -> None:
        super().__init__(file_index, offset, words)
        self.file_index, self.offset, self.words = file_index, offset, words


def batch_chars(cfg: Config) -> int:
    """Text per worker task: a 128th of the budget, from 256 Ki to 512 Ki characters.

    Larger batches gain little speed (100 MB of English: 0.85 s with 2 Mi,
    0.98 s with 512 Ki, 0.95 s with 256 Ki characters) and cost 25-35 MB
    more at peak, in flight on every thread.
    """
    if BATCH_TEXT_CHARS is not None:
        return BATCH_TEXT_CHARS
    return config_batch_chars(cfg.working_set_mb)



def count_texts_fast(texts: list[str], pattern: Pattern, special_tokens: tuple[str, ...]) -> pa.Table:
    """``counts.count_texts`` with the numba scanner, in a worker thread (the
    scanner and its counter release the GIL, so threads count batches side by
    side with nothing to pickle), and with special tokens how often each occurs
    (``pretokenize.special_occurrences``): then ``(table, found)``.

    >>> from toktoktok.patterns import resolve_pattern
    >>> count_texts_fast(["a a a"], resolve_pattern(None), ()).to_pylist()
    [{'piece': b'a', 'count': 1}, {'piece': b' a', 'count': 2}]
    """
    if not special_tokens:
        return counts.count_texts(texts, pattern)
    texts = [bytes(t) if isinstance(t, memoryview) else t for t in texts]  # a view of a .txt window, as bytes
    return counts.count_texts(texts, pattern, special_tokens), special_occurrences(texts, special_tokens)


def load_kernels(cfg: Config) -> None:
    """Load (or compile) the numba code ingest runs, on a few bytes, so that the
    stage can time its work apart: about 0.12 s from the cache, nearly all of
    it numba setting up its compiler context at its first call in a process
    (each kernel then loads in 1-11 ms)."""
    data = np.frombuffer(b"a b\n\nc\n d", dtype=np.uint8)
    documents.doc_ends(data, 0, len(data), True)
    documents.last_break_cut(data, 0, len(data) - 3)
    documents.valid_utf8(data)
    if has_scanner(cfg.pattern):
        table = count_texts_fast([b"a b", "c"], cfg.pattern, ())
        counts.sum_tables([table, table])



def has_scanner(pattern: Pattern) -> bool:
    """Whether the numba scanner implements this pattern (else the ``regex`` path)."""
    return pattern.name in scanner.PATTERN_IDS



class Batcher:
    """Sends batches of parts to the workers (or counts them here) in order.

    A batch never spans two files (``file_done`` sends the last one), so a
    file's counts stay separable until its chunk is written.
    """

    def __init__(self, cfg: Config, chunker: Chunker, pool: Executor | None) -> None:
        self.cfg, self.chunker, self.pool = cfg, chunker, pool
        # workers are threads for the scanner; processes (which import only regex) otherwise
        self.count = count_texts_fast if has_scanner(cfg.pattern) else count_in_worker
        self.worker_peaks_kb: dict[int, int] = {}  # worker process id -> its peak RSS
        self.batch_chars = batch_chars(cfg)
        self.texts: list[str] = []
        self.chars = 0
        self.weight = 1.0
        self.file_index = 0
        # (job, weight, file index, offset of its first text in the file's trained text, its texts' lengths)
        self.inflight: list[tuple[Future[pa.Table] | pa.Table | None, float, int, int, list[int]]] = []
        self.sent_chars: dict[int, int] = {}  # characters of each file sent so far
        self.forced_cuts = 0  # cuts of pieces longer than max_piece_bytes
        self.specials_found: dict[str, int] = dict.fromkeys(cfg.special_tokens, 0)  # occurrences in the text

    def add(self, parts: list[str], weight: float, file_index: int) -> None:
        if weight != self.weight or file_index != self.file_index:
            self.send()
            self.weight, self.file_index = weight, file_index
        for part in parts:
            self.texts.append(part)
            self.chars += len(part)
        if self.chars >= self.batch_chars:
            self.send()

    def send(self) -> None:
        if not self.texts:
            return
        args: tuple = (self.texts, self.cfg.pattern, self.cfg.special_tokens)
        if self.count is count_in_worker:
            args += (self.cfg.pattern_timeout_s,)
        lengths = [len(t) for t in self.texts]
        first = self.sent_chars.get(self.file_index, 0)
        self.sent_chars[self.file_index] = first + sum(lengths)
        if self.pool is None:
            job = self._counted(lambda: self.count(*args), self.file_index, first, lengths)
        else:
            blocked = sigint_blocked() if isinstance(self.pool, ProcessPoolExecutor) else contextlib.nullcontext()
            with blocked:  # a worker process spawned now holds Ctrl-C off until it ignores it
                job = self.pool.submit(self.count, *args)
        self.inflight.append((job, self.weight, self.file_index, first, lengths))
        self.texts, self.chars = [], 0
        limit = self.pool._max_workers + 1 if self.pool else 0  # bounded memory in flight
        while len(self.inflight) > limit:
            self._collect_one()

    def _collect_one(self) -> None:
        job, weight, file_index, first, lengths = self.inflight.pop(0)
        if job is None:  # a file ended here: chunk boundaries follow the data, not the timing
            self.chunker.file_done()
            return
        table = self._counted(job.result, file_index, first, lengths) if isinstance(job, Future) else job
        if isinstance(table, tuple) and len(table) == 2:  # (table, special tokens found) from the scanner
            table, found = table
            self._found(found)
        elif isinstance(table, tuple):  # (pieces, counts, pid, peak, special tokens found) from the regex path
            pieces, numbers, pid, peak, found = table
            if self.pool is not None:
                self.worker_peaks_kb[pid] = max(peak, self.worker_peaks_kb.get(pid, 0))
            table = counts.from_lists(pieces, numbers)
            self._found(found)
        table, cuts = counts.cut_long_pieces(table, self.cfg.max_piece_bytes)
        self.forced_cuts += cuts
        self.chunker.add(counts.weighted(table, weight), file_index)

    def _found(self, found: dict[str, int]) -> None:
        for tok, n in found.items():
            self.specials_found[tok] = self.specials_found.get(tok, 0) + n

    @staticmethod
    def _counted(result: Any, file_index: int, first: int, lengths: list[int]) -> Any:
        """``result()``, a too slow custom pattern turned into ``PatternTooSlow``
        with the file and the character offset of the text it choked on, and a
        ``PatternMiss`` into ``PatternMissAt`` with the file and the offset."""
        try:
            return result()
        except PatternTimeout as exc:
            raise PatternTooSlow(file_index, first + sum(lengths[: exc.index]), exc.seconds) from None
        except PatternMiss as exc:  # the pattern matched empty or left text unmatched
            raise PatternMissAt(file_index, first + sum(lengths[: exc.index]) + exc.offset, exc.words) from None

    def file_done(self) -> None:
        self.send()
        self.inflight.append((None, 1.0, self.file_index, 0, []))
        if self.pool is None:
            self._collect_one()

    def discard(self, file_index: int) -> bool:
        """Forget what a failed file sent; False if part of it was already written."""
        self.texts, self.chars = [], 0
        self.drain()
        return self.chunker.drop(file_index)

    def drain(self) -> None:
        self.send()
        while self.inflight:
            self._collect_one()



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
            scanner.unicode_tables()  # build or load the tables once, before the threads
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
        self.pool.shutdown(wait=exc[0] is None, cancel_futures=True)


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
    previous = signal.signal(signal.SIGINT, lambda signum, frame: came.append(signum))
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        signal.signal(signal.SIGINT, previous)
    if came:
        raise KeyboardInterrupt
