"""The Python training API: ``toktoktok.train(texts, merges=..., ...)``.

It must run the same stages as the command line: the same documents give
the same ``.tiktoken`` whether they come as Python strings or as files run
with ``toktok run``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile

import pytest
import tiktoken

import toktoktok
from tests.conftest import SPECIALS, english_text, split_txt_documents, toktok, write_config
from toktoktok.patterns import NAMED_PATTERNS


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


def cli_encoding(folder, phases, **settings) -> tiktoken.Encoding:
    config = write_config(folder, phases, **settings)
    r = toktok("run", "-c", config)
    assert r.code == 0, r.err
    return toktoktok.load(folder / "out" / "tok.tiktoken")


def same_tokenizer(a: tiktoken.Encoding, b: tiktoken.Encoding) -> None:
    assert a._mergeable_ranks == b._mergeable_ranks
    assert a._special_tokens == b._special_tokens
    assert a._pat_str == b._pat_str


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
    enc = toktoktok.train(iter(docs + odd), merges=50, special_tokens=["<|endoftext|>"], hardcoded_merges=False,
                          heldout_share=0, pattern="cl100k", threads=1, output=keep)
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
    enc = toktoktok.train(config=config)
    out = tmp_path / "p" / "out" / "tok.tiktoken"
    assert out.is_file(), "a config's outputs are written where it says"
    same_tokenizer(enc, toktoktok.load(out))
    same_tokenizer(toktoktok.train(str(config)), enc)


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
    with pytest.raises(ValueError, match="not both|give no texts"):
        toktoktok.train(["a"], config=tmp_path / "c.yaml")
    with pytest.raises(ValueError, match="texts"):
        toktoktok.train(merges=5)


def test_importing_the_library_does_not_import_the_stages():
    code = "import sys, toktoktok; print(any(m == 'stages' or m.startswith('stages.') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    assert "train" in toktoktok.__all__
