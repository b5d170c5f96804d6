"""Check on real corpora that ingest counts exactly ``regex.findall``'s pieces (docs/pretokenization.md).

    .venv/bin/python benchmarks/run.py --section pieces [--mb N] [--patterns default,cl100k,o200k,gpt2]

For each corpus and each pattern it writes a config (``heldout_share: 0``,
the three usual special tokens), runs the real ingest stage as a user does
(``toktok ingest -c CFG --force``), sums the ``(piece, count)`` rows of its
chunk files, and compares them with plain ``Counter``s of
``regex.findall(pattern.python, segment)`` over the segments between special
tokens, computed here without toktoktok's reader:

- ``diff``: ingest against findall over each whole ``.txt`` file / each
  parquet row (docs/pretokenization.md: "the counted pieces equal regex.findall(pattern,
  text) over each whole file or row");
- ``docs diff`` (``.txt`` only): findall summed over the file's documents
  (docs/pretokenization.md's split: after a blank line followed by a character that is not
  white space) against findall over the whole file. 0 is a theorem for the
  patterns whose safe cut places include that boundary (default, cl100k); for
  gpt2 and o200k it is not 0 (gpt2 matches ``\n\n`` before text as
  ``\n``, ``\n`` but as ``\n\n`` at the end of a document; o200k's
  punctuation takes ``/`` after a blank line), which is why ingest streams a
  ``.txt`` file's documents into one sequence of parts.

Each diff is the sum over pieces of |count difference| (0 when exact).

Corpora (``<repo>/../shared``): every file of ``data/multilingual/`` (one
corpus), and the first ``--mb`` MB of ``corpora/{english,code,german}.txt.zst``
(decompressed to a temporary ``.txt``, cut after a line end) and of
``corpora/mixed.parquet`` (its first rows, up to ``--mb`` MB of text, written
to a temporary parquet). A missing one is skipped with a note.

Exit code: 1 when a ``diff`` is not 0, or a ``docs diff`` is not 0 for a
pattern that cuts at safe places (default, cl100k; with
``--strict-documents``: for any pattern); 2 when nothing could be checked;
else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import regex
import yaml
from benchkit.corpus import zst_head
from benchkit.toktok import toktok_bin

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
MB = 1 << 20
PATTERNS = ("default", "cl100k", "o200k", "gpt2")
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
TXT_CORPORA = ("english", "code", "german")

# docs/pretokenization.md's .txt document rule: the benchmarks' own copy (benchkit/corpus.py), not toktoktok's.
from benchkit.corpus import split_documents as txt_documents  # noqa: E402


@dataclass
class Corpus:
    name: str
    files: list[Path]
    kind: str  # "txt" or "parquet"
    size: int  # bytes of text


# ------------------------------------------------------------ preparing the corpora


def parquet_head(path: Path, limit: int) -> pa.Table:
    """The first rows of a parquet file's ``text`` column, up to ``limit`` bytes of text."""
    texts, size = [], 0
    with pq.ParquetFile(path) as pf:
        for batch in pf.iter_batches(batch_size=256, columns=["text"]):
            for text in batch.column(0).to_pylist():
                if size >= limit:
                    break
                texts.append(text)
                size += len(text.encode("utf-8")) if text is not None else 0
            if size >= limit:
                break
    return pa.table({"text": pa.array(texts, type=pa.large_string())})


def prepare(tmp: Path, mb: float) -> list[Corpus]:
    corpora = []
    multi = SHARED / "data" / "multilingual"
    if multi.is_dir():
        files = sorted(p for p in multi.iterdir() if p.is_file() and p.suffix == ".txt")
        corpora.append(Corpus("multilingual", files, "txt", sum(p.stat().st_size for p in files)))
    else:
        print(f"note: {multi} is absent, skipped", file=sys.stderr)
    limit = int(mb * MB)
    for name in TXT_CORPORA:
        src = SHARED / "corpora" / f"{name}.txt.zst"
        if not src.is_file():
            print(f"note: {src} is absent, skipped", file=sys.stderr)
            continue
        out = tmp / "corpora" / f"{name}.txt"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(zst_head(src, limit)[0])
        corpora.append(Corpus(name, [out], "txt", out.stat().st_size))
    src = SHARED / "corpora" / "mixed.parquet"
    if src.is_file():
        table = parquet_head(src, limit)
        out = tmp / "corpora" / "mixed.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, out, compression="zstd")
        size = sum(len(t.encode("utf-8")) for t in table["text"].to_pylist() if t is not None)
        corpora.append(Corpus("mixed", [out], "parquet", size))
    else:
        print(f"note: {src} is absent, skipped", file=sys.stderr)
    return corpora


