"""Robust under bad input and interruption.

Every case runs the installed ``toktok`` on a real bad input in ``tmp_path``
and checks three things: the exit code (docs/cli.md: 0 done, 1 data or runtime
failure, 2 usage or configuration, 130 interrupted), the message (one line
``error: ...`` naming the file, key or line, never a traceback), and that
nothing left on disk claims completeness (no manifest for the stage that
failed, no ``.tiktoken``, no temporary file).

Decisions the tests pin down:

- Undecodable bytes in a text file are replaced by U+FFFD and counted in the
  ingest manifest's ``replaced_chars``, not fatal; so a binary file named
  ``.txt`` is read like that too (a ``.txt`` is text by declaration), its
  replacements counted. NUL bytes are valid UTF-8 and kept.
- A file that cannot be read at all (corrupt, truncated, no text column,
  vanished, unreadable) follows ``on_bad_file``: ``fail`` (default) stops
  with exit 1 naming it, or exit 2 when it is found before any work starts
  (an unopenable file, a broken symbolic link); ``skip`` goes on and lists
  it in the manifest's ``bad_files``.
- A directory that cannot be listed is always exit 2 (its files would be
  missing silently); a loop of symbolic links to folders is followed once.
- Two runs on one work directory: the second refuses at once (exit 1).

How the hard cases are staged:

- Root: chmod does not block root. The unreadable-file cases run ``toktok``
  under ``setpriv`` without the capabilities that bypass permissions (and
  skip where that is impossible); the read-only output folder is a
  read-only tmpfs, the full disk a tiny tmpfs sized from an uninterrupted
  run's files so that it fills while one chosen file is written (both
  skipped where mounting is not allowed).
- A file vanishing during a run: ``toktok ingest`` is started on two files
  and the second is deleted as soon as the phase folder appears (ingest has
  listed and fingerprinted its files) while the first, 3 MB, is still read.
- Interruption: the signal goes to the run's process group (the run and its
  workers, as a terminal's Ctrl-C does) the moment the stage's folder is
  created by this run, or a seeded random time into the stage (the stage
  durations of an uninterrupted run bound it).
- Two runs at once: the first is stopped (SIGSTOP) in the middle of its
  ingest, holding the lock, while the others try; then it goes on.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import random
import re
import signal
import stat
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

import toktoktok
from tests.conftest import english_text, piece_counts, read_documents
from tests.processes import (
    SPECIALS,
    assert_nothing_claims_completeness,
    children,
    chunk_counts,
    cli,
    error_line,
    finish,
    interrupted_line,
    manifest,
    manifests,
    output,
    phase,
    sha256,
    signal_group,
    slow,
    start,
    temp_files,
    wait_for,
    without_root_powers,
    work,
    write_config,
)
from toktoktok.patterns import NAMED_PATTERNS
from toktoktok.tiktoken_file import write_tiktoken


def line_of(config: Path, text: str) -> int:
    """The 1-based line of the config holding ``text`` first."""
    return next(i for i, line in enumerate(config.read_text().splitlines(), 1) if text in line)


# ================================================================ readable but odd inputs: exit 0

ODD_SPECIALS_TEXT = (
    "<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\nHi!<|im_end|><|endoftext|>"
    "back to back:<|endoftext|><|endoftext|><|im_start|><|im_end|><|im_end|><|endoftext|>\n\n"
    "look-alikes: <|endoftext |> <|ENDOFTEXT|> <|endoftext| |endoftext|> <endoftext> <||> <|im_start|\n\n"
    "split look-alike <|endof\ntext|> and a real one at the very end<|endoftext|>"
)


def _invalid_utf8() -> bytes:
    text = english_text(3_000).encode()
    return text[:1000] + b"\xff\xfe bad \xc3( cut \xe2\x82 \xed\xa0\x80 surrogate \xf8\x88\x80\x80\x80" + text[1000:] + b"\xc3"


def _binary() -> bytes:
    return random.Random(5).randbytes(30_000)


ODD_FILES = {
    # phase name: {file name: bytes}
    "invalid-utf8": {"a.txt": _invalid_utf8()},
    "nul": {"a.txt": english_text(2_000).replace("\n", "\x00\n").encode() + b"\x00\x00tail\x00"},
    "bom": {"a.txt": b"\xef\xbb\xbf" + english_text(2_000).encode()},
    "line-ends": {"crlf.txt": english_text(2_000).replace("\n", "\r\n").encode(),
                  "cr.txt": english_text(2_000, offset=5_000).replace("\n", "\r").encode(),
                  "mixed.txt": b"one\r\ntwo\rthree\n\r\n\rfour\r\r\nfive\n\n\r\nsix\r"},
    "empty-and-not": {"a-empty.txt": b"", "b.txt": english_text(2_000).encode()},
    "only-empty": {"a.txt": b""},
    "binary": {"a.txt": _binary()},
    "specials": {"a.txt": ODD_SPECIALS_TEXT.encode()},
}


def _parquet_with_nulls(path: Path) -> None:
    pq.write_table(pa.table({"text": pa.array(["a b c", None, "d e f", "", None, "g h"], pa.string()),
                             "id": [1, 2, 3, 4, 5, 6]}), path)


@pytest.fixture(scope="module")
def odd_run(tmp_path_factory):
    """One ``toktok run`` whose phases each read one kind of odd but readable input."""
    root = tmp_path_factory.mktemp("odd")
    phases = []
    for name, files in ODD_FILES.items():
        folder = root / "data" / name
        folder.mkdir(parents=True)
        for file, data in files.items():
            (folder / file).write_bytes(data)
        phases.append(phase(name, 10, {"path": str(folder)}))
    nulls = root / "data" / "nulls.parquet"
    _parquet_with_nulls(nulls)
    phases.append(phase("parquet-nulls", 2, {"file": str(nulls)}))
    config = write_config(root / "p", phases, special_tokens=SPECIALS)
    result = cli("run", "-c", config)
    slugs = {p["name"]: f"{i + 1:02d}-{p['name']}" for i, p in enumerate(phases)}
    return root, config, result, slugs


def _expected_counts(root: Path, name: str) -> Counter[bytes]:
    docs = [d for f in sorted((root / "data" / name).iterdir()) for d in read_documents(f)]
    return piece_counts(docs, SPECIALS)


def test_odd_inputs_run_to_the_end(odd_run):
    _, config, result, _ = odd_run
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    assert output(config).is_file()
    # the phase of an empty file has nothing to merge: a warning, not an error
    assert "warning: phase 'only-empty' ran out of pairs" in result.err


@pytest.mark.parametrize("name", ["invalid-utf8", "binary"])
def test_invalid_utf8_is_replaced_and_counted(odd_run, name):
    root, config, _, slugs = odd_run
    data = ODD_FILES[name]["a.txt"]
    text = data.decode("utf-8", "replace")
    expected = text.count("\ufffd") - data.count("\ufffd".encode())
    counts = manifest(work(config) / "ingest" / slugs[name])["counts"]
    assert counts["replaced_chars"] == expected > 0
    assert counts["bad_files"] == [] and counts["files"] == 1
    assert chunk_counts(work(config) / "ingest" / slugs[name]) == _expected_counts(root, name)


@pytest.mark.parametrize("name", ["nul", "bom", "line-ends", "empty-and-not", "specials"])
def test_odd_text_is_counted_exactly(odd_run, name):
    """The pieces equal ``regex.findall`` over each document (BOM dropped, special tokens cut out)."""
    root, config, _, slugs = odd_run
    folder = work(config) / "ingest" / slugs[name]
    counts = chunk_counts(folder)
    assert counts == _expected_counts(root, name)
    m = manifest(folder)["counts"]
    assert m["replaced_chars"] == 0 and m["files"] == len(ODD_FILES[name])
    if name == "nul":
        assert any(b"\x00" in piece for piece in counts)
    if name == "bom":
        assert not any(b"\xef\xbb\xbf" in piece for piece in counts)
    if name == "line-ends":
        assert counts[b"\r\n"] > 0 and any(set(p) == {13} for p in counts), "CRLF and lone CR pieces"


def test_empty_files(odd_run):
    _, config, _, slugs = odd_run
    empty = manifest(work(config) / "ingest" / slugs["only-empty"])["counts"]
    assert (empty["files"], empty["documents"], empty["pieces"], empty["bytes_read"]) == (1, 0, 0, 0)
    assert manifest(work(config) / "train" / slugs["only-empty"])["counts"]["merges_made"] == 0


def test_special_tokens_in_text(odd_run):
    """Special tokens are never pieces (nor parts of one); look-alikes are plain text;
    the exported tokenizer encodes the real ones, back to back too, as single ids."""
    _, config, _, slugs = odd_run
    counts = chunk_counts(work(config) / "ingest" / slugs["specials"])
    for piece in counts:
        for special in SPECIALS:
            assert special.encode() not in piece
    assert counts[b"endoftext"] >= 3 and counts[b" <|"] >= 1, "look-alikes are ordinary pieces"
    enc = toktoktok.load(output(config))
    ids = {t: enc.encode(t, allowed_special="all")[0] for t in SPECIALS}
    tokens = enc.encode("<|endoftext|><|endoftext|><|im_start|><|im_end|>", allowed_special="all")
    assert tokens == [ids["<|endoftext|>"], ids["<|endoftext|>"], ids["<|im_start|>"], ids["<|im_end|>"]]
    assert not set(enc.encode("<|endoftext |> <|ENDOFTEXT|>", allowed_special="all")) & set(ids.values())
    assert enc.decode(enc.encode(ODD_SPECIALS_TEXT, allowed_special="all")) == ODD_SPECIALS_TEXT


def test_nul_bytes_round_trip(odd_run):
    _, config, _, _ = odd_run
    enc = toktoktok.load(output(config))
    text = "a\x00b\x00\x00 c\x00\n"
    assert enc.decode(enc.encode(text)) == text


def test_parquet_nulls_are_not_documents(odd_run):
    _, config, _, slugs = odd_run
    counts = manifest(work(config) / "ingest" / slugs["parquet-nulls"])["counts"]
    assert counts["documents"] == 4, "four non-null values, the empty string included"
    assert chunk_counts(work(config) / "ingest" / slugs["parquet-nulls"]) == piece_counts(["a b c", "d e f", "", "g h"], [])


# ================================================================ files that cannot be read: exit 1 (or skipped)

GOOD = english_text(3_000).encode()


def big_text(chars: int) -> str:
    """About ``chars`` characters of English (repeated if the corpus is shorter)."""
    part = english_text(min(chars, 1_000_000))
    return part * (chars // len(part) + 1)


def _parquet(table: pa.Table, **kwargs) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **kwargs)
    return sink.getvalue().to_pybytes()


def _zst(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


GOOD_PARQUET = _parquet(pa.table({"text": [english_text(200, offset=i * 300) for i in range(40)]}))

BAD_FILES = {
    # id: (file name, bytes, text_column or None, words the message must hold)
    "parquet-truncated": ("bad.parquet", GOOD_PARQUET[: len(GOOD_PARQUET) // 2], None, ["cannot read"]),
    "parquet-corrupt": ("bad.parquet", GOOD_PARQUET[:4] + bytes(200) + GOOD_PARQUET[204:], None, ["cannot read"]),
    "parquet-not-parquet": ("bad.parquet", b"PAR1 this is not a parquet file at all PAR1", None, ["cannot read"]),
    "parquet-empty": ("bad.parquet", b"", None, ["cannot read"]),
    "parquet-no-text-column": ("bad.parquet", _parquet(pa.table({"body": ["x y"]})), None,
                               ["no column 'text'", "body"]),
    "parquet-no-configured-column": ("bad.parquet", _parquet(pa.table({"text": ["x y"]})), "content",
                                     ["no column 'content'", "text"]),
    "parquet-int-column": ("bad.parquet", _parquet(pa.table({"text": [1, 2]})), None, ["'text' is int64", "string"]),
    "parquet-binary-column": ("bad.parquet", _parquet(pa.table({"text": pa.array([b"x"], pa.binary())})), None,
                              ["'text' is binary"]),
    "jsonl-bad-line": ("bad.jsonl", b'{"text": "ok"}\n{"text": "no end"\n{"text": "x"}\n', None,
                       ["line 2", "invalid JSON"]),
    "jsonl-not-object": ("bad.jsonl", b'{"text": "ok"}\n["text"]\n', None, ["line 2", "JSON object"]),
    "jsonl-no-field": ("bad.jsonl", b'{"text": "ok"}\n\n{"body": "x"}\n', None, ["line 3", "no 'text' field"]),
    "jsonl-number": ("bad.jsonl", b'{"text": 5}\n', None, ["line 1", "'text' is int"]),
    "gz-truncated": ("bad.txt.gz", gzip.compress(GOOD)[:-40], None, ["truncated"]),
    "gz-corrupt": ("bad.txt.gz", gzip.compress(GOOD)[:30] + b"\xff" * 60 + gzip.compress(GOOD)[90:], None,
                   ["corrupt compressed data"]),
    "gz-not-gzip": ("bad.jsonl.gz", b"just text, not gzip\n", None, ["cannot read"]),
    "gz-empty": ("bad.txt.gz", b"", None, ["empty file"]),
    "zst-truncated": ("bad.txt.zst", _zst(GOOD)[:-25], None, ["truncated"]),
    "zst-corrupt": ("bad.txt.zst", _zst(GOOD)[:20] + b"\xff" * 40 + _zst(GOOD)[60:], None, ["cannot read"]),
    "zst-empty": ("bad.jsonl.zst", b"", None, ["empty zstd data"]),
}


def _bad_file_config(tmp_path: Path, case: str, **settings) -> tuple[Path, Path]:
    name, data, column, _ = BAD_FILES[case]
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "a-good.txt").write_bytes(GOOD)
    bad = folder / name
    bad.write_bytes(data)
    source = {"path": str(folder)} | ({"text_column": column} if column else {})
    config = write_config(tmp_path / "p", [phase("Only", 20, source)], **settings)
    return config, bad


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_unreadable_file_fails_naming_it(tmp_path, case):
    config, bad = _bad_file_config(tmp_path, case)
    result = cli("run", "-c", config)
    assert result.code == 1, result.err
    line = error_line(result.err)
    assert str(bad) in line
    for word in BAD_FILES[case][3]:
        assert word in line, line
    assert_nothing_claims_completeness(config, "ingest/01-only", "train/01-only")
    assert not list(work(config).glob("*/01-only/*.arrow")), "no artifact of the failed stage is left"


def test_unreadable_files_are_skipped_and_counted_when_asked(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "a-good.txt").write_bytes(GOOD)
    bad = []
    for case, (name, data, column, _) in BAD_FILES.items():
        if column is None:
            path = folder / f"{case}-{name}"
            path.write_bytes(data)
            bad.append(str(path))
    config = write_config(tmp_path / "p", [phase("Only", 20, {"path": str(folder)})], on_bad_file="skip")
    result = cli("run", "-c", config)
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    counts = manifest(work(config) / "ingest" / "01-only")["counts"]
    assert sorted(b["path"] for b in counts["bad_files"]) == sorted(bad)
    assert counts["files"] == 1
    for path in bad:
        assert path in result.err, "each skipped file is named in the run's output"
    assert output(config).is_file()


def test_a_skipped_file_contributes_nothing(tmp_path):
    """A compressed file that turns out truncated after 3 MB (``on_bad_file: skip``):
    none of the text read before the failure is counted."""
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "a-good.txt").write_bytes(GOOD)
    (folder / "b-bad.txt.gz").write_bytes(gzip.compress(big_text(3_000_000).encode())[:-40])  # read in 1 MB blocks
    config = write_config(tmp_path / "p", [phase("Only", 20, {"path": str(folder)})], on_bad_file="skip")
    result = cli("ingest", "-c", config)
    if result.code != 0 or len(manifest(work(config) / "ingest" / "01-only")["counts"]["bad_files"]) != 1:
        pytest.fail(f"the bad file was not skipped: {result}")
    assert chunk_counts(work(config) / "ingest" / "01-only") == piece_counts(read_documents(folder / "a-good.txt"), [])


# ================================================================ one line of tens of MB, huge row groups

WORDS = ["".join(random.Random(i).choice("abcdefghijklmnop") for _ in range(2 + i % 6)) for i in range(300)]


def _words_file(path: Path, size: int, separator: str) -> int:
    """About ``size`` bytes of words, in blocks of 50,000 words ended by ``separator``
    (a space: one line without a break; a line break: many lines); returns the word count."""
    rnd = random.Random(size)
    block = " ".join(rnd.choice(WORDS) for _ in range(50_000)) + separator
    words = 0
    with open(path, "w", encoding="ascii") as f:
        while (words // 50_000 + 1) * len(block) <= size:
            f.write(block)
            words += 50_000
    return words


@slow
@pytest.mark.parametrize("pattern", ["default", "gpt2"])
def test_memory_does_not_follow_line_length(tmp_path, pattern):
    """One line of 48 MB (letters and spaces, no line break) costs no more memory than
    the same text in many lines: the reader cuts it at docs/pretokenization.md's safe places (before a
    space) instead of holding the line. Holding it would cost twice its size (bytes and
    text). The figure is the manifest's peak RSS (threads: 2). The default pattern's
    bytes go to the scanner as read, cut before a space; gpt2's are decoded and cut
    by ``PartCutter`` (its rule: before a space only)."""
    peaks = {}
    for kind, separator in (("one-line", " "), ("many-lines", "\n")):
        folder = tmp_path / kind
        folder.mkdir()
        words = _words_file(folder / "text.txt", 48 << 20, separator)
        config = write_config(tmp_path / f"p-{kind}", [phase("Text", 10, {"path": str(folder)})], threads=2,
                              pattern=pattern)
        result = cli("ingest", "-c", config)
        assert result.code == 0, result.err
        m = manifest(work(config) / "ingest" / "01-text")
        assert m["counts"]["documents"] == 1 and m["counts"]["forced_cuts"] == 0
        # a piece per word, and the last space (one line) or each line break (many lines)
        assert m["counts"]["pieces"] == words + (1 if separator == " " else words // 50_000)
        peaks[kind] = m["peak_rss_mb"]
    # holding the line would cost twice its size (bytes and text); batches in flight vary from run to run below this margin
    assert peaks["one-line"] - peaks["many-lines"] < 40, f"peak RSS in MB {peaks}: memory follows the line's length"


@slow
def test_huge_row_group_is_streamed(tmp_path):
    """A parquet file of one 24 MB row group reads like the same rows in 96 row groups:
    same counts, and a peak RSS that does not grow by the row group's size."""
    rnd = random.Random(1)
    rows = [" ".join(rnd.choice(WORDS) for _ in range(500)) for _ in range(8_000)]
    table = pa.table({"text": rows})
    result_of = {}
    for groups, size in (("one", len(rows)), ("many", len(rows) // 96 + 1)):
        path = tmp_path / f"{groups}.parquet"
        pq.write_table(table, path, row_group_size=size)
        config = write_config(tmp_path / groups, [phase("Rows", 10, {"file": str(path)})], threads=2)
        result = cli("ingest", "-c", config)
        assert result.code == 0, result.err
        m = manifest(work(config) / "ingest" / "01-rows")
        assert m["counts"]["documents"] == len(rows)
        result_of[groups] = (m["peak_rss_mb"], chunk_counts(work(config) / "ingest" / "01-rows"))
    assert pq.ParquetFile(tmp_path / "one.parquet").metadata.num_row_groups == 1
    assert result_of["one"][1] == result_of["many"][1]
    assert result_of["one"][0] - result_of["many"][0] < 20, result_of


# ================================================================ directories


def test_empty_directory_is_a_config_error(tmp_path):
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    (empty / "notes.md").write_text("not a source")
    config = write_config(tmp_path / "p", [phase("Only", 20, {"path": str(empty)})])
    result = cli("run", "-c", config)
    assert result.code == 2, result.err
    line = error_line(result.err)
    assert "phases[0].sources[0].path" in line and str(empty) in line and "no .txt" in line
    assert f" line {line_of(config, 'path:')}:" in line, "the YAML line of the source"
    assert not work(config).exists(), "nothing is written before the config is valid"


def test_symlink_loops_are_followed_once(tmp_path):
    folder = tmp_path / "data"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "a.txt").write_bytes(GOOD)
    (folder / "sub" / "up").symlink_to(folder, target_is_directory=True)
    (folder / "self").symlink_to(folder, target_is_directory=True)
    (folder / "again.txt").symlink_to(folder / "sub" / "a.txt")
    config = write_config(tmp_path / "p", [phase("Only", 20, {"path": str(folder)})])
    result = cli("run", "-c", config)
    assert result.code == 0, result.err
    m = manifest(work(config) / "ingest" / "01-only")
    assert m["inputs"]["path"] == [str(folder / "again.txt")], "one file, listed once"


@pytest.mark.parametrize("link", ["loop", "dangling"])
def test_symlink_to_no_file(tmp_path, link):
    """A ``.txt`` link that leads nowhere: with on_bad_file: fail, an error before any
    work (naming it); with skip, it is left out."""
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "a.txt").write_bytes(GOOD)
    bad = folder / "b.txt"
    if link == "loop":
        bad.symlink_to(bad)
    else:
        bad.symlink_to(tmp_path / "gone.txt")
    config = write_config(tmp_path / "p", [phase("Only", 20, {"path": str(folder)})])
    result = cli("run", "-c", config)
    assert result.code == 2, result.err
    line = error_line(result.err)
    assert str(bad) in line and ("loop" in line if link == "loop" else "broken symbolic link" in line)
    assert not work(config).exists()
    config = write_config(tmp_path / "p", [phase("Only", 20, {"path": str(folder)})], on_bad_file="skip")
    result = cli("run", "-c", config)
    assert result.code == 0, result.err


