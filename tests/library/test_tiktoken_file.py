"""Tests for toktoktok.tiktoken_file and toktoktok.atomic."""

from __future__ import annotations

import base64
import gzip
import random
import re
import shutil
from pathlib import Path

import pytest

from tests.helpers import SHARED
from toktoktok.atomic import atomic_path, atomic_write_bytes
from toktoktok.tiktoken_file import (
    MAX_RANK,
    TokenizerFileError,
    parse_tiktoken_bytes,
    read_tiktoken,
    validate_ranks,
    validate_special_tokens,
    write_tiktoken,
)
from toktoktok.tiktoken_file.ranks import _check_pairs, _plainly_valid
from toktoktok.tiktoken_file.reading import _parse_lines, _parse_whole

SHARED = SHARED
CL100K_GZ = SHARED / "data" / "reference" / "cl100k_base.tiktoken.gz"


def byte_vocab() -> dict[bytes, int]:
    """The 256 single bytes at ranks 0..255, in reverse order (any order is fine)."""
    return {bytes([b]): 255 - b for b in range(256)}


def small_vocab() -> dict[bytes, int]:
    return byte_vocab() | {b"ab": 256, b"abc": 257, b" the": 258}


def line(token: bytes, rank: int | str) -> str:
    return f"{base64.b64encode(token).decode()} {rank}\n"


def byte_lines() -> str:
    return "".join(line(bytes([b]), b) for b in range(256))


def write_text(tmp_path: Path, text: str, name: str = "v.tiktoken") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("ascii"))
    return path


def expect_error(path: Path, line_no: int | None, fragment: str) -> TokenizerFileError:
    with pytest.raises(TokenizerFileError) as info:
        read_tiktoken(path)
    err = info.value
    assert isinstance(err, ValueError)
    assert str(path) in str(err)
    assert err.line == line_no
    if line_no is not None:
        assert f"line {line_no}" in str(err)
    assert fragment in str(err)
    return err


# --- round trip and accepted variants ---------------------------------------


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "v.tiktoken"
    write_tiktoken(path, small_vocab())
    assert read_tiktoken(path) == small_vocab()


def test_written_lines_are_sorted_by_rank_and_exact(tmp_path: Path) -> None:
    path = tmp_path / "v.tiktoken"
    write_tiktoken(path, small_vocab())
    data = path.read_bytes()
    lines = data.split(b"\n")
    assert lines[-1] == b"" and data.endswith(b"\n") and b"\r" not in data
    assert lines[0] == b"/w== 0"  # byte 255 has rank 0 in byte_vocab()
    assert lines[256:259] == [b"YWI= 256", b"YWJj 257", b"IHRoZQ== 258"]
    assert [int(x.split(b" ")[1]) for x in lines[:-1]] == list(range(259))


def test_write_accepts_pairs_and_gaps(tmp_path: Path) -> None:
    path = tmp_path / "v.tiktoken"
    pairs = [(b"xyz", 1000)] + list(byte_vocab().items())
    write_tiktoken(path, iter(pairs))
    assert read_tiktoken(path) == dict(pairs)


def test_crlf_and_missing_final_newline(tmp_path: Path) -> None:
    text = byte_lines().replace("\n", "\r\n") + line(b"ab", 256).rstrip("\n")
    path = write_text(tmp_path, text)
    ranks = read_tiktoken(path)
    assert len(ranks) == 257 and ranks[b"ab"] == 256


def test_empty_lines_are_skipped(tmp_path: Path) -> None:
    path = write_text(tmp_path, "\n" + byte_lines() + "\n\r\n" + line(b"ab", 256) + "\n\n")
    assert read_tiktoken(path)[b"ab"] == 256


def test_rank_gaps_are_accepted(tmp_path: Path) -> None:
    path = write_text(tmp_path, byte_lines() + line(b"ab", 300) + line(b"cd", 50257))
    ranks = read_tiktoken(path)
    assert ranks[b"ab"] == 300 and ranks[b"cd"] == 50257


