"""The benchmark's corpora: one plain training ``.txt`` and one held-out text each.

With the shared corpora (``SHARED_CORPORA``, i.e.
``/work/shared/corpora`` beside the checkout): the first
``mb`` MB of ``NAME.txt.zst``, streamed and cut at a line end, and the first
2 MB of ``NAME.heldout.txt.zst`` (documents the training file never holds).

Without them: the project's demo corpus (``data/build_demo.py``, built into
the bench folder when ``data/demo`` is absent); its last 5% of documents are
the held-out text and are left out of the training file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import regex
import zstandard

REPO = Path(__file__).resolve().parents[2]
SHARED_CORPORA = REPO.parent / "shared" / "corpora"  # /work/shared beside the checkout
HELDOUT_MB = 2
DEMO_HELDOUT_SHARE = 0.05
MB = 1_000_000  # decimal, as the corpora's README counts

# The document boundary of toktoktok.sources (docs/pretokenization.md).
DOC_BOUNDARY = regex.compile(r"(?:\n\n|\r\r|\n\r|[\r\n]\r\n)(?=\S)")


@dataclass
class Corpus:
    """A prepared corpus: what the trainers read and what compression is measured on."""

    name: str
    train: Path
    heldout_text: str
    description: str
    train_bytes: int
    documents: int


def zst_head(path: Path, limit: int) -> tuple[bytes, bool]:
    """The first ``limit`` bytes of a zstd file cut after their last line end, or all of
    it; and whether that is all of it."""
    parts: list[bytes] = []
    size = 0
    with path.open("rb") as fh, zstandard.ZstdDecompressor().stream_reader(fh) as reader:
        while size < limit:
            chunk = reader.read(min(4 * MB, limit - size))
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
        whole = not reader.read(1)
    data = b"".join(parts)
    if not whole and b"\n" in data:
        data = data[:data.rindex(b"\n") + 1]
    return data, whole


def split_documents(text: str) -> list[str]:
    """``text`` cut after each document boundary (each part keeps its blank line)."""
    docs, start = [], 0
    for m in DOC_BOUNDARY.finditer(text):
        docs.append(text[start:m.end()])
        start = m.end()
    if start < len(text):
        docs.append(text[start:])
    return docs


def shared_corpus(name: str, mb: float, folder: Path) -> Corpus:
    """Prepare ``name`` from the shared corpora."""
    source = SHARED_CORPORA / f"{name}.txt.zst"
    if not source.exists():
        raise SystemExit(f"no corpus {source}")
    data, whole = zst_head(source, int(mb * MB))
    train = folder / f"{name}.txt"
    train.write_bytes(data)
    text = data.decode("utf-8", errors="replace")
    heldout_path = SHARED_CORPORA / f"{name}.heldout.txt.zst"
    if heldout_path.exists():
        heldout = zst_head(heldout_path, HELDOUT_MB * MB)[0].decode("utf-8", errors="replace")
        how = f"first {len(heldout.encode()) / MB:.1f} MB of {heldout_path.name}"
    else:
        docs = split_documents(text)
        cut = len(docs) - max(1, round(len(docs) * DEMO_HELDOUT_SHARE))
        heldout, text = "".join(docs[cut:]), "".join(docs[:cut])
        train.write_text(text, encoding="utf-8")
        how = f"last {len(docs) - cut} documents of the text, left out of training"
    docs_count = len(split_documents(text))
    part = f"all {len(data) / MB:.1f} MB" if whole else f"first {len(data) / MB:.1f} MB (cut at a line end)"
    description = f"{part} of {source}, {docs_count} documents; held-out: {how}"
    return Corpus(name, train, heldout, description, train.stat().st_size, docs_count)


def demo_folder(work: Path) -> Path:
    """The demo corpus folder: ``data/demo`` when built, else built into ``work``."""
    built = REPO / "data" / "demo"
    if built.is_dir() and any(built.iterdir()):
        return built
    target = work / "demo"
    subprocess.run([sys.executable, str(REPO / "data" / "build_demo.py"), str(target)], check=True,
                   stdout=subprocess.DEVNULL)
    return target


def demo_documents(folder: Path) -> Iterator[str]:
    """The documents of a demo corpus folder, files in sorted order."""
    for path in sorted(folder.rglob("*")):
        if path.suffix == ".txt":
            yield from split_documents(path.read_text(encoding="utf-8"))
        elif path.suffix == ".jsonl":
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    yield json.loads(line)["text"]


def as_txt_document(doc: str) -> str:
    """``doc`` ending in a blank line, so that documents joined stay apart."""
    if doc.endswith("\n\n"):
        return doc
    return doc + ("\n" if doc.endswith("\n") else "\n\n")


def demo_corpus(name: str, mb: float, work: Path, folder: Path) -> Corpus:
    """Prepare ``name`` (english or code) from the demo corpus; the last 5% of documents are held out."""
    source = demo_folder(work) / name
    if not source.is_dir():
        raise SystemExit(f"no shared corpora at {SHARED_CORPORA} and no demo corpus {source}")
    docs, size = [], 0
    for doc in demo_documents(source):
        doc = as_txt_document(doc)
        docs.append(doc)
        size += len(doc.encode())
        if size >= mb * MB:
            break
    cut = len(docs) - max(1, round(len(docs) * DEMO_HELDOUT_SHARE))
    train = folder / f"{name}.txt"
    train.write_text("".join(docs[:cut]), encoding="utf-8")
    description = (f"demo corpus {source} (no shared corpora found): {train.stat().st_size / MB:.1f} MB, "
                   f"{cut} documents; held-out: its last {len(docs) - cut} documents, left out of training")
    return Corpus(name, train, "".join(docs[cut:]), description, train.stat().st_size, cut)


def prepare(names: list[str], mb: float, work: Path) -> list[Corpus]:
    """Prepare each corpus in ``work/corpora``."""
    folder = work / "corpora"
    folder.mkdir(parents=True, exist_ok=True)
    if SHARED_CORPORA.is_dir():
        return [shared_corpus(name, mb, folder) for name in names]
    return [demo_corpus(name, mb, work, folder) for name in names]


def head_of(corpus: Corpus, mb: float, folder: Path) -> Corpus:
    """The first ``mb`` MB of a prepared ``corpus``'s training file (cut after a line end), same held-out text."""
    folder.mkdir(parents=True, exist_ok=True)
    data = corpus.train.read_bytes()[:int(mb * MB)]
    if len(data) < corpus.train_bytes and b"\n" in data:
        data = data[:data.rindex(b"\n") + 1]
    train = folder / f"{corpus.name}-{mb:g}mb.txt"
    train.write_bytes(data)
    docs = len(split_documents(data.decode("utf-8", errors="replace")))
    description = f"first {len(data) / MB:.1f} MB of {corpus.name} ({docs} documents)"
    return Corpus(corpus.name, train, corpus.heldout_text, description, len(data), docs)