def test_file_source_that_is_a_symlink_loop(tmp_path):
    loop = tmp_path / "loop.txt"
    loop.symlink_to(loop)
    config = write_config(tmp_path / "p", [phase("Only", 20, {"file": str(loop)})])
    result = cli("run", "-c", config)
    assert result.code == 2, result.err
    line = error_line(result.err)
    assert "phases[0].sources[0].file" in line
    assert not work(config).exists()


def test_unreadable_file(tmp_path):
    prefix = without_root_powers()
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "a.txt").write_bytes(GOOD)
    locked = folder / "b.txt"
    locked.write_bytes(GOOD)
    locked.chmod(0)
    config = write_config(tmp_path / "p", [phase("Only", 20, {"path": str(folder)})])
    result = cli("run", "-c", config, prefix=prefix)
    assert result.code == 2, result.err
    line = error_line(result.err)
    assert str(locked) in line and "permission denied" in line and "phases[0].sources[0].path" in line
    assert not work(config).exists()
    # on_bad_file: skip reads the rest and records the file
    config = write_config(tmp_path / "p", [phase("Only", 20, {"path": str(folder)})], on_bad_file="skip")
    result = cli("run", "-c", config, prefix=prefix)
    assert result.code == 0, result.err
    bad = manifest(work(config) / "ingest" / "01-only")["counts"]["bad_files"]
    assert [b["path"] for b in bad] == [str(locked)] and "permission denied" in bad[0]["error"]


