"""One corpus, every shape users bring: the same distinct-piece inventory from each.

The documents (Python sources of the standard library, one file a document,
with a few odd ones: empty, U+FEFF, a special token, non-ASCII)
are written as a folder of files (any suffix, through ``include:``), parquet
files (snappy, zstd, none; small and large row groups; ``string``,
``large_string`` and dictionary columns; a folder of several), Arrow IPC in
file and stream format, a ``datasets``-style folder, and JSON lines (plain,
gzip, zstd). Each holds one file a document, so each must count the same
pieces, the same documents and the same bytes; one document alone in a
``.txt`` read with ``documents: file`` equals that document as one row.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from tests.conftest import chunk_counts, ingest_here
from tests.helpers import stdlib_sources

SPECIAL = "<|endoftext|>"


def _documents() -> list[str]:
    docs = [d for d in stdlib_sources(1_500_000).split("\n\n\n") if d][:300]
    return [*docs, "", "in a row or a file, \ufeff is text (a file's byte order mark is dropped)", f"before {SPECIAL} after",
            "déjà vu: 日本語 — ünïcödé \u2028 and a tab\tend", "no newline at the end"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("corpus")
    docs = _documents()
    suffixes = (".py", ".c", ".md", ".txt")
    folder = root / "files"
    for i, doc in enumerate(docs):
        path = folder / f"d{i % 7}" / f"doc{i:04d}{suffixes[i % len(suffixes)]}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(doc.encode("utf-8"))
    table = pa.table({"text": pa.array(docs, pa.string()), "id": list(range(len(docs)))})
    pq.write_table(table, root / "snappy.parquet", row_group_size=1000)
    pq.write_table(table, root / "zstd.parquet", row_group_size=7, compression="zstd")
    pq.write_table(table.cast(pa.schema([("text", pa.large_string()), ("id", pa.int64())])),
                   root / "large.parquet", compression="none")
    pq.write_table(pa.table({"text": pa.array(docs).dictionary_encode()}), root / "dictionary.parquet")
    (root / "parts").mkdir()
    for k in range(3):
        pq.write_table(table.slice(k * 110, 110), root / "parts" / f"part-{k}.parquet", row_group_size=50)
    with pa.OSFile(str(root / "file.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=64):
            writer.write_batch(batch)
    (root / "saved").mkdir()
    for k, part in enumerate((table.slice(0, 150), table.slice(150))):  # as datasets' save_to_disk writes
        with pa.OSFile(str(root / "saved" / f"data-{k:05d}-of-00002.arrow"), "wb") as sink, \
                pa.ipc.new_stream(sink, part.schema) as writer:
            writer.write_table(part, max_chunksize=40)
    (root / "saved" / "state.json").write_text("{}")
    lines = "".join(json.dumps({"id": i, "text": d}, ensure_ascii=i % 2 == 0) + "\n" for i, d in enumerate(docs))
    (root / "lines.jsonl").write_text(lines, encoding="utf-8")
    (root / "lines.jsonl.gz").write_bytes(gzip.compress(lines.encode()))
    (root / "lines.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines.encode()))
    return root, docs


def _ingest(folder: Path, source: dict) -> tuple[dict, Counter[bytes]]:
    manifest, phase = ingest_here(folder, [source], threads=2, special_tokens=[SPECIAL])
    return manifest, chunk_counts(phase)


SHAPES = {
    "files": lambda r: {"path": str(r / "files"), "include": ["**/*.py", "**/*.c", "**/*.md", "**/*.txt"],
                        "documents": "file"},
    "snappy": lambda r: {"file": str(r / "snappy.parquet")},
    "zstd": lambda r: {"file": str(r / "zstd.parquet")},
    "large": lambda r: {"file": str(r / "large.parquet")},
    "dictionary": lambda r: {"file": str(r / "dictionary.parquet")},
    "parts": lambda r: {"path": str(r / "parts")},
    "arrow-file": lambda r: {"file": str(r / "file.arrow")},
    "saved-dataset": lambda r: {"path": str(r / "saved")},
    "jsonl": lambda r: {"file": str(r / "lines.jsonl")},
    "jsonl-gz": lambda r: {"file": str(r / "lines.jsonl.gz")},
    "jsonl-zst": lambda r: {"file": str(r / "lines.jsonl.zst")},
}


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory) -> tuple[dict, Counter[bytes]]:
    root, _ = corpus
    return _ingest(tmp_path_factory.mktemp("reference"), SHAPES["snappy"](root))


@pytest.mark.parametrize("shape", [s for s in SHAPES if s != "snappy"])
def test_every_shape_counts_what_parquet_counts(corpus, reference, tmp_path, shape):
    root, docs = corpus
    manifest, counts = _ingest(tmp_path, SHAPES[shape](root))
    want_manifest, want = reference
    assert counts == want
    assert sum(counts.values()) > 100_000 and len(counts) > 5_000
    for key in ("documents", "kept_bytes", "kept_documents", "units", "forced_cuts", "special_tokens_found"):
        got, expected = manifest["counts"].get(key), want_manifest["counts"].get(key)
        if key in ("documents", "kept_documents", "units") and shape == "files":
            expected -= 1  # the empty file is no document (an empty row is one)
        assert got == expected, (key, got, expected)
    assert manifest["counts"]["documents"] >= len(docs) - 1


def test_one_document_in_a_txt_read_whole_equals_it_as_one_row(corpus, tmp_path):
    _, docs = corpus
    doc = max(docs[:300], key=len)
    assert "\n\n" in doc  # the blank-line rule would cut it
    (tmp_path / "one.txt").write_text(doc, encoding="utf-8")
    pq.write_table(pa.table({"text": [doc]}), tmp_path / "one.parquet")
    whole, txt = _ingest(tmp_path / "txt", {"file": str(tmp_path / "one.txt"), "documents": "file"})
    row, parquet = _ingest(tmp_path / "row", {"file": str(tmp_path / "one.parquet")})
    assert txt == parquet and whole["counts"]["documents"] == row["counts"]["documents"] == 1
    blank, _ = _ingest(tmp_path / "blank", {"file": str(tmp_path / "one.txt")})
    assert blank["counts"]["documents"] > 1  # today's .txt rule: other documents
