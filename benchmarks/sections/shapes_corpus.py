"""The ``shapes`` section's corpora: the scale section's kernel text, one file a document, in every shape users bring.

    .venv/bin/python benchmarks/run.py --section shapes [--data /work/scale-data] [--mb 50]

(this module is the build step of ``sections/shapes.py``.) The file set is
the scale section's (``scale_corpus.py``): every UTF-8 member of Debian's
``linux-source-6.1`` tarball with a wanted suffix or name, not all white
space, in the order of a hash of its path, every 20th held out; the rest is
the training text, or (``mb``) its first files up to ``mb`` × 10^6 bytes, as
the scale prefixes are cut. Each file's text is ``scale_corpus.as_document``
(stripped, then a blank line), so every shape holds the same bytes and the
one ``.txt`` is byte for byte the scale section's ``train-full.txt`` (or its
prefix). Written once into ``DATA/shapes/`` (``DATA/shapes-50MB/`` for a
slice), reused while ``manifest.json`` names the same ``.deb`` and slice:

    >>> sorted(SHAPE_FILES)[:3]
    ['arrow', 'datasets', 'folder']
"""

from __future__ import annotations

import gzip
import json
import math
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import zstandard

from sections import scale_corpus

ROW_GROUP = 100_000
PARQUET_PARTS = 8  # files of the parquet folder
ARROW_BATCH = 1_000  # rows a record batch, as ``datasets`` writes them
DATASETS_SHARD_BYTES = 500_000_000  # ``datasets``' default ``max_shard_size``
GZIP_LEVEL = 6  # the ``gzip`` tool's default
ZSTD_LEVEL = 3  # the ``zstd`` tool's default
MB = 1_000_000

# shape -> what it is made of, relative to the shapes folder
SHAPE_FILES = {
    "txt": "one.txt", "txt.gz": "one.txt.gz", "txt.zst": "one.txt.zst",
    "folder": "folder/", "folder-txt": "folder-txt/",
    "parquet": "snappy.parquet", "parquet-zstd": "zstd.parquet", "parquet-none": "uncompressed.parquet",
    "parquet-large": "large_string.parquet", "parquet-folder": "parquet-folder/",
    "arrow": "file.arrow", "datasets": "datasets/",
    "jsonl": "docs.jsonl", "jsonl.gz": "docs.jsonl.gz", "jsonl.zst": "docs.jsonl.zst",
}


def folder_path(member: str) -> str:
    """A tarball member's path inside the folder shape: ``./`` dropped, a leading dot of a name made ``_.``
    (toktoktok's folder scan skips hidden names, and the folder must hold every document).

        >>> folder_path("./linux-source-6.1/tools/.x/a.c")
        'linux-source-6.1/tools/_.x/a.c'
    """
    parts = member.removeprefix("./").split("/")
    return "/".join("_" + p if p.startswith(".") else p for p in parts)


def select(files: list[tuple[bytes, str, bytes]], limit: int | None) -> list[tuple[str, bytes]]:
    """(path, document) of the training files in the corpus's order, up to ``limit`` bytes (None: all).

    ``files``: (order key, path, document) in any order. As ``scale_corpus.build``:
    every ``HOLD_OUT_EVERY``-th file in key order is held out; a prefix ends
    before the first file that would pass ``limit``.

        >>> fs = [(bytes([i]), f"f{i}", b"x" * 10) for i in range(1, 41)]
        >>> [p for p, _ in select(fs, 45)]
        ['f1', 'f2', 'f3', 'f4']
        >>> len(select(fs, None))
        38
    """
    chosen, size = [], 0
    for n, (_, path, doc) in enumerate(sorted(files), start=1):
        if n % scale_corpus.HOLD_OUT_EVERY == 0:
            continue
        if limit is not None and size + len(doc) > limit:
            break
        chosen.append((path, doc))
        size += len(doc)
    return chosen


def read_kernel(deb: Path, limit: int | None) -> list[tuple[str, bytes]]:
    """The selected documents of the kernel tarball in ``deb`` (see ``select``)."""
    files = []
    for path, raw in scale_corpus.kernel_files(deb):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if text.strip():
            files.append((scale_corpus.order_key(path), path, scale_corpus.as_document(text).encode("utf-8")))
    return select(files, limit)


def text_arrays(docs: list[tuple[str, bytes]]) -> tuple[pa.Array, pa.Array]:
    """The documents as an Arrow ``string`` and a ``large_string`` array over one data buffer (no ``str`` a row).

        >>> [a.to_pylist() for a in text_arrays([("a", b"x"), ("b", b"yz")])]
        [['x', 'yz'], ['x', 'yz']]
    """
    offsets = np.zeros(len(docs) + 1, np.int64)
    np.cumsum([len(d) for _, d in docs], out=offsets[1:])
    data = pa.py_buffer(b"".join(d for _, d in docs))
    return (pa.StringArray.from_buffers(len(docs), pa.py_buffer(offsets.astype(np.int32)), data),
            pa.LargeStringArray.from_buffers(len(docs), pa.py_buffer(offsets), data))


def compress(source: Path, how: str) -> Path:
    """``source`` compressed beside it as ``SOURCE.gz`` or ``SOURCE.zst``, streamed."""
    target = source.with_name(source.name + "." + how)
    with source.open("rb") as src, target.open("wb") as dst:
        if how == "gz":
            with gzip.GzipFile(fileobj=dst, mode="wb", compresslevel=GZIP_LEVEL, mtime=0) as gz:
                shutil.copyfileobj(src, gz, 1 << 20)
        else:
            zstandard.ZstdCompressor(level=ZSTD_LEVEL).copy_stream(src, dst)
    return target


