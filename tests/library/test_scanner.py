"""The numba scanner finds exactly the pieces ``regex.findall`` finds (docs/pretokenization.md).

The oracle is the ``regex`` module running each pattern's ``python`` spelling.
Texts: hypothesis (arbitrary Unicode, and fragments biased to the delicate
places), every code point in several contexts, the multilingual samples and
the first 5 MB of the shared corpora (skipped when ``../shared`` is absent).
``span_table.count_pieces`` equals a ``Counter`` of the pieces of each segment.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import SHARED
from toktoktok import scanner, unicode_classes
from toktoktok.patterns import NAMED_PATTERNS
from toktoktok.scanner import (
    DEFAULT,
    GPT2,
    PATTERN_IDS,
    scan,
    scan_cl100k,
    scan_default,
    split_text,
)
from toktoktok.span_table import count_pieces, count_pieces_threads, merge_counts

SHARED = SHARED
WHICH = dict(PATTERN_IDS)  # every named pattern, its -digits variants included
ORACLE = {WHICH[name]: regex.compile(NAMED_PATTERNS[name].python) for name in WHICH}
EACH = pytest.mark.parametrize("which", list(WHICH.values()), ids=list(WHICH))

# -------------------------------------------------------------- helpers


def char_ends(text: str, which: int) -> np.ndarray:
    """The scanner's piece ends as character offsets (byte ends mapped back)."""
    raw = text.encode()
    buf = np.frombuffer(raw, dtype=np.uint8)
    ends = np.empty(len(buf), dtype=np.int64)
    n = scan(buf, 0, len(buf), ends, which)
    lead = np.concatenate([[0], np.cumsum((buf & 0xC0) != 0x80)])
    return lead[ends[:n]]


def oracle_ends(text: str, which: int) -> np.ndarray:
    pieces = ORACLE[which].findall(text)
    return np.cumsum(np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces)))


def assert_same_pieces(text: str, which: int) -> None:
    """Scanner and regex agree; on failure, show the first piece that differs."""
    got, want = char_ends(text, which), oracle_ends(text, which)
    if np.array_equal(got, want):
        return
    m = min(len(got), len(want))
    k = int(np.argmax(got[:m] != want[:m])) if (got[:m] != want[:m]).any() else m
    start = int(want[k - 1]) if k else 0
    pytest.fail(
        f"piece {k} at char {start}: scanner ends {got[k:k + 3].tolist()}, regex ends "
        f"{want[k:k + 3].tolist()}; context {text[max(0, start - 20) : start + 40]!r}"
    )


# -------------------------------------------------------------- examples


@EACH
@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello world",
        "it's 2024!\n\n  x",
        "a  b\t\tc \n d\r\n\r\n",
        "\n\n ",
        "  \n \n  ",
        " ?!\n\nx",
        "'s'S'ſ're'RE'rE've'll'LL'lL'd'M'T'r'v'l'x'",
        "x'",
        "\u3000\u3000ab\u00a0c\x85d\u2028e",
        "\x1c\x1d a \x1e\x1f",
        "12345678 ٣٤٥٦ ४५६७ ０１２３ ²³ ½ Ⅻ 𝟎𝟏𝟐𝟑",
        "e\u0301te\u0301 \u0301a",
        "😀👍🏽👨‍👩‍👧 x",
        "ǅemal ʰa 𐐀𐐁 𝐀",
    ],
)
def test_examples(text, which):
    assert split_text(text, which) == ORACLE[which].findall(text)


def test_named_entry_points():
    buf = np.frombuffer("a \n ".encode(), dtype=np.uint8)
    ends = np.empty(len(buf), dtype=np.int64)
    assert ends[: scan_default(buf, 0, len(buf), ends)].tolist() == [1, 3, 4]
    assert ends[: scan_cl100k(buf, 0, len(buf), ends)].tolist() == [1, 4]
    with pytest.raises(ValueError):
        scan_default(buf, 0, len(buf), np.empty(1, dtype=np.int64))
    for which in (-1, 16, scanner.DIGITS | 16):
        with pytest.raises(ValueError, match="id of a named pattern"):
            scan(buf, 0, len(buf), ends, which)


def test_every_named_pattern_has_the_scanner():
    """The table lists each pattern once, with a rule of its own: the -digits ones differ by DIGITS."""
    assert set(WHICH) == set(NAMED_PATTERNS) and len(set(WHICH.values())) == len(WHICH)
    for name in ("default", "cl100k", "o200k", "gpt2", "superword"):
        assert WHICH[name + "-digits"] == WHICH[name] | scanner.DIGITS
    assert split_text(" 12 ٣٤x", GPT2 | scanner.DIGITS) == [" 1", "2", " ٣", "٤", "x"]
    assert split_text(" 12 ٣٤x", GPT2) == [" 12", " ٣٤", "x"]


