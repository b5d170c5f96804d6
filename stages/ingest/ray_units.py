"""One unit of ingest's work on its own: a whole file, or a byte range of a
plain ``.txt`` file, read and counted exactly as the local engine reads it
(``routing.ingest_file``, the same batcher, cutter and numba scanner) but
returning its count table, its tally and its held-out documents instead of
writing anything. The Ray engine (``stages.ray_engine``) runs one per task;
a task that writes nothing can be retried without counting twice.

Byte ranges (``plan_spans``) start where a document starts (``documents.doc_ends``),
which for the default and cl100k patterns is a safe place (a line break before
non-white space): the pieces, and so the summed counts, of the ranges are
those of the whole file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from toktoktok import counts, documents
from toktoktok.config import Config, Phase, Source
from toktoktok.kernel_args import readonly_bytes
from toktoktok.sources import SourceError, file_format, open_binary

from ..workdir.progress import Progress
from .batching import Batcher, has_scanner
from .chunking import Chunker
from .routing import Tally, ingest_file

NEVER_WRITE = 1 << 62  # a chunker that only sums


@dataclass
class UnitResult:
    """What a unit counted: its table (distinct pieces, weighted counts), its tally,
    its held-out documents (in order) and the special tokens found."""

    table: pa.Table
    tally: Tally
    heldout: list[str] = field(default_factory=list)
    specials_found: dict[str, int] = field(default_factory=dict)
    heldout_keys: list[tuple[int, int]] = field(default_factory=list)  # each held-out unit's (offset, row)
    peak_rss_kb: int = 0  # the process that counted it, as it finished
    seconds: float = 0.0  # reading and counting it


def count_unit(cfg: Config, phase: Phase, index: int, src: Source, path: Path, share: float, *,
               span: tuple[int, int] | None = None, heldout_before: int = 0, threads: int = 1) -> UnitResult:
    """Read and count file ``index`` of the phase (or its bytes ``span``).

    ``heldout_before``: held-out bytes the phase had before this file, so that
    the held-out cap is reached where the local engine reaches it.
    ``threads``: threads running the numba scanner (a custom pattern's ``regex``
    runs in this thread). A bad file with ``on_bad_file: skip`` comes back with
    nothing counted and its error in ``tally.bad_files``.
    """
    started = time.perf_counter()
    chunker = Chunker(Path(os.devnull), NEVER_WRITE)
    tally = Tally(heldout_bytes=heldout_before)
    heldout: list[str] = []
    keys: list[tuple[int, int]] = []
    pool = ThreadPoolExecutor(threads) if threads > 1 and has_scanner(cfg.pattern) else None
    try:
        with contextlib.closing(Batcher(cfg, chunker, pool)) as batcher:  # as local.read_all
            try:
                ingest_file(cfg, phase, index, src, path, batcher, heldout, tally, Progress(), share, span=span,
                            held_keys=keys)
                batcher.file_done()
                batcher.drain()
            except (SourceError, FileNotFoundError) as exc:
                if cfg.on_bad_file == "fail":
                    raise SourceError(f"{path}: {exc.strerror or exc}") if isinstance(exc, OSError) else exc
                batcher.discard(index)
                bad = Tally()
                bad.bad_files.append({"path": str(path), "error": str(exc), "text_read_kept": False})
                return UnitResult(counts.SCHEMA.empty_table(), bad, [], {}, peak_rss_kb=own_peak_kb())
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    tally.forced_cuts += batcher.forced_cuts
    tally.heldout_bytes -= heldout_before
    table = chunker.done if chunker.done is not None else counts.SCHEMA.empty_table()
    return UnitResult(table, tally, heldout, dict(batcher.specials_found), keys[: len(heldout)], own_peak_kb(),
                      time.perf_counter() - started)


def count_training_texts(cfg: Config, texts: list[str], weight: float, index: int) -> UnitResult:
    """Count ``texts`` of file ``index`` as training text, each one a stream of its
    own (cut by a fresh ``PartCutter``, batched apart from other files) as
    ``local.train_last_held`` counts a unit: the held-out candidates the cap
    turned back into training text, and a phase's last held-out unit."""
    from toktoktok.pretokenize import PartCutter

    started = time.perf_counter()
    chunker = Chunker(Path(os.devnull), NEVER_WRITE)
    batcher = Batcher(cfg, chunker, None)
    tally = Tally()
    for text in texts:
        cutter = PartCutter(**cfg.pattern.cut_rule(), special_tokens=cfg.special_tokens,
                            max_piece_chars=cfg.max_piece_bytes)
        batcher.add(cutter.feed(text) + cutter.finish(), weight, index)
        tally.forced_cuts += cutter.forced_cuts
    batcher.file_done()
    batcher.drain()
    tally.forced_cuts += batcher.forced_cuts
    table = chunker.done if chunker.done is not None else counts.SCHEMA.empty_table()
    return UnitResult(table, tally, [], dict(batcher.specials_found), [], own_peak_kb(), time.perf_counter() - started)