def write_shapes(docs: list[tuple[str, bytes]], out: Path) -> dict[str, int]:
    """Every shape of ``docs`` under ``out`` (``SHAPE_FILES``); returns bytes on disk per shape.

    ``folder-txt/`` holds the folder's files as hard links named ``NAME.txt``
    (for a toktoktok that reads only its own suffixes); they take no space.
    """
    out.mkdir(parents=True, exist_ok=True)
    with (out / "one.txt").open("wb") as fh:
        for _, doc in docs:
            fh.write(doc)
    compress(out / "one.txt", "gz")
    compress(out / "one.txt", "zst")
    for path, doc in docs:
        target = out / "folder" / folder_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(doc)
        copy = out / "folder-txt" / (folder_path(path) + ".txt")
        copy.parent.mkdir(parents=True, exist_ok=True)
        os.link(target, copy)
    paths = pa.array([folder_path(p) for p, _ in docs], pa.string())
    text, large_text = text_arrays(docs)
    table = pa.table({"text": text, "path": paths})
    for name, codec in (("snappy", "snappy"), ("zstd", "zstd"), ("uncompressed", "none")):
        pq.write_table(table, out / f"{name}.parquet", row_group_size=ROW_GROUP, compression=codec)
    pq.write_table(pa.table({"text": large_text, "path": paths}), out / "large_string.parquet",
                   row_group_size=ROW_GROUP, compression="snappy")
    (out / "parquet-folder").mkdir()
    step = math.ceil(len(docs) / PARQUET_PARTS)
    for i in range(PARQUET_PARTS):
        pq.write_table(table.slice(i * step, step), out / "parquet-folder" / f"part-{i:05d}.parquet",
                       row_group_size=ROW_GROUP, compression="snappy")
    with ipc.new_file(str(out / "file.arrow"), table.schema) as writer:
        writer.write_table(table, max_chunksize=ARROW_BATCH)
    write_datasets(table, out / "datasets")
    with (out / "docs.jsonl").open("w", encoding="utf-8", newline="\n") as fh:
        for path, doc in docs:
            fh.write(json.dumps({"text": doc.decode("utf-8"), "path": folder_path(path)}, ensure_ascii=False) + "\n")
    compress(out / "docs.jsonl", "gz")
    compress(out / "docs.jsonl", "zst")
    return {shape: disk_bytes(out / rel) for shape, rel in SHAPE_FILES.items() if (out / rel).exists()}


def write_datasets(table: pa.Table, folder: Path) -> None:
    """``table`` as ``datasets.Dataset.save_to_disk`` lays it out: ``data-0000i-of-0000N.arrow`` Arrow
    stream files of about ``DATASETS_SHARD_BYTES`` each, an equal share of rows each, ``state.json``
    and ``dataset_info.json`` beside them (written here without the ``datasets`` package)."""
    folder.mkdir(parents=True)
    shards = max(1, math.ceil(table.nbytes / DATASETS_SHARD_BYTES))
    step = math.ceil(table.num_rows / shards)
    names = [f"data-{i:05d}-of-{shards:05d}.arrow" for i in range(shards)]
    for i, name in enumerate(names):
        with ipc.new_stream(str(folder / name), table.schema) as writer:
            writer.write_table(table.slice(i * step, step), max_chunksize=ARROW_BATCH)
    (folder / "state.json").write_text(json.dumps({
        "_data_files": [{"filename": n} for n in names], "_fingerprint": "toktok-bench-shapes",
        "_format_columns": None, "_format_kwargs": {}, "_format_type": None, "_output_all_columns": False,
        "_split": None}, indent=2) + "\n")
    (folder / "dataset_info.json").write_text(json.dumps({"features": {
        "text": {"dtype": "string", "_type": "Value"}, "path": {"dtype": "string", "_type": "Value"}}}, indent=2)
        + "\n")


def disk_bytes(path: Path) -> int:
    """Bytes on disk of a file, or of every file under a folder (a hard link counted in each folder)."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def ensure(data: Path, mb: float | None, package: str = "linux-source-6.1") -> tuple[Path, dict]:
    """The shapes folder for slice ``mb`` (None: all the training text), built if absent; its manifest.

    Rebuilt when its manifest names another ``.deb``.
    """
    out = data / ("shapes" if mb is None else f"shapes-{mb:g}MB")
    manifest = out / "manifest.json"
    deb = scale_corpus.download(package, data / "debs")
    if manifest.exists():
        facts = json.loads(manifest.read_text())
        if facts.get("deb") == deb.name:
            return out, facts
    if out.exists():
        shutil.rmtree(out)
    started = time.perf_counter()
    docs = read_kernel(deb, None if mb is None else int(mb * MB))
    disk = write_shapes(docs, out)
    facts = {
        "package": scale_corpus.deb_field(deb, "Package"), "version": scale_corpus.deb_field(deb, "Version"),
        "deb": deb.name, "mb": mb, "files": len(docs), "bytes": sum(len(d) for _, d in docs),
        "renamed_hidden": sum(folder_path(p) != p.removeprefix("./") for p, _ in docs),
        "suffixes": list(scale_corpus.SUFFIXES), "names": list(scale_corpus.NAMES),
        "disk_bytes": disk, "datasets_shards": len(list((out / "datasets").glob("*.arrow"))),
        "seconds": round(time.perf_counter() - started, 1),
    }
    manifest.write_text(json.dumps(facts, indent=2) + "\n")
    return out, facts
