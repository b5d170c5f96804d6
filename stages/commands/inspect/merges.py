"""``toktok inspect`` of a merges file (``rank``, ``left``, ``right``, ``bytes``,
``count``) or a train phase folder: its phase (from the folder name ``NN-slug``
and the manifest beside it), its rank range, the first and the last merges
with their counts and the two tokens each one joins."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from toktoktok.errors import UsageError
from toktoktok.vocab import Vocab

from ...workdir import StageFolder, artifacts
from ..texts import table
from .shown import phase_of, show


def _known_tokens(folder: Path) -> dict[int, bytes]:
    """Token bytes by rank for what came before a phase: the base (bytes and, if the
    manifest says so, the hardcoded merges) and the earlier phases' merges files."""
    known: dict[int, bytes] = {}
    manifest = StageFolder(folder).recorded or {}
    base = (manifest.get("settings") or {}).get("base") or {}
    if "warm_start" not in base:
        vocab = Vocab.initial(hardcoded=bool(base.get("hardcoded_merges", True)))
        known.update((r, vocab.token(r)) for r in range(len(vocab)))
    for earlier in sorted(folder.parent.glob("*/merges.arrow")):
        if earlier.parent.name < folder.name:
            t = artifacts.read_ipc(earlier)
            known.update(zip(t["rank"].to_pylist(), t["bytes"].to_pylist()))
    return known


def _parts(token: bytes, left: int, right: int, known: dict[int, bytes]) -> tuple[str, str]:
    """The shown bytes of the two ranks a merge joins (``#N`` when unknown)."""
    lb, rb = known.get(left), known.get(right)
    if lb is None and rb is not None and token.endswith(rb):
        lb = token[: len(token) - len(rb)]
    if rb is None and lb is not None and token.startswith(lb):
        rb = token[len(lb) :]
    return (show(lb) if lb is not None else f"#{left}"), (show(rb) if rb is not None else f"#{right}")


def inspect_merges(path: Path, *, top: int, needle: bytes | None, token_id: int | None) -> str:
    file = path / "merges.arrow" if path.is_dir() else path
    folder = file.parent
    df = pl.read_ipc(file).select("rank", "left", "right", "bytes", "count")
    known = _known_tokens(folder)
    known.update(zip(df["rank"].to_list(), df["bytes"].to_list()))
    phase = phase_of(folder)
    if df.height:
        first, last = int(df["rank"].min()), int(df["rank"].max())
        lines = [f"{file.name} of phase {phase}: {df.height} merges, ranks {first}..{last}"]
    else:
        lines = [f"{file.name} of phase {phase}: no merges"]

    def render(rows: pl.DataFrame) -> str:
        tokens = rows["bytes"].to_list()
        lefts, rights = rows["left"].to_list(), rows["right"].to_list()
        pairs = [_parts(t, lft, rgt, known) for t, lft, rgt in zip(tokens, lefts, rights)]
        return table(pl.DataFrame({
            "rank": rows["rank"],
            "token": [show(t) for t in tokens],
            "left": [p[0] for p in pairs],
            "right": [p[1] for p in pairs],
            "count": rows["count"],
        }))

    if token_id is not None:
        row = df.filter(pl.col("rank") == token_id)
        if row.height == 0:
            raise UsageError(f"--id {token_id}: no merge of rank {token_id} in {file} "
                              f"(its ranks are {lines[0].rsplit('ranks ', 1)[-1]})")
        lines.append(render(row))
        return "\n".join(lines)
    if needle is not None:
        found = df.filter(pl.col("bytes").bin.contains(needle))
        lines.append(f"merges whose token contains {show(needle)}: {found.height}")
        lines.append(render(found.head(top)))
        return "\n".join(lines)
    lines.append(f"first {min(top, df.height)} merges:")
    lines.append(render(df.head(top)))
    if df.height > top:
        lines.append(f"last {min(top, df.height - top)} merges:")
        lines.append(render(df.tail(min(top, df.height - top))))
    return "\n".join(lines)