# ------------------------------------------------------------ the reference


def file_text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "replace").removeprefix("\ufeff")


def documents(corpus: Corpus) -> Iterator[str]:
    for path in corpus.files:
        if corpus.kind == "txt":
            yield from txt_documents(file_text(path))
        else:
            yield from (t for t in pq.read_table(path, columns=["text"])["text"].to_pylist() if t is not None)


def _count(texts: Sequence[str], pattern: str, specials: Sequence[str]) -> Counter[bytes]:
    """findall over the segments between special tokens of each text (runs in a worker)."""
    compiled = regex.compile(pattern)
    cutter = regex.compile("|".join(regex.escape(t) for t in sorted(specials, key=len, reverse=True)))
    counts: Counter[bytes] = Counter()
    for text in texts:
        for seg in cutter.split(text) if specials else [text]:
            counts.update(p.encode("utf-8") for p in compiled.findall(seg))
    return counts


def _batches(texts: Iterator[str], chars: int = 1 << 20) -> Iterator[list[str]]:
    batch, size = [], 0
    for t in texts:
        batch.append(t)
        size += len(t)
        if size >= chars:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def reference(pool: ProcessPoolExecutor, corpus: Corpus, pattern: str) -> tuple[Counter[bytes], Counter[bytes] | None]:
    """(findall over each whole .txt file or each row, findall over each .txt document or None)."""
    if corpus.kind == "txt":
        whole_jobs = [pool.submit(_count, [file_text(p)], pattern, SPECIALS) for p in corpus.files]
        doc_jobs = [pool.submit(_count, b, pattern, SPECIALS) for b in _batches(documents(corpus))]
    else:
        whole_jobs = [pool.submit(_count, b, pattern, SPECIALS) for b in _batches(documents(corpus))]
        doc_jobs = []
    whole: Counter[bytes] = Counter()
    for job in whole_jobs:
        whole.update(job.result())
    per_doc: Counter[bytes] | None = None
    if doc_jobs:
        per_doc = Counter()
        for job in doc_jobs:
            per_doc.update(job.result())
    return whole, per_doc


# ------------------------------------------------------------ the real ingest


def toktok_exe() -> list[str]:
    return [toktok_bin()]


def run_ingest(tmp: Path, corpus: Corpus, pattern_name: str, threads: int) -> tuple[Counter[bytes], dict]:
    folder = tmp / "runs" / f"{corpus.name}-{pattern_name}"
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "config.yaml"
    config.write_text(yaml.safe_dump({
        "output": str(folder / "tok.tiktoken"),
        "threads": threads,
        "heldout_share": 0,
        "pattern": pattern_name,
        "special_tokens": list(SPECIALS),
        "phases": [{"name": corpus.name, "merges": 0, "sources": [{"file": str(f)} for f in corpus.files]}],
    }, sort_keys=False), encoding="utf-8")
    proc = subprocess.run([*toktok_exe(), "ingest", "-c", str(config), "--force"], capture_output=True,
                          text=True, cwd=REPO)
    if proc.returncode != 0:
        raise RuntimeError(f"toktok ingest failed ({proc.returncode}) for {corpus.name}/{pattern_name}:\n"
                           f"{proc.stdout}\n{proc.stderr}")
    phase_dirs = sorted((folder / "tok.work" / "ingest").iterdir())
    assert len(phase_dirs) == 1, phase_dirs
    manifest = json.loads((phase_dirs[0] / "manifest.json").read_text())
    chunks = sorted(phase_dirs[0].glob("chunk-*.arrow"))
    counts: Counter[bytes] = Counter()
    if chunks:
        df = pl.concat([pl.read_ipc(c) for c in chunks]).group_by("piece").agg(pl.col("count").sum())
        counts = Counter(dict(zip(df["piece"].to_list(), df["count"].to_list())))
    return counts, manifest


def difference(a: Counter[bytes], b: Counter[bytes]) -> int:
    return sum(abs(a.get(k, 0) - b.get(k, 0)) for k in a.keys() | b.keys())


