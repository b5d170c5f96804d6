"""Sampling that holds for any shape of corpus.

- At any budget, on one-record-per-line text (one document: no blank line),
  on a single huge line, and on a parquet file of huge rows, the kept text is
  within 5% of the capacity, for seeds 0-5 (not all or nothing, as a whole
  document kept or dropped would be).
- The choice is the same however the file is read (tiny read blocks or the
  default) and for threads 1 and 2: the chunk files and held-out text are equal.
- The held-out share never takes a phase's last training unit.
- Pieces stay those of the pattern over each whole document (the parts are
  cut at safe places): the counts equal ``regex.findall`` over the kept units
  joined back into runs, for the huge line.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import regex

from tests.conftest import chunk_counts, english_text, ingest_here
from toktoktok import sampling, units
from toktoktok.patterns import NAMED_PATTERNS
from toktoktok.sources import text_bytes_estimate
from toktoktok_stages import workdir
from toktoktok_stages.ingest import routing, table_rows

SIZE = 1_500_000  # bytes of each corpus: 3.6 times the capacity at working_set_mb: 1


def _prose(size: int) -> str:
    text = ""
    offset = 0
    while len(text.encode()) < size:
        text += english_text(400_000, offset=offset)
        offset = (offset + 123_457) % 600_000
    return text.encode()[:size].decode("utf-8", "ignore")


@pytest.fixture(scope="module")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("shapes")
    prose = _prose(SIZE)
    lines = root / "lines.txt"  # one record a line, no blank line: one document
    lines.write_text("\n".join(line for line in prose.split("\n") if line.strip()) + "\n", encoding="utf-8")
    line = root / "line.txt"  # a single huge line
    line.write_text(" ".join(prose.split()), encoding="utf-8")
    rows = root / "rows.parquet"  # a few huge rows
    words = prose.split(" ")
    step = len(words) // 3 + 1
    pq.write_table(pa.table({"text": [" ".join(words[i : i + step]) for i in range(0, len(words), step)]}), rows)
    return {"lines": lines, "line": line, "rows": rows}


def _ingest(folder: Path, path: Path, **settings) -> tuple[dict, Path]:
    return ingest_here(folder, [{"file": str(path)}], **settings)


@pytest.mark.parametrize("shape", ["lines", "line", "rows"])
@pytest.mark.parametrize("budget_mb", [1, 2])
def test_the_kept_text_is_within_5_percent_of_the_capacity_for_any_shape(tmp_path, shapes, shape, budget_mb):
    capacity = sampling.capacity(budget_mb)
    for seed in range(6):
        m, _ = _ingest(tmp_path / f"s{seed}", shapes[shape], working_set_mb=budget_mb, seed=seed)
        counts = m["counts"]
        assert m["sample"]["share"] < 0.6
        assert counts["documents"] <= 3 and counts["units"] > 1000
        assert counts["units_over_bound"] == 0
        assert abs(counts["kept_bytes"] - capacity) <= 0.05 * capacity, (seed, counts["kept_bytes"], capacity)


def test_huge_line_pieces_are_the_pattern_over_the_kept_runs(tmp_path, shapes):
    """The kept units, joined into runs where left-out units break them, give
    exactly regex.findall's pieces: the reference units are ours, not ingest's."""
    path = shapes["line"]
    m, folder = _ingest(tmp_path, path, working_set_mb=1, seed=3)
    data = path.read_bytes()
    share = m["sample"]["share"]
    runs, run = [], []
    for start, end in units.reference_units(data, units.bound(1), cut=True, breaks=True):
        if sampling.chosen(3, "01-p", 0, start, share, salt=sampling.SAMPLE):
            run.append(data[start:end].decode())
        elif run:
            runs.append("".join(run))
            run = []
    runs.append("".join(run))
    compiled = regex.compile(NAMED_PATTERNS["default"].python)
    want = Counter(p.encode() for text in runs for p in compiled.findall(text))
    assert chunk_counts(folder) == want


@pytest.mark.parametrize("shape", ["lines", "line", "rows"])
def test_the_choice_does_not_depend_on_read_size_or_threads(tmp_path, shapes, shape, monkeypatch):
    settings = {"working_set_mb": 1, "heldout_share": 0.05, "seed": 1}
    base, folder = _ingest(tmp_path / "base", shapes[shape], threads=2, **settings)
    want = (chunk_counts(folder), pl.read_ipc(folder / "heldout.arrow")["text"].to_list())
    assert base["counts"]["heldout_documents"] > 10
    monkeypatch.setattr(routing, "TXT_READ_BYTES", 997)
    from toktoktok.sources import row_batches

    for name in ("iter_row_batches", "iter_jsonl_batches"):  # tables and JSON lines in batches of a few rows
        read = getattr(row_batches, name)
        monkeypatch.setattr(table_rows, name, lambda *args, read=read: read(*args, batch_bytes=997))
    small, folder = _ingest(tmp_path / "small", shapes[shape], threads=1, **settings)
    assert (chunk_counts(folder), pl.read_ipc(folder / "heldout.arrow")["text"].to_list()) == want
    assert {k: small["counts"][k] for k in ("units", "kept_bytes", "heldout_bytes")} == \
        {k: base["counts"][k] for k in ("units", "kept_bytes", "heldout_bytes")}


def test_the_held_out_share_never_takes_a_phases_last_training_unit(tmp_path):
    """One small document, held out by the seeded rule: it trains instead."""
    path = tmp_path / "one.txt"
    path.write_text("the cat sat on the mat\n", encoding="utf-8")
    seed = next(s for s in range(1000) if sampling.is_heldout(s, "01-p", 0, 0, 0.5))
    m, folder = _ingest(tmp_path / "run", path, heldout_share=0.5, seed=seed)
    assert m["counts"]["heldout_trained"] == 1
    assert m["counts"]["kept_documents"] == 1 and m["counts"]["heldout_documents"] == 0
    assert pl.read_ipc(folder / "heldout.arrow").height == 0
    assert sum(chunk_counts(folder).values()) == 7
    other = next(s for s in range(1000) if not sampling.is_heldout(s, "01-p", 0, 0, 0.5))
    m, _ = _ingest(tmp_path / "other", path, heldout_share=0.5, seed=other)
    assert m["counts"]["heldout_trained"] == 0 and m["counts"]["kept_documents"] == 1


def test_jsonl_keys_are_line_offsets_as_train_writes_them(tmp_path):
    """``sampling.jsonl_offsets`` (the keys of in-memory documents) are the line
    offsets ingest keys a jsonl file's rows by: the held-out texts agree."""
    texts = [f"document number {i} " * (1 + i % 7) for i in range(400)]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"text": t}, ensure_ascii=True) + "\n" for t in texts), encoding="utf-8")
    _, folder = _ingest(tmp_path / "run", path, heldout_share=0.2, seed=5)
    want = [t for t, at in zip(texts, sampling.jsonl_offsets(texts)) if sampling.is_heldout(5, "01-p", 0, at, 0.2)]
    assert 40 < len(want) < 120
    assert pl.read_ipc(folder / "heldout.arrow")["text"].to_list() == want


