"""Stage 2, train: a phase's piece counts -> its merges, on top of every earlier phase.

Reads: ``WORK/ingest/NN-slug/chunk-*.arrow`` (this phase's pieces) and
``WORK/train/MM-slug/merges.arrow`` of every earlier phase (the vocabulary
this phase starts from).
Writes, in ``WORK/train/NN-slug/``:

- ``merges.arrow``: ``rank, left, right: uint32`` (ranks of the merged token
  and of its two parts), ``bytes: binary``, ``count: uint64`` (the pair's
  count when it was merged), in the order learned. A merge whose bytes were
  already a token repeats that token's rank (SPEC §5) and adds no rank;
- ``manifest.json``: inputs' digests, counts, rate, timings (last).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stages import artifacts
from stages.ingest import stage_dir as ingest_dir
from stages.ingest import sum_chunks
from stages.progress import Progress
from toktoktok import memory
from toktoktok.config import Config, Phase
from toktoktok.counts import to_arrays
from toktoktok.merge import PhaseResult, load_kernels, train_phase
from toktoktok.vocab import Vocab
from toktoktok.warm_start import load_base

MERGES_SCHEMA = pa.schema(
    [("rank", pa.uint32()), ("left", pa.uint32()), ("right", pa.uint32()), ("bytes", pa.binary()), ("count", pa.uint64())]
)


class MissingInput(Exception):
    """A stage's input artifacts are absent; the message says what to run first."""


def stage_dir(cfg: Config, phase: Phase) -> Path:
    return cfg.work_dir / "train" / phase.slug


def base_vocab(cfg: Config) -> Vocab:
    """The vocabulary before the first phase: the warm start's, or the bytes and
    (if on) the hardcoded merges."""
    if cfg.warm_start is not None:
        return load_base(cfg.warm_start.file, special_tokens=cfg.warm_start.special_tokens).vocab
    return Vocab.initial(hardcoded=cfg.hardcoded_merges)


def base_description(cfg: Config) -> dict[str, Any]:
    """What the starting vocabulary depends on, for the stages' keys."""
    if cfg.warm_start is None:
        return {"hardcoded_merges": cfg.hardcoded_merges}
    return {"warm_start": artifacts.file_digest(cfg.warm_start.file),
            "warm_start_special_tokens": cfg.warm_start.special_tokens}


def vocab_after(cfg: Config, last: int) -> Vocab:
    """The vocabulary after phases 1..last, rebuilt from their merges files."""
    vocab = base_vocab(cfg)
    for phase in cfg.phases[:last]:
        table = artifacts.read_ipc(stage_dir(cfg, phase) / "merges.arrow")
        ranks = table["rank"].to_numpy()
        tokens = table["bytes"].to_pylist()
        vocab = vocab.extended(t for r, t in zip(ranks, tokens) if r >= len(vocab))
    return vocab


