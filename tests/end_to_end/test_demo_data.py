"""Tests for the demo corpus recipe, data/build_demo.py (small builds: --max-mb 1)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

SCRIPT = ROOT / "data" / "build_demo.py"
MAX_MB = "1"


def run_build(outdir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(outdir), "--max-mb", MAX_MB, *extra],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return result


def tree_bytes(outdir: Path) -> dict[str, bytes]:
    return {p.relative_to(outdir).as_posix(): p.read_bytes() for p in sorted(outdir.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    outdir = tmp_path_factory.mktemp("demo") / "a"
    result = run_build(outdir)
    assert "english:" in result.stdout and "code:" in result.stdout
    return outdir


def txt_documents(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").removesuffix("\n").split("\n\n")


def test_files_exist(built: Path) -> None:
    names = set(tree_bytes(built))
    assert ".complete" in names
    assert "english/docstrings-00.txt" in names
    assert "english/pydoc-topics.jsonl" in names
    assert "code/stdlib-00.txt" in names


def test_english_documents_are_nonempty_prose(built: Path) -> None:
    docs = [d for p in sorted((built / "english").glob("*.txt")) for d in txt_documents(p)]
    assert len(docs) > 500
    for doc in docs:
        assert doc.strip() and doc == doc.strip()
        assert "\n\n" not in doc  # the blank-line separator is unambiguous
    words = " ".join(docs).split()
    assert sum(w.lower() in {"the", "a", "of", "is", "to"} for w in words) > len(words) / 20


def test_english_jsonl_rows(built: Path) -> None:
    lines = (built / "english" / "pydoc-topics.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    assert rows and all(set(r) == {"text"} and r["text"].strip() for r in rows)
    assert any("\n\n" in r["text"] for r in rows)  # rows keep their paragraphs


def test_code_documents_are_python(built: Path) -> None:
    text = (built / "code" / "stdlib-00.txt").read_text(encoding="utf-8")
    assert text.count("def ") > 100 and "import " in text and "\r" not in text
    complete = json.loads((built / ".complete").read_text())
    files = {f["file"]: f for f in complete["files"]}
    assert files["code/stdlib-00.txt"]["documents"] > 5
    assert sum(f["bytes"] for name, f in files.items() if name.startswith("code/")) <= 1_000_000


def test_complete_counts_match_files(built: Path) -> None:
    complete = json.loads((built / ".complete").read_text())
    assert complete["recipe"].startswith("toktoktok-demo/") and complete["max_mb"] == 1.0
    for entry in complete["files"]:
        path = built / entry["file"]
        assert path.stat().st_size == entry["bytes"]
        if path.suffix == ".txt" and path.parent.name == "english":
            assert len(txt_documents(path)) == entry["documents"]


def test_rerun_is_skipped(built: Path) -> None:
    before = {p: p.stat().st_mtime_ns for p in built.rglob("*") if p.is_file()}
    result = run_build(built)
    assert "skipped" in result.stdout
    assert {p: p.stat().st_mtime_ns for p in built.rglob("*") if p.is_file()} == before


def test_build_is_deterministic(built: Path, tmp_path: Path) -> None:
    other = tmp_path / "b"
    run_build(other)
    assert tree_bytes(other) == tree_bytes(built)


def test_other_options_or_stale_marker_rebuild(tmp_path: Path) -> None:
    outdir = tmp_path / "c"
    run_build(outdir)
    (outdir / "code" / "stray.txt").write_text("left over")
    complete = outdir / ".complete"
    complete.write_text(complete.read_text().replace("toktoktok-demo/", "old-recipe/"))
    result = run_build(outdir)
    assert "skipped" not in result.stdout
    assert not (outdir / "code" / "stray.txt").exists()
    assert "skipped" in run_build(outdir).stdout
    assert "skipped" not in run_build(outdir, "--force").stdout
