"""The Python training API: ``toktoktok.train(texts, merges=..., ...)``.

It trains in memory, without the stages, and must give what the command
line gives: the same documents give the same ``.tiktoken`` whether they come
as Python strings or as files run with ``toktok run``, held-out share and
sampling included. Running a config, or keeping the outputs, is
``toktoktok_stages.pipeline.train_config`` / ``train_texts``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tiktoken

import toktoktok
from tests.conftest import (
    SPECIALS,
    chunk_counts,
    cli_encoding,
    english_text,
    manifest,
    same_tokenizer,
    split_txt_documents,
    work_of,
    write_config,
)
from toktoktok import sampling, units
from toktoktok.api import count_documents
from toktoktok.config import check_settings
from toktoktok.patterns import NAMED_PATTERNS
from toktoktok_stages.pipeline import train_config, train_texts


@pytest.fixture(scope="module")
def corpus():
    text = english_text(40_000)
    return text, split_txt_documents(text)


@pytest.fixture(autouse=True)
def private_tmp(tmp_path, monkeypatch):
    """Temporary directories of train() go to a folder the test can look into."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_train_equals_the_cli_on_the_same_text(corpus, tmp_path, private_tmp):
    text, docs = corpus
    enc = toktoktok.train(docs, merges=200, special_tokens=SPECIALS, heldout_share=0, threads=1)
    assert isinstance(enc, tiktoken.Encoding)
    assert enc.n_vocab == 256 + 1161 + 200 + len(SPECIALS)
    (tmp_path / "prose.txt").write_text(text, encoding="utf-8")
    phases = [{"name": "train", "merges": 200, "sources": [{"file": str(tmp_path / "prose.txt")}]}]
    cli = cli_encoding(tmp_path / "cli", phases, heldout_share=0, threads=1, special_tokens=SPECIALS)
    same_tokenizer(enc, cli)
    assert enc.decode(enc.encode(text)) == text
    assert list(private_tmp.iterdir()) == [], "the temporary directory is removed"


def test_max_token_words_equals_the_cli(corpus, tmp_path):
    """``max_token_words`` as an option and as a phase's key: the command line's tokenizer."""
    text, docs = corpus
    options = dict(heldout_share=0, threads=1, pattern=r"[^\n]+|\n+", max_token_words=2)
    enc = toktoktok.train(phases=[{"name": "a", "merges": 150, "texts": docs},
                                  {"name": "b", "merges": 50, "texts": docs, "max_token_words": 3}], **options)
    (tmp_path / "prose.txt").write_text(text, encoding="utf-8")
    source = [{"file": str(tmp_path / "prose.txt")}]
    phases = [{"name": "a", "merges": 150, "sources": source},
              {"name": "b", "merges": 50, "sources": source, "max_token_words": 3}]
    same_tokenizer(enc, cli_encoding(tmp_path / "cli", phases, **options))
    assert max(len(t.split()) for t in enc._mergeable_ranks) <= 3
    with pytest.raises(ValueError, match=r"phases\[0\]\.max_token_words must be an integer from 1"):
        toktoktok.train(phases=[{"name": "a", "merges": 5, "texts": docs, "max_token_words": 0}])


def test_train_with_a_held_out_share_equals_the_cli_on_jsonl(corpus, tmp_path):
    _, docs = corpus
    enc = toktoktok.train(docs, merges=120, threads=1)  # default heldout_share: a seeded share set aside
    rows = tmp_path / "docs.jsonl"
    rows.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    cli = cli_encoding(tmp_path / "cli", [{"name": "train", "merges": 120, "sources": [{"file": str(rows)}]}],
                       threads=1)
    same_tokenizer(enc, cli)
    assert enc.special_tokens_set == set()


