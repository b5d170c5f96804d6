"""Stage 1, ingest: a phase's sources -> distinct-piece chunk files and held-out text.

Reads: every file of the phase's sources (streamed, never whole).
Writes, in ``WORK/ingest/NN-slug/``:

- ``chunk-00000.arrow`` ...: ``piece: binary, count: uint64``, distinct
  pieces with their counts, a chunk written whenever the summed table passes
  1/16 of ``working_set_mb`` (rows in order of first occurrence);
- ``heldout.arrow``: ``text: large_string``, the held-out documents;
- ``manifest.json``: files and their fingerprints, counts, timings (last).

The phase's text is measured first (``sources.text_bytes``); if it is more
than the budget buys (``sampling.capacity``), each document is kept with the
share capacity / total. The main process reads files, decides for each
document whether it is held out or left out of the sample (seeded hashes of
its position, so the choice does not depend on timing or threads), cuts
documents into parts at the pattern's safe places and sends batches of parts
to workers, which cut out special tokens, find the pieces and count them.
For the named patterns (default, cl100k, o200k, gpt2) the workers are threads
running the numba scanner (``toktoktok.scanner``, proven piece for piece
against ``regex``), which releases the GIL. For a custom pattern they are processes
running ``regex.findall`` (``stages.ingest_worker``, which imports nothing
heavier): ``regex`` holds the GIL while it builds match objects, so threads
would not scale. Counts come back in submission order and are summed in
numba (``toktoktok.counts``), every ``SUM_GROUP`` batches by a worker, so
chunk files are the same for any ``threads``.

A ``.txt`` file is read as windows of raw bytes whose document ends a numba
kernel finds (``toktoktok.documents``). For the default and cl100k patterns
the training bytes skip the text path altogether: the main thread cuts them
at their last line break before non-white-space and checks they are UTF-8,
and the workers scan them as they are (``_Router.train_bytes``). The text
path (decode, ``PartCutter``, encode in the worker) is kept for other
patterns, rows, held-out text, and bytes that are not UTF-8. On 100 MB with
two threads this took ingest from 0.62 s (0.88 s on code) to 0.41 s (0.47 s):
the main thread had been the bottleneck, decoding, splitting and cutting
while holding the GIL.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from stages import artifacts
from stages.ingest_worker import count_in_worker, ignore_sigint
from stages.progress import Progress
from toktoktok import counts, documents, sampling, scanner
from toktoktok.config import Config, Phase, Source
from toktoktok.patterns import Pattern
from toktoktok.pretokenize import PartCutter, split_special
from toktoktok.sources import (
    ReadStats,
    SourceError,
    TxtWindow,
    Utf8Decoder,
    file_format,
    iter_blocks,
    iter_txt_windows,
    list_source_files,
    text_bytes,
)

CHUNK_BYTES: int | None = None  # count-table bytes per chunk file; None: from working_set_mb
BATCH_TEXT_CHARS: int | None = None  # text per worker task; None: from working_set_mb
HELDOUT_CAP_BYTES = 8 << 20  # held-out text per phase, at most
TXT_READ_BYTES = 1 << 20  # bytes per read of a .txt file
SUM_GROUP = 16  # counted batches summed together as a file is read
CHUNK_SCHEMA = pa.schema([("piece", pa.binary()), ("count", pa.uint64())])


def chunk_bytes(cfg: Config) -> int:
    """Count-table bytes per chunk file: a 16th of the budget (1 MiB to 1 GiB).

    Summing a chunk's tables takes about five times its size for a moment.
    """
    if CHUNK_BYTES is not None:
        return CHUNK_BYTES
    return min(max(cfg.working_set_mb << 16, 1 << 20), 1 << 30)


def batch_chars(cfg: Config) -> int:
    """Text per worker task: a 128th of the budget, from 256 Ki to 512 Ki characters.

    Larger batches gain little speed (100 MB of English: 0.85 s with 2 Mi,
    0.98 s with 512 Ki, 0.95 s with 256 Ki characters) and cost 25-35 MB
    more at peak, in flight on every thread.
    """
    if BATCH_TEXT_CHARS is not None:
        return BATCH_TEXT_CHARS
    return min(max(cfg.working_set_mb << 13, 1 << 18), 1 << 19)


def stage_dir(cfg: Config, phase: Phase) -> Path:
    return cfg.work_dir / "ingest" / phase.slug


def count_texts_fast(texts: list[str], pattern: Pattern, special_tokens: tuple[str, ...]) -> pa.Table:
    """Distinct pieces of ``texts`` with their counts, with the numba scanner
    (default and cl100k patterns; ``pretokenize.count_texts`` does any pattern).

    Runs in a thread: the scanner and its counter release the GIL, so threads
    count batches side by side with no process to start and nothing to pickle.

    >>> from toktoktok.patterns import resolve_pattern
    >>> count_texts_fast(["a a a"], resolve_pattern(None), ()).to_pylist()
    [{'piece': b'a', 'count': 1}, {'piece': b' a', 'count': 2}]
    """
    if special_tokens:  # a view of a .txt window is split as bytes
        texts = [bytes(t) if isinstance(t, memoryview) else t for t in texts]
    segments = [seg if isinstance(seg, (bytes, memoryview)) else seg.encode("utf-8")
                for text in texts for seg in split_special(text, special_tokens)]
    seg_off = np.zeros(len(segments) + 1, dtype=np.int64)
    np.cumsum([len(seg) for seg in segments], out=seg_off[1:])
    joined = segments[0] if len(segments) == 1 else b"".join(segments)  # one part: no copy
    buf = np.frombuffer(joined, dtype=np.uint8)
    return counts.from_arrays(*scanner.count_pieces(buf, seg_off, scanner.PATTERN_IDS[pattern.name]))


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


def sum_chunks(paths: list[Path]) -> pa.Table:
    """The sum of chunk files, read one at a time (memory: the sum and one chunk)."""
    total = counts.SCHEMA.empty_table()
    for path in paths:
        total = counts.sum_tables([total, artifacts.read_ipc(path)])
    return total


def phase_files(phase: Phase) -> list[tuple[Source, Path]]:
    """Every (source, file) of a phase, in config then path order."""
    return [(src, path) for src in phase.sources for path in list_source_files(src)]


def ingest_settings(cfg: Config, phase: Phase, share: float = 1.0) -> dict[str, Any]:
    """The settings this phase's ingest depends on (recorded in its manifest)."""
    return {
        "sample_share": share,
        "choice_rule": sampling.RULE,  # of the sample and of the held-out documents
        "stage": "ingest",
        "phase": phase.slug,
        "pattern": cfg.pattern.python,
        "cut_at_safe_places": cfg.pattern.cut_at_safe_places,
        "cut_at_spaces": cfg.pattern.cut_at_spaces,
        "special_tokens": list(cfg.special_tokens),
        "seed": cfg.seed,
        "heldout_share": cfg.heldout_share,
        "max_piece_bytes": cfg.max_piece_bytes,
        "on_bad_file": cfg.on_bad_file,
    }