def inventory(table: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A (piece, count) table as flat arrays: bytes, int64 offsets, int64 counts."""
    buf, off, counts = to_arrays(table)
    # a pair's count is at most the sum over pieces of count x (bytes - 1): it must fit in int64
    sites = np.maximum(np.diff(off) - 1, 1)
    most = float(np.dot(counts.astype(np.float64), sites))  # exact enough far below 2**63
    if most >= 2**62:
        most = sum(int(c) * int(n) for c, n in zip(counts.tolist(), sites.tolist()))
    if most >= 2**63:
        raise OverflowError(f"pair counts could reach {most:.3g}, more than 64-bit counts hold (2**63): "
                            "lower the sources' weights")
    return buf, off, counts.astype(np.int64)


def _input_manifest(cfg: Config, phase: Phase) -> dict[str, Any]:
    manifest = artifacts.read_manifest(ingest_dir(cfg, phase))
    if manifest is None:
        raise MissingInput(f"phase '{phase.name}' has not been ingested: run `toktok ingest -c {cfg.path}` first")
    return manifest


def train_settings(cfg: Config, phase: Phase) -> dict[str, Any]:
    """The settings this phase's training depends on (recorded in its manifest)."""
    return {
        "stage": "train",
        "phase": phase.slug,
        "base": base_description(cfg),
        "merges": phase.merges,
        "min_frequency": cfg.min_frequency,
        "max_token_bytes": cfg.max_token_bytes,
    }


def train_key(cfg: Config, phase: Phase) -> str:
    """What this phase's merges depend on: its pieces, the earlier phases, settings."""
    before = []
    for earlier in cfg.phases[: phase.index - 1]:
        manifest = artifacts.read_manifest(stage_dir(cfg, earlier))
        if manifest is None:
            raise MissingInput(f"phase '{earlier.name}' has not been trained: run `toktok train -c {cfg.path}` first")
        before.append(artifacts.outputs_key(manifest))
    pieces = artifacts.outputs_key(_input_manifest(cfg, phase))
    return artifacts.key_of({**train_settings(cfg, phase), "pieces": pieces, "before": before})


def require_current(cfg: Config, phase: Phase) -> dict[str, Any]:
    """The phase's train manifest, if it matches its inputs now; else MissingInput."""
    key = train_key(cfg, phase)
    if not artifacts.is_current(stage_dir(cfg, phase), key):
        raise MissingInput(f"phase '{phase.name}' is not trained on its current inputs (an earlier phase or its "
                           f"settings changed): run `toktok train -c {cfg.path}` first")
    return artifacts.read_manifest(stage_dir(cfg, phase))


def merges_table(result: PhaseResult) -> pa.Table:
    return pa.table(
        {
            "rank": result.rank.astype(np.uint32),
            "left": result.left.astype(np.uint32),
            "right": result.right.astype(np.uint32),
            "bytes": pa.array(result.merged_bytes(), type=pa.binary()),
            "count": result.count.astype(np.uint64),
        },
        schema=MERGES_SCHEMA,
    )


def run_train(cfg: Config, phase: Phase, *, force: bool = False, progress: Progress) -> dict[str, Any]:
    """Train one phase unless its merges are current; returns its manifest."""
    folder = stage_dir(cfg, phase)
    key = train_key(cfg, phase)
    if not force and artifacts.is_current(folder, key):
        return {**artifacts.read_manifest(folder), "skipped": True}
    started = time.perf_counter()
    artifacts.begin(folder)
    ingest_manifest = _input_manifest(cfg, phase)
    chunks = [o["name"] for o in ingest_manifest["outputs"] if o["name"].startswith("chunk-")]
    table = sum_chunks([ingest_dir(cfg, phase) / name for name in chunks])
    # pieces in byte order: pieces that share a pair sit close together, so the
    # merge loop's visits hit the cache (11% faster on 100 MB of English, for 0.05 s)
    table = table.take(pc.sort_indices(table, [("piece", "ascending")]))
    buf, off, counts = inventory(table)
    vocab = vocab_after(cfg, phase.index - 1)
    warnings = []
    need = memory.train_estimate_mb(distinct_pieces=len(counts), piece_bytes=len(buf))
    if need > max(cfg.working_set_mb, memory.TRAIN_SLACK_MB):
        warnings.append(f"phase '{phase.name}' has {len(counts)} distinct pieces: training them needs about "
                        f"{need:.0f} MB, more than working_set_mb ({cfg.working_set_mb}); text with this many "
                        "distinct pieces per byte needs a larger budget")
        progress.note(f"warning: {warnings[-1]}")
    read = time.perf_counter()
    load_kernels()  # numba's compiled code, from its cache: timed apart from the merge loop
    loaded = time.perf_counter()
    progress.start(f"train {phase.name}", total=phase.merges, unit="merges")
    result = train_phase(vocab, buf, off, counts, merges=phase.merges, min_frequency=cfg.min_frequency,
                         max_token_bytes=cfg.max_token_bytes, on_progress=progress.set)
    trained = time.perf_counter()
    progress.done(f"{result.made} new tokens")
    if result.made < phase.merges:
        warnings.append(f"phase '{phase.name}' ran out of pairs seen at least {cfg.min_frequency} times: "
                        f"{result.made} of {phase.merges} merges made")
    for warning in warnings[1 if need > max(cfg.working_set_mb, memory.TRAIN_SLACK_MB) else 0:]:
        progress.note(f"warning: {warning}")
    output = artifacts.write_ipc(folder / "merges.arrow", merges_table(result))
    return artifacts.finish(folder, {
        "stage": "train",
        "phase": phase.name,
        "key": key,
        "settings": train_settings(cfg, phase),
        "inputs": {"pieces": ingest_manifest["outputs"], "vocab_size_before": len(vocab)},
        "outputs": [output],
        "counts": {
            "distinct_pieces": len(counts),
            "pieces": int(counts.sum()),
            "merges_requested": phase.merges,
            "merges_made": result.made,
            "merges_into_existing_tokens": len(result.rank) - result.made,
            "vocab_size_after": len(result.vocab),
            "differing_pieces": result.differing_pieces,
            "differing_weight": result.differing_weight,
            "merge_loop_pieces_visited": result.visited_pieces,
            "merge_loop_symbols_scanned": result.scanned_symbols,
        },
        "warnings": warnings,
        "seconds": {"load": round(read - started, 3), "kernels": round(loaded - read, 3),
                    "train": round(trained - loaded, 3),
                    "total": round(time.perf_counter() - started, 3)},
        "merges_per_second": round(result.made / max(trained - loaded, 1e-9), 1),
    })
