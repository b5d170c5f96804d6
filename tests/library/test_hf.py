"""The Hugging Face export gives tiktoken's ids, checked against the real engines.

Three layers, each compared with real ``tokenizers`` and real ``tiktoken``:

1. ``onig_pattern``: for every named pattern, Oniguruma's pieces (through
   ``pre_tokenizers.Split``, as the export uses it) equal ``regex.findall``
   with the pattern's Python spelling, on hypothesis text biased towards the
   places where engines differ; and every rewriting rule is shown necessary
   (the raw construct splits differently) and sufficient (the rewritten one
   splits like tiktoken's engine).
2. ``bpe_merges``: on random small vocabularies, whatever their rank order
   and including tokens BPE cannot reach, Hugging Face's ids equal tiktoken's.
3. ``tokenizer_json`` / ``write_hf``: vocabularies trained by toktoktok (with
   and without the hardcoded merges, for each named pattern) and
   cl100k_base itself encode every multilingual sample, and hypothesis text
   with special tokens, to tiktoken's ids, and decode back.

Unicode tables: Oniguruma's (in tokenizers) and the ``regex`` module's are
not the same version; the characters on which they classify differently are
computed, shown by a test, and left out of the hypothesis alphabet of layer 1,
since that is a table difference, not a spelling one.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import cache
from pathlib import Path

import pytest
import regex
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import SHARED, as_inventory, stdlib_text
from toktoktok.hf import bpe_merges, onig_pattern, read_hf_tokenizer, token_text, tokenizer_json, write_hf
from toktoktok.merge import train_phase
from toktoktok.patterns import NAMED_PATTERNS, regex_unicode_version
from toktoktok.tiktoken_file import read_tiktoken
from toktoktok.vocab import Vocab

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import Regex, Tokenizer, pre_tokenizers  # noqa: E402

SHARED_DATA = SHARED / "data"
MULTILINGUAL = SHARED_DATA / "multilingual"
CL100K = SHARED_DATA / "reference" / "cl100k_base.tiktoken.gz"
CL100K_SPECIALS = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                   "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}
PATTERN_NAMES = sorted(NAMED_PATTERNS)
BYTE_RANKS = {bytes([b]): b for b in range(256)}

requires_multilingual = pytest.mark.skipif(not MULTILINGUAL.is_dir(), reason=f"{MULTILINGUAL} is absent")


# ---------------------------------------------------------------- engines


def hf_pieces(onig: str, text: str) -> list[str]:
    """Oniguruma's matches, as the export's Split step finds them."""
    split = pre_tokenizers.Split(Regex(onig), behavior="removed", invert=True)
    return [piece for piece, _ in split.pre_tokenize_str(text)]


def tiktoken_pieces(pattern: str, text: str) -> list[str]:
    """tiktoken's pieces of a short text: every substring is a token, so each
    piece is found whole (tiktoken looks a piece up before merging)."""
    subs = {text[a:b].encode() for a in range(len(text)) for b in range(a + 1, len(text) + 1)}
    ranks = dict(BYTE_RANKS)
    for sub in sorted(subs - set(ranks)):
        ranks[sub] = len(ranks)
    enc = tiktoken.Encoding("pieces", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    return [enc.decode_single_token_bytes(t).decode() for t in enc.encode(text)]


def tiktoken_encoding(ranks: dict[bytes, int], specials: dict[str, int], pattern: str) -> tiktoken.Encoding:
    return tiktoken.Encoding("test", pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials)


def hf_tokenizer(ranks: dict[bytes, int], specials: dict[str, int], pattern: str) -> Tokenizer:
    return Tokenizer.from_str(json.dumps(tokenizer_json(ranks, specials, pattern), ensure_ascii=False))


# ---------------------------------------------------------------- Unicode tables

PROPERTIES = (r"\p{L}", r"\p{Lu}", r"\p{Ll}", r"\p{Lt}", r"\p{Lm}", r"\p{Lo}", r"\p{M}", r"\p{N}", r"\s")


@cache
def _universe() -> str:
    """Every character assigned (not private use) in the `regex` module's tables or Oniguruma's."""
    every = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)
    known = set(regex.sub(r"[\p{Cn}\p{Co}]+", "", every))
    known |= set("".join(hf_pieces(r"[^\p{Cn}\p{Co}]+", every)))
    return "".join(sorted(known))


@cache
def _classes(engine: str) -> dict[str, frozenset[str]]:
    """For each property the patterns use, the characters of the universe the engine puts in it."""
    text = _universe()
    out = {}
    for prop in PROPERTIES:
        if engine == "regex":
            found = regex.findall(prop + "+", text)
        elif engine == "onig":
            found = hf_pieces(prop + "+", text)
        else:  # tiktoken drops what the pattern does not cover
            enc = tiktoken_encoding(BYTE_RANKS, {}, prop + "+")
            found = [enc.decode(enc.encode(text))]
        out[prop] = frozenset("".join(found))
    return out


@cache
def differing(a: str, b: str) -> frozenset[str]:
    """Characters two engines classify differently for some property."""
    ca, cb = _classes(a), _classes(b)
    return frozenset().union(*(ca[p] ^ cb[p] for p in PROPERTIES))


def test_unicode_tables_differ_only_between_regex_and_the_others():
    """Oniguruma and `regex` disagree on characters whose classification changed
    in recent Unicode versions (new letters and numbers, ʕ moving from Ll to Lo
    in 17.0); tiktoken's engine sides with Oniguruma on every one of them, so
    it is `regex`'s newer tables, not a pattern, that differ."""
    diff = differing("regex", "onig")
    if not diff:
        pytest.skip(f"the tables agree (regex has Unicode {regex_unicode_version()})")
    assert differing("onig", "tiktoken") == frozenset()
    ch = min(diff)
    onig_view = [p for p in PROPERTIES if ch in _classes("onig")[p]]
    regex_view = [p for p in PROPERTIES if ch in _classes("regex")[p]]
    assert onig_view != regex_view
    assert onig_view == [p for p in PROPERTIES if ch in _classes("tiktoken")[p]]
    if "\u0295" in diff:  # ʕ: Ll before Unicode 17, Lo since
        assert (r"\p{Ll}" in _classes("onig")) and "\u0295" in _classes("onig")[r"\p{Ll}"]
        assert "\u0295" in _classes("regex")[r"\p{Lo}"]
        o200k = NAMED_PATTERNS["o200k"]
        assert hf_pieces(onig_pattern(o200k.tiktoken), "\u0295Ab") != regex.findall(o200k.python, "\u0295Ab")


