"""Ingest's routing: each unit of a file (a document, or a part of a large one:
``toktoktok.units``) is decided at its start (held out, left out of the
sample, or trained on) and its text sent where it belongs: training text to
the cutter and the batcher, held-out text to the held-out list.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from toktoktok import documents, sampling, units
from toktoktok.config import Config, Phase, Source
from toktoktok.kernel_args import readonly_bytes
from toktoktok.pretokenize import PartCutter
from toktoktok.sources import (
    TEXT,
    ReadStats,
    TxtWindow,
    Utf8Decoder,
    document_rule,
    file_format,
    iter_txt_windows,
    open_binary,
)

from ..workdir.progress import Progress
from .batching import Batcher, has_scanner

UTF8_BOM = b"\xef\xbb\xbf"  # not part of the stream: offsets count from after it

from toktoktok.sampling import HELDOUT_CAP_BYTES  # held-out text per phase, at most (monkeypatched in tests)

TXT_READ_BYTES = 1 << 20  # bytes per read of a .txt file
ROW_BLOCK_CHARS = 1 << 20  # a row's unit goes to the cutter in blocks of this many characters (api.READ_BLOCK_CHARS)


@dataclass
class Tally:
    """Counters that end up in the manifest."""

    files: int = 0
    documents: int = 0
    bytes_read: int = 0
    replaced_chars: int = 0
    forced_cuts: int = 0
    units: int = 0  # sampling units: documents, and parts of documents over the bound (toktoktok.units)
    units_over_bound: int = 0  # units larger than the bound: no safe place to cut them
    heldout_documents: int = 0  # units held out (the names say documents: most units are)
    heldout_bytes: int = 0
    heldout_truncated: int = 0
    sampled_out_documents: int = 0  # units left out of the sample
    kept_documents: int = 0  # units trained on
    kept_bytes: int = 0
    heldout_trained: int = 0  # 1 when a phase's only unit to train on had been held out (it trains)
    recoded_files: int = 0  # UTF-16 or UTF-32 by their byte order mark, decoded as such
    bad_files: list[dict[str, str]] = field(default_factory=list)
    # each file's kept_bytes, by file index, for the manifest's per-source view (not one of its counts)
    kept_by_file: dict[int, int] = field(default_factory=dict)

    def add_read(self, stats: ReadStats) -> None:
        """What reading a file (or part of it, if it failed) counted."""
        self.documents += stats.documents
        self.bytes_read += stats.bytes_read
        self.replaced_chars += stats.replaced_chars
        self.recoded_files += stats.recoded_files



def hold(text: str, held: list[str], tally: Tally) -> None:
    """Keep a held-out document's block, cutting it where the per-phase cap is reached."""
    data = text.encode("utf-8", "surrogatepass")
    room = HELDOUT_CAP_BYTES - tally.heldout_bytes
    if len(data) > room:
        tally.heldout_truncated += room > 0  # the document that crosses the cap
        data = data[: max(room, 0)]
        text = data.decode("utf-8", "ignore")
    held.append(text)
    tally.heldout_bytes += len(data)