def test_gzip_read_and_write(tmp_path: Path) -> None:
    path = tmp_path / "v.tiktoken.gz"
    write_tiktoken(path, small_vocab())
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    assert read_tiktoken(path) == small_vocab()
    first = path.read_bytes()
    write_tiktoken(path, small_vocab())
    assert path.read_bytes() == first  # mtime=0: reproducible


def test_rewritten_file_is_not_served_stale(tmp_path: Path) -> None:
    path = tmp_path / "v.tiktoken"
    write_tiktoken(path, small_vocab())
    read_tiktoken(path)
    write_tiktoken(path, byte_vocab())
    assert read_tiktoken(path) == byte_vocab()


# --- rejections, each with its line number ----------------------------------


@pytest.mark.parametrize(
    ("bad_line", "fragment"),
    [
        ("YWI 256\n", "invalid base64"),  # missing padding
        ("YW!= 256\n", "invalid base64"),  # character outside the alphabet
        ("-_8= 256\n", "invalid base64"),  # URL-safe alphabet
        ("YWI= abc\n", "not a non-negative decimal integer"),
        ("YWI= 2.5\n", "not a non-negative decimal integer"),
        ("YWI= +7\n", "not a non-negative decimal integer"),
        ("YWI= -3\n", "negative rank -3"),
        ("YWI= 4294967295\n", "too large"),
        ("YWI=  256\n", "one space"),
        ("YWI=\t256\n", "one space"),
        ("YWI=\n", "one space"),
        ("YWI= 256 7\n", "one space"),
        (" 256\n", "empty token"),
    ],
)
def test_bad_line_is_reported_with_its_number(tmp_path: Path, bad_line: str, fragment: str) -> None:
    path = write_text(tmp_path, byte_lines() + bad_line)
    expect_error(path, 257, fragment)


def test_line_numbers_count_empty_and_crlf_lines(tmp_path: Path) -> None:
    path = write_text(tmp_path, "\r\n\n" + byte_lines() + "YWI= x\r\n")
    expect_error(path, 259, "not a non-negative decimal integer")


def test_duplicate_bytes(tmp_path: Path) -> None:
    path = write_text(tmp_path, byte_lines() + line(b"ab", 256) + line(b"ab", 257))
    err = expect_error(path, 258, "duplicate token b'ab'")
    assert "line 257" in err.problem


def test_duplicate_single_byte(tmp_path: Path) -> None:
    path = write_text(tmp_path, byte_lines() + line(b"A", 256))
    err = expect_error(path, 257, "duplicate token b'A'")
    assert "already on line 66" in err.problem


def test_duplicate_rank(tmp_path: Path) -> None:
    path = write_text(tmp_path, byte_lines() + line(b"ab", 256) + line(b"cd", 256))
    err = expect_error(path, 258, "duplicate rank 256")
    assert "already on line 257" in err.problem


def test_missing_single_bytes_are_named(tmp_path: Path) -> None:
    text = "".join(line(bytes([b]), b) for b in range(256) if b not in (10, 200))
    path = write_text(tmp_path, text)
    err = expect_error(path, None, "lacks 2 of the 256 single bytes")
    assert "0x0a" in str(err) and "0xc8" in str(err)


def test_empty_file_lacks_every_byte(tmp_path: Path) -> None:
    err = expect_error(write_text(tmp_path, ""), None, "lacks 256 of the 256")
    assert "256 missing in all" in str(err)


def test_corrupt_gzip(tmp_path: Path) -> None:
    path = tmp_path / "v.tiktoken.gz"
    path.write_bytes(gzip.compress(byte_lines().encode())[:-20])
    expect_error(path, None, "corrupt gzip")


def test_missing_file(tmp_path: Path) -> None:
    expect_error(tmp_path / "nope.tiktoken", None, "cannot read")


# --- the bulk parser agrees with the line parser -----------------------------


def outcome(parse, data: bytes) -> object:
    """What a parser makes of ``data``: the ranks with their order, or the error's text."""
    try:
        return list(parse(data).items())
    except TokenizerFileError as e:
        return str(e)