@EACH
def test_scan_of_a_slice_and_resuming(which):
    """A sub-range is scanned as its own text; a full out_ends array resumes."""
    text = "xx It's 12345 \n\n  ok  \t"
    raw = text.encode()
    buf = np.frombuffer(b"\xe4\xb8\xad" + raw + b"zz", dtype=np.uint8)
    ends = np.empty(len(buf), dtype=np.int64)
    n = scan(buf, 3, 3 + len(raw), ends, which)
    assert [raw[a - 3 : b - 3].decode() for a, b in zip([3, *ends[: n - 1]], ends[:n])] == ORACLE[
        which
    ].findall(text)
    t = unicode_classes.unicode_tables()
    for cap in (1, 2, 3):
        small, got, i = np.empty(cap, dtype=np.int64), [], 3
        while i < 3 + len(raw):
            k = scanner.scan_kernel(buf, i, 3 + len(raw), small, t[0], t[1], which)
            got += small[:k].tolist()
            i = got[-1]
        assert got == ends[:n].tolist()


# Every string of up to 4 characters over one representative of each kind the
# patterns tell apart: the alternation is decided within a few characters, so
# this covers every way two neighbouring kinds can meet. (o200k's letter
# classes: Lu "R", Ll "a", Lt "ǅ", Lm "ʰ", Lo "中", M U+0301; its "/" after
# line breaks.)
KINDS = [" ", "\t", "\n", "\r", "\xa0", "\u3000", "a", "é", "1", "٣", ".", "'", "s", "R", "e", "l", "ſ", "\u0301",
         "ǅ", "ʰ", "中", "/"]


@EACH
def test_every_short_string(which):
    import itertools

    for length in range(1, 5):
        for chars in itertools.product(KINDS, repeat=length):
            text = "".join(chars)
            assert split_text(text, which) == ORACLE[which].findall(text), repr(text)


# Runs of ASCII letters are taken 8 bytes at a time (scanner._letters): every
# run of 0-19 letters at each alignment, ended by each kind of neighbour (the
# bytes just outside A-Z and a-z among them), and cut by the end of a slice
# whose bytes go on with letters.
NEIGHBOURS = ["", " ", "1", "@", "[", "`", "{", "'", "_", "\x7f", "é", "中", "\u0301", "·", "\n\n x"]


@EACH
def test_letter_runs_at_every_alignment(which):
    for lead in ["", "+", " ", "\t", "x+", "\u00b7"]:
        for pad in range(8):
            for n in range(20):
                word = "".join("AZaz"[k % 4] for k in range(n))
                for after in NEIGHBOURS:
                    assert_same_pieces("-" * pad + lead + word + after + " y", which)
    raw = ("azyb" * 6 + "é").encode()
    buf = np.frombuffer(raw, dtype=np.uint8)
    ends = np.empty(len(buf), dtype=np.int64)
    for start in range(9):
        for end in range(start, len(raw) - 2):
            n = scan(buf, start, end, ends, which)
            assert ends[:n].tolist() == ([end] if end > start else []), (start, end)


@pytest.mark.parametrize("which", [WHICH["superword"], WHICH["superword-digits"]], ids=["superword", "digits"])
def test_superword_runs_at_their_limit(which):
    """The text between isolated pieces is one piece of at most SUPERWORD_RUN characters:
    runs just under, at and over it, of one- to four-byte characters, ended by
    each kind of neighbour, and a run cut by the limit just before a line break."""
    from toktoktok.patterns import SUPERWORD_RUN

    for unit in ("ab c", "é, ", "中文 ", "𐐀x "):
        for size in (SUPERWORD_RUN - 2, SUPERWORD_RUN, SUPERWORD_RUN + 1, 2 * SUPERWORD_RUN + 3):
            run = (unit * size)[:size]
            for after in ("", "\n", "\r\nx", "  ", " ..", "7", "!!", " x"):
                assert_same_pieces(run + after, which)
    pieces = split_text("a" * (SUPERWORD_RUN + 5), which)
    assert [len(p) for p in pieces] == [SUPERWORD_RUN, 5]


# -------------------------------------------------------------- hypothesis