def ingest_file(cfg: Config, phase: Phase, index: int, src: Source, path: Path, batcher: Batcher,
                 heldout: list[str], tally: Tally, progress: Progress, share: float,
                 heldout_files: list[int] | None = None, span: tuple[int, int] | None = None,
                 held_keys: list[tuple[int, int]] | None = None, data: bytes | None = None) -> None:
    """Send one file's training text to the batcher and keep its held-out documents
    (``span``: only those bytes of a plain ``.txt``, starting where a document does:
    the Ray engine's byte ranges; their units, and so their keys, are those of the
    whole file, since the splitter counts offsets from the span's place in the
    stream, ``span_origin``). ``held_keys``: each held-out unit's key
    ``(offset, row)`` is appended there (the Ray engine applies the cap from them).
    ``data``: a small text file's bytes, read whole by the caller (``local``)."""
    cutter = PartCutter(**cfg.pattern.cut_rule(), special_tokens=cfg.special_tokens,
                        max_piece_chars=cfg.max_piece_bytes)
    sample_share, cap_share = sampling.shares_of(share, index)  # ``share``: a float, or ``sampling.Shares``
    route = Router(cfg, phase, index, src.weight, sample_share, batcher, cutter, heldout, tally, heldout_files,
                   cap=cap_share)
    kept_before = tally.kept_bytes
    route.held_keys = held_keys if held_keys is not None else []
    kind = file_format(path)[0]
    rule = document_rule(kind, src.documents)
    read_before = (tally.documents, tally.bytes_read)
    if kind in ("txt", TEXT) and rule in ("blank-line", "file"):
        ingest_txt(path, route, progress, splitter(cfg, span_origin(path, span)), span, ends=rule == "blank-line",
                   data=data)
    elif kind in ("txt", TEXT):
        from .text_documents import ingest_documents  # it builds on this module's Router

        ingest_documents(path, rule, route, progress)
    else:
        from .table_rows import ingest_table  # it builds on this module's Router

        ingest_table(path, src, route, progress)
    if kind in ("txt", TEXT) and span is None:
        from .text_documents import tiny_documents

        if warning := tiny_documents(path, rule, tally.documents - read_before[0], tally.bytes_read - read_before[1]):
            progress.note(f"warning: {warning}")
    route.break_stream()
    tally.forced_cuts += cutter.forced_cuts
    tally.kept_by_file[index] = tally.kept_by_file.get(index, 0) + tally.kept_bytes - kept_before



def deciding(cfg: Config, sample: float, cap: float, tally: Tally) -> bool:
    """Whether a unit of a file with these sample and cap shares could be anything
    but trained on now (``Router.deciding``)."""
    return sample < 1 or cap < 1 or (cfg.heldout_share > 0 and tally.heldout_bytes < HELDOUT_CAP_BYTES)


def takes_bytes(cfg: Config) -> bool:
    """``Router.bytes_ok``: training bytes may go to the scanner as read."""
    return (has_scanner(cfg.pattern) and cfg.pattern.cut_at_breaks
            and not any("\r" in t or "\n" in t for t in cfg.special_tokens))


def splitter(cfg: Config, origin: int = 0) -> units.Splitter:
    """The unit splitter of a ``.txt`` file under this config (``origin``: the
    stream offset of the first byte it is fed)."""
    pattern = cfg.pattern
    return units.Splitter(units.bound(cfg.working_set_mb), **pattern.cut_rule(), special_tokens=cfg.special_tokens,
                          origin=origin)


def span_origin(path: Path, span: tuple[int, int] | None) -> int:
    """The stream offset (``sampling``'s keys: after a UTF-8 byte order mark) where
    a span of a plain ``.txt`` file starts; 0 for the whole file or its first span.

        >>> import tempfile
        >>> f = Path(tempfile.mkdtemp()) / "a.txt"
        >>> _ = f.write_bytes(b"\\xef\\xbb\\xbfone\\n\\ntwo")
        >>> span_origin(f, (8, 11)), span_origin(f, (0, 8)), span_origin(f, None)
        (5, 0, 0)
    """
    if span is None or span[0] == 0:
        return 0
    with open_binary(path) as fh:
        bom = fh.read(len(UTF8_BOM)) == UTF8_BOM
    return span[0] - len(UTF8_BOM) * bom


TRAIN, HELD, SKIP = "train", "held", "skip"
TRAINS, LEFT_OUT, CANDIDATE = 0, 1, 2  # ``Router.plan``: a unit's fate as far as the sample knows it


