"""A source's ``documents:`` rule and text files of any suffix, in ingest.

Each rule is checked by an inventory it must equal (the distinct pieces and
counts, the ingest chunk files summed): the same documents given another way.

- ``line`` on a ``.txt`` and on a ``.py`` = a folder of one-line files, each
  read whole (``documents: file``): each line a document, no break trained on.
- ``file`` on a ``.txt`` of one document = that text as one parquet row.
- ``{split_on: STRING}`` on a ``.md`` = a folder of the pieces between the
  occurrences as files; the STRING is never trained on.
- ``blank-line`` on a ``.py`` = the same text as a ``.txt`` (its default).
- A folder scanned with ``include: ["**/*.py", "**/*.c", "**/*.md"]`` reads
  those files, each one document, as ``.txt`` files with ``documents: file``.
- A binary file caught by an ``include:`` is skipped and listed, or stops
  the run; a ``path:`` scan without ``include:`` reads only the known kinds.
- A file cut into very many tiny documents is warned about once.
"""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import chunk_counts, english_text, ingest_here
from toktoktok.config import load_config
from toktoktok.errors import SourceError


def _ingest(folder: Path, sources: list[dict], **settings) -> tuple[dict, Counter[bytes], str]:
    """Ingest one phase of ``sources``: its manifest, its inventory and what it printed."""
    printed = io.StringIO()
    manifest, phase = ingest_here(folder, sources, printed, **settings)
    return manifest, chunk_counts(phase), printed.getvalue()


def _lines() -> list[str]:
    """Lines of prose and code, some with spaces at either end, none empty."""
    prose = [line for line in english_text(40_000).split("\n") if line.strip()]
    code = ["def f(x):", "    return x + 1  # one more", "  trailing spaces   ", "int main(void) { return 0; }"]
    return [line for pair in zip(prose, code * len(prose)) for line in pair]


def _folder_of(root: Path, texts: list[str], suffix: str) -> Path:
    root.mkdir(parents=True)
    for i, text in enumerate(texts):
        (root / f"{i:05d}{suffix}").write_text(text, encoding="utf-8")
    return root


@pytest.mark.parametrize("suffix", [".txt", ".py"])
def test_line_equals_a_folder_of_one_line_files(tmp_path: Path, suffix: str) -> None:
    lines = _lines()
    one = tmp_path / f"all{suffix}"
    one.write_bytes(("\n".join(lines[:50]) + "\r\n\n" + "\r".join(lines[50:]) + "\n").encode())
    manifest, by_line, _ = _ingest(tmp_path / "a", [{"file": str(one), "documents": "line"}])
    folder = _folder_of(tmp_path / "lines", lines, ".txt")
    whole, by_file, _ = _ingest(tmp_path / "b", [{"path": str(folder), "documents": "file"}])
    assert by_line == by_file and by_line
    assert manifest["counts"]["documents"] == whole["counts"]["documents"] == len(lines)
    assert not any(b"\n" in piece or b"\r" in piece for piece in by_line)  # no break is trained on


def test_file_on_a_txt_equals_one_parquet_row(tmp_path: Path) -> None:
    text = english_text(300_000) + "\n\n  indented\n\nlast"  # blank lines: several documents by the default rule
    txt = tmp_path / "one.txt"
    txt.write_text(text, encoding="utf-8")
    rows = tmp_path / "one.parquet"
    pq.write_table(pa.table({"text": [text]}), rows)
    manifest, as_file, _ = _ingest(tmp_path / "a", [{"file": str(txt), "documents": "file"}])
    _, as_row, _ = _ingest(tmp_path / "b", [{"file": str(rows)}])
    default, _, _ = _ingest(tmp_path / "c", [{"file": str(txt)}])
    assert as_file == as_row
    assert manifest["counts"]["documents"] == 1 and default["counts"]["documents"] > 1


def test_split_on_equals_a_folder_of_its_pieces(tmp_path: Path) -> None:
    pieces = [english_text(2_000, offset=i * 3_000) for i in range(30)]
    pieces[7] = ""  # two separators in a row: an empty document, dropped
    md = tmp_path / "all.md"
    md.write_text("<|doc|>" + "<|doc|>".join(pieces) + "<|doc|><|doc", encoding="utf-8")
    manifest, split, _ = _ingest(tmp_path / "a", [{"file": str(md), "documents": {"split_on": "<|doc|>"}}])
    folder = _folder_of(tmp_path / "pieces", [p for p in pieces if p] + ["<|doc"], ".md")
    _, whole, _ = _ingest(tmp_path / "b", [{"path": str(folder), "include": ["*.md"]}])
    assert split == whole
    assert manifest["counts"]["documents"] == len(pieces)  # 29 pieces and the "<|doc" after the last separator
    assert not any(b"<|doc|>" in piece for piece in split)


