"""Silent surprises become warnings with counts, or are handled as a user expects.

- A special token that is also ordinary text is counted and warned about.
- A file whose byte order mark says UTF-16 or UTF-32 is decoded as such.
- ``on_bad_file: skip`` lists every skipped thing (broken links too).
- Globs: ``**/`` is zero or more folders, ``*`` never crosses ``/``, a
  pattern without ``/`` matches a name at any depth.
"""

from __future__ import annotations

import codecs
import gzip
import json

import pytest

from tests.processes import cli, manifest, phase, work, write_config
from toktoktok.config import Source
from toktoktok.sources import glob_match, list_source_files


def test_special_tokens_found_are_counted_and_a_word_is_warned_about(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("the cat sat<|endoftext|>\n\n" * 100 + "a dog<|endoftext|>\n\n" * 50)
    config = write_config(tmp_path / "p", [phase("A", 10, {"path": str(data)})], heldout_share=0, threads=1,
                          special_tokens=["<|endoftext|>", "the", "zebra"])
    result = cli("run", "-c", config)
    assert result.code == 0, result.err
    m = manifest(work(config) / "ingest" / "01-a")
    assert m["counts"]["special_tokens_found"] == {"<|endoftext|>": 150, "the": 100, "zebra": 0}
    warned = [w for w in m["warnings"] if "special token" in w]
    assert len(warned) == 1 and "'the'" in warned[0], m["warnings"]  # <|endoftext|> is not a single piece
    assert "warning: special token 'the'" in result.err
    assert "<|endoftext|> 150 times" in result.out and "the 100 times" in result.out


WIDE = [("utf-16-le", codecs.BOM_UTF16_LE), ("utf-16-be", codecs.BOM_UTF16_BE),
        ("utf-32-le", codecs.BOM_UTF32_LE), ("utf-32-be", codecs.BOM_UTF32_BE)]


CASES = [(*w, "txt") for w in WIDE] + [(*WIDE[0], "txt.gz"), (*WIDE[3], "jsonl")]


@pytest.mark.parametrize("encoding, bom, kind", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_utf16_and_utf32_files_are_decoded(tmp_path, encoding, bom, kind):
    text = "héllo wörld, naïve café\n\nzweites Dokument 日本語\n"
    reference_dir, wide_dir = tmp_path / "ref", tmp_path / "wide"
    reference_dir.mkdir()
    wide_dir.mkdir()
    if kind == "jsonl":
        body = "".join(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in text.split("\n\n"))
    else:
        body = text
    raw = bom + body.encode(encoding)
    name = "a." + kind
    (wide_dir / name).write_bytes(gzip.compress(raw) if kind.endswith("gz") else raw)
    plain = body.encode("utf-8")
    (reference_dir / name).write_bytes(gzip.compress(plain) if kind.endswith("gz") else plain)
    chunks = {}
    for label, folder in (("ref", reference_dir), ("wide", wide_dir)):
        config = write_config(tmp_path / label, [phase("A", 10, {"path": str(folder)})], heldout_share=0, threads=1)
        result = cli("ingest", "-c", config)
        assert result.code == 0, result.err
        m = manifest(work(config) / "ingest" / "01-a")
        chunks[label] = (m["counts"]["pieces"], m["counts"]["documents"], m["counts"]["recoded_files"],
                         m["counts"]["replaced_chars"])
    assert chunks["wide"][:2] == chunks["ref"][:2], chunks
    assert chunks["wide"][2] == 1 and chunks["ref"][2] == 0 and chunks["wide"][3] == 0


def test_skip_lists_broken_links_and_counts_what_was_trained(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "good.txt").write_text("one document\n\nanother one\n")
    (data / "gone.txt").symlink_to(tmp_path / "nowhere.txt")
    (data / "cut.txt.gz").write_bytes(gzip.compress(b"hello there\n\n" * 2000)[:-20])
    config = write_config(tmp_path / "p", [phase("A", 10, {"path": str(data)})], heldout_share=0, threads=1,
                          on_bad_file="skip")
    result = cli("run", "-c", config)
    assert result.code == 0, result.err
    m = manifest(work(config) / "ingest" / "01-a")
    assert sorted(b["path"] for b in m["counts"]["bad_files"]) == [str(data / "cut.txt.gz"), str(data / "gone.txt")]
    assert m["counts"]["files"] == 1 and m["counts"]["documents"] == 2, m["counts"]
    assert "skipped 2 bad files" in result.out


@pytest.mark.parametrize("pattern, expected", [
    ("**/*.txt", ["top.txt", "x/mid.txt", "x/y/deep.txt"]),
    ("*.txt", ["top.txt", "x/mid.txt", "x/y/deep.txt"]),
    ("x/*.txt", ["x/mid.txt"]),
    ("x/**", ["x/mid.jsonl", "x/mid.txt", "x/y/deep.txt"]),
    ("**/y/*", ["x/y/deep.txt"]),
    ("t?p.txt", ["top.txt"]),
    ("[mt]*.txt", ["top.txt", "x/mid.txt"]),
])
def test_include_globs(tmp_path, pattern, expected):
    root = tmp_path / "src"
    for rel in ("top.txt", "x/mid.txt", "x/mid.jsonl", "x/y/deep.txt", "other.jsonl"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text('{"text": "a"}\n' if rel.endswith("jsonl") else "a\n")
    files = list_source_files(Source(root, True, "text", include=(pattern,)))
    assert sorted(f.relative_to(root).as_posix() for f in files) == expected
    assert all(glob_match(rel, pattern) for rel in expected)


def test_exclude_globs(tmp_path):
    root = tmp_path / "src"
    for rel in ("top.txt", "x/mid.txt", "x/y/deep.txt", "tests/t.txt", "x/tests/u.txt"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("a\n")
    files = list_source_files(Source(root, True, "text", include=("**/*.txt",), exclude=("**/tests/**",)))
    assert sorted(f.relative_to(root).as_posix() for f in files) == ["top.txt", "x/mid.txt", "x/y/deep.txt"]
