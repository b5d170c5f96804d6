"""Text files cut into documents: ``line`` and ``split-on:STRING`` as rows, files of any suffix.

- ``document_batches`` (ingest's rows) gives the documents ``iter_blocks``
  gives (the reference, on decoded text) for ``line`` and ``split-on``, read
  in windows of any size, with each document's byte offset in the file.
- ``not_text``: a NUL byte, or too many invalid UTF-8 sequences, in the
  first bytes of a file of another suffix: a bad file when read.
- A folder's ``include:`` selects files of any suffix; without it only the
  known kinds are listed.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from toktoktok.config import Source
from toktoktok.sources import ReadStats, SourceError, iter_blocks, list_source_files, text_bytes
from toktoktok.sources.decoding import NOT_TEXT_SHARE, SNIFF_BYTES, not_text
from toktoktok.sources.text_rows import document_batches


def _reference(path: Path, rule: str) -> list[str]:
    docs: list[str] = []
    open_doc = ""
    for block in iter_blocks(path, documents=rule, block_chars=7):
        open_doc += block.text
        if block.end:
            docs.append(open_doc)
            open_doc = ""
    return docs


def _rows(data: bytes, rule: str, window: int) -> tuple[list[str], list[int], ReadStats]:
    stats = ReadStats()
    chunks = [data[i : i + window] for i in range(0, len(data), window)]
    texts, starts = [], []
    for batch in document_batches(chunks, rule, stats):
        offsets = batch.offsets.tolist()
        texts += [batch.data[a:b].tobytes().decode() for a, b in zip(offsets, offsets[1:])]
        starts += batch.starts.tolist()
    return texts, starts, stats


def _random_text(seed: int, alphabet: list[str]) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 400)))


@pytest.mark.parametrize("rule, alphabet", [
    ("line", ["a", "é", " ", "\n", "\r", "\r\n", "xyz", "\n\n"]),
    ("split-on:<|doc|>", ["a", "é", "\n", "<|doc|>", "<|", "doc", "|>", "<|doc"]),
    ("split-on:aa", ["a", "b", "aa", "aaa", "\n"]),  # overlapping candidates: the leftmost wins
    ("split-on:é", ["é", "e", " ", "\u00e9\u00e9"]),
])
@pytest.mark.parametrize("window", [1, 2, 5, 64])
def test_rows_are_the_reference_documents(tmp_path: Path, rule: str, alphabet: list[str], window: int) -> None:
    separator = "\n" if rule == "line" else rule.partition(":")[2]
    for seed in range(40):
        text = _random_text(seed, alphabet)
        path = tmp_path / f"{seed}.md"
        data = ("\ufeff" if seed % 5 == 0 else "").encode() + text.encode()
        path.write_bytes(data)
        texts, starts, stats = _rows(data, rule, window)
        assert texts == _reference(path, rule), (rule, text)
        body = data.removeprefix(b"\xef\xbb\xbf")
        assert [body[s : s + len(t.encode())].decode() for s, t in zip(starts, texts)] == texts
        assert stats.documents == len(texts) and stats.bytes_read == len(data)
        if rule != "line":
            assert not any(separator in t for t in texts)


def test_split_on_blocks_of_a_long_document(tmp_path: Path) -> None:
    """A document longer than a block comes in several blocks; the last one holds text."""
    path = tmp_path / "a.md"
    path.write_text("x" * 50 + "<|doc|>" + "y" * 30 + "<|doc|><|doc|>z", encoding="utf-8")
    blocks = list(iter_blocks(path, documents="split-on:<|doc|>", block_chars=8))
    assert all(b.text for b in blocks)
    assert [(b.doc, b.end) for b in blocks if b.end] == [(0, True), (1, True), (2, True)]
    assert "".join(b.text for b in blocks if b.doc == 0) == "x" * 50


def test_not_text() -> None:
    assert not_text(b"") is None and not_text("plain text, ünïcödé, 日本語".encode()) is None
    assert not_text(b"text\x00more") == "it holds a NUL byte"
    latin1 = ("caf\xe9 " * 100).encode("latin-1")  # one invalid byte in five: more than the share
    assert 1 / 5 > NOT_TEXT_SHARE and not_text(latin1).startswith("invalid UTF-8 in 100 of its first 500 bytes")
    few = ("a" * 30 + "\xe9").encode("latin-1") * 10  # one in 31: read as text, the byte replaced
    assert not_text(few) is None
    assert not_text("é".encode() * 10 + b"\xc3") is None  # a character cut at the end is not invalid


def test_a_file_of_another_suffix_is_checked_when_read(tmp_path: Path) -> None:
    binary = tmp_path / "a.o"
    binary.write_bytes(b"\x7fELF" + bytes(SNIFF_BYTES))
    for read in (lambda: list(iter_blocks(binary)), lambda: text_bytes(binary)):
        with pytest.raises(SourceError, match=r"a\.o: not a text file \(it holds a NUL byte\)"):
            read()
    late = tmp_path / "late.log"  # a NUL after the first bytes looked at: read as text
    late.write_bytes(b"a" * SNIFF_BYTES + b"\x00")
    assert text_bytes(late) == SNIFF_BYTES + 1
    wide = tmp_path / "wide.md"  # UTF-16 by its byte order mark: recoded before it is looked at
    wide.write_bytes("\ufeffhello".encode("utf-16-le"))
    assert [b.text for b in iter_blocks(wide)] == ["hello"]


def test_include_selects_any_suffix(tmp_path: Path) -> None:
    for name in ("a.py", "src/b.c", "docs/c.md", "d.txt", "e.csv", ".hidden.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x\n")
    listed = list_source_files(Source(tmp_path, is_dir=True, include=("**/*.py", "**/*.c", "**/*.md")))
    assert [p.relative_to(tmp_path).as_posix() for p in listed] == ["a.py", "docs/c.md", "src/b.c"]
    assert [p.name for p in list_source_files(Source(tmp_path, is_dir=True))] == ["d.txt"]
    with pytest.raises(SourceError, match="no file found"):
        list_source_files(Source(tmp_path, is_dir=True, include=("*.rs",)))
