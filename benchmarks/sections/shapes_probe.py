"""The ``shapes`` section's probes, each a process of its own: the limits a shape works against, and inventories.

    python benchmarks/sections/shapes_probe.py limit KIND PATH...       # prints JSON
    python benchmarks/sections/shapes_probe.py warm PATH...             # reads every file once
    python benchmarks/sections/shapes_probe.py inventory INGEST_FOLDER OUT.arrow
    python benchmarks/sections/shapes_probe.py diff A.arrow B.arrow
    python benchmarks/sections/shapes_probe.py diff-bom A.arrow B.arrow PARQUET

Limits (``KIND``), each timed around the reading alone, no tokenizing, in
seconds of the clock and of CPU (every thread of the probe):

- ``read``: ``os.open``/``read`` in 1 MiB blocks/``close`` of the files (after
  one untimed pass, so the page cache is warm);
- ``files``: every file under a folder: listing it (``os.scandir``, names in
  order), then ``os.open``/``read``/``close`` of each (one untimed pass first);
- ``parquet``: the ``text`` column streamed as toktoktok reads it
  (``ParquetFile(buffer_size=64 KiB, pre_buffer=False).iter_batches``, one
  thread, about 2 MiB of text a batch, Arrow's allocator giving back its free
  pages after each as ingest has it do; the files read once untimed), and
  ``held_mb``: how far the probe's peak RSS (``VmHWM``, a process of its
  own) rose while streaming: what pyarrow holds to read the column;
- ``jsonl``: toktoktok's JSON lines reader (``iter_jsonl_batches``: the numba
  scanner that finds each line's field and decodes its escapes), one thread
  (the file read once and numba's code loaded, untimed); for a compressed
  file, with its decompression in the thread ingest gives it;
- ``arrow``: an Arrow IPC file or stream read whole (``pa.OSFile``, no memory map);
- ``gzip``, ``zstd``: decompressed to nowhere in 1 MiB blocks (ISA-L's
  ``isal.igzip``, else ``gzip``; ``zstandard``: the libraries toktoktok reads
  them with).

``warm``: every file of the paths (a folder's listed) read once, before a
shape's ingest: the page cache of the machine the shapes were measured on
held less than all of them, and a shape whose files had left it was read
from disk (a folder of small files most slowly, at several seconds).
``inventory``: the ingest folder's ``chunk-*.arrow`` tables summed piece by
piece, sorted by piece, written as one uncompressed Arrow file; prints its
sha256, rows and total count (equal digests: equal inventories). ``diff``:
pieces found in only one of two such files, pieces counted differently, and
the first few of them (``EXAMPLES``; repr, count in A, count in B).
``diff-bom``: the same, with B's inventory made what a reader of text files
gives of the documents of ``PARQUET`` (its ``text`` column, B's rows) that
begin with a byte order mark: such a reader drops the mark (as for ``.txt``),
a row keeps it; the pieces of those documents are counted both ways with
``regex`` and the default pattern, and B is corrected by the difference.
Run apart so the benchmark itself never holds a corpus.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

try:  # the gzip reader toktoktok uses (``toktoktok.sources.streams``)
    from isal import igzip as GZIP
except ImportError:
    GZIP = gzip

BLOCK = 1 << 20
EXAMPLES = 3  # pieces shown of a diff


def read_files(paths: list[str]) -> int:
    """Bytes read by ``os.open``/``read``/``close`` of ``paths``."""
    total = 0
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            while block := os.read(fd, BLOCK):
                total += len(block)
        finally:
            os.close(fd)
    return total


def listing(folder: str) -> list[str]:
    """Every file under ``folder``, in name order (``os.scandir``)."""
    found, todo = [], [folder]
    while todo:
        current = todo.pop()
        entries = sorted(os.scandir(current), key=lambda e: e.name)
        found += [e.path for e in entries if e.is_file()]
        todo += [e.path for e in reversed(entries) if e.is_dir()]
    return found


def column_bytes(table) -> int:  # noqa: ANN001 - a pyarrow Table or RecordBatch
    import pyarrow.compute as pc

    return int(pc.sum(pc.binary_length(table.column("text"))).as_py() or 0)


def limit(kind: str, paths: list[str]) -> dict[str, float]:
    """Seconds, CPU seconds (``cpu_seconds``: this process's, every thread, over the
    same span) and bytes (text or decompressed bytes) of one limit over ``paths``."""
    global _CPU_STARTED
    _CPU_STARTED = None
    got = _limit(kind, paths)
    got["cpu_seconds"] = time.process_time() - _CPU_STARTED if _CPU_STARTED is not None else None
    return got


_CPU_STARTED: float | None = None  # ``time.process_time()`` where the timed part began (``_clock``)


def _clock() -> float:
    """``time.perf_counter()`` at the start of a limit's timed part, and its CPU time noted."""
    global _CPU_STARTED
    _CPU_STARTED = time.process_time()
    return time.perf_counter()