SPACES = [
    " ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\xa0",
    "\u1680", "\u2000", "\u2007", "\u200a", "\u200b", "\u2028", "\u2029", "\u202f", "\u205f",
    "\u3000", "\ufeff", "\r\n", "\n\n", "  ", "\n ", " \n",
]
DIGITS = ["0", "7", "٣", "۴", "५", "৬", "๗", "０", "²", "½", "Ⅻ", "〇", "𝟘", "𑁧", "1234567"]
LETTERS = ["a", "Z", "é", "e\u0301", "ß", "ǅ", "ʰ", "中", "한", "ا", "ж", "𐐀", "𝐀", "K", "ſ", "İ"]
MARKS = ["\u0301", "\u0308", "\u093f", "\u20dd", "\U0001f3fd", "\u200d", "\ufe0f"]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "❤️"]
PUNCT = ["!", ".", "...", "?!", "'", "’", "\"", "-", "/", "#", "<|", "\\", "…", "\x00", "\x7f"]
CONTRACTIONS = [
    "'" + tail
    for tail in ["s", "S", "ſ", "t", "T", "re", "RE", "rE", "Re", "ve", "VE", "vE", "m", "M",
                 "ll", "LL", "lL", "Ll", "d", "D", "r", "v", "l", "e", "ſſ", "K", "k", "x", ""]
]
FRAGMENTS = SPACES + DIGITS + LETTERS + MARKS + EMOJI + PUNCT + CONTRACTIONS + [
    "!!\n", "..\r\n", " ?\n\n", "\n\n ", " \n\n", "\r\r\n ", "'s\n", "x'", "a1", "1a",
    " by the way", " .!", "a  b", ", ", " \t", "-\n/",
]

fragment = st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=3), st.characters(codec="utf-8"))
biased_text = st.lists(fragment, max_size=30).map("".join)
space_heavy = st.lists(st.sampled_from(SPACES + ["a", "1", ".", "'", "'s", "é"]), max_size=40).map("".join)
# Whitespace runs at the very end of the text: where \s++$ and \s+(?!\S) differ.
trailing_space = st.tuples(biased_text, st.lists(st.sampled_from(SPACES), min_size=1, max_size=6).map("".join)).map(
    "".join
)

FAST = settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@EACH
@FAST
@given(st.text())
def test_arbitrary_unicode(which, text):
    assert split_text(text, which) == ORACLE[which].findall(text)


@EACH
@FAST
@given(biased_text)
def test_biased_fragments(which, text):
    assert split_text(text, which) == ORACLE[which].findall(text)


@EACH
@FAST
@given(st.one_of(space_heavy, trailing_space))
def test_whitespace_runs(which, text):
    assert split_text(text, which) == ORACLE[which].findall(text)


# -------------------------------------------------------------- every code point

CONTEXTS = ["a{c}b", " {c}{c} ", "'{c}", "1{c}2", "\n{c}\n", "'{c}e", "'{c}l", "'r{c}", "'l{c}", "A{c}B.", "!{c}a"]


@pytest.fixture(scope="module")
def every_char() -> list[str]:
    return [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]


@EACH
@pytest.mark.parametrize("context", CONTEXTS)
def test_every_code_point_in_context(every_char, context, which):
    """Each code point c in the context, all contexts of one kind concatenated."""
    text = "".join(context.replace("{c}", c) for c in every_char)
    assert_same_pieces(text, which)


@EACH
def test_every_space_at_end_of_text(which):
    for c in [chr(x) for x in range(0x3001) if regex.match(r"\s", chr(x))] + ["\x1c", "a", "."]:
        for text in (c, "x" + c, "x " + c, "x" + c + c, "x\n" + c, "x" + c + "\n", c + "\n\n "):
            assert split_text(text, which) == ORACLE[which].findall(text), repr(text)


# -------------------------------------------------------------- real text


def shared_texts() -> list[tuple[str, str]]:
    """(name, text): every multilingual sample and 5 MB of each corpus."""
    out = []
    for path in sorted((SHARED / "data" / "multilingual").glob("*")):
        if path.is_file():
            out.append((path.name, path.read_text(encoding="utf-8", errors="replace")))
    for name in ("english", "code", "german"):
        path = SHARED / "corpora" / f"{name}.txt.zst"
        if path.is_file():
            import zstandard

            with path.open("rb") as f:
                raw = zstandard.ZstdDecompressor().stream_reader(f).read(5 << 20)
            out.append((path.name, raw.decode("utf-8", errors="ignore")))
    return out


@pytest.fixture(scope="module")
def real_texts() -> list[tuple[str, str]]:
    texts = shared_texts()
    if not texts:
        pytest.skip(f"no shared data at {SHARED}")
    return texts


@EACH
def test_shared_data(real_texts, which):
    for name, text in real_texts:
        assert_same_pieces(text, which)


# -------------------------------------------------------------- counting