def ingest_key(cfg: Config, phase: Phase, fingerprints: list[dict[str, Any]], share: float = 1.0) -> str:
    """What the ingest of this phase depends on: settings, file fingerprints, the sample's share."""
    return artifacts.key_of({**ingest_settings(cfg, phase, share), "files": fingerprints})


def measure_text(cfg: Config, phase: Phase, files: list[tuple[Source, Path]],
                 fingerprints: list[dict[str, Any]]) -> list[int | None]:
    """Each file's text bytes (None: unreadable, left to ingest to report).

    Sizes recorded by the last ingest of this phase are reused while a file's
    fingerprint is unchanged, so a rerun reads nothing twice. A phase whose
    files fit the budget on disk (uncompressed) needs no measuring at all.
    """
    known = {}
    manifest = artifacts.read_manifest(stage_dir(cfg, phase))
    for entry in (manifest or {}).get("inputs", []):
        if isinstance(entry, dict) and "text_bytes" in entry:
            known[_fingerprint_key(entry)] = entry["text_bytes"]
    sizes: list[int | None] = []
    for (src, path), fp in zip(files, fingerprints):
        if _fingerprint_key(fp) in known:
            sizes.append(known[_fingerprint_key(fp)])
            continue
        try:
            sizes.append(text_bytes(path, text_column=src.text_column))
        except (SourceError, OSError) as exc:
            if cfg.on_bad_file == "fail":
                raise SourceError(f"{path}: {exc.strerror or exc}") if isinstance(exc, OSError) else exc
            sizes.append(None)
    return sizes


