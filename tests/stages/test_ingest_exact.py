"""The pieces ingest counts are exactly ``regex.findall``'s (docs/pretokenization.md).

With ``heldout_share: 0`` (nothing held out) the summed ``(piece, count)`` rows
of a phase's chunk files must equal a ``Counter`` of
``regex.findall(pattern.python, segment)`` over the segments between special
tokens, for every named pattern:

- of each row of a ``.jsonl`` file (one document per row);
- of each whole ``.txt`` file (docs/pretokenization.md: "the counted pieces equal
  regex.findall(pattern, text) over each whole file or row"). A ``.txt`` is
  also split into documents (after a blank line followed by non-white-space);
  the documents concatenated are the file, and for the default and cl100k
  patterns, whose safe cut places include that boundary, findall over the
  whole file equals the sum over the documents: checked too. For gpt2 and
  o200k it does not (a property of the patterns, shown below), which is why
  ingest streams a ``.txt`` file's documents into one sequence of parts.

These tests run the real ingest stage (``stages.ingest.run_ingest`` on a
config loaded with ``load_config``) on real files, with every size shrunk so
that each document is read in many blocks and cut into many parts, batches
hold a few parts and chunk files a few batches:

- the row readers (tables, JSON lines) are given tiny batches, ``.txt`` files
  tiny reads, every file is read as it goes (none whole), and ``PartCutter``
  a tiny ``part_chars`` (ingest does not expose it, so the name it imported
  is replaced by a subclass that forces it);
- ``stages.ingest.batching.BATCH_TEXT_CHARS`` and ``chunking.CHUNK_BYTES`` are made tiny;
- and, for speed only (a run writes dozens of chunk files), the ``fsync``
  calls of ``toktoktok.atomic`` are skipped: they make writes durable, they do
  not change a byte.

The reference side is written from the docs, not from the code under test:
its own ``.txt`` document splitter, its own special-token cutter, plain
``regex.findall``.
"""

from __future__ import annotations

import io
import itertools
import json
import random
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import regex
import yaml

from tests.helpers import SHARED

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import toktoktok.atomic as atomic  # noqa: E402
import toktoktok_stages.ingest as ingest  # noqa: E402
import toktoktok_stages.ingest.batching as batching  # noqa: E402
import toktoktok_stages.ingest.chunking as chunking  # noqa: E402
import toktoktok_stages.ingest.local as local  # noqa: E402
import toktoktok_stages.ingest.routing as routing  # noqa: E402
import toktoktok_stages.ingest.table_rows as table_rows  # noqa: E402
from tests.conftest import split_txt_documents
from toktoktok import units  # noqa: E402
from toktoktok.config import load_config  # noqa: E402
from toktoktok.patterns import NAMED_PATTERNS  # noqa: E402
from toktoktok.pretokenize import PartCutter  # noqa: E402
from toktoktok.sources import row_batches  # noqa: E402
from toktoktok_stages import workdir  # noqa: E402
from toktoktok_stages.workdir.progress import Progress  # noqa: E402

SHARED = SHARED
MULTILINGUAL = SHARED / "data" / "multilingual"

PATTERN_NAMES = tuple(NAMED_PATTERNS)  # the -digits variants too
# Patterns for which docs/pretokenization.md's .txt document boundary is a safe cut place.
TXT_SPLIT_EXACT = tuple(name for name, p in NAMED_PATTERNS.items() if p.cut_at_breaks)
TXT_SPLIT_INEXACT = tuple(name for name in PATTERN_NAMES if name not in TXT_SPLIT_EXACT)

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# Tokens holding the characters safe cut places are made of (a space after a
# non-space, a line break before a non-space): a cut must never fall inside.
ODD_SPECIALS = ("<|endoftext|>", "<| sep |>", "a b", "\n<|nl|>", "'s")
SPECIAL_SETS = ((), SPECIALS, ODD_SPECIALS)


# ------------------------------------------------------------ the reference



def txt_documents(text: str) -> list[str]:
    """docs/pretokenization.md's .txt documents (tests/conftest.py's reference splitter); a UTF-8
    byte order mark at the very start is not text (toktoktok/sources/txt_windows.py)."""
    return split_txt_documents(text.removeprefix("\ufeff"))


def segments(text: str, specials: Sequence[str]) -> list[str]:
    """The text between special tokens: leftmost occurrence, longest token first."""
    if not specials:
        return [text]
    alternation = "|".join(regex.escape(t) for t in sorted(specials, key=len, reverse=True))
    return regex.split(alternation, text)


def findall_counts(documents: Sequence[str], name: str, specials: Sequence[str]) -> Counter[bytes]:
    """``regex.findall(pattern.python, segment)`` over every segment of every text."""
    compiled = regex.compile(NAMED_PATTERNS[name].python)
    counts: Counter[bytes] = Counter()
    for doc in documents:
        for seg in segments(doc, specials):
            counts.update(p.encode("utf-8") for p in compiled.findall(seg))
    return counts