# ---------------------------------------------------------------- text strategies

SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", "\n\n ", "\r\n", "\r", " \n", "\r\n\r\n", "\u00a0", "\u2028",
          "\u2029", "\u3000", "\u2009", "\u200a", "\u202f", "\u205f", "\u1680", "\x0b", "\x0c", "\x85",
          "\u200b", "\ufeff", "\x1c"]
DIGITS = ["0123456789", "٠١٢٣٤٥٦٧٨٩", "۰۱۲۳۴۵۶۷۸۹", "०१२३४५६७८९", "০১২৩৪৫৬৭৮৯", "๐๑๒๓๔๕๖๗๘๙",
          "０１２３４５６７８９", "𝟎𝟏𝟐𝟑𝟒𝟓𝟔𝟕𝟖𝟗", "߀߁߂߃", "᠐᠑᠒", "ⅠⅡⅢⅫ", "½¾²³¹", "①②③", "〇一"]
SUFFIXES = ["s", "t", "re", "ve", "m", "ll", "d", "ſ", "ß", "ﬆ", "ﬅ", "\u212a", "ı", "İ", "ǅ", "x", ""]
APOSTROPHES = ["'", "\u2019", "`", "ʼ"]
OTHER = ["e\u0301", "क्षि", "ñ", "ﬁ", "한국어", "日本語", "ไทย", "עִבְרִית", "😀", "👍🏽", "👨\u200d👩\u200d👧",
         "🇫🇷", "...", "/", "//", "</", "-->", "\\", "$", "A", "Ab", "aB", "ABC", "Ǆ", "ǆ", "ẞ", "\u0295",
         "<|", "|>", "'s", "n't", "I'M", "you'LL", "foo.bar()", "x=1;", "\x00", "\x7f", "é", "Ω"]