def _fingerprint_key(fp: dict[str, Any]) -> tuple[Any, ...]:
    return (fp.get("path"), fp.get("size"), fp.get("mtime_ns"), fp.get("text_column"))


def phase_share(cfg: Config, sizes: list[int | None]) -> float:
    """The share of documents this phase keeps (1.0: no sampling)."""
    return sampling.share(total=sum(s or 0 for s in sizes), capacity=sampling.capacity(cfg.working_set_mb))


def _fingerprint(src: Source, path: Path) -> dict[str, Any]:
    st = path.stat()
    return {
        "path": str(path),
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "text_column": src.text_column,
        "weight": src.weight,
    }


@dataclass
class _Tally:
    """Counters that end up in the manifest."""

    files: int = 0
    documents: int = 0
    bytes_read: int = 0
    replaced_chars: int = 0
    forced_cuts: int = 0
    heldout_documents: int = 0
    heldout_bytes: int = 0
    heldout_truncated: int = 0
    sampled_out_documents: int = 0
    kept_documents: int = 0
    kept_bytes: int = 0
    bad_files: list[dict[str, str]] = field(default_factory=list)

    def add_read(self, stats: ReadStats) -> None:
        """What reading a file (or part of it, if it failed) counted."""
        self.documents += stats.documents
        self.bytes_read += stats.bytes_read
        self.replaced_chars += stats.replaced_chars


class _Chunker:
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


class _Batcher:
    """Sends batches of parts to the workers (or counts them here) in order.

    A batch never spans two files (``file_done`` sends the last one), so a
    file's counts stay separable until its chunk is written.
    """

    def __init__(self, cfg: Config, chunker: _Chunker, pool: Executor | None) -> None:
        self.cfg, self.chunker, self.pool = cfg, chunker, pool
        # workers are threads for the scanner; processes (which import only regex) otherwise
        self.count = count_texts_fast if has_scanner(cfg.pattern) else count_in_worker
        self.worker_peaks_kb: dict[int, int] = {}  # worker process id -> its peak RSS
        self.batch_chars = batch_chars(cfg)
        self.texts: list[str] = []
        self.chars = 0
        self.weight = 1.0
        self.file_index = 0
        self.inflight: list[tuple[Future[pa.Table] | pa.Table | None, float, int]] = []

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
        args = (self.texts, self.cfg.pattern, self.cfg.special_tokens)
        if self.pool is None:
            job = self.count(*args)
        else:
            with _sigint_ignored():  # a worker process spawned now inherits it: no traceback of its own
                job = self.pool.submit(self.count, *args)
        self.inflight.append((job, self.weight, self.file_index))
        self.texts, self.chars = [], 0
        limit = self.pool._max_workers + 1 if self.pool else 0  # bounded memory in flight
        while len(self.inflight) > limit:
            self._collect_one()

    def _collect_one(self) -> None:
        job, weight, file_index = self.inflight.pop(0)
        if job is None:  # a file ended here: chunk boundaries follow the data, not the timing
            self.chunker.file_done()
            return
        table = job.result() if isinstance(job, Future) else job
        if isinstance(table, tuple):  # (pieces, counts, pid, peak) from the regex path
            found, numbers, pid, peak = table
            if self.pool is not None:
                self.worker_peaks_kb[pid] = max(peak, self.worker_peaks_kb.get(pid, 0))
            table = counts.from_lists(found, numbers)
        self.chunker.add(counts.weighted(table, weight), file_index)

    def file_done(self) -> None:
        self.send()
        self.inflight.append((None, 1.0, self.file_index))
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


