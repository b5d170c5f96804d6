"""Sampling to ``working_set_mb`` and merging separately ingested partitions (docs/training.md).

- A phase with more text than its budget keeps each document with
  probability capacity / total, by a seeded hash of its place. The test
  recomputes the share from the files and the kept documents from the rule,
  counts their pieces with plain ``regex.findall`` and compares with the
  chunk files: the sample is exactly the documents the rule picks, read in
  full, whatever their format.
- The choice is the same for every file and position (a statistical check),
  and independent of the held-out choice.
- Counts of partitions ingested apart sum to the counts of one ingest of
  the whole: what lets ingest run on many machines.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import (
    chunk_counts,
    english_text,
    manifest,
    piece_counts,
    read_documents,
    toktok,
    work_of,
    write_config,
)
from toktoktok import counts as count_tables
from toktoktok import units
from toktoktok.sampling import TEXT_PER_BUDGET_BYTE, chosen, is_heldout
from toktoktok_stages import workdir

CHARS = 900_000


def _corpus(root: Path) -> list[Path]:
    """A .txt, a .jsonl and a parquet file of real prose, about 2.5 MB of text."""
    root.mkdir(parents=True)
    text = english_text(CHARS)
    paragraphs = [p for p in english_text(CHARS, offset=150_000).split("\n\n") if p.strip()]
    txt = root / "a.txt"
    txt.write_text(text, encoding="utf-8")
    jsonl = root / "b.jsonl"
    jsonl.write_text("".join(json.dumps({"text": p}) + "\n" for p in paragraphs[::2]), encoding="utf-8")
    parquet = root / "c.parquet"
    pq.write_table(pa.table({"text": pa.array(paragraphs[1::2], pa.string())}), parquet)
    return [txt, jsonl, parquet]


def _row_units(row: int, offset: int, text: str, bound: int) -> list[tuple[int, int, str]]:
    """A row's units by the plain reference: (row, key offset, text)."""
    data = text.encode()
    cuts = units.reference_cuts(data, 0, len(data), grid=units.grid(bound), breaks=True, tokens=()) \
        if len(data) > bound else []
    edges = [0, *cuts, len(data)]
    return [(row, offset + a, data[a:b].decode()) for a, b in zip(edges, edges[1:])]


def unit_texts(path: Path, bound: int) -> list[tuple[int, int, str]]:
    """A file's units read our own way (default pattern): ``(row, offset, text)``
    with the keys ``sampling`` documents."""
    if path.suffix == ".txt":
        data = path.read_bytes()
        return [(0, a, data[a:b].decode("utf-8", "replace"))
                for a, b in units.reference_units(data, bound, cut=True, breaks=True)]
    if path.suffix == ".jsonl":
        out, at = [], 0
        for line in path.read_bytes().split(b"\n"):
            if line.strip():
                out += _row_units(0, at, json.loads(line)["text"], bound)
            at += len(line) + 1
        return out
    rows = pq.read_table(path)["text"].to_pylist()
    return [u for r, t in enumerate(rows) if t is not None for u in _row_units(r, 0, t, bound)]


def _text_bytes(path: Path) -> int:
    """reference-side size: bytes on disk for .txt and .jsonl, UTF-8 of the column for parquet."""
    if path.suffix == ".parquet":
        return sum(len(t.encode()) for t in read_documents(path))
    return path.stat().st_size


def _run_ingest(tmp_path: Path, files: list[Path], budget_mb: int, **settings) -> Path:
    config = write_config(tmp_path, [{"name": "p", "merges": 10, "sources": [{"file": str(f)} for f in files]}],
                          working_set_mb=budget_mb, **settings)
    run = toktok("ingest", "-c", config)
    assert run.code == 0, run.err
    return work_of(config) / "ingest" / "01-p"