def difference(a: Counter[bytes], b: Counter[bytes]) -> int:
    """Sum over pieces of |count in a - count in b|."""
    return sum(abs(a[k] - b[k]) for k in a.keys() | b.keys())


def show(a: Counter[bytes], b: Counter[bytes], limit: int = 12) -> str:
    diff = {k: a[k] - b[k] for k in a.keys() | b.keys() if a[k] != b[k]}
    items = sorted(diff.items(), key=lambda kv: (-abs(kv[1]), kv[0]))[:limit]
    return f"{len(diff)} pieces differ (ingest - reference): " + ", ".join(f"{k!r}: {v:+d}" for k, v in items)


# ------------------------------------------------------------ running the real ingest

# Sizes the patched reader and cutter use; a test may change them between runs.
SIZES = {"block_chars": 7, "part_chars": 5}
# What the batcher was given: parts (of text, or of .txt bytes sent as read), the longest.
CUTS = {"parts": 0, "longest_part": 0}


class _TinyPartCutter(PartCutter):
    """PartCutter with ``part_chars`` forced to SIZES (ingest leaves it at its default)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["part_chars"] = SIZES["part_chars"]
        super().__init__(**kwargs)


_batcher_add = batching.Batcher.add


def _counting_add(self: Any, parts: Sequence[Any], weight: float, file_index: int) -> None:
    """The batcher's ``add``, counting the parts it is given and their size."""
    parts = list(parts)
    CUTS["parts"] += len(parts)
    CUTS["longest_part"] = max([CUTS["longest_part"], *map(len, parts)])
    return _batcher_add(self, parts, weight, file_index)


def _tiny_batches(read: Any) -> Any:
    """A reader of row batches (tables, JSON lines) with batches of SIZES' block_chars bytes."""
    return lambda *args: read(*args, batch_bytes=SIZES["block_chars"])


@pytest.fixture(scope="module")
def tiny() -> Iterator[pytest.MonkeyPatch]:
    """Tiny blocks, parts, batches and chunks for every ingest run of this module."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(routing, "PartCutter", _TinyPartCutter)
        mp.setattr(batching.Batcher, "add", _counting_add)
        mp.setattr(table_rows, "iter_row_batches", _tiny_batches(row_batches.iter_row_batches))
        mp.setattr(table_rows, "iter_jsonl_batches", _tiny_batches(row_batches.iter_jsonl_batches))
        mp.setattr(local, "WHOLE_FILE_BYTES", -1)  # every file through the windows and the cutter, as read
        mp.setattr(routing, "TXT_READ_BYTES", SIZES["block_chars"])
        mp.setattr(batching, "BATCH_TEXT_CHARS", 16)
        mp.setattr(chunking, "CHUNK_BYTES", 64)
        mp.setattr(atomic, "_fsync_file", lambda path: None, raising=False)
        mp.setattr(atomic, "_fsync_dir", lambda folder: None, raising=False)
        yield mp


def run_ingest(folder: Path, files: Sequence[Path], name: str, specials: Sequence[str],
               threads: int = 1, custom: str | None = None,
               more: dict[str, Any] | None = None) -> tuple[Counter[bytes], dict[str, Any], list[Path]]:
    """Write a config in ``folder``, run the real ingest stage; (summed chunk counts, manifest, chunks).

    ``custom``: a regex given as ``pattern:`` instead of the name (``name`` is then "custom");
    ``more``: further top-level settings."""
    doc = {
        **(more or {}),
        "output": str(folder / "out" / "tok.tiktoken"),
        "threads": threads,
        "heldout_share": 0,
        "pattern": custom if custom is not None else name,
        "special_tokens": list(specials) or None,
        "phases": [{"name": "Exact", "merges": 10, "sources": [{"file": str(f)} for f in files]}],
    }
    config = folder / "config.yaml"
    config.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8")
    cfg = load_config(config)
    assert cfg.pattern.name == name and cfg.heldout_share == 0
    phase = cfg.phases[0]
    manifest = ingest.run_ingest(workdir.Work(cfg), phase, force=True, progress=Progress(stream=io.StringIO()))
    chunks = sorted(workdir.ingest_dir(cfg, phase).glob("chunk-*.arrow"))
    counts: Counter[bytes] = Counter()
    for chunk in chunks:
        df = pl.read_ipc(chunk)
        assert df.schema == pl.Schema({"piece": pl.Binary, "count": pl.UInt64}), df.schema
        assert df["piece"].n_unique() == df.height, "a chunk lists a piece twice"
        for piece, count in zip(df["piece"].to_list(), df["count"].to_list()):
            assert count > 0
            counts[piece] += count
    held = pl.read_ipc(workdir.ingest_dir(cfg, phase) / "heldout.arrow")
    assert held.height == 0, "heldout_share 0 holds nothing out"
    return counts, manifest, chunks


def write_txt(folder: Path, text: str, name: str = "doc.txt") -> Path:
    path = folder / name
    path.write_bytes(text.encode("utf-8"))  # bytes: no newline translation
    return path


def write_jsonl(folder: Path, docs: Sequence[str], ensure_ascii: bool = True) -> Path:
    path = folder / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": d}, ensure_ascii=ensure_ascii) + "\n" for d in docs),
                    encoding="utf-8")
    return path


def whole_file(text: str) -> str:
    """A .txt file's text as read: a UTF-8 byte order mark at the start is not text
    (toktoktok/sources/txt_windows.py)."""
    return text.removeprefix("\ufeff")


def has_line_break(specials: Sequence[str]) -> bool:
    return any(("\n" in t or "\r" in t) for t in specials)


def check(counts: Counter[bytes], manifest: dict[str, Any], want: Counter[bytes], documents: int) -> None:
    assert counts == want, show(counts, want)
    assert manifest["counts"]["pieces"] == sum(want.values())
    assert manifest["counts"]["documents"] == documents
    assert manifest["counts"]["forced_cuts"] == 0
    assert manifest["counts"]["heldout_documents"] == 0


# ------------------------------------------------------------ text strategies


def _apostrophes() -> list[str]:
    """' followed by every case of s, t, re, ve, m, ll, d (and a few near misses)."""
    out = []
    for suffix in ("s", "t", "re", "ve", "m", "ll", "d"):
        for letters in itertools.product(*[(c, c.upper()) for c in suffix]):
            out.append("'" + "".join(letters))
    return out + ["'", "''s", "'sa", "'llama", "\u2019s", "'\u017f", "'\u212a"]