def _hold(text: str, held: list[str], tally: _Tally) -> None:
    """Keep a held-out document's block, cutting it where the per-phase cap is reached."""
    data = text.encode("utf-8", "surrogatepass")
    room = HELDOUT_CAP_BYTES - tally.heldout_bytes
    if len(data) > room:
        tally.heldout_truncated += room > 0  # the document that crosses the cap
        data = data[: max(room, 0)]
        text = data.decode("utf-8", "ignore")
    held.append(text)
    tally.heldout_bytes += len(data)


def _ingest_file(cfg: Config, phase: Phase, index: int, src: Source, path: Path, batcher: _Batcher,
                 heldout: list[str], tally: _Tally, progress: Progress, share: float) -> None:
    """Send one file's training text to the batcher and keep its held-out documents."""
    cutter = PartCutter(cut=cfg.pattern.cut_at_spaces or cfg.pattern.cut_at_safe_places,
                        breaks=cfg.pattern.cut_at_safe_places, special_tokens=cfg.special_tokens,
                        max_piece_chars=cfg.max_piece_bytes)
    route = _Router(cfg, phase, index, src.weight, share, batcher, cutter, heldout, tally)
    if file_format(path)[0] == "txt":
        _ingest_txt(path, route, progress)
    else:
        _ingest_rows(path, src, route, progress)
    route.break_stream()
    tally.forced_cuts += cutter.forced_cuts


TRAIN, HELD, SKIP = "train", "held", "skip"


