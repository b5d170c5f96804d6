"""Reading every source format back into the documents written."""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import regex
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from toktoktok.config import Source
from toktoktok.sources import Block, ReadStats, SourceError, iter_blocks, list_source_files

DOCS = [
    "Hello world.\n\n",
    "def f():\n    return 1\n\n    # still f\n\n\n",
    "Ünïcödé 中文 text\r\n\r\n",
    "last, without newline",
]
ROWS = ["first row\n\nstill first", "", "third ✓", "x" * 50, "a\r\nb\n"]


def read_docs(path: Path, **kwargs) -> tuple[list[str], ReadStats]:
    """The documents of a file, checking the Block invariants on the way."""
    stats = ReadStats()
    docs: list[str] = []
    open_doc: list[str] | None = None
    for block in iter_blocks(path, stats=stats, **kwargs):
        assert isinstance(block, Block)
        if open_doc is None:
            assert block.doc == len(docs)
            open_doc = []
        assert block.doc == len(docs)
        open_doc.append(block.text)
        if block.end:
            docs.append("".join(open_doc))
            open_doc = None
    assert open_doc is None
    assert stats.documents == len(docs)
    return docs, stats


def write_jsonl(path: Path, rows: list, column: str = "text") -> None:
    lines = "".join(json.dumps({column: r, "id": i}) + "\n" for i, r in enumerate(rows))
    data = lines.encode()
    if path.name.endswith(".zst"):
        data = zstandard.ZstdCompressor().compress(data)
    elif path.name.endswith(".gz"):
        data = gzip.compress(data)
    path.write_bytes(data)


def write_text(path: Path, text: str) -> None:
    data = text.encode()
    if path.name.endswith(".zst"):
        data = zstandard.ZstdCompressor().compress(data)
    elif path.name.endswith(".gz"):
        data = gzip.compress(data)
    path.write_bytes(data)


# ------------------------------------------------------------ round trips


@pytest.mark.parametrize("name", ["a.txt", "a.txt.zst", "a.txt.gz"])
@pytest.mark.parametrize("block_chars", [1, 3, 7, 1 << 20])
def test_text_files_round_trip(tmp_path, name, block_chars):
    path = tmp_path / name
    write_text(path, "".join(DOCS))
    docs, stats = read_docs(path, block_chars=block_chars)
    assert docs == DOCS
    assert stats.bytes_read == len("".join(DOCS).encode())
    assert stats.files == 1
    assert stats.replaced_chars == 0


@pytest.mark.parametrize("name", ["a.jsonl", "a.jsonl.zst", "a.jsonl.gz"])
@pytest.mark.parametrize("block_chars", [2, 1 << 20])
def test_jsonl_files_round_trip(tmp_path, name, block_chars):
    path = tmp_path / name
    write_jsonl(path, [*ROWS[:2], None, *ROWS[2:]])
    docs, stats = read_docs(path, block_chars=block_chars)
    assert docs == ROWS  # the null row is no document
    assert stats.bytes_read > 0


def test_jsonl_other_column_and_blank_lines(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"body": "one"}\n\n   \n{"body": "two", "text": 3}\r\n{"body": "th\\u00e9"}')
    docs, _ = read_docs(path, text_column="body")
    assert docs == ["one", "two", "thé"]


@pytest.mark.parametrize("block_chars", [3, 1 << 20])
def test_parquet_round_trip_with_nulls_and_row_groups(tmp_path, block_chars):
    path = tmp_path / "a.parquet"
    values = [*ROWS[:1], None, *ROWS[1:], None] * 3
    table = pa.table({"id": list(range(len(values))), "text": values})
    pq.write_table(table, path, row_group_size=4)
    assert pq.ParquetFile(path).num_row_groups > 2
    docs, stats = read_docs(path, block_chars=block_chars)
    assert docs == ROWS * 3
    assert stats.bytes_read == sum(len(r.encode()) for r in ROWS) * 3


def test_parquet_large_string_and_dictionary_columns(tmp_path):
    path = tmp_path / "a.parquet"
    big = pa.array(["a", None, "b"], type=pa.large_string())
    dictionary = pa.array(["x", "y", "x"]).dictionary_encode()
    pq.write_table(pa.table({"text": big, "cat": dictionary}), path)
    assert read_docs(path)[0] == ["a", "b"]
    assert read_docs(path, text_column="cat")[0] == ["x", "y", "x"]


def test_long_row_comes_in_blocks(tmp_path):
    path = tmp_path / "a.jsonl"
    write_jsonl(path, ["abcdefghij", "k"])
    blocks = list(iter_blocks(path, block_chars=3))
    assert [(b.doc, b.text, b.end) for b in blocks] == [
        (0, "abc", False),
        (0, "def", False),
        (0, "ghi", False),
        (0, "j", True),
        (1, "k", True),
    ]