FRAGMENTS = [
    # white space, ASCII and Unicode, line breaks alone and in runs
    " ", "  ", "   ", "\t", "\n", "\r", "\r\n", "\n\n", "\r\r", "\n\r", "\r\n\r\n", "\n \n", " \n",
    "\n\n ", "\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\xa0", "\u1680", "\u2000", "\u2009", "\u200b",
    "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff",
    # letters of many scripts, cases, marks
    "a", "Z", "word", "Hello", "HTTPServer", "\xe9", "\xdf", "\u0130", "\u01c5", "\u02b0", "\u017f",
    "e\u0301", "\u0301", "\u0915\u093f", "\u093f", "\u0e01\u0e34", "\u4e2d\u6587", "\u3042", "\ud55c",
    "\u0627\u0644", "\u05d0", "\u0416", "\u03a3\u03c2", "\U0001d400", "\U000105c0", "\U00011db0",
    # digits of several scripts, numbers
    "0", "7", "123", "1234567", "\u0663", "\u0967", "\u0e51", "\uff11", "\u2160", "\xbd", "\xb2",
    # emoji and joiners
    "\U0001f600", "\U0001f44d\U0001f3fd", "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f1e9\U0001f1ea",
    "\u200d", "\ufe0f", "\u2764\ufe0f",
    # punctuation, code
    "!", ".", "...", "/", "//", "->", "==", "{", "}", "(", ")", ";", "#", "\\", '"', "<", ">", "|",
    "<|", "|>", "\ufffd",
    # special tokens and near misses
    *SPECIALS, *ODD_SPECIALS[1:], "<|endoftext", "endoftext|>", "<|endoftext|", "<<|endoftext|>",
    "<|endoftext|>>", "<|im_<|im_end|>", "<|im_start|><|im_end|>", "<| sep", "sep |>", "\n<|nl",
    "<|nl|>", "a  b", "a\nb",
    *_apostrophes(),
]

# Any Unicode scalar value (surrogates cannot be written as UTF-8).
fragment = st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=3), st.characters(exclude_categories=["Cs"]))
# A small alphabet of the characters cut places are made of finds structural mistakes fastest.
SMALL_ALPHABET = " \t\n\r\x0b\xa0\u2028\u3000ab'sS.!/<|>1"
small_text = st.text(alphabet=SMALL_ALPHABET, max_size=40)
document = st.one_of(st.lists(fragment, max_size=24).map("".join), small_text)
file_text = st.one_of(st.lists(fragment, max_size=48).map("".join), small_text, st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), small_text), max_size=12).map("".join))
sizes = st.fixed_dictionaries({
    "block_chars": st.integers(1, 17),
    "part_chars": st.integers(1, 13),
    "batch": st.integers(1, 40),
    "chunk": st.integers(1, 120),
})


def _set_sizes(mp: pytest.MonkeyPatch, s: dict[str, int]) -> None:
    SIZES["block_chars"], SIZES["part_chars"] = s["block_chars"], s["part_chars"]
    mp.setattr(routing, "TXT_READ_BYTES", s["block_chars"])
    mp.setattr(batching, "BATCH_TEXT_CHARS", s["batch"])
    mp.setattr(chunking, "CHUNK_BYTES", s["chunk"])


SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------ property tests


@pytest.mark.parametrize("name", PATTERN_NAMES)
@SETTINGS
@given(text=file_text, specials=st.sampled_from(SPECIAL_SETS), s=sizes)
@example(text="a\n\nb c\n\n d\r\n\r\ne 'S x", specials=SPECIALS,
         s={"block_chars": 1, "part_chars": 1, "batch": 1, "chunk": 1})
@example(text="x <|endoftext|> y\n\n<|im_start|>z\r\rw", specials=SPECIALS,
         s={"block_chars": 2, "part_chars": 3, "batch": 2, "chunk": 5})
@example(text="Wow!\n\n/usr a\n\n\n<|nl|>b", specials=ODD_SPECIALS,
         s={"block_chars": 3, "part_chars": 2, "batch": 3, "chunk": 7})
def test_txt_pieces_are_findall_over_the_whole_file(tiny: pytest.MonkeyPatch, name: str, text: str,
                                                    specials: tuple[str, ...], s: dict[str, int]) -> None:
    """A .txt file: ingest counts = findall over the whole file; for default and
    cl100k also = findall over each of its documents (the split is safe)."""
    _set_sizes(tiny, s)
    docs = txt_documents(text)
    assert "".join(docs) == whole_file(text)
    want = findall_counts([whole_file(text)], name, specials)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        counts, manifest, _ = run_ingest(folder, [write_txt(folder, text)], name, specials)
    check(counts, manifest, want, len(docs))
    if name in TXT_SPLIT_EXACT and not has_line_break(specials):
        per_doc = findall_counts(docs, name, specials)
        assert per_doc == want, "findall over the whole file != the sum over its documents: " + show(per_doc, want)


# Bytes that are not UTF-8 (each decodes to U+FFFD), and a U+FFFD spelled validly.
BAD_BYTES = [b"\xff", b"\x80", b"\xc3", b"\xe2\x80", b"\xed\xa0\x80", b"\xf0\x9f", b"\xc0\xaf",
             "\ufffd".encode()]
byte_file = st.lists(st.one_of(st.sampled_from(FRAGMENTS).map(str.encode), small_text.map(str.encode),
                               st.sampled_from(BAD_BYTES)), max_size=30).map(b"".join)


@pytest.mark.parametrize("name", PATTERN_NAMES)
@SETTINGS
@given(data=byte_file, specials=st.sampled_from(SPECIAL_SETS), s=sizes)
@example(data=b"a\n\xffb c\n\n\xe2\x80\nd\n e", specials=(), s={"block_chars": 4, "part_chars": 2, "batch": 1,
                                                                   "chunk": 1})
@example(data=b"\xef\xbb\xbf\xef\xbb\xbf", specials=(), s={"block_chars": 1, "part_chars": 1, "batch": 1, "chunk": 1})
def test_txt_with_invalid_utf8_counts_the_replaced_text(tiny: pytest.MonkeyPatch, name: str, data: bytes,
                                                        specials: tuple[str, ...], s: dict[str, int]) -> None:
    """A .txt file with bytes that are not UTF-8: ingest counts findall over the text
    decoded with replacement (the byte path hands such stretches to the decoder),
    keeps its UTF-8 length and counts the replaced characters."""
    _set_sizes(tiny, s)
    text = whole_file(data.decode("utf-8", "replace"))
    want = findall_counts([text], name, specials)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / "bad.txt"
        path.write_bytes(data)
        counts, manifest, _ = run_ingest(folder, [path], name, specials)
    check(counts, manifest, want, len(txt_documents(data.decode("utf-8", "replace"))))  # one BOM dropped, not two
    assert manifest["counts"]["kept_bytes"] == len(text.encode())
    assert manifest["counts"]["replaced_chars"] == text.count("\ufffd") - data.count("\ufffd".encode())


@pytest.mark.parametrize("name", PATTERN_NAMES)
@SETTINGS
@given(docs=st.lists(document, max_size=6), specials=st.sampled_from(SPECIAL_SETS), s=sizes,
       ensure_ascii=st.booleans())
@example(docs=["it's", "", "a \u2028b\u2029 c\x85d\u3000e", "x<|endoftext|>y"], specials=SPECIALS,
         s={"block_chars": 1, "part_chars": 1, "batch": 1, "chunk": 1}, ensure_ascii=False)
def test_jsonl_pieces_are_findall_over_each_row(tiny: pytest.MonkeyPatch, name: str, docs: list[str],
                                                specials: tuple[str, ...], s: dict[str, int],
                                                ensure_ascii: bool) -> None:
    """A .jsonl file, one document per row (json.dumps): ingest counts = findall over each row.

    (Rows are matched one by one: the pieces never cross from a row to the next.)"""
    _set_sizes(tiny, s)
    want = findall_counts(docs, name, specials)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        counts, manifest, _ = run_ingest(folder, [write_jsonl(folder, docs, ensure_ascii)], name, specials)
    check(counts, manifest, want, len(docs))