def test_the_first_unreadable_file_in_the_listing_order_is_named(tmp_path):
    """Files are checked folder by folder, but the error names the first in the
    order files are read (by relative path): ``a/z.txt`` before ``b.txt``."""
    prefix = without_root_powers()
    folder = tmp_path / "data"
    (folder / "a").mkdir(parents=True)
    for locked in (folder / "b.txt", folder / "a" / "z.txt"):
        locked.write_bytes(GOOD)
        locked.chmod(0)
    (folder / "c.txt").write_bytes(GOOD)
    config = write_config(tmp_path / "p", [phase("Only", 20, {"path": str(folder)})])
    result = cli("run", "-c", config, prefix=prefix)
    assert result.code == 2, result.err
    line = error_line(result.err)
    assert str(folder / "a" / "z.txt") in line and "permission denied" in line, line


def test_unreadable_folder(tmp_path):
    prefix = without_root_powers()
    folder = tmp_path / "data"
    (folder / "closed").mkdir(parents=True)
    (folder / "a.txt").write_bytes(GOOD)
    (folder / "closed" / "b.txt").write_bytes(GOOD)
    (folder / "closed").chmod(0)
    try:
        for policy in ("fail", "skip"):
            config = write_config(tmp_path / "p", [phase("Only", 20, {"path": str(folder)})], on_bad_file=policy)
            result = cli("run", "-c", config, prefix=prefix)
            assert result.code == 2, result.err
            line = error_line(result.err)
            assert str(folder / "closed") in line and "cannot list directory" in line
            assert not work(config).exists()
    finally:
        (folder / "closed").chmod(stat.S_IRWXU)