def test_empty_files_have_no_documents(tmp_path):
    (tmp_path / "e.txt").write_bytes(b"")
    (tmp_path / "e.jsonl").write_bytes(b"\n\n")
    assert read_docs(tmp_path / "e.txt")[0] == []
    assert read_docs(tmp_path / "e.jsonl")[0] == []


# ------------------------------------------------------------ .txt documents


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a\n\nb", ["a\n\n", "b"]),
        ("a\n\n b", ["a\n\n b"]),  # indented: continues the document
        ("a\n\n\tb\n\nc", ["a\n\n\tb\n\n", "c"]),
        ("a\nb\nc", ["a\nb\nc"]),  # no blank line
        ("a\r\n\r\nb", ["a\r\n\r\n", "b"]),
        ("a\r\nb", ["a\r\nb"]),  # \r\n is one line break
        ("a\r\rb", ["a\r\r", "b"]),
        ("a\n\r\nb", ["a\n\r\n", "b"]),
        ("a\n\n\n\nb\n\nc\n\n", ["a\n\n\n\n", "b\n\n", "c\n\n"]),
        ("\n\nb", ["\n\n", "b"]),
        ("a\n\n\u00a0b", ["a\n\n\u00a0b"]),  # NBSP is white space
        ("a\n \nb", ["a\n \nb"]),  # a line of spaces is not blank
        ("", []),
        ("\n\n\n", ["\n\n\n"]),
    ],
)
@pytest.mark.parametrize("block_chars", [1, 2, 3, 5, 1 << 20])
def test_txt_document_rule(tmp_path, text, expected, block_chars):
    path = tmp_path / "d.txt"
    path.write_bytes(text.encode())
    assert read_docs(path, block_chars=block_chars)[0] == expected


def reference_split(text: str) -> list[str]:
    """The document rule, one position at a time."""

    def ends_with_blank_line(head: str) -> bool:
        for brk in ("\r\n", "\n", "\r"):
            if head.endswith(brk):
                return head[: -len(brk)].endswith(("\n", "\r"))
        return False

    cuts = [
        p
        for p in range(1, len(text))
        if regex.match(r"\S", text[p]) and ends_with_blank_line(text[:p])
    ]
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


@settings(max_examples=150, deadline=None)
@given(
    text=st.lists(
        st.sampled_from(["\n", "\r", "\r\n", " ", "\t", "a", "é", "中", "\u00a0", "\ufeff"]),
        max_size=30,
    ).map("".join),
    block_chars=st.integers(1, 9),
)
def test_txt_document_rule_matches_reference(text, block_chars):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "d.txt"
        path.write_bytes(b"x" + text.encode())
        assert read_docs(path, block_chars=block_chars)[0] == reference_split("x" + text)


def test_invalid_utf8_is_replaced_and_counted(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ok \xff\xfe and a real \xef\xbf\xbd, cut \xe2\x82")
    for block_chars in (1, 2, 3, 1 << 20):
        docs, stats = read_docs(path, block_chars=block_chars)
        assert docs == ["ok \ufffd\ufffd and a real \ufffd, cut \ufffd"]
        assert stats.replaced_chars == 3, block_chars


def test_invalid_utf8_in_jsonl_is_counted(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"text": "a\xffb \xef\xbf\xbd"}\n')
    docs, stats = read_docs(path)
    assert docs == ["a\ufffdb \ufffd"]
    assert stats.replaced_chars == 1


def test_lone_surrogates_in_jsonl_are_replaced(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text('{"text": "a\\ud83d b \\ud83d\\ude00"}\n{"text": "\\\\ud800"}\n')
    docs, stats = read_docs(path)
    assert docs == ["a\ufffd b \U0001f600", "\\ud800"]
    assert stats.replaced_chars == 1
    assert all(d.encode() for d in docs)


@pytest.mark.parametrize("block_chars", [1, 2, 1 << 20])
def test_bom_is_dropped_at_start_only(tmp_path, block_chars):
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbfhi\xef\xbb\xbf")
    assert read_docs(path, block_chars=block_chars)[0] == ["hi\ufeff"]
    jsonl = tmp_path / "bom.jsonl"
    jsonl.write_bytes(b'\xef\xbb\xbf{"text": "x"}\n')
    assert read_docs(jsonl)[0] == ["x"]


def test_multi_frame_zstd(tmp_path):
    path = tmp_path / "m.txt.zst"
    c = zstandard.ZstdCompressor()
    path.write_bytes(c.compress(b"one\n\n") + c.compress(b"two"))
    assert read_docs(path, block_chars=2)[0] == ["one\n\n", "two"]


# ------------------------------------------------------------ errors


def test_bad_jsonl_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "a"}\n{"text": "b"}\n{"text": oops}\n')
    with pytest.raises(SourceError, match=r"bad\.jsonl: line 3: invalid JSON"):
        read_docs(path)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"body": "a"}', r"line 2: no 'text' field"),
        ('{"text": 5}', r"line 2: 'text' is int, expected a string"),
        ('["text"]', r"line 2: expected a JSON object"),
    ],
)
def test_jsonl_value_errors(tmp_path, line, message):
    path = tmp_path / "v.jsonl"
    path.write_text('{"text": "ok"}\n' + line + "\n")
    with pytest.raises(SourceError, match=message) as info:
        read_docs(path)
    assert str(path) in str(info.value)


