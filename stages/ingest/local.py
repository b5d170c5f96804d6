"""The local engine: every file of a phase read in this process, its batches
counted by this process's workers (``batching.Workers``: scanner threads, or
``regex_worker`` processes for a custom pattern).
"""

from __future__ import annotations

import collections
import contextlib
import copy
import dataclasses
import os
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from toktoktok import documents, sampling, units
from toktoktok.config import Config, Phase, Source
from toktoktok.kernel_args import readonly_bytes
from toktoktok.pretokenize import PartCutter
from toktoktok.sources import TEXT, SourceError, document_rule, file_format, file_packs
from toktoktok.sources.decoding import SNIFF_BYTES, WIDE_BOMS, not_text
from toktoktok.sources.file_packs import NOT_READ, READ, TO_PYTHON, Pack, read_pack
from toktoktok.sources.reads import cannot_read
from toktoktok.text_segments import Segments, split
from toktoktok.uris import is_remote

from ..workdir.progress import Progress
from .batching import Batcher, Workers
from .chunking import Chunker
from .routing import UTF8_BOM, Tally, deciding, ingest_file, takes_bytes


def read_all(cfg: Config, phase: Phase, files: list, chunker: Chunker, tally: Tally, heldout: list[str],
              progress: Progress, share: float) -> Batcher:
    """Read every file of the phase through the workers; returns the batcher (its
    counters). A bad file is skipped with ``on_bad_file: skip``: dropped whole, as
    the Ray engine drops it (its counts, chunk files written of them included,
    its held-out units and its share of the tally)."""
    held_files: list[int] = []  # the file of each held-out unit
    with Workers(cfg) as pool, contextlib.closing(Batcher(cfg, chunker, pool)) as batcher:
        whole = WholeFiles(cfg, share, batcher, tally, progress, slug=phase.slug)
        packable = whole.packs_possible(files)
        with contextlib.closing(ReadAhead(files, on=batcher.fast, packable=packable)) as ahead:

            def one_file(index: int, src: Source, path: Path, read: Callable[[], tuple]) -> None:
                held_before, read_before = len(heldout), tally.bytes_read
                counted_before = data = sent = None
                try:
                    data, utf8 = read()
                    batcher.file_start(whole=data is not None)
                    sent = batcher.sent()
                    # a file sent whole changes the tally only once nothing can fail: no copy of it to restore
                    if data is None or not whole.send(index, src, path, data, utf8=utf8):
                        counted_before = copy.copy(tally)  # the tally's fields are replaced, not changed in place
                        ingest_file(cfg, phase, index, src, path, batcher, heldout, tally, progress, share,
                                    held_files, data=data)
                    batcher.file_done(whole=data is not None)
                    tally.files += 1
                    batcher.text_bytes[index] = tally.bytes_read - read_before
                except (SourceError, FileNotFoundError) as exc:
                    if cfg.on_bad_file == "fail":
                        raise SourceError(f"{path}: {exc.strerror or exc}") if isinstance(exc, OSError) else exc
                    if sent is not None and batcher.sent() != sent:
                        if data is not None:  # mixed with other files' counts: cannot be taken out (never seen)
                            raise SourceError(f"{path}: failed after it was read whole: {exc}") from exc
                        batcher.discard(index)  # its counts, written chunk files included
                    del heldout[held_before:], held_files[held_before:]
                    if counted_before is not None:
                        bad = tally.bad_files
                        for f in dataclasses.fields(tally):
                            setattr(tally, f.name, getattr(counted_before, f.name))
                        tally.bad_files = bad
                    tally.bad_files.append({"path": str(path), "error": str(exc), "text_read_kept": False})
                    batcher.text_bytes[index] = None
                    progress.note(f"skipped bad file {path}: {exc}")

            index = 0
            while index < len(files):
                item = ahead.next() if batcher.fast else None
                if isinstance(item, FilePack):
                    whole.send_pack(item, one_file, files)
                    index += item.count
                    continue
                src, path = files[index]
                one_file(index, src, path, (lambda: (None, None)) if item is None else item)
                index += 1
        if tally.kept_documents == 0 and heldout:
            train_last_held(cfg, files[held_files[-1]][0].weight, held_files.pop(), heldout, batcher, tally)
        batcher.drain()
    return batcher



