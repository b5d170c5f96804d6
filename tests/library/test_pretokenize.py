"""Special tokens, safe cut places, and the part-by-part = whole property."""

from __future__ import annotations

import time

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toktoktok.patterns import NAMED_PATTERNS, resolve_pattern
from toktoktok.pretokenize import PartCutter, pieces, safe_cut, split_special

SPECIALS = ("<|e|>", "<|eot|>", "<|a b\nc|>")
# Each named pattern by the cut rule it claims (the -digits variants too).
CUT_PATTERNS = [p for p in NAMED_PATTERNS.values() if p.cut_at_safe_places]
SPACE_CUT_PATTERNS = [p for p in NAMED_PATTERNS.values() if p.cut_at_spaces and not p.cut_at_safe_places]
BREAK_CUT_PATTERNS = [p for p in NAMED_PATTERNS.values() if p.cut_at_breaks and not p.cut_at_safe_places]

# Fragments biased to where the patterns and the cut rule are delicate.
FRAGMENTS = [
    "\n", "\r", "\r\n", "\n\n", " ", "  ", "\t", "\u00a0", "\u3000", "\x0b", "\x85",
    "\u2028", "\x1c", "'", "'s", "'LL", "'Re", "a", "Bc", "é", "e\u0301", "中文",
    "1", "23", "4567", "٣", " 12", "'9", "!", "..", "/", "-", "$", "<|", "|>", "<|e", "e|>",
    *SPECIALS,
]
fragment = st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4))
texts = st.lists(fragment, max_size=40).map("".join)


def blocks_of(text: str, sizes: list[int]) -> list[str]:
    """Cut text into consecutive blocks of the given sizes (cycled)."""
    out, i, k = [], 0, 0
    while i < len(text):
        size = sizes[k % len(sizes)] if sizes else len(text)
        out.append(text[i : i + size])
        i += size
        k += 1
    return out


def run_cutter(cutter: PartCutter, blocks: list[str]) -> list[str]:
    parts: list[str] = []
    for block in blocks:
        parts += cutter.feed(block)
    return parts + cutter.finish()


# ------------------------------------------------------------ property


@pytest.mark.parametrize("pattern", CUT_PATTERNS, ids=lambda p: p.name)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=texts,
    sizes=st.lists(st.integers(1, 12), min_size=1, max_size=5),
    part_chars=st.integers(1, 50),
    with_specials=st.booleans(),
)
def test_parts_give_the_pieces_of_the_whole(pattern, text, sizes, part_chars, with_specials):
    specials = SPECIALS if with_specials else ()
    cutter = PartCutter(cut=True, special_tokens=specials, part_chars=part_chars)
    parts = run_cutter(cutter, blocks_of(text, sizes))
    assert "".join(parts) == text
    assert all(parts)
    assert cutter.forced_cuts == 0
    by_part = [p for part in parts for p in pieces(part, pattern, specials)]
    assert by_part == pieces(text, pattern, specials)


@pytest.mark.parametrize("name", [p.name for p in SPACE_CUT_PATTERNS])
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=texts,
    sizes=st.lists(st.integers(1, 12), min_size=1, max_size=5),
    part_chars=st.integers(1, 50),
    with_specials=st.booleans(),
)
def test_space_rule_alone_is_safe_for_o200k_and_gpt2(name, text, sizes, part_chars, with_specials):
    """o200k and gpt2 (and their -digits variants) may be cut between a non-space and a following space."""
    pattern = NAMED_PATTERNS[name]
    specials = SPECIALS if with_specials else ()
    cutter = PartCutter(cut=True, breaks=False, special_tokens=specials, part_chars=part_chars)
    parts = run_cutter(cutter, blocks_of(text, sizes))
    assert "".join(parts) == text
    by_part = [p for part in parts for p in pieces(part, pattern, specials)]
    assert by_part == pieces(text, pattern, specials)
    assert all(p[0] == " " for p in parts[1:])  # every cut is before a space