def _long_row(seed: int, size: int, lines: int) -> str:
    """About ``size`` characters of fragments, a line break before about one in ``lines``
    of them: rows long enough to be several units, with safe places near or far apart."""
    rng = random.Random(seed)
    out: list[str] = []
    while sum(map(len, out)) < size:
        out.append(("\n" if rng.randrange(lines) == 0 else "") + rng.choice(FRAGMENTS))
    return "".join(out)


long_row = st.builds(_long_row, st.integers(0, 2**32), st.integers(0, 6000), st.integers(1, 4))


@pytest.mark.parametrize("name", TXT_SPLIT_EXACT)  # the patterns that take bytes as read
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(st.one_of(long_row, document), max_size=5), ensure_ascii=st.booleans(),
       s=st.fixed_dictionaries({"block_chars": st.integers(1, 17), "part_chars": st.integers(1, 400),
                                "batch": st.integers(1, 400), "chunk": st.integers(1, 1200)}))
def test_long_rows_sent_as_bytes_count_as_the_row_path(tiny: pytest.MonkeyPatch, name: str, docs: list[str],
                                                      s: dict[str, int], ensure_ascii: bool) -> None:
    """A row too long for one unit and one part, trained whole, goes to the scanner as its
    bytes cut at safe places (``table_rows._long_row``): the pieces, and every count of
    the manifest (units, units over the bound, kept documents and bytes), are those of
    the row path (``routing.route_row``), which decodes the row and feeds the cutter
    (the number of chunk files aside: it follows the batches).
    A working set of 1 MB makes the unit bound 1,638 bytes: long rows are several units."""
    _set_sizes(tiny, s)
    want = findall_counts(docs, name, ())
    runs = []
    for as_bytes in (True, False):
        with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
            if not as_bytes:
                mp.setattr(table_rows, "_long_row", lambda *args: False)
            folder = Path(tmp)
            counts, manifest, _ = run_ingest(folder, [write_jsonl(folder, docs, ensure_ascii)], name, (),
                                             more={"working_set_mb": 1})
            assert manifest["sample"]["share"] == 1.0
            check(counts, manifest, want, len(docs))
            runs.append({k: v for k, v in manifest["counts"].items() if k != "chunks"})  # files, as batches fall
    assert runs[0] == runs[1]


# ------------------------------------------------------------ real text


def _adversarial_text() -> str:
    """Every fragment next to every few others, as one .txt file with many documents."""
    parts = []
    n = len(FRAGMENTS)
    for step in (7, 11, 13, 17):
        for i, frag in enumerate(FRAGMENTS):
            parts.append(frag + FRAGMENTS[(i * step + 3) % n] + FRAGMENTS[(i * (step + 6) + 5) % n])
            if i % 9 == 0:
                parts.append("\n\n")
    return " ".join(parts)


def _multilingual_files() -> list[Path]:
    if not MULTILINGUAL.is_dir():
        pytest.skip(f"{MULTILINGUAL} is absent")
    files = sorted(p for p in MULTILINGUAL.iterdir() if p.is_file())
    if not files:
        pytest.skip(f"{MULTILINGUAL} has no files")
    return files


@pytest.mark.parametrize("name", PATTERN_NAMES)
def test_multilingual_samples_have_no_differing_piece(tiny: pytest.MonkeyPatch, tmp_path: Path, name: str) -> None:
    """Every file of shared/data/multilingual, cut every few dozen characters: 0 differing pieces
    against findall over each whole file (and, for default and cl100k, over each document)."""
    files = _multilingual_files()
    _set_sizes(tiny, {"block_chars": 97, "part_chars": 40, "batch": 500, "chunk": 5000})
    texts = [whole_file(f.read_bytes().decode("utf-8", "replace")) for f in files]
    docs = [d for t in texts for d in split_txt_documents(t)]  # whole_file dropped the BOM already
    want = findall_counts(texts, name, SPECIALS)
    before = dict(CUTS)
    counts, manifest, chunks = run_ingest(tmp_path, files, name, SPECIALS)
    assert difference(counts, want) == 0, show(counts, want)
    check(counts, manifest, want, len(docs))
    assert len(chunks) > 1
    if NAMED_PATTERNS[name].cut_at_safe_places:  # the cuts really happened, many times per document
        parts = CUTS["parts"] - before["parts"]
        assert parts > 5 * len(docs), (parts, len(docs))
    if name in TXT_SPLIT_EXACT:
        per_doc = findall_counts(docs, name, SPECIALS)
        assert difference(per_doc, want) == 0, show(per_doc, want)