class WholeFiles:
    """Small text files read whole (``local.whole_file``) sent as they are, with no
    work per unit, where ``ingest_file`` would do just that: every unit trains (no
    sample, no held-out draw left), the pattern takes bytes as read, the file is
    valid UTF-8 without a wide byte order mark, and no document of it can be over
    the bound. Counts as ``ingest_txt`` counts them.

    A folder of many small files spent most of its time building the reader of
    each file (router, cutter, splitter, windows) for a single window, and then
    deciding again for each file what is the same for all of them: what the
    phase and the pattern allow is decided here once.
    """

    def __init__(self, cfg: Config, share: float | sampling.Shares, batcher: Batcher, tally: Tally,
                 progress: Progress, *, slug: str = "") -> None:
        self.cfg, self.share, self.batcher, self.tally, self.progress = cfg, share, batcher, tally, progress
        self.slug = slug  # the phase's (the held-out draw's keys)
        self.bound = units.bound(cfg.working_set_mb)
        self.on = takes_bytes(cfg)  # else every file goes through ``ingest_file``

    def send(self, index: int, src: Source, path: Path, data: bytes, *, utf8: bool) -> bool:
        """Send one file read whole; False: use ``ingest_file``. ``utf8``:
        ``local.whole_is_utf8(data)``, found by the thread that read it."""
        if not self.on or not utf8 or len(data) > self.bound:  # not utf8: ``ingest_file`` says why
            return False
        cfg, tally = self.cfg, self.tally
        sample, cap = sampling.shares_of(self.share, index)
        if deciding(cfg, sample, cap, tally):
            return False
        kind = file_format(path)[0]
        rule = document_rule(kind, src.documents)
        if rule not in ("blank-line", "file"):
            return False
        if kind == TEXT and data.find(b"\x00", 0, SNIFF_BYTES) >= 0 and (why := not_text(data[:SNIFF_BYTES])):
            raise SourceError(f"{path}: not a text file ({why})")
        skip = len(UTF8_BOM) if data.startswith(UTF8_BOM) else 0
        size = len(data) - skip
        found = 0
        if size:
            body = memoryview(data)[skip:]
            if rule == "blank-line":
                # the last document runs to the end: ``doc_ends`` never ends one there
                found = len(documents.doc_ends(readonly_bytes(body), 0, size, True)) + 1
            else:
                found = 1
            self.batcher.add([body], src.weight, index)
        tally.bytes_read += len(data)
        tally.documents += found
        tally.units += found
        tally.kept_documents += found
        tally.kept_bytes += size
        self.progress.update(len(data))
        return True

    def packs_possible(self, files: list) -> Callable[[Source, Path], bool | None] | None:
        """``ReadAhead``'s ``packable`` (None: no file of the phase goes in a pack).

        Packs are read where every file the phase reads whole may be sent as
        ``send`` sends it: no sample, no cap, no special token to cut out (the
        files go to the scanner as segments of the pack), whole weights. With a
        held-out share, only files that are one document (``documents: file``):
        each is one unit, whose draw ``send_pack`` makes for the whole pack at once."""
        if (not self.on or isinstance(self.share, sampling.Shares) or self.share < 1
                or self.cfg.special_tokens or not all(float(src.weight).is_integer() for src, _ in files)):
            return None
        held = self.cfg.heldout_share > 0

        def packable(src: Source, path: Path) -> bool | None:
            if is_remote(path):
                return None
            kind, compression = file_format(path)
            rule = document_rule(kind, src.documents)
            if compression is not None or kind not in ("txt", TEXT) or rule not in ("blank-line", "file"):
                return None
            if held and rule != "file":  # its documents are units, each drawn apart: one file at a time
                return None
            return rule == "blank-line"

        return packable

    def send_pack(self, item: FilePack, one_file: Callable[..., None], files: list) -> None:
        """Send the files of a pack: each run of files read in it as segments of its
        buffer, with the tally's counts summed; each file left to Python by
        ``one_file`` in its place, as any file read whole."""
        pack, first, count = item.pack, item.first, item.count
        read = pack.status[:count] == READ
        starts, ends = pack.starts[:count], pack.ends[:count]
        fits = (ends - starts)[read].max(initial=0) <= self.bound
        if not fits:  # as ``send`` would: one file at a time
            for k in range(count):
                one_file(first + k, *files[first + k], item.item(k))
            return
        if deciding(self.cfg, self.share, 1.0, self.tally):  # only the held-out draw can decide (``packs_possible``)
            read = read & ~self._drawn(first, count, read & (pack.documents[:count] > 0))
        begins = np.ones(count, dtype=np.bool_)  # a file that begins a run (any other file: its own)
        begins[1:] = ~read[:-1] | ~read[1:] | (starts[1:] != ends[:-1])
        cuts = np.flatnonzero(begins).tolist() + [count]
        for a, b in zip(cuts, cuts[1:]):
            if read[a]:
                self._send_run(item, a, b, files[first][0])
            else:
                one_file(first + a, *files[first + a], item.item(a))

    def _drawn(self, first: int, count: int, units: np.ndarray) -> np.ndarray:
        """Which of files ``first`` to ``first + count - 1`` the held-out draw picks,
        where ``units`` marks those that are one unit (at offset 0, row 0): such a
        file goes the way of any file, which draws it again and holds it out if
        the held-out text has room left; the draw keeps every other one whole."""
        drawn = np.zeros(count, dtype=np.bool_)
        at = np.flatnonzero(units)
        if len(at):
            keys = np.array([sampling.file_key(self.cfg.seed, self.slug, first + int(k), sampling.HELDOUT)
                             for k in at], dtype=np.uint64)
            drawn[at] = sampling.chosen_at(keys, np.zeros(len(at), dtype=np.uint64), self.cfg.heldout_share)
        return drawn

    def _send_run(self, item: FilePack, a: int, b: int, src: Source) -> None:
        """Files ``a`` to ``b - 1`` of the pack, their texts end to end in its buffer."""
        pack, batcher, tally = item.pack, self.batcher, self.tally
        bounds = np.empty(b - a + 1, dtype=np.int64)
        bounds[0], bounds[1:] = pack.starts[a], pack.ends[a:b]
        for part in split(Segments.of(pack.data, bounds), batcher.chars_per_batch):
            batcher.add([part], src.weight, item.first + b - 1)
        batcher.file_done(whole=True)
        sizes, found = pack.sizes[a:b], int(pack.documents[a:b].sum())
        read = int(sizes.sum())
        tally.bytes_read += read
        tally.documents += found
        tally.units += found
        tally.kept_documents += found
        tally.kept_bytes += int(bounds[-1] - bounds[0])
        tally.files += b - a
        batcher.text_bytes.update(zip(range(item.first + a, item.first + b), sizes.tolist()))
        self.progress.update(read)