def _recased(word: str) -> st.SearchStrategy[str]:
    return st.lists(st.booleans(), min_size=len(word), max_size=len(word)).map(
        lambda ups: "".join(c.upper() if up else c for c, up in zip(word, ups)))


def text_strategy(excluded: frozenset[str]) -> st.SearchStrategy[str]:
    """Plain hypothesis text, and text made of the fragments where engines are likely to differ."""
    chars = st.characters(codec="utf-8", exclude_characters=excluded)
    digit_runs = st.sampled_from(DIGITS).flatmap(
        lambda ds: st.text(alphabet=st.sampled_from(list(ds)), min_size=1, max_size=14))
    contraction = st.tuples(st.sampled_from(APOSTROPHES), st.sampled_from(SUFFIXES).flatmap(_recased)).map("".join)
    fragment = st.one_of(
        st.sampled_from(SPACES),
        st.lists(st.sampled_from(SPACES), min_size=1, max_size=6).map("".join),
        digit_runs,
        contraction,
        st.sampled_from(OTHER),
        st.text(alphabet=chars, min_size=1, max_size=4),
    )
    mixed = st.lists(fragment, max_size=14).map("".join)
    return st.one_of(st.text(alphabet=chars), mixed).filter(lambda t: not (set(t) & excluded))


# ---------------------------------------------------------------- 1. the pattern


@pytest.mark.parametrize("name", PATTERN_NAMES)
def test_python_and_tiktoken_spellings_translate_alike(name):
    pattern = NAMED_PATTERNS[name]
    assert onig_pattern(pattern.python) == onig_pattern(pattern.tiktoken)


@pytest.mark.parametrize("name", PATTERN_NAMES)
def test_named_pattern_splits_like_regex(name):
    pattern = NAMED_PATTERNS[name]
    onig = onig_pattern(pattern.tiktoken)

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(text_strategy(differing("regex", "onig")))
    def check(text):
        assert hf_pieces(onig, text) == regex.findall(pattern.python, text)

    check()


@pytest.mark.parametrize("name", PATTERN_NAMES)
def test_named_pattern_on_every_character(name):
    """Each character of the universe in a few contexts (after an apostrophe,
    a space, a letter, a digit, doubled), all in one text."""
    pattern = NAMED_PATTERNS[name]
    excluded = differing("regex", "onig")
    chars = [c for c in _universe() if c not in excluded]
    text = "".join(f"'{c} {c}{c}a{c}1{c}\n" for c in chars)
    assert hf_pieces(onig_pattern(pattern.tiktoken), text) == regex.findall(pattern.python, text)


