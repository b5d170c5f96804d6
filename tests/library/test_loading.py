"""Tests for toktoktok.load (toktoktok/loading.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import tiktoken

import toktoktok
from toktoktok.loading import load, meta_path, split_name
from toktoktok.patterns import CL100K_PATTERN, DEFAULT_PATTERN
from toktoktok.tiktoken_file import TokenizerFileError, write_tiktoken

SPECIAL = {"<|endoftext|>": 261, "<|im_start|>": 262}
TEXT = "hello world, hello!\n\n  héllo 😀 tabs\tand\r\nlines"


def tiny_vocab() -> dict[bytes, int]:
    """256 bytes in a fixed shuffled order, then merges that build "hello"."""
    order = list(range(256))
    random.Random(7).shuffle(order)
    ranks = {bytes([b]): rank for rank, b in enumerate(order)}
    for token in (b"he", b"ll", b"llo", b"hello", b" w"):
        ranks[token] = len(ranks)
    return ranks


def write_meta(folder: Path, name: str, **overrides: object) -> Path:
    meta = {
        "format": "toktoktok-meta/1",
        "name": name,
        "pattern": {"name": "default", "tiktoken": DEFAULT_PATTERN, "python": DEFAULT_PATTERN},
        "special_tokens": SPECIAL,
        "phases": [{"name": "tiny", "merges": 5}],
    } | overrides
    path = folder / f"{name}.meta.json"
    path.write_text(json.dumps(meta), encoding="utf-8")
    return path


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.tiktoken"
    write_tiktoken(path, tiny_vocab())
    return path


def test_load_with_meta_round_trips(tiny: Path) -> None:
    write_meta(tiny.parent, "tiny")
    enc = load(tiny)
    assert isinstance(enc, tiktoken.Encoding)
    assert enc.name == "tiny"
    assert enc.n_vocab == 256 + 5 + 2
    assert enc.special_tokens_set == set(SPECIAL)
    text = TEXT + "<|endoftext|><|im_start|>" + TEXT
    ids = enc.encode(text, allowed_special="all")
    assert enc.decode(ids) == text
    assert ids.count(261) == 1 and ids.count(262) == 1
    assert enc.encode("hello") == [tiny_vocab()[b"hello"]]
    assert enc.encode_ordinary(TEXT) == enc.encode(TEXT)


def test_special_token_is_refused_unless_allowed(tiny: Path) -> None:
    write_meta(tiny.parent, "tiny")
    enc = load(tiny)
    with pytest.raises(ValueError):
        enc.encode("<|endoftext|>")
    assert len(enc.encode("<|endoftext|>", disallowed_special=())) > 1


def test_meta_pattern_is_used(tiny: Path) -> None:
    write_meta(tiny.parent, "tiny", pattern={"name": "custom", "tiktoken": ".", "python": "."})
    enc = load(tiny)
    assert len(enc.encode("hello")) == 5  # "." splits every character apart


def test_keyword_arguments_override_meta(tiny: Path) -> None:
    write_meta(tiny.parent, "tiny", pattern={"name": "custom", "tiktoken": ".", "python": "."})
    enc = load(tiny, pattern="cl100k", special_tokens={"<|x|>": 999})
    assert enc.encode("hello") == [tiny_vocab()[b"hello"]]
    assert enc._pat_str == CL100K_PATTERN
    assert enc.special_tokens_set == {"<|x|>"}
    assert enc.encode("a<|x|>", allowed_special="all") == [tiny_vocab()[b"a"], 999]
    assert load(tiny, pattern=r"\S+|\s+")._pat_str == r"\S+|\s+"
    assert load(tiny, special_tokens={}).special_tokens_set == set()


def test_missing_meta_gives_default_pattern_and_no_specials(tiny: Path) -> None:
    enc = load(tiny)
    assert enc._pat_str == DEFAULT_PATTERN
    assert enc.special_tokens_set == set()
    assert enc.decode(enc.encode(TEXT)) == TEXT


def test_meta_without_pattern_or_specials(tiny: Path) -> None:
    meta = write_meta(tiny.parent, "tiny")
    data = json.loads(meta.read_text())
    del data["pattern"], data["special_tokens"]
    meta.write_text(json.dumps(data))
    enc = load(tiny)
    assert enc._pat_str == DEFAULT_PATTERN and enc.special_tokens_set == set()


def test_special_id_equal_to_a_rank_is_refused(tiny: Path) -> None:
    write_meta(tiny.parent, "tiny", special_tokens={"<|endoftext|>": 260})
    with pytest.raises(ValueError, match="already the rank of b' w'"):
        load(tiny)


def test_shared_special_id_is_refused(tiny: Path) -> None:
    with pytest.raises(ValueError, match="share the id"):
        load(tiny, special_tokens={"<|a|>": 300, "<|b|>": 300})


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("{not json", "cannot read the companion"),
        ("[1, 2]", "expected a JSON object"),
        (json.dumps({"format": "other/2"}), "unsupported format"),
        (json.dumps({"format": "toktoktok-meta/1", "pattern": "x"}), "'pattern' must be"),
        (json.dumps({"format": "toktoktok-meta/1", "special_tokens": []}), "'special_tokens' must"),
    ],
)
def test_bad_meta_is_refused_with_its_name(tiny: Path, content: str, fragment: str) -> None:
    (tiny.parent / "tiny.meta.json").write_text(content)
    with pytest.raises(ValueError, match=fragment) as info:
        load(tiny)
    assert "tiny.meta.json" in str(info.value)


def test_bad_pattern_argument(tiny: Path) -> None:
    with pytest.raises(ValueError, match="does not compile"):
        load(tiny, pattern="(unclosed")


def test_bad_tiktoken_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.tiktoken"
    path.write_text("IQ== 0\nIQ== 1\n")
    with pytest.raises(TokenizerFileError, match="line 2"):
        load(path)
    with pytest.raises(TokenizerFileError, match="cannot read"):
        load(tmp_path / "absent.tiktoken")


def test_gz_file_uses_companion_of_its_name(tmp_path: Path) -> None:
    path = tmp_path / "zipped.tiktoken.gz"
    write_tiktoken(path, tiny_vocab())
    write_meta(tmp_path, "zipped")
    enc = load(path)
    assert enc.name == "zipped" and enc.special_tokens_set == set(SPECIAL)


def test_names_and_companion_paths() -> None:
    assert split_name("a/b/demo.tiktoken") == (Path("a/b"), "demo")
    assert split_name("demo.v2.tiktoken") == (Path("."), "demo.v2")
    assert meta_path("a/demo.tiktoken.gz") == Path("a/demo.meta.json")


def test_load_is_exported_from_the_package() -> None:
    assert toktoktok.load is load
    assert "load" in toktoktok.__all__


def _big_vocab(tmp_path: Path) -> Path:
    """A file of 256 bytes and 2,400 merges of three-digit tokens: long enough that a
    cut mid-line lands on a rank whose first digits are an earlier line's rank."""
    ranks = {bytes([b]): b for b in range(256)}
    for i in range(2400):
        ranks[f"{i:04d}".encode()] = len(ranks)
    path = tmp_path / "cut.tiktoken"
    write_tiktoken(path, ranks)
    return path


