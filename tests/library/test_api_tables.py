"""``toktoktok.train`` from Arrow columns and ``datasets``, and with several phases.

Each form must give the ``.tiktoken`` that ``toktok run`` gives on the
equivalent files: a column as a parquet file of that column (rows keyed as
that file's, held-out share and sampling included), a ``datasets.Dataset``
as the folder ``save_to_disk`` writes, ``phases=`` as a config of those
phases, each phase's texts in a file.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import toktoktok
from tests.conftest import (
    SPECIALS,
    cli_encoding,
    english_text,
    manifest,
    same_tokenizer,
    split_txt_documents,
    work_of,
)
from toktoktok.patterns import NAMED_PATTERNS


@pytest.fixture(scope="module")
def docs():
    """Documents with a special token in a few, an empty one, and one long enough to be cut into units."""
    found = split_txt_documents(english_text(1_000_000))
    found[7] = found[7] + " <|endoftext|> " + found[8]
    found[20] = ""
    found[30] = " ".join(found[30:60])
    return found


def with_nulls(docs):
    return [None if i % 50 == 3 else d for i, d in enumerate(docs)]


FORMS = {
    "table": lambda d: pa.table({"body": pa.array(with_nulls(d), pa.string()), "n": pa.array(range(len(d)))}),
    "large_string": lambda d: pa.table({"body": pa.array(with_nulls(d), pa.large_string())}),
    "chunked": lambda d: pa.chunked_array([pa.array(with_nulls(d[:400])), pa.array(d[400:]).slice(0)]),
    "dictionary": lambda d: pa.array(with_nulls(d)).dictionary_encode(),
}


@pytest.mark.parametrize("form", list(FORMS))
def test_a_column_equals_the_cli_on_a_parquet_file_of_it(form, docs, tmp_path):
    """Nulls are no document but count as rows; sampling, held-out share and the
    last-unit rule's keys are those of the file's rows."""
    texts = FORMS[form](docs)
    options = dict(special_tokens=SPECIALS[:1], seed=5, working_set_mb=1, threads=2)
    enc = toktoktok.train(texts, merges=120, text_column="body", **options)
    array = texts.column("body") if isinstance(texts, pa.Table) else texts
    pq.write_table(pa.table({"body": array}), tmp_path / "rows.parquet")
    phases = [{"name": "train", "merges": 120, "sources": [{"file": str(tmp_path / "rows.parquet"),
                                                              "text_column": "body"}]}]
    same_tokenizer(enc, cli_encoding(tmp_path / "cli", phases, **options))
    counts = manifest(work_of(tmp_path / "cli" / "config.yaml") / "ingest" / "01-train")["counts"]
    assert counts["heldout_documents"] > 0 and counts["sampled_out_documents"] > 0, "the keys are in play"


def test_a_custom_pattern_reads_the_rows_as_text(docs, tmp_path):
    texts = pa.table({"text": docs[:300]})
    options = dict(pattern=r"\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+|\s+", heldout_share=0.1, seed=2, threads=1)
    enc = toktoktok.train(texts, merges=60, **options)
    pq.write_table(texts, tmp_path / "rows.parquet")
    phases = [{"name": "train", "merges": 60, "sources": [{"file": str(tmp_path / "rows.parquet")}]}]
    same_tokenizer(enc, cli_encoding(tmp_path / "cli", phases, **options))


def test_a_dataset_equals_the_cli_on_its_saved_folder(docs, tmp_path, monkeypatch):
    """Shuffled (an index mapping): the rows go in the dataset's order, as save_to_disk writes them."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"text": docs[:800]}).shuffle(seed=4).select(range(700))
    assert ds._indices is not None, "the mapping is what this test is about"
    options = dict(special_tokens=SPECIALS[:1], seed=1, working_set_mb=1, threads=2)
    enc = toktoktok.train(ds, merges=100, **options)
    ds.save_to_disk(str(tmp_path / "saved"))
    assert len(list((tmp_path / "saved").glob("data-*.arrow"))) == 1, "one file: its rows are numbered as the object's"
    phases = [{"name": "train", "merges": 100, "sources": [{"path": str(tmp_path / "saved"), "include": ["*.arrow"]}]}]
    same_tokenizer(enc, cli_encoding(tmp_path / "cli", phases, **options))
    plain = toktoktok.train(pa.table({"text": list(ds["text"])}), merges=100, **options)
    same_tokenizer(enc, plain)


def test_several_phases_equal_the_cli(docs, tmp_path):
    """A list of strings (a jsonl file), a Table (a parquet file) and a ChunkedArray, one after another."""
    first, second, third = docs[:300], docs[300:700], docs[700:]
    phases = [{"name": "English", "merges": 80, "texts": iter(first)},
              {"name": "more prose", "merges": 60, "texts": pa.table({"t": second}), "text_column": "t"},
              {"name": "rest", "merges": 40, "texts": pa.chunked_array([third[:50], third[50:]])}]
    options = dict(special_tokens=SPECIALS, seed=3, heldout_share=0.05, working_set_mb=1, threads=2)
    enc = toktoktok.train(phases=phases, **options)
    assert enc.name == "rest"
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in first), encoding="utf-8")
    pq.write_table(pa.table({"t": second}), tmp_path / "b.parquet")
    pq.write_table(pa.table({"text": third}), tmp_path / "c.parquet")
    config = [{"name": "English", "merges": 80, "sources": [{"file": str(tmp_path / "a.jsonl")}]},
              {"name": "more prose", "merges": 60, "sources": [{"file": str(tmp_path / "b.parquet"), "text_column": "t"}]},
              {"name": "rest", "merges": 40, "sources": [{"file": str(tmp_path / "c.parquet")}]}]
    same_tokenizer(enc, cli_encoding(tmp_path / "cli", config, **options))


