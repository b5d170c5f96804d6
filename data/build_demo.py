#!/usr/bin/env python3
"""Build the demo corpus from text that every Python installation has.

    python data/build_demo.py data/demo            # about 3 MB English, 9 MB code
    python data/build_demo.py /tmp/small --max-mb 1

Nothing is downloaded: the text comes from the Python standard library that
runs this script, so the demo works offline and on any machine that can run
toktoktok. Two corpora, one per demo phase (configs/demo.yaml):

``OUTDIR/english/``  English prose written by people, in two input formats:

- ``docstrings-NN.txt``: the module, class and function docstrings of the
  standard library's source files, found with ``ast`` (never imported);
- ``comments-NN.txt``: the blocks of ``#`` comments of those files that read
  like prose (at least 80 characters, mostly letters);
- ``pydoc-topics.jsonl``: the language reference topics that ``help()``
  shows (``pydoc_data.topics``), one ``{"text": ...}`` row per topic.

``OUTDIR/code/``  ``stdlib-NN.txt``: Python source files of the standard
library, one file per document.

Design decisions:

- Documents in a ``.txt`` file are separated by one blank line, and docs/pretokenization.md
  splits a ``.txt`` file after a blank line followed by a non-space
  character. English documents therefore have their blank lines removed
  (a docstring's paragraphs become consecutive lines), so each docstring is
  exactly one document. Code keeps its blank lines: the reader splits a
  source file further, into its top-level blocks, as it would any code.
  ``.jsonl`` rows are documents whatever they contain, so topics keep their
  paragraphs (and the ``"\\n\\n"`` pieces that prose needs).
- Which files: every ``.py`` file under the stdlib folder, sorted by path,
  except test folders and ``test_*`` files, private folders (``_*``),
  ``site-packages``, and for code the generated ones (``encodings``'
  codec tables, ``pydoc_data``'s text). Private modules are kept: the
  decimal module's docstrings live in ``_pydecimal.py``.
- Deterministic: sorted paths, first occurrence wins when a docstring
  repeats, no randomness, ``\\n`` line ends, UTF-8. The same Python version
  gives the same bytes.
- ``--max-mb`` caps each corpus (documents are taken in order until the next
  would pass the cap; the topics take at most a quarter of the English cap,
  so every file kind exists even in a small build).
- ``OUTDIR/.complete`` is written last and records the recipe version, the
  Python version and the options: a rerun with the same ones does nothing,
  anything else rebuilds ``english/`` and ``code/`` from scratch.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import os
import platform
import shutil
import sys
import sysconfig
import tokenize
from collections.abc import Iterable, Iterator
from pathlib import Path

RECIPE_VERSION = "toktoktok-demo/1"
ENGLISH_PART_BYTES = 1_000_000
CODE_PART_BYTES = 2_500_000
MIN_DOC_CHARS = 40
MIN_COMMENT_CHARS = 80
SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"}
NOT_CODE_DIRS = {"encodings", "pydoc_data"}

DOC_NODES = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


# --- finding the sources ---------------------------------------------------


def stdlib_root() -> Path:
    """The folder of the running Python's standard library (not the venv's)."""
    return Path(sysconfig.get_paths()["stdlib"])


def _skipped_dir(name: str) -> bool:
    """Test, private, cache and third-party folders are not part of the corpus.

    >>> [_skipped_dir(n) for n in ("json", "test", "_bundled", "lib-dynload")]
    [False, True, True, True]
    """
    return name in SKIP_DIRS or name.startswith(("_", ".", "config-", "lib-dynload"))


def stdlib_sources(root: Path) -> list[Path]:
    """Every corpus ``.py`` file under ``root``, sorted by relative path."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not _skipped_dir(d)]
        found += [Path(folder) / f for f in files if f.endswith(".py") and not f.startswith("test_")]
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def read_source(path: Path) -> str | None:
    """A source file as text (its coding declaration honoured), or None."""
    try:
        data = path.read_bytes()
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)
    except (OSError, SyntaxError, UnicodeDecodeError, LookupError):
        return None