@pytest.mark.parametrize("name", [p.name for p in BREAK_CUT_PATTERNS])
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.lists(st.one_of(fragment, st.sampled_from(["by the", " way", " ..", "!!\n", "\n/", " \n", "x \n"])),
                  max_size=40).map("".join),
    sizes=st.lists(st.integers(1, 12), min_size=1, max_size=5),
    part_chars=st.integers(1, 50),
    with_specials=st.booleans(),
)
def test_line_break_rule_alone_is_safe_for_superword(name, text, sizes, part_chars, with_specials):
    """superword (and its -digits variant) may be cut after a line break before a non-space, never at a space."""
    pattern = NAMED_PATTERNS[name]
    assert pattern.cut_rule() == {"cut": True, "breaks": True, "spaces": False}
    specials = SPECIALS if with_specials else ()
    cutter = PartCutter(**pattern.cut_rule(), special_tokens=specials, part_chars=part_chars)
    parts = run_cutter(cutter, blocks_of(text, sizes))
    assert "".join(parts) == text
    by_part = [p for part in parts for p in pieces(part, pattern, specials)]
    assert by_part == pieces(text, pattern, specials)
    assert all(part[-1] in "\r\n" or (specials and part.endswith(specials)) for part in parts[:-1])


@settings(max_examples=300, deadline=None)
@given(text=texts, data=st.data())
def test_safe_cut_is_safe_and_last(text, data):
    """Cutting at safe_cut keeps the pieces; no later place has the char rule."""
    p = safe_cut(text, SPECIALS)
    pattern = data.draw(st.sampled_from(CUT_PATTERNS))
    if p:
        assert 0 < p < len(text)
        left = pieces(text[:p], pattern, SPECIALS)
        right = pieces(text[p:], pattern, SPECIALS)
        assert left + right == pieces(text, pattern, SPECIALS)
    for q in range(p + 1, len(text)):
        before_ws, at_ws = is_ws(text[q - 1]), is_ws(text[q])
        char_safe = (text[q - 1] in "\r\n" and not at_ws) or (not before_ws and text[q] == " ")
        if char_safe:
            inside = any(
                tok in text[max(0, q - len(tok) + 1) : q + len(tok) - 1] for tok in SPECIALS
            )
            assert inside, (text, p, q)


def is_ws(char: str) -> bool:
    return regex.match(r"\s", char) is not None


@settings(max_examples=200, deadline=None)
@given(text=texts, sizes=st.lists(st.integers(1, 30), min_size=1, max_size=4))
def test_no_cut_gives_the_whole_document(text, sizes):
    cutter = PartCutter(cut=False, part_chars=1)
    parts = run_cutter(cutter, blocks_of(text, sizes))
    assert parts == ([text] if text else [])


# ------------------------------------------------------------ split_special


def test_split_special_examples():
    assert split_special("a<|e|>b", ["<|e|>"]) == ["a", "b"]
    assert split_special("<|e|><|eot|>x<|e|><|e|>", SPECIALS) == ["x"]
    assert split_special("<|e|>", ["<|e|>"]) == []
    assert split_special("", ["<|e|>"]) == []
    assert split_special("abc", []) == ["abc"]
    # looks like a token but is not one
    assert split_special("<|e |><|E|><|e|", ["<|e|>"]) == ["<|e |><|E|><|e|"]
    assert split_special("<<|e|>>", ["<|e|>"]) == ["<", ">"]


def test_split_special_longest_first():
    # The config refuses a token inside another; if one slips through, the
    # longest token at a position wins, whatever the order given.
    assert split_special("1<|ab|>2", ["<|a", "<|ab|>"]) == ["1", "2"]
    assert split_special("1<|a2", ["<|a", "<|ab|>"]) == ["1", "2"]


def test_pieces_drop_special_tokens():
    pat = resolve_pattern(None)
    assert pieces("Hello<|e|> world", pat, ["<|e|>"]) == ["Hello", " world"]
    assert pieces("Hello<|e|> world", pat) == ["Hello", "<|", "e", "|>", " world"]


def test_pieces_custom_pattern_with_groups():
    pat = resolve_pattern(r"(a)|b|[^ab]")  # groups; every character covered (the probe refuses less)
    assert pieces("ab", pat) == ["a", "b"]