def test_the_sample_is_exactly_the_documents_the_seeded_rule_picks(tmp_path):
    files = _corpus(tmp_path / "data")
    folder = _run_ingest(tmp_path / "run", files, budget_mb=1, heldout_share=0.0, seed=7)
    total = sum(_text_bytes(f) for f in files)
    capacity = int((1 << 20) * TEXT_PER_BUDGET_BYTE)  # the documented rule, for working_set_mb: 1
    share = capacity / total
    m = manifest(folder)
    assert m["sample"]["text_bytes"] == total
    assert m["sample"]["share"] == pytest.approx(share, rel=1e-12)
    kept: list[str] = []
    seen = all_units = 0
    for index, path in enumerate(files):
        seen += len(read_documents(path))
        found = unit_texts(path, units.bound(1))
        all_units += len(found)
        kept += [t for row, offset, t in found if chosen(7, "01-p", index, offset, share, salt="sample", row=row)]
    assert 0 < len(kept) < all_units
    assert m["counts"]["documents"] == seen
    assert m["counts"]["units"] == all_units
    assert m["counts"]["kept_documents"] == len(kept)
    assert m["counts"]["sampled_out_documents"] == all_units - len(kept)
    assert m["counts"]["kept_bytes"] == sum(len(d.encode()) for d in kept)
    assert chunk_counts(folder) == piece_counts(kept, [])
    # about the capacity: within 25% for documents of a few hundred bytes
    assert 0.75 * capacity < m["counts"]["kept_bytes"] < 1.25 * capacity


@pytest.mark.parametrize("budget_mb", [1, 64])
def test_held_out_and_sampled_units_of_a_txt_are_exactly_the_rules(tmp_path, budget_mb):
    """A ``.txt`` with a held-out share, sampled or whole: the held-out texts are the
    units the held-out rule picks, in order; the training text is the other units
    the sample rule picks (runs of units of one fate are sent at once)."""
    files = _corpus(tmp_path / "data")[:1]
    folder = _run_ingest(tmp_path / "run", files, budget_mb=budget_mb, heldout_share=0.15, seed=3)
    m = manifest(folder)
    share = m["sample"]["share"]
    assert (share < 1) == (budget_mb == 1)
    found = unit_texts(files[0], units.bound(budget_mb))
    held = [t for _, offset, t in found if is_heldout(3, "01-p", 0, offset, 0.15)]
    kept = [t for _, offset, t in found if not is_heldout(3, "01-p", 0, offset, 0.15)
            and chosen(3, "01-p", 0, offset, share, salt="sample")]
    assert 10 < len(held) < len(found) // 3 and len(kept) > len(held)
    assert workdir.artifacts.read_ipc(folder / "heldout.arrow")["text"].to_pylist() == held
    assert m["counts"]["heldout_documents"] == len(held) and m["counts"]["kept_documents"] == len(kept)
    assert m["counts"]["sampled_out_documents"] == len(found) - len(held) - len(kept)
    assert chunk_counts(folder) == piece_counts(kept, [])


def test_a_budget_larger_than_the_text_keeps_everything_and_a_rerun_reads_nothing_twice(tmp_path):
    files = _corpus(tmp_path / "data")
    folder = _run_ingest(tmp_path / "run", files, budget_mb=64, heldout_share=0.0)
    m = manifest(folder)
    assert m["sample"]["share"] == 1.0
    assert m["counts"]["kept_documents"] == m["counts"]["documents"]
    assert m["counts"]["sampled_out_documents"] == 0
    docs = [d for f in files for d in read_documents(f)]
    assert chunk_counts(folder) == piece_counts(docs, [])
    written = (folder / "manifest.json").stat().st_mtime_ns
    again = toktok("ingest", "-c", tmp_path / "run" / "config.yaml")
    assert again.code == 0 and manifest(folder)["key"] == m["key"]
    assert (folder / "manifest.json").stat().st_mtime_ns == written  # up to date: not redone


