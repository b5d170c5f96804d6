"""Every command's ``-t`` takes any tokenizer: a ``.tiktoken``, a byte-level BPE
``tokenizer.json`` or the ``NAME.hf/`` folder holding one, a config (its
output), or a stock name read from tiktoken's own cache, never fetched.
Whatever tiktoken cannot encode alike is refused in one line, exit 2.
"""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
import tiktoken

import toktoktok
from tests.commands.test_inspect_compare_clean import CL100K, documents, one_line_error, read_shards, row_of
from tests.conftest import english_text, toktok, write_config
from toktoktok.any_tokenizer import STOCK, cache_name, data_gym_ranks
from toktoktok.patterns import NAMED_PATTERNS

TEXT = "Hello, world!\n\n  def f(x):\n\treturn 42 ñ 日本<|endoftext|>end"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A finished run with the Hugging Face export: out/tok.tiktoken and out/tok.hf/."""
    root = tmp_path_factory.mktemp("exported")
    (root / "prose.txt").write_text(english_text(20_000), encoding="utf-8")
    phases = [{"name": "Prose", "merges": 120, "sources": [{"file": str(root / "prose.txt")}]}]
    config = write_config(root / "p", phases, heldout_share=0, threads=1, export_hf=True,
                          special_tokens=["<|endoftext|>", "<|im_start|>"])
    r = toktok("run", "-c", config)
    assert r.code == 0, r.err
    out = root / "p" / "out"
    return {"root": root, "config": config, "tiktoken": out / "tok.tiktoken", "hf": out / "tok.hf",
            "json": out / "tok.hf" / "tokenizer.json", "enc": toktoktok.load(out / "tok.tiktoken")}


def show_ids(*args) -> list[int]:
    r = toktok("show", *args, "--color", "never", "--allow-special", TEXT)
    assert r.code == 0, r.err
    line = next(line for line in r.out.splitlines() if line.startswith("ids: "))
    return json.loads(line.removeprefix("ids: "))


def test_every_form_of_t_gives_the_tiktokens_ids(exported):
    expected = exported["enc"].encode(TEXT, allowed_special="all")
    for form in ("tiktoken", "hf", "json", "config"):
        assert show_ids("-t", exported[form]) == expected, form
    assert show_ids("-c", exported["config"]) == expected
    r = toktok("decode", "-t", exported["hf"], *map(str, expected))
    assert r.code == 0, r.err
    assert r.out == TEXT + "\n"


def test_encode_with_the_tokenizer_json_gives_the_ids_of_its_tiktoken(exported, tmp_path):
    text = exported["root"] / "prose.txt"
    for form in ("tiktoken", "json"):
        r = toktok("encode", "-t", exported[form], text, "-o", tmp_path / form, "--separator", "<|endoftext|>")
        assert r.code == 0, r.err
    (_, a), (_, b) = read_shards(tmp_path / "tiktoken"), read_shards(tmp_path / "json")
    ids = np.concatenate(a)
    assert ids.size > 1000 and np.array_equal(ids, np.concatenate(b))


def test_compare_a_tokenizer_json_with_the_tiktoken_it_was_exported_from(exported):
    text = exported["root"] / "prose.txt"
    r = toktok("compare", exported["tiktoken"], exported["json"], "--text", text)
    assert r.code == 0, r.err
    cells = row_of(r.out, str(text))
    docs = documents(text)
    tokens = sum(len(exported["enc"].encode_ordinary(d)) for d in docs)
    assert cells[3] == cells[4] == f"{sum(len(d.encode()) for d in docs) / tokens:.3f}"
    assert row_of(r.out, "tok")[1:4] == row_of(r.out, "tok.hf")[1:4] == [
        str(exported["enc"].n_vocab), "default", str(tokens)]


def edited(exported, tmp_path: Path, edit) -> Path:
    """A copy of the exported tokenizer.json, changed by ``edit(doc)``."""
    doc = copy.deepcopy(json.loads(exported["json"].read_text(encoding="utf-8")))
    edit(doc)
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path


def test_a_tokenizer_json_pattern_comes_from_its_pre_tokenizer(exported, tmp_path):
    """GPT-2's own ByteLevel regex is ``gpt2``; a runnable Split regex is used as written."""
    def byte_level_alone(doc):
        doc["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                                "use_regex": True}

    def custom(doc):
        doc["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {"Regex": r"\S+|\s+"}
        doc["pre_tokenizer"]["pretokenizers"][0].update(behavior="Isolated", invert=False)

    for edit, pattern in ((byte_level_alone, NAMED_PATTERNS["gpt2"].tiktoken), (custom, r"\S+|\s+")):
        expected = tiktoken.Encoding("e", pat_str=pattern, mergeable_ranks=exported["enc"]._mergeable_ranks,
                                     special_tokens=exported["enc"]._special_tokens)
        assert show_ids("-t", edited(exported, tmp_path / edit.__name__, edit)) == expected.encode(
            TEXT, allowed_special="all")
    r = toktok("compare", edited(exported, tmp_path / "a", byte_level_alone),
               edited(exported, tmp_path / "b", custom), "--text", exported["root"] / "prose.txt")
    assert r.code == 0, r.err
    assert row_of(r.out, "a")[2] == "gpt2" and row_of(r.out, "b")[2] == "custom"


REFUSALS = {
    "WordPiece": (lambda d: d.update(model={"type": "WordPiece", "vocab": {"a": 0}, "unk_token": "a"}),
                  "a WordPiece tokenizer.json, not BPE"),
    "Unigram": (lambda d: d.update(model={"type": "Unigram", "vocab": [["a", 0.0]]}),
                "a Unigram tokenizer.json, not BPE"),
    "not byte-level": (lambda d: d["model"]["vocab"].update({"\u2581the": 99999}),
                       "not a byte-level BPE: vocab entry '▁the'"),
    "a single byte missing": (lambda d: d["model"]["vocab"].pop("\u0100"),  # byte 0 in the ByteLevel alphabet
                              "not a byte-level BPE: its vocabulary lacks 1 of the 256 single bytes"),
    "a normalizer": (lambda d: d.update(normalizer={"type": "NFC"}), "its normalizer (NFC) changes the text"),
    "a prefix space": (lambda d: d["pre_tokenizer"]["pretokenizers"][1].update(add_prefix_space=True),
                       "its ByteLevel adds a space"),
    "Metaspace": (lambda d: d.update(pre_tokenizer={"type": "Metaspace", "replacement": "\u2581"}),
                  "its pre-tokenizer (Metaspace) is not Split then ByteLevel"),
}


@pytest.mark.parametrize("kind", list(REFUSALS))
def test_a_tokenizer_json_tiktoken_cannot_follow_is_refused_in_one_line(exported, tmp_path, kind):
    edit, words = REFUSALS[kind]
    path = edited(exported, tmp_path, edit)
    for command in (("show", "x"), ("decode", "1")):
        r = toktok(*command, "-t", path)
        assert r.code == 2, (kind, r.err)
        line = one_line_error(r.err)
        assert str(path) in line and words in line, line


def test_an_unrunnable_split_regex_is_refused_unless_pattern_is_given(exported, tmp_path):
    def absent(doc):  # Oniguruma's absent operator (?~...) is not in Python's regex nor tiktoken's
        doc["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {"Regex": r"(?~\n)|\n"}

    path = edited(exported, tmp_path, absent)
    r = toktok("show", "-t", path, "x")
    assert r.code == 2 and "its Split regex cannot be run here" in one_line_error(r.err)
    assert "give --pattern" in r.err
    assert show_ids("-t", path, "--pattern", "default") == exported["enc"].encode(TEXT, allowed_special="all")


def test_a_folder_without_tokenizer_json_and_an_unknown_name_are_refused(exported, tmp_path):
    companion = exported["tiktoken"].with_name("tok.meta.json")
    for value, words in ((tmp_path, "a folder without tokenizer.json"),
                         ("cl200k_base", "no such file, and not a stock name"),
                         (companion, "a .tiktoken's companion, not a tokenizer: give its tok.tiktoken")):
        for args in (("show", "-t", value, "x"), ("compare", value, "--text", exported["root"] / "prose.txt")):
            r = toktok(*args)
            assert r.code == 2, r.err
            assert f"{value}: {words}" in one_line_error(r.err)


def test_a_stock_name_missing_from_the_cache_says_where_to_put_it(tmp_path, monkeypatch):
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "cache"))
    r = toktok("show", "-t", "o200k_base", "x")
    assert r.code == 1
    line = one_line_error(r.err)
    assert STOCK["o200k_base"].url in line and str(tmp_path / "cache" / cache_name("o200k_base")) in line
    assert not (tmp_path / "cache").exists(), "nothing is fetched"
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR")
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", str(tmp_path / "gym"))
    assert str(tmp_path / "gym" / cache_name("o200k_base")) in one_line_error(toktok("show", "-t", "o200k_base",
                                                                                     "x").err)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # what tempfile.gettempdir() answers
    assert str(tmp_path / "tmp" / "data-gym-cache" / cache_name("o200k_base")) in one_line_error(
        toktok("show", "-t", "o200k_base", "x").err)


def test_a_stock_file_unlike_the_published_one_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    (tmp_path / cache_name("cl100k_base")).write_bytes(b"IQ== 0\n")
    r = toktok("show", "-t", "cl100k_base", "x")
    assert r.code == 1 and "is not cl100k_base (its sha256 is not the one tiktoken expects)" in one_line_error(r.err)


@pytest.mark.skipif(not CL100K.is_file(), reason="needs the shared reference files")
def test_a_stock_name_is_read_from_tiktokens_cache(exported, tmp_path, monkeypatch):
    """The file tiktoken's cache keeps (named by the sha1 of its URL) gives tiktoken's own
    cl100k_base: same ids, special tokens included, in show and compare."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    (tmp_path / cache_name("cl100k_base")).write_bytes(gzip.decompress(CL100K.read_bytes()))
    assert hashlib.sha256((tmp_path / cache_name("cl100k_base")).read_bytes()).hexdigest() == \
        STOCK["cl100k_base"].sha256
    reference = tiktoken.Encoding("cl100k_base", pat_str=NAMED_PATTERNS["cl100k"].tiktoken,
                                  mergeable_ranks=toktoktok.load(CL100K)._mergeable_ranks,
                                  special_tokens={"<|endoftext|>": 100257})
    assert show_ids("-t", "cl100k_base") == reference.encode(TEXT, allowed_special="all")
    text = exported["root"] / "prose.txt"
    r = toktok("compare", exported["json"], "cl100k_base", "--text", text)
    assert r.code == 0, r.err
    docs = documents(text)
    tokens = sum(len(reference.encode_ordinary(d)) for d in docs)
    assert row_of(r.out, "cl100k_base")[1:4] == ["100277", "cl100k", str(tokens)]
    monkeypatch.chdir(tmp_path)
    shutil.copy(exported["tiktoken"], tmp_path / "cl100k_base")  # an existing path comes before the stock name
    r = toktok("compare", "cl100k_base", "--text", text)
    assert row_of(r.out, "cl100k_base")[1:3] == [str(len(exported["enc"]._mergeable_ranks)), "default"]


def test_gpt2s_merges_file_gives_tiktokens_ranks(tmp_path, monkeypatch):
    """``data_gym_ranks`` reads GPT-2's ``vocab.bpe`` as tiktoken's data-gym loader does."""
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks

    merges = [(b"h", b"e"), (b"l", b"l"), (b"he", b"ll"), (b" ", b"w"), (b"\n", b"\n")]
    printable = [b for b in range(256) if chr(b).isprintable() and chr(b) != " "]
    order = printable + [b for b in range(256) if b not in printable]
    gym = {chr(b): b for b in printable} | {chr(256 + k): b for k, b in enumerate(order[len(printable):])}
    spell = {b: c for c, b in gym.items()}
    bpe = "#version: 0.2\n" + "".join(
        "".join(spell[x] for x in a) + " " + "".join(spell[x] for x in b) + "\n" for a, b in merges)
    ours = data_gym_ranks(bpe.encode())
    encoder = {"".join(spell[x] for x in t): r for t, r in ours.items()}
    (tmp_path / "vocab.bpe").write_text(bpe, encoding="utf-8")
    (tmp_path / "encoder.json").write_text(json.dumps(encoder), encoding="utf-8")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # tiktoken reads the local files without caching them
    assert ours == data_gym_to_mergeable_bpe_ranks(str(tmp_path / "vocab.bpe"), str(tmp_path / "encoder.json"))
    assert ours[b"hell"] == 258 and len(ours) == 261


@pytest.mark.parametrize("split", ["byte-level regex", "cl100k split"])
def test_a_tokenizer_json_trained_by_hugging_face_gives_its_ids(tmp_path, split):
    """A byte-level BPE trained by ``tokenizers`` (GPT-2's pre-tokenizer, or a Split as
    Llama 3's) encodes in ``show`` exactly as ``tokenizers`` encodes it."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False) if split == "byte-level regex" else \
        pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(NAMED_PATTERNS["cl100k"].tiktoken), behavior="isolated"),
                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(english_text(60_000).split("\n\n"), trainer)
    tok.save(str(tmp_path / "tokenizer.json"))
    text = english_text(3_000, offset=70_000) + " 12345 naïve  x\n\n\ty'all"
    r = toktok("show", "-t", tmp_path, "--color", "never", text)
    assert r.code == 0, r.err
    line = next(line for line in r.out.splitlines() if line.startswith("ids: "))
    assert json.loads(line.removeprefix("ids: ")) == tok.encode(text).ids
    ids = show_ids("-t", tmp_path / "tokenizer.json")  # special tokens too: its added tokens
    assert tok.token_to_id("<|endoftext|>") in ids and ids == tok.encode(TEXT).ids