class _Router:
    """Decides each document of a file (held out, left out of the sample, or
    trained on) at its start, and sends its text where it belongs.

    A held-out or left-out document breaks the stream of parts (the cutter
    is finished); training text is fed to the cutter, whose parts go to the
    batcher.
    """

    def __init__(self, cfg: Config, phase: Phase, index: int, weight: float, share: float, batcher: _Batcher,
                 cutter: PartCutter, heldout: list[str], tally: _Tally) -> None:
        self.cfg, self.slug, self.index, self.weight, self.share = cfg, phase.slug, index, weight, share
        self.batcher, self.cutter, self.heldout, self.tally = batcher, cutter, heldout, tally
        self.doc = 0  # the next document's number in the file
        self.fate: str | None = None  # the open document's; None between documents
        self.sample_key = sampling.file_key(cfg.seed, phase.slug, index, sampling.SAMPLE)
        self.heldout_key = sampling.file_key(cfg.seed, phase.slug, index, sampling.HELDOUT)
        self.held: list[str] = []
        # Training bytes may go to the scanner as they were read (``train_bytes``):
        # they need a safe place to cut them that a special token cannot straddle.
        self.bytes_ok = (has_scanner(cfg.pattern) and cfg.pattern.cut_at_safe_places
                         and not any("\r" in t or "\n" in t for t in cfg.special_tokens))
        self.carry = b""  # training bytes after the last safe place, not sent yet
        self.decoder: Utf8Decoder | None = None  # the file's (.txt), set by _ingest_txt

    def deciding(self) -> bool:
        """Whether a document could be anything but trained on now."""
        return self.share < 1 or (self.cfg.heldout_share > 0 and self.tally.heldout_bytes < HELDOUT_CAP_BYTES)

    def open(self, sample: str | None = None) -> str:
        """Decide the next document (the caller breaks the stream if it does not train).

        ``sample``: its fate in the sample (TRAIN or SKIP) when ``plan`` has found
        it a held-out candidate: only the cap is left to check, nothing is hashed again.
        """
        doc, self.doc = self.doc, self.doc + 1
        cfg, tally = self.cfg, self.tally
        room = tally.heldout_bytes < HELDOUT_CAP_BYTES
        if room and (sample is not None or sampling.chosen_many(self.heldout_key, doc, 1, cfg.heldout_share)[0]):
            self.fate, self.held = HELD, []
        else:
            if sample is None:
                sample = TRAIN if sampling.chosen_many(self.sample_key, doc, 1, self.share)[0] else SKIP
            tally.sampled_out_documents += sample is SKIP
            tally.kept_documents += sample is TRAIN
            self.fate = sample
        return self.fate

    def plan(self, count: int) -> tuple[list[str | None], list[str]]:
        """The fates of the next ``count`` documents as far as they are known now:
        TRAIN or SKIP from the sample (decided all at once), None for a held-out
        candidate, which ``open`` decides when it comes (the cap may be reached);
        and every document's fate in the sample, for ``open``."""
        cfg, first = self.cfg, self.doc
        samples = [TRAIN if keep else SKIP
                   for keep in sampling.chosen_many(self.sample_key, first, count, self.share).tolist()]
        fates: list[str | None] = list(samples)
        if cfg.heldout_share > 0 and self.tally.heldout_bytes < HELDOUT_CAP_BYTES:
            for k in np.flatnonzero(sampling.chosen_many(self.heldout_key, first, count, cfg.heldout_share)).tolist():
                fates[k] = None
        return fates, samples

    def open_many(self, fate: str, count: int) -> None:
        """Open ``count`` documents in a row whose fate ``plan`` knew (TRAIN or SKIP)."""
        self.doc += count
        if fate is TRAIN:
            self.tally.kept_documents += count
        else:
            self.tally.sampled_out_documents += count
        self.fate = fate

    def break_stream(self) -> None:
        """The parts so far end here (before a held-out or left-out document, after
        a row, at the end of a file)."""
        self.to_text()
        self.batcher.add(self.cutter.finish(), self.weight, self.index)

    def train_bytes(self, data: memoryview) -> None:
        """Training bytes of a ``.txt`` file, as read: sent up to their last safe
        place (``documents.last_break_cut``) if valid UTF-8, without decoding.

        Call ``to_bytes`` first. Invalid bytes, and a stretch with no safe place
        longer than the cutter's limit, go the way of text instead (``to_text``):
        the decoder replaces, the cutter forces its cuts.
        """
        buf = self.carry + data
        self.tally.kept_bytes += len(data)
        array = np.frombuffer(buf, dtype=np.uint8)
        cut = documents.last_break_cut(array, 0, len(buf) - 3)
        if cut > 0 and documents.valid_utf8(array[:cut]):
            self.batcher.add([memoryview(buf)[:cut]], self.weight, self.index)  # a view: no copy
            self.carry = buf[cut:]
        else:
            self.carry = buf
            if cut > 0 or len(buf) > self.cutter.part_chars + self.cutter.max_piece_chars:
                self.to_text()

    def train_raw(self, data: memoryview) -> None:
        """Training bytes of a ``.txt`` as read: to the scanner as bytes where the
        pattern allows (``train_bytes``), else decoded and fed as text."""
        if self.bytes_ok:
            self.to_bytes()
            self.train_bytes(data)
        else:
            self.train(*self.decoder.decode_sized(data))

    def to_bytes(self) -> None:
        """Hand the stream to ``train_bytes``: the cutter's rest and the decoder's
        incomplete character join the carried bytes (nothing, if it has them already)."""
        rest = self.cutter.take_rest()
        pending = self.decoder.take_pending()
        self.tally.kept_bytes += len(pending)  # the rest was counted as text
        self.carry = rest.encode("utf-8") + pending + self.carry

    def to_text(self) -> None:
        """Hand the stream back to the decoder and the cutter (carried bytes first)."""
        if self.carry:
            text, size = self.decoder.decode_sized(self.carry)
            self.tally.kept_bytes += size - len(self.carry)  # replaced bytes grow
            self.carry = b""
            self.batcher.add(self.cutter.feed(text), self.weight, self.index)

    def train(self, text: str, size: int | None = None) -> None:
        """Training text, in order (``size``: its UTF-8 bytes, if known)."""
        if text:
            if size is None:
                size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
            self.tally.kept_bytes += size
            self.batcher.add(self.cutter.feed(text), self.weight, self.index)

    def text(self, text: str) -> None:
        """Text of the open document, wherever its fate sends it."""
        if self.fate is TRAIN:
            self.train(text)
        elif self.fate is HELD:
            _hold(text, self.held, self.tally)

    def close(self) -> None:
        """The open document ends."""
        if self.fate is HELD:
            self.heldout.append("".join(self.held))
            self.tally.heldout_documents += 1
            self.held = []
        self.fate = None