# Each rule: (pattern as tiktoken takes it, text). The raw pattern splits the
# text differently in Oniguruma (or does not compile there); the rewritten
# one splits it like tiktoken's engine.
RULES = [
    (r"\s+$|\S+", "a  \nb  "),                  # $ is end of line in Oniguruma
    (r"\S+$|\S", "ab\ncd"),
    (r"^\S+|\s+", "a\nb"),                      # ^ is start of line in Oniguruma
    (r"\p{N}{1,3}+", "1234567"),                # {n,m}+ is not possessive in Oniguruma
    (r"\p{N}{1,3}+|\s", "12 345678 9"),
    (r"a{2}+", "aaaaa"),
    (r"(?:ab){1,2}+b?", "ababab"),
    (r"\xe9+|\S", "éé a"),                      # \xhh is a byte in Oniguruma
    (r"\U0001F600", "😀x"),                   # no \U in Oniguruma
    (r"\pL+|\S", "ab1"),                        # \pL needs braces in Oniguruma
    (r"(?s)a.b", "a\nb"),                       # Python/Rust s is Oniguruma's m
    (r"(?m)a.$|^b", "a\n\nb"),                  # Python/Rust m is Oniguruma's ^ $, Oniguruma's m is s
    (r"a(?i)b|c", "c aB"),                      # Oniguruma swallows the | into (?i)
    (r"(?i:ss)", "ß ss SS"),                    # multi-character case folding
    (r"(?i:st)", "ﬆ st"),
    (r"(?i:ß)", "ss ß ẞ"),
    (r"(?i:ſt)", "ﬅ ſt ST"),
    (r"(?i)'s(?:s)", "'ß 'ss"),
    (r"(?P<x>a)(?P=x)|\S", "aa ab"),            # Python's named groups
]
# Constructs Oniguruma already reads like tiktoken's engine: left as they are.
SAME = [
    (r"a++a|\S", "aaa"), (r"a*+a|\S", "aaa"), (r"a?+a|\S", "a"), (r"\s+(?!\S)|\s", "a   b"),
    (r"[^\s\p{L}\p{N}]++|\s", "!?.. ,;"), (r"\d+|\w+|\s", "12٣४ éa_٣ b"), (r".", "\r\n\x85\u2028"),
    (r"\bx|\S", "éx x"), (r"[[:alpha:]]+", "ab1"), (r"[^]a]|\s", "]b a"), (r"a{2,3}?|\S", "aaaaa"),
    (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)", "'ß 'ﬆ 'S 'LL 'ſ"),
    (r"(?i:[sdmt]|ll)", "S ſ LL"),
]


@pytest.mark.parametrize(("pattern", "text"), RULES)
def test_rule_is_needed_and_enough(pattern, text):
    expected = tiktoken_pieces(pattern, text)
    try:
        raw = hf_pieces(pattern, text)
    except Exception:  # does not compile in Oniguruma
        raw = None
    assert raw != expected
    assert hf_pieces(onig_pattern(pattern), text) == expected


@pytest.mark.parametrize(("pattern", "text"), SAME)
def test_constructs_read_alike(pattern, text):
    expected = tiktoken_pieces(pattern, text)
    assert hf_pieces(pattern, text) == expected
    assert hf_pieces(onig_pattern(pattern), text) == expected


@pytest.mark.parametrize(("pattern", "text"), [
    (r"\S\Z|\s", "a\n"),                        # regex's \Z is end of text; Oniguruma's is not
    (r"\N{BULLET}", "•x"),
])
def test_python_only_constructs(pattern, text):
    expected = regex.findall(pattern, text)
    assert hf_pieces(pattern, text) != expected
    assert hf_pieces(onig_pattern(pattern), text) == expected


@pytest.mark.parametrize("pattern", [r"(?i)[ß]", r"(?i)[\xde-\xe0]", r"(?i)\p{Lu}", r"\h", r"\K", r"(?x) a",
                                     r"(a", r"a)", r"*a", r"[a", "\\"])
def test_untranslatable_patterns_raise(pattern):
    with pytest.raises(ValueError, match="Oniguruma"):
        onig_pattern(pattern)


def test_case_insensitive_class_with_multi_folding_is_really_different():
    """Why ``(?i)[ß]`` raises: Oniguruma matches "ss" with it."""
    assert hf_pieces(r"(?i)[ß]", "ss") == ["ss"]
    assert tiktoken_pieces(r"(?i)[ß]", "ss") == []


# ---------------------------------------------------------------- 2. the merges

SMALL_PATTERN = r"[abc]+|\s+|[^abc\s]+"


@st.composite
def small_vocab(draw):
    """The 256 bytes plus random tokens over "abc", ranks in random order."""
    tokens = draw(st.lists(st.text(alphabet="abc", min_size=2, max_size=5), min_size=1, max_size=40, unique=True))
    order = draw(st.permutations(range(len(tokens))))
    ranks = dict(BYTE_RANKS)
    for token, k in zip(tokens, order):
        ranks[token.encode()] = 256 + k
    return ranks