def test_phases_with_their_own_patterns_equal_the_cli(docs, tmp_path):
    """A phase's ``pattern`` (as a config's phase sets it): counted with it, and the last
    phase's is the tokenizer's, by the API as by the command line."""
    first, second = docs[:400], docs[400:]
    options = dict(special_tokens=SPECIALS, seed=3, heldout_share=0, pattern="cl100k", threads=2)
    enc = toktoktok.train(phases=[{"name": "a", "merges": 80, "texts": first, "pattern": "gpt2"},
                                  {"name": "b", "merges": 60, "texts": pa.array(second)}], **options)
    assert enc._pat_str == NAMED_PATTERNS["cl100k"].tiktoken
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in first), encoding="utf-8")
    pq.write_table(pa.table({"text": second}), tmp_path / "b.parquet")
    config = [{"name": "a", "merges": 80, "pattern": "gpt2", "sources": [{"file": str(tmp_path / "a.jsonl")}]},
              {"name": "b", "merges": 60, "sources": [{"file": str(tmp_path / "b.parquet")}]}]
    same_tokenizer(enc, cli_encoding(tmp_path / "cli", config, **options))
    last = toktoktok.train(phases=[{"name": "a", "merges": 80, "texts": first},
                                   {"name": "b", "merges": 60, "texts": second, "pattern": "o200k"}], **options)
    assert last._pat_str == NAMED_PATTERNS["o200k"].tiktoken
    assert last._mergeable_ranks != enc._mergeable_ranks


def test_several_phases_with_vocab_size(docs):
    phases = [{"name": "a", "merges": 30, "texts": docs[:200]}, {"name": "b", "texts": pa.array(docs[200:400])}]
    enc = toktoktok.train(phases=phases, vocab_size=256 + 1161 + 100 + 1, special_tokens=["<|endoftext|>"],
                          threads=1, heldout_share=0)
    assert enc.n_vocab == 256 + 1161 + 100 + 1


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"texts": ["a b"], "merges": 5, "phases": [{"name": "a", "merges": 5, "texts": ["x"]}]}, "texts and merges"),
    ({"merges": 5, "phases": [{"name": "a", "merges": 5, "texts": ["x"]}]}, "merges cannot be given with phases="),
    ({"phases": [{"name": "a", "merges": 5, "texts": ["x"], "weight": 2}]}, "phases[0].weight"),
    ({"phases": [{"name": "a", "merges": 5, "texts": ["x"]}, {"name": "A", "merges": 5, "texts": ["y"]}]},
     "phases[1].name"),
    ({"phases": [{"name": "a", "texts": ["x"]}]}, "phases[0].merges is required"),
    ({"phases": [{"name": "a", "merges": 5, "texts": ["x"], "pattern": "(?=x)"}]}, "phases[0].pattern"),
    ({"phases": []}, "phases must be a non-empty list"),
    ({"texts": pa.table({"body": ["x"]}), "merges": 5}, "text_column='text' (columns: body)"),
    ({"texts": pa.table({"text": [1, 2]}), "merges": 5}, "column 'text' is int64, expected strings"),
    ({"texts": pa.array([b"x"]), "merges": 5}, "texts is binary, expected strings"),
])
def test_refusals_name_the_argument(kwargs, named):
    with pytest.raises(ValueError) as info:
        toktoktok.train(threads=1, **kwargs)
    message = str(info.value)
    assert named in message and message.startswith("train()") and "\n" not in message, message


def test_a_large_column_reaches_the_counting_with_no_string_a_row(monkeypatch):
    """Training on 200,000 rows makes far fewer Python calls than there are rows
    (a string a row would take at least a call each: a decode, an ``as_py``, a
    helper), and the paths that take rows as strings are not taken at all."""
    import sys
    import threading

    import toktoktok.api
    import toktoktok.counts
    import toktoktok.sources.row_batches as row_batches

    words = np.array(["the", "cat", "sat", "on", "a", "mat", "dog", "ran"])
    rng = np.random.default_rng(0)
    rows = [" ".join(words[rng.integers(0, 8, size=6)]) for _ in range(200_000)]
    column = pa.chunked_array([pa.array(rows[:120_000]), pa.array(rows[120_000:])])
    options = dict(merges=20, heldout_share=0, working_set_mb=64, threads=2)
    expected = toktoktok.train(rows, **options)
    toktoktok.train(column[:10], **options)  # modules imported, kernels loaded: their calls are not counted

    def refuse(*args, **kwargs):
        raise AssertionError("a row became a Python string")

    monkeypatch.setattr(row_batches, "row_text", refuse)
    monkeypatch.setattr(toktoktok.counts, "count_texts", refuse)
    monkeypatch.setattr(toktoktok.api, "documents", refuse)
    calls = [0]

    def profile(frame, event, arg):
        if event in ("call", "c_call"):
            calls[0] += 1

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        enc = toktoktok.train(column, **options)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    same_tokenizer(enc, expected)
    assert 0 < calls[0] < len(rows) // 20, calls[0]