def _threads_2_then_1(tiny: pytest.MonkeyPatch, tmp_path: Path, name: str,
                      custom: str | None = None) -> dict[int, dict[str, Any]]:
    """The adversarial text as a .txt and a .jsonl, ingested with ``threads: 2`` then 1:
    each run's counts are exactly findall's (pattern ``name``), and both runs write the
    same chunk files. Returns the manifests by ``threads``."""
    _set_sizes(tiny, {"block_chars": 13, "part_chars": 11, "batch": 200, "chunk": 1000})
    text = _adversarial_text()
    rows = [d for d in text.split("\n\n")]
    src = tmp_path / "src"
    src.mkdir()
    files = [write_txt(src, text), write_jsonl(src, rows, ensure_ascii=False)]
    docs = txt_documents(text) + rows
    want = findall_counts([text] + rows, name, ODD_SPECIALS)
    got, manifests = {}, {}
    for threads in (2, 1):
        folder = tmp_path / f"t{threads}"
        folder.mkdir()
        counts, manifests[threads], chunks = run_ingest(folder, files, "custom" if custom else name, ODD_SPECIALS,
                                                        threads=threads, custom=custom)
        check(counts, manifests[threads], want, len(docs))
        assert len(chunks) > 1
        got[threads] = [c.read_bytes() for c in chunks]
    assert got[2] == got[1], "chunk files differ between threads: 1 and threads: 2"
    return manifests


@pytest.mark.parametrize("name", PATTERN_NAMES)
def test_two_workers(tiny: pytest.MonkeyPatch, tmp_path: Path, name: str) -> None:
    """``threads: 2`` (worker threads running the scanner count the batches): same exact
    counts, and the same chunk files as ``threads: 1``."""
    manifests = _threads_2_then_1(tiny, tmp_path, name)
    assert manifests[2]["workers_peak_rss_mb"] == 0, "a named pattern ran worker processes"