def test_train_options(corpus, tmp_path):
    _, docs = corpus
    keep = tmp_path / "kept" / "mine.tiktoken"
    odd = ["café \ud800 naïve", "<|endoftext|> inside text"]  # a lone surrogate becomes U+FFFD
    options = dict(merges=50, special_tokens=["<|endoftext|>"], hardcoded_merges=False, heldout_share=0,
                   pattern="cl100k", threads=1)
    enc = train_texts(iter(docs + odd), output=keep, **options)
    same_tokenizer(toktoktok.train(iter(docs + odd), **options), enc)
    assert enc.n_vocab == 256 + 50 + 1 and enc.max_token_value == 306
    assert enc._pat_str == NAMED_PATTERNS["cl100k"].tiktoken
    assert enc.encode("<|endoftext|>", allowed_special="all") == [306]
    assert b"00" not in enc._mergeable_ranks, "no hardcoded merges"
    assert keep.is_file() and keep.with_name("mine.meta.json").is_file(), "output= keeps the tokenizer"
    same_tokenizer(toktoktok.load(keep), enc)


def test_train_from_a_config(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.txt").write_text(english_text(20_000), encoding="utf-8")
    config = write_config(tmp_path / "p", [{"name": "A", "merges": 40, "sources": [{"path": str(tmp_path / "data")}]}],
                          threads=1, special_tokens=["<|endoftext|>"])
    enc = train_config(config)
    out = tmp_path / "p" / "out" / "tok.tiktoken"
    assert out.is_file(), "a config's outputs are written where it says"
    same_tokenizer(enc, toktoktok.load(out))
    same_tokenizer(train_config(str(config)), enc)
    for call in (lambda: toktoktok.train(config=config), lambda: toktoktok.train(str(config)),
                 lambda: toktoktok.train(config)):
        with pytest.raises(ValueError, match=r"config= moved: use toktoktok_stages\.pipeline\.train_config\(PATH\)"):
            call()
    with pytest.raises(ValueError, match=r"output= moved: use toktoktok_stages\.pipeline\.train_texts\(texts, output=PATH"):
        toktoktok.train(["a b"], merges=5, output=tmp_path / "x.tiktoken")


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"merges": 10, "hardcoded_merge": False}, "'hardcoded_merge'"),
    ({"merges": -1}, "merges"),
    ({"merges": 10, "heldout_share": "x"}, "heldout_share"),
    ({"merges": 10, "special_tokens": ["<|a|>", "<|a|>"]}, "special_tokens"),
    ({"merges": 10, "work_dir": "/tmp/w"}, "work_dir"),
    ({}, "merges is required"),
])
def test_configuration_problems_are_value_errors(kwargs, named, private_tmp):
    with pytest.raises(ValueError, match=None) as info:
        toktoktok.train(["some text", "more text"], **kwargs)
    message = str(info.value)
    assert named in message and message.startswith("train()"), message
    assert str(private_tmp) not in message, "the temporary config's path is not shown"
    assert list(private_tmp.iterdir()) == []


def test_wrong_arguments(tmp_path):
    with pytest.raises(ValueError, match="single string"):
        toktoktok.train("one document, not a list", merges=5)
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        toktoktok.train(["ok", b"bytes"], merges=5)
    with pytest.raises(ValueError, match="config= moved"):
        toktoktok.train(["a"], config=tmp_path / "c.yaml")
    with pytest.raises(ValueError, match="texts"):
        toktoktok.train(merges=5)


def test_importing_the_library_does_not_import_the_stages():
    code = "import sys, toktoktok; print(any(m.split('.')[0] in ('stages', 'toktoktok_stages') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    assert "train" in toktoktok.__all__


def _jsonl(path, docs):
    """One line per document, as ``toktoktok_stages.pipeline.train_texts`` writes them: the
    file whose keys (line offsets) and size ``train()`` samples by."""
    path.write_text("".join(json.dumps({"text": d}, ensure_ascii=True) + "\n" for d in docs), encoding="ascii")
    return path