def test_blank_line_on_a_py_equals_a_txt(tmp_path: Path) -> None:
    text = "def f():\n    pass\n\n\ndef g():\n    return 1\n\n" * 500
    (tmp_path / "a.py").write_text(text, encoding="utf-8")
    (tmp_path / "a.txt").write_text(text, encoding="utf-8")
    py, as_py, _ = _ingest(tmp_path / "p", [{"file": str(tmp_path / "a.py"), "documents": "blank-line"}])
    txt, as_txt, _ = _ingest(tmp_path / "t", [{"file": str(tmp_path / "a.txt")}])
    whole, _, _ = _ingest(tmp_path / "w", [{"file": str(tmp_path / "a.py")}])
    assert as_py == as_txt and py["counts"]["documents"] == txt["counts"]["documents"] == 1000
    assert whole["counts"]["documents"] == 1  # a .py is one document by default


def _tree(root: Path) -> dict[str, str]:
    files = {"a.py": "import os\n\n\ndef main():\n    print(os.getcwd())\n",
             "src/b.c": "#include <stdio.h>\n\nint main(void) {\n  return 0;\n}\n",
             "docs/c.md": "# Title\n\nSome *text*, and more text.\n",
             "notes.txt": "kept as a .txt\n\nof two documents\n",
             "data.csv": "not,included\n"}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return files


def test_include_reads_any_suffix(tmp_path: Path) -> None:
    files = _tree(tmp_path / "tree")
    manifest, tree, _ = _ingest(tmp_path / "a", [{"path": str(tmp_path / "tree"),
                                                  "include": ["**/*.py", "**/*.c", "**/*.md"]}])
    assert sorted(Path(p).name for p in manifest["inputs"]["path"]) == ["a.py", "b.c", "c.md"]
    assert manifest["counts"]["documents"] == 3
    copies = _folder_of(tmp_path / "copies", [files["a.py"], files["src/b.c"], files["docs/c.md"]], ".txt")
    _, as_txt, _ = _ingest(tmp_path / "b", [{"path": str(copies), "documents": "file"}])
    assert tree == as_txt


def test_a_scan_without_include_reads_the_known_kinds_only(tmp_path: Path) -> None:
    _tree(tmp_path / "tree")
    (tmp_path / "tree" / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    manifest, _, _ = _ingest(tmp_path / "a", [{"path": str(tmp_path / "tree")}])
    assert [Path(p).name for p in manifest["inputs"]["path"]] == ["notes.txt"]
    assert manifest["counts"]["documents"] == 2


@pytest.mark.parametrize("content, why", [(b"\x89PNG\r\n\x1a\n" + bytes(64), "holds a NUL byte"),
                                          (bytes(range(128, 256)) * 8, "invalid UTF-8 in")])
def test_binary_files_are_bad_files(tmp_path: Path, content: bytes, why: str) -> None:
    _tree(tmp_path / "tree")
    (tmp_path / "tree" / "blob.bin").write_bytes(content)
    source = [{"path": str(tmp_path / "tree"), "include": ["**/*"], "exclude": ["*.csv"]}]
    manifest, skipped, _ = _ingest(tmp_path / "skip", source, on_bad_file="skip")
    bad = manifest["counts"]["bad_files"]
    assert [Path(b["path"]).name for b in bad] == ["blob.bin"] and why in bad[0]["error"]
    assert manifest["counts"]["files"] == 4
    with pytest.raises(SourceError, match=r"blob\.bin: not a text file \(.*" + why):
        _ingest(tmp_path / "fail", source)


def test_tiny_documents_are_warned_about_once(tmp_path: Path) -> None:
    tiny = tmp_path / "words.txt"
    tiny.write_text("\n".join(f"w{i}" for i in range(250_000)), encoding="utf-8")  # about 1.6 MB, 6 bytes a line
    _, _, printed = _ingest(tmp_path / "a", [{"file": str(tiny), "documents": "line"}])
    warnings = [line for line in printed.splitlines() if "documents: line" in line]
    assert len(warnings) == 1 and str(tiny) in warnings[0] and "250,000 documents" in warnings[0]
    _, _, printed = _ingest(tmp_path / "b", [{"file": str(tiny), "documents": "file"}])
    assert "documents:" not in printed


def test_documents_is_in_the_key_and_the_plan(tmp_path: Path) -> None:
    from toktoktok_stages.commands.plan import make_plan

    (tmp_path / "a.py").write_text("x = 1\n\ny = 2\n", encoding="utf-8")
    default, _, _ = _ingest(tmp_path / "d", [{"file": str(tmp_path / "a.py")}])
    ruled, _, _ = _ingest(tmp_path / "r", [{"file": str(tmp_path / "a.py"), "documents": "line"}])
    assert default["inputs"]["documents"] == [None] and ruled["inputs"]["documents"] == ["line"]
    assert default["key"] != ruled["key"]  # changing the rule ingests again
    plan = make_plan(load_config(tmp_path / "r" / "config.yaml"))
    assert plan["phases"][0]["files"][0]["documents"] == "line"
    assert plan["settings"]["phases"][0]["sources"][0]["documents"] == "line"