def _limit(kind: str, paths: list[str]) -> dict[str, float]:
    if kind == "read":
        read_files(paths)
        started = _clock()
        return {"bytes": read_files(paths), "seconds": time.perf_counter() - started}
    if kind == "files":
        read_files(listing(paths[0]))
        started = _clock()
        names = listing(paths[0])
        listed = time.perf_counter()
        nbytes = read_files(names)
        done = time.perf_counter()
        return {"bytes": nbytes, "files": len(names), "list_seconds": listed - started,
                "read_seconds": done - listed, "seconds": done - started}
    if kind == "parquet":
        return parquet_stream(paths)
    if kind == "jsonl":
        from toktoktok.sources import ReadStats
        from toktoktok.sources.row_batches import iter_jsonl_batches

        read_files(paths)
        with tempfile.TemporaryDirectory() as tmp:  # numba's cache loaded once, untimed
            (warm := Path(tmp) / "warm.jsonl").write_text('{"text": "a\\tb"}\n')
            list(iter_jsonl_batches(warm, "text", ReadStats()))
        total, started = 0, _clock()
        for path in paths:
            total += sum(batch.text_bytes() for batch in iter_jsonl_batches(Path(path), "text", ReadStats()))
        return {"bytes": total, "seconds": time.perf_counter() - started}
    if kind == "arrow":
        import pyarrow as pa
        import pyarrow.ipc as ipc

        tables, started = [], _clock()
        for path in paths:
            with open(path, "rb") as fh:
                is_file = fh.read(6) == b"ARROW1"
            with pa.OSFile(path) as source:
                tables.append((ipc.open_file if is_file else ipc.open_stream)(source).read_all())
        seconds = time.perf_counter() - started
        return {"bytes": sum(column_bytes(t) for t in tables), "seconds": seconds}
    if kind in ("gzip", "zstd"):
        import zstandard

        total, started = 0, _clock()
        for path in paths:
            with open(path, "rb") as raw:
                reader = GZIP.open(raw, "rb") if kind == "gzip" else zstandard.ZstdDecompressor().stream_reader(raw)
                with reader:
                    while block := reader.read(BLOCK):
                        total += len(block)
        return {"bytes": total, "seconds": time.perf_counter() - started}
    raise SystemExit(f"unknown limit {kind!r} (read, files, parquet, jsonl, arrow, gzip, zstd)")