def _run_removing_a_file_once_ingest_starts(tmp_path, policy: str):
    """``toktok ingest`` on two files; the second is deleted as soon as ingest has
    listed them (its phase folder appears) and is still reading the first (3 MB)."""
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "a.txt").write_text(big_text(3_000_000), encoding="utf-8")
    doomed = folder / "b.txt"
    doomed.write_bytes(GOOD)
    config = write_config(tmp_path / "p", [phase("Only", 20, {"path": str(folder)})], on_bad_file=policy)
    proc = start("ingest", "-c", config)
    if not wait_for(lambda: (work(config) / "ingest" / "01-only").is_dir(), proc) or proc.poll() is not None:
        pytest.fail(f"ingest ended before the file could be removed: {finish(proc)}")
    doomed.unlink()
    return config, doomed, finish(proc)


def test_file_vanishing_during_the_run_fails_naming_it(tmp_path):
    config, doomed, result = _run_removing_a_file_once_ingest_starts(tmp_path, "fail")
    assert result.code == 1, result.err
    line = error_line(result.err)
    assert str(doomed) in line and "no longer exists" in line
    assert_nothing_claims_completeness(config, "ingest/01-only")


def test_file_vanishing_during_the_run_is_skipped_when_asked(tmp_path):
    """With ``on_bad_file: skip`` the vanished file is recorded and the run finishes
    (its manifest keeps the fingerprints taken when the run listed its files)."""
    config, doomed, result = _run_removing_a_file_once_ingest_starts(tmp_path, "skip")
    assert result.code == 0, result.err
    bad = manifest(work(config) / "ingest" / "01-only")["counts"]["bad_files"]
    assert [b["path"] for b in bad] == [str(doomed)]


# ================================================================ configuration: exit 2, the key and its YAML line

TEMPLATE = [
    "output: {out}/tok.tiktoken",  # 1
    "threads: 1",  # 2
    "heldout_share: 0",  # 3
    'special_tokens: ["<|endoftext|>", "<|im_end|>"]',  # 4
    "phases:",  # 5
    "  - name: English",  # 6
    "    merges: 20",  # 7
    "    sources:",  # 8
    "      - path: {data}",  # 9
]


def top(text):  # a top-level line, line 10
    return lambda lines: lines + [text]


def source(text):  # a key of the first source, line 10
    return lambda lines: lines + ["        " + text]


def phase_key(text):  # a key of the first phase, line 8
    return lambda lines: lines[:7] + ["    " + text] + lines[7:]


def replace(n, text):
    return lambda lines: lines[: n - 1] + [text] + lines[n:]


def drop(*ns):
    return lambda lines: [line for i, line in enumerate(lines, 1) if i not in ns]


def second_phase(name):  # a second phase named ``name``, lines 10-13
    return lambda lines: lines + [f"  - name: {name}", "    merges: 5", "    sources:", "      - path: {data}"]


def _tiktoken_lines(ranks: dict[bytes, int]) -> list[str]:
    return [f"{base64.b64encode(t).decode()} {r}" for t, r in sorted(ranks.items(), key=lambda x: x[1])]


BYTES = {bytes([b]): b for b in range(256)}
WARM = {  # file name: lines of a .tiktoken with one docs/outputs.md fault (line 258 is the faulty one)
    "dup-rank.tiktoken": _tiktoken_lines(BYTES) + ["YWI= 256", "Y2Q= 256"],
    "dup-bytes.tiktoken": _tiktoken_lines(BYTES) + ["YWI= 256", "YWI= 257"],
    "missing-byte.tiktoken": _tiktoken_lines(BYTES)[:10] + _tiktoken_lines(BYTES)[11:],
    "bad-base64.tiktoken": _tiktoken_lines(BYTES) + ["YWI= 256", "!!not-base64 257"],
    "negative-rank.tiktoken": _tiktoken_lines(BYTES) + ["YWI= 256", "Y2Q= -3"],
    "not-a-vocabulary.tiktoken": ["hello world, this is prose", ""],
}