def whole_is_utf8(data: bytes) -> bool:
    """Whether a file read whole is UTF-8 text as ``WholeFiles`` sends it: valid
    after a UTF-8 byte order mark if any, with no wide byte order mark.

        >>> whole_is_utf8(b"\\xef\\xbb\\xbfok"), whole_is_utf8(b"\\xff\\xfeo\\x00"), whole_is_utf8(b"\\xc3")
        (True, False, False)
    """
    if any(data.startswith(bom) for bom, _ in WIDE_BOMS):
        return False
    return bool(documents.valid_utf8(readonly_bytes(data)[len(UTF8_BOM) if data.startswith(UTF8_BOM) else 0 :]))


READ_AHEAD_FILES = 1024  # small files read ahead of the one being sent, at most
READ_AHEAD_BYTES = 16 << 20  # and at most about this many bytes of them (one file more may pass it)


PACK_FILES = 1024  # files a pack may hold, at most (``read_pack``)


@dataclasses.dataclass(frozen=True)
class FilePack:
    """Files ``first`` to ``first + count - 1`` of the phase, read by ``read_pack``;
    ``python``: for a file it left to Python (``TO_PYTHON``), its ``ReadAhead`` item."""

    pack: Pack
    first: int
    count: int
    python: dict[int, Callable[[], tuple]]

    def item(self, k: int) -> Callable[[], tuple]:
        """File ``first + k`` as ``ReadAhead`` gives a file: a call that gives its bytes and
        whether they are UTF-8 (a file read in the pack is, after its byte order mark)."""
        if k in self.python:
            return self.python[k]
        pack = self.pack
        raw = bytes(pack.data[pack.ends[k] - pack.sizes[k] : pack.ends[k]])  # its byte order mark included
        return lambda: (raw, True)