def parquet_stream(paths: list[str]) -> dict[str, float]:
    """The ``parquet`` limit: the text column streamed, its seconds and the memory it held."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pool = pa.default_memory_pool()
    read_files(paths)
    before = high_water_kb()
    total, started = 0, _clock()
    for path in paths:
        with pq.ParquetFile(path, buffer_size=1 << 16, pre_buffer=False) as pf:
            meta = pf.metadata
            size = sum(meta.row_group(g).total_byte_size for g in range(meta.num_row_groups))
            rows = max(1, int((2 << 20) * meta.num_rows / max(size, 1)))
            for batch in pf.iter_batches(batch_size=rows, columns=["text"], use_threads=False):
                total += column_bytes(batch)
                del batch
                pool.release_unused()  # as ingest does after each batch
    seconds = time.perf_counter() - started
    held = (high_water_kb() - before) / 1024
    return {"bytes": total, "seconds": seconds, "held_mb": held}


def high_water_kb() -> int:
    """This process's peak resident set (``VmHWM``): its own, from its ``exec`` on
    (``ru_maxrss`` would start at the forking parent's size, which ``execve`` keeps)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def inventory(folder: Path, out: Path) -> dict[str, object]:
    """The summed, sorted count table of an ingest folder, written to ``out``; its digest, rows and total."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.ipc as ipc

    parts = [ipc.open_file(pa.memory_map(str(p))).read_all() for p in sorted(folder.glob("chunk-*.arrow"))]
    schema = pa.schema([("piece", pa.large_binary()), ("count", pa.uint64())])
    table = pa.concat_tables(parts) if parts else schema.empty_table()
    summed = table.group_by("piece").aggregate([("count", "sum")]).rename_columns(["piece", "count"])
    summed = summed.cast(schema).sort_by("piece").combine_chunks()
    with ipc.new_file(str(out), schema) as writer:
        writer.write_table(summed)
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    return {"sha256": digest, "rows": summed.num_rows, "total": int(pc.sum(summed.column("count")).as_py() or 0)}


def diff(a: Path, b: Path) -> dict[str, int]:
    """Pieces only in ``a``, only in ``b``, and in both with different counts."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.ipc as ipc

    left, right = (ipc.open_file(pa.memory_map(str(p))).read_all() for p in (a, b))
    joined = left.join(right, "piece", join_type="full outer", left_suffix="_a", right_suffix="_b")
    ca, cb = joined.column("count_a"), joined.column("count_b")
    odd = joined.filter(pc.fill_null(pc.not_equal(ca, cb), True)).slice(0, EXAMPLES).to_pylist()
    return {"only_a": int(pc.sum(pc.is_null(cb)).as_py() or 0), "only_b": int(pc.sum(pc.is_null(ca)).as_py() or 0),
            "differ": int(pc.sum(pc.fill_null(pc.not_equal(ca, cb), False)).as_py() or 0),
            "examples": [[repr(r["piece"][:40]), r["count_a"], r["count_b"]] for r in odd]}


def diff_bom(a: Path, b: Path, parquet: Path) -> dict[str, object]:
    """``diff(a, b)``, with ``b`` corrected for the documents of ``parquet`` that begin with a byte order mark."""
    from collections import Counter

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq
    import regex

    from toktoktok.patterns import DEFAULT_PATTERN

    pattern = regex.compile(DEFAULT_PATTERN)
    texts = pq.read_table(parquet, columns=["text"]).column("text")
    marked = pc.filter(texts, pc.starts_with(texts, "\ufeff")).to_pylist()
    delta: Counter = Counter()
    for text in marked:
        delta.update(piece.encode("utf-8") for piece in pattern.findall(text[1:]))
        delta.subtract(piece.encode("utf-8") for piece in pattern.findall(text))
    ref = ipc.open_file(pa.memory_map(str(b))).read_all()
    change = pa.table({"piece": pa.array(list(delta), pa.large_binary()),
                       "count": pa.array([int(v) for v in delta.values()], pa.int64())})
    both = pa.concat_tables([ref.cast(change.schema), change])
    summed = both.group_by("piece").aggregate([("count", "sum")]).rename_columns(["piece", "count"])
    summed = summed.filter(pc.not_equal(summed.column("count"), 0))
    corrected = b.with_name(b.stem + "-bom.arrow")
    schema = pa.schema([("piece", pa.large_binary()), ("count", pa.uint64())])
    with ipc.new_file(str(corrected), schema) as writer:
        writer.write_table(summed.cast(schema).sort_by("piece"))
    return {**diff(a, corrected), "marked": len(marked)}


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "limit":
        print(json.dumps(limit(argv[1], argv[2:])))
    elif len(argv) >= 2 and argv[0] == "warm":
        files = [f for path in argv[1:] for f in (listing(path) if os.path.isdir(path) else [path])]
        print(json.dumps({"bytes": read_files(files)}))
    elif len(argv) == 3 and argv[0] == "inventory":
        print(json.dumps(inventory(Path(argv[1]), Path(argv[2]))))
    elif len(argv) == 3 and argv[0] == "diff":
        print(json.dumps(diff(Path(argv[1]), Path(argv[2]))))
    elif len(argv) == 4 and argv[0] == "diff-bom":
        print(json.dumps(diff_bom(Path(argv[1]), Path(argv[2]), Path(argv[3]))))
    else:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