@settings(max_examples=300, deadline=None)
@given(small_vocab(), st.lists(st.text(alphabet="abc ", max_size=30), min_size=1, max_size=5))
def test_random_vocabularies_encode_alike(ranks, texts):
    hf = hf_tokenizer(ranks, {}, SMALL_PATTERN)
    enc = tiktoken_encoding(ranks, {}, SMALL_PATTERN)
    for text in texts:
        assert hf.encode(text).ids == enc.encode(text)


def test_unreachable_token_needs_no_merge():
    """b"abc" with neither b"ab" nor b"bc": BPE never builds it, tiktoken emits it
    only for a whole piece "abc", and so does Hugging Face with ignore_merges."""
    ranks = BYTE_RANKS | {b"abc": 256, b"ca": 257}
    assert bpe_merges(ranks) == [(b"c", b"a")]
    hf, enc = hf_tokenizer(ranks, {}, SMALL_PATTERN), tiktoken_encoding(ranks, {}, SMALL_PATTERN)
    for text in ["abc", "abcabc", "cabc", "abc abca"]:
        assert hf.encode(text).ids == enc.encode(text)
    assert enc.encode("abc") == [256] and enc.encode("abcabc") != [256, 256]


def test_merge_whose_part_ranks_higher():
    """b"abc" (256) is built from b"a" + b"bc" although b"bc" has the higher rank 257."""
    ranks = BYTE_RANKS | {b"abc": 256, b"bc": 257}
    assert bpe_merges(ranks) == [(b"a", b"bc"), (b"b", b"c")]
    hf, enc = hf_tokenizer(ranks, {}, SMALL_PATTERN), tiktoken_encoding(ranks, {}, SMALL_PATTERN)
    for text in ["abc", "abcc", "aabc", "bcabc"]:
        assert hf.encode(text).ids == enc.encode(text)


def test_merges_follow_tiktoken_not_the_build_order():
    """Three spaces are hardcoded as " " + "  ", but tiktoken joins the leftmost
    "  " first, so the merge Hugging Face needs is "  " + " "."""
    ranks = Vocab.initial(hardcoded=True).ranks()
    merges = dict(((left + right), (left, right)) for left, right in bpe_merges(ranks))
    assert merges[b"   "] == (b"  ", b" ")
    assert merges[b"123"] == (b"12", b"3")


def test_non_exportable_vocabularies_raise():
    with pytest.raises(ValueError):
        tokenizer_json({bytes([b]): b for b in range(255)}, {}, r"\S+")
    with pytest.raises(ValueError, match="already the rank"):
        tokenizer_json(BYTE_RANKS, {"<|x|>": 255}, r"\S+")
    with pytest.raises(ValueError, match="ByteLevel"):
        tokenizer_json(BYTE_RANKS | {b"<|x|>": 256}, {"<|x|>": 257}, r"\S+")


# ---------------------------------------------------------------- 3. trained vocabularies

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|résumé 日本|>"]


def _corpus() -> list[str]:
    if MULTILINGUAL.is_dir():
        docs = [p.read_text(encoding="utf-8") for p in sorted(MULTILINGUAL.iterdir())]
        shakespeare = SHARED_DATA / "tinyshakespeare.txt"
        if shakespeare.is_file():
            docs += shakespeare.read_text(encoding="utf-8")[:200_000].split("\n\n")
        return docs
    return stdlib_text(400_000).split("\n\n")


@cache
def trained(name: str, hardcoded: bool) -> tuple[dict[bytes, int], dict[str, int]]:
    """A vocabulary trained by toktoktok on the corpus, split by the named pattern."""
    pattern = NAMED_PATTERNS[name]
    pieces = Counter(p.encode() for doc in _corpus() for p in regex.findall(pattern.python, doc))
    result = train_phase(Vocab.initial(hardcoded=hardcoded), *as_inventory(pieces), merges=1500)
    ranks = result.vocab.ranks()
    first = len(result.vocab)
    return ranks, {token: first + k for k, token in enumerate(SPECIALS)}