# (id, edit, words the message must hold, expected YAML line or None)
CONFIG_CASES = [
    # -- presence
    ("output-missing", drop(1), ["output is required"], None),
    ("phases-missing", drop(5, 6, 7, 8, 9), ["phases is required"], None),
    ("phase-name-missing", lambda ls: drop(7)(replace(6, "  - merges: 20")(ls)), ["phases[0].name is required"], 6),
    ("merges-missing", drop(7), ["phases[0].merges is required"], 6),
    ("sources-missing", drop(8, 9), ["phases[0].sources is required"], 6),
    ("source-neither-path-nor-file", replace(9, "      - text_column: body"), ["phases[0].sources[0]", "has neither"], 9),
    ("source-both-path-and-file", source("file: {data}/a.txt"), ["phases[0].sources[0]", "has both"], 9),
    ("warm-start-file-missing", top("warm_start: {{special_tokens: {{'<|x|>': 300}}}}"), ["warm_start.file is required"], 10),
    # -- types and ranges, top level
    ("output-not-a-string", replace(1, "output: 5"), ["output must be a path", "5 (an integer)"], 1),
    ("output-wrong-suffix", replace(1, "output: {out}/tok.txt"), ["output must be a file name ending in .tiktoken"], 1),
    ("output-a-directory", replace(1, "output: {dir}.tiktoken"), ["output is an existing directory"], 1),
    ("working-set-zero", top("working_set_mb: 0"), ["working_set_mb must be an integer >= 1", "got 0"], 10),
    ("working-set-string", top("working_set_mb: lots"), ["working_set_mb must be an integer", "'lots' (a string)"], 10),
    ("working-set-float", top("working_set_mb: 1.5"), ["working_set_mb must be an integer", "1.5 (a number)"], 10),
    ("working-set-null", top("working_set_mb:"), ["working_set_mb must be an integer", "got null"], 10),
    ("threads-zero", replace(2, "threads: 0"), ["threads must be -1 (all cores) or an integer >= 1"], 2),
    ("threads-string", replace(2, "threads: all"), ["threads must be -1", "'all' (a string)"], 2),
    ("verbose-string", top("verbose: 'yes'"), ["verbose must be true or false", "'yes'"], 10),
    ("verbose-int", top("verbose: 1"), ["verbose must be true or false", "1 (an integer)"], 10),
    ("special-tokens-string", replace(4, "special_tokens: '<|endoftext|>'"), ["special_tokens must be a list"], 4),
    ("special-token-empty", replace(4, 'special_tokens: ["<|endoftext|>", ""]'),
     ["special_tokens[1] must be a non-empty string"], 4),
    ("special-token-not-string", replace(4, "special_tokens: [5]"), ["special_tokens[0] must be a non-empty string"], 4),
    ("special-token-repeated", replace(4, 'special_tokens: ["<|a|>", "<|b|>", "<|a|>"]'),
     ["special_tokens[2]", "repeats special_tokens[0]"], 4),
    ("special-token-nested", replace(4, 'special_tokens: ["<|a|>", "x<|a|>y"]'),
     ["special_tokens[1]", "inside", "overlap"], 4),
    ("hardcoded-merges-string", top("hardcoded_merges: 'no'"), ["hardcoded_merges must be true or false"], 10),
    ("pattern-empty", top("pattern: ''"), ["pattern must be a name"], 10),
    ("pattern-bad-regex", top("pattern: '(unclosed'"), ["pattern is not a valid regex"], 10),
    ("pattern-tiktoken-cannot-use", top("pattern: '\\X+|\\s+'"), ["pattern is a regex tiktoken cannot use"], 10),
    ("seed-negative", top("seed: -1"), ["seed must be an integer >= 0"], 10),
    ("seed-too-big", top("seed: 9223372036854775808"), ["seed must be an integer <= 9223372036854775807"], 10),
    ("work-dir-a-file", top("work_dir: {data}/a.txt"), ["work_dir exists and is not a directory"], 10),
    ("work-dir-holds-a-source", top("work_dir: {data}"), ["work_dir", "contains a source"], 10),
    ("min-frequency-zero", top("min_frequency: 0"), ["min_frequency must be an integer >= 1"], 10),
    ("heldout-share-too-big", replace(3, "heldout_share: 0.9"), ["heldout_share must be a number between 0 and 0.5"], 3),
    ("heldout-share-nan", replace(3, "heldout_share: .nan"), ["heldout_share must be a number between 0 and 0.5"], 3),
    ("heldout-share-string", replace(3, "heldout_share: some"), ["heldout_share must be a number"], 3),
    ("pad-to-zero", top("pad_to_multiple_of: 0"), ["pad_to_multiple_of must be an integer >= 1 or null"], 10),
    ("pad-to-string", top("pad_to_multiple_of: '128'"), ["pad_to_multiple_of must be an integer"], 10),
    ("max-token-bytes-one", top("max_token_bytes: 1"), ["max_token_bytes must be an integer >= 2 or null"], 10),
    ("export-hf-string", top("export_hf: 'sure'"), ["export_hf must be true or false"], 10),
    ("max-piece-bytes-small", top("max_piece_bytes: 10"), ["max_piece_bytes must be an integer >= 1024"], 10),
    ("on-bad-file-unknown", top("on_bad_file: ignore"), ["on_bad_file must be one of fail, skip"], 10),
    ("on-bad-file-typo", top("on_bad_file: skp"), ["did you mean 'skip'?"], 10),
    ("warm-start-string", top("warm_start: base.tiktoken"), ["warm_start must be a mapping"], 10),
    ("warm-start-no-such-file", top("warm_start: {{file: {tmp}/nope.tiktoken}}"), ["warm_start.file does not exist"], 10),
    ("warm-start-specials-list", top("warm_start: {{file: {base}, special_tokens: ['<|x|>']}}"),
     ["warm_start.special_tokens must be a mapping"], 10),
    ("warm-start-special-id-negative", top("warm_start: {{file: {base}, special_tokens: {{'<|x|>': -1}}}}"),
     ["warm_start.special_tokens['<|x|>'] must be an integer >= 0"], 10),
    ("warm-start-special-ids-shared", top("warm_start: {{file: {base}, special_tokens: {{'<|x|>': 300, '<|y|>': 300}}}}"),
     ["has id 300, already used by '<|x|>'"], 10),
    # -- phases and sources
    ("phases-empty", lambda ls: ls[:4] + ["phases: []"], ["phases must be a non-empty list"], 5),
    ("phases-a-mapping", lambda ls: ls[:4] + ["phases: {{name: English}}"], ["phases must be a non-empty list"], 5),
    ("phase-name-empty", replace(6, "  - name: ''"), ["phases[0].name must be a non-empty string"], 6),
    ("phase-name-number", replace(6, "  - name: 5"), ["phases[0].name must be a non-empty string", "5 (an integer)"], 6),
    ("merges-negative", replace(7, "    merges: -1"), ["phases[0].merges must be an integer >= 0", "-1"], 7),
    ("merges-string", replace(7, "    merges: many"), ["phases[0].merges must be an integer >= 0", "'many'"], 7),
    ("merges-float", replace(7, "    merges: 3e4"), ["phases[0].merges must be an integer >= 0", "30000.0 (a number)"], 7),
    ("merges-bool", replace(7, "    merges: true"), ["phases[0].merges must be an integer >= 0", "true (a boolean)"], 7),
    ("merges-too-many", replace(7, "    merges: 2147483648"), ["phases[0].merges must be an integer <= 2147483647"], 7),
    ("sources-empty", lambda ls: ls[:7] + ["    sources: []"], ["phases[0].sources must be a non-empty list"], 8),
    ("source-not-a-mapping", replace(9, "      - {data}"), ["phases[0].sources[0] must be a mapping"], 9),
    ("source-path-missing", replace(9, "      - path: {tmp}/nowhere"), ["phases[0].sources[0].path does not exist"], 9),
    ("source-path-is-a-file", replace(9, "      - path: {data}/a.txt"), ["phases[0].sources[0].path is a file"], 9),
    ("source-file-missing", replace(9, "      - file: {tmp}/nope.txt"), ["phases[0].sources[0].file does not exist"], 9),
    ("documents-unknown", source("documents: paragraph"),
     ["phases[0].sources[0].documents must be file, blank-line, line or a mapping {split_on: STRING}"], 10),
    ("documents-split-on-empty", source("documents: {{split_on: ''}}"),
     ["phases[0].sources[0].documents.split_on must be a non-empty string"], 10),
    ("source-empty-dir", replace(9, "      - path: {tmp}/empty"), ["phases[0].sources[0].path", "no .txt"], 9),
    ("text-column-empty", source("text_column: ''"), ["phases[0].sources[0].text_column must be a non-empty string"], 10),
    ("text-column-number", source("text_column: 5"), ["phases[0].sources[0].text_column must be a non-empty string"], 10),
    ("weight-zero", source("weight: 0"), ["phases[0].sources[0].weight must be a positive number", "got 0"], 10),
    ("weight-negative", source("weight: -2"), ["phases[0].sources[0].weight must be a positive number"], 10),
    ("weight-string", source("weight: heavy"), ["phases[0].sources[0].weight must be a positive number"], 10),
    ("weight-bool", source("weight: true"), ["phases[0].sources[0].weight", "true (a boolean)"], 10),
    ("weight-infinite", source("weight: .inf"), ["phases[0].sources[0].weight must be a positive number"], 10),
    ("include-a-string", source("include: '*.txt'"), ["phases[0].sources[0].include must be a list of strings"], 10),
    ("exclude-not-strings", source("exclude: [1]"), ["phases[0].sources[0].exclude[0] must be a non-empty string"], 10),
    ("include-with-file", replace(9, "      - {{file: {data}/a.txt, include: ['*']}}"),
     ["phases[0].sources[0].include is only allowed with `path:`"], 9),
    # -- unknown keys, with a did-you-mean, and duplicate phase names
    ("unknown-top-key-typo", top("ouput: x.tiktoken"), ["ouput is not a known key", "did you mean 'output'?"], 10),
    ("unknown-top-key-threads", top("thread: 2"), ["thread is not a known key", "did you mean 'threads'?"], 10),
    ("unknown-top-key-belongs-in-phase", top("merges: 5"), ["merges is not a known key", "it belongs in a phase"], 10),
    ("unknown-phase-key", phase_key("mergez: 5"), ["phases[0].mergez is not a known key", "did you mean 'merges'?"], 8),
    ("unknown-source-key", source("text_col: body"),
     ["phases[0].sources[0].text_col is not a known key", "did you mean 'text_column'?"], 10),
    ("unknown-warm-start-key", top("warm_start: {{file: {base}, specials: {{}}}}"),
     ["warm_start.specials is not a known key", "did you mean 'special_tokens'?"], 10),
    ("duplicate-key", top("threads: 2"), ["threads is given twice (lines 2 and 10)"], 10),
    ("duplicate-phase-name", second_phase("English"), ["phases[1].name", "must be unique"], 10),
    ("duplicate-phase-name-case", second_phase("ENGLISH"), ["phases[1].name", "must be unique"], 10),
    # -- YAML itself
    ("yaml-syntax", top("output: [unclosed"), ["invalid YAML"], None),
    ("yaml-python-tag", top("seed: !!python/object/apply:os.system ['echo hacked']"), ["seed uses an unsupported YAML tag"], 10),
    # -- warm-start files that are not valid .tiktoken (docs/outputs.md); found before work starts
    *[(f"warm-start-{name.removesuffix('.tiktoken')}", top(f"warm_start: {{{{file: {{tmp}}/{name}}}}}"),
       ["warm_start.file", "is not a usable base vocabulary", name, problem], 10)
      for name, problem in [("dup-rank.tiktoken", "line 258: duplicate rank 256"),
                            ("dup-bytes.tiktoken", "line 258: duplicate token b'ab'"),
                            ("missing-byte.tiktoken", "lacks 1 of the 256 single bytes"),
                            ("bad-base64.tiktoken", "line 258: invalid base64"),
                            ("negative-rank.tiktoken", "line 258: negative rank -3"),
                            ("not-a-vocabulary.tiktoken", "line 1")]],
    ("warm-start-special-id-is-a-rank", top("warm_start: {{file: {base}, special_tokens: {{'<|x|>': 65}}}}"),
     ["warm_start.special_tokens do not fit", "'<|x|>' has id 65, which is already the rank of b'A'"], 10),
    ("warm-start-companion-special-id-is-a-rank", top("warm_start: {{file: {tmp}/companion.tiktoken}}"),
     ["warm_start.file", "'<|y|>' has id 10, which is already the rank of"], 10),
    ("warm-start-special-nested-in-new-one", lambda ls: top("warm_start: {{file: {base}, special_tokens: {{'<|end': 300}}}}")(
        replace(4, 'special_tokens: ["<|endoftext|>"]')(ls)), ["'<|end' is inside '<|endoftext|>'"], None),
]