def is_utf8(text: str) -> bool:
    """False for text with lone surrogates (from escapes such as ``"\\ud800"``)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# --- English documents -------------------------------------------------------


def squeeze(text: str) -> str:
    """One document with no blank line inside, so the separator stays unambiguous.

    >>> squeeze("  First line.\\n\\n   Indented, after a blank.  \\n")
    'First line.\\n   Indented, after a blank.'
    """
    lines = [line.rstrip() for line in text.strip().splitlines()]
    return "\n".join(line for line in lines if line)


def docstrings(source: str) -> Iterator[str]:
    """The docstrings of a module's source, in source order (depth first).

    >>> list(docstrings("'''Mod.'''\\ndef f():\\n    'Fun.'"))
    ['Mod.', 'Fun.']
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, DOC_NODES):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                yield doc
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _reads_like_prose(text: str) -> bool:
    """Long enough and mostly letters and spaces (not commented-out code or art).

    >>> _reads_like_prose("x = f(a[1], b) # ---- ==== ++++ ---- ==== ++++ ---- ==== ++++ ---- ==")
    False
    """
    letters = sum(c.isalpha() or c.isspace() for c in text)
    return len(text) >= MIN_COMMENT_CHARS and letters >= 0.85 * len(text)


def comment_blocks(source: str) -> Iterator[str]:
    """Runs of ``#`` comments not interrupted by code, one text per run."""
    block: list[str] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                if not _is_header_comment(tok.string, tok.start[0]):
                    block.append(tok.string.lstrip("#").strip())
            elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                yield from _finish_block(block)
                block = []
    except (tokenize.TokenError, SyntaxError):
        pass
    yield from _finish_block(block)


def _is_header_comment(comment: str, line: int) -> bool:
    """A shebang or a coding declaration (lines 1-2), not prose.

    >>> _is_header_comment("# -*- coding: latin-1 -*-", 1), _is_header_comment("# coding is fun", 9)
    (True, False)
    """
    return line <= 2 and (comment.startswith("#!") or "coding" in comment)


def _finish_block(block: list[str]) -> Iterator[str]:
    """The block as one document when it reads like prose."""
    text = squeeze("\n".join(block))
    if text and _reads_like_prose(text):
        yield text


def unique_docs(texts: Iterable[str], min_chars: int) -> Iterator[str]:
    """Squeezed, valid, long-enough texts, each only the first time it appears."""
    seen: set[str] = set()
    for text in texts:
        doc = squeeze(text)
        if len(doc) >= min_chars and doc not in seen and is_utf8(doc):
            seen.add(doc)
            yield doc


def stdlib_docstrings(files: list[Path]) -> Iterator[str]:
    for path in files:
        yield from docstrings(read_source(path) or "")


def stdlib_comments(files: list[Path]) -> Iterator[str]:
    for path in files:
        yield from comment_blocks(read_source(path) or "")


def pydoc_topics() -> list[str]:
    """The reference topics ``help()`` shows, sorted by topic name, paragraphs kept."""
    try:
        from pydoc_data.topics import topics
    except ImportError:  # some distributions package it separately
        print("warning: pydoc_data is missing: no topics", file=sys.stderr)
        return []
    texts = ("\n".join(line.rstrip() for line in topics[k].strip().splitlines()) for k in sorted(topics))
    return [t for t in texts if t and is_utf8(t)]


# --- code documents ----------------------------------------------------------


def code_docs(root: Path, files: list[Path]) -> Iterator[str]:
    """Each hand-written source file as one document (no leading/trailing blank lines)."""
    for path in files:
        if path.relative_to(root).parts[0] in NOT_CODE_DIRS:
            continue
        text = read_source(path)
        if text is not None and text.strip() and is_utf8(text):
            yield "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


# --- budgets and writing -------------------------------------------------------


def take_bytes(docs: Iterable[str], budget: int) -> list[str]:
    """Documents in order while their UTF-8 sizes (+ 2 for the separator) fit.

    >>> take_bytes(["aaaa", "bb", "c"], 9)
    ['aaaa']
    """
    taken, used = [], 0
    for doc in docs:
        size = len(doc.encode("utf-8")) + 2
        if used + size > budget:
            break
        taken.append(doc)
        used += size
    return taken


def split_parts(docs: list[str], part_bytes: int) -> list[list[str]]:
    """Consecutive groups of documents of about ``part_bytes`` each.

    >>> split_parts(["aa", "bb", "cc"], 5)
    [['aa', 'bb'], ['cc']]
    """
    parts: list[list[str]] = [[]]
    used = 0
    for doc in docs:
        if parts[-1] and used >= part_bytes:
            parts.append([])
            used = 0
        parts[-1].append(doc)
        used += len(doc.encode("utf-8")) + 2
    return parts if parts[0] else []


