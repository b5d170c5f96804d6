"""A pattern that can match the empty string, or leaves text unmatched, never
reaches tiktoken: refused when it is read (config, ``--pattern``, ``load``,
``train``: exit 2 or ``ValueError``), and stopped at the first document where
it happens at run time (exit 1, naming the file and the byte offset).

On main, each of these passed validation and `plan`; export, ``encode``,
``compare`` and ``load(...).encode`` then died with a Rust panic
(``pyo3_runtime.PanicException``) and a traceback, and an unmatched character
was silently dropped from the training text.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
import regex

import toktoktok
from tests.processes import cli, error_line, phase, write_config
from toktoktok.errors import PatternMiss, UnsafePattern
from toktoktok.patterns import (
    NAMED_PATTERNS,
    PROBE_CHARACTERS,
    checked_pattern,
    first_miss,
    probe_pattern,
    resolve_pattern,
)
from toktoktok.pretokenize import count_with_regex
from toktoktok.tiktoken_file import write_tiktoken

EMPTY_MATCHES = [
    r"\w*|\s+|[^\w\s]+",  # an empty match between any two pieces
    r"\S+|[^\S\n]+|\n*",  # empty only at the end of a text
    r"(?=x)|\S+|\s+",  # a lookahead alone
    r"\S+|(?<= )(?=\n)|[^\S\n]+|\n",  # empty only between a space and a line break
]
LEAVES_TEXT = [
    (r"\p{L}+|\p{N}+|\s+", ","),  # punctuation
    (r"\S+| +", "\n"),  # line breaks
    (r"\S+|[ \n]+", "\t"),  # tabs
    (r"\p{L}+|\p{N}+|\p{P}+|\p{S}+|\s+", "\u0301"),  # combining marks
    (r"[^\r\n]+|\n", "\r"),  # a lone carriage return
    (r"\S+|\s+(?!\S)", " "),  # a space before a word
]


@pytest.mark.parametrize("pattern", EMPTY_MATCHES)
def test_the_probe_refuses_a_pattern_that_can_match_empty(pattern: str) -> None:
    assert "matches the empty string" in probe_pattern(pattern)
    with pytest.raises(UnsafePattern, match="empty string"):
        resolve_pattern(pattern)


@pytest.mark.parametrize("pattern, char", LEAVES_TEXT)
def test_the_probe_refuses_a_pattern_that_leaves_a_character(pattern: str, char: str) -> None:
    problem = probe_pattern(pattern)
    assert problem is not None and "unmatched" in problem and "drops" in problem
    assert f"U+{ord(char):04X}" in problem or "U+" in problem


@pytest.mark.parametrize("name", list(NAMED_PATTERNS))
def test_the_named_patterns_pass(name: str) -> None:
    assert probe_pattern(NAMED_PATTERNS[name].python) is None


@pytest.mark.parametrize("pattern", [r"\S+|\s+", r"\p{L}+|\p{N}+|[^\s\p{L}\p{N}]+|\s+(?!\S)|\s", r"(?s)."])
def test_good_custom_patterns_pass(pattern: str) -> None:
    assert resolve_pattern(pattern).name == "custom"


def test_every_category_has_probe_characters() -> None:
    """Each general category but Cs (never UTF-8 text) is probed, with characters of it."""
    for category, chars in PROBE_CHARACTERS.items():
        assert chars and all(unicodedata.category(c) == category for c in chars), category
    every = {"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf",
             "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Co", "Cn"}
    assert set(PROBE_CHARACTERS) == every


def test_first_miss_agrees_with_a_plain_reading() -> None:
    """first_miss against a slow reference: mark each character a match covers."""
    rng = __import__("random").Random(7)
    alphabet = "ab \n,\u0301"
    for pattern in [r"[ab]+| ", r"[ab]*|\s", r"\S+|\s+", r"a|b|\n"]:
        compiled = regex.compile(pattern)
        for _ in range(200):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 8)))
            spans = [m.span() for m in compiled.finditer(text)]
            empty = next((s for s, e in spans if s == e), None)
            covered = {i for s, e in spans for i in range(s, e)}
            gap = next((i for i in range(len(text)) if i not in covered), None)
            miss = first_miss(compiled, text)
            if empty is None and gap is None:
                assert miss is None
            else:
                assert miss is not None and miss[0] == min(x for x in (empty, gap) if x is not None)


# ------------------------------------------------------------------ where patterns come in


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("hello world, the pattern test\n\nanother document here\n" * 20)
    return data


def test_config_refuses_it_with_exit_2(tmp_path: Path, corpus: Path) -> None:
    """plan (and so every command) stops at the config: exit 2, the key and its line."""
    config = write_config(tmp_path / "p", [phase("Only", 20, {"path": str(corpus)})], pattern=r"\w*|\s+|[^\w\s]+")
    result = cli("plan", "-c", config)
    assert result.code == 2, result.err
    line = error_line(result.err)
    assert "config.yaml line" in line and "pattern is refused: it matches the empty string" in line
    assert "panic" not in result.err.lower().replace("would panic", "")


def test_load_refuses_it(tmp_path: Path) -> None:
    write_tiktoken(tmp_path / "t.tiktoken", {bytes([b]): b for b in range(256)})
    with pytest.raises(ValueError, match="matches the empty string"):
        toktoktok.load(tmp_path / "t.tiktoken", pattern=r"\w*|\s+|[^\w\s]+")
    with pytest.raises(ValueError, match="unmatched"):
        toktoktok.load(tmp_path / "t.tiktoken", pattern=r"\p{L}+|\s+")


def test_train_refuses_it() -> None:
    with pytest.raises(ValueError, match="pattern is refused"):
        toktoktok.train(["hello world"] * 10, merges=5, pattern=r"\w*|\s+|[^\w\s]+")


@pytest.mark.parametrize("command", ["encode", "compare"])
@pytest.mark.parametrize("pattern", [r"(unclosed", r"\w*|\s+|[^\w\s]+", r"\p{L}+|\s+", r"\X+|\s+"])
def test_a_bad_pattern_option_is_a_usage_error(tmp_path: Path, corpus: Path, command: str, pattern: str) -> None:
    """Exit 2 (exit 1 on main, or a panic), whether or not the pattern would be used."""
    tok = tmp_path / "t.tiktoken"
    write_tiktoken(tok, {bytes([b]): b for b in range(256)})
    if command == "encode":
        result = cli("encode", corpus, "--tokenizer", tok, "-o", tmp_path / "shards", "--pattern", pattern)
    else:
        result = cli("compare", tok, "--text", corpus, "--pattern", pattern)
    assert result.code == 2, result.err
    assert "--pattern" in result.err and "Traceback" not in result.err


# ------------------------------------------------------------------ at run time


def test_count_with_regex_stops_at_the_first_miss() -> None:
    """A pattern the probe passes but a document defeats (ž is no probe character)."""
    pattern = resolve_pattern(r"[^\sž]+|\s+")
    assert count_with_regex(["plain text"], pattern)[1] == [1, 1, 1]
    with pytest.raises(PatternMiss, match=r"leaves 'ž' \(U\+017E, category Ll\) unmatched, after 'éé <\|x\|>'") as info:
        count_with_regex(["fine", "éé <|x|>ž and ž"], pattern, ["<|x|>"])
    assert (info.value.index, info.value.offset) == (1, 8)  # the second text, its 9th character
    empty = resolve_pattern(r"[^\sž]+|\s+|(?=ž)")
    with pytest.raises(PatternMiss, match="matches the empty string, after 'abc'") as info:
        count_with_regex(["abcž"], empty)
    assert (info.value.index, info.value.offset) == (0, 3)


@pytest.mark.parametrize("threads", [1, 2])
def test_ingest_stops_naming_the_file_and_offset(tmp_path: Path, corpus: Path, threads: int) -> None:
    """In worker processes too (threads: 2): exit 1, one line, no panic, no tokenizer."""
    (corpus / "b.txt").write_text("zaž")
    config = write_config(tmp_path / "p", [phase("Only", 20, {"path": str(corpus)})], pattern=r"[^\sž]+|\s+",
                          threads=threads)
    result = cli("run", "-c", config)
    assert result.code == 1, result.err
    line = error_line(result.err)
    assert f"{corpus / 'b.txt'}: the pattern leaves 'ž'" in line and "at character 2 of what this file trains on" in line
    assert "Traceback" not in result.err and "PanicException" not in result.err
    assert not (tmp_path / "p" / "out" / "tok.tiktoken").exists()


# ------------------------------------------------------------------ a named pattern written out

# Published models' pattern strings, copied from their tokenizer files: Qwen2's
# splits numbers into single digits, Llama 3's is the default pattern.
QWEN2 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
LLAMA3 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
          r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
WRITTEN_OUT = [(QWEN2, "default-digits"), (LLAMA3, "default")] + [
    (p.tiktoken, name) for name, p in NAMED_PATTERNS.items()
]
TEXT = "Im Jahr 2026 kostet's 1.234,56 €, nicht ٣٤٥ oder 12345!\n\n  Ende \t\n 7 \n "


@pytest.mark.parametrize(("string", "name"), WRITTEN_OUT, ids=["qwen2", "llama3", *NAMED_PATTERNS])
def test_a_string_equal_to_a_named_pattern_is_that_pattern(string: str, name: str) -> None:
    """It runs on the numba scanner (a custom regex has none), which splits as ``regex`` does."""
    from toktoktok.scanner import PATTERN_IDS, split_text

    pattern = resolve_pattern(string)
    assert pattern is NAMED_PATTERNS[name] and pattern.name in PATTERN_IDS
    assert split_text(TEXT, PATTERN_IDS[name]) == regex.findall(string.replace("$", r"\Z"), TEXT)
    assert checked_pattern(string) is pattern


def test_qwen2_in_a_config_and_in_train(tmp_path: Path, corpus: Path) -> None:
    """From a config's ``pattern:`` and ``train(pattern=)`` alike; a near miss stays a custom regex."""
    from toktoktok.config import load_config

    config = write_config(tmp_path / "p", [phase("Only", 20, {"path": str(corpus)})], pattern=QWEN2)
    assert load_config(config).pattern is NAMED_PATTERNS["default-digits"]
    texts = ["In 2026, 1234 apples cost 56.78 each.\n\n"] * 20
    assert toktoktok.train(texts, merges=30, pattern=QWEN2).encode("9876 x") == \
        toktoktok.train(texts, merges=30, pattern="default-digits").encode("9876 x")
    assert resolve_pattern(QWEN2 + "|x").name == "custom" and resolve_pattern(" " + QWEN2).name == "custom"
