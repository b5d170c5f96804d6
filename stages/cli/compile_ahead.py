"""Compile numba's kernels ahead, once: ``toktok compile``, and a cold run's first step.

numba compiles a kernel the first time it runs and keeps it in its cache
(``__pycache__`` beside the sources, or ``$NUMBA_CACHE_DIR``), keyed by the
package's sources (``toktoktok.jit_cache``). ``compile_kernels`` runs tiny
inputs through every path a run or ``toktoktok.train`` takes: each source
kind (``.txt``, ``.txt.zst``, ``.jsonl``, ``.parquet`` with ``string`` and
``large_string`` columns, ``.arrow``, a folder), special tokens or none, a
size cap, a warm start, and the Python API on strings and on an Arrow table.
The kernels take one type per argument on all of them (``toktoktok.kernel_args``),
so what this compiles serves every configuration. It compiles in one
process, and holds a lock on the cache while it does (``compile_lock``): two
processes compiling into one cache side by side left it holding parallel
kernels whose generated names collide when one process loads both (a crash
on the next run), so a second first run waits, then loads what the first
compiled.

``ensure_compiled`` is what ``run``, ``ingest`` and ``train`` do first: when
the cache is cold (``jit_cache.cold_kernels``) it says so and compiles in a
child process, ``toktok compile``, whose peak memory it reports apart: the
command's own peak is then a warm one, the one ``plan`` predicts.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

# A cold compile's time on the project's small test machine with nothing else running
# (numba compiles on one thread), as ``toktok compile`` measured it: a guide for the user
COMPILE_SECONDS = 75

_TEXT = ("The quick brown fox, it's 12345 jumps!\nÜber naïve café: 数字 ２０２６, emoji 🙂.\n"
         "  def f(x):\n\treturn x ** 2  # comment\r\n")


def _documents() -> list[str]:
    return [f"{_TEXT}document {i}: {'ab' * (i % 7)} {i * 37}" for i in range(40)]


def _write_inputs(folder: Path) -> dict[str, Path]:
    """One tiny file of every source kind under ``folder``, and long documents."""
    import pyarrow as pa
    import pyarrow.feather as feather
    import pyarrow.parquet as pq
    import zstandard

    docs = _documents()
    text = "\n\n".join(docs) + "\n"
    rows = "".join(json.dumps({"text": d}) + "\n" for d in docs)
    paths = {kind: folder / name for kind, name in (
        ("txt", "a.txt"), ("zst", "a.txt.zst"), ("jsonl", "a.jsonl"), ("string", "s.parquet"),
        ("large", "l.parquet"), ("arrow", "a.arrow"), ("folder", "folder"))}
    paths["txt"].write_text(text, encoding="utf-8")
    paths["zst"].write_bytes(zstandard.ZstdCompressor().compress(text.encode()))
    paths["jsonl"].write_text(rows, encoding="utf-8")
    pq.write_table(pa.table({"text": pa.array(docs, pa.string())}), paths["string"])
    pq.write_table(pa.table({"text": pa.array(docs, pa.large_string())}), paths["large"])
    feather.write_feather(pa.table({"text": pa.array(docs, pa.string())}), paths["arrow"])
    paths["folder"].mkdir()
    (paths["folder"] / "x.txt").write_text(text, encoding="utf-8")
    (paths["folder"] / "y.jsonl").write_text(rows, encoding="utf-8")
    # one document longer than a unit's bound and the cutter's part (1 MiB) in each
    # shape: it is cut on paths a short one never takes
    long_doc = " ".join(docs) * 300
    for kind, name in (("long_txt", "long.txt"), ("long_jsonl", "long.jsonl"), ("long_rows", "long.parquet"),
                       ("long_folder", "long")):
        paths[kind] = folder / name
    paths["long_txt"].write_text(long_doc, encoding="utf-8")
    paths["long_jsonl"].write_text(json.dumps({"text": long_doc}) + "\n", encoding="utf-8")
    pq.write_table(pa.table({"text": pa.array([long_doc, *docs], pa.string())}), paths["long_rows"])
    paths["long_folder"].mkdir()
    (paths["long_folder"] / "a.c").write_text(long_doc, encoding="utf-8")
    return paths


LONG_FOLDER = "        include: ['*.c']\n        documents: file\n"  # any suffix, a file a document


def _configs(folder: Path, paths: dict[str, Path]) -> list[Path]:
    """Every source kind with special tokens and a cap; a warm start without them; then
    long documents in every shape, held-out units decided, and none (rows sent whole)."""
    def src(key: str, extra: str = "") -> str:
        where = "path" if paths[key].is_dir() else "file"
        return f"      - {where}: {json.dumps(str(paths[key]))}\n{extra}"

    first = folder / "kinds.yaml"
    first.write_text(
        f"output: {json.dumps(str(folder / 'out' / 'kinds.tiktoken'))}\n"
        'special_tokens: ["<|endoftext|>"]\nthreads: 2\nphases:\n'
        "  - name: rows\n    merges: 40\n    sources:\n"
        + src("jsonl") + src("string") + src("large") + src("arrow")
        + "  - name: text\n    merges: 40\n    sources:\n"
        + src("txt", "        max_bytes: 2000\n") + src("zst") + src("folder"), encoding="utf-8")
    second = folder / "warm.yaml"
    second.write_text(
        f"output: {json.dumps(str(folder / 'out' / 'warm.tiktoken'))}\n"
        f"warm_start:\n  file: {json.dumps(str(folder / 'out' / 'kinds.tiktoken'))}\nthreads: 1\n"
        "phases:\n  - name: more\n    merges: 20\n    sources:\n" + src("txt"), encoding="utf-8")
    longs = src("long_txt") + src("long_jsonl") + src("long_rows") + src("long_folder", LONG_FOLDER)
    sampled, whole = folder / "long-sampled.yaml", folder / "long-whole.yaml"
    for config, extra in ((sampled, ""), (whole, "heldout_share: 0\n")):  # units decided, or rows sent whole
        config.write_text(f"output: {json.dumps(str(folder / 'out' / (config.stem + '.tiktoken')))}\n{extra}"
                          "phases:\n  - name: long\n    merges: 20\n    sources:\n" + longs, encoding="utf-8")
    return [first, second, sampled, whole]


@contextlib.contextmanager
def compile_lock() -> Iterator[None]:
    """Hold an exclusive lock for numba's cache of this package (a file in the temporary
    folder named by the cache's place); the kernel lets it go if the process dies."""
    from toktoktok import scanner

    where = str(getattr(getattr(scanner.scan_kernel, "_cache", None), "_cache_path", "") or scanner.__file__)
    name = "toktoktok-compile-" + hashlib.sha256(where.encode()).hexdigest()[:16] + ".lock"
    with open(Path(tempfile.gettempdir()) / name, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def compile_kernels() -> tuple[int, int]:
    """Run every path on tiny inputs in a temporary folder, under ``compile_lock``;
    ``(compiled, loaded)`` kernel signatures (``jit_cache.compile_counts``). Writes
    nothing elsewhere."""
    with compile_lock():
        return _compile_kernels()


def _compile_kernels() -> tuple[int, int]:
    import io

    import pyarrow as pa

    import toktoktok
    from toktoktok import jit_cache
    from toktoktok.config import load_config

    from .. import pipeline
    from ..workdir.progress import Progress

    with tempfile.TemporaryDirectory(prefix="toktok-compile-") as tmp:
        folder = Path(tmp)
        paths = _write_inputs(folder)
        for config in _configs(folder, paths):
            pipeline.run(load_config(config), force=True, progress=Progress(stream=io.StringIO()))
    docs = _documents()
    toktoktok.train(docs, merges=20, special_tokens=["<|endoftext|>"], threads=2)
    toktoktok.train(pa.table({"text": pa.array(docs, pa.large_string())}), merges=20, threads=1)
    _grow_running_sums("".join(docs).encode())
    return jit_cache.compile_counts()


def _grow_running_sums(text: bytes) -> None:
    """A running sum that starts too small, as a larger corpus's does: its growing kernels."""
    import numpy as np

    from toktoktok.kernel_args import readonly_bytes
    from toktoktok.summing import RunningSum

    counted = RunningSum(rows=1, arena_bytes=1)
    counted.count(readonly_bytes(text), np.array([0, len(text)]), 0)
    RunningSum(rows=1, arena_bytes=1).add(counted.table())


def ensure_compiled(stream: TextIO | None = None) -> bool:
    """If numba's cache is cold, say so on ``stream`` (stderr) and compile in a child
    process (``toktok compile``), reporting its time and peak memory. True if it
    compiled; a child that failed leaves the command to compile as it goes."""
    from toktoktok import jit_cache

    stream = stream or sys.stderr
    if not jit_cache.cold_kernels():
        return False
    stream.write(f"compiling kernels, once: about {COMPILE_SECONDS} s "
                 "(numba's cache is empty or older than these sources; `toktok compile` does it ahead)\n")
    stream.flush()
    began = time.monotonic()
    child = subprocess.run([sys.executable, "-m", "toktoktok_stages.cli.entry", "compile", "--quiet"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, "PYTHONWARNINGS": "ignore"})
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if child.returncode != 0:
        last = (child.stderr.strip().splitlines() or ["no message"])[-1]
        stream.write(f"compiling kernels ahead failed ({last}); they compile as the run goes\n")
        return False
    stream.write(f"compiled kernels in {time.monotonic() - began:.0f} s, in a child process "
                 f"(its peak {peak:.0f} MiB; this command's own peak is a warm run's)\n")
    stream.flush()
    return True