@cache
def trained_pair(name: str, hardcoded: bool) -> tuple[Tokenizer, tiktoken.Encoding]:
    ranks, specials = trained(name, hardcoded)
    pattern = NAMED_PATTERNS[name].tiktoken
    return hf_tokenizer(ranks, specials, pattern), tiktoken_encoding(ranks, specials, pattern)


def _first_difference(a: list[int], b: list[int]) -> str:
    k = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    return f"first difference at token {k}: hf {a[k:k + 5]} tiktoken {b[k:k + 5]}"


COMBOS = [(name, hardcoded) for name in PATTERN_NAMES for hardcoded in (True, False)]


@requires_multilingual
@pytest.mark.parametrize(("name", "hardcoded"), COMBOS)
def test_trained_vocabulary_on_multilingual_files(name, hardcoded):
    hf, enc = trained_pair(name, hardcoded)
    assert len(bpe_merges(trained(name, hardcoded)[0])) > 1000
    for path in sorted(MULTILINGUAL.iterdir()):
        text = path.read_text(encoding="utf-8")
        ids = enc.encode(text, allowed_special="all")
        got = hf.encode(text).ids
        assert got == ids, f"{path.name}: {_first_difference(got, ids)}"
        assert hf.decode(got, skip_special_tokens=False) == text


@pytest.mark.parametrize(("name", "hardcoded"), COMBOS)
def test_trained_vocabulary_on_hypothesis_text(name, hardcoded):
    hf, enc = trained_pair(name, hardcoded)
    excluded = differing("onig", "tiktoken")
    with_specials = st.lists(st.one_of(text_strategy(excluded), st.sampled_from(SPECIALS)), max_size=6).map("".join)

    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(with_specials)
    def check(text):
        ids = enc.encode(text, allowed_special="all")
        got = hf.encode(text).ids
        assert got == ids
        assert hf.decode(got, skip_special_tokens=False) == text

    check()


def test_ranks_with_gaps_and_a_special_inside_one():
    """A warm start's gaps: ids are the ranks, and a special token may sit in a gap."""
    ranks, _ = trained("default", True)
    shifted = {token: rank if rank < 600 else rank + 7 for token, rank in ranks.items()}
    specials = {"<|endoftext|>": 603, "<|im_end|>": max(shifted.values()) + 3}
    pattern = NAMED_PATTERNS["default"].tiktoken
    hf, enc = hf_tokenizer(shifted, specials, pattern), tiktoken_encoding(shifted, specials, pattern)
    for text in _corpus()[:25] + ["hello<|endoftext|> world<|im_end|>"]:
        assert hf.encode(text).ids == enc.encode(text, allowed_special="all")
    assert hf.token_to_id("<|endoftext|>") == 603


def test_offsets_are_untrimmed():
    ranks, specials = trained("default", True)
    hf = hf_tokenizer(ranks, specials, NAMED_PATTERNS["default"].tiktoken)
    text = "Hello  world,\n  the 1234 things<|endoftext|>!"
    enc = hf.encode(text)
    for token, (start, end) in zip(enc.tokens, enc.offsets):
        assert token_text(text[start:end].encode()) == token or token in SPECIALS


def test_uncovered_text_is_dropped_like_tiktoken():
    """A pattern that does not cover all text: tiktoken drops the rest, so does the export."""
    ranks, specials = trained("default", True)
    hf = hf_tokenizer(ranks, specials, r"\p{L}+")
    enc = tiktoken_encoding(ranks, specials, r"\p{L}+")
    text = "Hello, world! 123 fin<|endoftext|>"
    assert hf.encode(text).ids == enc.encode(text, allowed_special="all")


# ---------------------------------------------------------------- write_hf