def worst(a: Counter[bytes], b: Counter[bytes], limit: int = 6) -> str:
    diff = {k: a.get(k, 0) - b.get(k, 0) for k in a.keys() | b.keys() if a.get(k, 0) != b.get(k, 0)}
    items = sorted(diff.items(), key=lambda kv: (-abs(kv[1]), kv[0]))[:limit]
    return ", ".join(f"{k!r}: {v:+d}" for k, v in items)


# ------------------------------------------------------------ main


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="run.py --section pieces", description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=20, help="MB of each big corpus (default 20)")
    ap.add_argument("--patterns", default=",".join(PATTERNS), help="comma-separated pattern names")
    ap.add_argument("--threads", type=int, default=-1, help="ingest's threads: (default -1, all cores)")
    ap.add_argument("--strict-documents", action="store_true",
                    help="also fail when the documents of a .txt disagree with the whole file for gpt2/o200k")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (printed)")
    args = ap.parse_args(argv)
    names = [p.strip() for p in args.patterns.split(",") if p.strip()]
    bad = [p for p in names if p not in PATTERNS]
    if bad:
        ap.error(f"unknown pattern(s) {bad}; choose from {','.join(PATTERNS)}")

    sys.path.insert(0, str(REPO))
    from toktoktok.patterns import NAMED_PATTERNS

    tmp = Path(tempfile.mkdtemp(prefix="check_pieces-"))
    rows, notes = [], []
    failed = False
    try:
        corpora = prepare(tmp, args.mb)
        if not corpora:
            print(f"nothing to check: {SHARED} has no corpora", file=sys.stderr)
            return 2
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
            for corpus in corpora:
                for name in names:
                    pattern = NAMED_PATTERNS[name]
                    started = time.perf_counter()
                    got, manifest = run_ingest(tmp, corpus, name, args.threads)
                    ingest_s = time.perf_counter() - started
                    want, per_doc = reference(pool, corpus, pattern.python)
                    diff = difference(got, want)
                    docs_diff = difference(per_doc, want) if per_doc is not None else None
                    docs_must_agree = pattern.cut_at_safe_places or args.strict_documents
                    row = {
                        "corpus": corpus.name, "pattern": name, "MB": corpus.size / MB,
                        "documents": manifest["counts"]["documents"], "pieces": sum(want.values()),
                        "distinct": len(want), "diff": diff, "docs": docs_diff,
                        "docs_expected": bool(docs_diff) and not docs_must_agree,
                        "forced": manifest["counts"]["forced_cuts"], "ingest_s": ingest_s,
                    }
                    rows.append(row)
                    print(_line(row), file=sys.stderr, flush=True)
                    if diff:
                        failed = True
                        notes.append(f"{corpus.name}/{name}: ingest - reference: {worst(got, want)}")
                    if docs_diff:
                        failed = failed or docs_must_agree
                        notes.append(f"{corpus.name}/{name}: documents - whole file"
                                     f"{'' if docs_must_agree else ' (expected for this pattern)'}: "
                                     f"{worst(per_doc, want)}")
    finally:
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    print(_table(rows))
    for note in notes:
        print(note)
    print("\nRESULT: " + ("DIFFERENCES FOUND" if failed else "ingest counts equal regex.findall's everywhere"))
    return 1 if failed else 0


HEAD = ("corpus", "pattern", "MB", "documents", "pieces compared", "distinct pieces", "diff",
        "docs diff", "forced cuts", "ingest s")


def _cells(r: dict) -> list[str]:
    docs = "n/a" if r["docs"] is None else f"{r['docs']:,}" + (" (expected)" if r["docs_expected"] else "")
    return [r["corpus"], r["pattern"], f"{r['MB']:.1f}", f"{r['documents']:,}", f"{r['pieces']:,}",
            f"{r['distinct']:,}", f"{r['diff']:,}", docs, str(r["forced"]), f"{r['ingest_s']:.1f}"]


def _line(r: dict) -> str:
    return "  ".join(f"{h}={c}" for h, c in zip(HEAD, _cells(r)))


def _table(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(HEAD) + " |", "|" + "|".join("---" for _ in HEAD) + "|"]
    lines += ["| " + " | ".join(_cells(r)) + " |" for r in rows]
    return "\n".join(lines)