def _parquet(path, docs):
    """One row per document: ingest reads them in order, and measures their UTF-8 bytes."""
    pq.write_table(pa.table({"text": pa.array(docs, pa.string())}), path)
    return path


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_train_equals_the_cli_with_held_out_share_and_sampling(seed, tmp_path):
    docs = split_txt_documents(english_text(1_000_000))
    options = dict(merges=150, special_tokens=SPECIALS[:1], seed=seed, working_set_mb=1, threads=2)
    enc = toktoktok.train(docs, **options)  # default heldout_share
    source = _jsonl(tmp_path / "docs.jsonl", docs)
    phases = [{"name": "train", "merges": 150, "sources": [{"file": str(source)}]}]
    cli_options = {k: v for k, v in options.items() if k != "merges"}
    cli = cli_encoding(tmp_path / "cli", phases, **cli_options)
    same_tokenizer(enc, cli)
    ingest = manifest(work_of(tmp_path / "cli" / "config.yaml") / "ingest" / "01-train")
    assert ingest["sample"]["share"] < 0.5, "the sample is in play"
    assert ingest["counts"]["heldout_documents"] > 0 and ingest["counts"]["sampled_out_documents"] > 0
    lines = sampling.jsonl_offsets(docs)
    assert lines[-1] == source.stat().st_size
    share = sampling.share(total=int(lines[-1]), capacity=sampling.capacity(1))
    found = [(line + offset, len(part.encode())) for line, d in zip(lines.tolist(), docs)
             for offset, part in units.row_parts(d, units.bound(1), cut=True, breaks=True)[0]]
    offsets, sizes = zip(*found)
    assert len(found) > len(docs), "some documents are cut into units"
    fates, _ = sampling.unit_fates(sizes, offsets, seed=seed, slug="01-train", heldout_share=0.005,
                                   sample_share=share)
    assert np.count_nonzero(fates == sampling.HELD) == ingest["counts"]["heldout_documents"]
    assert np.count_nonzero(fates == sampling.LEFT_OUT) == ingest["counts"]["sampled_out_documents"]


@pytest.mark.parametrize("pattern", ["o200k", r"\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+|\s+"])
def test_train_equals_the_cli_with_a_warm_start_and_other_options(pattern, corpus, tmp_path):
    _, docs = corpus
    base = cli_encoding(tmp_path / "base", [{"name": "b", "merges": 60, "sources": [
        {"file": str(_parquet(tmp_path / "base.parquet", docs[::2]))}]}], threads=1, special_tokens=["<|a|>"])
    warm = {"file": str(tmp_path / "base" / "out" / "tok.tiktoken"), "special_tokens": {"<|w|>": 5000}}
    texts = [d.replace(" the ", " the<|b|>") for d in docs[1::2]]
    options = dict(merges=80, special_tokens=["<|a|>", "<|b|>"], warm_start=warm, pad_to_multiple_of=64,
                   min_frequency=3, max_token_bytes=6, pattern=pattern, heldout_share=0.1, seed=3, threads=1)
    enc = toktoktok.train(texts, **options)
    assert enc._special_tokens["<|a|>"] == base._special_tokens["<|a|>"], "a warm start's special token keeps its id"
    assert enc.n_vocab % 64 == 0 and "<|reserved_special_token_0|>" in enc._special_tokens
    phases = [{"name": "train", "merges": 80, "sources": [{"file": str(_jsonl(tmp_path / "t.jsonl", texts))}]}]
    cli = cli_encoding(tmp_path / "cli", phases, **{k: v for k, v in options.items() if k != "merges"})
    same_tokenizer(enc, cli)


def _fates_reference(sizes, seed, heldout_share, share, cap):
    """Ingest's rule, one unit at a time (``Router.open``), in plain Python; unit k
    is row k // 3 at offset 1000 * (k % 3)."""
    fates, held = [], 0
    for k, size in enumerate(sizes):
        row, offset = k // 3, 1000 * (k % 3)
        if held < cap and sampling.chosen(seed, "01-x", 2, offset, heldout_share, salt=sampling.HELDOUT, row=row):
            fates.append(sampling.HELD)
            held += min(size, cap - held)
        else:
            kept = sampling.chosen(seed, "01-x", 2, offset, share, salt=sampling.SAMPLE, row=row)
            fates.append(sampling.TRAIN if kept else sampling.LEFT_OUT)
    return fates, held


