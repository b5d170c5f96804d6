"""Speed of the numba scanner against ``regex.findall`` (MB/s, 1 and 2 threads).

    .venv/bin/python benchmarks/run.py --section scanner [--mb 20] [--repeat 5]
    .venv/bin/python benchmarks/run.py --section scanner --file TEXT.txt --mb 100 --json rates.json

This section measures kernels of the library (``toktoktok.scanner``, and
``toktoktok.span_table`` counting its pieces) directly, so it imports them;
every other section drives toktoktok through its command line, its public
library and the manifests it writes.

Text: the first ``--mb`` MB of ``../shared/corpora/{english,code}.txt.zst``
when present, else the docstrings and sources of Python's standard library
repeated to that size. Segments are documents (a blank line before a
non-space, docs/pretokenization.md), each matched on its own, as ingest does.

Rows: MB/s from the median and from the best wall time of ``--repeat`` runs
(after one warm-up that loads numba's compile cache), and MB per CPU-second
of all threads. On a busy machine the best run is the one that had the cores
it asked for; a 2-thread row whose CPU figure is about its wall figure ran on
one core.

- ``regex.findall``: the reference, one call per document;
- ``regex.findall + Counter``: the old ingest loop;
- ``scan_default``: piece ends only (one call over the whole buffer);
- ``count_pieces``: scan and count distinct pieces (flat arrays out);
- ``RunningSum.count``: what ingest's counting threads run: each piece
  counted as it is found, into a table that stays (as a thread's table of a
  stretch of batches), the documents in 512 KiB batches;
- ``... 2 threads``: two Python threads, each on half of the documents
  (nogil kernels), counted tables merged with ``merge_counts``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import statistics
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import regex

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchkit.corpus import SHARED_CORPORA, split_documents  # noqa: E402

from toktoktok.patterns import DEFAULT_PATTERN  # noqa: E402
from toktoktok.scanner import DEFAULT, scan  # noqa: E402
from toktoktok.span_table import count_pieces, merge_counts  # noqa: E402
from toktoktok.unicode_classes import unicode_tables  # noqa: E402
from toktoktok.summing import RunningSum  # noqa: E402

MB = 1_000_000


def load_text(name: str, mb: int) -> tuple[str, str]:
    """(text, where it came from): ``name`` a path to a UTF-8 text, else a shared corpus head, else stdlib text."""
    if Path(name).is_file():
        with open(name, "rb") as fh:
            raw = fh.read(mb * MB)
        return raw.decode("utf-8", errors="ignore"), name
    path = SHARED_CORPORA / f"{name}.txt.zst"
    if path.is_file():
        import zstandard

        with path.open("rb") as f:
            raw = zstandard.ZstdDecompressor().stream_reader(f).read(mb * MB)
        return raw.decode("utf-8", errors="ignore"), str(path)
    import collections
    import email
    import json

    parts = []
    for module in (collections, email, json, inspect, argparse):
        parts.append(inspect.getsource(module) if name == "code" else (inspect.getdoc(module) or ""))
    base = "\n\n".join(parts)
    return (base * (mb * MB // max(1, len(base)) + 1))[: mb * MB], "Python standard library (built)"


def documents(text: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The UTF-8 buffer, the documents' byte offsets, and the documents."""
    docs = split_documents(text)
    raws = [d.encode() for d in docs]
    off = np.concatenate([[0], np.cumsum([len(r) for r in raws])]).astype(np.int64)
    return np.frombuffer(b"".join(raws), dtype=np.uint8), off, docs


def timed(fn, repeat: int) -> tuple[float, float, float]:
    """(median wall, best wall, median cpu) seconds of ``repeat`` runs after a warm-up."""
    fn()
    walls, cpus = [], []
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), min(walls), statistics.median(cpus)


def batch_offsets(off: np.ndarray, batch: int = 1 << 19) -> list[np.ndarray]:
    """The documents' offsets in runs of at most ``batch`` bytes (at least one
    document each), as ingest batches them.

        >>> [b.tolist() for b in batch_offsets(np.array([0, 1, 3, 9]), batch=4)]
        [[0, 1, 3], [3, 9]]
    """
    out, start = [], 0
    while start < len(off) - 1:
        stop = max(start + 1, int(np.searchsorted(off, off[start] + batch, side="right")) - 1)
        out.append(off[start : stop + 1])
        start = stop
    return out