def test_write_hf_files(tmp_path):
    ranks, specials = trained("cl100k", True)
    pattern = NAMED_PATTERNS["cl100k"].tiktoken
    write_hf(tmp_path / "a.hf", ranks, specials, pattern)
    write_hf(tmp_path / "b.hf", dict(reversed(ranks.items())), dict(reversed(specials.items())), pattern)
    names = ["special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"]
    assert sorted(p.name for p in (tmp_path / "a.hf").iterdir()) == names
    for name in names:  # deterministic, whatever the order of the input dicts
        assert (tmp_path / "a.hf" / name).read_bytes() == (tmp_path / "b.hf" / name).read_bytes()
    assert "日本" in (tmp_path / "a.hf" / "tokenizer.json").read_text(encoding="utf-8")  # ensure_ascii=False
    assert read_hf_tokenizer(tmp_path / "a.hf" / "tokenizer.json") == (ranks, specials)
    config = json.loads((tmp_path / "a.hf" / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert config["clean_up_tokenization_spaces"] is False
    assert config["eos_token"] == config["bos_token"] == "<|endoftext|>"
    assert {int(k): v["content"] for k, v in config["added_tokens_decoder"].items()} == {
        i: t for t, i in specials.items()}
    special_map = json.loads((tmp_path / "a.hf" / "special_tokens_map.json").read_text(encoding="utf-8"))
    assert special_map["additional_special_tokens"] == SPECIALS[1:]
    hf = Tokenizer.from_file(str(tmp_path / "a.hf" / "tokenizer.json"))
    enc = tiktoken_encoding(ranks, specials, pattern)
    text = "<|im_start|>user\nIt's 12345 o'clock<|im_end|>\n<|endoftext|>"
    assert hf.encode(text).ids == enc.encode(text, allowed_special="all")


def test_transformers_loads_the_folder(tmp_path):
    transformers = pytest.importorskip("transformers")
    ranks, specials = trained("default", True)
    pattern = NAMED_PATTERNS["default"].tiktoken
    write_hf(tmp_path, ranks, specials, pattern)
    tok = transformers.PreTrainedTokenizerFast.from_pretrained(str(tmp_path))
    enc = tiktoken_encoding(ranks, specials, pattern)
    for text in _corpus()[:10] + ["a<|endoftext|>b<|im_start|>"]:
        ids = enc.encode(text, allowed_special="all")
        assert tok.encode(text) == ids
        assert tok.decode(ids) == text
    assert tok.eos_token_id == specials["<|endoftext|>"]


# ---------------------------------------------------------------- cl100k_base


@cache
def cl100k_pair(folder: Path) -> tuple[Tokenizer, tiktoken.Encoding]:
    ranks = read_tiktoken(CL100K)
    pattern = NAMED_PATTERNS["cl100k"].tiktoken
    write_hf(folder, ranks, CL100K_SPECIALS, pattern)
    hf = Tokenizer.from_file(str(folder / "tokenizer.json"))
    return hf, tiktoken_encoding(ranks, CL100K_SPECIALS, pattern)


@pytest.fixture(scope="module")
def cl100k(tmp_path_factory):
    if not CL100K.is_file():
        pytest.skip(f"{CL100K} is absent")
    return cl100k_pair(tmp_path_factory.mktemp("cl100k") / "cl100k_base.hf")


@requires_multilingual
def test_cl100k_base_on_multilingual_files(cl100k):
    hf, enc = cl100k
    for token, tid in CL100K_SPECIALS.items():
        assert hf.token_to_id(token) == tid
    for path in sorted(MULTILINGUAL.iterdir()):
        text = path.read_text(encoding="utf-8")
        for sample in (text, text.replace("\n\n", "\n\n<|endoftext|>", 2)):
            ids = enc.encode(sample, allowed_special="all")
            got = hf.encode(sample).ids
            assert got == ids, f"{path.name}: {_first_difference(got, ids)}"
            assert hf.decode(got, skip_special_tokens=False) == sample


def test_cl100k_base_on_hypothesis_text(cl100k):
    hf, enc = cl100k
    specials = st.sampled_from(sorted(CL100K_SPECIALS))
    with_specials = st.lists(st.one_of(text_strategy(differing("onig", "tiktoken")), specials), max_size=6)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(with_specials.map("".join))
    def check(text):
        assert hf.encode(text).ids == enc.encode(text, allowed_special="all")

    check()