def both_outcomes(data: bytes) -> tuple[object, object]:
    return outcome(parse_tiktoken_bytes, data), outcome(lambda d: _parse_lines(d, "<bytes>"), data)


BAD_TAILS = [
    "YWI 256\n", "YW!= 256\n", "-_8= 256\n", "YWI= abc\n", "YWI= 2.5\n", "YWI= +7\n", "YWI= -3\n",
    "YWI= 4294967295\n", "YWI=  256\n", "YWI=\t256\n", "YWI=\n", "YWI= 256 7\n", " 256\n", "YWI= \n",
    "YWI= 256\r\n", "\n", "YWI= \u0661\n", "YWI= 1" + "0" * 5000 + "\n", "YWI=== 256\n", "YWJj= 256\n",
    "=YWI 256\n", "YWI= 256\x00\n", "QQ== 300\n", "YWI= 65\n", "YWI= 0256\n", "YWI= 256\nYWI 257",
]


@pytest.mark.parametrize("tail", BAD_TAILS)
def test_bulk_parser_agrees_with_line_parser(tail: str) -> None:
    """Every kind of line, good or bad, at the end of a file or inside it."""
    for data in ((byte_lines() + tail).encode(), (tail + byte_lines()).encode(), (byte_lines() + tail).encode()[:-1]):
        fast, slow = both_outcomes(data)
        assert fast == slow


def test_bulk_parser_takes_well_formed_files() -> None:
    data = (byte_lines() + line(b"ab", 256) + line(b"xyz", MAX_RANK)).encode()
    assert _parse_whole(data) == _parse_lines(data, "x") == parse_tiktoken_bytes(data)
    assert _parse_whole(data[:-1]) == _parse_lines(data, "x")  # no final newline
    assert _parse_whole(data.replace(b"\n", b"\r\n")) is None  # CRLF: the line parser's
    assert _parse_whole(b"") is None and _parse_whole(b"\n") is None


def test_bulk_parser_agrees_on_random_damage() -> None:
    """Random bytes replaced, inserted or deleted in a small valid file: both parsers
    give the same ranks or the same error."""
    rng = random.Random(7)
    good = (byte_lines() + line(b"ab", 256) + line(b"abc", 257)).encode()
    alphabet = b"AQWI=+/09 \n\r\t-\x00\xff5"
    fast_taken = 0
    for _ in range(3000):
        data = bytearray(good)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(data))
            what = rng.random()
            if what < 0.4:
                data[at] = rng.choice(alphabet)
            elif what < 0.7:
                data.insert(at, rng.choice(alphabet))
            else:
                del data[at]
        fast, slow = both_outcomes(bytes(data))
        assert fast == slow, bytes(data)
        fast_taken += _parse_whole(bytes(data)) is not None
    assert fast_taken > 30  # the bulk path was exercised, not only the fallback


@pytest.mark.parametrize(
    "pairs",
    [
        [(b"a", 0), (b"b", 1)],
        [(b"a", 0), (b"a", 1)],
        [(b"a", 0), (b"b", 0)],
        [(b"a", 0), (b"", 1)],
        [(b"a", 0), ("b", 1)],
        [(b"a", 0), (b"b", True)],
        [(b"a", 0), (b"b", 1.0)],
        [(b"a", 0), (b"b", -1)],
        [(b"a", 0), (b"b", MAX_RANK + 1)],
        [(b"a", 0), (bytearray(b"b"), 1)],
        [(b"a", 0), (b"b", 1, 2)],
        [(b"a", 0), (b"b",)],
        [],
    ],
)
def test_bulk_pair_check_agrees_with_one_at_a_time(pairs: list) -> None:
    """``_plainly_valid`` takes only what ``_check_pairs`` takes, with the same tokens."""
    fast = _plainly_valid(pairs)
    try:
        slow: object = set(_check_pairs(pairs))
    except (ValueError, TypeError) as e:
        slow = type(e)
    assert fast is None or fast == slow


def test_validate_ranks_sorts_and_checks() -> None:
    vocab = byte_vocab() | {b"ab": 256}
    assert validate_ranks(vocab) == sorted(vocab.items(), key=lambda p: p[1])
    with pytest.raises(ValueError, match=re.escape("rank 5 is given to two tokens: b'\\xfa' and b'cd'")):
        validate_ranks(list(vocab.items()) + [(b"cd", 5)])