def write_txt_parts(folder: Path, stem: str, docs: list[str], part_bytes: int) -> list[dict]:
    """Write ``stem-NN.txt`` files, documents separated by a blank line."""
    written = []
    for i, part in enumerate(split_parts(docs, part_bytes)):
        path = folder / f"{stem}-{i:02d}.txt"
        path.write_bytes(("\n\n".join(part) + "\n").encode("utf-8"))
        written.append(_entry(path, len(part)))
    return written


def write_jsonl(path: Path, docs: list[str]) -> list[dict]:
    """Write one ``{"text": ...}`` row per document."""
    rows = "".join(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in docs)
    path.write_bytes(rows.encode("utf-8"))
    return [_entry(path, len(docs))]


def _entry(path: Path, documents: int) -> dict:
    return {"file": f"{path.parent.name}/{path.name}", "documents": documents, "bytes": path.stat().st_size}


# --- the build -----------------------------------------------------------------


def build_english(folder: Path, files: list[Path], budget: int) -> list[dict]:
    """Topics (at most a quarter of the budget), then docstrings, then comments."""
    topics = take_bytes(pydoc_topics(), budget // 4)
    budget -= sum(len(t.encode("utf-8")) + 2 for t in topics)
    docs = take_bytes(unique_docs(stdlib_docstrings(files), MIN_DOC_CHARS), budget)
    budget -= sum(len(d.encode("utf-8")) + 2 for d in docs)
    comments = take_bytes(unique_docs(stdlib_comments(files), MIN_COMMENT_CHARS), budget)
    return (
        write_txt_parts(folder, "docstrings", docs, ENGLISH_PART_BYTES)
        + write_txt_parts(folder, "comments", comments, ENGLISH_PART_BYTES)
        + write_jsonl(folder / "pydoc-topics.jsonl", topics)
    )


def build_code(folder: Path, root: Path, files: list[Path], budget: int) -> list[dict]:
    return write_txt_parts(folder, "stdlib", take_bytes(code_docs(root, files), budget), CODE_PART_BYTES)


def recipe(max_mb: float) -> dict:
    """What the output depends on; ``.complete`` must match it to skip a build."""
    return {"recipe": RECIPE_VERSION, "python": platform.python_version(), "max_mb": max_mb}


def is_complete(outdir: Path, wanted: dict) -> bool:
    try:
        done = json.loads((outdir / ".complete").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(done, dict) and {k: done.get(k) for k in wanted} == wanted


def build(outdir: Path, max_mb: float) -> list[dict]:
    """Rebuild ``english/`` and ``code/`` in ``outdir``; ``.complete`` last."""
    (outdir / ".complete").unlink(missing_ok=True)
    budget = int(max_mb * 1_000_000)
    root = stdlib_root()
    files = stdlib_sources(root)
    written = []
    for name in ("english", "code"):
        shutil.rmtree(outdir / name, ignore_errors=True)
        (outdir / name).mkdir(parents=True)
    written += build_english(outdir / "english", files, budget)
    written += build_code(outdir / "code", root, files, budget)
    done = recipe(max_mb) | {"stdlib": str(root), "files": written}
    (outdir / ".complete").write_text(json.dumps(done, indent=1) + "\n", encoding="utf-8")
    return written


def report(written: list[dict]) -> None:
    for kind in ("english", "code"):
        entries = [w for w in written if w["file"].startswith(kind + "/")]
        for w in entries:
            print(f"  {w['file']:<28} {w['documents']:>7,} documents {w['bytes']:>12,} bytes")
        docs, size = sum(w["documents"] for w in entries), sum(w["bytes"] for w in entries)
        print(f"{kind}: {len(entries)} files, {docs:,} documents, {size / 1e6:.2f} MB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("outdir", type=Path, help="where english/ and code/ are written")
    parser.add_argument("--max-mb", type=float, default=10.0, help="cap for each corpus, MB (default 10)")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    args = parser.parse_args(argv)
    if args.max_mb <= 0:
        parser.error("--max-mb must be positive")
    if not args.force and is_complete(args.outdir, recipe(args.max_mb)):
        print(f"{args.outdir}: demo corpus up to date ({RECIPE_VERSION}), skipped")
        return 0
    args.outdir.mkdir(parents=True, exist_ok=True)
    print(f"building the demo corpus in {args.outdir} from {stdlib_root()}")
    report(build(args.outdir, args.max_mb))
    return 0


if __name__ == "__main__":
    sys.exit(main())