@pytest.fixture(scope="module")
def config_results(tmp_path_factory):
    """Every CONFIG_CASES config, each run by ``toktok run`` (in parallel: they are independent)."""
    root = tmp_path_factory.mktemp("configs")
    data = root / "data"
    data.mkdir()
    (data / "a.txt").write_bytes(GOOD)
    (root / "empty").mkdir()
    (root / "notes.csv").write_text("a,b\n")
    (root / "taken.tiktoken").mkdir()
    write_tiktoken(root / "base.tiktoken", BYTES | {b"ab": 256})
    for name, lines in WARM.items():
        (root / name).write_text("\n".join(lines) + "\n")
    write_tiktoken(root / "companion.tiktoken", BYTES | {b"ab": 256})
    (root / "companion.meta.json").write_text(json.dumps({"format": "toktoktok-meta/1",
                                                          "special_tokens": {"<|y|>": 10}}))
    places = {"data": data, "tmp": root, "base": root / "base.tiktoken", "dir": root / "taken"}
    jobs = {}
    for case_id, edit, _, _ in CONFIG_CASES:
        folder = root / case_id
        folder.mkdir()
        text = "\n".join(edit(list(TEMPLATE))).replace("{out}", str(folder / "out"))
        config = folder / "config.yaml"
        config.write_text(text.format(**places) + "\n")
        jobs[case_id] = config
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        results = dict(zip(jobs, pool.map(lambda c: cli("run", "-c", c), jobs.values())))
    return {case_id: (jobs[case_id], results[case_id]) for case_id in jobs}


@pytest.mark.parametrize(("case_id", "words", "line"), [(c[0], c[2], c[3]) for c in CONFIG_CASES],
                         ids=[c[0] for c in CONFIG_CASES])
def test_config_error(config_results, case_id, words, line):
    config, result = config_results[case_id]
    assert result.code == 2, (result.code, result.err)
    message = error_line(result.err)
    assert str(config) in message, "the message names the config file"
    for word in words:
        assert word in message, message
    if line is not None:
        assert f"config.yaml line {line}: " in message, message
    assert not (config.parent / "out").exists(), "nothing is written before the config is valid"


def test_merges_zero_and_a_budget_larger_than_the_data_are_warnings(tmp_path):
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    (tiny / "a.txt").write_text("the cat sat on the mat. the cat sat on the hat.\n")
    config = write_config(tmp_path / "p", [phase("Nothing", 0, {"path": str(tiny)}),
                                           phase("Too Much", 100_000, {"path": str(tiny)})], special_tokens=SPECIALS)
    result = cli("run", "-c", config)
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    assert "warning: phase 'Nothing' has merges: 0" in result.err
    assert "warning: phase 'Too Much' ran out of pairs" in result.err
    made = manifest(work(config) / "train" / "02-too-much")["counts"]["merges_made"]
    assert 0 < made < 100_000
    enc = toktoktok.load(output(config))
    assert enc.n_vocab == 1417 + made + len(SPECIALS)


# ================================================================ output folders that cannot be written: exit 2


def _small_project(tmp_path: Path, **settings) -> Path:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / "a.txt").write_bytes(GOOD)
    config = write_config(tmp_path / "p", [phase("Only", 20, {"path": str(data)})], **settings)
    return config


def test_output_folder_on_a_read_only_file_system(tmp_path, mount_tmpfs):
    read_only = mount_tmpfs("ro", size="1m", read_only=True)
    config = _small_project(tmp_path, output=str(read_only / "out" / "tok.tiktoken"))
    result = cli("run", "-c", config)
    assert result.code == 2, result.err
    line = error_line(result.err)
    assert f"config.yaml line {line_of(config, 'output:')}: output cannot be written" in line
    assert str(read_only) in line and "read-only file system" in line
    assert list(read_only.iterdir()) == []


def test_work_dir_on_a_read_only_file_system(tmp_path, mount_tmpfs):
    read_only = mount_tmpfs("ro", size="1m", read_only=True)
    config = _small_project(tmp_path, work_dir=str(read_only / "work"))
    result = cli("run", "-c", config)
    assert result.code == 2, result.err
    line = error_line(result.err)
    assert f"line {line_of(config, 'work_dir:')}: work_dir cannot be written" in line and "read-only" in line
    assert not output(config).parent.exists()