class ReadAhead:
    """Each file read in turn, in a thread of its own that keeps up to
    ``READ_AHEAD_FILES`` files or ``READ_AHEAD_BYTES`` ahead of the caller:
    opening and reading wait on the system, which let the counting threads wait
    on this one when a folder holds many small files, and a deep queue rides out
    the moments the caller waits on the counting threads. ``next`` gives, in
    order, a call that gives the next file's ``whole_file`` and whether it is
    UTF-8 (``whole_is_utf8``), or raises what reading it raised; or a
    ``FilePack`` of the next files, where ``packable(src, path)`` says a run of
    them may be read together (whether to count a file's documents by the
    ``blank-line`` rule, None: it may not). ``on=False``: no thread, ``next``
    is not used.

        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp()); _ = (d / "a.txt").write_bytes(b"one"); _ = (d / "b.txt").write_bytes(b"two")
        >>> with contextlib.closing(ReadAhead([(None, d / "a.txt"), (None, d / "b.txt")])) as ahead:
        ...     ahead.next()(), ahead.next()()
        ((b'one', True), (b'two', True))
    """

    def __init__(self, files: list, *, on: bool = True,
                 packable: Callable[[Source, Path], bool | None] | None = None) -> None:
        self.files, self.packable = files, packable
        self.results: collections.deque = collections.deque()
        self.held = 0  # bytes in ``results``
        self.room = threading.Condition()
        self.stopping = False
        self.thread = threading.Thread(target=self._read, name="toktoktok-read-ahead", daemon=True)
        if on and files:
            self.thread.start()

    def _read(self) -> None:
        files, rules = self.files, [None] * len(self.files)
        i = 0
        while i < len(files):
            item, size, took = self._pack(i, rules) if self.packable is not None else (None, 0, 0)
            if item is None:
                item, size, took = self._one(files[i][1])
            if not self._put(item, size):
                return
            i += took

    def _pack(self, i: int, rules: list) -> tuple[FilePack | None, int, int]:
        """The pack that begins at file ``i`` (None: that file may not go in one)."""
        files, src = self.files, self.files[i][0]
        j = i
        while j < len(files) and j - i < PACK_FILES and files[j][0] is src:
            if rules[j] is None:
                rules[j] = self.packable(*files[j])
                rules[j] = -1 if rules[j] is None else int(rules[j])
            if rules[j] < 0:
                break
            j += 1
        if j == i:
            return None, 0, 0
        pack = read_pack([path for _, path in files[i:j]], blank=rules[i:j], max_file=WHOLE_FILE_BYTES,
                         capacity=file_packs.PACK_BYTES)
        count = int(np.count_nonzero(pack.status != NOT_READ))
        if not count:  # cannot happen (the first file always fits): read it alone
            return None, 0, 0
        python = {int(k): self._one(files[i + k][1])[0] for k in np.flatnonzero(pack.status[:count] == TO_PYTHON)}
        return FilePack(pack, i, count, python), len(pack.data), count

    @staticmethod
    def _one(path: Path) -> tuple[Callable[[], tuple], int, int]:
        try:
            data = whole_file(path)
            utf8 = None if data is None else whole_is_utf8(data)
        except BaseException as exc:  # handed to the caller, which decides, in order
            def fail(exc: BaseException = exc) -> tuple:
                raise exc
            return fail, 0, 1
        return (lambda: (data, utf8)), len(data or b""), 1

    def _put(self, item: object, size: int) -> bool:
        with self.room:
            while not self.stopping and (len(self.results) >= READ_AHEAD_FILES or self.held > READ_AHEAD_BYTES):
                self.room.wait()
            if self.stopping:
                return False
            self.results.append((item, size))
            self.held += size
            self.room.notify_all()
        return True

    def next(self) -> Callable[[], tuple] | FilePack:
        """The next file's call (its bytes, None if it is not read whole; whether they
        are UTF-8 as ``WholeFiles`` sends them, found here: the check would cost the
        caller's thread a pass over every byte), or the next files' pack."""
        with self.room:
            while not self.results:
                self.room.wait()
            item, size = self.results.popleft()
            self.held -= size
            self.room.notify_all()
        return item

    def close(self) -> None:
        """Stop reading: what was read ahead is dropped."""
        with self.room:
            self.stopping = True
            self.results.clear()
            self.room.notify_all()
        if self.thread.is_alive():
            self.thread.join()