def _ingest_txt(path: Path, route: _Router, progress: Progress) -> None:
    """A ``.txt`` file, a window of bytes at a time (``sources.iter_txt_windows``).

    Documents follow each other in one stream of parts: a ``.txt`` document
    ends where the default and cl100k patterns may be cut anyway, and for
    other patterns (and for a special token holding a blank line) this keeps
    the pieces equal to the pattern over the whole file. When no document can
    be held out or left out (``_Router.deciding``), a window's bytes are sent
    whole, with no work per document; otherwise each document is decided at
    its start and each run of training documents is still sent at once
    (``_Router.train_raw``: as bytes for the default and cl100k patterns).
    """
    stats = ReadStats()
    decoder = route.decoder = Utf8Decoder(stats)
    try:
        for window in iter_txt_windows(path, block_bytes=TXT_READ_BYTES, stats=stats):
            progress.update(len(window.data))
            if route.fate in (None, TRAIN) and not route.deciding():
                _whole_window(window, route, stats)
            else:
                _each_document(window, route, decoder, stats)
        route.to_text()
        route.text(decoder.decode(b"", final=True))
        route.close()
    finally:
        route.tally.add_read(stats)


def _whole_window(window: TxtWindow, route: _Router, stats: ReadStats) -> None:
    """Every document of the window trains: count them, send the bytes at once."""
    n, size = len(window.ends), len(window.data)
    closes = n > 0 and int(window.ends[-1]) == size
    started = (route.fate is None) + n - closes
    route.doc += started
    stats.documents += started
    route.tally.kept_documents += started
    route.fate = TRAIN
    route.train_raw(window.data)
    if closes:
        route.close()


def _each_document(window: TxtWindow, route: _Router, decoder: Utf8Decoder, stats: ReadStats) -> None:
    """Decide the documents starting in the window and send each run of documents of
    one fate at once: held-out candidates one by one, the sample for all at once."""
    data, ends = window.data, window.ends.tolist()
    stops = ends if ends and ends[-1] == len(data) else [*ends, len(data)]
    first = 0 if route.fate is None else 1  # segment 0 may go on with the open document
    fates, samples = route.plan(len(stops) - first)
    stats.documents += len(stops) - first
    run = -1  # where training bytes not sent yet start (the stream keeps the file's order)
    start = i = 0
    while i < len(stops):
        last = i  # the last segment of this step: one document, or a run of one fate
        if i >= first:
            fate = fates[i - first]
            if fate is None:
                fate = route.open(samples[i - first])
            else:
                while last + 1 < len(stops) and fates[last + 1 - first] is fate:
                    last += 1
                route.open_many(fate, last - i + 1)
            if fate is not TRAIN:
                if run >= 0:
                    route.train_raw(data[run:start])
                    run = -1
                route.break_stream()
        stop = stops[last]
        if route.fate is TRAIN:
            run = start if run < 0 else run
        elif route.fate is SKIP and documents.valid_utf8(np.frombuffer(data[start:stop], dtype=np.uint8)):
            decoder.skip(data[start:stop])  # left out, nothing to replace: not decoded (MEMORY.md's floor: 17 MB less)
        else:
            route.to_text()
            route.text(decoder.decode(data[start:stop]))
        if last < len(ends):
            route.close()
        start, i = stop, last + 1
    if run >= 0:
        route.train_raw(data[run:])


def _ingest_rows(path: Path, src: Source, route: _Router, progress: Progress) -> None:
    """A jsonl or parquet file, document by document (each row ends its stream of parts)."""
    stats = ReadStats()
    try:
        for block in iter_blocks(path, text_column=src.text_column, stats=stats):
            if route.fate is None and route.open() is not TRAIN:
                route.break_stream()
            route.text(block.text)
            progress.update(len(block.text))
            if block.end:
                if route.fate is TRAIN:
                    route.break_stream()
                route.close()
    finally:
        route.tally.add_read(stats)