def test_output_folder_without_write_permission(tmp_path):
    prefix = without_root_powers()
    closed = tmp_path / "closed"
    closed.mkdir()
    closed.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        config = _small_project(tmp_path, output=str(closed / "tok.tiktoken"))
        result = cli("run", "-c", config, prefix=prefix)
        assert result.code == 2, result.err
        line = error_line(result.err)
        assert "output cannot be written" in line and "permission denied" in line
        assert list(closed.iterdir()) == []
    finally:
        closed.chmod(stat.S_IRWXU)


def test_output_folder_that_is_a_file(tmp_path):
    (tmp_path / "blocker").write_text("a file where the output folder should be")
    config = _small_project(tmp_path, output=str(tmp_path / "blocker" / "out" / "tok.tiktoken"))
    result = cli("run", "-c", config)
    assert result.code == 2, result.err
    line = error_line(result.err)
    assert "output needs the folder" in line and f"{tmp_path / 'blocker'} is a file" in line


# ================================================================ counts never overflow


def test_a_huge_weight_is_a_clear_error(tmp_path):
    """weight 1e18 (counts would pass 2**63) is refused when the config is read:
    exit 2 naming the key, its line and the bound; nothing is made."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_bytes(GOOD)
    config = write_config(tmp_path / "p", [phase("Only", 20, {"path": str(data), "weight": 1e18})])
    result = cli("run", "-c", config)
    assert result.code == 2, result.err
    line = error_line(result.err)
    assert "phases[0].sources[0].weight must be a positive number at most 1,000,000" in line and " line " in line
    assert not (tmp_path / "p" / "out.work").exists() and not list((tmp_path / "p").rglob("*.tiktoken"))


# Weights are at most 1,000,000 (the config refuses more), so a count passes
# 2**63 only with pieces seen 10**13 times; the guards below stay, and are
# tested on the count tables directly.


def test_weighted_counts_never_wrap():
    """30 x 7e17 passes 2**64: an error, not the wrapped 2.55e18."""
    from toktoktok.counts import from_lists, weighted

    with pytest.raises(OverflowError, match=r"2\*\*63"):
        weighted(from_lists([b"x", b" x"], [1, 30]), 7 * 10**17)


def test_summed_counts_never_wrap():
    """Each file's counts fit (7e18 < 2**63); their sum over three files does not:
    an error, not a wrapped count."""
    from toktoktok.counts import from_lists, sum_tables

    table = from_lists([b"x", b" x"], [7 * 10**17, 7 * 10**18])
    with pytest.raises(OverflowError, match=r"2\*\*63"):
        sum_tables([table, table, table])


def test_pair_counts_never_overflow():
    """Two pieces of 6e18 each (both below 2**63) hold the pair (a, b) 1.2e19 times:
    an error, not a pair count wrapped negative and never merged."""
    from toktoktok.counts import from_lists, inventory

    with pytest.raises(OverflowError, match=r"2\*\*63"):
        inventory(from_lists([b"ab", b" ab"], [6 * 10**18, 6 * 10**18]))


# ================================================================ interruption: SIGKILL, Ctrl-C, two runs at once


@pytest.fixture(scope="module")
def interrupt_corpus(tmp_path_factory):
    """Two phases of about 1 MB of English, and the .tiktoken of an uninterrupted run.

    ``make(folder, **settings)`` writes a config for them in ``folder``."""
    root = tmp_path_factory.mktemp("interrupt")
    a, b = root / "data" / "a", root / "data" / "b"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    (a / "one.txt").write_text(big_text(1_500_000)[:1_500_000])
    (a / "two.txt").write_text(english_text(100_000, offset=200_000))
    (b / "three.txt").write_text(big_text(2_000_000)[300_000:1_300_000])

    def make(folder: Path, **settings) -> Path:
        settings = {"threads": 2, "special_tokens": SPECIALS, "heldout_share": 0.01} | settings
        return write_config(folder, [phase("A", 3_000, {"path": str(a)}), phase("B", 2_000, {"path": str(b)})],
                            **settings)

    reference = make(root / "reference")
    result = cli("run", "-c", reference)
    assert result.code == 0, result.err
    return make, output(reference).read_bytes(), reference


STAGE_FOLDERS = {"ingest": "ingest/02-b", "train": "train/01-a", "export": "export"}


def _check_claims(config: Path, reference: bytes) -> None:
    """Every manifest's outputs are there, whole; a .tiktoken present is the right one."""
    root = work(config)
    for folder in [p.parent for p in root.rglob("manifest.json")]:
        for out in manifest(folder)["outputs"]:
            path = Path(out["path"]) if "path" in out else folder / out["name"]
            assert path.is_file() and sha256(path) == out["sha256"], f"{folder} claims {path}, which is not intact"
    if output(config).exists():
        assert output(config).read_bytes() == reference, "a .tiktoken left behind differs from the right one"


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def _interrupt_at(config: Path, stage: str, delay: float, sig: int, mark: Path | None = None):
    """Start ``toktok run``; once this run creates ``mark`` (default: the stage's folder,
    which a stage starting afresh makes anew), wait ``delay`` and send ``sig``."""
    mark = mark or work(config) / STAGE_FOLDERS[stage]
    before = _identity(mark)
    proc = start("run", "-c", config)
    started = wait_for(lambda: _identity(mark) not in (None, before), proc, every=0.001)
    assert started and proc.poll() is None, f"the run ended before reaching {stage}: {finish(proc)}"
    time.sleep(delay)
    signal_group(proc, sig)
    return finish(proc)


@slow
@pytest.mark.parametrize("seed", [0, 1])
def test_sigkill_in_every_stage_then_rerun(tmp_path, interrupt_corpus, seed):
    """SIGKILL (to the run and its workers) in ingest, then in train, then in export,
    restarting each time: the finished stages are reused (their manifests unchanged),
    nothing on disk ever claims more than it has, and the final .tiktoken is
    byte-identical to an uninterrupted run's. Seed 0 kills as each stage starts,
    seed 1 at a random point inside it."""
    make, reference, reference_config = interrupt_corpus
    config = make(tmp_path / "p")
    rnd = random.Random(seed)
    done = work(reference_config)  # how long each stage took there
    spans = {"ingest": manifest(done / "ingest" / "02-b")["seconds"]["total"],
             "train": manifest(done / "train" / "01-a")["seconds"]["total"],
             "export": sum(manifest(done / "export")["seconds"].values())}
    kept: dict[str, bytes] = {}
    killed = []
    for stage in ("ingest", "train", "export"):
        delay = 0.0 if seed == 0 else rnd.uniform(0, 0.6 * spans[stage])
        if (work(config) / STAGE_FOLDERS[stage] / "manifest.json").exists():
            continue  # the kill meant for the stage before landed after this one finished
        result = _interrupt_at(config, stage, delay, signal.SIGKILL)
        killed.append(stage)
        assert result.code == -signal.SIGKILL, (stage, delay, result)
        now = manifests(work(config))
        for name, data in kept.items():
            assert now.get(name) == data, f"{name}, finished before, changed by the run killed in {stage}"
        _check_claims(config, reference)
        kept = now
    assert seed != 0 or killed == ["ingest", "train", "export"], "a kill as each stage starts lands in it"
    final = cli("run", "-c", config)
    assert final.code == 0, final.err
    assert output(config).read_bytes() == reference
    now = manifests(work(config))
    assert all(now.get(name) == data for name, data in kept.items()), "finished stages are reused, not redone"
    if "train/02-b/manifest.json" in kept:
        assert final.out.count("(skipped: up to date)") == 2, final.out
    assert temp_files(work(config)) == [] and temp_files(output(config).parent) == []