WHOLE_FILE_BYTES = 1 << 20  # a plain local text file this small is read whole before any of it is counted


def whole_file(path: Path) -> bytes | None:
    """A small plain text file's bytes, read whole (None: a file read as it goes).

    Read before any of its text is sent, such a file cannot fail half way: the
    batcher may then count many of them in one batch (``Batcher.file_done``),
    where a folder of many small files spent its time ending a batch, a group
    and a step of the chunker at every file.
    """
    kind, compression = file_format(path)
    if compression is not None or kind not in ("txt", TEXT) or is_remote(path):
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise cannot_read(path, exc) from exc
    try:
        size = os.fstat(fd).st_size
        if size > WHOLE_FILE_BYTES:
            return None
        data = os.read(fd, size + 1)  # fewer bytes than asked: the end of the file
        if len(data) <= size:
            return data
        chunks = [data]  # it grew meanwhile: read on to its end
        while chunks[-1]:
            chunks.append(os.read(fd, 1 << 16))
        return b"".join(chunks)
    except OSError as exc:
        raise cannot_read(path, exc) from exc
    finally:
        os.close(fd)


def train_last_held(cfg: Config, weight: float, index: int, heldout: list[str], batcher: Batcher,
                    tally: Tally) -> None:
    """A phase that would train on nothing trains on its last held-out unit instead:
    the held-out share never takes a phase's last training unit. (Decided at the
    end, when it is known that nothing else trains; the unit is the last one in
    key order, as the held-out cap is applied in key order. If it crossed the
    cap it was cut there, and it trains as it was kept.)"""
    text = heldout.pop()
    size = len(text.encode("utf-8", "surrogatepass"))
    cutter = PartCutter(**cfg.pattern.cut_rule(), special_tokens=cfg.special_tokens,
                        max_piece_chars=cfg.max_piece_bytes)
    batcher.add(cutter.feed(text) + cutter.finish(), weight, index)
    batcher.file_done()  # the chunker takes a file's counts at its end
    tally.forced_cuts += cutter.forced_cuts
    tally.heldout_documents -= 1
    tally.heldout_bytes -= size
    tally.kept_documents += 1
    tally.kept_bytes += size
    tally.heldout_trained = 1