def halves(off: np.ndarray) -> list[np.ndarray]:
    """Two runs of documents of about equal bytes (their offset arrays)."""
    mid = int(np.searchsorted(off, off[-1] // 2))
    mid = min(max(mid, 1), len(off) - 2) if len(off) > 2 else 1
    return [off[: mid + 1], off[mid:]]


def bench(name: str, mb: int, repeat: int, kernels_only: bool = False) -> list[tuple[str, float, float, float]]:
    text, source = load_text(name, mb)
    buf, off, docs = documents(text)
    size = len(buf)
    print(f"\n{name}: {size / MB:.1f} MB, {len(docs)} documents, from {source}")
    rx = regex.compile(DEFAULT_PATTERN)
    ends = np.empty(size, dtype=np.int64)
    parts = halves(off)
    pool = ThreadPoolExecutor(max_workers=2)

    def findall():
        for d in docs:
            rx.findall(d)

    def findall_counter():
        c = Counter()
        for d in docs:
            c.update(rx.findall(d))

    def scan_one():
        scan(buf, 0, size, ends, DEFAULT)

    def scan_two():
        jobs = [pool.submit(scan, buf, int(p[0]), int(p[-1]), ends[p[0] :], DEFAULT) for p in parts]
        for j in jobs:
            j.result()

    def count_one():
        count_pieces(buf, off, DEFAULT)

    def count_two_only():
        list(pool.map(lambda p: count_pieces(buf, p, DEFAULT), parts))

    def count_two_merged():
        merge_counts(list(pool.map(lambda p: count_pieces(buf, p, DEFAULT), parts)))

    batches = batch_offsets(off)

    def running_one():
        table = RunningSum(rows=1 << 14, arena_bytes=1 << 20)
        for seg in batches:
            table.count(buf, seg, DEFAULT)

    rows = [
        ("regex.findall", findall, 2),
        ("regex.findall + Counter", findall_counter, 2),
        ("scan_default, 1 thread", scan_one, repeat),
        ("scan_default, 2 threads", scan_two, repeat),
        ("count_pieces, 1 thread", count_one, repeat),
        ("count_pieces, 2 threads", count_two_only, repeat),
        ("count_pieces, 2 threads + merge_counts", count_two_merged, repeat),
        ("RunningSum.count, 1 thread", running_one, repeat),
    ]
    if kernels_only:
        rows = rows[2:]
    out = []
    print(f"  {'':40s} {'median':>8s} {'best':>8s} {'per cpu-s':>10s}  (MB/s)")
    for label, fn, reps in rows:
        wall, best, cpu = timed(fn, reps)
        out.append((label, size / wall / MB, size / best / MB, size / cpu / MB))
        print(f"  {label:40s} {size / wall / MB:8.1f} {size / best / MB:8.1f} {size / cpu / MB:10.1f}")
    pool.shutdown()
    best = {label: b for label, _, b, _ in out}
    for what in ("scan_default", "count_pieces"):
        ratio = best[f"{what}, 2 threads"] / best[f"{what}, 1 thread"]
        print(f"  scaling of {what} with 2 threads (best runs): {ratio:.2f}x")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="run.py --section scanner", description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--file", type=Path, default=None,
                    help="a UTF-8 text to measure instead of english and code (the kernels only, no regex rows)")
    ap.add_argument("--json", type=Path, default=None,
                    help="write the --file's best MB/s (scan_1, count_1, count_2) here (the scale section reads it)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    unicode_tables()
    print(f"class table ready in {time.perf_counter() - t0:.2f} s (derived once, then loaded from cache)")
    cpu = platform.processor() or platform.machine()
    print(f"machine: {os.cpu_count()} cores, {cpu}; load average {os.getloadavg()[0]:.2f}")
    if args.file is None:
        for name in ("english", "code"):
            bench(name, args.mb, args.repeat)
        return
    best = {label: b for label, _, b, _ in bench(str(args.file), args.mb, args.repeat, kernels_only=True)}
    if args.json is not None:
        args.json.write_text(json.dumps({
            "mb": args.mb, "repeat": args.repeat,
            "scan_1": best["scan_default, 1 thread"], "count_1": best["RunningSum.count, 1 thread"],
            "count_pieces_1": best["count_pieces, 1 thread"],
            "count_2": best["count_pieces, 2 threads + merge_counts"]}))