def test_parquet_missing_column(tmp_path):
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"content": ["a"]}), path)
    with pytest.raises(SourceError, match=r"p\.parquet: no column 'text' \(columns: content\)"):
        read_docs(path)


def test_parquet_column_not_string(tmp_path):
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"text": [1, 2]}), path)
    with pytest.raises(SourceError, match=r"p\.parquet: column 'text' is int64"):
        read_docs(path)


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_corrupt_parquet(tmp_path, damage):
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"text": ["some text"] * 100}), path)
    data = path.read_bytes()
    path.write_bytes(os.urandom(200) if damage == "garbage" else data[: len(data) // 2])
    with pytest.raises(SourceError, match=r"c\.parquet: cannot read") as info:
        read_docs(path)
    assert info.value.__cause__ is not None


@pytest.mark.parametrize("keep", [0, 5, -3, -1])
def test_truncated_zstd(tmp_path, keep):
    path = tmp_path / "t.txt.zst"
    data = zstandard.ZstdCompressor().compress(os.urandom(5000).hex().encode())
    path.write_bytes(data[:keep] if keep else b"")
    with pytest.raises(SourceError, match=r"t\.txt\.zst"):
        read_docs(path, block_chars=1000)


def test_corrupt_zstd(tmp_path):
    path = tmp_path / "c.jsonl.zst"
    path.write_bytes(b"this is not zstd at all")
    with pytest.raises(SourceError, match=r"c\.jsonl\.zst: cannot read") as info:
        read_docs(path)
    assert info.value.__cause__ is not None


@pytest.mark.parametrize("data", [b"", b"not gzip data", "truncated"])
def test_bad_gzip(tmp_path, data):
    path = tmp_path / "g.txt.gz"
    if data == "truncated":
        data = gzip.compress(os.urandom(3000).hex().encode())[:-10]
    path.write_bytes(data)
    with pytest.raises(SourceError, match=r"g\.txt\.gz"):
        read_docs(path)


def test_missing_file(tmp_path):
    with pytest.raises(SourceError, match=r"nope\.txt: cannot read"):
        read_docs(tmp_path / "nope.txt")


def test_any_other_suffix_is_text_read_whole(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("x,y\n\n1,2\n")
    assert read_docs(path)[0] == ["x,y\n\n1,2\n"]  # one document: the file rule is its default
    assert read_docs(path, documents="blank-line")[0] == ["x,y\n\n", "1,2\n"]
    assert list_source_files(Source(path=path, is_dir=False)) == [path]


# ------------------------------------------------------------ listing


def make_tree(root: Path) -> None:
    for rel in [
        "b.txt",
        "a.parquet",
        "sub/z.jsonl.zst",
        "sub/deeper/c.txt.gz",
        "sub/deeper/d.jsonl.gz",
        "sub/e.txt.zst",
        "sub/f.jsonl",
        "tmp/old.txt",
        "notes.md",
        "data.csv",
        ".hidden.txt",
        ".git/objects.txt",
        "sub/.cache/x.txt",
    ]:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")


def rels(root: Path, files: list[Path]) -> list[str]:
    return [f.relative_to(root).as_posix() for f in files]


def test_listing_is_recursive_sorted_and_skips_hidden(tmp_path):
    make_tree(tmp_path)
    files = list_source_files(Source(path=tmp_path, is_dir=True))
    assert rels(tmp_path, files) == [
        "a.parquet",
        "b.txt",
        "sub/deeper/c.txt.gz",
        "sub/deeper/d.jsonl.gz",
        "sub/e.txt.zst",
        "sub/f.jsonl",
        "sub/z.jsonl.zst",
        "tmp/old.txt",
    ]
    assert files == list_source_files(Source(path=tmp_path, is_dir=True))


def test_include_and_exclude(tmp_path):
    make_tree(tmp_path)
    src = Source(path=tmp_path, is_dir=True, include=("*.txt*", "*.parquet"), exclude=("tmp/*",))
    assert rels(tmp_path, list_source_files(src)) == [
        "a.parquet",
        "b.txt",
        "sub/deeper/c.txt.gz",
        "sub/e.txt.zst",
    ]
    src = Source(path=tmp_path, is_dir=True, exclude=("sub/deeper/*", "*.parquet"))
    assert rels(tmp_path, list_source_files(src)) == [
        "b.txt",
        "sub/e.txt.zst",
        "sub/f.jsonl",
        "sub/z.jsonl.zst",
        "tmp/old.txt",
    ]


def test_symlink_loops_and_duplicates(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("x")
    (tmp_path / "d" / "loop").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "d" / "same.txt").symlink_to(tmp_path / "d" / "a.txt")
    (tmp_path / "d" / "broken.txt").symlink_to(tmp_path / "missing.txt")
    (tmp_path / "e").symlink_to(tmp_path / "d", target_is_directory=True)
    files = list_source_files(Source(path=tmp_path, is_dir=True))
    assert rels(tmp_path, files) == ["d/a.txt"]


def test_empty_or_missing_directory(tmp_path):
    (tmp_path / "only.csv").write_text("x")
    with pytest.raises(SourceError, match="no .* file found"):
        list_source_files(Source(path=tmp_path, is_dir=True))
    with pytest.raises(SourceError, match="no such directory"):
        list_source_files(Source(path=tmp_path / "missing", is_dir=True))
    make_tree(tmp_path)
    with pytest.raises(SourceError, match="after include/exclude"):
        list_source_files(Source(path=tmp_path, is_dir=True, include=("*.nothing",)))


def test_file_source(tmp_path):
    path = tmp_path / "one.jsonl"
    path.write_text("{}")
    assert list_source_files(Source(path=path, is_dir=False)) == [path]
    with pytest.raises(SourceError, match="no such file"):
        list_source_files(Source(path=tmp_path / "two.txt", is_dir=False))


_GLOB_PARTS = st.sampled_from(["*", "**", "?", "a", "b", ".c", "x", "[ab]", "[!a]"])


@settings(max_examples=300, deadline=None)
@given(globs=st.lists(st.lists(st.lists(_GLOB_PARTS, min_size=1, max_size=3).map("".join), min_size=1, max_size=3)
                      .map("/".join), min_size=1, max_size=3),
       rel=st.lists(st.text("ab.cx", min_size=1, max_size=4), min_size=1, max_size=4).map("/".join))
def test_a_folder_scan_matches_globs_as_each_glob_does(globs, rel):
    """The scan's one regex for all globs (``**/NAME`` taken as a glob on names)
    selects exactly the paths that some glob matches on its own."""
    from toktoktok.sources.listing import _any_glob, glob_match

    assert _any_glob(tuple(globs))(rel) == any(glob_match(rel, g) for g in globs)


def test_reading_ahead_left_early_stops_its_thread_and_closes_the_reader():
    """A caller that stops reading (an error, Ctrl-C, enough read) leaves no thread
    behind, and the reader (its open file) is closed in the thread that ran it."""
    import threading

    from toktoktok.sources.ahead import read_ahead

    closed_in: list[str] = []

    def reader():
        try:
            n = 0
            while True:
                yield n
                n += 1
        finally:
            closed_in.append(threading.current_thread().name)

    before = {t.ident for t in threading.enumerate()}
    items = read_ahead(reader(), depth=2)
    assert [next(items), next(items), next(items)] == [0, 1, 2]
    items.close()
    assert closed_in == ["toktoktok-read-ahead"]
    assert {t.ident for t in threading.enumerate()} <= before


def test_a_compressed_file_read_in_part_leaves_no_thread(tmp_path):
    import threading

    from toktoktok.sources import raw_chunks

    path = tmp_path / "a.txt.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(b"x" * 100_000))
    before = {t.ident for t in threading.enumerate()}
    chunks = raw_chunks(path, 1000)
    assert next(chunks) == b"x" * 1000
    chunks.close()
    assert {t.ident for t in threading.enumerate()} <= before


def test_listed_paths_are_the_paths_of_their_names() -> None:
    """The listing makes each file's ``Path`` from its folder's (``listing._paths``):
    equal to parsing the whole name, whatever the name holds."""
    from toktoktok.sources.listing import _paths

    names = ["/a/b/c.txt", "/a/b/ d .c", "/a/b/~x", "/a/b/x\\y.md", "/a/b/日本.rst", "/a//b/e.txt", "/f.txt",
             "rel/g.py", "./h/i.sh", "j.txt", "/a/b/..k", "/a/b/.l"]
    made = _paths(names)
    assert made == [Path(n) for n in names]
    assert [str(p) for p in made] == [str(Path(n)) for n in names]
    assert [p.name for p in made] == [Path(n).name for n in names]