def test_the_sample_is_the_same_for_any_threads_and_changes_with_the_seed(tmp_path):
    files = _corpus(tmp_path / "data")
    one = chunk_counts(_run_ingest(tmp_path / "t1", files, budget_mb=1, threads=1))
    two = chunk_counts(_run_ingest(tmp_path / "t2", files, budget_mb=1, threads=2))
    other = chunk_counts(_run_ingest(tmp_path / "s9", files, budget_mb=1, threads=2, seed=9))
    assert one == two
    assert other != one


def test_every_document_is_equally_likely_whatever_its_file_or_position():
    share, files, docs = 0.3, 40, 2_500
    picked = [[chosen(0, "01-x", f, d, share, salt="sample") for d in range(docs)] for f in range(files)]
    sigma = (share * (1 - share) / docs) ** 0.5
    for row in picked:  # each file: 5 sigma
        assert abs(sum(row) / docs - share) < 5 * sigma
    for start in range(0, docs, 500):  # each position band over all files
        band = [row[d] for row in picked for d in range(start, start + 500)]
        assert abs(sum(band) / len(band) - share) < 5 * (share * (1 - share) / len(band)) ** 0.5
    held = [chosen(0, "01-x", f, d, share, salt="sample") for f in range(files) for d in range(docs)
            if is_heldout(0, "01-x", f, d, 0.1)]
    assert abs(sum(held) / len(held) - share) < 5 * (share * (1 - share) / len(held)) ** 0.5


def test_partitions_ingested_apart_sum_to_one_ingest_of_the_whole(tmp_path):
    files = _corpus(tmp_path / "data")
    whole = _run_ingest(tmp_path / "whole", files, budget_mb=64, heldout_share=0.0)
    first = _run_ingest(tmp_path / "first", files[:1], budget_mb=64, heldout_share=0.0)
    rest = _run_ingest(tmp_path / "rest", files[1:], budget_mb=64, heldout_share=0.0)
    chunks = sorted(first.glob("chunk-*.arrow")) + sorted(rest.glob("chunk-*.arrow"))
    summed = workdir.sum_chunks(chunks)
    as_counter = Counter(dict(zip(summed["piece"].to_pylist(), summed["count"].to_pylist())))
    assert len(as_counter) == summed.num_rows  # every piece once
    assert as_counter == chunk_counts(whole)
    # and summing is a plain sum by piece, whatever the order of the tables
    backwards = count_tables.sum_tables([workdir.sum_chunks(sorted(rest.glob("chunk-*.arrow"))),
                                         workdir.sum_chunks(sorted(first.glob("chunk-*.arrow")))])
    assert Counter(dict(zip(backwards["piece"].to_pylist(), backwards["count"].to_pylist()))) == as_counter


def test_train_warns_when_distinct_pieces_outgrow_the_budget(tmp_path):
    """Text that is mostly distinct pieces (random words) needs more than half a byte of budget
    per byte of text: train says so before it starts, and still finishes."""
    import random

    rng = random.Random(5)
    words = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=10)) for _ in range(150_000)]
    (tmp_path / "random.txt").write_text(" ".join(words) + "\n", encoding="utf-8")
    config = write_config(tmp_path, [{"name": "random", "merges": 20, "sources": [{"file": str(tmp_path / "random.txt")}]}],
                          working_set_mb=4, heldout_share=0.0)
    run = toktok("run", "-c", config)
    assert run.code == 0, run.err
    train = manifest(work_of(config) / "train" / "01-random")
    assert train["counts"]["distinct_pieces"] > 100_000
    assert any("needs a larger budget" in w for w in train["warnings"])
    assert "needs a larger budget" in run.err
    # a natural text of the same size stays silent
    (tmp_path / "prose").mkdir()
    (tmp_path / "prose" / "a.txt").write_text(english_text(len(" ".join(words))), encoding="utf-8")
    quiet = write_config(tmp_path / "prose", [{"name": "p", "merges": 20, "sources": [{"path": str(tmp_path / "prose")}]}],
                         working_set_mb=4, heldout_share=0.0)
    assert "needs a larger budget" not in toktok("run", "-c", quiet).err
