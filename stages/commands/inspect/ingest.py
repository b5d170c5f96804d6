"""``toktok inspect`` of an ingest phase's files: its chunk files (``piece``,
``count``; a phase folder's chunks summed), with the most frequent pieces,
their counts and share; its held-out text (``text``), with the first
documents."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ...workdir import artifacts
from ..texts import table
from .shown import phase_of, show


def _chunk_files(path: Path) -> list[Path]:
    return sorted(path.glob("chunk-*.arrow")) if path.is_dir() else [path]


def inspect_chunks(path: Path, *, top: int, needle: bytes | None) -> str:
    files = _chunk_files(path)
    frames = [pl.read_ipc(f).select("piece", "count") for f in files]
    df = pl.concat(frames) if len(frames) > 1 else frames[0]
    if len(frames) > 1:
        df = df.group_by("piece").agg(pl.col("count").sum())
    folder = path if path.is_dir() else path.parent
    total = int(df["count"].sum() or 0)
    distinct = df.height
    piece_bytes = int((df["piece"].bin.size() * df["count"]).sum() or 0) if distinct else 0
    what = f"{len(files)} chunk file{'s' if len(files) != 1 else ''}" if path.is_dir() else path.name
    lines = [f"{what} of ingest phase {phase_of(folder)}: {distinct} distinct pieces, {total} pieces in all, "
             f"{piece_bytes} bytes of text in pieces"]
    df = df.sort(["count", "piece"], descending=[True, False])
    if needle is not None:
        df = df.filter(pl.col("piece").bin.contains(needle))
        lines.append(f"pieces containing {show(needle)}: {df.height}")
    else:
        lines.append(f"top {min(top, distinct)} pieces:")
    shown = df.head(top)
    counts = shown["count"].to_list()
    lines.append(table(pl.DataFrame({
        "#": list(range(1, shown.height + 1)),
        "piece": [show(p) for p in shown["piece"].to_list()],
        "bytes": [len(p) for p in shown["piece"].to_list()],
        "count": pl.Series(counts, dtype=pl.UInt64),
        "share %": [round(100 * c / total, 3) if total else 0.0 for c in counts],
    })))
    return "\n".join(lines)


def inspect_heldout(path: Path, *, top: int) -> str:
    texts = artifacts.read_ipc(path)["text"].to_pylist()
    size = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    lines = [f"{path.name} of ingest phase {phase_of(path.parent)}: {len(texts)} held-out documents, {size} bytes"]
    if texts:
        lines.append(f"first {min(top, len(texts))} documents:")
        lines.append(table(pl.DataFrame({
            "#": list(range(1, min(top, len(texts)) + 1)),
            "bytes": [len(t.encode("utf-8", "surrogatepass")) for t in texts[:top]],
            "text": [show(t[:80]) + ("..." if len(t) > 80 else "") for t in texts[:top]],
        })))
    return "\n".join(lines)