@pytest.mark.parametrize(("heldout_share", "share", "cap"), [(0.3, 0.6, 5_000), (0.5, 1.0, 10**9), (0, 0.2, 0),
                                                             (0.2, 0.5, 0)])
def test_unit_fates_is_the_rule_ingest_applies_per_unit(heldout_share, share, cap):
    sizes = np.random.default_rng(5).integers(0, 400, size=300)
    rows, offsets = np.arange(300) // 3, 1000 * (np.arange(300) % 3)
    fates, held = sampling.unit_fates(sizes, offsets, rows=rows, seed=9, slug="01-x", file_index=2,
                                      heldout_share=heldout_share, sample_share=share, heldout_cap=cap)
    assert (fates.tolist(), held) == _fates_reference(sizes.tolist(), 9, heldout_share, share, cap)
    first, after = sampling.unit_fates(sizes[:120], offsets[:120], rows=rows[:120], seed=9, slug="01-x",
                                       file_index=2, heldout_share=heldout_share, sample_share=share,
                                       heldout_cap=cap)
    rest, end = sampling.unit_fates(sizes[120:], offsets[120:], rows=rows[120:], seed=9, slug="01-x",
                                    file_index=2, heldout_share=heldout_share, sample_share=share,
                                    heldout_cap=cap, heldout_bytes=after)
    assert (np.concatenate([first, rest]).tolist(), end) == (fates.tolist(), held), "in parts as in one"


def test_train_never_imports_the_stages():
    """From a script read on stdin, with threads and no ``__main__`` guard."""
    code = ("import sys, toktoktok\n"
            "enc = toktoktok.train(['the cat sat. ' * 50, 'a dog ran. ' * 50] * 20, merges=20, threads=2,"
            " heldout_share=0.1, working_set_mb=1, pattern='cl100k')\n"
            "enc = toktoktok.train(['x y z ' * 50], merges=3, pattern=r' ?\\S+|\\s+', heldout_share=0, threads=2)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('stages', 'toktoktok_stages')), enc.n_vocab)\n")
    out = subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", str(256 + 1161 + 3)]


def test_train_cuts_a_long_run_as_ingest_does(tmp_path):
    """A run with no safe place longer than the cutter's part + ``max_piece_bytes`` is
    cut where ingest cuts it (forced), in a document read in blocks."""
    docs = ["word " * 30 + "ab" * 1_100_000, english_text(2_300_000)[:1_200_000], "short text"]
    options = dict(merges=40, max_piece_bytes=1024, heldout_share=0, threads=1)
    enc = toktoktok.train(docs, **options)
    phases = [{"name": "train", "merges": 40, "sources": [{"file": str(_parquet(tmp_path / "d.parquet", docs))}]}]
    same_tokenizer(enc, cli_encoding(tmp_path / "cli", phases, **{k: v for k, v in options.items() if k != "merges"}))
    ingest = work_of(tmp_path / "cli" / "config.yaml") / "ingest" / "01-train"
    assert manifest(ingest)["counts"]["forced_cuts"] > 0
    settings = check_settings({"max_piece_bytes": 1024, "threads": 2}, where="test")
    bound = units.bound(settings["working_set_mb"])  # ingest (and train()) cut the long document into units
    parts = [p for d in docs for _, p in units.row_parts(d, bound, cut=True, breaks=True)[0]]
    assert len(parts) > len(docs)
    table = count_documents(parts, np.zeros(len(parts), np.uint8), settings)
    assert dict(zip(table["piece"].to_pylist(), table["count"].to_pylist())) == chunk_counts(ingest)