class Router:
    """Decides each unit of a file (held out, left out of the sample, or
    trained on) at its start, and sends its text where it belongs.

    A held-out or left-out unit breaks the stream of parts (the cutter
    is finished); training text is fed to the cutter, whose parts go to the
    batcher.
    """

    def __init__(self, cfg: Config, phase: Phase, index: int, weight: float, share: float, batcher: Batcher,
                 cutter: PartCutter, heldout: list[str], tally: Tally,
                 heldout_files: list[int] | None = None, cap: float = 1.0) -> None:
        self.cfg, self.slug, self.index, self.weight, self.share = cfg, phase.slug, index, weight, share
        self.cap = cap  # the source's cap share (``max_bytes``): a unit trains if the cap keeps it too
        self.cap_key = sampling.file_key(cfg.seed, phase.slug, index, sampling.CAP)
        self.batcher, self.cutter, self.heldout, self.tally = batcher, cutter, heldout, tally
        self.heldout_files = heldout_files if heldout_files is not None else []  # each held-out unit's file
        self.fate: str | None = None  # the open unit's; None between units
        self.sample_key = sampling.file_key(cfg.seed, phase.slug, index, sampling.SAMPLE)
        self.heldout_key = sampling.file_key(cfg.seed, phase.slug, index, sampling.HELDOUT)
        self.held: list[str] = []
        self.held_keys: list[tuple[int, int]] = []  # each held-out unit's (offset, row)
        # Training bytes may go to the scanner as they were read (``train_bytes``):
        # they need a safe place to cut them that a special token cannot straddle.
        self.bytes_ok = takes_bytes(cfg)
        self.carry = b""  # training bytes after the last safe place, not sent yet
        self.decoder: Utf8Decoder | None = None  # the file's (.txt), set by ingest_txt

    def deciding(self) -> bool:
        """Whether a unit could be anything but trained on now."""
        return deciding(self.cfg, self.share, self.cap, self.tally)

    def keep(self, offsets: np.ndarray, row: int | np.ndarray = 0) -> np.ndarray:
        """Whether the phase's sample and the source's cap both keep the units
        starting at ``offsets`` (of ``row``): one vectorized hash each."""
        kept = sampling.chosen_at(self.sample_key, offsets, self.share, row=row)
        if self.cap < 1:
            kept &= sampling.chosen_at(self.cap_key, offsets, self.cap, row=row)
        return kept

    def open(self, offset: int, sample: str | None = None, row: int = 0) -> str:
        """Decide the next unit, starting at ``offset`` (of row ``row``: see
        ``sampling``); the caller breaks the stream if it does not train.

        ``sample``: its fate in the sample (TRAIN or SKIP) when ``plan`` has found
        it a held-out candidate: only the cap is left to check, nothing is hashed again.
        """
        cfg, tally = self.cfg, self.tally
        tally.units += 1
        room = tally.heldout_bytes < HELDOUT_CAP_BYTES
        at = np.array([offset], dtype=np.uint64)
        if room and (sample is not None or sampling.chosen_at(self.heldout_key, at, cfg.heldout_share, row=row)[0]):
            self.fate, self.held = HELD, []
            self.held_keys.append((offset, row))
        else:
            if sample is None:
                sample = TRAIN if self.keep(at, row)[0] else SKIP
            tally.sampled_out_documents += sample is SKIP
            tally.kept_documents += sample is TRAIN
            self.fate = sample
        return self.fate

    def plan(self, offsets: np.ndarray, row: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """The fates of the units starting at ``offsets`` as far as they are known now,
        decided all at once: each unit's code (``TRAINS`` or ``LEFT_OUT`` by the
        sample, ``CANDIDATE`` for a held-out candidate, which ``open`` decides when it
        comes: the cap may be reached), and whether the sample keeps it."""
        keep = self.keep(offsets, row)
        codes = np.where(keep, TRAINS, LEFT_OUT).astype(np.int8)
        if self.cfg.heldout_share > 0 and self.tally.heldout_bytes < HELDOUT_CAP_BYTES:
            codes[sampling.chosen_at(self.heldout_key, offsets, self.cfg.heldout_share, row=row)] = CANDIDATE
        return codes, keep

    def open_planned(self, code: int, kept: bool, offset: int, count: int = 1, row: int = 0) -> str:
        """Open what ``plan`` coded: a held-out candidate starting at ``offset`` (of
        ``row``), decided now, or ``count`` units in a row of a known fate."""
        if code == CANDIDATE:
            return self.open(offset, TRAIN if kept else SKIP, row=row)
        self.open_many(TRAIN if code == TRAINS else SKIP, count)
        return self.fate

    def open_many(self, fate: str, count: int) -> None:
        """Open ``count`` units in a row of a known fate (TRAIN or SKIP)."""
        self.tally.units += count
        if fate is TRAIN:
            self.tally.kept_documents += count
        else:
            self.tally.sampled_out_documents += count
        self.fate = fate

    def break_stream(self) -> None:
        """The parts so far end here (before a held-out or left-out unit, after
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
        self.tally.kept_bytes += len(data)
        array = readonly_bytes(data)
        cut = documents.last_break_cut(array, 0, len(data) - 3)
        first = documents.first_break_cut(array, 0, cut) if cut > 0 else -1
        if first > 0:
            # the carried bytes join the window only up to its first safe place, the
            # rest is sent where it lies: the window is not copied (copying it cost
            # the main thread, which is ingest's bottleneck)
            head = self.carry + data[:first]
            if documents.valid_utf8(readonly_bytes(head)) and documents.valid_utf8(array[first:cut]):
                self.batcher.add([head, data[first:cut]] if cut > first else [head], self.weight, self.index)
                self.carry = bytes(data[cut:])
                return
        buf = self.carry + data
        array = readonly_bytes(buf)
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
        """Text of the open unit, wherever its fate sends it."""
        if self.fate is TRAIN:
            self.train(text)
        elif self.fate is HELD:
            hold(text, self.held, self.tally)

    def close(self) -> None:
        """The open unit ends."""
        if self.fate is HELD:
            self.heldout.append("".join(self.held))
            self.heldout_files.append(self.index)
            self.tally.heldout_documents += 1
            self.held = []
        self.fate = None





def ingest_txt(path: Path, route: Router, progress: Progress, split: units.Splitter,
               span: tuple[int, int] | None = None, ends: bool = True, data: bytes | None = None) -> None:
    """A ``.txt`` file, a window of bytes at a time (``sources.iter_txt_windows``),
    whose units ``split`` finds (``units.Splitter``).

    Units follow each other in one stream of parts: a ``.txt`` unit ends
    where the default and cl100k patterns may be cut anyway, and for other
    patterns (and for a special token holding a blank line) this keeps the
    pieces equal to the pattern over the whole file. When no unit can be held
    out or left out (``Router.deciding``), a window's bytes are sent whole,
    with no work per unit; otherwise each unit is decided at its start and
    each run of training units is still sent at once (``Router.train_raw``:
    as bytes for the default and cl100k patterns). ``ends`` False: the
    whole text is one document (``documents: file``), still cut into units.
    """
    stats = ReadStats()
    decoder = route.decoder = Utf8Decoder(stats)
    try:
        read = iter_txt_windows(path, block_bytes=TXT_READ_BYTES, stats=stats, span=span, ends=ends, data=data)
        for window in _unit_windows(read, split):
            stats.documents += window.documents
            progress.update(len(window.data))
            if route.fate in (None, TRAIN) and not route.deciding():
                whole_window(window, route)
            else:
                each_unit(window, route, decoder)
        route.to_text()
        route.text(decoder.decode(b"", final=True))
        route.close()
    finally:
        route.tally.add_read(stats)
        route.tally.units_over_bound += split.over_bound


def _unit_windows(windows: Iterator[TxtWindow], split: units.Splitter) -> Iterator[units.UnitWindow]:
    """The file's windows as units' windows, with the splitter's last one."""
    for window in windows:
        yield split.feed(window.data, window.ends, buffer=window.buffer, at=window.at)
    yield split.feed(b"", np.zeros(0, dtype=np.int64), final=True)


def whole_window(window: units.UnitWindow, route: Router) -> None:
    """Every unit of the window trains: count them, send the bytes at once."""
    n, size = len(window.ends), len(window.data)
    if not size:
        return
    closes = n > 0 and int(window.ends[-1]) == size
    started = (route.fate is None) + n - closes
    route.tally.units += started
    route.tally.kept_documents += started
    route.fate = TRAIN
    route.train_raw(window.data)
    if closes:
        route.close()


def each_unit(window: units.UnitWindow, route: Router, decoder: Utf8Decoder) -> None:
    """Decide the units starting in the window and send each run of units of one
    fate at once: held-out candidates one by one, the sample for all at once.

    The runs are found on arrays (``Router.plan``): a unit at a time in
    Python, a ``.txt`` of 1.9 million documents spent most of a second here
    whenever a held-out share was set."""
    data, ends = window.data, window.ends
    size = len(data)
    if not size:
        return
    count = len(ends)
    stops = ends if count and int(ends[-1]) == size else np.append(ends, size)
    first = 0 if route.fate is None else 1  # segment 0 may go on with the open unit
    offsets = np.concatenate((np.zeros(1, dtype=ends.dtype), ends))[first : len(stops)]
    codes, keep = route.plan(offsets.astype(np.uint64) + np.uint64(window.start))
    # a step: the open unit's rest, one held-out candidate, or a run of units of one known fate
    change = np.ones(len(codes), dtype=np.bool_)
    change[1:] = (codes[1:] != codes[:-1]) | (codes[1:] == CANDIDATE)
    heads = ([0] if first else []) + (np.flatnonzero(change) + first).tolist()
    run = -1  # where training bytes not sent yet start (the stream keeps the file's order)
    start = 0
    for i, after in zip(heads, [*heads[1:], len(stops)]):
        last = after - 1
        if i >= first:
            fate = route.open_planned(int(codes[i - first]), bool(keep[i - first]), window.start + start, after - i)
            if fate is not TRAIN:
                if run >= 0:
                    route.train_raw(data[run:start])
                    run = -1
                route.break_stream()
        stop = int(stops[last])
        if route.fate is TRAIN:
            run = start if run < 0 else run
        elif route.fate is SKIP and documents.valid_utf8(readonly_bytes(data[start:stop])):
            decoder.skip(data[start:stop])  # left out, nothing to replace: not decoded (less memory at the peak)
        else:
            route.to_text()
            route.text(decoder.decode(data[start:stop]))
        if last < count:
            route.close()
        start = stop
    if run >= 0:
        route.train_raw(data[run:])


def route_row(route: Router, text: str, offset: int, row: int) -> None:
    """One row (of a jsonl or table file; ``table_rows`` sends the rare ones here): each unit of it (the row, or parts of it:
    ``units.row_parts``) is decided at its start, and the row ends its stream of parts.
    ``offset`` and ``row`` are its key (``sampling``)."""
    cfg = route.cfg
    parts, over = units.row_parts(text, units.bound(cfg.working_set_mb),
                                  **cfg.pattern.cut_rule(), special_tokens=cfg.special_tokens)
    route.tally.units_over_bound += over
    offsets = np.array([offset + at for at, _ in parts], dtype=np.uint64)
    codes, keep = route.plan(offsets, row)  # all at once: one hash call per row
    for k, (at, part) in enumerate(parts):
        route.open_planned(int(codes[k]), bool(keep[k]), offset + at, row=row)
        if route.fate is not TRAIN:
            route.break_stream()
        for i in range(0, len(part), ROW_BLOCK_CHARS):  # as read, so forced cuts fall alike
            route.text(part[i : i + ROW_BLOCK_CHARS])
        if route.fate is TRAIN:
            route.break_stream()
        route.close()