# --- write-side validation ---------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ([(b"A", 300)], "appears twice"),
        ([(b"ab", 5)], "rank 5 is given to two tokens"),
        ([(b"", 300)], "not a non-empty bytes"),
        ([("ab", 300)], "not a non-empty bytes"),
        ([(b"ab", -1)], "not an integer"),
        ([(b"ab", True)], "not an integer"),
    ],
)
def test_write_rejects_bad_vocabularies(tmp_path: Path, extra: list, fragment: str) -> None:
    path = tmp_path / "v.tiktoken"
    with pytest.raises(ValueError, match=fragment):
        write_tiktoken(path, list(byte_vocab().items()) + extra)
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []  # no temp file left behind


def test_write_rejects_missing_bytes(tmp_path: Path) -> None:
    vocab = byte_vocab()
    del vocab[b"\x00"]
    with pytest.raises(ValueError, match="0x00"):
        write_tiktoken(tmp_path / "v.tiktoken", vocab)


# --- special tokens ----------------------------------------------------------


def test_valid_special_tokens() -> None:
    validate_special_tokens(small_vocab(), {"<|endoftext|>": 259, "<|im_start|>": 1000})
    validate_special_tokens(small_vocab(), {})


@pytest.mark.parametrize(
    ("special", "fragment"),
    [
        ({"<|endoftext|>": 256}, "already the rank of b'ab'"),
        ({"<|a|>": 300, "<|b|>": 300}, "share the id 300"),
        ({"": 300}, "not a non-empty string"),
        ({"<|a|>": -1}, "not an integer"),
        ({"<|a|>": "300"}, "not an integer"),
        ({"<|a|>": 300, "<|a|>x": 301}, "occurs inside"),
    ],
)
def test_bad_special_tokens(special: dict, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        validate_special_tokens(small_vocab(), special)


# --- atomic writes -------------------------------------------------------------


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "a.bin"
    atomic_write_bytes(target, b"one")
    atomic_write_bytes(target, b"two")
    assert target.read_bytes() == b"two"
    assert [p.name for p in tmp_path.iterdir()] == ["a.bin"]


def test_atomic_write_honours_umask(tmp_path: Path) -> None:
    target = tmp_path / "a.bin"
    atomic_write_bytes(target, b"x")
    plain = tmp_path / "plain.bin"
    plain.write_bytes(b"x")
    assert target.stat().st_mode == plain.stat().st_mode


def test_atomic_path_failure_keeps_old_file(tmp_path: Path) -> None:
    target = tmp_path / "a.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            assert tmp.parent == tmp_path and tmp != target
            tmp.write_bytes(b"half")
            raise RuntimeError("interrupted")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.bin"]


def test_atomic_path_success(tmp_path: Path) -> None:
    target = tmp_path / "b.bin"
    with atomic_path(target) as tmp:
        with open(tmp, "wb") as f:
            f.write(b"new")
        assert not target.exists()
    assert target.read_bytes() == b"new"
    assert not tmp.exists()


# --- the real thing ------------------------------------------------------------


def test_cl100k_base_matches_tiktoken_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not CL100K_GZ.exists():
        pytest.skip(f"shared reference data not found at {CL100K_GZ}")
    from tiktoken.load import load_tiktoken_bpe

    ours = read_tiktoken(CL100K_GZ)
    assert len(ours) == 100256
    plain = tmp_path / "cl100k_base.tiktoken"
    with gzip.open(CL100K_GZ, "rb") as src, open(plain, "wb") as dst:
        shutil.copyfileobj(src, dst)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # "" disables tiktoken's path-keyed cache
    assert ours == load_tiktoken_bpe(str(plain))
    assert read_tiktoken(plain) == ours
    rewritten = tmp_path / "rewritten.tiktoken"
    write_tiktoken(rewritten, ours)
    assert rewritten.read_bytes() == plain.read_bytes()