def test_custom_pattern_in_worker_processes(tiny: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A custom pattern (o200k's, written out in a group: o200k's own string would be
    o200k) is matched over whole documents by ``regex.findall`` in spawned worker
    processes: exact counts, and the same chunk files with ``threads: 2`` as with ``threads: 1``."""
    manifests = _threads_2_then_1(tiny, tmp_path, "o200k", custom=f"(?:{NAMED_PATTERNS['o200k'].python})")
    assert manifests[2]["workers_peak_rss_mb"] > 0, "threads 2 ran no worker process"
    assert manifests[1]["workers_peak_rss_mb"] == 0


QWEN2 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""


def test_qwen2_pattern_written_out_runs_on_the_scanner(tiny: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Qwen2's pattern string as ``pattern:`` is default-digits (``run_ingest`` checks the name):
    counted by the scanner in threads, no worker process, exactly findall's counts."""
    _set_sizes(tiny, {"block_chars": 13, "part_chars": 11, "batch": 200, "chunk": 1000})
    text = _adversarial_text()
    counts, manifest, _ = run_ingest(tmp_path, [write_txt(tmp_path, text)], "default-digits", ODD_SPECIALS,
                                     threads=2, custom=QWEN2)
    check(counts, manifest, findall_counts([text], "default-digits", ODD_SPECIALS), len(txt_documents(text)))
    assert manifest["workers_peak_rss_mb"] == 0, "the pattern ran in worker processes: the regex path"


def test_reference_splitter_and_cutter() -> None:
    """The reference itself, on the docs' examples."""
    assert txt_documents("a\n\nb") == ["a\n\n", "b"]
    assert txt_documents("a\n\n b") == ["a\n\n b"]
    assert txt_documents("a\r\n\r\nb\r\rc\n\rd\n\n\ne") == ["a\r\n\r\n", "b\r\r", "c\n\r", "d\n\n\n", "e"]
    assert txt_documents("\ufeffa") == ["a"]
    assert segments("a<|im_start|><|im_end|>b<|im_end", SPECIALS) == ["a", "", "b<|im_end"]
    assert findall_counts(["it's 2024\n"], "default", ()) == Counter(
        {b"it": 1, b"'s": 1, b" ": 1, b"202": 1, b"4": 1, b"\n": 1})


# ------------------------------------------------------------ .txt documents and whole files

WHOLE_FILE_CASES = [
    ("gpt2", "Para one.\n\nPara two.\n"),  # whole file: '\n', '\n'; documents: '\n\n'
    ("gpt2", "x  \r\n\r\ny"),
    ("o200k", "Wow!\n\n/usr/bin\n"),  # whole file: '!\n\n/'; documents: '!\n\n', '/usr'
    ("default", "Para one.\n\nPara two.\n"),
    ("cl100k", "Wow!\n\n/usr/bin\n"),
    ("gpt2-digits", "Para 1.\n\nPara 22.\n"),
    ("o200k-digits", "Wow 42!\n\n/usr/bin\n"),
    ("default-digits", "Para 1.\n\nPara 22.\n"),
    ("cl100k-digits", "Wow 42!\n\n/usr/bin\n"),
]


@pytest.mark.parametrize(("name", "text"), WHOLE_FILE_CASES)
def test_txt_counts_equal_findall_over_whole_file(tiny: pytest.MonkeyPatch, tmp_path: Path, name: str,
                                                  text: str) -> None:
    """docs/pretokenization.md: 'the counted pieces equal regex.findall(pattern, text) over each whole file',
    also where the sum over the file's documents is different (gpt2, o200k)."""
    _set_sizes(tiny, {"block_chars": 4, "part_chars": 3, "batch": 8, "chunk": 16})
    counts, manifest, _ = run_ingest(tmp_path, [write_txt(tmp_path, text)], name, ())
    whole = findall_counts([text], name, ())
    check(counts, manifest, whole, len(txt_documents(text)))


@pytest.mark.parametrize(("name", "text"), [c for c in WHOLE_FILE_CASES if c[0] in TXT_SPLIT_INEXACT])
def test_documents_are_no_safe_split_for_gpt2_and_o200k(name: str, text: str) -> None:
    """Why a .txt is not matched document by document for every pattern: for gpt2 and o200k
    findall over the documents differs from findall over the file (pure ``regex``, no toktoktok)."""
    assert len(txt_documents(text)) == 2
    assert findall_counts(txt_documents(text), name, ()) != findall_counts([text], name, ())


@pytest.mark.parametrize("name", PATTERN_NAMES)
def test_special_token_holding_a_blank_line_in_txt(tiny: pytest.MonkeyPatch, tmp_path: Path, name: str) -> None:
    """docs/pretokenization.md: special tokens are cut out of the raw text before the pattern runs, also a token
    that the .txt document rule splits (a blank line followed by non-white-space inside it)."""
    _set_sizes(tiny, {"block_chars": 3, "part_chars": 2, "batch": 4, "chunk": 9})
    specials = ("\n\n<|doc|>",)
    text = "first\n\n<|doc|>second <|doc|>\n\n\n<|doc|>third"
    assert len(txt_documents(text)) == 3  # the rule cuts the token twice
    counts, manifest, _ = run_ingest(tmp_path, [write_txt(tmp_path, text)], name, specials)
    check(counts, manifest, findall_counts([text], name, specials), 3)
    assert counts[b"doc"] == 1  # only from " <|doc|>", which is no special token


# ------------------------------------------------------------ bounded parts


@pytest.mark.parametrize("name", PATTERN_NAMES)
def test_txt_is_read_in_bounded_parts(tiny: pytest.MonkeyPatch, tmp_path: Path, name: str) -> None:
    """docs/pretokenization.md: 'Files are read in bounded parts, cut only where no match can cross ... each
    named pattern needs its own proven rule' (and docs/performance.md#memory: files are streamed, never loaded whole).

    o200k and gpt2 may be cut only between a non-space and a following space
    (``cut_at_spaces``), superword only after line breaks, default and cl100k at
    both: either way a .txt file
    is read as parts of bounded size, never whole.
    """
    _set_sizes(tiny, {"block_chars": 64, "part_chars": 50, "batch": 400, "chunk": 4000})
    text = "".join(f"Paragraph {i} has some words, and then a line.\nAnother line here.\n\n" for i in range(60))
    CUTS["longest_part"] = 0
    counts, manifest, _ = run_ingest(tmp_path, [write_txt(tmp_path, text)], name, ())
    check(counts, manifest, findall_counts([text], name, ()), 60)
    assert CUTS["longest_part"] <= 4 * SIZES["part_chars"], f"a part of {CUTS['longest_part']} characters"


# ------------------------------------------------------------ held out and sampled .txt documents


def _bumpy_txt(n_docs: int, seed: int) -> bytes:
    """Documents of a few lines (some indented, some with CRs or bytes that are not UTF-8)."""
    import random

    rng = random.Random(seed)
    words = ["alpha", "beta", "Gamma", "δέλτα", "中文", "it's", "42", "x=1;", "  y", "\u2028z", "\xff", "\xe2\x80"]
    docs = []
    for _ in range(n_docs):
        lines = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 12))) for _ in range(rng.randint(1, 6))]
        docs.append("\n".join(lines) + rng.choice(["\n\n", "\r\n\r\n", "\n\n\n"]))
    return "".join(docs).encode("utf-8", "surrogateescape").replace(b"\xc3\xbf", b"\xff").replace(
        b"\xc3\xa2\xc2\x80", b"\xe2\x80")


@pytest.mark.parametrize("name", ["default", "o200k"])
@pytest.mark.parametrize(("read_bytes", "budget_mb", "n_docs"), [(7, 4096, 300), (1000, 4096, 3000),
                                                                 (1 << 20, 1, 12000), (4096, 1, 12000)])