def _cut_mid_line(path: Path) -> None:
    data = path.read_bytes()
    end = data.rindex(b" ", 0, len(data) - 200) + 3  # two digits into a four-digit rank
    path.write_bytes(data[:end])


def test_a_truncated_file_with_a_companion_is_told_by_the_companion(tmp_path: Path) -> None:
    """Cut mid-line, the file's last rank reads as an earlier one ("duplicate rank"):
    with a companion, the message is the size and digest it records."""
    from toktoktok.errors import CompanionMismatch
    from toktoktok.loading import file_sha256

    path = _big_vocab(tmp_path)
    write_meta(tmp_path, "cut", format="toktoktok-meta/2", special_tokens={},
               tiktoken={"sha256": file_sha256(path), "ranks": 2656, "bytes": path.stat().st_size})
    assert load(path).n_vocab == 2656
    _cut_mid_line(path)
    with pytest.raises(CompanionMismatch) as err:
        load(path)
    message = str(err.value)
    assert "cut.tiktoken" in message and "cut.meta.json" in message and "bytes" in message
    assert "duplicate" not in message


def test_a_truncated_file_without_a_companion_says_it_may_be_truncated(tmp_path: Path) -> None:
    path = _big_vocab(tmp_path)
    _cut_mid_line(path)
    last = len(path.read_bytes().split(b"\n"))
    with pytest.raises(TokenizerFileError) as err:
        load(path)
    assert f"cut.tiktoken, line {last}:" in str(err.value)
    assert "may be truncated" in str(err.value)
    path.write_bytes(path.read_bytes() + b"\n")  # the same bad line, ended: a plain duplicate
    with pytest.raises(TokenizerFileError) as err:
        load(path)
    assert "duplicate rank" in str(err.value) and "may be truncated" not in str(err.value)