@slow
def test_ctrl_c_in_every_stage_says_what_was_kept(tmp_path, interrupt_corpus):
    """Ctrl-C (SIGINT to the process group) in ingest, train and export (once the
    staged .tiktoken is written in WORK/export/staged, while export validates it and
    writes the report, before anything is published): exit 130, one line saying which
    stages were kept and which one is redone, no traceback, no .tiktoken left by the
    interrupted export; the rerun finishes the job."""
    make, reference, _ = interrupt_corpus
    config = make(tmp_path / "p", threads=1)
    expectations = {
        "ingest": (["kept ingest 'A'", "ingest 'B' was cut short"], "ingest/02-b"),
        "train": (["kept ingest 'A', ingest 'B'", "train 'A' was cut short"], "train/01-a"),
        "export": (["train 'A', train 'B'", "export was cut short"], "export"),
    }
    for stage, (words, folder) in expectations.items():
        # the published .tiktoken appears only as the last step: the mark is the staged one
        staged = work(config) / "export" / "staged" / output(config).name
        result = _interrupt_at(config, stage, 0.0, signal.SIGINT, staged if stage == "export" else None)
        assert result.code == 130, (stage, result)
        line = interrupted_line(result.err)
        for word in words:
            assert word in line, line
        assert "rerun" in line
        assert not (work(config) / folder / "manifest.json").exists()
        assert_nothing_claims_completeness(config)
        _check_claims(config, reference)
    final = cli("run", "-c", config)
    assert final.code == 0, final.err
    assert output(config).read_bytes() == reference


def test_ctrl_c_while_workers_start_prints_no_traceback(tmp_path, interrupt_corpus):
    """Ctrl-C while the worker processes are still starting (importing): exit 130
    with one line, and none of the workers prints a traceback of its own."""
    make, _, _ = interrupt_corpus
    # a custom pattern takes the regex path, in worker processes (the named patterns' scanner uses threads);
    # o200k's in a group, since its own string would be o200k
    config = make(tmp_path / "p", pattern=f"(?:{NAMED_PATTERNS['o200k'].tiktoken})")
    proc = start("ingest", "-c", config)

    def worker_starting() -> bool:
        for child in children(proc.pid):
            try:
                if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                    return True
            except OSError:
                pass
        return False

    if not wait_for(worker_starting, proc, every=0.001):
        pytest.fail(f"no worker process was started: {finish(proc)}")
    time.sleep(0.05)
    signal_group(proc, signal.SIGINT)
    result = finish(proc)
    if result.code != 130:
        pytest.fail(f"not interrupted: {result}")
    interrupted_line(result.err)  # one line, no traceback


def test_the_tiktoken_appears_only_once_validated(tmp_path, interrupt_corpus):
    """The export's .tiktoken takes its name only after the export validated it: then a
    run killed at any point leaves no .tiktoken that was never validated. Watched
    from outside: ``toktok export -v`` is frozen (SIGSTOP) the moment the .tiktoken
    appears, and its stderr must already hold the line of the finished validation
    step (``export: pieces checked with tiktoken: ... in N s``)."""
    make, reference, _ = interrupt_corpus
    config = make(tmp_path / "p")
    if cli("ingest", "-c", config).code != 0 or cli("train", "-c", config).code != 0:
        pytest.fail("ingest or train failed")
    proc = start("export", "-c", config, "-v")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    appeared = wait_for(output(config).exists, proc, every=0.0005)
    signal_group(proc, signal.SIGSTOP)
    time.sleep(0.2)  # what was written before the freeze reaches the pipe's reader
    seen = list(lines)
    signal_group(proc, signal.SIGCONT)
    out = proc.stdout.read()
    proc.wait(timeout=120)
    reader.join(timeout=10)
    if not appeared or proc.returncode != 0:
        pytest.fail(f"the export did not run through: {proc.returncode} {out} {lines}")
    assert any(line.startswith("export: pieces checked with tiktoken:") for line in seen), (
        f"the .tiktoken appeared before its validation had finished; stderr then: {seen}")
    assert output(config).read_bytes() == reference


@slow
def test_two_runs_on_one_work_dir(tmp_path, interrupt_corpus):
    """While a run holds the work directory, a second run, any stage alone and
    `toktok clean` refuse at once with a clear message; the first run finishes right."""
    make, reference, _ = interrupt_corpus
    config = make(tmp_path / "p")
    first = start("run", "-c", config)
    assert wait_for(lambda: (work(config) / "ingest" / "01-a").is_dir(), first), "the first run never started"
    signal_group(first, signal.SIGSTOP)  # held in the middle of its ingest (with the lock) while the others try
    try:
        for args in (["run"], ["ingest"], ["train"], ["export"], ["clean", "-y"]):
            second = cli(*args, "-c", config)
            assert second.code == 1, (args, second)
            line = error_line(second.err)
            assert "another toktoktok run is using" in line and str(work(config)) in line
        assert (work(config) / "ingest" / "01-a").is_dir() and not (work(config) / "train").exists()
    finally:
        signal_group(first, signal.SIGCONT)
    result = finish(first)
    assert result.code == 0, result.err
    assert output(config).read_bytes() == reference


# ================================================================ disk full


WRITE_ORDER = ["tok.work/ingest/01-a/chunk-00000.arrow", "tok.work/ingest/01-a/heldout.arrow",
               "tok.work/ingest/01-a/manifest.json", "tok.work/ingest/02-b/chunk-00000.arrow",
               "tok.work/ingest/02-b/heldout.arrow", "tok.work/ingest/02-b/manifest.json",
               "tok.work/train/01-a/merges.arrow", "tok.work/train/01-a/manifest.json",
               "tok.work/train/02-b/merges.arrow", "tok.work/train/02-b/manifest.json", "tok.tiktoken",
               "tok.meta.json", "tok.report.png", "tok.report.json"]


@slow
@pytest.mark.parametrize(("stage", "big_file"), [("ingest", "tok.work/ingest/01-a/chunk-00000.arrow"),
                                                 ("train", "tok.work/train/01-a/merges.arrow"),
                                                 ("export", "tok.tiktoken"), ("export", "tok.report.json")])
def test_disk_full(tmp_path, interrupt_corpus, mount_tmpfs, stage, big_file):
    """A tmpfs (holding the output and the work directory) just too small for
    ``big_file``, sized from an uninterrupted run's files: exit 1 naming the file and
    the full disk, no manifest for the stage that failed, no .tiktoken, no temporary
    file."""
    make, _, reference_config = interrupt_corpus
    written = output(reference_config).parent
    pages = 0
    for name in WRITE_ORDER[: WRITE_ORDER.index(big_file)]:
        if (written / name).exists():  # the picture is drawn only with matplotlib
            pages += -(-(written / name).stat().st_size // 4096)
    pages += (written / big_file).stat().st_size // 4096 // 2  # half of it fits
    disk = mount_tmpfs("disk", size=f"{pages * 4}k")
    config = make(tmp_path / "p", output=str(disk / "out" / "tok.tiktoken"))
    result = cli("run", "-c", config)
    assert result.code == 1, result
    line = error_line(result.err)
    assert "No space left on device" in line and "cannot write" in line, line
    # the file named is the one being written when the disk filled: ``big_file``, or
    # (should the stage write in another order) another file of the same stage
    named = Path(re.search(r"cannot write (\S+): ", line).group(1))
    folder = {"ingest": work(config) / "ingest" / "01-a", "train": work(config) / "train" / "01-a"}.get(stage)
    if folder is not None:
        assert named.parent == folder, line
    else:
        assert named.parent in (output(config).parent, work(config) / "export") or "export" in named.parts, line
    failed = {"ingest": "ingest/01-a", "train": "train/01-a", "export": "export"}[stage]
    assert_nothing_claims_completeness(config, failed)  # the export's .tiktoken, written first, is removed
    assert temp_files(disk) == []