def test_txt_held_out_and_sampled_documents_leave_exactly_the_rest(tiny: pytest.MonkeyPatch, tmp_path: Path,
                                                                    name: str, read_bytes: int, budget_mb: int,
                                                                    n_docs: int) -> None:
    """A .txt file with held-out documents (until a small cap is reached, half way
    through the file) and, with a 1 MB budget, a sample: the documents counted are
    exactly those the seeded rules leave, the held-out texts exactly those they
    hold (cut at the cap). Windows go back and forth between the bytes path and
    the text path; some bytes are not UTF-8."""
    from toktoktok.sampling import chosen, is_heldout

    _set_sizes(tiny, {"block_chars": read_bytes, "part_chars": 1 << 20, "batch": 1 << 18, "chunk": 1 << 22})
    cap = 4000
    tiny.setattr(routing, "HELDOUT_CAP_BYTES", cap)
    data = _bumpy_txt(n_docs, seed=read_bytes)
    (tmp_path / "d.txt").write_bytes(data)
    doc = {"output": str(tmp_path / "out" / "tok.tiktoken"), "threads": 2, "heldout_share": 0.1,
           "working_set_mb": budget_mb, "pattern": name,
           "phases": [{"name": "Exact", "merges": 10, "sources": [{"file": str(tmp_path / "d.txt")}]}]}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8")
    cfg = load_config(config)
    phase = cfg.phases[0]
    manifest = ingest.run_ingest(workdir.Work(cfg), phase, force=True, progress=Progress(stream=io.StringIO()))
    share = manifest["sample"]["share"]
    assert (share < 1) == (budget_mb == 1)
    # the reference: the seeded rules applied to our own split of the file into units,
    # keyed by each unit's byte offset
    held, kept, held_bytes = [], [], 0
    fates = []  # per unit: kept or not
    pattern = NAMED_PATTERNS[name]
    for start, end in units.reference_units(data, units.bound(budget_mb), **pattern.cut_rule()):
        text = data[start:end].decode("utf-8", "replace")
        if held_bytes < cap and is_heldout(cfg.seed, phase.slug, 0, start, cfg.heldout_share):
            raw = text.encode()[: cap - held_bytes]
            held.append(raw.decode("utf-8", "ignore"))
            held_bytes += len(raw)
            fates.append((text, False))
        else:
            fates.append((text, chosen(cfg.seed, phase.slug, 0, start, share, salt="sample")))
    kept = [text for text, keep in fates if keep]
    assert held_bytes >= cap and len(held) < n_docs // 4, "the cap is reached early in the file"
    stored = pl.read_ipc(workdir.ingest_dir(cfg, phase) / "heldout.arrow")["text"].to_list()
    assert stored == held
    counts: Counter[bytes] = Counter()
    for chunk in sorted(workdir.ingest_dir(cfg, phase).glob("chunk-*.arrow")):
        df = pl.read_ipc(chunk)
        counts.update(dict(zip(df["piece"].to_list(), df["count"].to_list())))
    # documents follow each other in one stream, broken where one is held out or left out
    # (for default and cl100k a document boundary is a safe cut anyway)
    streams = ["".join(text for text, _ in run) for keep, run in itertools.groupby(fates, key=lambda f: f[1]) if keep]
    want = findall_counts(streams, name, ())
    assert counts == want, show(counts, want)
    assert manifest["counts"]["kept_documents"] == len(kept)
    assert manifest["counts"]["kept_bytes"] == sum(len(t.encode()) for t in kept)
    assert manifest["counts"]["heldout_documents"] == len(held)
    whole = data.decode("utf-8", "replace")  # replacements are counted in every document read
    assert manifest["counts"]["replaced_chars"] == whole.count("\ufffd") - data.count("\ufffd".encode())
    assert manifest["counts"]["replaced_chars"] > 0


def test_a_failed_ingest_leaves_no_summing_thread(tmp_path, monkeypatch):
    """Ingest's summing thread stops with the stage: when a file fails half way,
    nothing is summed (or written) after the error, and no idle thread is left
    behind for each failed run of a long-lived process (the Python API, a Ray worker)."""
    import threading

    good = write_txt(tmp_path, "one two three\n\n" * 20_000, "a-good.txt")
    bad = tmp_path / "b-bad.jsonl"  # fails at its last line, while it is read
    bad.write_text("".join(json.dumps({"text": "four five six " * 50}) + "\n" for _ in range(2000)) + "{broken\n")

    def summing_threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.startswith("toktoktok-sum") and t.is_alive()}

    monkeypatch.setattr(routing, "TXT_READ_BYTES", 2000)  # small windows and batches: groups of
    monkeypatch.setattr(batching, "BATCH_TEXT_CHARS", 1000)  # them are summed while the files are read
    before = summing_threads()
    # ``failed`` keeps the traceback, hence the failed stage's frames and its batcher:
    # only stopping the summing thread ends it here, not the batcher's collection
    with pytest.raises(Exception, match="b-bad.jsonl: line 2001") as failed:  # noqa: F841
        run_ingest(tmp_path, [good, bad], "default", [], threads=2)
    assert summing_threads() <= before