def run_ingest(cfg: Config, phase: Phase, *, force: bool = False, progress: Progress) -> dict[str, Any]:
    """Ingest one phase unless its artifacts are current; returns its manifest."""
    folder = stage_dir(cfg, phase)
    files = phase_files(phase)
    fingerprints = [_fingerprint(src, path) for src, path in files]
    started = time.perf_counter()
    sizes = measure_text(cfg, phase, files, fingerprints)
    share = phase_share(cfg, sizes)
    key = ingest_key(cfg, phase, fingerprints, share)
    if not force and artifacts.is_current(folder, key):
        return {**artifacts.read_manifest(folder), "skipped": True}
    if share < 1:
        progress.note(f"phase '{phase.name}' has {sum(s or 0 for s in sizes) / 2**20:.0f} MB of text, more than "
                      f"working_set_mb ({cfg.working_set_mb}): sampling {share:.1%} of its documents")
    artifacts.begin(folder)
    loading = time.perf_counter()
    load_kernels(cfg)  # numba's compiled code, from its cache: timed apart, as train does
    loaded = time.perf_counter()
    tally, heldout = _Tally(), []
    chunker = _Chunker(folder, chunk_bytes(cfg))
    total = sum(fp["size"] for fp in fingerprints)  # sizes as listed: a file may vanish later
    progress.start(f"ingest {phase.name}", total=total, unit="B")
    with _pool(cfg) as pool:
        batcher = _Batcher(cfg, chunker, pool)
        chunker.pool = pool if isinstance(pool, ThreadPoolExecutor) else None
        for index, (src, path) in enumerate(files):
            held_before = len(heldout)
            try:
                _ingest_file(cfg, phase, index, src, path, batcher, heldout, tally, progress, share)
                batcher.file_done()
                tally.files += 1
            except (SourceError, FileNotFoundError) as exc:
                if cfg.on_bad_file == "fail":
                    raise SourceError(f"{path}: {exc.strerror or exc}") if isinstance(exc, OSError) else exc
                dropped = batcher.discard(index)
                del heldout[held_before:]
                tally.bad_files.append({"path": str(path), "error": str(exc), "text_read_kept": not dropped})
                progress.note(f"skipped bad file {path}: {exc}")
        batcher.drain()
    chunker.flush()
    progress.done()
    held_table = pa.table({"text": pa.array(heldout, type=pa.large_string())})
    outputs = chunker.outputs + [artifacts.write_ipc(folder / "heldout.arrow", held_table)]
    return artifacts.finish(folder, {
        "stage": "ingest",
        "phase": phase.name,
        "key": key,
        "settings": ingest_settings(cfg, phase, share),
        "inputs": [{**fp, "text_bytes": size} for fp, size in zip(fingerprints, sizes)],
        "sample": {"working_set_mb": cfg.working_set_mb, "capacity_bytes": sampling.capacity(cfg.working_set_mb),
                   "text_bytes": sum(s or 0 for s in sizes), "share": share},
        "outputs": outputs,
        "counts": {**tally.__dict__, "pieces": chunker.pieces, "chunks": len(chunker.outputs)},
        # kernels: loading numba's code; ingest: reading, cutting, counting, writing
        "seconds": {"kernels": round(loaded - loading, 3),
                    "ingest": round(time.perf_counter() - started - (loaded - loading), 3),
                    "total": round(time.perf_counter() - started, 3)},
        # worker processes (regex path) run side by side: their peaks add up
        "workers_peak_rss_mb": round(sum(batcher.worker_peaks_kb.values()) / 1024, 1),
    })


class _pool:
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
        if self.pool is not None:
            self.pool.shutdown(wait=exc[0] is None, cancel_futures=True)


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ignore Ctrl-C for a moment (only in the main thread, where Python handles it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def resolve_threads(threads: int) -> int:
    """``threads: -1`` means every core this process may use."""
    import os

    if threads and threads > 0:
        return threads
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