def as_counter(result) -> Counter:
    piece_buf, piece_off, counts = result
    assert len(piece_off) == len(counts) + 1 and piece_off[0] == 0 and piece_off[-1] == len(piece_buf)
    out = Counter()
    for p in range(len(counts)):
        key = piece_buf[piece_off[p] : piece_off[p + 1]].tobytes()
        assert key not in out, "a piece is listed twice"
        out[key] = int(counts[p])
    return out


def segments_of(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    raws = [t.encode() for t in texts]
    off = np.concatenate([[0], np.cumsum([len(r) for r in raws])]).astype(np.int64)
    return np.frombuffer(b"".join(raws), dtype=np.uint8), off


def oracle_counts(texts: list[str], which: int) -> Counter:
    return Counter(p.encode() for t in texts for p in ORACLE[which].findall(t))


@EACH
@settings(max_examples=300, deadline=None)
@given(st.lists(biased_text, max_size=6))
def test_count_pieces_equals_counter(which, texts):
    buf, off = segments_of(texts)
    assert as_counter(count_pieces(buf, off, which)) == oracle_counts(texts, which)


@EACH
def test_count_pieces_grows_and_threads(which, real_texts):
    """Many distinct pieces (the table grows), split over threads and merged."""
    texts = [text[:300_000] for _, text in real_texts]
    buf, off = segments_of(texts)
    want = oracle_counts(texts, which)
    assert len(want) > 10_000
    assert as_counter(count_pieces(buf, off, which)) == want
    assert as_counter(count_pieces_threads(buf, off, which, threads=2)) == want
    assert as_counter(count_pieces_threads(buf, off, which, threads=3)) == want


def letters(i: int) -> str:
    """0 -> "a", 25 -> "z", 26 -> "ba": distinct words for distinct numbers."""
    out = ""
    while True:
        out = chr(97 + i % 26) + out
        i //= 26
        if not i:
            return out


def test_count_pieces_without_shared_data():
    """A table that grows several times, also split over threads."""
    words = [f"{letters(i)} {letters(i * 7919 % 100003)}'s {i % 1000}\n" for i in range(40_000)]
    texts = ["".join(words[k : k + 1000]) for k in range(0, len(words), 1000)] + ["", "é’s\n\n "]
    buf, off = segments_of(texts)
    want = oracle_counts(texts, DEFAULT)
    assert len(want) > 50_000
    assert as_counter(count_pieces(buf, off)) == want
    assert as_counter(count_pieces_threads(buf, off, threads=2)) == want


def test_merge_counts():
    a = count_pieces(*segments_of(["a b a"]))
    b = count_pieces(*segments_of([" b c", "a" * 20, "a" * 20 + "b"]))
    assert as_counter(merge_counts([a, b])) == Counter(
        {b"a": 1, b" b": 2, b" a": 1, b" c": 1, b"a" * 20: 1, b"a" * 20 + b"b": 1}
    )
    assert as_counter(merge_counts([])) == Counter()


def test_long_pieces_and_shared_prefixes():
    """Spans longer than one word compare beyond their first 8 bytes."""
    texts = ["abcdefgh" + s for s in ["", "i", "ij", "ijklmnopq", "ijklmnopr"]] * 3 + ["\x00", "\x00\x00"]
    buf, off = segments_of(texts)
    assert as_counter(count_pieces(buf, off)) == oracle_counts(texts, DEFAULT)


# -------------------------------------------------------------- the class table


def test_table_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKTOKTOK_CACHE", str(tmp_path))
    path = unicode_classes.table_path()
    assert path.parent == tmp_path and regex.__version__ in path.name
    table = unicode_classes.unicode_tables()
    unicode_classes.store_cached(path, table)
    assert np.array_equal(unicode_classes.load_cached(path), table)
    path.write_bytes(b"not a table")
    assert unicode_classes.load_cached(path) is None
    assert not list(tmp_path.glob(".*.tmp"))


def test_table_against_regex_per_character():
    """Spot check of the table with one fullmatch per character and class."""
    table = unicode_classes.unicode_tables()
    sample = list(range(0, 0x3000)) + list(range(0x3000, 0x110000, 37))
    checks = [(bit, regex.compile(cls)) for bit, cls in unicode_classes.CLASS_RECIPE]
    letters = [(code, regex.compile(f"(?i:{x})")) for code, x in unicode_classes.CONTRACTION_LETTERS]
    for cp in sample:
        if 0xD800 <= cp < 0xE000:
            continue
        ch = chr(cp)
        bits = sum(bit for bit, rx in checks if rx.fullmatch(ch))
        code = sum(code for code, rx in letters if rx.fullmatch(ch))
        assert (table[0, cp], table[1, cp]) == (bits, code), hex(cp)
    assert table[1, 0x17F] == unicode_classes.C_S and table[1, 0x212A] == 0  # LONG S yes, KELVIN SIGN no