# ------------------------------------------------------------ safe_cut


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 0),
        ("hello world", 5),
        ("hello world ", 11),
        ("a  b", 1),  # after the first space: white space before a space
        ("a\nb", 2),
        ("a\n b", 0),  # \n then space: neither rule
        ("a\r\nb", 3),
        ("a\r\n", 0),
        ("a\n\n", 0),
        ("x\n\u00a0y", 0),  # NBSP is white space
        ("ab\t", 0),  # a tab is not a space
        ("a\u3000b", 0),
        ("one two\nthree", 8),
    ],
)
def test_safe_cut_examples(text, expected):
    assert safe_cut(text) == expected


def test_safe_cut_never_inside_a_special_token():
    assert safe_cut("<|a b\nc|>", SPECIALS) == 0
    assert safe_cut("x <|a b\nc|>", SPECIALS) == 1
    assert safe_cut("<|a b\nc|> y", SPECIALS) == len("<|a b\nc|>")
    # the text after a token occurrence is still cut
    assert safe_cut("<|a b\nc|>z w", SPECIALS) == len("<|a b\nc|>z")


def test_safe_cut_fast_on_a_megabyte():
    flat = "a" * (1 << 20)
    spaced = "word " * (1 << 18)
    start = time.perf_counter()
    assert safe_cut(flat) == 0
    assert safe_cut(spaced) == len(spaced) - 1
    assert safe_cut(flat + " " + flat) == len(flat)
    assert time.perf_counter() - start < 1.0


# ------------------------------------------------------------ PartCutter


def test_cutter_doc_example():
    c = PartCutter(cut=True, part_chars=4)
    assert c.feed("one two ") + c.feed("three") + c.finish() == ["one", " two", " three"]


def test_token_across_blocks_is_never_cut():
    tok = "<|a b\nc|>"
    text = "x " * 5 + tok + " y" * 5
    for size in range(1, 8):
        cutter = PartCutter(cut=True, special_tokens=SPECIALS, part_chars=1)
        parts = run_cutter(cutter, blocks_of(text, [size]))
        assert "".join(parts) == text
        assert any(tok in part for part in parts), (size, parts)


def test_forced_cut_on_a_long_run_of_letters():
    cutter = PartCutter(cut=True, part_chars=10, max_piece_chars=100)
    text = "a" * 1000 + " b"
    parts = run_cutter(cutter, blocks_of(text, [7]))
    assert "".join(parts) == text
    assert cutter.forced_cuts >= 8
    assert all(len(p) <= 10 + 100 + 7 for p in parts)
    assert parts[-1] == " b" or parts[-1].endswith(" b")


def test_no_forced_cut_below_the_limit():
    cutter = PartCutter(cut=True, part_chars=10, max_piece_chars=1000)
    text = "a" * 900 + " b"
    parts = run_cutter(cutter, blocks_of(text, [50]))
    assert parts == ["a" * 900, " b"]
    assert cutter.forced_cuts == 0


def test_cutter_is_reusable_and_counts_accumulate():
    cutter = PartCutter(cut=True, part_chars=2, max_piece_chars=3)
    assert run_cutter(cutter, ["abcdefgh"]) == ["abcdefgh"]  # one block: cut at its end
    assert cutter.forced_cuts == 1
    assert run_cutter(cutter, ["x y z"]) == ["x", " y", " z"]
    assert cutter.forced_cuts == 1


def test_parts_are_bounded_when_safe_places_are_dense():
    text = "ab " * 10_000
    cutter = PartCutter(cut=True, part_chars=100)
    parts = run_cutter(cutter, blocks_of(text, [4096]))
    assert "".join(parts) == text
    assert max(len(p) for p in parts) <= 100
    assert len(parts) > 250


def test_long_run_without_safe_place_scanned_linearly():
    """Many small blocks of a text with no safe place: not quadratic."""
    cutter = PartCutter(cut=True, part_chars=1000, max_piece_chars=1 << 22)
    start = time.perf_counter()
    for _ in range(20_000):
        assert cutter.feed("a" * 100) == []
    assert time.perf_counter() - start < 2.0
    assert cutter.finish() == ["a" * 2_000_000]