def own_peak_kb() -> int:
    """This process's peak resident memory in kB (0 where /proc is absent)."""
    from .regex_worker import own_peak_kb as peak

    return peak()


def splittable(cfg: Config, src: Source, path: Path) -> bool:
    """Whether a file may be read as byte ranges with the same result as whole.

    A plain ``.txt`` file (not compressed, no UTF-16/32 byte order mark, cut
    into documents by the ``blank-line`` rule: ranges start where one does), the
    numba scanner with a pattern whose document starts are safe places (default,
    cl100k), no special token holding a line break, and an integer weight (counts
    are weighted per batch: a fractional weight rounds differently on other
    batches). A sample or a held-out share is no obstacle: each unit's choice is
    keyed by its byte offset in the file (``sampling.RULE``), which a range knows
    (``routing.span_origin``), and the held-out cap is applied across ranges by
    the Ray engine (``ray_engine.Capper``). With ``on_bad_file: skip`` a
    file is read whole: a file that fails part way is dropped whole, as the local
    engine drops it (its ranges read before the failure would otherwise count,
    and it would be listed once per failed range).
    """
    return (file_format(path) == ("txt", None) and src.documents in (None, "blank-line")
            and has_scanner(cfg.pattern) and cfg.pattern.cut_at_breaks
            and not any("\r" in t or "\n" in t for t in cfg.special_tokens)
            and float(src.weight).is_integer() and cfg.on_bad_file == "fail" and not wide_bom(path))


def wide_bom(path: Path) -> bool:
    """Whether the file starts with a UTF-16 or UTF-32 byte order mark (it is recoded: read whole)."""
    with open_binary(path) as fh:
        head = fh.read(4)
    return head.startswith((b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff"))


def plan_spans(path: Path, size: int, range_bytes: int, look_bytes: int = 1 << 20) -> list[tuple[int, int]]:
    """Byte ranges of about ``range_bytes`` covering the file, each after the first
    starting where a document starts (the first document end at or after the
    target offset, found within ``look_bytes``; a target with none is dropped).

        >>> import tempfile
        >>> f = Path(tempfile.mkdtemp()) / "a.txt"
        >>> _ = f.write_bytes(b"one\\n\\ntwo\\n\\nthree\\n\\n  four\\n\\nfive")
        >>> plan_spans(f, f.stat().st_size, 4)
        [(0, 5), (5, 10), (10, 25), (25, 29)]
    """
    cuts = [0]
    with open_binary(path) as fh:
        for target in range(range_bytes, size, range_bytes):
            if target <= cuts[-1]:
                continue
            base = max(target - 3, 0)
            fh.seek(base)
            buf = fh.read(look_bytes + 6)
            final = base + len(buf) >= size
            ends = documents.doc_ends(readonly_bytes(buf), target - base - 1, len(buf), final)
            ends = [int(e) + base for e in ends if int(e) + base < size]
            if ends and ends[0] > cuts[-1]:
                cuts.append(ends[0])
    cuts.append(size)
    return list(zip(cuts[:-1], cuts[1:]))


def combine_tallies(parts: list[Tally]) -> Tally:
    """The sum of units' tallies (bad files listed in order)."""
    total = Tally()
    for part in parts:
        for f in dataclasses.fields(Tally):
            value = getattr(part, f.name)
            if isinstance(value, list):
                getattr(total, f.name).extend(value)
            elif isinstance(value, dict):  # kept bytes by file: a file's ranges add up
                for key, n in value.items():
                    getattr(total, f.name)[key] = getattr(total, f.name).get(key, 0) + n
            else:
                setattr(total, f.name, getattr(total, f.name) + value)
    return total


def add_found(total: dict[str, int], found: dict[str, Any]) -> dict[str, int]:
    """Special-token occurrences summed (``total`` updated and returned)."""
    for tok, n in found.items():
        total[tok] = total.get(tok, 0) + int(n)
    return total