@pytest.mark.parametrize("kind", ["parquet", "zst", "gz"])
def test_a_guessed_size_that_proves_too_small_is_sampled_as_a_measured_one(tmp_path, kind, monkeypatch):
    """Where measuring would read the text (parquet, compressed files), ingest starts on a
    guess of its size; text that turns out larger than the budget buys is ingested again
    with the share its measured size gives: the same chunks as when it is measured first.
    The guesses here are far too small: parquet's dictionary holds a repeated value once,
    a zstd file's first frame declares only its own size, a gzip file's trailer only its
    last member's (files of several frames or members, as parallel compressors write)."""
    import gzip

    import zstandard

    docs = [f"row {i % 50} of the same few words, again and again" for i in range(40_000)]
    path = tmp_path / {"parquet": "t.parquet", "zst": "t.txt.zst", "gz": "t.txt.gz"}[kind]
    text = "\n\n".join(docs).encode()
    if kind == "parquet":
        pq.write_table(pa.table({"text": docs}), path)
    elif kind == "zst":
        z = zstandard.ZstdCompressor(write_content_size=True)
        path.write_bytes(z.compress(text[:1000]) + z.compress(text[1000:]))
    else:
        path.write_bytes(gzip.compress(text[:-1000]) + gzip.compress(text[-1000:]))
    guess, exact = text_bytes_estimate(path)
    assert not exact and guess < sampling.capacity(1) * workdir.layout.ESTIMATE_MARGIN < len(text)  # trusted, wrong
    guessed, _ = _ingest(tmp_path / "guessed", path, working_set_mb=1)
    monkeypatch.setattr(workdir.layout, "ESTIMATE_MARGIN", 0.0)  # every guess distrusted: measured first
    measured, _ = _ingest(tmp_path / "measured", path, working_set_mb=1)
    assert guessed["sample"]["share"] < 1 and guessed["sample"] == measured["sample"]
    assert guessed["inputs"] == measured["inputs"] and guessed["key"] == measured["key"]
    assert guessed["counts"] == measured["counts"]
    assert chunk_counts(tmp_path / "guessed" / "out" / "tok.work" / "ingest" / "01-p") == chunk_counts(
        tmp_path / "measured" / "out" / "tok.work" / "ingest" / "01-p")


def test_a_rerun_reuses_the_text_bytes_recorded_while_the_file_is_unchanged(tmp_path, monkeypatch):
    """The ingest manifest's inputs (a list a field) give the next run each unchanged
    file's text bytes, unread; a file touched since is measured again."""
    import os

    import zstandard

    from toktoktok.config import load_config

    folder = tmp_path / "zst"
    folder.mkdir()
    text = {"a": b"a text\n\n" * 500, "b": b"another text\n\n" * 300}
    for name, data in text.items():
        (folder / f"{name}.txt.zst").write_bytes(zstandard.ZstdCompressor().compress(data))
    sizes = [len(text["a"]), len(text["b"])]
    first, _ = ingest_here(tmp_path / "w", [{"path": str(folder)}])
    assert first["inputs"]["text_bytes"] == sizes
    measured: list[str] = []
    real = workdir.layout.text_bytes

    def counting(path, **kwargs):
        measured.append(Path(path).name)
        return real(path, **kwargs)

    monkeypatch.setattr(workdir.layout, "text_bytes", counting)
    monkeypatch.setattr(workdir.layout, "text_bytes_estimate", lambda path, **kw: (counting(path, **kw), True))
    cfg = load_config(tmp_path / "w" / "config.yaml")
    inputs = workdir.Work(cfg).ingest(cfg.phases[0]).inputs(exact=True)
    assert measured == [] and inputs.sizes == sizes
    st = os.stat(folder / "b.txt.zst")
    os.utime(folder / "b.txt.zst", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    inputs = workdir.Work(cfg).ingest(cfg.phases[0]).inputs(exact=True)
    assert measured == ["b.txt.zst"] and inputs.sizes == sizes
